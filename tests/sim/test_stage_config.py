"""A habitat stage config beside a mesh places it as habitat-sim does: units_to_meters, the
up/front rotation, scale along the world axes and the origin; a terrain stage stored z-up
loads as walkable undulating ground."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scenes import box_room, terrain_height, terrain_patch

from embodia.errors import SceneError
from embodia.sim import EmbeddedSimulator
from embodia.sim.loading import load_scene
from embodia.sim.scene import Scene, stage_config_path

R = 0.1


def _export(scene: Scene, path: Path, vertices: np.ndarray, stage: dict[str, Any]) -> Path:
    """``scene`` with its vertices replaced (the mesh as the file stores it), written as
    ``path`` with ``stage`` as its stage config."""
    stored = Scene(
        vertices=vertices.astype(np.float32),
        faces=scene.faces,
        face_category=scene.face_category,
        face_instance=scene.face_instance,
        categories=scene.categories,
        name=path.stem,
    )
    stored.export(path)
    stage_config_path(path).write_text(json.dumps({"render_asset": path.name, **stage}))
    return path


def test_a_terrain_stage_stored_z_up_is_walkable_ground(tmp_path: Path) -> None:
    terrain = terrain_patch()
    x, height, z = terrain.vertices.T
    # z-up with front +y: the file's (x, y, z) is the world's (x, -z, y)
    path = _export(
        terrain,
        tmp_path / "terrain.glb",
        np.stack([x, -z, height], -1),
        {"up": [0, 0, 1], "front": [0, 1, 0]},
    )
    sim = EmbeddedSimulator()
    sim.reset(str(path))
    assert len(sim.nav.floors) == 1
    assert sim.nav.navigable_area == pytest.approx((20 - 2 * R) ** 2, rel=0.01)
    expected = float(terrain_height(np.array(6.1), np.array(13.4)))
    assert sim.nav.floor_at([6.1, 0.0, 13.4]) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    ("stage", "stored_scale", "size", "shift"),
    [
        ({"units_to_meters": 0.01}, 100.0, (4.0, 3.0), (0.0, 0.0, 0.0)),  # a mesh in centimetres
        ({"scale": [2.0, 1.0, 1.0]}, 1.0, (8.0, 3.0), (0.0, 0.0, 0.0)),
        ({"scale": [-1.0, 1.0, 1.0]}, 1.0, (4.0, 3.0), (0.0, 0.0, 0.0)),  # mirrored: the winding flips too
        ({"origin": [10.0, 0.5, -5.0]}, 1.0, (4.0, 3.0), (10.0, 0.5, -5.0)),
        ({"units_to_meters": 0.5, "scale": [1, 1, 2], "origin": [1, 0, 1]}, 2.0, (4.0, 6.0), (1.0, 0.0, 1.0)),
    ],
)
def test_a_scaled_stage_is_placed_in_metres(
    tmp_path: Path,
    stage: dict[str, Any],
    stored_scale: float,
    size: tuple[float, float],
    shift: tuple[float, ...],
) -> None:
    room = box_room(4.0, 3.0)
    path = _export(
        room,
        tmp_path / "room.glb",
        room.vertices * stored_scale,
        {"up": [0, 1, 0], "front": [0, 0, -1], **stage},
    )
    scene = load_scene(path)
    lo, hi = scene.bounds
    width, depth = size
    assert hi[0] - lo[0] == pytest.approx(width + (0.4 if width == 4.0 else 0.8), abs=1e-3)
    assert hi[2] - lo[2] == pytest.approx(depth + (0.4 if depth == 3.0 else 0.8), abs=1e-3)
    if stage.get("scale", [1])[0] > 0:
        assert lo[0] == pytest.approx(-0.2 * (width / 4.0) + shift[0], abs=1e-3)
    assert lo[1] == pytest.approx(-0.2 + shift[1], abs=1e-3)
    sim = EmbeddedSimulator()
    sim.reset(str(path))
    assert sim.nav.navigable_area == pytest.approx((width - 2 * R) * (depth - 2 * R), rel=0.02)
    assert sim.nav.floor_height == pytest.approx(shift[1], abs=1e-3)


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ({"units_to_meters": -1}, "'units_to_meters' must be a positive number"),
        ({"units_to_meters": "cm"}, "'units_to_meters' must be a positive number"),
        ({"scale": [1, 0, 1]}, "'scale' cannot be 0"),
        ({"scale": [1, 1]}, "'scale' must be 3 numbers"),
        ({"origin": "here"}, "'origin' must be 3 numbers"),
        ({"origin": [0, None, 0]}, "'origin' must be 3 numbers"),
    ],
)
def test_a_bad_stage_config_is_an_error_naming_the_field(
    tmp_path: Path, stage: dict[str, Any], message: str
) -> None:
    room = box_room(4.0, 3.0)
    path = _export(room, tmp_path / "room.glb", room.vertices, stage)
    with pytest.raises(SceneError, match=message) as error:
        load_scene(path)
    assert "room.stage_config.json" in str(error.value)
