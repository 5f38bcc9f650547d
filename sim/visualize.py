"""Pictures of what the simulator sees: depth and semantic colouring, top-down maps."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from embodia.sim.geometry import forward_vector
from embodia.sim.navigation import NavGrid
from embodia.sim.protocol import Pose, TopDownMap
from embodia.sim.raycast import Raycaster
from embodia.sim.scene import category_albedo


def colorize_depth(depth: NDArray[np.floating], max_depth: float | None = None) -> NDArray[np.uint8]:
    """Turbo colour map of a depth image; misses (0) are black."""
    from matplotlib import colormaps

    d = np.asarray(depth, dtype=np.float64)
    hit = d > 0
    top = max_depth or (float(d[hit].max()) if hit.any() else 1.0)
    rgb = colormaps["turbo"](np.clip(d / max(top, 1e-6), 0.0, 1.0))[..., :3]
    rgb[~hit] = 0.0
    return (rgb * 255).astype(np.uint8)


def category_palette(categories: list[str]) -> NDArray[np.uint8]:
    """(K, 3) unshaded albedo per category id (void is black)."""
    return np.array([category_albedo(c) for c in categories], dtype=np.uint8)


def colorize_semantic(semantic: NDArray[np.integer], categories: list[str]) -> NDArray[np.uint8]:
    palette = category_palette(categories)
    colored: NDArray[np.uint8] = palette[np.clip(semantic, 0, len(categories) - 1)]
    return colored


def topdown_semantic(raycaster: Raycaster, nav: NavGrid) -> NDArray[np.int32]:
    """Category id seen from straight above each nav cell, below the ceiling.

    Rays start 0.5 m above the agent's head and look down, so ceilings are skipped and
    walls, furniture and floor show through.
    """
    rows, cols = nav.shape
    zc, xc = np.meshgrid(
        nav.origin[1] + (np.arange(rows) + 0.5) * nav.resolution,
        nav.origin[0] + (np.arange(cols) + 0.5) * nav.resolution,
        indexing="ij",
    )
    top = nav.floor_height + nav.config.agent_height + 0.5
    origins = np.stack([xc, np.full_like(xc, top), zc], axis=-1)
    _, prim, _ = raycaster.cast_from(origins, np.broadcast_to([0.0, -1.0, 0.0], origins.shape))
    labels = np.append(raycaster.scene.face_category, np.int32(0))
    result: NDArray[np.int32] = labels[prim]
    return result


def topdown_image(
    raycaster: Raycaster,
    nav: NavGrid,
    pose: Pose | None = None,
    scale: int = 2,
) -> NDArray[np.uint8]:
    """Top-down picture: categories from above, navigable island brightened, agent drawn.

    Row 0 is the map's -z edge, so "up" in the picture is the agent's yaw-0 heading.
    """
    categories = raycaster.scene.categories
    semantic = topdown_semantic(raycaster, nav)
    rgb = colorize_semantic(semantic, categories).astype(np.float64)
    floor_id = categories.index("floor") if "floor" in categories else -1
    is_floor = (semantic == floor_id) | np.isfinite(nav.cell_floor) & (semantic == 0)
    rgb[is_floor] = 0.55 * rgb[is_floor] + 0.45 * 90
    rgb[nav.island] = 0.35 * rgb[nav.island] + 0.65 * 255
    image = np.repeat(np.repeat(rgb.astype(np.uint8), scale, axis=0), scale, axis=1)
    if pose is not None:
        _draw_agent(image, nav, pose, scale)
    return image


def navigable_image(top: TopDownMap, pose: Pose | None = None, scale: int = 2) -> NDArray[np.uint8]:
    """Top-down picture of any backend's map: navigable cells light on dark, agent drawn."""
    rgb = np.where(top.navigable[..., None], 235, 60).astype(np.uint8) * np.ones(3, dtype=np.uint8)
    image = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
    if pose is not None:
        row, col = top.to_grid(pose.array)
        _draw_agent_at(image, int(row), int(col), 0.1 / top.resolution, pose, scale)
    return image


def _draw_agent(image: NDArray[np.uint8], nav: NavGrid, pose: Pose, scale: int) -> None:
    row, col = nav.cell_of(pose.array)
    _draw_agent_at(image, int(row), int(col), nav.config.agent_radius / nav.resolution, pose, scale)


def _draw_agent_at(
    image: NDArray[np.uint8], row: int, col: int, radius_cells: float, pose: Pose, scale: int
) -> None:
    cy, cx = (float(row) + 0.5) * scale, (float(col) + 0.5) * scale
    radius = max(3.0, radius_cells * scale * 1.5)
    yy, xx = np.mgrid[0 : image.shape[0], 0 : image.shape[1]]
    disc = (yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2
    image[disc] = (220, 30, 30)
    heading = forward_vector(pose.yaw)
    for t in np.linspace(0.0, 3.0 * radius, int(6 * radius)):
        y, x = int(round(cy + t * heading[2])), int(round(cx + t * heading[0]))
        if 0 <= y < image.shape[0] and 0 <= x < image.shape[1]:
            image[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2] = (220, 30, 30)
