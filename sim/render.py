"""Panorama and pinhole rendering by ray casting.

RGB is per-category albedo with Lambert shading from face normals under a fixed sky light
(wrapped so that every wall orientation gets its own shade and geometry reads in the
image). Shading depends only on the face, so it is computed once per scene: a panorama is a
cast plus one compiled pass over the hits, and a pinhole frame is a z-buffer rasterisation
(see :mod:`~embodia.sim.kernels` for why each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodia.sim import kernels
from embodia.sim.geometry import equirect_directions, pinhole_focal
from embodia.sim.raycast import Raycaster
from embodia.sim.scene import Scene, category_albedo

LIGHT_DIRECTION = np.array([0.4, 0.75, 0.53]) / np.linalg.norm([0.4, 0.75, 0.53])
AMBIENT, DIFFUSE = 0.6, 0.4


@dataclass(frozen=True)
class Frame:
    """Raw rendering result: RGB, ray-parameter depth (0 = miss) and category ids."""

    rgb: NDArray[np.uint8]
    depth: NDArray[np.float32]
    semantic: NDArray[np.int32]


def face_colors(scene: Scene) -> NDArray[np.uint8]:
    """Shaded RGB per face, plus a black row at the end for misses."""
    albedo = np.array([category_albedo(c) for c in scene.categories], dtype=np.float64)
    shade = AMBIENT + DIFFUSE * (scene.face_normals.astype(np.float64) @ LIGHT_DIRECTION)
    rgb = albedo[scene.face_category] * np.clip(shade, 0.25, 1.0)[:, None]
    return np.vstack([np.clip(rgb, 0, 255).astype(np.uint8), np.zeros((1, 3), np.uint8)])


class Renderer:
    """Renders equirectangular panoramas (ray cast) and pinhole frames (rasterised)."""

    def __init__(self, scene: Scene, raycaster: Raycaster | None = None) -> None:
        self.scene = scene
        self.raycaster = raycaster or Raycaster(scene)
        self._face_rgb = face_colors(scene)
        self._face_category = np.append(scene.face_category, np.int32(0))
        self._directions: dict[tuple[int, int], NDArray[np.float32]] = {}
        self._rays: dict[tuple[int, int], NDArray[np.float32]] = {}

    def equirect_rays(
        self, camera_position: NDArray[np.floating], yaw: float, height: int, width: int
    ) -> NDArray[np.float32]:
        """World rays (H*W, 6) of a panorama at ``camera_position`` with heading ``yaw``.

        The returned array is a buffer the renderer reuses on the next call of this size.
        """
        if height <= 0 or width <= 0:
            raise ValueError(f"image size must be positive, got {height}x{width}")
        key = (height, width)
        if key not in self._directions:
            d = equirect_directions(height, width)
            self._directions[key] = np.ascontiguousarray(d.reshape(-1, 3), dtype=np.float32)
            self._rays[key] = np.empty((height * width, 6), dtype=np.float32)
        rays = self._rays[key]
        origin = np.asarray(camera_position, dtype=np.float32)
        kernels.world_rays_yaw(self._directions[key], origin, math.cos(yaw), math.sin(yaw), rays)
        return rays

    def panorama(self, camera_position: NDArray[np.floating], yaw: float, height: int, width: int) -> Frame:
        """Equirectangular frame; depth is radial range (the directions are unit length)."""
        rays = self.equirect_rays(camera_position, yaw, height, width)
        t_hit, prim, _ = self.raycaster.cast(rays)
        depth = np.empty((height, width), dtype=np.float32)
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        semantic = np.empty((height, width), dtype=np.int32)
        kernels.shade_hits(
            t_hit,
            prim,
            self.raycaster.miss_id,
            self._face_rgb,
            self._face_category,
            depth.reshape(-1),
            rgb.reshape(-1, 3),
            semantic.reshape(-1),
        )
        return Frame(rgb=rgb, depth=depth, semantic=semantic)

    def pinhole(
        self,
        camera_position: NDArray[np.floating],
        yaw: float,
        height: int,
        width: int,
        hfov_deg: float,
    ) -> Frame:
        """Pinhole frame looking along ``yaw``; depth is planar (distance along the axis).

        Rasterised with a z-buffer; every pixel equals a ray cast through its centre along
        :func:`~embodia.sim.geometry.pinhole_directions` (to float precision), except
        for geometry closer than :data:`~embodia.sim.kernels.NEAR_PLANE`.
        """
        if height <= 0 or width <= 0:
            raise ValueError(f"image size must be positive, got {height}x{width}")
        depth = np.empty((height, width), dtype=np.float32)
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        semantic = np.empty((height, width), dtype=np.int32)
        kernels.rasterize_pinhole(
            self.scene.vertices,
            self.scene.faces,
            np.asarray(camera_position, dtype=np.float64),
            yaw,
            pinhole_focal(width, hfov_deg),
            self._face_rgb,
            self._face_category,
            depth,
            rgb,
            semantic,
        )
        return Frame(rgb=rgb, depth=depth, semantic=semantic)
