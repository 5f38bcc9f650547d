"""The embedded CPU simulator (Open3D ray casting), embodia's default backend."""

from embodia.envs.sim.protocol import (
    ACTIONS,
    GotoResult,
    Panorama,
    PinholeFrame,
    Pose,
    ShortestPath,
    SimConfig,
    Simulator,
    StepResult,
    TopDownMap,
)
from embodia.envs.sim.scene import CATEGORIES, Scene, load_scene
from embodia.envs.sim.simulator import EmbeddedSimulator

__all__ = [
    "ACTIONS",
    "CATEGORIES",
    "EmbeddedSimulator",
    "GotoResult",
    "Panorama",
    "PinholeFrame",
    "Pose",
    "Scene",
    "ShortestPath",
    "SimConfig",
    "Simulator",
    "StepResult",
    "TopDownMap",
    "load_scene",
]
