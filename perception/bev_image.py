"""A coloured top-down picture of a BEVMap, for people and for VLM prompts.

Layers, bottom to top: unknown / free / occupied cells (occupied cells tinted by their
majority object category), region boundaries, frontier cells, the trajectory, region ids
at the region centroids, the agent (disc plus heading line).

Rows follow +z and columns +x, as in the map, so "up" in the picture is -z: the heading of
an agent with yaw 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFont

from embodia.perception.bev import FREE, OCCUPIED, UNKNOWN, BEVMap, FrontierSegment
from embodia.perception.regions import STRUCTURAL_CATEGORIES, Region
from embodia.sim.geometry import forward_vector
from embodia.sim.protocol import Pose
from embodia.sim.visualize import category_palette

UNKNOWN_COLOUR = (64, 64, 68)
FREE_COLOUR = (236, 233, 224)
OCCUPIED_COLOUR = (24, 24, 28)
REGION_BOUNDARY_COLOUR = (180, 176, 166)
FRONTIER_COLOUR = (0, 220, 235)
TRAJECTORY_COLOUR = (255, 140, 20)
AGENT_COLOUR = (225, 30, 30)
LABEL_COLOUR = (20, 40, 160)
LABEL_OUTLINE = (255, 255, 255)
CATEGORY_TINT = 0.75
"""Share of the category colour in a tinted obstacle cell (the rest is the obstacle colour)."""
AGENT_RADIUS_M = 0.15


def bev_image(
    bev: BEVMap,
    *,
    scale: int = 2,
    show_categories: bool = True,
    frontiers: Sequence[FrontierSegment] | None = None,
    regions: Sequence[Region] | None = None,
    region_labels: NDArray[np.int32] | None = None,
    agent: Pose | None = None,
    trajectory: Sequence[Pose] | None = None,
    crop_to_explored: bool = True,
    margin_m: float = 0.5,
) -> NDArray[np.uint8]:
    """(H, W, 3) uint8 picture of ``bev``, ``scale`` pixels per cell.

    ``frontiers`` and ``regions`` must come from this map in its current grid (their cells
    are grid cells); ``region_labels`` (e.g. ``RegionTracker.label_image(bev)``) gives the
    region boundaries and defaults to the one the regions' cells make. With
    ``crop_to_explored`` the picture covers the explored cells, the agent and the
    trajectory plus ``margin_m``; otherwise the whole grid.
    """
    if not isinstance(scale, int) or scale < 1:
        raise ValueError(f"bev_image: scale must be a positive integer, got {scale!r}")
    if not (math.isfinite(margin_m) and margin_m >= 0):
        raise ValueError(f"bev_image: margin_m must be >= 0, got {margin_m}")
    if bev.free_count.size == 0:
        raise ValueError("bev_image: the map is empty (integrate a panorama first)")
    shape = bev.shape
    if region_labels is None and regions:
        region_labels = _labels_from_regions(regions, shape)
    if region_labels is not None and region_labels.shape != shape:
        raise ValueError(f"bev_image: region_labels has shape {region_labels.shape}, the map {shape}")

    cells = _cell_colours(bev, show_categories)
    if region_labels is not None:
        cells[_region_boundaries(region_labels)] = REGION_BOUNDARY_COLOUR
    for segment in frontiers or ():
        rows, cols = _checked_cells(segment.cells, shape, f"frontier segment {segment.id}")
        cells[rows, cols] = FRONTIER_COLOUR

    r0, r1, c0, c1 = 0, shape[0], 0, shape[1]
    if crop_to_explored:
        r0, r1, c0, c1 = _crop_box(bev, agent, trajectory, margin_m)
    image = Image.fromarray(np.repeat(np.repeat(cells[r0:r1, c0:c1], scale, axis=0), scale, axis=1))
    draw = ImageDraw.Draw(image)

    def pixel(point: Sequence[float] | NDArray[np.float64]) -> tuple[float, float]:
        """Picture (x, y) of a world point (continuous, so sub-cell positions show)."""
        res = bev.config.resolution
        return (
            (float(point[0]) / res - bev.col0 - c0) * scale,
            (float(point[2]) / res - bev.row0 - r0) * scale,
        )

    if trajectory and len(trajectory) > 1:
        draw.line([pixel(p.position) for p in trajectory], fill=TRAJECTORY_COLOUR, width=max(1, scale))
    if regions:
        font = ImageFont.load_default(size=max(14, 6 * scale))
        for region in regions:
            draw.text(
                pixel(region.centroid),
                str(region.id),
                fill=LABEL_COLOUR,
                font=font,
                anchor="mm",
                stroke_width=2,
                stroke_fill=LABEL_OUTLINE,
            )
    if agent is not None:
        _draw_agent(draw, pixel(agent.position), agent.yaw, AGENT_RADIUS_M / bev.config.resolution * scale)
    return np.asarray(image, dtype=np.uint8).copy()


def _cell_colours(bev: BEVMap, show_categories: bool) -> NDArray[np.uint8]:
    state = bev.state
    cells = np.empty((*bev.shape, 3), dtype=np.uint8)
    cells[state == UNKNOWN] = UNKNOWN_COLOUR
    cells[state == FREE] = FREE_COLOUR
    occupied = state == OCCUPIED
    cells[occupied] = OCCUPIED_COLOUR
    if show_categories and occupied.any():
        label, _ = bev.semantic_map()
        objects = np.array([name not in STRUCTURAL_CATEGORIES for name in bev.categories])
        tinted = occupied & objects[label]
        palette = category_palette(bev.categories).astype(np.float64)
        blend = CATEGORY_TINT * palette[label[tinted]] + (1 - CATEGORY_TINT) * np.array(OCCUPIED_COLOUR)
        cells[tinted] = np.round(blend).astype(np.uint8)
    return cells


def _checked_cells(
    cells: NDArray[np.int64], shape: tuple[int, int], what: str
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    rows, cols = cells[:, 0], cells[:, 1]
    if rows.size and (rows.min() < 0 or cols.min() < 0 or rows.max() >= shape[0] or cols.max() >= shape[1]):
        raise ValueError(f"bev_image: {what} has cells outside the map's grid {shape}")
    return rows, cols


def _labels_from_regions(regions: Sequence[Region], shape: tuple[int, int]) -> NDArray[np.int32]:
    labels = np.full(shape, -1, dtype=np.int32)
    for region in regions:
        rows, cols = _checked_cells(region.cells, shape, f"region {region.id}")
        labels[rows, cols] = region.id
    return labels


def _region_boundaries(labels: NDArray[np.int32]) -> NDArray[np.bool_]:
    """Region cells with a 4-neighbour in another region (not the border to non-free)."""
    boundary = np.zeros(labels.shape, dtype=bool)
    above, below = labels[:-1], labels[1:]
    vertical = (above >= 0) & (below >= 0) & (above != below)
    boundary[:-1] |= vertical
    boundary[1:] |= vertical
    left, right = labels[:, :-1], labels[:, 1:]
    horizontal = (left >= 0) & (right >= 0) & (left != right)
    boundary[:, :-1] |= horizontal
    boundary[:, 1:] |= horizontal
    return boundary


def _crop_box(
    bev: BEVMap, agent: Pose | None, trajectory: Sequence[Pose] | None, margin_m: float
) -> tuple[int, int, int, int]:
    """Rows r0:r1, cols c0:c1 around the explored cells, the agent and the trajectory."""
    rows, cols = np.nonzero(bev.explored)
    poses = [*(trajectory or ()), *([agent] if agent is not None else [])]
    if poses:
        pose_rows, pose_cols = bev.to_grid(np.array([p.position for p in poses]))
        rows, cols = np.concatenate([rows, pose_rows]), np.concatenate([cols, pose_cols])
    h, w = bev.shape
    if rows.size == 0:
        return 0, h, 0, w
    margin = math.ceil(margin_m / bev.config.resolution)
    return (
        max(0, int(rows.min()) - margin),
        min(h, int(rows.max()) + margin + 1),
        max(0, int(cols.min()) - margin),
        min(w, int(cols.max()) + margin + 1),
    )


def _draw_agent(draw: ImageDraw.ImageDraw, centre: tuple[float, float], yaw: float, radius: float) -> None:
    radius = max(3.0, radius)
    x, y = centre
    draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=AGENT_COLOUR)
    heading = forward_vector(yaw)  # world (x, z) -> picture (col, row)
    tip = (x + 2.5 * radius * float(heading[0]), y + 2.5 * radius * float(heading[2]))
    draw.line([centre, tip], fill=AGENT_COLOUR, width=max(2, round(radius / 2)))
