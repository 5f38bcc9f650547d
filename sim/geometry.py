"""Frames, rotations and pixel <-> ray maps in Habitat conventions.

World frame: y-up, right-handed, forward is -z, right is +x. An agent's heading is a yaw
angle about +y; yaw 0 looks along -z and positive yaw turns left (counter-clockwise seen
from above), as habitat-sim's ``turn_left``.

Equirectangular panorama (H rows, W columns), as habitat-sim's equirect sensor lays it out::

    lon = 2*pi*(c + 0.5)/W - pi      # 0 = forward (-z), +pi/2 = right (+x)
    lat = pi/2 - pi*(r + 0.5)/H      # +pi/2 = up
    d   = (cos(lat) sin(lon), sin(lat), -cos(lat) cos(lon))

so the centre column looks forward, the quarter column left, the three-quarter column right.
Pinhole camera: OpenGL-style camera axes (x right, y up, looking -z), square pixels,
horizontal field of view ``hfov``; pinhole ray directions have unit length along the optical
axis so a ray parameter is planar (z) depth.

These functions are public because the mapper and the waypoint back-projection need the
exact inverse of what the renderer casts.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.floating]

# Habitat's legacy .glb stages (MP3D, Gibson, HM3D) are authored z-up with front +y.
Z_UP_TO_Y_UP: NDArray[np.float64] = np.array(
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]], dtype=np.float64
)


def yaw_matrix(yaw: float) -> NDArray[np.float64]:
    """Rotation about +y by ``yaw`` radians (positive = counter-clockwise from above)."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]], dtype=np.float64)


def forward_vector(yaw: float) -> NDArray[np.float64]:
    """Unit horizontal heading of an agent with this yaw (yaw 0 -> -z)."""
    return np.array([-math.sin(yaw), 0.0, -math.cos(yaw)], dtype=np.float64)


def yaw_of_direction(direction: ArrayLike) -> float:
    """Yaw that makes an agent face the horizontal part of ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    return math.atan2(-d[0], -d[2])


def wrap_angle(angle: float) -> float:
    """Wrap an angle to [-pi, pi)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def yaw_to_quaternion(yaw: float) -> NDArray[np.float64]:
    """Quaternion (w, x, y, z) of a rotation by ``yaw`` about +y (habitat-sim's order)."""
    return np.array([math.cos(yaw / 2.0), 0.0, math.sin(yaw / 2.0), 0.0], dtype=np.float64)


def quaternion_to_yaw(q: ArrayLike) -> float:
    """Yaw of a (w, x, y, z) quaternion: the heading of its rotated -z axis."""
    w, x, y, z = (float(v) for v in np.asarray(q, dtype=np.float64))
    # Third column of the rotation matrix, negated: R @ (0, 0, -1).
    fx = -(2.0 * (x * z + w * y))
    fz = -(1.0 - 2.0 * (x * x + y * y))
    return math.atan2(-fx, -fz)


def rotation_from_up_front(up: ArrayLike, front: ArrayLike) -> NDArray[np.float64]:
    """Rotation taking a file's (up, front) axes onto Habitat's (+y, -z).

    ``up=(0,0,1), front=(0,1,0)`` (habitat-sim's default for .glb stages) gives
    :data:`Z_UP_TO_Y_UP`.
    """
    u = np.asarray(up, dtype=np.float64)
    f = np.asarray(front, dtype=np.float64)
    if u.shape != (3,) or f.shape != (3,):
        raise ValueError("up and front must be 3-vectors")
    nu, nf = np.linalg.norm(u), np.linalg.norm(f)
    if nu < 1e-9 or nf < 1e-9:
        raise ValueError("up and front must be non-zero")
    u, f = u / nu, f / nf
    if abs(float(u @ f)) > 1e-6:
        raise ValueError(f"up {u.tolist()} and front {f.tolist()} are not perpendicular")
    right = np.cross(f, u)
    source = np.stack([right, u, f], axis=1)
    target = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]).T
    return np.asarray(target @ source.T)


# --------------------------------------------------------------------------- equirect


def equirect_angles(
    rows: ArrayLike, cols: ArrayLike, height: int, width: int
) -> tuple[FloatArray, FloatArray]:
    """(lat, lon) in radians of (possibly fractional) pixel coordinates."""
    r = np.asarray(rows, dtype=np.float64)
    c = np.asarray(cols, dtype=np.float64)
    lon = 2.0 * math.pi * (c + 0.5) / width - math.pi
    lat = math.pi / 2.0 - math.pi * (r + 0.5) / height
    return lat, lon


def equirect_pixel_to_direction(rows: ArrayLike, cols: ArrayLike, height: int, width: int) -> FloatArray:
    """Unit ray directions (..., 3) in the camera frame for pixel coordinates."""
    lat, lon = equirect_angles(rows, cols, height, width)
    cl = np.cos(lat)
    return np.stack([cl * np.sin(lon), np.sin(lat), -cl * np.cos(lon)], axis=-1)


def equirect_directions(height: int, width: int, dtype: type = np.float32) -> FloatArray:
    """Unit camera-frame ray directions of every pixel centre, shape (H, W, 3)."""
    r, c = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return equirect_pixel_to_direction(r, c, height, width).astype(dtype)


def direction_to_equirect_pixel(
    directions: ArrayLike, height: int, width: int
) -> tuple[FloatArray, FloatArray]:
    """Fractional (row, col) of camera-frame directions; the inverse of the above.

    Directions need not be unit length. Columns wrap into [-0.5, W - 0.5).
    """
    d = np.asarray(directions, dtype=np.float64)
    x, y, z = d[..., 0], d[..., 1], d[..., 2]
    lon = np.arctan2(x, -z)
    lat = np.arctan2(y, np.hypot(x, z))
    col = (lon + math.pi) / (2.0 * math.pi) * width - 0.5
    row = (math.pi / 2.0 - lat) / math.pi * height - 0.5
    return row, col


# --------------------------------------------------------------------------- pinhole


def pinhole_focal(width: int, hfov_deg: float) -> float:
    """Focal length in pixels for a horizontal field of view."""
    if not 0.0 < hfov_deg < 180.0:
        raise ValueError(f"hfov must be in (0, 180) degrees, got {hfov_deg}")
    return (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)


def pinhole_pixel_to_direction(
    rows: ArrayLike, cols: ArrayLike, height: int, width: int, hfov_deg: float
) -> FloatArray:
    """Camera-frame directions with z = -1 (so ray parameter = planar depth)."""
    f = pinhole_focal(width, hfov_deg)
    r = np.asarray(rows, dtype=np.float64)
    c = np.asarray(cols, dtype=np.float64)
    x = (c + 0.5 - width / 2.0) / f
    y = -(r + 0.5 - height / 2.0) / f
    return np.stack([x, y, -np.ones_like(x)], axis=-1)


def pinhole_directions(height: int, width: int, hfov_deg: float, dtype: type = np.float32) -> FloatArray:
    """Camera-frame directions of every pixel centre, shape (H, W, 3), unit optical depth."""
    r, c = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return pinhole_pixel_to_direction(r, c, height, width, hfov_deg).astype(dtype)


def direction_to_pinhole_pixel(
    directions: ArrayLike, height: int, width: int, hfov_deg: float
) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """Fractional (row, col) of camera-frame directions and a mask of those in front."""
    f = pinhole_focal(width, hfov_deg)
    d = np.asarray(directions, dtype=np.float64)
    depth = -d[..., 2]
    in_front = depth > 1e-9
    safe = np.where(in_front, depth, 1.0)
    col = d[..., 0] / safe * f + width / 2.0 - 0.5
    row = -d[..., 1] / safe * f + height / 2.0 - 0.5
    return row, col, in_front


def camera_to_world(points_cam: ArrayLike, camera_position: ArrayLike, yaw: float) -> FloatArray:
    """Transform camera-frame points (..., 3) into the world for a yaw-only camera."""
    p = np.asarray(points_cam, dtype=np.float64)
    return p @ yaw_matrix(yaw).T + np.asarray(camera_position, dtype=np.float64)


def world_to_camera(points_world: ArrayLike, camera_position: ArrayLike, yaw: float) -> FloatArray:
    """Inverse of :func:`camera_to_world`."""
    p = np.asarray(points_world, dtype=np.float64) - np.asarray(camera_position, dtype=np.float64)
    return p @ yaw_matrix(yaw)
