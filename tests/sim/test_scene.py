"""Scene loading (a real Habitat stage), procedural houses and their determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scenes import shared_scene

from embodia.errors import SceneError
from embodia.sim import EmbeddedSimulator, load_scene
from embodia.sim.procedural import FURNITURE, generate_house, parse_procedural_spec
from embodia.sim.scene import CATEGORIES, Scene, category_from_name

FURNITURE_CATEGORIES = set(CATEGORIES) - {"void", "wall", "floor", "ceiling", "door", "object"}


def test_simple_room_stage_loads_y_up_with_floor_at_zero() -> None:
    path = shared_scene("simple_room.glb")
    scene = load_scene(path)
    lo, hi = scene.bounds
    # Stored z-up (file z in -0.06..2.15): after rotation y spans that range, +y up.
    assert lo[1] == pytest.approx(-0.061, abs=0.01) and hi[1] == pytest.approx(2.154, abs=0.01)
    assert hi[0] - lo[0] == pytest.approx(10.5, abs=0.2) and hi[2] - lo[2] == pytest.approx(10.8, abs=0.2)
    sim = EmbeddedSimulator()
    pose = sim.reset(path)
    assert sim.nav.floor_height == pytest.approx(0.0, abs=0.16)  # slab top at file z = 0.145
    assert sim.nav.navigable_area > 50.0
    pano = sim.panorama(64, 128)
    assert (pano["depth"] > 0).mean() > 0.3  # open room: the floor below, sky above
    below = pano["depth"][-5:]
    assert np.allclose(
        below[below > 0],
        sim.config.sensor_height + pose.position[1] - sim.nav.floor_height,
        atol=0.1,
    )


def test_mesh_without_floor_is_rejected() -> None:
    wall = Scene(
        vertices=np.array([[0, 0, 0], [4, 0, 0], [4, 2.5, 0], [0, 2.5, 0]], dtype=np.float32),
        faces=np.array([[0, 1, 2], [0, 2, 3]]),
        face_category=np.ones(2),
        face_instance=np.ones(2),
    )
    with pytest.raises(SceneError, match="has no floor"):
        EmbeddedSimulator().reset(wall)


def test_same_seed_same_bytes_different_seed_different_house() -> None:
    a, b = generate_house(7), generate_house(7)
    assert a.mesh_hash() == b.mesh_hash()
    assert a.to_glb() == b.to_glb()
    sims = [EmbeddedSimulator(), EmbeddedSimulator()]
    panos = [s.panorama(64, 128) for s in sims if s.reset("procedural:seed=7") is not None]
    assert panos[0]["rgb"].tobytes() == panos[1]["rgb"].tobytes()
    assert panos[0]["depth"].tobytes() == panos[1]["depth"].tobytes()
    hashes = {generate_house(seed).mesh_hash() for seed in range(8)}
    assert len(hashes) == 8


@pytest.mark.parametrize("rooms", [2, 5, 8])
def test_procedural_house_has_rooms_walls_ceiling_and_furniture(rooms: int) -> None:
    scene = generate_house(3, rooms=rooms)
    present = scene.present_categories()
    assert {"wall", "floor", "ceiling"} <= set(present)
    assert len(FURNITURE_CATEGORIES & set(present)) >= min(6, 2 * rooms)
    sim = EmbeddedSimulator()
    sim.reset(scene)
    # Rooms are connected by doorways: the island covers most of the floor plan.
    floor_area = present["floor"] / 2  # slab top + bottom
    assert sim.nav.navigable_area > 0.35 * floor_area


def test_houses_use_at_least_ten_categories_across_seeds() -> None:
    seen: set[str] = set()
    for seed in range(4):
        seen |= set(generate_house(seed, rooms=6).present_categories())
    assert len(FURNITURE_CATEGORIES & seen) >= 10
    assert {f.build(f.width, f.depth)[0][1] for f in FURNITURE.values()} >= {
        "bed",
        "toilet",
        "bathtub",
    }


def test_glb_export_round_trips_labels(tmp_path) -> None:
    scene = generate_house(2, rooms=3)
    path = scene.export(tmp_path / "house.glb")
    assert json.loads((tmp_path / "house.stage_config.json").read_text())["up"] == [0, 1, 0]
    loaded = load_scene(path)
    assert np.allclose(loaded.bounds, scene.bounds, atol=1e-4)
    assert {k: round(v, 2) for k, v in loaded.present_categories().items()} == {
        k: round(v, 2) for k, v in scene.present_categories().items()
    }


def test_sidecar_and_name_labels(tmp_path) -> None:
    path = shared_scene("simple_room.glb")
    copy = tmp_path / "room.glb"
    copy.write_bytes(path.read_bytes())
    (tmp_path / "room.stage_config.json").write_text(json.dumps({"up": [0, 0, 1], "front": [0, 1, 0]}))
    (tmp_path / "room.semantic.json").write_text(
        json.dumps({"node_categories": {"Cube.002": "table", "Cube.001": "cabinet"}})
    )
    scene = load_scene(copy)
    present = scene.present_categories()
    assert present["table"] == pytest.approx(2 * (1.4 * 1.4) + 4 * 1.4 * 0.04, rel=0.05)
    assert "cabinet" in present
    assert category_from_name("Couch_01") == "sofa"
    assert category_from_name("tv_monitor.003") == "tv"
    assert category_from_name("Cube.004") is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("missing.glb", "scene file not found"),
        ("procedural:seed=x", "must be an integer"),
        ("procedural:rooms=3", "seed=N is required"),
        ("procedural:seed=1,rooms=12", "rooms must be in 2..8"),
        ("procedural:seed=1,color=red", "expected procedural:seed=N"),
    ],
)
def test_bad_specs_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(SceneError, match=message):
        load_scene(spec)


def test_unknown_extension_and_empty_scene(tmp_path) -> None:
    bad = tmp_path / "scene.fbx"
    bad.write_text("x")
    with pytest.raises(SceneError, match="unsupported scene format '.fbx'"):
        load_scene(bad)
    with pytest.raises(SceneError, match="no triangles"):
        Scene(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0))
    assert parse_procedural_spec("procedural:seed=4,rooms=3") == {"seed": 4, "rooms": 3}
