"""The simulator protocol every backend implements (semantics: ``docs/simulator.md``).

Habitat conventions throughout: y-up, right-handed, forward -z; an agent is a cylinder
(height 1.5 m, radius 0.1 m) whose :class:`Pose` is the point on the floor under its centre
plus a yaw; sensors sit ``sensor_height`` above that point. Panorama depth is *radial range*
in metres, pinhole depth is *planar* depth; 0 means no hit in both. Semantic images hold
category ids indexing ``Simulator.categories`` (0 is ``void``: unlabelled or no hit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.core.limits import check_positive
from embodia.errors import PoseError

if TYPE_CHECKING:
    from embodia.sim.scene import Scene

Action = Literal["move_forward", "turn_left", "turn_right"]
ACTIONS: tuple[Action, ...] = ("move_forward", "turn_left", "turn_right")


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Agent and sensor settings shared by all backends (habitat-sim defaults)."""

    forward_step: float = 0.25
    """Metres moved by one ``move_forward``."""
    turn_angle_deg: float = 30.0
    """Degrees turned by one ``turn_left`` / ``turn_right``."""
    sensor_height: float = 1.5
    """Height of every sensor above the agent's floor point, metres."""
    agent_height: float = 1.5
    """Height of the agent's collision cylinder, metres."""
    agent_radius: float = 0.1
    """Radius of the agent's collision cylinder, metres."""
    max_climb: float = 0.2
    """Highest step the agent walks over, metres (habitat's ``agent_max_climb``)."""
    max_slope_deg: float = 45.0
    """Steepest floor the agent walks on, degrees."""
    nav_resolution: float = 0.05
    """Cell size of the navigable grid, metres (habitat's navmesh ``cell_size``)."""

    def __post_init__(self) -> None:
        check_positive(
            self, "forward_step", "turn_angle_deg", "agent_height", "agent_radius", "nav_resolution"
        )
        if self.max_climb < 0 or self.max_climb >= self.agent_height:
            raise ValueError("SimConfig.max_climb must be in [0, agent_height)")


@dataclass(frozen=True, slots=True)
class Pose:
    """Agent pose: the floor point under the agent and its yaw (radians, 0 looks -z)."""

    position: tuple[float, float, float]
    yaw: float = 0.0

    @classmethod
    def from_array(cls, position: ArrayLike, yaw: float = 0.0) -> Pose:
        p = np.asarray(position, dtype=np.float64).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)) or not math.isfinite(yaw):
            raise PoseError(f"a pose needs a finite 3D position and yaw, got {p.tolist()}, {yaw}")
        return cls((float(p[0]), float(p[1]), float(p[2])), float(yaw))

    @classmethod
    def parse(cls, text: str) -> Pose:
        """Parse ``"x,y,z,yaw_deg"`` (yaw in degrees, as typed on a command line)."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 4:
            raise PoseError(f"invalid pose {text!r}: expected x,y,z,yaw_deg (4 numbers)")
        try:
            x, y, z, yaw_deg = (float(p) for p in parts)
        except ValueError:
            raise PoseError(f"invalid pose {text!r}: expected x,y,z,yaw_deg (4 numbers)") from None
        if not all(math.isfinite(v) for v in (x, y, z, yaw_deg)):
            raise PoseError(f"invalid pose {text!r}: values must be finite")
        return cls((x, y, z), math.radians(yaw_deg))

    @property
    def array(self) -> NDArray[np.float64]:
        return np.array(self.position, dtype=np.float64)

    def sensor_position(self, sensor_height: float) -> NDArray[np.float64]:
        """World position of a sensor mounted ``sensor_height`` above the floor point."""
        return self.array + np.array([0.0, sensor_height, 0.0])

    def as_dict(self) -> dict[str, float | list[float]]:
        return {"position": list(self.position), "yaw": self.yaw}


@dataclass(frozen=True, slots=True)
class StepResult:
    """Outcome of one primitive action."""

    pose: Pose
    collided: bool
    """True when ``move_forward`` was stopped short by geometry (no sliding)."""


@dataclass(frozen=True, slots=True)
class GotoResult:
    """Outcome of :meth:`Simulator.goto`."""

    pose: Pose
    steps: int
    """Primitive actions the path cost: turns quantised to ``turn_angle_deg``, forward
    moves to ``forward_step``."""
    reached: bool
    """True when the agent stands at the (snapped) goal."""
    distance: float
    """Metres travelled."""


@dataclass(frozen=True, slots=True)
class ShortestPath:
    """A navigable polyline between two points; empty with infinite length if none."""

    points: NDArray[np.float64]
    geodesic_distance: float

    @property
    def found(self) -> bool:
        return math.isfinite(self.geodesic_distance)


def world_to_cell(
    points: ArrayLike, origin: ArrayLike, resolution: float
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(row, col) cells of world points (..., 3) on a grid whose cell (0, 0) starts at
    ``origin`` = (x, z): columns follow +x, rows +z (habitat's top-down layout)."""
    p = np.asarray(points, dtype=np.float64)
    o = np.asarray(origin, dtype=np.float64)
    col = np.floor((p[..., 0] - o[0]) / resolution).astype(np.int64)
    row = np.floor((p[..., 2] - o[1]) / resolution).astype(np.int64)
    return row, col


def cell_centre_xz(
    rows: ArrayLike, cols: ArrayLike, origin: ArrayLike, resolution: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """World (x, z) of cell centres: the inverse of :func:`world_to_cell`."""
    o = np.asarray(origin, dtype=np.float64)
    x = o[0] + (np.asarray(cols, dtype=np.float64) + 0.5) * resolution
    z = o[1] + (np.asarray(rows, dtype=np.float64) + 0.5) * resolution
    return x, z


@dataclass(frozen=True)
class TopDownMap:
    """Ground-truth top-down navigability. Row index follows +z, column index +x."""

    navigable: NDArray[np.bool_]
    """Cells of the agent's navigable island (the explorable area)."""
    origin: tuple[float, float]
    """World (x, z) of the corner of cell (0, 0)."""
    resolution: float
    floor_height: float
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def explorable_area_m2(self) -> float:
        return float(self.navigable.sum()) * self.resolution**2

    def to_grid(self, points: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(row, col) cells of world points (..., 3); may fall outside the map."""
        return world_to_cell(points, self.origin, self.resolution)

    def from_grid(self, rows: ArrayLike, cols: ArrayLike) -> NDArray[np.float64]:
        """World points (..., 3) at the centres of cells, on the floor."""
        x, z = cell_centre_xz(rows, cols, self.origin, self.resolution)
        return np.stack([x, np.full_like(x, self.floor_height), z], axis=-1)


class Panorama(TypedDict):
    """Equirectangular observation (layout in :mod:`embodia.sim.geometry`)."""

    rgb: NDArray[np.uint8]
    """(H, W, 3)."""
    depth: NDArray[np.float32]
    """(H, W) radial range in metres, 0 = no hit."""
    semantic: NDArray[np.int32]
    """(H, W) category ids, 0 = void."""
    pose: Pose


class PinholeFrame(TypedDict):
    """Perspective observation looking along the agent's heading."""

    rgb: NDArray[np.uint8]
    depth: NDArray[np.float32]
    """(H, W) planar depth in metres, 0 = no hit."""
    semantic: NDArray[np.int32]
    pose: Pose
    hfov_deg: float


SceneSpec = str | Path


@runtime_checkable
class Simulator(Protocol):
    """What an embodia simulator backend provides; see ``docs/simulator.md``."""

    config: SimConfig

    @property
    def pose(self) -> Pose: ...

    @property
    def categories(self) -> list[str]:
        """Category names indexed by semantic id; index 0 is ``void``."""
        ...

    def reset(self, scene: SceneSpec | Scene, start_pose: Pose | None = None) -> Pose:
        """Load ``scene`` (or reuse it if unchanged) and place the agent."""
        ...

    def step(self, action: Action) -> StepResult: ...

    def goto(self, point: ArrayLike, max_steps: int | None = None) -> GotoResult: ...

    def panorama(self, height: int = 512, width: int = 1024) -> Panorama: ...

    def panorama_at(self, pose: Pose, height: int = 512, width: int = 1024) -> Panorama:
        """The panorama a sensor at ``pose`` sees, without moving the agent (what the camera
        records while the agent walks a path between two decisions)."""
        ...

    def pinhole(self, height: int = 256, width: int = 256, hfov_deg: float = 90.0) -> PinholeFrame: ...

    def is_navigable(self, point: ArrayLike) -> bool: ...

    def snap_point(self, point: ArrayLike) -> NDArray[np.float64]:
        """Nearest navigable point on the agent's island; NaNs if there is none."""
        ...

    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> ShortestPath: ...

    def geodesic_distance(self, start: ArrayLike, end: ArrayLike) -> float: ...

    def topdown(self, resolution: float = 0.05) -> TopDownMap: ...

    def floor_maps(self, resolution: float = 0.05) -> list[TopDownMap]:
        """One map per floor of the agent's island, lowest first (one for a single floor, a
        terrain or a split level); the :meth:`topdown` of the agent's floor is one of them."""
        ...

    def close(self) -> None: ...
