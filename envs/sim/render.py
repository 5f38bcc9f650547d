"""Panorama and pinhole rendering by ray casting.

RGB is per-category albedo with Lambert shading from face normals under a fixed sky light
(wrapped so that every wall orientation gets its own shade and geometry reads in the
image). Shading depends only on the face, so it is computed once per scene and a frame is a
cast plus three gathers: that keeps a panorama within a small factor of the bare cast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodia.envs.sim.geometry import equirect_directions, pinhole_directions, yaw_matrix
from embodia.envs.sim.raycast import Raycaster
from embodia.envs.sim.scene import Scene, category_albedo

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
    """Renders equirectangular panoramas and pinhole frames of one scene."""

    def __init__(self, scene: Scene, raycaster: Raycaster | None = None) -> None:
        self.scene = scene
        self.raycaster = raycaster or Raycaster(scene)
        self._face_rgb = face_colors(scene)
        self._face_category = np.append(scene.face_category, np.int32(0))
        self._directions: dict[tuple[str, int, int, float], NDArray[np.float32]] = {}
        self._rays: dict[tuple[str, int, int, float], NDArray[np.float32]] = {}

    def camera_directions(
        self, kind: str, height: int, width: int, hfov_deg: float = 0.0
    ) -> NDArray[np.float32]:
        """Cached camera-frame ray directions, flattened to (H*W, 3)."""
        if height <= 0 or width <= 0:
            raise ValueError(f"image size must be positive, got {height}x{width}")
        key = (kind, height, width, hfov_deg)
        if key not in self._directions:
            if kind == "equirect":
                d = equirect_directions(height, width)
            else:
                d = pinhole_directions(height, width, hfov_deg)
            self._directions[key] = np.ascontiguousarray(d.reshape(-1, 3), dtype=np.float32)
            self._rays[key] = np.empty((height * width, 6), dtype=np.float32)
        return self._directions[key]

    def rays(
        self,
        kind: str,
        camera_position: NDArray[np.floating],
        yaw: float,
        height: int,
        width: int,
        hfov_deg: float = 0.0,
    ) -> NDArray[np.float32]:
        """World rays (H*W, 6) for a camera at ``camera_position`` with heading ``yaw``."""
        directions = self.camera_directions(kind, height, width, hfov_deg)
        rays = self._rays[(kind, height, width, hfov_deg)]
        rays[:, :3] = np.asarray(camera_position, dtype=np.float32)
        np.matmul(directions, yaw_matrix(yaw).T.astype(np.float32), out=rays[:, 3:])
        return rays

    def _shade(self, rays: NDArray[np.float32], height: int, width: int) -> Frame:
        t_hit, prim, _ = self.raycaster.cast(rays)
        depth = np.nan_to_num(t_hit, copy=False, posinf=0.0)
        return Frame(
            rgb=self._face_rgb[prim].reshape(height, width, 3),
            depth=depth.reshape(height, width),
            semantic=self._face_category[prim].reshape(height, width),
        )

    def panorama(self, camera_position: NDArray[np.floating], yaw: float, height: int, width: int) -> Frame:
        """Equirectangular frame; depth is radial range (the directions are unit length)."""
        return self._shade(self.rays("equirect", camera_position, yaw, height, width), height, width)

    def pinhole(
        self,
        camera_position: NDArray[np.floating],
        yaw: float,
        height: int,
        width: int,
        hfov_deg: float,
    ) -> Frame:
        """Pinhole frame looking along ``yaw``; depth is planar (unit optical-axis rays)."""
        rays = self.rays("pinhole", camera_position, yaw, height, width, hfov_deg)
        return self._shade(rays, height, width)
