"""Navigable floor grid: floor extraction, agent clearance, islands and shortest paths.

The grid plays the role of habitat-sim's navmesh (same defaults: 5 cm cells, agent radius
0.1 m, height 1.5 m, max climb 0.2 m, max slope 45 deg):

1. The floor level is the lowest horizontal, upward-open surface level with real area
   (open = 1.5 m of headroom above it), so slab undersides and furniture bottoms never count
   and the winding of loaded meshes does not matter.
2. A cell is floor when a ray cast down from ``max_climb`` above that level meets a walkable
   (not too steep) surface within ``max_climb`` of it.
3. A floor cell is clear when no geometry comes within ``agent_radius`` of the vertical axis
   between ``max_climb`` and ``agent_height`` above its floor: exact distance queries on the
   Open3D BVH, first on four bounding spheres per cell, then at 5 cm steps only where a
   sphere test is inconclusive. Floor edges (ledges) are eroded by the radius as well.
4. Navigable = the 4-connected island of clear cells that holds the start.

Paths are Dijkstra on the 8-connected island (no corner cutting) followed by string
pulling with grid line-of-sight, which gives near any-angle shortest paths.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.errors import SceneError
from embodia.sim.protocol import ShortestPath, SimConfig, TopDownMap, cell_centre_xz, world_to_cell
from embodia.sim.raycast import Raycaster

logger = logging.getLogger(__name__)

_LEVEL_BIN = 0.05
_MIN_FLOOR_AREA = 1.0
_SUB_BANDS = 4
_FINE_STEP = 0.05


class FloorLevel(NamedTuple):
    height: float
    area: float
    """Upward-open horizontal area at this height, m2."""


def floor_levels(raycaster: Raycaster, config: SimConfig) -> list[FloorLevel]:
    """Walkable horizontal levels, lowest first."""
    scene = raycaster.scene
    cos_slope = math.cos(math.radians(config.max_slope_deg))
    # Meshes wind outwards (glTF's rule, which habitat's back-face culling relies on too),
    # so a walkable face points up and a ray that first meets a back face started inside a
    # solid.
    horizontal = np.flatnonzero(scene.face_normals[:, 1] >= cos_slope)
    if len(horizontal) == 0:
        return []
    tri = scene.vertices[scene.faces[horizontal]].astype(np.float64)
    centroid = tri.mean(axis=1)
    # Four probes per face (centroid and towards each corner): big floor triangles are open
    # above somewhere even when furniture stands over their centroid.
    probes = np.concatenate([centroid[:, None], 0.7 * tri + 0.3 * centroid[:, None]], axis=1)
    origins = probes + np.array([0.0, 0.01, 0.0])
    t_hit, _, normals = raycaster.cast_from(origins, np.broadcast_to([0.0, 1.0, 0.0], origins.shape))
    open_above = ((t_hit > config.agent_height) & (normals[..., 1] <= 0)).any(axis=1)
    heights = centroid[open_above, 1]
    areas = scene.face_areas[horizontal][open_above]
    if len(heights) == 0:
        return []
    bins = np.floor(heights / _LEVEL_BIN).astype(np.int64)
    levels: list[FloorLevel] = []
    for b in np.unique(bins):
        in_bin = bins == b
        area = float(areas[in_bin].sum())
        if area >= _MIN_FLOOR_AREA:
            height = float(np.average(heights[in_bin], weights=areas[in_bin]))
            levels.append(FloorLevel(height, area))
    if not levels:
        return []
    largest = max(level.area for level in levels)
    return [level for level in levels if level.area >= 0.2 * largest]


def _inner_distance(mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Distance in cells from each True cell to the nearest False one, outside the grid False."""
    from scipy import ndimage

    padded = np.pad(mask, 1, constant_values=False)
    distance: NDArray[np.float64] = ndimage.distance_transform_edt(padded)[1:-1, 1:-1]
    return distance


@dataclass
class NavGrid:
    """Navigable cells of one floor level; rows follow +z, columns +x."""

    config: SimConfig
    resolution: float
    origin: tuple[float, float]
    floor_height: float
    cell_floor: NDArray[np.float32]
    """Floor height per cell (NaN where there is no floor)."""
    clear: NDArray[np.bool_]
    """Floor cells where the agent's cylinder fits."""
    island: NDArray[np.bool_]
    """The navigable island (clear cells connected to the start)."""
    _nearest: NDArray[np.int64] = field(init=False, repr=False)
    _graph: Any = field(init=False, repr=False, default=None)
    _node_of: NDArray[np.int64] = field(init=False, repr=False)
    _cells: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from scipy import ndimage

        if not self.island.any():
            raise SceneError("the navigable island is empty")
        _, nearest = ndimage.distance_transform_edt(~self.island, return_indices=True)
        self._nearest = nearest
        self._cells = np.argwhere(self.island)
        self._node_of = np.full(self.island.shape, -1, dtype=np.int64)
        self._node_of[self.island] = np.arange(len(self._cells))

    # ------------------------------------------------------------------ build

    @classmethod
    def build(
        cls,
        raycaster: Raycaster,
        config: SimConfig,
        resolution: float | None = None,
        start: ArrayLike | None = None,
    ) -> NavGrid:
        """Build the grid for the floor under ``start`` (or the lowest floor, largest island)."""
        from scipy import ndimage

        res = float(resolution or config.nav_resolution)
        levels = floor_levels(raycaster, config)
        scene = raycaster.scene
        if not levels:
            raise SceneError(
                f"scene {scene.name!r} has no floor: no walkable horizontal surface of at least "
                f"{_MIN_FLOOR_AREA} m2 with {config.agent_height} m of headroom"
            )
        start_point = None if start is None else np.asarray(start, dtype=np.float64)
        if start_point is None:
            level = levels[0]
        else:
            level = min(levels, key=lambda candidate: abs(candidate.height - start_point[1]))
        floor_height = level.height

        lo, hi = scene.bounds[0].astype(np.float64), scene.bounds[1].astype(np.float64)
        x0, z0 = math.floor(lo[0] / res) * res, math.floor(lo[2] / res) * res
        cols = max(1, math.ceil((hi[0] - x0) / res))
        rows = max(1, math.ceil((hi[2] - z0) / res))
        zc, xc = np.meshgrid(
            z0 + (np.arange(rows) + 0.5) * res, x0 + (np.arange(cols) + 0.5) * res, indexing="ij"
        )

        # Floor: cast down from max_climb above the level; accept walkable hits within climb.
        top = floor_height + config.max_climb + 0.01
        origins = np.stack([xc, np.full_like(xc, top), zc], axis=-1)
        t_hit, _, normals = raycaster.cast_from(origins, np.broadcast_to([0.0, -1.0, 0.0], origins.shape))
        cos_slope = math.cos(math.radians(config.max_slope_deg))
        # Hits must face up: a cast that starts inside a solid meets a face from behind.
        is_floor = (t_hit <= 2.0 * config.max_climb + 0.01) & (normals[..., 1] >= cos_slope)
        # Inside a solid standing on the floor (a wall, a cabinet) the downward cast can still
        # meet the floor under it; the upward cast then meets the solid's top from behind.
        t_up, _, normals_up = raycaster.cast_from(origins, np.broadcast_to([0.0, 1.0, 0.0], origins.shape))
        is_floor &= ~np.isfinite(t_up) | (normals_up[..., 1] <= 0.0)
        cell_floor = np.where(is_floor, top - t_hit, np.nan).astype(np.float32)

        clear = cls._clearance(raycaster, config, xc, zc, cell_floor, is_floor)
        # Ledges: the cylinder must also stay over floor, radius r from where floor ends.
        edge = _inner_distance(is_floor) - 0.5
        clear &= edge * res >= config.agent_radius - 1e-6

        labels, count = ndimage.label(clear)
        if count == 0:
            raise SceneError(f"scene {scene.name!r}: no floor cell has room for the agent")
        if start_point is not None:
            r = int(np.clip(math.floor((start_point[2] - z0) / res), 0, rows - 1))
            c = int(np.clip(math.floor((start_point[0] - x0) / res), 0, cols - 1))
            if labels[r, c] == 0:
                _, (nr, nc) = ndimage.distance_transform_edt(labels == 0, return_indices=True)
                r, c = int(nr[r, c]), int(nc[r, c])
            island_label = labels[r, c]
        else:
            sizes = np.bincount(labels.reshape(-1))
            sizes[0] = 0
            island_label = int(np.argmax(sizes))
        return cls(
            config=config,
            resolution=res,
            origin=(x0, z0),
            floor_height=float(floor_height),
            cell_floor=cell_floor,
            clear=clear,
            island=labels == island_label,
        )

    @staticmethod
    def _clearance(
        raycaster: Raycaster,
        config: SimConfig,
        xc: NDArray[np.float64],
        zc: NDArray[np.float64],
        cell_floor: NDArray[np.float32],
        is_floor: NDArray[np.bool_],
    ) -> NDArray[np.bool_]:
        radius = config.agent_radius
        band = config.agent_height - config.max_climb
        half = band / (2 * _SUB_BANDS)
        sphere = math.hypot(radius, half)
        cells = np.argwhere(is_floor)
        base = cell_floor[is_floor].astype(np.float64) + config.max_climb
        centres = base[:, None] + half * (2 * np.arange(_SUB_BANDS) + 1)
        px = xc[is_floor][:, None]
        pz = zc[is_floor][:, None]
        points = np.stack(np.broadcast_arrays(px, centres, pz), axis=-1)
        d = raycaster.distance(points)
        blocked: NDArray[np.bool_] = np.asarray((d < radius).any(axis=1))
        # Sub-bands whose bounding sphere touches geometry but whose centre is clear:
        # check the axis at fine steps.
        unsure_cell, unsure_band = np.nonzero((d < sphere) & (d >= radius) & ~blocked[:, None])
        if len(unsure_cell):
            steps = np.arange(-half, half + 1e-9, _FINE_STEP)
            heights = centres[unsure_cell, unsure_band][:, None] + steps[None, :]
            fine = np.stack(np.broadcast_arrays(px[unsure_cell], heights, pz[unsure_cell]), axis=-1)
            fine_blocked = (raycaster.distance(fine) < radius).any(axis=1)
            blocked[unsure_cell[fine_blocked]] = True
        clear = np.zeros(is_floor.shape, dtype=bool)
        clear[cells[~blocked, 0], cells[~blocked, 1]] = True
        return clear

    # ------------------------------------------------------------------ queries

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.island.shape
        return rows, cols

    @property
    def navigable_area(self) -> float:
        return float(self.island.sum()) * self.resolution**2

    def cell_of(self, points: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        return world_to_cell(points, self.origin, self.resolution)

    def cell_centre(self, rows: ArrayLike, cols: ArrayLike) -> NDArray[np.float64]:
        """Cell centres at each cell's own floor height."""
        r = np.asarray(rows, dtype=np.int64)
        c = np.asarray(cols, dtype=np.int64)
        x, z = cell_centre_xz(r, c, self.origin, self.resolution)
        return np.stack([x, self.cell_floor[r, c].astype(np.float64), z], axis=-1)

    def on_island(self, points: ArrayLike) -> NDArray[np.bool_]:
        """Whether each point's (x, z) lies in an island cell (height ignored)."""
        row, col = self.cell_of(points)
        rows, cols = self.shape
        inside = (row >= 0) & (row < rows) & (col >= 0) & (col < cols)
        out = np.zeros(row.shape, dtype=bool)
        out[inside] = self.island[row[inside], col[inside]]
        return out

    def is_navigable(self, point: ArrayLike, max_y_delta: float = 0.5) -> bool:
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)) or not self.on_island(p):
            return False
        row, col = self.cell_of(p)
        return bool(abs(p[1] - float(self.cell_floor[row, col])) <= max_y_delta)

    def snap_point(self, point: ArrayLike) -> NDArray[np.float64]:
        """The point itself (at floor height) if on the island, else the nearest island cell."""
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            return np.full(3, np.nan)
        rows, cols = self.shape
        row, col = self.cell_of(p)
        r, c = int(np.clip(row, 0, rows - 1)), int(np.clip(col, 0, cols - 1))
        if self.island[r, c] and (r, c) == (int(row), int(col)):
            return np.array([p[0], float(self.cell_floor[r, c]), p[2]])
        nr, nc = int(self._nearest[0, r, c]), int(self._nearest[1, r, c])
        result: NDArray[np.float64] = self.cell_centre(nr, nc)
        return result

    def segment_clear(self, start: ArrayLike, end: ArrayLike) -> bool:
        """Whether the straight segment stays inside island cells."""
        return self.free_fraction(start, end) >= 1.0

    def free_fraction(self, start: ArrayLike, end: ArrayLike) -> float:
        """Fraction of the segment from ``start`` travelled before leaving the island."""
        a = np.asarray(start, dtype=np.float64)
        b = np.asarray(end, dtype=np.float64)
        length = float(np.hypot(*(b - a)[[0, 2]]))
        n = max(2, math.ceil(length / (self.resolution / 4)) + 1)
        t = np.linspace(0.0, 1.0, n)
        ok = self.on_island(a[None, :] + t[:, None] * (b - a)[None, :])
        if ok.all():
            return 1.0
        first_bad = int(np.argmin(ok))
        return 0.0 if first_bad == 0 else float(t[first_bad - 1])

    def floor_at(self, point: ArrayLike) -> float:
        row, col = self.cell_of(point)
        return float(self.cell_floor[row, col])

    # ------------------------------------------------------------------ paths

    def _adjacency(self) -> Any:
        if self._graph is None:
            from scipy.sparse import coo_matrix

            rows, cols = self.shape
            res = self.resolution
            isl = self.island
            src, dst, weight = [], [], []
            moves = [
                (0, 1, res),
                (1, 0, res),
                (1, 1, res * math.sqrt(2)),
                (1, -1, res * math.sqrt(2)),
            ]
            for dr, dc, w in moves:
                r0, r1 = max(0, -dr), rows - max(0, dr)
                c0, c1 = max(0, -dc), cols - max(0, dc)
                ok = isl[r0:r1, c0:c1] & isl[r0 + dr : r1 + dr, c0 + dc : c1 + dc]
                if dr and dc:  # no corner cutting: both orthogonal neighbours must be free
                    ok &= isl[r0 + dr : r1 + dr, c0:c1] & isl[r0:r1, c0 + dc : c1 + dc]
                rr, cc = np.nonzero(ok)
                a = self._node_of[rr + r0, cc + c0]
                b = self._node_of[rr + r0 + dr, cc + c0 + dc]
                src += [a, b]
                dst += [b, a]
                weight += [np.full(len(a), w), np.full(len(a), w)]
            n = len(self._cells)
            self._graph = coo_matrix(
                (np.concatenate(weight), (np.concatenate(src), np.concatenate(dst))), shape=(n, n)
            ).tocsr()
        return self._graph

    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> ShortestPath:
        """Shortest navigable path between two points, both snapped onto the island."""
        from scipy.sparse.csgraph import dijkstra

        a, b = self.snap_point(start), self.snap_point(end)
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            return ShortestPath(np.empty((0, 3)), math.inf)
        if self.segment_clear(a, b):
            return ShortestPath(np.stack([a, b]), float(np.linalg.norm(b - a)))
        na = int(self._node_of[self.cell_of(a)])
        nb = int(self._node_of[self.cell_of(b)])
        _, pred = dijkstra(self._adjacency(), indices=na, return_predecessors=True)
        if pred[nb] < 0 and na != nb:
            return ShortestPath(np.empty((0, 3)), math.inf)
        chain = [nb]
        while chain[-1] != na:
            chain.append(int(pred[chain[-1]]))
        cells = self._cells[np.array(chain[::-1])]
        points = [a, *self.cell_centre(cells[1:-1, 0], cells[1:-1, 1]), b]
        pulled = self._string_pull(points)
        length = float(np.sum(np.linalg.norm(np.diff(pulled, axis=0), axis=1)))
        return ShortestPath(pulled, length)

    def _string_pull(self, points: list[NDArray[np.float64]]) -> NDArray[np.float64]:
        out = [points[0]]
        anchor = points[0]
        for j in range(2, len(points)):
            if not self.segment_clear(anchor, points[j]):
                anchor = points[j - 1]
                out.append(anchor)
        out.append(points[-1])
        return np.stack(out)

    def topdown(self) -> TopDownMap:
        return TopDownMap(
            navigable=self.island.copy(),
            origin=self.origin,
            resolution=self.resolution,
            floor_height=self.floor_height,
            extra={"clear": self.clear.copy(), "floor": np.isfinite(self.cell_floor)},
        )

    def most_open_point(self) -> NDArray[np.float64]:
        """The island cell farthest from the island's border (a natural default start)."""
        depth = _inner_distance(self.island)
        r, c = np.unravel_index(int(np.argmax(depth)), depth.shape)
        result: NDArray[np.float64] = self.cell_centre(r, c)
        return result
