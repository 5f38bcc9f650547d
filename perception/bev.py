"""360-BEV: equirectangular RGB-D-semantic panoramas fused into a world-aligned top-down grid.

Cells sit on the world lattice: cell (i, j) covers z in [i*res, (i+1)*res) and x in
[j*res, (j+1)*res), so maps of different runs, and the simulator's ground truth, can be
compared cell by cell. Rows follow +z and columns +x (habitat's ``to_grid(z, x)``).

Integration (one compiled pass over the pixels, see :func:`_integrate_panorama`):

- every hit within ``max_range`` is placed in the world by its radial range and the pose;
- its height above the agent's floor sorts it: floor (``|h| < floor_band``), obstacle
  (``floor_band <= h <= obstacle_top``), a surface below (``-below_depth <= h < -floor_band``:
  stairs down, a lower terrace) or ignored (ceiling, deep holes);
- floor hits are free evidence, obstacle hits occupied evidence; both count towards the
  cell's semantic histogram and its max height;
- heights are kept relative to the map's floor (the first pose's), so poses on stairs add
  to the same heights; each cell keeps which 5 cm height bins hold a hit (``column``), as a
  navmesh's heightfield keeps spans. A cell that is not floor, whose lowest surface has the
  agent's height clear above it and lies within ``max_climb`` of a walkable neighbour's, is a
  walkable *step* (the flood of :attr:`BEVMap.walkable_steps` from the floor cells): stairs
  and ramps join the floor they start from, up and down, while a table top (0.75 m above
  its neighbours) or a wall does not. Walkable cells beside one more than
  ``max_climb`` higher or lower (the side of a flight) are *ledges*: occupied, so that a 2D
  planner never steps from the floor onto the middle of the stairs;
- the floor between two vertically adjacent floor pixels of a column was seen too (nothing
  came between the two rays), so it is carved free along that column's azimuth. This fills
  the gaps that sparse far-away floor samples leave, without looking through obstacles.

Misses (range 0) and hits beyond ``max_range`` add nothing and break the carving chain.
A cell is occupied when it holds at least ``min_obstacle_points`` obstacle hits that are at
least ``occupied_fraction`` of its evidence, so isolated noisy returns do not block floor.

The grid grows as the agent moves (it always covers ``max_range`` around every pose it has
integrated) and integration touches only the pixels and the cells they land on, so its cost
does not depend on the size of the map.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray
from scipy import ndimage

from embodia.core.limits import check_positive
from embodia.sim.protocol import Panorama, Pose, SimConfig

UNKNOWN, FREE, OCCUPIED = 0, 1, 2
COLUMN_BIN = 0.05
"""Height of one bin of a cell's vertical profile (:attr:`BEVMap.column`), metres."""
_COLUMN_WORDS = 2  # 128 bins: 6.4 m from -below_depth


@dataclass(frozen=True)
class BEVConfig:
    """How panoramas become a top-down map."""

    resolution: float = 0.05
    """Cell size, metres."""
    max_range: float = 5.0
    """Hits farther than this (horizontally) are ignored, metres."""
    sensor_height: float = 1.5
    """Panorama sensor height above the agent's floor point, metres."""
    floor_band: float = 0.1
    """Hits within this height of the agent's floor are floor, metres."""
    obstacle_top: float = 1.8
    """Hits above this height (ceilings) are ignored, metres."""
    below_depth: float = 1.8
    """Surfaces down to this far below the agent's floor (stairs down) are kept as possible
    steps; deeper hits are ignored, metres."""
    max_climb: float = 0.2
    """Highest step between neighbouring walkable cells, metres (the simulator's max_climb)."""
    agent_height: float = 1.5
    """Headroom a step needs above its surface, metres (the simulator's agent_height)."""
    max_slope_deg: float = 45.0
    """Steepest rise between two hits of a ray column filled in as one surface (a ramp, a
    flight's treads seen from afar), degrees (the simulator's max_slope)."""
    min_obstacle_points: int = 2
    """Obstacle hits a cell needs before it counts as occupied."""
    occupied_fraction: float = 0.1
    """Share of a cell's hits that must be obstacle hits for it to be occupied."""
    grow_margin: float = 3.0
    """Extra metres allocated beyond what is needed when the grid grows."""

    @classmethod
    def for_agent(cls, agent: SimConfig, **overrides: float) -> BEVConfig:
        """The defaults, with the sensor height and the walking limits of ``agent``'s body."""
        body = {
            "sensor_height": agent.sensor_height,
            "max_climb": agent.max_climb,
            "agent_height": agent.agent_height,
            "max_slope_deg": agent.max_slope_deg,
        }
        return cls(**{**body, **overrides})  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        check_positive(
            self, "resolution", "max_range", "floor_band", "grow_margin", "below_depth", "agent_height"
        )
        if self.max_climb < 0 or not 0.0 < self.max_slope_deg < 90.0:
            raise ValueError("BEVConfig: max_climb >= 0 and max_slope_deg in (0, 90)")
        if not self.floor_band < self.obstacle_top:
            raise ValueError("BEVConfig.floor_band must be below obstacle_top")
        if self.min_obstacle_points < 1 or not 0.0 <= self.occupied_fraction <= 1.0:
            raise ValueError("BEVConfig: min_obstacle_points >= 1 and occupied_fraction in [0, 1]")


@dataclass(frozen=True)
class FrontierSegment:
    """A connected run of frontier cells (free cells next to unknown ones)."""

    id: int
    cells: NDArray[np.int64]
    """(N, 2) (row, col) grid cells of the map it was computed on."""
    centroid: NDArray[np.float64]
    """World (x, y, z) of the mean cell centre (y = the agent's floor)."""
    target: NDArray[np.float64]
    """World point of the segment's cell nearest its centroid (a reachable goal)."""
    size: int


@dataclass(frozen=True)
class _StepLayers:
    steps: NDArray[np.bool_]
    ledges: NDArray[np.bool_]
    surface: NDArray[np.float32]
    """Walkable surface above the map's floor per cell (NaN: none known)."""
    overhead: NDArray[np.bool_]
    """Cells whose every hit lies above ``obstacle_top`` over the map's floor: seen only from
    high on a flight (the next floor's surface), not on this floor."""


@dataclass
class IntegrationStats:
    """What one panorama added to the map."""

    pixels_used: int
    floor_pixels: int
    obstacle_pixels: int
    newly_explored_cells: int


@dataclass
class BEVMap:
    """A growing 360-BEV grid; see the module docstring for what each layer means."""

    categories: list[str]
    config: BEVConfig = field(default_factory=BEVConfig)

    def __post_init__(self) -> None:
        self.row0 = 0
        self.col0 = 0
        self.floor_height = 0.0
        self.free_count = np.zeros((0, 0), dtype=np.float32)
        self.occupied_count = np.zeros((0, 0), dtype=np.float32)
        self.max_height = np.zeros((0, 0), dtype=np.float32)
        self.semantic_count = np.zeros((0, 0, len(self.categories)), dtype=np.uint16)
        self.obstacle_semantic_count = np.zeros((0, 0, len(self.categories)), dtype=np.uint16)
        self.ground_top = np.zeros((0, 0), dtype=np.float32)
        """Highest floor hit per cell, above the map's floor (-inf: none)."""
        self.column = np.zeros((0, 0, _COLUMN_WORDS), dtype=np.uint64)
        """Per cell, which height bins (``COLUMN_BIN`` m from ``-below_depth`` above the map's
        floor) hold a hit: the cell's vertical profile, as a navmesh's span column."""
        self.trajectory: list[Pose] = []
        self._version = 0
        self._steps_cache: tuple[int, tuple[int, int], _StepLayers] | None = None
        self._directions: dict[tuple[int, int], tuple[NDArray[np.float64], ...]] = {}

    # ------------------------------------------------------------------ geometry

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.free_count.shape
        return rows, cols

    @property
    def origin(self) -> tuple[float, float]:
        """World (x, z) of the corner of cell (0, 0)."""
        res = self.config.resolution
        return self.col0 * res, self.row0 * res

    def to_grid(self, points: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(row, col) cells of world points (..., 3) in the current grid; may be outside it.

        Indices shift when the grid grows towards -x / -z: convert again after integrating.
        """
        p = np.asarray(points, dtype=np.float64)
        res = self.config.resolution
        row = np.floor(p[..., 2] / res).astype(np.int64) - self.row0
        col = np.floor(p[..., 0] / res).astype(np.int64) - self.col0
        return row, col

    def from_grid(self, rows: ArrayLike, cols: ArrayLike) -> NDArray[np.float64]:
        """World points (..., 3) at cell centres, on the map's floor or, on a walkable step
        cell (stairs, a ramp), on its surface."""
        res = self.config.resolution
        r = np.asarray(rows, dtype=np.float64)
        c = np.asarray(cols, dtype=np.float64)
        x = (c + self.col0 + 0.5) * res
        z = (r + self.row0 + 0.5) * res
        ri, ci = np.floor(r).astype(np.int64).ravel(), np.floor(c).astype(np.int64).ravel()
        y = np.full(ri.shape, self.floor_height)
        on = self.inside(ri, ci)
        layers = self._step_layers()
        on[on] = layers.steps[ri[on], ci[on]]
        y[on] += layers.surface[ri[on], ci[on]]
        return np.stack([x, y.reshape(x.shape), z], axis=-1)

    def inside(self, rows: NDArray[np.int64], cols: NDArray[np.int64]) -> NDArray[np.bool_]:
        h, w = self.shape
        inside: NDArray[np.bool_] = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
        return inside

    # ------------------------------------------------------------------ layers

    def _obstacle(self) -> NDArray[np.bool_]:
        """Enough obstacle evidence, or obstacle evidence and no floor seen at all."""
        cfg = self.config
        occ = self.occupied_count
        free = self.free_count
        result: NDArray[np.bool_] = (
            (occ >= cfg.min_obstacle_points) & (occ >= cfg.occupied_fraction * (occ + free))
        ) | ((occ > 0) & (free == 0))
        return result

    def _step_layers(self) -> _StepLayers:
        """Walkable steps, ledges and surface heights, computed once per change of the map."""
        key = self.shape
        cache = self._steps_cache
        if cache is not None and cache[0] == self._version and cache[1] == key:
            return cache[2]
        cfg = self.config
        floor = (self.free_count > 0) & ~self._obstacle()
        steps = np.zeros(key, dtype=bool)
        surface = np.full(key, np.nan, dtype=np.float32)
        overhead = np.zeros(key, dtype=bool)
        if self.ground_top.shape == key and self.column.shape[:2] == key:
            lowest = _lowest_bins(self.column)
            overhead = lowest * COLUMN_BIN - cfg.below_depth > cfg.obstacle_top
            seen_floor = floor & np.isfinite(self.ground_top)
            surface = np.where(seen_floor, self.ground_top, np.nan).astype(np.float32)
            rows, cols = np.nonzero(~floor & (lowest >= 0))
            tops = _column_surfaces(
                self.column, rows, cols, lowest[rows, cols], cfg.below_depth, cfg.max_climb, cfg.agent_height
            )
            candidate = np.full(key, np.nan, dtype=np.float32)
            candidate[rows, cols] = tops
            # The bins are COLUMN_BIN apart: a climb may read as one bin more.
            _flood_steps(surface, candidate, cfg.max_climb + COLUMN_BIN, steps)
            surface[steps] = candidate[steps]
        ledges = _ledges(surface, cfg.max_climb + COLUMN_BIN)
        layers = _StepLayers(steps, ledges, surface, overhead)
        self._steps_cache = (self._version, key, layers)
        return layers

    @property
    def walkable_steps(self) -> NDArray[np.bool_]:
        """Step cells (stairs, ramps; see the module docstring) joined to the floor by climbs
        of at most ``max_climb``: walkable, though not at the map's floor height."""
        return self._step_layers().steps

    @property
    def ledges(self) -> NDArray[np.bool_]:
        """Walkable cells beside a walkable neighbour more than ``max_climb`` higher or lower
        (the side of a flight of stairs, the floor along it): a 2D planner must not cross
        there, so they read as occupied."""
        return self._step_layers().ledges

    @property
    def occupied(self) -> NDArray[np.bool_]:
        """Enough obstacle evidence (or obstacle evidence and no floor seen at all) that is no
        walkable step, or a ledge."""
        layers = self._step_layers()
        result: NDArray[np.bool_] = (self._obstacle() & ~layers.steps) | layers.ledges
        return result

    @property
    def explored(self) -> NDArray[np.bool_]:
        """Floor seen, or obstacles or steps seen at this floor's storey (what is seen of the
        next floor from high on a flight does not count here)."""
        layers = self._step_layers()
        seen = (self.occupied_count > 0) | layers.steps
        result: NDArray[np.bool_] = (self.free_count > 0) | (seen & ~layers.overhead)
        return result

    @property
    def free(self) -> NDArray[np.bool_]:
        """Floor seen and no obstacle on it, or a walkable step; not a ledge."""
        layers = self._step_layers()
        floor = (self.free_count > 0) & ~self._obstacle()
        result: NDArray[np.bool_] = (floor | layers.steps) & ~layers.ledges
        return result

    def surface_height(self, rows: NDArray[np.int64], cols: NDArray[np.int64]) -> NDArray[np.float64]:
        """World height of the walkable surface of cells inside the grid: a step's top, else
        the highest floor hit (the map's floor where the cell holds none)."""
        layers = self._step_layers()
        ground = self.ground_top[rows, cols].astype(np.float64)
        height = np.where(np.isfinite(ground), ground, 0.0)
        steps = layers.steps[rows, cols]
        height[steps] = layers.surface[rows, cols][steps]
        out: NDArray[np.float64] = height + self.floor_height
        return out

    @property
    def state(self) -> NDArray[np.uint8]:
        """UNKNOWN / FREE / OCCUPIED per cell (noisy obstacle hits alone read as explored free)."""
        out = np.zeros(self.shape, dtype=np.uint8)
        out[self.explored] = FREE
        out[self.occupied] = OCCUPIED
        return out

    @property
    def explored_area_m2(self) -> float:
        return float(self.explored.sum()) * self.config.resolution**2

    def navigable(self, agent_radius: float = 0.1) -> NDArray[np.bool_]:
        """Free cells whose centre is at least ``agent_radius`` from the centre of every
        occupied or unknown cell (an obstacle's surface lies somewhere inside its cell)."""
        free = self.free
        if not free.any():
            return free
        clearance = ndimage.distance_transform_edt(free) * self.config.resolution
        result: NDArray[np.bool_] = clearance >= agent_radius - 1e-9
        return result

    def traversable(self, clearance: float = 0.1) -> NDArray[np.bool_]:
        """Free cells at least ``clearance`` from the centre of every occupied cell: where a
        planner may put the agent's centre. Unlike :meth:`navigable`, unknown space does not
        repel, so frontier cells (free, beside unknown) are traversable."""
        room = ndimage.distance_transform_edt(~self.occupied) * self.config.resolution
        result: NDArray[np.bool_] = self.free & (room >= clearance)
        return result

    def semantic_map(self) -> tuple[NDArray[np.int32], NDArray[np.float32]]:
        """Majority category id per cell (0 where nothing was seen) and its vote share.

        Occupied cells vote with their obstacle-band hits only, so the floor seen between
        a table's legs does not outvote the table top above it.
        """
        counts = np.where(self.occupied[..., None], self.obstacle_semantic_count, self.semantic_count)
        total = counts.sum(axis=-1, dtype=np.int64)
        label = counts.argmax(axis=-1).astype(np.int32)
        confidence = np.zeros(self.shape, dtype=np.float32)
        seen = total > 0
        confidence[seen] = counts.max(axis=-1)[seen] / total[seen]
        label[~seen] = 0
        return label, confidence

    # ------------------------------------------------------------------ integration

    def _camera_angles(self, height: int, width: int) -> tuple[NDArray[np.float64], ...]:
        key = (height, width)
        if key not in self._directions:
            lat = math.pi / 2.0 - math.pi * (np.arange(height) + 0.5) / height
            lon = 2.0 * math.pi * (np.arange(width) + 0.5) / width - math.pi
            self._directions[key] = (np.sin(lat), np.cos(lat), lon)
        return self._directions[key]

    def ensure_covers(self, x_range: tuple[float, float], z_range: tuple[float, float]) -> None:
        """Grow the grid (with margin) so that it covers the given world box."""
        res = self.config.resolution
        need_r0 = math.floor(z_range[0] / res)
        need_r1 = math.floor(z_range[1] / res) + 1
        need_c0 = math.floor(x_range[0] / res)
        need_c1 = math.floor(x_range[1] / res) + 1
        h, w = self.shape
        rows_ok = need_r0 >= self.row0 and need_r1 <= self.row0 + h
        if h and rows_ok and need_c0 >= self.col0 and need_c1 <= self.col0 + w:
            return
        margin = math.ceil(self.config.grow_margin / res)
        if h:
            r0 = min(self.row0, need_r0 - margin) if need_r0 < self.row0 else self.row0
            r1 = max(self.row0 + h, need_r1 + margin) if need_r1 > self.row0 + h else self.row0 + h
            c0 = min(self.col0, need_c0 - margin) if need_c0 < self.col0 else self.col0
            c1 = max(self.col0 + w, need_c1 + margin) if need_c1 > self.col0 + w else self.col0 + w
        else:
            r0, r1, c0, c1 = need_r0 - margin, need_r1 + margin, need_c0 - margin, need_c1 + margin
        rows, cols = r1 - r0, c1 - c0
        dr, dc = self.row0 - r0, self.col0 - c0

        def grown(old: NDArray[np.generic], fill: float) -> NDArray[np.generic]:
            new = np.full((rows, cols, *old.shape[2:]), fill, dtype=old.dtype)
            if old.size:
                new[dr : dr + old.shape[0], dc : dc + old.shape[1]] = old
            return new

        self.free_count = grown(self.free_count, 0)  # type: ignore[assignment]
        self.occupied_count = grown(self.occupied_count, 0)  # type: ignore[assignment]
        self.max_height = grown(self.max_height, -np.inf)  # type: ignore[assignment]
        self.semantic_count = grown(self.semantic_count, 0)  # type: ignore[assignment]
        self.obstacle_semantic_count = grown(self.obstacle_semantic_count, 0)  # type: ignore[assignment]
        self.ground_top = grown(self.ground_top, -np.inf)  # type: ignore[assignment]
        self.column = grown(self.column, 0)  # type: ignore[assignment]
        self.row0, self.col0 = r0, c0
        self._version += 1

    def integrate(self, panorama: Panorama) -> IntegrationStats:
        """Fuse one panorama (taken at ``panorama["pose"]``) into the map."""
        depth = np.ascontiguousarray(panorama["depth"], dtype=np.float32)
        semantic = np.ascontiguousarray(panorama["semantic"], dtype=np.int32)
        if depth.ndim != 2 or semantic.shape != depth.shape:
            raise ValueError(
                f"panorama depth and semantic must be (H, W) of one shape, got {depth.shape} "
                f"and {semantic.shape}"
            )
        pose = panorama["pose"]
        cfg = self.config
        x, y, z = pose.position
        if not self.trajectory:
            self.floor_height = float(y)
        reach = cfg.max_range + cfg.resolution
        self.ensure_covers((x - reach, x + reach), (z - reach, z + reach))
        sin_lat, cos_lat, lon = self._camera_angles(*depth.shape)
        stats = _integrate_panorama(
            depth,
            semantic,
            sin_lat,
            cos_lat,
            lon - pose.yaw,  # world azimuth of each column (see geometry.equirect_angles)
            x,
            y + cfg.sensor_height,
            z,
            float(y),
            float(y) - self.floor_height,
            cfg.resolution,
            self.row0,
            self.col0,
            cfg.max_range,
            cfg.floor_band,
            cfg.obstacle_top,
            cfg.below_depth,
            math.tan(math.radians(cfg.max_slope_deg)),
            len(self.categories),
            self.free_count,
            self.occupied_count,
            self.max_height,
            self.semantic_count,
            self.obstacle_semantic_count,
            self.ground_top,
            self.column,
        )
        self._version += 1
        self.trajectory.append(pose)
        return IntegrationStats(*(int(v) for v in stats))

    def record_pose(self, pose: Pose) -> None:
        """Add a pose to the drawn trajectory without an observation (e.g. along a goto)."""
        self.trajectory.append(pose)

    # ------------------------------------------------------------------ frontiers

    def frontiers(self, min_size: int = 3) -> list[FrontierSegment]:
        """Frontier segments (8-connected runs of free floor cells 4-adjacent to unknown cells).

        Segments smaller than ``min_size`` cells are dropped; ids are in descending size.
        """
        state = self.state
        if state.size == 0:
            return []
        unknown = np.pad(state == UNKNOWN, 1, constant_values=True)
        near_unknown = unknown[:-2, 1:-1] | unknown[2:, 1:-1] | unknown[1:-1, :-2] | unknown[1:-1, 2:]
        # Floor evidence, not just "explored and not occupied": cells holding only a stray
        # obstacle hit (tops of beds and tables) are not places to walk to.
        frontier = self.free & near_unknown
        labels, n = ndimage.label(frontier, structure=np.ones((3, 3), dtype=bool))
        if n == 0:
            return []
        rows, cols = np.nonzero(labels)
        ids = labels[rows, cols]
        order = np.argsort(ids, kind="stable")
        rows, cols, ids = rows[order], cols[order], ids[order]
        bounds = np.searchsorted(ids, np.arange(1, n + 2))
        segments = []
        for k in range(n):
            lo, hi = bounds[k], bounds[k + 1]
            if hi - lo < min_size:
                continue
            cells = np.stack([rows[lo:hi], cols[lo:hi]], axis=1).astype(np.int64)
            centre = cells.mean(axis=0)
            nearest = cells[int(np.argmin(((cells - centre) ** 2).sum(axis=1)))]
            segments.append((cells, self.from_grid(centre[0], centre[1]), self.from_grid(*nearest)))
        segments.sort(key=lambda s: -len(s[0]))
        return [
            FrontierSegment(id=i, cells=c, centroid=m, target=t, size=len(c))
            for i, (c, m, t) in enumerate(segments)
        ]

    # ------------------------------------------------------------------ crops

    def crop(self, centre: ArrayLike, size: int) -> NDArray[np.uint8]:
        """``state`` in a size x size window centred on a world point (unknown outside)."""
        row, col = self.to_grid(np.asarray(centre, dtype=np.float64))
        r0, c0 = int(row) - size // 2, int(col) - size // 2
        out = np.zeros((size, size), dtype=np.uint8)
        state = self.state
        h, w = self.shape
        sr0, sr1 = max(r0, 0), min(r0 + size, h)
        sc0, sc1 = max(c0, 0), min(c0 + size, w)
        if sr0 < sr1 and sc0 < sc1:
            out[sr0 - r0 : sr1 - r0, sc0 - c0 : sc1 - c0] = state[sr0:sr1, sc0:sc1]
        return out


@njit(cache=True)
def _add_hit(
    row: int,
    col: int,
    height: float,
    category: int,
    n_categories: int,
    max_height: NDArray[np.float32],
    semantic_count: NDArray[np.uint16],
) -> None:
    _raise(max_height, row, col, height)
    _count(row, col, category, n_categories, semantic_count)


@njit(cache=True)
def _count(row: int, col: int, category: int, n_categories: int, semantic_count: NDArray[np.uint16]) -> None:
    if 0 <= category < n_categories and semantic_count[row, col, category] < 65535:
        semantic_count[row, col, category] += 1


@njit(cache=True)
def _raise(top: NDArray[np.float32], row: int, col: int, height: float) -> None:
    if height > top[row, col]:
        top[row, col] = height


_MAX_FILL = 0.6
"""Farthest apart two hits of one ray column are filled in with heights (a rising surface
only so far at all), metres."""


@njit(cache=True)
def _integrate_panorama(
    depth: NDArray[np.float32],
    semantic: NDArray[np.int32],
    sin_lat: NDArray[np.float64],
    cos_lat: NDArray[np.float64],
    azimuth: NDArray[np.float64],
    cam_x: float,
    cam_y: float,
    cam_z: float,
    floor_y: float,
    map_offset: float,
    res: float,
    row0: int,
    col0: int,
    max_range: float,
    floor_band: float,
    obstacle_top: float,
    below_depth: float,
    max_slope: float,
    n_categories: int,
    free_count: NDArray[np.float32],
    occupied_count: NDArray[np.float32],
    max_height: NDArray[np.float32],
    semantic_count: NDArray[np.uint16],
    obstacle_semantic_count: NDArray[np.uint16],
    ground_top: NDArray[np.float32],
    column: NDArray[np.uint64],
) -> tuple[int, int, int, int]:
    """Heights are sorted relative to the agent's floor ``floor_y`` and stored relative to the
    map's floor (``+ map_offset``), so that poses on stairs add to the same heights."""
    height, width = depth.shape
    used = floors = obstacles = newly = 0
    step = 0.5 * res
    for c in range(width):
        ux = math.sin(azimuth[c])
        uz = -math.cos(azimuth[c])
        # Horizontal distance of the previous (lower) floor pixel in this column; -1 = none.
        # The bottom row looks straight down, so the chain starts at the agent's feet.
        chain = 0.0
        # The previous pixel's obstacle hit (distance, height); distance -1 = none.
        surface = -1.0
        surface_h = 0.0
        for r in range(height - 1, -1, -1):
            rng = depth[r, c]
            if not (rng > 0.0):
                chain = surface = -1.0
                continue
            dist = rng * cos_lat[r]
            if dist > max_range:
                chain = surface = -1.0
                continue
            h = cam_y + rng * sin_lat[r] - floor_y
            if h < -below_depth or h > obstacle_top:
                chain = surface = -1.0
                continue
            px = cam_x + dist * ux
            pz = cam_z + dist * uz
            row = int(math.floor(pz / res)) - row0
            col = int(math.floor(px / res)) - col0
            stored = h + map_offset
            if h < -floor_band:
                # A surface below the agent's floor (stairs down): its height only.
                chain = surface = -1.0
                _raise(max_height, row, col, stored)
                _mark(column, row, col, stored, below_depth)
                continue
            used += 1
            if free_count[row, col] == 0.0 and occupied_count[row, col] == 0.0:
                newly += 1
            category = semantic[r, c]
            _add_hit(row, col, stored, category, n_categories, max_height, semantic_count)
            if h < floor_band:
                floors += 1
                free_count[row, col] += 1.0
                _raise(ground_top, row, col, stored)
                _mark(column, row, col, stored, below_depth)
                if chain >= 0.0:
                    d = chain + step
                    while d < dist:
                        cr = int(math.floor((cam_z + d * uz) / res)) - row0
                        cc = int(math.floor((cam_x + d * ux) / res)) - col0
                        if free_count[cr, cc] == 0.0 and occupied_count[cr, cc] == 0.0:
                            newly += 1
                        free_count[cr, cc] += 0.5  # carved: weaker evidence than a hit
                        d += step
                chain = dist
                surface = -1.0
            else:
                obstacles += 1
                occupied_count[row, col] += 1.0
                _add_hit(row, col, stored, category, n_categories, max_height, obstacle_semantic_count)
                _mark(column, row, col, stored, below_depth)
                # Two adjacent rays on one horizontal surface (a table top seen from above):
                # the surface between them was seen too. Far away such rays are several
                # cells apart, and without this the top would read as scattered hits.
                # A step across an occlusion edge (sofa top, then the wall behind it) drops
                # along the ray's slope; two hits on one flat top differ by far less. A
                # surface rising away from the agent no steeper than max_slope (a ramp,
                # the treads of a flight) is filled in the same way, at heights between.
                drop = cam_y - floor_y - h
                run = abs(dist - surface)
                rise = h - surface_h
                flat = 0.01 + 0.2 * drop * run / dist
                rising = dist > surface and 0.0 < rise <= max_slope * run and run <= _MAX_FILL
                if surface >= 0.0 and drop > 0.05 and (abs(rise) < flat or rising):
                    # A long flat fill may bridge an occlusion whose far side happens to be
                    # as high (a stair's edge, a wall behind): occupancy only, no heights,
                    # which would spoil the steps under it.
                    trusted = run <= _MAX_FILL
                    lo = min(surface, dist) + step
                    hi = max(surface, dist)
                    d = lo
                    while d < hi:
                        cr = int(math.floor((cam_z + d * uz) / res)) - row0
                        cc = int(math.floor((cam_x + d * ux) / res)) - col0
                        if free_count[cr, cc] == 0.0 and occupied_count[cr, cc] == 0.0:
                            newly += 1
                        occupied_count[cr, cc] += 1.0
                        between = stored
                        if rising:
                            between = surface_h + map_offset + rise * (d - surface) / run
                        _count(cr, cc, category, n_categories, obstacle_semantic_count)
                        _count(cr, cc, category, n_categories, semantic_count)
                        if trusted:
                            _raise(max_height, cr, cc, between)
                            _mark(column, cr, cc, between, below_depth)
                        d += step
                chain = -1.0
                surface = dist
                surface_h = h
    return used, floors, obstacles, newly


@njit(cache=True)
def _ledges(surface: NDArray[np.float32], climb: float) -> NDArray[np.bool_]:
    """Cells with a surface (NaN = none) whose 4-neighbour's surface differs by more than
    ``climb``."""
    rows, cols = surface.shape
    out = np.zeros((rows, cols), dtype=np.bool_)
    for r in range(rows):
        for c in range(cols):
            h = surface[r, c]
            if np.isnan(h):
                continue
            # each pair once: the neighbour below and the one to the right (NaN compares False)
            if r + 1 < rows and abs(surface[r + 1, c] - h) > climb:
                out[r, c] = out[r + 1, c] = True
            if c + 1 < cols and abs(surface[r, c + 1] - h) > climb:
                out[r, c] = out[r, c + 1] = True
    return out


@njit(cache=True)
def _mark(column: NDArray[np.uint64], row: int, col: int, height: float, below_depth: float) -> None:
    """Set the bin of ``height`` (above the map's floor) in the cell's vertical profile."""
    b = int(math.floor((height + below_depth) / COLUMN_BIN))
    if 0 <= b < 64 * _COLUMN_WORDS:
        column[row, col, b >> 6] |= np.uint64(1) << np.uint64(b & 63)


@njit(cache=True)
def _lowest_bins(column: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Per cell, the lowest bin of its vertical profile holding a hit (-1: none)."""
    rows, cols = column.shape[0], column.shape[1]
    out = np.full((rows, cols), -1, dtype=np.int64)
    for r in range(rows):
        for c in range(cols):
            for w in range(_COLUMN_WORDS):
                word = column[r, c, w]
                if word == 0:
                    continue
                b = 0
                while not (word >> np.uint64(b)) & np.uint64(1):
                    b += 1
                out[r, c] = 64 * w + b
                break
    return out


@njit(cache=True)
def _has_bin(column: NDArray[np.uint64], row: int, col: int, b: int) -> bool:
    return bool((column[row, col, b >> 6] >> np.uint64(b & 63)) & np.uint64(1))


@njit(cache=True)
def _column_surfaces(
    column: NDArray[np.uint64],
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    lowest: NDArray[np.int64],
    below_depth: float,
    climb: float,
    headroom: float,
) -> NDArray[np.float32]:
    """Per cell (with ``lowest``, its lowest bin holding a hit, from :func:`_lowest_bins`),
    the top of its lowest surface (the highest hit within ``climb`` of the lowest one) if
    nothing else stands within ``headroom`` above it, else NaN: a stair tread under a high
    slab is a surface, a wall or a table's legs are not."""
    out = np.full(len(rows), np.nan, dtype=np.float32)
    n = 64 * _COLUMN_WORDS
    reach = int(math.floor(climb / COLUMN_BIN + 1e-6))
    clear = int(math.ceil(headroom / COLUMN_BIN - 1e-6))
    for k in range(len(rows)):
        r, c, low = rows[k], cols[k], lowest[k]
        top = low
        blocked = False
        b = low + 1
        while b < n and b <= top + clear:
            if _has_bin(column, r, c, b):
                if b > low + reach:
                    blocked = True
                    break
                top = b
            b += 1
        if not blocked:
            out[k] = (top + 1) * COLUMN_BIN - below_depth
    return out


@njit(cache=True)
def _flood_steps(
    seed: NDArray[np.float32], candidate: NDArray[np.float32], climb: float, out: NDArray[np.bool_]
) -> None:
    """Mark the ``candidate`` cells (surface height, NaN = none) reachable from the ``seed``
    cells (floor height, NaN = none) through 4-neighbours whose surfaces differ by at most
    ``climb``; a breadth-first search over the candidates."""
    rows, cols = seed.shape
    queue = np.empty(rows * cols, dtype=np.int64)
    height = np.full((rows, cols), np.nan, dtype=np.float32)
    head = tail = 0
    for r in range(rows):
        for c in range(cols):
            if np.isnan(seed[r, c]):
                continue
            height[r, c] = seed[r, c]
            # Only seeds beside a candidate start the search.
            beside = (
                (r > 0 and not np.isnan(candidate[r - 1, c]))
                or (r + 1 < rows and not np.isnan(candidate[r + 1, c]))
                or (c > 0 and not np.isnan(candidate[r, c - 1]))
                or (c + 1 < cols and not np.isnan(candidate[r, c + 1]))
            )
            if beside:
                queue[tail] = r * cols + c
                tail += 1
    while head < tail:
        k = queue[head]
        head += 1
        r, c = k // cols, k % cols
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nr, nc = r + dr, c + dc
            if nr < 0 or nr >= rows or nc < 0 or nc >= cols or out[nr, nc]:
                continue
            h = candidate[nr, nc]
            if np.isnan(h) or abs(h - height[r, c]) > climb:
                continue
            out[nr, nc] = True
            height[nr, nc] = h
            queue[tail] = nr * cols + nc
            tail += 1
