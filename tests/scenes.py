"""Test helpers: analytic test scenes and the path to ../shared/data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embodia.sim.procedural import box_mesh
from embodia.sim.scene import CATEGORIES, Scene, concatenate
from embodia.sim.worlds import (  # noqa: F401  (the multi-level worlds, for the tests)
    STAIR_RISE,
    UPPER_FLOOR,
    ramp_room,
    terrain_height,
    terrain_patch,
    two_floor_house,
    wedge,
)

REPO = Path(__file__).resolve().parents[1]
SHARED_SCENES = REPO.parent / "shared" / "data" / "scenes"
CAT = {name: i for i, name in enumerate(CATEGORIES)}
WALL = 0.2


def shared_scene(name: str) -> Path:
    path = SHARED_SCENES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent: the real Habitat test scenes live in ../shared/data/scenes")
    return path


def box_room(width: float, depth: float, height: float = 2.5, extra=()) -> Scene:
    """Closed room with interior [0, W] x [0, H] x [0, D] (y-up); ``extra`` adds boxes
    as ``(min_xyz, max_xyz, category)``."""
    t = WALL
    parts = [
        (box_mesh(-t, -t, -t, width + t, 0.0, depth + t), CAT["floor"]),
        (box_mesh(-t, height, -t, width + t, height + t, depth + t), CAT["ceiling"]),
        (box_mesh(-t, 0.0, -t, 0.0, height, depth + t), CAT["wall"]),
        (box_mesh(width, 0.0, -t, width + t, height, depth + t), CAT["wall"]),
        (box_mesh(0.0, 0.0, -t, width, height, 0.0), CAT["wall"]),
        (box_mesh(0.0, 0.0, depth, width, height, depth + t), CAT["wall"]),
    ]
    for lo, hi, category in extra:
        parts.append((box_mesh(*lo, *hi), CAT[category]))
    return concatenate([(v, f, c, i + 1) for i, ((v, f), c) in enumerate(parts)], name="box_room")


def l_corridor(arm: float = 5.0, width: float = 1.0, height: float = 2.5) -> Scene:
    """L-shaped corridor: arm A along +x at z in [0, w], arm B along +z at x in [0, w]."""
    t = WALL
    a, w = arm, width
    walls = [
        ((-t, 0, -t), (a, height, 0.0)),  # outer wall of arm A (z < 0)
        ((-t, 0, 0.0), (0.0, height, a)),  # outer wall of arm B (x < 0)
        ((w, 0, w), (a, height, w + t)),  # inner wall of arm A
        ((w, 0, w), (w + t, height, a)),  # inner wall of arm B
        ((a, 0, -t), (a + t, height, w + t)),  # end of arm A
        ((-t, 0, a), (w + t, height, a + t)),  # end of arm B
        ((w + t, 0, w + t), (a, height, a)),  # solid block filling the L's inside
    ]
    parts = [(box_mesh(-t, -t, -t, a + t, 0.0, a + t), CAT["floor"])]
    parts += [(box_mesh(*lo, *hi), CAT["wall"]) for lo, hi in walls]
    return concatenate([(v, f, c, i + 1) for i, ((v, f), c) in enumerate(parts)], name="l_corridor")


def analytic_box_range(camera: np.ndarray, directions: np.ndarray, size: tuple[float, float, float]):
    """Radial range from ``camera`` inside [0, W] x [0, H] x [0, D] and the axis hit."""
    upper = np.array(size, dtype=np.float64)
    d = directions.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d > 0, (upper - camera) / d, np.where(d < 0, -camera / d, np.inf))
    return np.min(t, axis=-1), np.argmin(t, axis=-1)
