"""Image-space waypoints: candidate pixels on the panorama and their back-projection.

A VLM sees the panorama with numbered markers (:func:`draw_candidates`) and answers with a
number or a pixel; this module turns either into an executable plan:

- :func:`propose_candidates` samples pixels on a coarse lattice of the lower half of the
  panorama, keeps those within ``[min_distance, max_distance]`` that land on the top of
  navigable BEV cells (floor, or stairs and ramps the map holds as walkable steps; and on
  the simulator's navigable ground when one is given), scores each by the
  unknown area it would reveal and its distance, keeps the best one per azimuth sector
  (at least half a sector apart, so markers never overlap) and numbers the best
  ``max_candidates`` left to right. The gain is the unknown BEV area within
  ``sensing_radius`` that is in view from the candidate (rays through the BEV stop at
  occupied cells; cells off the grid are unknown), so unseen space behind known walls does
  not make a dead end look as promising as an open corner.
- :func:`back_project` maps a pixel (row, col) to the 3D point it sees, a navigable floor
  target near it and the shortest path there with its primitive-step cost, or to a typed
  :class:`WaypointRejection` (never an exception) when the pixel makes no sensible goal.
- :func:`pixel_to_world` / :func:`world_to_pixel` are the exact pair of maps between
  panorama pixels and world points (:mod:`embodia.sim.geometry` conventions).

Rejection reasons, in the order they are checked:

``out_of_image``  row or column outside the panorama (or not a whole pixel);
``no_range``      the pixel has no depth (range 0: it sees nothing);
``not_floor``     the hit is above ``obstacle_top`` (ceiling, upper wall) or below the floor
                  where the simulator has no navigable ground (a drop, a hole);
``off_map``       no navigable point near the goal: the simulator cannot snap it, or the
                  floor under an obstacle hit is farther than ``max_snap_distance`` from the
                  navigable area (inside furniture, behind a wall);
``unreachable``   the pixel sees floor but that floor is farther than ``max_snap_distance``
                  from the agent's navigable island (a closed room seen through a window, a
                  separate island), or the simulator finds no path to the target;
``no_candidate``  a candidate number that is not on the image.

Pixels that see navigable ground off the agent's level (a stair tread, a ramp, a terrace
below, by the simulator's navigable check) are goals as floor pixels are. Pixels that see an
obstacle or a wall below ``obstacle_top`` are dropped to the floor under the hit and pulled
back towards the agent by the agent radius, so the target stands in front of the obstacle
rather than inside it.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray
from PIL import Image, ImageDraw, ImageFont

from embodia.core.limits import check_positive, check_whole
from embodia.perception.bev import OCCUPIED, UNKNOWN, BEVMap
from embodia.sim.geometry import (
    camera_to_world,
    direction_to_equirect_pixel,
    equirect_pixel_to_direction,
    world_to_camera,
)
from embodia.sim.motion import primitive_step_count
from embodia.sim.protocol import Panorama, Pose, ShortestPath, SimConfig, Simulator

logger = logging.getLogger(__name__)

RejectionReason = Literal["out_of_image", "no_range", "not_floor", "off_map", "unreachable", "no_candidate"]

# Lattice rows/cols sampled across the shorter panorama extent (W / 2 spans 180 degrees as
# H does): about 64, so a 512x1024 panorama is sampled every 8th pixel.
_LATTICE_SAMPLES = 64

# Rays of the visible-gain integral: every 5.6 degrees.
_GAIN_RAYS = 64

_MARKER_FILL = (255, 255, 255)
_MARKER_DARK = (20, 20, 20)
_CHOSEN_FILL = (255, 210, 0)


@dataclass(frozen=True)
class WaypointConfig:
    """How candidates are sampled and scored and how pixels become goals.

    Score: ``gain_m2 - distance_weight * distance`` with ``distance`` the *straight-line*
    horizontal distance from the agent. Candidates are floor points the sensor sees, so the
    floor between them and the agent is mostly visible and free; a geodesic distance would
    cost one path search per sample and is left to the plan that :func:`back_project`
    returns for the chosen one.
    """

    sensor_height: float = 1.5
    """Panorama sensor height above the agent's floor point, metres."""
    min_distance: float = 0.5
    """Nearest candidate, horizontal metres from the agent."""
    max_distance: float = 4.0
    """Farthest candidate, horizontal metres from the agent."""
    sensing_radius: float = 2.0
    """Radius around a candidate whose unknown, unoccluded BEV cells count as its gain, metres."""
    sectors: int = 12
    """Azimuth sectors (equal column ranges of the panorama); at most one candidate each."""
    max_candidates: int = 8
    distance_weight: float = 0.5
    """Square metres of gain one metre of distance is worth."""
    floor_band: float = 0.1
    """A hit within this height of the agent's floor is floor, metres."""
    obstacle_top: float = 1.8
    """A hit higher than this above the floor (ceiling, upper wall) is no goal, metres."""
    max_snap_distance: float = 1.0
    """Farthest a goal may be moved to reach navigable floor before it is rejected, metres."""
    lattice_step: int | None = None
    """Pixel spacing of the candidate lattice; None picks it from the image size."""

    def __post_init__(self) -> None:
        check_positive(
            self,
            "sensor_height",
            "max_distance",
            "sensing_radius",
            "floor_band",
            "obstacle_top",
            "max_snap_distance",
        )
        if not (math.isfinite(self.min_distance) and 0 <= self.min_distance < self.max_distance):
            raise ValueError(
                f"WaypointConfig.min_distance must be in [0, max_distance={self.max_distance}), "
                f"got {self.min_distance}"
            )
        if not (math.isfinite(self.distance_weight) and self.distance_weight >= 0):
            raise ValueError(f"WaypointConfig.distance_weight must be >= 0, got {self.distance_weight}")
        check_whole(self, "sectors", "max_candidates", error=ValueError)
        if self.lattice_step is not None:
            check_whole(self, "lattice_step", error=ValueError)
        if self.floor_band >= self.obstacle_top:
            raise ValueError("WaypointConfig.floor_band must be below obstacle_top")


@dataclass(frozen=True)
class WaypointCandidate:
    """A numbered candidate pixel on navigable floor."""

    index: int
    """0..n-1, the number drawn on the image (left to right)."""
    row: int
    col: int
    point: NDArray[np.float64]
    """World floor point the pixel back-projects to."""
    distance: float
    """Horizontal metres from the agent."""
    gain_m2: float
    """Unknown BEV area within ``sensing_radius`` of ``point`` and in view from it (not
    behind occupied cells), before moving, m2."""
    score: float


@dataclass(frozen=True)
class WaypointRejection:
    """Why a pixel or a candidate number makes no goal."""

    reason: RejectionReason
    message: str
    """One human line naming the problem."""


@dataclass(frozen=True)
class Waypoint:
    """A pixel turned into a goal and the plan to reach it."""

    row: int
    col: int
    hit: NDArray[np.float64]
    """3D world point the pixel sees."""
    target: NDArray[np.float64]
    """Snapped navigable floor point the agent will walk to."""
    path: ShortestPath
    """From the agent's current position to ``target``."""
    steps: int
    """Primitive-step cost of following ``path`` (as :meth:`Simulator.goto` counts it)."""


# ---------------------------------------------------------------------- pixels <-> world


def _check_depth(panorama: Panorama) -> NDArray[np.float32]:
    depth = np.asarray(panorama["depth"])
    if depth.ndim != 2 or depth.size == 0:
        raise ValueError(f"panorama depth must be a non-empty (H, W) array, got shape {depth.shape}")
    return depth


def _hits(
    depth: NDArray[np.floating],
    pose: Pose,
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    sensor_height: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Radial ranges and world hit points of in-image pixels (hits are junk where range <= 0)."""
    height, width = depth.shape
    ranges = depth[rows, cols].astype(np.float64)
    directions = equirect_pixel_to_direction(rows, cols, height, width)
    hits = camera_to_world(directions * ranges[..., None], pose.sensor_position(sensor_height), pose.yaw)
    return ranges, np.asarray(hits, dtype=np.float64)


def _locate(
    panorama: Panorama, row: int, col: int, sensor_height: float
) -> tuple[int, int, NDArray[np.float64]] | WaypointRejection:
    """The pixel as ints and the world point it sees, or why there is none."""
    depth = _check_depth(panorama)
    height, width = depth.shape
    integral = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (row, col))
    if not integral:
        return WaypointRejection("out_of_image", f"pixel ({row}, {col}) is not a pair of whole pixel indices")
    r, c = int(row), int(col)
    if not (0 <= r < height and 0 <= c < width):
        return WaypointRejection("out_of_image", f"pixel ({r}, {c}) is outside the {height}x{width} panorama")
    ranges, hits = _hits(depth, panorama["pose"], np.array(r), np.array(c), sensor_height)
    rng = float(ranges)
    if not (math.isfinite(rng) and rng > 0.0):
        return WaypointRejection("no_range", f"pixel ({r}, {c}) has no range: its ray hits nothing")
    return r, c, hits


def pixel_to_world(panorama: Panorama, row: int, col: int, sensor_height: float = 1.5) -> NDArray[np.float64]:
    """World point (3,) that panorama pixel (row, col) sees.

    Raises:
        ValueError: for a pixel outside the image or without range (:func:`back_project`
            returns these as rejections instead).
    """
    located = _locate(panorama, row, col, sensor_height)
    if isinstance(located, WaypointRejection):
        raise ValueError(located.message)
    return located[2]


def world_to_pixel(
    point: ArrayLike, pose: Pose, height: int, width: int, sensor_height: float = 1.5
) -> tuple[float, float]:
    """Fractional (row, col) at which a ``height`` x ``width`` panorama taken at ``pose``
    sees a world point (columns wrap into [-0.5, W - 0.5))."""
    p = np.asarray(point, dtype=np.float64)
    if p.shape != (3,) or not np.all(np.isfinite(p)):
        raise ValueError(f"world_to_pixel needs one finite 3D point, got {p.tolist()}")
    if height < 1 or width < 1:
        raise ValueError(f"panorama size must be positive, got {height}x{width}")
    camera = world_to_camera(p, pose.sensor_position(sensor_height), pose.yaw)
    if float(np.linalg.norm(camera)) < 1e-12:
        raise ValueError(f"point {p.tolist()} is at the sensor: it has no direction")
    row, col = direction_to_equirect_pixel(camera, height, width)
    return float(row), float(col)


# ---------------------------------------------------------------------- back-projection


def _check_sensor_height(config: WaypointConfig, sim_config: SimConfig) -> None:
    if not math.isclose(config.sensor_height, sim_config.sensor_height, abs_tol=1e-9):
        raise ValueError(
            f"WaypointConfig.sensor_height {config.sensor_height} differs from the simulator's "
            f"sensor_height {sim_config.sensor_height}: back-projection would misplace every pixel"
        )


def _horizontal(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    return float(math.hypot(a[0] - b[0], a[2] - b[2]))


def back_project(
    panorama: Panorama,
    row: int,
    col: int,
    simulator: Simulator,
    config: WaypointConfig = WaypointConfig(),
) -> Waypoint | WaypointRejection:
    """Turn a panorama pixel into a navigable target and the plan to walk there.

    The path starts at the simulator's current pose (normally where the panorama was
    taken). See the module docstring for when and why a pixel is rejected.
    """
    _check_sensor_height(config, simulator.config)
    located = _locate(panorama, row, col, config.sensor_height)
    if isinstance(located, WaypointRejection):
        return located
    r, c, hit = located
    pose = panorama["pose"]
    agent = pose.array
    floor_y = float(agent[1])
    above = float(hit[1]) - floor_y
    if above > config.obstacle_top:
        return WaypointRejection(
            "not_floor",
            f"pixel ({r}, {c}) looks at the ceiling or a high wall ({above:.2f} m above the floor, "
            f"over the {config.obstacle_top:.2f} m obstacle height)",
        )
    # Off the agent's level but walkable (a stair tread, a ramp, a terrace below): a goal as
    # floor is, by the simulator's navigable check (habitat's pathfinder.is_navigable).
    ground = abs(above) <= config.floor_band or (
        above >= -config.obstacle_top and simulator.is_navigable(hit)
    )
    if above < -config.floor_band and not ground:
        return WaypointRejection(
            "not_floor",
            f"pixel ({r}, {c}) looks below the floor ({-above:.2f} m down: a drop or a hole)",
        )
    sees_floor = ground
    if sees_floor:
        goal = hit
    else:
        # An obstacle or wall: stand on the floor under the hit, one agent radius closer.
        goal = np.array([hit[0], floor_y, hit[2]])
        reach = _horizontal(goal, agent)
        pull = min(simulator.config.agent_radius, reach)
        if reach > 0:
            goal[[0, 2]] -= (goal[[0, 2]] - agent[[0, 2]]) * (pull / reach)
    return _plan(simulator, goal, config, r, c, hit, above, sees_floor)


def plan_to_point(
    simulator: Simulator, point: ArrayLike, config: WaypointConfig = WaypointConfig()
) -> Waypoint | WaypointRejection:
    """An executable plan to a world floor point (e.g. back to a node of an explored tree).

    The returned :class:`Waypoint` has ``row = col = -1``: it does not come from a pixel.
    """
    goal = np.asarray(point, dtype=np.float64)
    if goal.shape != (3,) or not np.all(np.isfinite(goal)):
        return WaypointRejection("off_map", f"a goal must be one finite 3D point, got {goal.tolist()}")
    return _plan(simulator, goal, config, -1, -1, goal, 0.0, True)


def _plan(
    simulator: Simulator,
    goal: NDArray[np.float64],
    config: WaypointConfig,
    r: int,
    c: int,
    hit: NDArray[np.float64],
    above: float,
    sees_floor: bool,
) -> Waypoint | WaypointRejection:
    """Snap ``goal`` onto the navigable floor, find the path and its cost in primitive steps."""
    source = f"pixel ({r}, {c})" if r >= 0 else "the goal"
    where = f"({goal[0]:.2f}, {goal[2]:.2f})"
    target = np.asarray(simulator.snap_point(goal), dtype=np.float64)
    if target.shape != (3,) or not np.all(np.isfinite(target)):
        return WaypointRejection("off_map", f"{source}: no navigable floor near x, z = {where}")
    offset = _horizontal(target, goal)
    if offset > config.max_snap_distance:
        if sees_floor:
            return WaypointRejection(
                "unreachable",
                f"{source} sees floor at x, z = {where} that the agent cannot reach: the "
                f"nearest reachable point is {offset:.2f} m away (limit {config.max_snap_distance:.2f} m)",
            )
        return WaypointRejection(
            "off_map",
            f"{source} looks at an obstacle {above:.2f} m high; the floor under it at x, z = "
            f"{where} is {offset:.2f} m from navigable floor (limit {config.max_snap_distance:.2f} m)",
        )
    current = simulator.pose
    path = simulator.shortest_path(current.position, target)
    if not path.found:
        return WaypointRejection("unreachable", f"{source}: no path from the agent to x, z = {where}")
    steps, _ = primitive_step_count(
        path.points, current.yaw, simulator.config.forward_step, simulator.config.turn_angle_deg
    )
    return Waypoint(row=r, col=c, hit=hit, target=target, path=path, steps=steps)


def choose_candidate(
    candidates: Sequence[WaypointCandidate],
    index: int,
    panorama: Panorama,
    simulator: Simulator,
    config: WaypointConfig = WaypointConfig(),
) -> Waypoint | WaypointRejection:
    """Back-project the candidate numbered ``index`` (as drawn on the image)."""
    valid = isinstance(index, numbers.Integral) and not isinstance(index, bool)
    if not valid or not 0 <= int(index) < len(candidates):
        numbers_shown = f"0..{len(candidates) - 1}" if candidates else "none"
        return WaypointRejection(
            "no_candidate", f"candidate {index!r} is not on the image (numbers shown: {numbers_shown})"
        )
    candidate = candidates[int(index)]
    return back_project(panorama, candidate.row, candidate.col, simulator, config)


# ---------------------------------------------------------------------- candidates


def _visible_unknown_area(bev: BEVMap, points: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """Unknown area (m2) within ``radius`` of each point that a sensor there could see.

    A plain count of unknown cells in the disk cannot tell a corridor's dead end from its
    open corner: the unseen space behind walls counts as much as an unexplored arm. So the
    disk is integrated in polar form along rays that stop at occupied cells (see
    :func:`_visible_unknown_kernel`); cells off the grid are unknown and do not block.
    """
    out = np.zeros(len(points))
    if len(points) == 0:
        return out
    res = bev.config.resolution
    state = np.ascontiguousarray(bev.state)
    rows = points[:, 2] / res - bev.row0
    cols = points[:, 0] / res - bev.col0
    _visible_unknown_kernel(state, rows, cols, radius / res, _GAIN_RAYS, out)
    area: NDArray[np.float64] = out * res**2
    return area


@njit(cache=True)
def _visible_unknown_kernel(
    state: NDArray[np.uint8],
    rows: NDArray[np.float64],
    cols: NDArray[np.float64],
    reach: float,
    n_rays: int,
    out: NDArray[np.float64],
) -> None:
    """Polar integral of unknown cells seen from fractional cells (rows, cols), in cells^2.

    Ray k steps one cell at a time; the sample at radius rho stands for the annulus sector
    of area (2 pi / n_rays) * rho * 1, so the sum over an all-unknown, unblocked disk is its
    area pi * reach^2 (to the sampling error).
    """
    height, width = state.shape
    n_steps = int(math.ceil(reach))
    wedge = 2.0 * math.pi / n_rays
    for i in range(rows.shape[0]):
        total = 0.0
        for k in range(n_rays):
            angle = (k + 0.5) * wedge
            dr = math.sin(angle)
            dc = math.cos(angle)
            for s in range(n_steps):
                rho = s + 0.5
                width_here = min(1.0, reach - s)  # the last annulus may be partial
                r = int(math.floor(rows[i] + rho * dr))
                c = int(math.floor(cols[i] + rho * dc))
                if 0 <= r < height and 0 <= c < width:
                    value = state[r, c]
                    if value == OCCUPIED:
                        break
                    if value != UNKNOWN:
                        continue
                total += rho * width_here
        out[i] = total * wedge


def propose_candidates(
    panorama: Panorama,
    bev: BEVMap,
    config: WaypointConfig = WaypointConfig(),
    simulator: Simulator | None = None,
) -> list[WaypointCandidate]:
    """Numbered candidate waypoints on visible navigable ground (floor, stairs, ramps), best
    per azimuth sector.

    ``bev`` should already hold this panorama (integrate it first): candidates must land on
    its navigable cells, and the gain is the unknown area around them before moving. With a
    ``simulator``, candidates must also be on its navigable floor (habitat's pathfinder
    check). Returns at most ``max_candidates``, numbered left to right in the image.
    """
    depth = _check_depth(panorama)
    if not math.isclose(bev.config.sensor_height, config.sensor_height, abs_tol=1e-9):
        raise ValueError(
            f"WaypointConfig.sensor_height {config.sensor_height} differs from the BEV's "
            f"{bev.config.sensor_height}"
        )
    if simulator is not None:
        _check_sensor_height(config, simulator.config)
    height, width = depth.shape
    pose = panorama["pose"]
    agent = pose.array
    step = config.lattice_step or max(1, min(height, width // 2) // _LATTICE_SAMPLES)
    lattice_rows = np.arange(height // 2 + step // 2, height, step)
    lattice_cols = np.arange(step // 2, width, step)
    rows, cols = (a.reshape(-1) for a in np.meshgrid(lattice_rows, lattice_cols, indexing="ij"))
    ranges, hits = _hits(depth, pose, rows, cols, config.sensor_height)
    distance = np.hypot(hits[:, 0] - agent[0], hits[:, 2] - agent[2])
    keep = (
        np.isfinite(ranges)
        & (ranges > 0)
        & (distance >= config.min_distance)
        & (distance <= config.max_distance)
    )
    radius = simulator.config.agent_radius if simulator is not None else SimConfig().agent_radius
    cell_rows, cell_cols = bev.to_grid(hits)
    inside = bev.inside(cell_rows, cell_cols) & keep
    navigable = np.zeros_like(keep)
    if inside.any():
        r, c = cell_rows[inside], cell_cols[inside]
        # On walkable ground (the floor, a stair tread, a ramp) and on its top, not a riser.
        on_top = np.abs(hits[inside, 1] - bev.surface_height(r, c)) <= config.floor_band
        navigable[inside] = bev.navigable(radius)[r, c] & on_top
    keep &= navigable
    rows, cols, hits, distance = rows[keep], cols[keep], hits[keep], distance[keep]
    gain = _visible_unknown_area(bev, hits, config.sensing_radius)
    score = gain - config.distance_weight * distance
    sector = cols * config.sectors // width

    # Greedy by score: the best sample of each sector, highest-scoring sectors first, which
    # is the best per sector followed by the best max_candidates of those. A sample whose
    # marker would come within half a sector of an accepted one (or overlap it) is passed
    # over, so two neighbouring sectors do not both pick their common border; the simulator
    # check runs only on samples that would be taken.
    separation = max(2 * marker_radius(height) + 2, width / (2 * config.sectors))
    best: list[int] = []
    filled: set[int] = set()
    for i in np.argsort(-score, kind="stable"):
        if len(best) == config.max_candidates:
            break
        s = int(sector[i])
        if s in filled:
            continue
        if best:
            taken = np.array(best)
            col_gap = np.abs(cols[taken] - cols[i]) % width
            col_gap = np.minimum(col_gap, width - col_gap)  # the panorama wraps around
            if np.any(np.hypot(rows[taken] - rows[i], col_gap) < separation):
                continue
        if simulator is not None and not simulator.is_navigable(hits[i]):
            continue
        filled.add(s)
        best.append(int(i))
    best.sort(key=lambda i: (cols[i], rows[i]))
    candidates = [
        WaypointCandidate(
            index=k,
            row=int(rows[i]),
            col=int(cols[i]),
            point=hits[i].copy(),
            distance=float(distance[i]),
            gain_m2=float(gain[i]),
            score=float(score[i]),
        )
        for k, i in enumerate(best)
    ]
    logger.debug(
        "%d waypoint candidates from %d floor samples (lattice step %d)", len(candidates), len(rows), step
    )
    return candidates


# ---------------------------------------------------------------------- drawing


def marker_radius(height: int) -> int:
    """Radius in pixels of a candidate marker on an image ``height`` rows tall."""
    return max(6, height // 32)


def draw_candidates(
    rgb: NDArray[np.uint8], candidates: Sequence[WaypointCandidate], chosen: int | None = None
) -> NDArray[np.uint8]:
    """A copy of ``rgb`` with each candidate drawn as a numbered disc at its pixel.

    White discs with a dark outline and a dark number; the ``chosen`` index is filled yellow
    with a thicker outline. A disc crossing the left or right edge is drawn on both sides,
    since the panorama wraps around.
    """
    image = np.asarray(rgb)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"draw_candidates needs an (H, W, 3) uint8 image, got {image.dtype} {image.shape}")
    if chosen is not None and not any(c.index == chosen for c in candidates):
        raise ValueError(f"chosen candidate {chosen} is not among the candidates drawn")
    height, width = image.shape[:2]
    radius = marker_radius(height)
    canvas = Image.fromarray(np.ascontiguousarray(image))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=max(9, round(1.5 * radius)))
    for candidate in candidates:
        highlighted = candidate.index == chosen
        fill = _CHOSEN_FILL if highlighted else _MARKER_FILL
        outline = max(2, radius // 3) if highlighted else max(1, radius // 6)
        for x in (candidate.col - width, candidate.col, candidate.col + width):
            if x + radius < 0 or x - radius >= width:
                continue
            y = candidate.row
            box = (x - radius, y - radius, x + radius, y + radius)
            draw.ellipse(box, fill=fill, outline=_MARKER_DARK, width=outline)
            draw.text((x, y), str(candidate.index), fill=_MARKER_DARK, font=font, anchor="mm")
    return np.asarray(canvas, dtype=np.uint8).copy()
