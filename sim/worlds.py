"""Analytic worlds with more than one level, whose navigable geometry is known exactly: a
two-floor house joined by a staircase, a ramp up to a platform, and open undulating terrain.

They are the multi-level cases of the conformance suite (:func:`~embodia.sim.conformance.
check_multilevel`), which every backend passes: export one with ``Scene.export(path)`` for a
backend that loads files.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from embodia.sim.procedural import box_mesh
from embodia.sim.scene import CATEGORIES, Scene, concatenate

CAT = {name: i for i, name in enumerate(CATEGORIES)}
WALL = 0.2
"""Wall and slab thickness, m."""
Part = tuple[NDArray[np.float64], NDArray[np.int64]]


def _walled(
    parts: list[tuple[Part, int]], width: float, depth: float, bottom: float, top: float
) -> list[tuple[Part, int]]:
    """``parts`` with four walls around the interior [0, W] x [0, D], from ``bottom`` to ``top``."""
    t = WALL
    for lo, hi in (
        ((-t, bottom, -t), (0.0, top, depth + t)),
        ((width, bottom, -t), (width + t, top, depth + t)),
        ((0.0, bottom, -t), (width, top, 0.0)),
        ((0.0, bottom, depth), (width, top, depth + t)),
    ):
        parts.append((box_mesh(*lo, *hi), CAT["wall"]))
    return parts


STAIR_RISE, STAIR_RUN, STAIR_STEPS = 0.15, 0.3, 20
UPPER_FLOOR = STAIR_RISE * STAIR_STEPS  # 3.0 m


def two_floor_house(width: float = 8.0, depth: float = 6.0) -> Scene:
    """Two floors (y = 0 and y = 3) joined by a straight solid staircase along +x at z in
    [0, 1] (20 steps of 0.15 x 0.3 m from x = 1 to x = 7), under an opening in the upper slab
    (x in [1, 7], z in [0, 1.3]); walls all round and a roof at y = 5.8."""
    t = WALL
    top = UPPER_FLOOR
    parts = [
        (box_mesh(-t, -t, -t, width + t, 0.0, depth + t), CAT["floor"]),
        # the upper slab, less the opening over the stairs
        (box_mesh(0.0, top - t, 1.3, width, top, depth), CAT["floor"]),
        (box_mesh(7.0, top - t, 0.0, width, top, 1.3), CAT["floor"]),
        (box_mesh(0.0, top - t, 0.0, 1.0, top, 1.3), CAT["floor"]),
        (box_mesh(-t, 5.8, -t, width + t, 6.0, depth + t), CAT["ceiling"]),
    ]
    for step in range(STAIR_STEPS):
        x = 1.0 + STAIR_RUN * step
        parts.append((box_mesh(x, 0.0, 0.0, x + STAIR_RUN, STAIR_RISE * (step + 1), 1.0), CAT["floor"]))
    parts = _walled(parts, width, depth, -t, 6.0)
    return concatenate([(v, f, c, i + 1) for i, ((v, f), c) in enumerate(parts)], name="two_floor_house")


def wedge(x0: float, x1: float, z0: float, z1: float, rise: float) -> Part:
    """A solid ramp rising from y = 0 at x0 to ``rise`` at x1 (outward winding)."""
    v = np.array(
        [[x0, 0, z0], [x1, 0, z0], [x1, rise, z0], [x0, 0, z1], [x1, 0, z1], [x1, rise, z1]], dtype=np.float64
    )
    f = np.array([[0, 2, 1], [3, 4, 5], [0, 3, 5], [0, 5, 2], [1, 2, 5], [1, 5, 4], [0, 1, 4], [0, 4, 3]])
    return v, f


def ramp_room() -> Scene:
    """A 10 x 4 m room whose far part (x in [6, 10]) is a platform 1 m up, reached by a ramp
    (x from 3 to 6, 18 deg) 2 m wide at z in [1, 3]; elsewhere the platform's edge is a 1 m drop."""
    parts = [
        (box_mesh(-WALL, -WALL, -WALL, 10 + WALL, 0.0, 4 + WALL), CAT["floor"]),
        (box_mesh(6.0, 0.0, 0.0, 10.0, 1.0, 4.0), CAT["floor"]),
        (wedge(3.0, 6.0, 1.0, 3.0, 1.0), CAT["floor"]),
        (box_mesh(-WALL, 3.5, -WALL, 10 + WALL, 3.5 + WALL, 4 + WALL), CAT["ceiling"]),
    ]
    parts = _walled(parts, 10.0, 4.0, -WALL, 3.5)
    return concatenate([(v, f, c, i + 1) for i, ((v, f), c) in enumerate(parts)], name="ramp_room")


def terrain_height(x: NDArray[np.float64], z: NDArray[np.float64]) -> NDArray[np.float64]:
    """Gentle hills: at most 0.5 m, slopes under 16 deg."""
    return 0.5 * np.sin(x / 2.0) * np.cos(z / 3.0)


def terrain_patch(size: float = 20.0, step: float = 0.25) -> Scene:
    """An open size x size m heightfield (no walls, no roof): undulating ground, as the
    terrain stages habitat-sim's tests load."""
    n = int(round(size / step)) + 1
    xs = np.linspace(0.0, size, n)
    x, z = np.meshgrid(xs, xs, indexing="ij")
    vertices = np.stack([x, terrain_height(x, z), z], axis=-1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(n - 1), np.arange(n - 1), indexing="ij")
    a, b, c, d = i * n + j, (i + 1) * n + j, i * n + j + 1, (i + 1) * n + j + 1  # b: +x, c: +z
    faces = np.concatenate([np.stack([a, c, b], -1), np.stack([b, c, d], -1)]).reshape(-1, 3)
    return concatenate([(vertices, faces, CAT["floor"], 1)], name="terrain_patch")
