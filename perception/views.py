"""Perspective views cut out of a 360° panorama: what a camera pointed some way from the
agent's heading would see, taken from the equirectangular sensor data already rendered
(no new rendering, so any simulator backend gives it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodia.sim.geometry import direction_to_equirect_pixel, pinhole_directions


@dataclass(frozen=True)
class View:
    """A perspective view: RGB and the category id of each pixel."""

    rgb: NDArray[np.uint8]
    semantic: NDArray[np.int32]


def panorama_view(
    rgb: NDArray[np.uint8],
    semantic: NDArray[np.integer],
    direction_deg: float,
    *,
    hfov_deg: float = 90.0,
    height: int = 128,
    width: int = 128,
) -> View:
    """The pinhole view ``direction_deg`` clockwise (seen from above) from the panorama's
    heading, with a horizontal field of view of ``hfov_deg``: each pixel takes the panorama
    pixel its ray falls in (nearest, columns wrapping round)."""
    if height < 1 or width < 1:
        raise ValueError(f"a view needs a positive size, got {height}x{width}")
    theta = math.radians(direction_deg)
    ray = pinhole_directions(height, width, hfov_deg, dtype=np.float64)
    # the view camera's right, up and forward axes in the panorama's camera frame
    right = np.array([math.cos(theta), 0.0, math.sin(theta)])
    forward = np.array([math.sin(theta), 0.0, -math.cos(theta)])
    directions = ray[..., :1] * right + ray[..., 1:2] * np.array([0.0, 1.0, 0.0]) - ray[..., 2:] * forward
    pano_h, pano_w = semantic.shape
    rows, cols = direction_to_equirect_pixel(directions, pano_h, pano_w)
    r = np.clip(np.rint(rows).astype(np.int64), 0, pano_h - 1)
    c = np.rint(cols).astype(np.int64) % pano_w
    return View(rgb=np.ascontiguousarray(rgb[r, c]), semantic=np.asarray(semantic[r, c], dtype=np.int32))
