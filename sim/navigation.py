"""Navigable grid: a layered heightfield of walkable spans, agent clearance, islands and paths.

The grid plays the role of habitat-sim's navmesh (Recast; same defaults: 5 cm cells, agent
radius 0.1 m, height 1.5 m, max climb 0.2 m, max slope 45 deg), built on the Open3D ray caster:

1. **Spans.** Over each cell a vertical ray lists every surface it crosses. A span is a
   walkable surface (slope <= ``max_slope``) with nothing within ``max_climb`` above it (else
   the agent stands on that, higher, surface) and not inside a solid (the first surface above
   that point is seen from below). A column holds as many spans as it has floors, so terrain,
   ramps, steps, stairs and stacked floors are one heightfield. Meshes wind outwards (glTF's
   rule, which habitat's back-face culling relies on too), which tells a surface seen from
   below from one seen from above.
2. **Links.** Spans of neighbouring cells (8 directions) are linked when their heights differ
   by at most ``max_climb``.
3. **Clearance.** A span is clear when no geometry comes within ``agent_radius`` of the
   vertical axis between ``max_climb`` and ``agent_height`` above it: exact distance queries
   on the Open3D BVH, first on four bounding spheres per span, then at 5 cm steps only where a
   sphere test is inconclusive. Ledges (a neighbour with no linked span: a drop, a hole, the
   edge of a stair) erode the spans within the radius, measured along the links.
4. **Islands.** Clear spans linked in the 4 axis directions form islands; navigable = the
   island that holds the start (without one: the largest island on the lowest floor).
5. **Floors.** Floor levels (large horizontal surfaces open above) that some column holds
   stacked are different floors; levels that never stack (a terrain's slopes, a split level)
   are one. Every navigable span belongs to the highest floor at or below it.

Paths are Dijkstra over linked spans of the island (8 directions, no corner cutting) followed
by string pulling with line-of-sight over the spans, which gives near any-angle shortest paths
that climb stairs and ramps. A query point picks, in its cell, the span nearest its height.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import cached_property
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
_SAME_HIT = 1e-4
"""Hits along one vertical ray closer than this (m) are one surface (coincident faces)."""
_ABOVE = 0.01
"""A span's probe point sits ``max_climb`` plus this above it (habitat's climb test)."""
DIRECTIONS: tuple[tuple[int, int], ...] = (
    (0, 1),
    (1, 0),
    (0, -1),
    (-1, 0),
    (1, 1),
    (1, -1),
    (-1, 1),
    (-1, -1),
)
"""Neighbour offsets (row, col): the 4 axis directions first, then the diagonals."""
_GROUND_TOLERANCE = 0.02
"""How far (m) a path's polyline may stray from the ground's height profile."""
_TREAD = 0.4
"""Length (m) over which a path's heights are averaged to measure it (a stair's tread)."""
HALF_DIRECTIONS: tuple[tuple[int, int], ...] = ((0, 1), (1, 0), (1, 1), (1, -1))
"""One of each pair of opposite directions: a graph's edges go both ways."""


class FloorLevel(NamedTuple):
    height: float
    area: float
    """Upward-open horizontal area at this height, m2."""


def floor_levels(raycaster: Raycaster, config: SimConfig) -> list[FloorLevel]:
    """Walkable horizontal levels, lowest first."""
    scene = raycaster.scene
    cos_slope = math.cos(math.radians(config.max_slope_deg))
    # a walkable face points up, and a ray that first meets a back face started inside a solid
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


def column_spans(
    raycaster: Raycaster, config: SimConfig, xc: NDArray[np.float64], zc: NDArray[np.float64]
) -> NDArray[np.float32]:
    """The spans over each cell centre ``(xc, zc)`` (rows, cols): their heights as an array
    (layers, rows, cols), lowest first, NaN where a column has fewer spans."""
    scene = raycaster.scene
    rows, cols = xc.shape
    top = float(scene.bounds[1][1]) + 1.0
    origins = np.stack([xc, np.full_like(xc, top), zc], axis=-1).reshape(-1, 3)
    ray, y, prim = raycaster.all_hits(origins, np.array([0.0, -1.0, 0.0]))
    if len(ray) == 0:
        return np.full((0, rows, cols), np.nan, dtype=np.float32)
    # heights from each hit face's plane in float64 (exact on a flat floor), not from the
    # float32 distance along the ray; faces seen edge-on keep the latter
    tri = scene.vertices[scene.faces[prim]].astype(np.float64)
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    ray_x, ray_z = origins[ray, 0], origins[ray, 2]
    tilted = np.abs(normal[:, 1]) > 1e-9
    plane_y = np.einsum("ij,ij->i", normal, tri[:, 0]) - normal[:, 0] * ray_x - normal[:, 2] * ray_z
    y = np.where(tilted, plane_y / np.where(tilted, normal[:, 1], 1.0), top - y)
    normal_y = scene.face_normals[prim, 1].astype(np.float64)
    order = np.lexsort((-y, ray))  # per ray, from the top down
    ray, y, normal_y = ray[order], y[order], normal_y[order]
    # coincident faces (a wall standing on a slab, the diagonal of a quad) are one surface
    new_ray = np.r_[True, ray[1:] != ray[:-1]]
    starts = np.flatnonzero(new_ray | np.r_[True, (y[:-1] - y[1:]) > _SAME_HIT])
    g_ray = ray[starts]
    g_y = y[starts]
    cos_slope = math.cos(math.radians(config.max_slope_deg))
    g_normal_y = np.maximum.reduceat(normal_y, starts)
    g_walk = g_normal_y >= cos_slope
    g_up = g_normal_y > 0.0  # seen from below: inside a solid
    has_above = np.r_[False, g_ray[1:] == g_ray[:-1]]
    above_y = np.r_[np.inf, g_y[:-1]]
    above_up = np.r_[False, g_up[:-1]]
    probe = g_y + config.max_climb + _ABOVE
    shadowed = has_above & (above_y <= probe)  # the agent would stand on that surface instead
    inside = has_above & ~shadowed & above_up
    keep = g_walk & ~shadowed & ~inside
    span_ray, span_y = g_ray[keep], g_y[keep]
    # lowest first within each column: the groups run from the top down
    order = np.lexsort((span_y, span_ray))
    span_ray, span_y = span_ray[order], span_y[order]
    first = np.r_[True, span_ray[1:] != span_ray[:-1]]
    start_of = np.maximum.accumulate(np.where(first, np.arange(len(span_ray)), 0))
    layer = np.arange(len(span_ray)) - start_of
    heights = np.full((int(layer.max()) + 1 if len(layer) else 0, rows * cols), np.nan, dtype=np.float32)
    heights[layer, span_ray] = span_y
    return heights.reshape(-1, rows, cols)


def _shifted(array: NDArray[Any], dr: int, dc: int, fill: Any) -> NDArray[Any]:
    """``array`` (..., rows, cols) moved so that entry [r, c] holds the one at [r + dr, c + dc]."""
    out = np.full_like(array, fill)
    rows, cols = array.shape[-2:]
    r0, r1 = max(0, -dr), rows - max(0, dr)
    c0, c1 = max(0, -dc), cols - max(0, dc)
    out[..., r0:r1, c0:c1] = array[..., r0 + dr : r1 + dr, c0 + dc : c1 + dc]
    return out


def linked_layer(heights: NDArray[np.float32], dr: int, dc: int, climb: float) -> NDArray[np.int64]:
    """For each span (layers, rows, cols), the layer of the span it links to in the cell at
    (+dr, +dc): the nearest in height within ``climb``; -1 where there is none."""
    neighbour = _shifted(heights, dr, dc, np.nan)  # (layers, rows, cols)
    gap = np.abs(heights[:, None] - neighbour[None, :])  # (mine, theirs, rows, cols)
    gap = np.where(np.isfinite(gap), gap, np.inf)
    best = np.argmin(gap, axis=1) if len(heights) else np.zeros(heights.shape, dtype=np.int64)
    best_gap = np.take_along_axis(gap, best[:, None], axis=1)[:, 0] if len(heights) else gap[:, 0]
    linked: NDArray[np.int64] = np.where(best_gap <= climb + 1e-6, best, -1)
    return linked


def _inner_distance(mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Distance in cells from each True cell to the nearest False one, outside the grid False."""
    from scipy import ndimage

    padded = np.pad(mask, 1, constant_values=False)
    distance: NDArray[np.float64] = ndimage.distance_transform_edt(padded)[1:-1, 1:-1]
    return distance


def _grid_graph(
    heights: NDArray[np.float32],
    climb: float,
    directions: tuple[tuple[int, int], ...],
    weight: Any = None,
    corner_cutting: bool = True,
) -> tuple[Any, NDArray[np.int64]]:
    """The spans of ``heights`` (NaN: none) as graph nodes, with an edge (both ways) for each
    link in ``directions``; ``weight(dr, dc, rise)`` gives edge weights (default 1). Without
    ``corner_cutting`` a diagonal link counts only where the step could also go round by
    either axis neighbour. Returns the sparse graph and the node index of each span (-1: none)."""
    from scipy.sparse import coo_matrix

    present = np.isfinite(heights)
    node_of = np.full(heights.shape, -1, dtype=np.int64)
    node_of[present] = np.arange(int(present.sum()))
    src, dst, weights = [], [], []
    for dr, dc in directions:
        linked = linked_layer(heights, dr, dc, climb)
        ok = present & (linked >= 0)
        if dr and dc and not corner_cutting:
            ok &= _round_corner(heights, climb, linked, ok, dr, dc)
        k, r, c = np.nonzero(ok)
        theirs = linked[k, r, c]
        a, b = node_of[k, r, c], node_of[theirs, r + dr, c + dc]
        rise = heights[theirs, r + dr, c + dc].astype(np.float64) - heights[k, r, c]
        w = np.ones(len(a)) if weight is None else weight(dr, dc, rise)
        src += [a, b]
        dst += [b, a]
        weights += [w, w]
    n = int(present.sum())
    if not src:
        return coo_matrix((n, n)).tocsr(), node_of
    graph = coo_matrix((np.concatenate(weights), (np.concatenate(src), np.concatenate(dst))), shape=(n, n))
    return graph.tocsr(), node_of


def _round_corner(
    heights: NDArray[np.float32],
    climb: float,
    linked: NDArray[np.int64],
    ok: NDArray[np.bool_],
    dr: int,
    dc: int,
) -> NDArray[np.bool_]:
    """Which diagonal links (``linked`` towards (dr, dc), where ``ok``) reach the same span by
    way of each axis neighbour too: the agent does not cut corners."""
    good = ok.copy()
    for first, second in (((dr, 0), (0, dc)), ((0, dc), (dr, 0))):
        via = linked_layer(heights, *first, climb)
        onward = linked_layer(heights, *second, climb)
        k, r, c = np.nonzero(good)
        mid = via[k, r, c]
        reach = np.full(len(k), -1)
        has_mid = mid >= 0
        reach[has_mid] = onward[mid[has_mid], r[has_mid] + first[0], c[has_mid] + first[1]]
        good[k, r, c] = reach == linked[k, r, c]
    return good


def _ledge_distance(heights: NDArray[np.float32], climb: float, limit: float) -> NDArray[np.float64]:
    """Distance in cells from each span to the nearest place where the surface ends (a
    neighbour with no linked span: a drop, a hole, the grid's edge), measured along the links
    (8 directions, a diagonal step sqrt 2); inf beyond ``limit``. On one flat floor this is the
    Euclidean distance transform of the floor mask, to the precision erosion needs."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import dijkstra

    diagonal = math.sqrt(2.0)
    graph, node_of = _grid_graph(
        heights, climb, HALF_DIRECTIONS, lambda dr, dc, gap: np.full(len(gap), diagonal if dr and dc else 1.0)
    )
    n = graph.shape[0]
    present = node_of >= 0
    to_edge = np.full(heights.shape, np.inf)
    for dr, dc in DIRECTIONS:
        missing = present & (linked_layer(heights, dr, dc, climb) < 0)
        to_edge[missing] = np.minimum(to_edge[missing], diagonal if dr and dc else 1.0)
    border = np.flatnonzero(np.isfinite(to_edge[present]))
    edges = graph.tocoo()
    rows = np.r_[edges.row, np.full(len(border), n)]
    cols = np.r_[edges.col, border]
    weights = np.r_[edges.data, to_edge[present][border]]
    full = coo_matrix((weights, (rows, cols)), shape=(n + 1, n + 1)).tocsr()
    distance = dijkstra(full, directed=True, indices=n, limit=limit)[:n]
    out = np.full(heights.shape, np.inf)
    out[present] = distance
    return out


def _nearest_span(
    heights: NDArray[np.float32], point: NDArray[np.float64], x0: float, z0: float, res: float
) -> tuple[int, int, int]:
    """The span (layer, row, col) of ``heights`` (NaN: none) nearest ``point``: in its cell, or
    else in the nearest cell that has one, the span nearest the point's height."""
    from scipy import ndimage

    layers, rows, cols = heights.shape
    r = int(np.clip(math.floor((point[2] - z0) / res), 0, rows - 1))
    c = int(np.clip(math.floor((point[0] - x0) / res), 0, cols - 1))
    has: NDArray[np.bool_] = np.asarray(np.isfinite(heights).any(axis=0))
    if not has[r, c]:
        _, (nr, nc) = ndimage.distance_transform_edt(~has, return_indices=True)
        r, c = int(nr[r, c]), int(nc[r, c])
    gap = np.abs(heights[:, r, c] - point[1])
    k = int(np.argmin(np.where(np.isfinite(gap), gap, np.inf)))
    return k, r, c


def _floors(
    spans: NDArray[np.float32], island: NDArray[np.bool_], levels: list[FloorLevel], climb: float, res: float
) -> tuple[list[float], NDArray[np.int8]]:
    """Floors of the island, and each island span's floor (-1 off the island).

    Levels that some columns (1 m2 or more of them) hold stacked, one above the other on the
    island, are different floors; a level that stacks with no member of a floor joins it (the
    slopes of a terrain, a split level), lowest first. A floor's height is its lowest level's.
    Each span belongs to the highest floor at or below it (within ``climb``)."""
    heights = np.where(island, spans, np.nan)
    near = [np.abs(heights - level.height) <= climb for level in levels]  # (layers, rows, cols)
    other_layer = ~np.eye(len(spans), dtype=bool)[:, :, None, None]

    def stacked(i: int, j: int) -> bool:
        """Whether 1 m2 of columns hold a span near level i and another near level j."""
        both = (near[i][:, None] & near[j][None, :] & other_layer).any(axis=(0, 1))
        return bool(both.sum() * res**2 >= _MIN_FLOOR_AREA)

    groups: list[list[int]] = []
    for index in range(len(levels)):
        if not near[index].any():
            continue
        joinable = [g for g in groups if not any(stacked(m, index) for m in g)]
        if joinable:
            joinable[-1].append(index)
        else:
            groups.append([index])
    floors = sorted(min(levels[m].height for m in g) for g in groups)
    if not floors:
        floors = [float(np.nanmin(heights))]
    span_floor = np.full(spans.shape, -1, dtype=np.int8)
    on = np.isfinite(heights)
    above = np.searchsorted(np.asarray(floors) - climb, heights[on], side="right") - 1
    span_floor[on] = np.clip(above, 0, len(floors) - 1)
    return floors, span_floor


def _bends(points: NDArray[np.float64], tolerance: float) -> NDArray[np.int64]:
    """Indices of the points of a straight-in-plan polyline that its height profile needs
    within ``tolerance`` (Douglas-Peucker on distance along the line vs height)."""
    along = np.r_[0.0, np.cumsum(np.hypot(*np.diff(points[:, [0, 2]], axis=0).T))]
    height = points[:, 1]
    keep = np.zeros(len(points), dtype=bool)
    keep[[0, -1]] = True
    stack = [(0, len(points) - 1)]
    while stack:
        i, j = stack.pop()
        if j - i < 2:
            continue
        span = along[j] - along[i]
        t = (along[i + 1 : j] - along[i]) / span if span > 0 else np.zeros(j - i - 1)
        error = np.abs(height[i + 1 : j] - (height[i] + t * (height[j] - height[i])))
        worst = int(np.argmax(error))
        if error[worst] > tolerance:
            k = i + 1 + worst
            keep[k] = True
            stack += [(i, k), (k, j)]
    return np.flatnonzero(keep)


@dataclass
class NavGrid:
    """Walkable spans over a grid of cells (rows follow +z, columns +x), in layers: layer k of
    a column is its k-th span from the bottom, whichever floor that is."""

    config: SimConfig
    resolution: float
    origin: tuple[float, float]
    spans: NDArray[np.float32]
    """Span heights (layers, rows, cols), lowest first; NaN where a column has fewer."""
    span_clear: NDArray[np.bool_]
    """Spans where the agent's cylinder fits (and no ledge is within its radius)."""
    span_island: NDArray[np.bool_]
    """The navigable island: clear spans linked to the start."""
    floors: list[float]
    """Floor heights, lowest first (one for a single floor, a terrain or a split level)."""
    span_floor: NDArray[np.int8]
    """Floor index of each island span (-1 elsewhere)."""
    start_floor: int = 0
    """The floor the grid was built from (the start's, or the lowest)."""
    _nearest: NDArray[np.int64] = field(init=False, repr=False)
    _graph: Any = field(init=False, repr=False, default=None)
    _node_of: NDArray[np.int64] = field(init=False, repr=False)
    _cells: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from scipy import ndimage

        if not self.span_island.any():
            raise SceneError("the navigable island is empty")
        island = self.island
        _, nearest = ndimage.distance_transform_edt(~island, return_indices=True)
        self._nearest = nearest
        self._cells = np.argwhere(self.span_island)  # (layer, row, col)
        self._node_of = np.full(self.span_island.shape, -1, dtype=np.int64)
        self._node_of[self.span_island] = np.arange(len(self._cells))
        self._island_heights = np.where(self.span_island, self.spans, np.nan).astype(np.float32)

    # ------------------------------------------------------------------ views of one layer

    @cached_property
    def island(self) -> NDArray[np.bool_]:
        """Cells with a navigable span, on any floor (rows, cols)."""
        return np.asarray(self.span_island.any(axis=0))

    @cached_property
    def clear(self) -> NDArray[np.bool_]:
        """Cells with a clear span (rows, cols)."""
        return np.asarray(self.span_clear.any(axis=0))

    @cached_property
    def cell_floor(self) -> NDArray[np.float32]:
        """Per cell, the height of its lowest navigable span, else of its lowest span; NaN where
        it has none (rows, cols)."""
        island_height = (
            np.fmin.reduce(np.where(self.span_island, self.spans, np.nan), axis=0)
            if len(self.spans)
            else np.full(self.shape, np.nan)
        )
        lowest = self.spans[0] if len(self.spans) else np.full(self.shape, np.nan)
        return np.where(np.isfinite(island_height), island_height, lowest).astype(np.float32)

    @property
    def floor_height(self) -> float:
        return self.floors[self.start_floor]

    # ------------------------------------------------------------------ build

    @classmethod
    def build(
        cls,
        raycaster: Raycaster,
        config: SimConfig,
        resolution: float | None = None,
        start: ArrayLike | None = None,
    ) -> NavGrid:
        """Build the grid; the island is the one under ``start`` (or the largest island on the
        lowest floor)."""
        from scipy.sparse.csgraph import connected_components

        res = float(resolution or config.nav_resolution)
        scene = raycaster.scene
        lo, hi = scene.bounds[0].astype(np.float64), scene.bounds[1].astype(np.float64)
        x0, z0 = math.floor(lo[0] / res) * res, math.floor(lo[2] / res) * res
        cols = max(1, math.ceil((hi[0] - x0) / res))
        rows = max(1, math.ceil((hi[2] - z0) / res))
        zc, xc = np.meshgrid(
            z0 + (np.arange(rows) + 0.5) * res, x0 + (np.arange(cols) + 0.5) * res, indexing="ij"
        )
        spans = column_spans(raycaster, config, xc, zc)
        if not np.isfinite(spans).any():
            raise SceneError(
                f"scene {scene.name!r} has no floor: no walkable surface (slope <= "
                f"{config.max_slope_deg:g} deg) open above"
            )
        present = np.isfinite(spans)
        clear = np.zeros(spans.shape, dtype=bool)
        clear[present] = ~cls._blocked(
            raycaster,
            config,
            np.broadcast_to(xc, spans.shape)[present],
            np.broadcast_to(zc, spans.shape)[present],
            spans[present],
        )
        radius_cells = config.agent_radius / res
        ledge = _ledge_distance(spans, config.max_climb, limit=radius_cells + 1.0)
        clear &= (ledge - 0.5) * res >= config.agent_radius - 1e-6
        if not clear.any():
            raise SceneError(f"scene {scene.name!r}: no floor cell has room for the agent")

        clear_heights = np.where(clear, spans, np.nan).astype(np.float32)
        graph, node_of = _grid_graph(clear_heights, config.max_climb, HALF_DIRECTIONS[:2])
        _, labels = connected_components(graph, directed=False)
        label_of = np.full(spans.shape, -1, dtype=np.int64)
        label_of[clear] = labels[node_of[clear]]
        levels = floor_levels(raycaster, config)
        if start is not None:
            point = np.asarray(start, dtype=np.float64)
            island_label = int(label_of[_nearest_span(clear_heights, point, x0, z0, res)])
        else:
            sizes = np.bincount(labels)
            on_lowest: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
            if levels:
                on_lowest = np.unique(
                    label_of[clear & (np.abs(spans - levels[0].height) <= config.max_climb)]
                )
            candidates = on_lowest if len(on_lowest) else np.arange(len(sizes))
            island_label = int(max(candidates, key=lambda label: sizes[label]))
        island = label_of == island_label
        floors, span_floor = _floors(spans, island, levels, config.max_climb, res)
        start_floor = 0
        if start is not None:
            k, r, c = _nearest_span(
                np.where(island, spans, np.nan).astype(np.float32),
                np.asarray(start, dtype=np.float64),
                x0,
                z0,
                res,
            )
            start_floor = int(span_floor[k, r, c])
        return cls(
            config=config,
            resolution=res,
            origin=(x0, z0),
            spans=spans,
            span_clear=clear,
            span_island=island,
            floors=floors,
            span_floor=span_floor,
            start_floor=start_floor,
        )

    @staticmethod
    def _blocked(
        raycaster: Raycaster,
        config: SimConfig,
        px: NDArray[np.float64],
        pz: NDArray[np.float64],
        floor: NDArray[np.float32],
    ) -> NDArray[np.bool_]:
        """Whether geometry comes within the agent's radius of the vertical axis over each
        floor point (x, floor, z), between ``max_climb`` and ``agent_height`` above it."""
        radius = config.agent_radius
        band = config.agent_height - config.max_climb
        base = floor.astype(np.float64) + config.max_climb
        blocked = np.zeros(len(base), dtype=bool)
        # One sphere around the whole band first: in the open (mid-room, on a roof) that
        # settles a span with one distance query instead of four.
        middle = np.stack([px, base + band / 2, pz], axis=-1)
        near = np.flatnonzero(raycaster.distance(middle) < math.hypot(radius, band / 2))
        half = band / (2 * _SUB_BANDS)
        sphere = math.hypot(radius, half)
        centres = base[near, None] + half * (2 * np.arange(_SUB_BANDS) + 1)
        nx, nz = px[near, None], pz[near, None]
        d = raycaster.distance(np.stack(np.broadcast_arrays(nx, centres, nz), axis=-1))
        near_blocked = np.asarray((d < radius).any(axis=1))
        # Sub-bands whose bounding sphere touches geometry but whose centre is clear:
        # check the axis at fine steps.
        unsure, unsure_band = np.nonzero((d < sphere) & (d >= radius) & ~near_blocked[:, None])
        if len(unsure):
            steps = np.arange(-half, half + 1e-9, _FINE_STEP)
            heights = centres[unsure, unsure_band][:, None] + steps[None, :]
            fine = np.stack(np.broadcast_arrays(nx[unsure], heights, nz[unsure]), axis=-1)
            near_blocked[unsure[(raycaster.distance(fine) < radius).any(axis=1)]] = True
        blocked[near] = near_blocked
        return blocked

    # ------------------------------------------------------------------ queries

    @property
    def shape(self) -> tuple[int, int]:
        _, rows, cols = self.span_island.shape
        return rows, cols

    @property
    def navigable_area(self) -> float:
        return float(self.span_island.sum()) * self.resolution**2

    def floor_areas(self) -> list[float]:
        """Navigable area of each floor, m2."""
        counts = np.bincount(self.span_floor[self.span_island].astype(np.int64), minlength=len(self.floors))
        return [float(n) * self.resolution**2 for n in counts]

    def cell_of(self, points: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        return world_to_cell(points, self.origin, self.resolution)

    def cell_centre(
        self, rows: ArrayLike, cols: ArrayLike, layers: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Cell centres at the height of the given spans (default: each cell's lowest navigable
        span, else its lowest span)."""
        r = np.asarray(rows, dtype=np.int64)
        c = np.asarray(cols, dtype=np.int64)
        x, z = cell_centre_xz(r, c, self.origin, self.resolution)
        if layers is None:
            y = self.cell_floor[r, c].astype(np.float64)
        else:
            y = self.spans[np.asarray(layers, dtype=np.int64), r, c].astype(np.float64)
        return np.stack([x, y, z], axis=-1)

    def _spans_at(
        self, points: ArrayLike, heights: NDArray[np.float32] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """Per point (..., 3): its cell, the span there nearest its height among ``heights``
        (default the island's), and whether there is one."""
        table = self._island_heights if heights is None else heights
        p = np.asarray(points, dtype=np.float64)
        row, col = self.cell_of(p)
        rows, cols = self.shape
        inside = (row >= 0) & (row < rows) & (col >= 0) & (col < cols)
        r, c = np.clip(row, 0, rows - 1), np.clip(col, 0, cols - 1)
        column = np.moveaxis(table[:, r, c], 0, -1)  # (..., layers)
        gap = np.abs(column - p[..., 1:2])
        gap = np.where(np.isfinite(gap), gap, np.inf)
        layer = np.argmin(gap, axis=-1) if table.shape[0] else np.zeros(r.shape, dtype=np.int64)
        found = inside & (
            np.take_along_axis(gap, layer[..., None], axis=-1)[..., 0] < np.inf if table.shape[0] else False
        )
        return layer, r, c, np.asarray(found)

    def on_island(self, points: ArrayLike) -> NDArray[np.bool_]:
        """Whether each point's cell holds a navigable span (on any floor; height ignored)."""
        return self._spans_at(points)[3]

    def is_navigable(self, point: ArrayLike, max_y_delta: float = 0.5) -> bool:
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            return False
        layer, row, col, found = self._spans_at(p)
        return bool(found) and abs(p[1] - float(self.spans[layer, row, col])) <= max_y_delta

    def snap_point(self, point: ArrayLike) -> NDArray[np.float64]:
        """The point itself (on its span) if its cell is navigable, else the centre of the
        nearest navigable cell, on the span there nearest the point's height."""
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            return np.full(3, np.nan)
        layer, row, col, found = self._spans_at(p)
        if found:
            return np.array([p[0], float(self.spans[layer, row, col]), p[2]])
        rows, cols = self.shape
        r, c = int(np.clip(row, 0, rows - 1)), int(np.clip(col, 0, cols - 1))
        nr, nc = int(self._nearest[0, r, c]), int(self._nearest[1, r, c])
        centre = self.cell_centre(nr, nc)
        layer, _, _, _ = self._spans_at(np.array([centre[0], p[1], centre[2]]))
        result: NDArray[np.float64] = self.cell_centre(nr, nc, layer)
        return result

    def segment_clear(self, start: ArrayLike, end: ArrayLike) -> bool:
        """Whether the straight segment stays on linked navigable spans."""
        return self.free_fraction(start, end) >= 1.0

    def free_fraction(self, start: ArrayLike, end: ArrayLike) -> float:
        """Fraction of the segment from ``start`` travelled before it leaves the island: a
        cell without a navigable span near the segment's height there, or a step between
        spans of neighbouring cells higher than ``max_climb`` (a ledge, another floor)."""
        a = np.asarray(start, dtype=np.float64)
        b = np.asarray(end, dtype=np.float64)
        length = float(np.hypot(*(b - a)[[0, 2]]))
        n = max(2, math.ceil(length / (self.resolution / 4)) + 1)
        t = np.linspace(0.0, 1.0, n)
        samples = a[None, :] + t[:, None] * (b - a)[None, :]
        layer, row, col, found = self._spans_at(samples)
        heights = np.where(found, self.spans[layer, row, col], np.nan)
        moved = (row[1:] != row[:-1]) | (col[1:] != col[:-1])
        # within a cell the span stays the same (no jump between floors); between cells it
        # changes by at most the climb (NaN, no span, compares False)
        steps_ok = np.where(
            moved, np.abs(np.diff(heights)) <= self.config.max_climb + 1e-6, layer[1:] == layer[:-1]
        )
        ok = found & np.r_[True, steps_ok]
        if ok.all():
            return 1.0
        first_bad = int(np.argmin(ok))
        return 0.0 if first_bad == 0 else float(t[first_bad - 1])

    def ground_path(self, start: ArrayLike, end: ArrayLike) -> NDArray[np.float64]:
        """A clear segment as walked on the spans under it: the points where its height
        profile bends by more than 2 cm (the ends of a ramp, a terrain's crests), so the
        polyline's length is the walk's; on a flat floor just its two ends."""
        from scipy.ndimage import uniform_filter1d

        a = np.asarray(start, dtype=np.float64)
        b = np.asarray(end, dtype=np.float64)
        # a sample per cell: heights between cell centres are linear, as on a ramp
        n = max(2, math.ceil(float(np.hypot(*(b - a)[[0, 2]])) / self.resolution) + 1)
        samples = a[None, :] + np.linspace(0.0, 1.0, n)[:, None] * (b - a)[None, :]
        layer, row, col, found = self._spans_at(samples)
        samples[found, 1] = self.spans[layer[found], row[found], col[found]]
        # Steps are walked as the slope of their flight (as over a navmesh's detail mesh), not
        # as riser plus tread: heights averaged over about a tread's length.
        window = 2 * round(_TREAD / (2 * self.resolution)) + 1
        samples[:, 1] = uniform_filter1d(samples[:, 1], size=window, mode="nearest")
        samples[0], samples[-1] = a, b
        return samples[_bends(samples, _GROUND_TOLERANCE)]

    def floor_at(self, point: ArrayLike) -> float:
        """Height of the navigable span under ``point`` nearest its height (NaN: none)."""
        layer, row, col, found = self._spans_at(point)
        return float(self.spans[layer, row, col]) if found else math.nan

    def floor_of(self, point: ArrayLike) -> int:
        """Floor index of the navigable span under ``point`` (-1: none)."""
        layer, row, col, found = self._spans_at(point)
        return int(self.span_floor[layer, row, col]) if found else -1

    # ------------------------------------------------------------------ paths

    def _adjacency(self) -> Any:
        """The island's spans as a graph (node i is ``_cells[i]``), 8 directions, no corner
        cutting, weighted by 3D step length."""
        if self._graph is None:
            res = self.resolution

            def length(dr: int, dc: int, rise: NDArray[np.float64]) -> NDArray[np.float64]:
                step: NDArray[np.float64] = np.hypot(res * math.hypot(dr, dc), rise)
                return step

            self._graph, _ = _grid_graph(
                self._island_heights, self.config.max_climb, HALF_DIRECTIONS, length, corner_cutting=False
            )
        return self._graph

    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> ShortestPath:
        """Shortest navigable path between two points, both snapped onto the island."""
        from scipy.sparse.csgraph import dijkstra

        a, b = self.snap_point(start), self.snap_point(end)
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            return ShortestPath(np.empty((0, 3)), math.inf)
        if self.segment_clear(a, b):
            points = self.ground_path(a, b)
            return ShortestPath(points, float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum()))
        na, nb = (int(self._node_of[self._spans_at(p)[:3]]) for p in (a, b))
        _, pred = dijkstra(self._adjacency(), indices=na, return_predecessors=True)
        if pred[nb] < 0 and na != nb:
            return ShortestPath(np.empty((0, 3)), math.inf)
        chain = [nb]
        while chain[-1] != na:
            chain.append(int(pred[chain[-1]]))
        cells = self._cells[np.array(chain[::-1])]
        middle = self.cell_centre(cells[1:-1, 1], cells[1:-1, 2], cells[1:-1, 0])
        pulled = self._string_pull([a, *middle, b])
        legs = [self.ground_path(p, q) for p, q in zip(pulled[:-1], pulled[1:], strict=True)]
        points = np.concatenate([legs[0], *(leg[1:] for leg in legs[1:])])
        return ShortestPath(points, float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum()))

    def _string_pull(self, points: list[NDArray[np.float64]]) -> NDArray[np.float64]:
        out = [points[0]]
        anchor = points[0]
        for j in range(2, len(points)):
            if not self.segment_clear(anchor, points[j]):
                anchor = points[j - 1]
                out.append(anchor)
        out.append(points[-1])
        return np.stack(out)

    def floor_map(self, floor: int) -> TopDownMap:
        """Ground-truth navigability of one floor: the island's cells whose span is on it."""
        if not 0 <= floor < len(self.floors):
            raise ValueError(f"floor {floor} does not exist: the scene has {len(self.floors)}")
        on_floor = self.span_island & (self.span_floor == floor)
        return TopDownMap(
            navigable=np.asarray(on_floor.any(axis=0)),
            origin=self.origin,
            resolution=self.resolution,
            floor_height=self.floors[floor],
            extra={
                "clear": self.clear.copy(),
                "floor": np.isfinite(self.spans).any(axis=0),
                "floor_index": floor,
            },
        )

    def topdown(self) -> TopDownMap:
        """The map of the floor the grid was built from (:meth:`floor_map` for the others)."""
        return self.floor_map(self.start_floor)

    def most_open_point(self) -> NDArray[np.float64]:
        """The island cell of the start floor farthest from the island's border (a natural
        default start)."""
        on_floor = np.asarray((self.span_island & (self.span_floor == self.start_floor)).any(axis=0))
        depth = _inner_distance(on_floor)
        r, c = np.unravel_index(int(np.argmax(depth)), depth.shape)
        centre = self.cell_centre(r, c)
        centre[1] = self.floor_height  # the start floor's span there, not another floor's
        layer, _, _, _ = self._spans_at(centre)
        result: NDArray[np.float64] = self.cell_centre(r, c, layer)
        return result
