"""Explorable regions: the explored free space cut into rooms / areas at narrow passages.

:func:`segment_regions` is the stateless core (one BEVMap in, a label image out):

1. ``free`` is the map's free space, with small unknown specks inside it filled, because a
   cell nobody looked at is not a wall and must not narrow the space around it;
2. the clearance ``dt`` (metres to the nearest non-free cell) is computed; where it exceeds
   ``passage_width / 2`` the space is wide open, and the connected parts of that wide-open
   space are the region *cores* (a door of 0.9 m never has clearance above 0.45 m, so it
   splits the cores of the two rooms it joins);
3. the cores grow over the free space by a priority-flood watershed (widest cells first,
   i.e. a watershed on ``max(dt) - dt``): every free cell joins the core it is reached from
   along the widest path, so the borders between rooms fall at the narrowest point of the
   passages between them (scipy's ``watershed_ift`` mislabels plateaus, hence our own);
4. free components that hold no core (a narrow corridor, a strip seen through a door) are
   regions of their own;
5. pieces smaller than ``min_area_m2`` merge into their largest neighbour; tiny isolated
   pieces with no neighbour are noise (free cells seen through a gap) and are dropped.

:class:`RegionTracker` runs that on every map update and keeps region ids stable: new
regions are matched greedily by IoU to the previous call's regions in world-lattice cells
(the grid's origin moves when it grows), so an unchanged region keeps its id exactly and
new ones get fresh ids from a counter.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray
from scipy import ndimage

from embodia.core.limits import check_positive
from embodia.perception.bev import UNKNOWN, BEVMap, FrontierSegment

logger = logging.getLogger(__name__)

STRUCTURAL_CATEGORIES: frozenset[str] = frozenset({"void", "floor", "wall", "ceiling", "door"})
"""Categories that say nothing about what a region is (left out of its dominant categories)."""

TOP_CATEGORIES = 3
TOUCH_CELLS = math.sqrt(2.0)
"""A frontier cell this close (cells) to a region cell touches the region (8-neighbours)."""
FILLED_SPECK_M2 = 0.05
"""Unknown holes inside free space up to this area count as free for the clearance."""

_EIGHT = np.ones((3, 3), dtype=bool)


@dataclass(frozen=True)
class RegionConfig:
    """How free space is cut into regions and how their ids are kept."""

    passage_width: float = 1.0
    """Openings narrower than this (m) separate regions (doors are ~0.8-0.9 m)."""
    min_area_m2: float = 0.5
    """Smaller pieces merge into their largest neighbour."""
    match_iou: float = 0.5
    """A new region keeps an old id when it overlaps that old region this much (IoU)."""
    category_reach: float = 1.0
    """Occupied cells up to this far (m) from a region count towards its categories."""

    def __post_init__(self) -> None:
        check_positive(self, "passage_width", "category_reach")
        if not (math.isfinite(self.min_area_m2) and self.min_area_m2 >= 0):
            raise ValueError(f"RegionConfig.min_area_m2 must be >= 0, got {self.min_area_m2}")
        if not 0.0 < self.match_iou <= 1.0:
            raise ValueError(f"RegionConfig.match_iou must be in (0, 1], got {self.match_iou}")


@dataclass(frozen=True)
class Region:
    """One explorable region of a BEVMap."""

    id: int
    cells: NDArray[np.int64]
    """(N, 2) grid cells (row, col) of the BEVMap it was computed on."""
    area_m2: float
    centroid: NDArray[np.float64]
    """World point (x, floor y, z) of the mean cell centre."""
    frontiers: tuple[FrontierSegment, ...]
    """Frontier segments of the map whose cells (majority) lie in or touch this region."""
    categories: tuple[tuple[str, float], ...]
    """Dominant semantic categories near the region as (name, share of the non-structural
    hits near it), most common first, at most three; structural categories are left out."""


# ---------------------------------------------------------------------- segmentation


def segment_regions(bev: BEVMap, config: RegionConfig = RegionConfig()) -> NDArray[np.int32]:
    """(H, W) region label per cell, 0..n-1 (largest first), -1 outside the free space.

    See the module docstring for the steps. Free specks too small to be a region and with
    no region next to them are -1 as well.
    """
    free = bev.free
    labels = np.full(bev.shape, -1, dtype=np.int32)
    if not free.any():
        return labels
    res = bev.config.resolution
    open_space = _fill_unknown_specks(free, bev.state == UNKNOWN, res)
    clearance = ndimage.distance_transform_edt(open_space)  # cells
    cores, n_cores = ndimage.label(free & (clearance * res > config.passage_width / 2), structure=_EIGHT)

    pieces = _flood_from_cores(cores.astype(np.int32), clearance.astype(np.float64), free)
    # Free components the flood did not reach hold no core: each is a region of its own.
    coreless = free & (pieces == 0)
    if coreless.any():
        components, _ = ndimage.label(coreless, structure=_EIGHT)
        pieces[coreless] = components[coreless] + n_cores
    pieces = _merge_small(pieces, config.min_area_m2 / res**2)

    ids, inverse, counts = np.unique(pieces[free], return_inverse=True, return_counts=True)
    keep = ids > 0
    order = np.argsort(-counts[keep], kind="stable")
    new_label = np.full(len(ids), -1, dtype=np.int32)
    new_label[np.flatnonzero(keep)[order]] = np.arange(int(keep.sum()), dtype=np.int32)
    labels[free] = new_label[inverse.reshape(-1)]
    return labels


def _fill_unknown_specks(
    free: NDArray[np.bool_], unknown: NDArray[np.bool_], res: float
) -> NDArray[np.bool_]:
    """``free`` plus the small unknown holes that touch free cells only (no obstacle, not
    the map's edge)."""
    holes, n = ndimage.label(unknown, structure=_EIGHT)
    if n == 0:
        return free
    sizes = np.bincount(holes.ravel(), minlength=n + 1)
    fill = sizes <= FILLED_SPECK_M2 / res**2
    fill[0] = False
    obstacle = ~free & ~unknown
    fill[holes[unknown & ndimage.binary_dilation(obstacle, structure=_EIGHT)]] = False
    fill[np.concatenate([holes[0], holes[-1], holes[:, 0], holes[:, -1]])] = False
    result: NDArray[np.bool_] = free | fill[holes]
    return result


def _merge_small(pieces: NDArray[np.int32], min_cells: float) -> NDArray[np.int32]:
    """Merge pieces (labels > 0) below ``min_cells`` into their largest 8-neighbour piece,
    smallest first; small pieces with no neighbour are dropped (set to 0)."""
    n = int(pieces.max())
    sizes = np.bincount(pieces.ravel(), minlength=n + 1)
    if not np.any((sizes[1:] > 0) & (sizes[1:] < min_cells)):
        return pieces
    neighbours: dict[int, set[int]] = {int(p): set() for p in np.flatnonzero(sizes[1:]) + 1}
    h, w = pieces.shape
    # The four "forward" 8-neighbour offsets see every adjacent pair of cells once.
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        c0, c1 = max(0, -dc), w - max(0, dc)
        a = pieces[: h - dr, c0:c1]
        b = pieces[dr:, c0 + dc : c1 + dc]
        touching = (a > 0) & (b > 0) & (a != b)
        for p, q in set(zip(a[touching].tolist(), b[touching].tolist(), strict=True)):
            neighbours[p].add(q)
            neighbours[q].add(p)
    size = {p: int(sizes[p]) for p in neighbours}
    target = np.arange(n + 1, dtype=np.int32)
    while True:
        small = [p for p in size if size[p] < min_cells]
        if not small:
            break
        piece = min(small, key=lambda p: (size[p], p))
        around = neighbours.pop(piece)
        into = max(around, key=lambda q: (size[q], -q)) if around else 0
        target[piece] = into
        if into:
            size[into] += size[piece]
            neighbours[into] |= around - {into}
            for q in around:
                neighbours[q].discard(piece)
                if q != into:
                    neighbours[q].add(into)
        del size[piece]
    # Follow merge chains (a piece merged into one that merged on later).
    for _ in range(n):
        resolved = target[target]
        if np.array_equal(resolved, target):
            break
        target = resolved
    merged: NDArray[np.int32] = target[pieces]
    return merged


@njit(cache=True)
def _flood_from_cores(
    cores: NDArray[np.int32], clearance: NDArray[np.float64], free: NDArray[np.bool_]
) -> NDArray[np.int32]:
    """Watershed by priority flooding: grow the labelled cores over ``free`` (8-connected),
    widest cells first, so two cores meet where the clearance between them is lowest.

    Ties are broken first-in first-out, which keeps the result deterministic.
    """
    rows, cols = cores.shape
    labels = cores.copy()
    heap = []
    order = 0
    for r in range(rows):
        for c in range(cols):
            if labels[r, c] > 0:
                heap.append((-clearance[r, c], order, r, c))
                order += 1
    heapq.heapify(heap)
    while heap:
        _, _, r, c = heapq.heappop(heap)
        label = labels[r, c]
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                nr, nc = r + dr, c + dc
                if 0 <= nr < rows and 0 <= nc < cols and free[nr, nc] and labels[nr, nc] == 0:
                    labels[nr, nc] = label
                    heapq.heappush(heap, (-clearance[nr, nc], order, nr, nc))
                    order += 1
    return labels


# ---------------------------------------------------------------------- regions and ids


class RegionTracker:
    """Keeps region ids stable across map updates.

    Each :meth:`update` segments the map afresh and greedily matches the new regions to
    the previous call's by IoU over world-lattice cells (so a grown grid does not matter):
    pairs at or above ``match_iou`` keep the old id, best pairs first; the rest get fresh
    ids that are never reused.
    """

    def __init__(self, config: RegionConfig = RegionConfig()) -> None:
        self.config = config
        self._regions: list[Region] = []
        self._world_cells: dict[int, NDArray[np.int64]] = {}
        self._resolution: float | None = None
        self._next_id = 0

    @property
    def regions(self) -> list[Region]:
        """The regions of the last :meth:`update`, by id."""
        return list(self._regions)

    def update(self, bev: BEVMap, frontiers: Sequence[FrontierSegment] | None = None) -> list[Region]:
        """Segment ``bev``, match ids to the previous call and return the regions by id.

        ``frontiers`` (default ``bev.frontiers()``) are handed out to the regions they lie in
        or touch (see :func:`_build_regions`);
        pass the segments you already computed so both refer to the same objects.
        """
        res = bev.config.resolution
        if self._resolution is not None and not math.isclose(res, self._resolution):
            raise ValueError(
                f"RegionTracker: map resolution changed from {self._resolution} to {res}; "
                "ids can only be kept on one world lattice (use a new tracker)"
            )
        self._resolution = res
        labels = segment_regions(bev, self.config)
        n = int(labels.max()) + 1 if labels.size else 0
        ids = self._match_ids(bev, labels, n)
        segments = bev.frontiers() if frontiers is None else frontiers
        self._regions = sorted(_build_regions(bev, labels, ids, segments, self.config), key=lambda r: r.id)
        offset = np.array([bev.row0, bev.col0], dtype=np.int64)
        self._world_cells = {r.id: r.cells + offset for r in self._regions}
        logger.debug("regions: %s", [(r.id, round(r.area_m2, 2)) for r in self._regions])
        return self.regions

    def label_image(self, bev: BEVMap) -> NDArray[np.int32]:
        """(H, W) region id per cell of ``bev``'s current grid, -1 elsewhere.

        Uses the regions of the last update, placed by world lattice, so it stays right
        after the grid has grown.
        """
        image = np.full(bev.shape, -1, dtype=np.int32)
        for region_id, world in self._world_cells.items():
            rows, cols = world[:, 0] - bev.row0, world[:, 1] - bev.col0
            inside = bev.inside(rows, cols)
            image[rows[inside], cols[inside]] = region_id
        return image

    def _match_ids(self, bev: BEVMap, labels: NDArray[np.int32], n: int) -> list[int]:
        """Id per new label 0..n-1."""
        ids = [-1] * n
        if n and self._world_cells:
            previous = self.label_image(bev)
            both = (labels >= 0) & (previous >= 0)
            pairs, overlap = np.unique(
                np.stack([labels[both], previous[both]], axis=1), axis=0, return_counts=True
            )
            new_size = np.bincount(labels[labels >= 0], minlength=n)
            candidates = []
            for (label, old_id), inter in zip(pairs.tolist(), overlap.tolist(), strict=True):
                union = int(new_size[label]) + len(self._world_cells[old_id]) - inter
                candidates.append((inter / union, label, old_id))
            taken: set[int] = set()
            for iou, label, old_id in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
                if iou >= self.config.match_iou and ids[label] < 0 and old_id not in taken:
                    ids[label] = old_id
                    taken.add(old_id)
        for label in range(n):
            if ids[label] < 0:
                ids[label] = self._next_id
                self._next_id += 1
        return ids


def _build_regions(
    bev: BEVMap,
    labels: NDArray[np.int32],
    ids: list[int],
    frontiers: Sequence[FrontierSegment],
    config: RegionConfig,
) -> list[Region]:
    """Regions for labels 0..n-1 with the given ids.

    A frontier segment goes to the region most of its cells lie in or touch (cells farther
    from every region do not vote; a segment none of whose cells do goes nowhere). Semantic
    hits count towards the nearest region up to ``category_reach`` away.
    """
    n = len(ids)
    if n == 0:
        return []
    res = bev.config.resolution
    # Every cell's nearest region cell: frontier cells can be explored cells without floor
    # evidence (a stray obstacle hit), which lie next to a region rather than in it.
    distance, (near_r, near_c) = ndimage.distance_transform_edt(labels < 0, return_indices=True)
    owner = labels[near_r, near_c]
    owned: list[list[FrontierSegment]] = [[] for _ in range(n)]
    h, w = labels.shape
    for segment in frontiers:
        rows, cols = segment.cells[:, 0], segment.cells[:, 1]
        if rows.size == 0 or rows.min() < 0 or cols.min() < 0 or rows.max() >= h or cols.max() >= w:
            raise ValueError(f"frontier segment {segment.id} has cells outside the map's grid")
        touching = distance[rows, cols] <= TOUCH_CELLS
        if touching.any():
            owned[int(np.bincount(owner[rows, cols][touching]).argmax())].append(segment)
    near = (distance * res <= config.category_reach) & bev.explored
    category_counts = np.zeros((n, len(bev.categories)), dtype=np.float64)
    np.add.at(category_counts, owner[near], bev.semantic_count[near].astype(np.float64))
    structural = [k for k, name in enumerate(bev.categories) if name in STRUCTURAL_CATEGORIES]
    category_counts[:, structural] = 0.0
    totals = category_counts.sum(axis=1)
    regions = []
    order = np.argsort(labels.ravel(), kind="stable")
    flat = labels.ravel()[order]
    bounds = np.searchsorted(flat, np.arange(n + 1))
    for label in range(n):
        index = order[bounds[label] : bounds[label + 1]]
        cells = np.stack(np.unravel_index(index, labels.shape), axis=1).astype(np.int64)
        centre = cells.mean(axis=0)
        ranked = np.argsort(-category_counts[label], kind="stable")[:TOP_CATEGORIES]
        categories = tuple(
            (bev.categories[k], float(category_counts[label, k] / totals[label]))
            for k in ranked
            if category_counts[label, k] > 0
        )
        regions.append(
            Region(
                id=ids[label],
                cells=cells,
                area_m2=len(cells) * res**2,
                centroid=bev.from_grid(centre[0], centre[1]),
                frontiers=tuple(owned[label]),
                categories=categories,
            )
        )
    return regions
