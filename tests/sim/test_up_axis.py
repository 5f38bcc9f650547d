"""A mesh file's up axis: the same room stored y-up (glTF's convention) and z-up (Habitat's) loads
upright either way; a stage config still decides where there is one; `--up` overrides."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from scenes import box_room, shared_scene
from typer.testing import CliRunner

from embodia.cli import app
from embodia.errors import SceneError
from embodia.sim import EmbeddedSimulator, load_scene
from embodia.sim.geometry import Z_UP_TO_Y_UP
from embodia.sim.protocol import SimConfig
from embodia.sim.scene import Scene

SIDE = 4.0
HEIGHT = 2.5
RADIUS = SimConfig().agent_radius
# The 4 m x 4 m floor less the agent's radius along every wall.
NAVIGABLE_M2 = (SIDE - 2 * RADIUS) ** 2


def _write_room(path: Path, up: str) -> Path:
    """The box room (interior 4 x 2.5 x 4 m) as a .glb stored ``up``-up, with no stage config."""
    room = box_room(SIDE, SIDE, HEIGHT)
    # Z_UP_TO_Y_UP takes file z-up coordinates to y-up; its transpose stores a y-up room z-up.
    vertices = room.vertices if up == "y" else room.vertices @ Z_UP_TO_Y_UP
    stored = Scene(vertices, room.faces, room.face_category, room.face_instance, list(room.categories))
    path.write_bytes(stored.to_glb())
    return path


@pytest.mark.parametrize("stored_up", ["y", "z"])
def test_y_up_and_z_up_rooms_load_upright_with_the_same_floor(tmp_path, stored_up: str) -> None:
    path = _write_room(tmp_path / f"room-{stored_up}.glb", stored_up)
    sim = EmbeddedSimulator()
    pose = sim.reset(path)
    lo, hi = sim.scene.bounds
    # Upright: the room's 2.5 m height (plus the 0.2 m floor and ceiling slabs) lies along +y.
    assert hi[1] - lo[1] == pytest.approx(HEIGHT + 0.4, abs=1e-4)
    assert hi[0] - lo[0] == pytest.approx(SIDE + 0.4, abs=1e-4)
    assert hi[2] - lo[2] == pytest.approx(SIDE + 0.4, abs=1e-4)
    assert sim.nav.floor_height == pytest.approx(0.0, abs=0.06)
    assert pose.position[1] == pytest.approx(0.0, abs=0.06)
    assert sim.nav.navigable_area == pytest.approx(NAVIGABLE_M2, rel=0.03)
    # The sensor looks down onto the floor 1.5 m below it, not onto a wall.
    pano = sim.panorama(32, 64)
    below = pano["depth"][-2:]
    assert np.allclose(below[below > 0], sim.config.sensor_height, atol=0.1)


@pytest.mark.parametrize(("stored_up", "wrong"), [("y", "z"), ("z", "y")])
def test_the_up_override_wins_over_detection(tmp_path, stored_up: str, wrong: str) -> None:
    path = _write_room(tmp_path / "room.glb", stored_up)
    assert load_scene(path, up=stored_up).bounds.tolist() == load_scene(path).bounds.tolist()
    sideways = EmbeddedSimulator(up=wrong)  # type: ignore[arg-type]
    sideways.reset(path)
    # On its side the agent walks a 4 m x 2.5 m wall.
    assert sideways.nav.navigable_area == pytest.approx((SIDE - 2 * RADIUS) * (HEIGHT - 2 * RADIUS), rel=0.05)


def test_stage_config_decides_over_detection(tmp_path) -> None:
    path = _write_room(tmp_path / "room.glb", "y")
    (tmp_path / "room.stage_config.json").write_text(json.dumps({"up": [0, 0, 1], "front": [0, 1, 0]}))
    lo, hi = load_scene(path).bounds
    assert hi[1] - lo[1] == pytest.approx(SIDE + 0.4, abs=1e-4)  # taken z-up as told: on its side


def test_habitat_stage_without_its_config_still_loads_z_up(tmp_path) -> None:
    original = shared_scene("simple_room.glb")
    copy = tmp_path / "bare.glb"
    copy.write_bytes(original.read_bytes())
    assert load_scene(copy).bounds.tolist() == load_scene(original).bounds.tolist()


def test_a_room_too_close_to_call_keeps_the_format_default_and_warns(tmp_path, caplog) -> None:
    # A 3 x 3 m room 3.4 m high: a 3 x 3.4 m wall (10.2 m2) is 88% of the floor slab's top (3.4 x 3.4 m).
    room = box_room(3.0, 3.0, 3.4)
    path = tmp_path / "cube.glb"
    path.write_bytes(room.to_glb())
    with caplog.at_level(logging.WARNING, logger="embodia.sim.loading"):
        loaded = load_scene(path)
    as_z_up = room.vertices @ Z_UP_TO_Y_UP.T  # the .glb default, habitat's: z-up
    assert np.allclose(loaded.bounds, [as_z_up.min(axis=0), as_z_up.max(axis=0)], atol=1e-5)
    (record,) = [r for r in caplog.records if "up axis" in r.getMessage()]
    assert "cube.glb" in record.getMessage() and "taking z-up" in record.getMessage()
    assert "--up y or --up z" in record.getMessage()


def test_bad_up_axis_is_refused(tmp_path) -> None:
    path = _write_room(tmp_path / "room.glb", "y")
    with pytest.raises(SceneError, match="invalid up axis 'x'"):
        load_scene(path, up="x")  # type: ignore[arg-type]


runner = CliRunner()


@pytest.mark.parametrize("stored_up", ["y", "z"])
def test_explore_takes_up(tmp_path, stored_up: str) -> None:
    path = _write_room(tmp_path / "room.glb", stored_up)
    out = tmp_path / "run"
    args = ["explore", "--agent", "frontier", "--scene", str(path), "--up", stored_up, "--out", str(out)]
    args += ["--steps", "3", "--height", "16", "--width", "32", "--no-video"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["explorable_m2"] == pytest.approx(NAVIGABLE_M2, rel=0.03)


@pytest.mark.parametrize("command", [["explore", "--out", "OUT"], ["eval", "explore", "--out", "OUT"]])
def test_explore_refuses_a_bad_up_in_one_line(tmp_path, command: list[str]) -> None:
    path = _write_room(tmp_path / "room.glb", "y")
    args = [str(tmp_path / "run") if a == "OUT" else a for a in command]
    scene = ["--scene", str(path)] if command[0] == "explore" else ["--scenes", str(path)]
    result = runner.invoke(app, [*args, "--agent", "frontier", *scene, "--up", "x"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "invalid --up 'x'" in lines[0], result.output
    assert not (tmp_path / "run").exists()
