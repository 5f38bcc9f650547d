"""What the simulator backends share: the agent's pose, walking the shortest path within a
budget of primitive steps, geodesic distance, and the checks of actions and map resolutions.

:class:`SimulatorBase` holds it for :class:`~embodia.sim.simulator.EmbeddedSimulator` and
:class:`~embodia.sim.habitat.simulator.HabitatSimulator`; each backend supplies its shortest
path, how the agent stands where a walk ends, and its top-down map.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.errors import EmbodiaError
from embodia.sim.motion import walk_budget
from embodia.sim.protocol import ACTIONS, GotoResult, Pose, ShortestPath, SimConfig, TopDownMap

T = TypeVar("T")

NO_SCENE = "the simulator has no scene: call reset(scene) first"


def loaded(value: T | None) -> T:
    """``value`` (a part of the loaded scene), or the error that no scene is loaded yet."""
    if value is None:
        raise EmbodiaError(NO_SCENE)
    return value


def check_action(action: str) -> None:
    """Reject anything but the primitive actions."""
    if action not in ACTIONS:
        raise EmbodiaError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")


class SimulatorBase(ABC):
    """The parts of :class:`~embodia.sim.protocol.Simulator` every backend implements alike."""

    config: SimConfig
    _pose: Pose | None

    @property
    def pose(self) -> Pose:
        return loaded(self._pose)

    @abstractmethod
    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> ShortestPath:
        """The backend's shortest navigable path between two points."""

    @abstractmethod
    def _stand(self, position: NDArray[np.float64], yaw: float) -> None:
        """Put the agent where a walk along a path ended, settled onto what it stands on."""

    @abstractmethod
    def _topdown_map(self, resolution: float) -> TopDownMap:
        """The top-down map at a resolution already checked to be positive."""

    @abstractmethod
    def _floor_maps(self, resolution: float) -> list[TopDownMap]:
        """Every floor's map at a resolution already checked to be positive."""

    def goto(self, point: ArrayLike, max_steps: int | None = None) -> GotoResult:
        """Walk the shortest path to ``point`` (snapped), spending at most ``max_steps``; steps are
        counted with :func:`embodia.sim.motion.walk_budget`, as in every backend."""
        pose = self.pose
        path = self.shortest_path(pose.position, point)
        if not path.found:
            return GotoResult(pose, steps=0, reached=False, distance=0.0)
        position, yaw, steps, distance, reached = walk_budget(
            path.points, pose.yaw, self.config.forward_step, self.config.turn_angle_deg, max_steps
        )
        self._stand(np.asarray(position, dtype=np.float64), yaw)
        return GotoResult(self.pose, steps=steps, reached=reached, distance=distance)

    def geodesic_distance(self, start: ArrayLike, end: ArrayLike) -> float:
        return self.shortest_path(start, end).geodesic_distance

    def topdown(self, resolution: float = 0.05) -> TopDownMap:
        """The navigable area of the agent's floor at ``resolution`` (m per cell)."""
        return self._topdown_map(_checked_resolution(resolution))

    def floor_maps(self, resolution: float = 0.05) -> list[TopDownMap]:
        """One navigable map per floor of the agent's island, lowest first."""
        return self._floor_maps(_checked_resolution(resolution))


def _checked_resolution(resolution: float) -> float:
    if not (math.isfinite(resolution) and resolution > 0):
        raise EmbodiaError(f"top-down resolution must be positive, got {resolution}")
    return resolution
