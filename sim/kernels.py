"""Compiled (numba) per-pixel kernels of the renderer.

Why compiled: a 512x1024 panorama is half a million rays, and numpy's fancy-index gathers
and BLAS rotations around the cast cost as much as the cast itself. BLAS matmuls are also
avoided because OpenBLAS worker threads keep spinning after the call and slow down Open3D's
own threads for the next cast by a third. The pinhole camera is rasterised with a z-buffer
instead of ray cast: at 256x256 a rasteriser touches only the triangles in view, and gives
the same planar depth at every pixel centre as a ray through it (tests compare the two).

All kernels write into caller-provided arrays, so frames can reuse buffers.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange
from numpy.typing import NDArray

# OpenMP first: it is safe to call from several Python threads (the workqueue layer aborts
# the process on concurrent launches), and trying TBB first warns about Open3D's old TBB.
numba.config.THREADING_LAYER_PRIORITY = ["omp", "workqueue", "tbb"]  # type: ignore[attr-defined]

#: Closest planar depth the pinhole rasteriser draws (triangles are clipped against it).
NEAR_PLANE = 1e-3
#: Rows per parallel band of the rasteriser.
BAND_ROWS = 16


@njit(parallel=True, cache=True, fastmath=False)
def world_rays_yaw(
    directions: NDArray[np.float32],
    origin: NDArray[np.float32],
    cos_yaw: float,
    sin_yaw: float,
    out: NDArray[np.float32],
) -> None:
    """Camera-frame directions (N, 3) turned by a yaw about +y into world rays (N, 6)."""
    c = np.float32(cos_yaw)
    s = np.float32(sin_yaw)
    ox, oy, oz = origin[0], origin[1], origin[2]
    for i in prange(directions.shape[0]):
        dx = directions[i, 0]
        dz = directions[i, 2]
        out[i, 0] = ox
        out[i, 1] = oy
        out[i, 2] = oz
        out[i, 3] = c * dx + s * dz
        out[i, 4] = directions[i, 1]
        out[i, 5] = c * dz - s * dx


@njit(parallel=True, cache=True)
def shade_hits(
    t_hit: NDArray[np.float32],
    prim: NDArray[np.uint32],
    miss_id: int,
    face_rgb: NDArray[np.uint8],
    face_category: NDArray[np.int32],
    depth: NDArray[np.float32],
    rgb: NDArray[np.uint8],
    semantic: NDArray[np.int32],
) -> None:
    """Per ray: depth (0 on a miss), RGB and category of the face hit (the miss row otherwise)."""
    for i in prange(t_hit.shape[0]):
        f = prim[i]
        t = t_hit[i]
        if f >= miss_id or not math.isfinite(t):
            f = miss_id
            t = np.float32(0.0)
        depth[i] = t
        rgb[i, 0] = face_rgb[f, 0]
        rgb[i, 1] = face_rgb[f, 1]
        rgb[i, 2] = face_rgb[f, 2]
        semantic[i] = face_category[f]


@njit(cache=True)
def _clip_near(cam: NDArray[np.float64], near: float, out: NDArray[np.float64]) -> int:
    """Sutherland-Hodgman clip of one camera-frame triangle (3, 3) to depth >= near.

    Depth is -z (the camera looks down -z). Writes up to four vertices; returns the count.
    """
    n = 0
    for k in range(3):
        a = cam[k]
        b = cam[(k + 1) % 3]
        da = -a[2] - near
        db = -b[2] - near
        if da >= 0.0:
            out[n, :] = a
            n += 1
        if (da >= 0.0) != (db >= 0.0):
            t = da / (da - db)
            out[n, :] = a + t * (b - a)
            n += 1
    return n


@njit(cache=True)
def _project_triangles(
    vertices: NDArray[np.float32],
    faces: NDArray[np.int32],
    camera_position: NDArray[np.float64],
    cos_yaw: float,
    sin_yaw: float,
    focal: float,
    height: int,
    width: int,
    near: float,
) -> tuple[NDArray[np.float64], NDArray[np.int64], int]:
    """Clip every face to the near plane and project it to the screen.

    Returns screen triangles (M, 3, 3) as (x, y, 1/depth) per vertex, the face each came
    from, and M. Faces wholly behind the camera or outside the image are dropped here, so
    the banded fill below only sees what is in view.
    """
    n_faces = faces.shape[0]
    screen = np.empty((2 * n_faces, 3, 3), dtype=np.float64)
    source = np.empty(2 * n_faces, dtype=np.int64)
    cam = np.empty((3, 3), dtype=np.float64)
    poly = np.empty((4, 3), dtype=np.float64)
    proj = np.empty((4, 3), dtype=np.float64)
    m = 0
    for f in range(n_faces):
        for k in range(3):
            v = vertices[faces[f, k]]
            px = v[0] - camera_position[0]
            py = v[1] - camera_position[1]
            pz = v[2] - camera_position[2]
            # World -> camera is the inverse yaw rotation about +y.
            cam[k, 0] = cos_yaw * px - sin_yaw * pz
            cam[k, 1] = py
            cam[k, 2] = sin_yaw * px + cos_yaw * pz
        n = _clip_near(cam, near, poly)
        if n < 3:
            continue
        inside_x_lo = inside_x_hi = inside_y_lo = inside_y_hi = False
        for k in range(n):
            d = -poly[k, 2]
            sx = focal * poly[k, 0] / d + width / 2.0
            sy = -focal * poly[k, 1] / d + height / 2.0
            proj[k, 0] = sx
            proj[k, 1] = sy
            proj[k, 2] = 1.0 / d
            inside_x_lo |= sx >= 0.0
            inside_x_hi |= sx <= width
            inside_y_lo |= sy >= 0.0
            inside_y_hi |= sy <= height
        if not (inside_x_lo and inside_x_hi and inside_y_lo and inside_y_hi):
            continue
        for k in range(1, n - 1):  # fan triangulation of the clipped polygon
            screen[m, 0] = proj[0]
            screen[m, 1] = proj[k]
            screen[m, 2] = proj[k + 1]
            source[m] = f
            m += 1
    return screen, source, m


@njit(parallel=True, cache=True)
def _fill_bands(
    screen: NDArray[np.float64],
    source: NDArray[np.int64],
    count: int,
    height: int,
    width: int,
    inv_depth: NDArray[np.float64],
    face_id: NDArray[np.int64],
) -> None:
    """Z-buffer fill of screen triangles, parallel over bands of rows (no write races).

    A pixel (r, c) samples its centre (c + 0.5, r + 0.5); edges are inclusive, so shared
    edges leave no gaps (the depth test settles pixels drawn twice). 1/depth is affine in
    screen space, so interpolating it is exact for planar triangles.
    """
    n_bands = (height + BAND_ROWS - 1) // BAND_ROWS
    for band in prange(n_bands):
        row0 = band * BAND_ROWS
        row1 = min(row0 + BAND_ROWS, height)
        for t in range(count):
            x0, y0, w0 = screen[t, 0, 0], screen[t, 0, 1], screen[t, 0, 2]
            x1, y1, w1 = screen[t, 1, 0], screen[t, 1, 1], screen[t, 1, 2]
            x2, y2, w2 = screen[t, 2, 0], screen[t, 2, 1], screen[t, 2, 2]
            area = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0)
            if area == 0.0:
                continue
            ymin = min(y0, y1, y2)
            ymax = max(y0, y1, y2)
            r_lo = max(row0, int(math.ceil(ymin - 0.5)))
            r_hi = min(row1 - 1, int(math.floor(ymax - 0.5)))
            if r_lo > r_hi:
                continue
            xmin = min(x0, x1, x2)
            xmax = max(x0, x1, x2)
            c_lo = max(0, int(math.ceil(xmin - 0.5)))
            c_hi = min(width - 1, int(math.floor(xmax - 0.5)))
            if c_lo > c_hi:
                continue
            inv_area = 1.0 / area
            for r in range(r_lo, r_hi + 1):
                py = r + 0.5
                for c in range(c_lo, c_hi + 1):
                    px = c + 0.5
                    b0 = ((x1 - px) * (y2 - py) - (x2 - px) * (y1 - py)) * inv_area
                    b1 = ((x2 - px) * (y0 - py) - (x0 - px) * (y2 - py)) * inv_area
                    b2 = 1.0 - b0 - b1
                    if b0 < -1e-12 or b1 < -1e-12 or b2 < -1e-12:
                        continue
                    w = b0 * w0 + b1 * w1 + b2 * w2
                    if w > inv_depth[r, c]:
                        inv_depth[r, c] = w
                        face_id[r, c] = source[t]


def rasterize_pinhole(
    vertices: NDArray[np.float32],
    faces: NDArray[np.int32],
    camera_position: NDArray[np.float64],
    yaw: float,
    focal: float,
    face_rgb: NDArray[np.uint8],
    face_category: NDArray[np.int32],
    depth: NDArray[np.float32],
    rgb: NDArray[np.uint8],
    semantic: NDArray[np.int32],
) -> None:
    """Planar depth (0 where nothing is drawn), RGB and category ids of a pinhole camera.

    ``face_rgb`` / ``face_category`` carry one extra "miss" row at index ``len(faces)``.
    """
    height, width = depth.shape
    screen, source, count = _project_triangles(
        vertices,
        faces,
        np.asarray(camera_position, dtype=np.float64),
        math.cos(yaw),
        math.sin(yaw),
        focal,
        height,
        width,
        NEAR_PLANE,
    )
    inv_depth = np.zeros((height, width), dtype=np.float64)
    face_id = np.full((height, width), -1, dtype=np.int64)
    _fill_bands(screen, source, count, height, width, inv_depth, face_id)
    # Same shading pass as ray casting: planar depth plays the ray parameter, undrawn = miss.
    drawn = face_id >= 0
    t_hit = np.full(height * width, np.inf, dtype=np.float32)
    np.divide(1.0, inv_depth.reshape(-1), out=t_hit, where=drawn.reshape(-1), casting="unsafe")
    prim = np.where(drawn, face_id, len(faces)).astype(np.uint32).reshape(-1)
    shade_hits(
        t_hit,
        prim,
        len(faces),
        face_rgb,
        face_category,
        depth.reshape(-1),
        rgb.reshape(-1, 3),
        semantic.reshape(-1),
    )
