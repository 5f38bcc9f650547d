"""The embedded CPU simulator (Open3D ray casting), embodia's default backend."""

from embodia.sim.loading import load_scene
from embodia.sim.protocol import (
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
from embodia.sim.scene import CATEGORIES, Scene
from embodia.sim.simulator import EmbeddedSimulator

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
