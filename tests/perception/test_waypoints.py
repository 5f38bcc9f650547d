"""Waypoints on the panorama: pixel <-> world maps, back-projection, rejections, candidates,
markers. Everything runs against the real embedded simulator on small panoramas."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest
from scenes import CAT, WALL, analytic_box_range, box_room, l_corridor

from embodia.perception.bev import BEVMap
from embodia.perception.waypoints import (
    Waypoint,
    WaypointCandidate,
    WaypointConfig,
    WaypointRejection,
    _visible_unknown_area,
    back_project,
    choose_candidate,
    draw_candidates,
    marker_radius,
    pixel_to_world,
    propose_candidates,
    world_to_pixel,
)
from embodia.sim import EmbeddedSimulator, Pose, Scene
from embodia.sim.geometry import equirect_pixel_to_direction, yaw_matrix
from embodia.sim.procedural import box_mesh
from embodia.sim.protocol import Panorama
from embodia.sim.scene import concatenate

H, W = 128, 256
CELL = 0.05


def _boxes(parts: list[tuple[tuple[float, ...], tuple[float, ...], str]], name: str) -> Scene:
    meshes = [(box_mesh(*lo, *hi), CAT[category]) for lo, hi, category in parts]
    return concatenate([(v, f, c, i + 1) for i, ((v, f), c) in enumerate(meshes)], name=name)


def open_top_room(width: float = 4.0, depth: float = 4.0, height: float = 2.5) -> Scene:
    """A box room without a ceiling: rays upwards hit nothing (range 0)."""
    t = WALL
    return _boxes(
        [
            ((-t, -t, -t), (width + t, 0.0, depth + t), "floor"),
            ((-t, 0.0, -t), (0.0, height, depth + t), "wall"),
            ((width, 0.0, -t), (width + t, height, depth + t), "wall"),
            ((0.0, 0.0, -t), (width, height, 0.0), "wall"),
            ((0.0, 0.0, depth), (width, height, depth + t), "wall"),
        ],
        "open_top_room",
    )


def pit_room() -> Scene:
    """5 x 4 m room whose floor has a 1 m deep pit over x in [2, 3.5], z in [1.5, 2.5]."""
    t = WALL
    walls = [
        ((-t, 0.0, -t), (0.0, 2.5, 4 + t)),
        ((5.0, 0.0, -t), (5 + t, 2.5, 4 + t)),
        ((0.0, 0.0, -t), (5.0, 2.5, 0.0)),
        ((0.0, 0.0, 4.0), (5.0, 2.5, 4 + t)),
    ]
    floor = [
        ((-t, -t, -t), (2.0, 0.0, 4 + t)),
        ((3.5, -t, -t), (5 + t, 0.0, 4 + t)),
        ((2.0, -t, -t), (3.5, 0.0, 1.5)),
        ((2.0, -t, 2.5), (3.5, 0.0, 4 + t)),
        ((2.0, -1.2, 1.5), (3.5, -1.0, 2.5)),  # the pit's bottom
    ]
    return _boxes(
        [(lo, hi, "wall") for lo, hi in walls]
        + [(lo, hi, "floor") for lo, hi in floor]
        + [((-t, 2.5, -t), (5 + t, 2.5 + t, 4 + t), "ceiling")],
        "pit_room",
    )


def window_room() -> Scene:
    """6 x 4 m room split at x = 3 by a wall with a window (y 0.8..2.0, z 1..3)."""
    wall = [
        ((2.9, 0.0, 0.0), (3.1, 0.8, 4.0)),
        ((2.9, 2.0, 0.0), (3.1, 2.5, 4.0)),
        ((2.9, 0.8, 0.0), (3.1, 2.0, 1.0)),
        ((2.9, 0.8, 3.0), (3.1, 2.0, 4.0)),
    ]
    return box_room(6.0, 4.0, extra=[(lo, hi, "wall") for lo, hi in wall])


def _pixel_of(point: list[float], pose: Pose) -> tuple[int, int]:
    row, col = world_to_pixel(point, pose, H, W)
    return round(row), round(col) % W


def _panorama_in(scene: Any, pose: Pose | None = None) -> tuple[EmbeddedSimulator, Panorama]:
    """A simulator placed in ``scene`` (at ``pose``) and its H x W panorama there."""
    sim = EmbeddedSimulator()
    sim.reset(scene, pose)
    return sim, sim.panorama(H, W)


def _goal_at(point: list[float], sim: EmbeddedSimulator, pano: Panorama) -> Waypoint | WaypointRejection:
    """What the pixel showing world ``point`` back-projects to."""
    row, col = _pixel_of(point, pano["pose"])
    return back_project(pano, row, col, sim)


def _col_gap(a: float, b: float, width: int = W) -> float:
    d = abs(a - b) % width
    return min(d, width - d)


def _horizontal(a: np.ndarray, b: np.ndarray) -> float:
    return float(math.hypot(a[0] - b[0], a[2] - b[2]))


# ---------------------------------------------------------------------- pixel <-> world


@pytest.mark.parametrize(
    ("scene", "pose"),
    [
        ("procedural:seed=1,rooms=3", None),
        (box_room(5.0, 4.0), Pose((1.3, 0.0, 2.7), 2.1)),
    ],
)
def test_pixel_world_pixel_round_trip(scene: object, pose: Pose | None) -> None:
    sim = EmbeddedSimulator()
    sim.reset(scene, pose)  # type: ignore[arg-type]
    sim.step("turn_left")  # a yaw that is not 0
    pano = sim.panorama(H, W)
    rows, cols = np.nonzero(pano["depth"] > 0)
    picks = np.random.default_rng(0).choice(len(rows), size=300, replace=False)
    for r, c in zip(rows[picks], cols[picks], strict=True):
        hit = pixel_to_world(pano, int(r), int(c))
        assert np.linalg.norm(hit - sim.pose.sensor_position(1.5)) == pytest.approx(pano["depth"][r, c])
        back_row, back_col = world_to_pixel(hit, pano["pose"], H, W)
        assert abs(back_row - r) < 1e-3 and _col_gap(back_col, c) < 1e-3


def test_box_room_hits_lie_on_the_walls() -> None:
    size = (5.0, 2.5, 4.0)
    sim = EmbeddedSimulator()
    pose = sim.reset(box_room(size[0], size[2], size[1]), Pose((1.3, 0.0, 2.7), -0.7))
    pano = sim.panorama(H, W)
    camera = pose.sensor_position(1.5)
    rows, cols = np.meshgrid(np.arange(0, H, 7), np.arange(0, W, 5), indexing="ij")
    directions = equirect_pixel_to_direction(rows, cols, H, W) @ yaw_matrix(pose.yaw).T
    expected_range, _ = analytic_box_range(camera, directions, size)
    for r, c, rng, d in zip(
        rows.ravel(), cols.ravel(), expected_range.ravel(), directions.reshape(-1, 3), strict=True
    ):
        np.testing.assert_allclose(pixel_to_world(pano, int(r), int(c)), camera + rng * d, atol=2e-3)


def test_world_to_pixel_follows_the_panorama_layout() -> None:
    pose = Pose((2.0, 0.0, 1.0), math.pi / 2)  # facing -x
    ahead = world_to_pixel([0.0, 1.5, 1.0], pose, H, W)
    assert ahead == pytest.approx((H / 2 - 0.5, W / 2 - 0.5))
    right = world_to_pixel([2.0, 1.5, -3.0], pose, H, W)  # facing -x, right is -z
    assert right == pytest.approx((H / 2 - 0.5, 3 * W / 4 - 0.5))
    below = world_to_pixel([2.0, 0.0, 1.0], pose, H, W)  # straight down
    assert below[0] == pytest.approx(H - 0.5)
    with pytest.raises(ValueError, match="at the sensor"):
        world_to_pixel([2.0, 1.5, 1.0], pose, H, W)
    with pytest.raises(ValueError, match="finite 3D point"):
        world_to_pixel([np.nan, 0.0, 0.0], pose, H, W)


# ---------------------------------------------------------------------- back-projection


def test_floor_pixels_back_project_to_goto_plans_with_the_same_step_count() -> None:
    scene = box_room(5.0, 4.0, extra=[((3.6, 0.0, 2.8), (4.2, 0.75, 3.4), "table")])
    start = Pose((1.2, 0.0, 1.0), 0.4)
    sim, pano = _panorama_in(scene, start)
    for goal in ([4.2, 0.0, 1.2], [2.5, 0.0, 3.5], [0.6, 0.0, 3.3], [1.9, 0.0, 2.0], [3.3, 0.0, 3.1]):
        sim.reset(scene, start)
        row, col = _pixel_of(goal, pano["pose"])
        waypoint = back_project(pano, row, col, sim)
        assert isinstance(waypoint, Waypoint), waypoint
        assert abs(waypoint.hit[1]) < 0.02 and _horizontal(waypoint.hit, np.array(goal)) < 0.1
        assert _horizontal(waypoint.target, waypoint.hit) <= 1.5 * CELL
        back_row, back_col = world_to_pixel(waypoint.target, pano["pose"], H, W)
        assert abs(back_row - row) < 1.0 and _col_gap(back_col, col) < 1.0
        np.testing.assert_allclose(waypoint.path.points[0], sim.pose.array, atol=1e-6)
        np.testing.assert_allclose(waypoint.path.points[-1], waypoint.target, atol=1e-6)
        result = sim.goto(waypoint.target)
        assert result.reached
        assert waypoint.steps == result.steps > 0
        assert _horizontal(sim.pose.array, waypoint.target) < 1e-6


def test_wall_pixel_targets_the_floor_in_front_of_the_wall() -> None:
    # 5.03 m wide: the floor one agent radius in front of the x = 5.03 wall is navigable,
    # so the target is that point itself rather than a snapped cell centre.
    wall_x = 5.03
    scene = box_room(wall_x, 4.0)
    start = Pose((1.2, 0.0, 1.0), 0.0)
    sim, pano = _panorama_in(scene, start)
    row, col = _pixel_of([wall_x, 1.7, 2.0], pano["pose"])  # above the horizon, on the wall
    assert row < H / 2
    waypoint = back_project(pano, row, col, sim)
    assert isinstance(waypoint, Waypoint), waypoint
    assert waypoint.hit[0] == pytest.approx(wall_x, abs=1e-3)
    radius = sim.config.agent_radius
    ray = (waypoint.hit - start.array) * [1.0, 0.0, 1.0]
    in_front = waypoint.hit * [1.0, 0.0, 1.0] - radius * ray / np.linalg.norm(ray)
    assert sim.is_navigable(in_front)
    np.testing.assert_allclose(waypoint.target, in_front, atol=1e-6)
    assert wall_x - radius - 1e-6 <= waypoint.target[0] <= wall_x - radius * 0.9
    result = sim.goto(waypoint.target)
    assert result.reached and result.steps == waypoint.steps


def _rejection(result: Waypoint | WaypointRejection) -> WaypointRejection:
    assert isinstance(result, WaypointRejection), result
    assert result.message and "\n" not in result.message
    return result


def test_pixels_outside_the_image_are_rejected() -> None:
    sim, pano = _panorama_in(box_room(4.0, 4.0))
    for row, col in ((-1, 0), (H, 5), (3, W), (3, -1)):
        rejection = _rejection(back_project(pano, row, col, sim))
        assert rejection.reason == "out_of_image"
        assert f"({row}, {col})" in rejection.message and f"{H}x{W}" in rejection.message
        with pytest.raises(ValueError, match="outside the"):
            pixel_to_world(pano, row, col)
    assert _rejection(back_project(pano, 2.5, 3, sim)).reason == "out_of_image"  # type: ignore[arg-type]


def test_pixel_without_range_is_rejected() -> None:
    sim, pano = _panorama_in(open_top_room())
    assert pano["depth"][0, 10] == 0
    rejection = _rejection(back_project(pano, 0, 10, sim))
    assert rejection.reason == "no_range" and "(0, 10)" in rejection.message
    with pytest.raises(ValueError, match="no range"):
        pixel_to_world(pano, 0, 10)


def test_ceiling_and_pit_pixels_are_not_floor() -> None:
    sim, pano = _panorama_in(box_room(4.0, 4.0, height=2.4), Pose((2.0, 0.0, 2.0)))
    rejection = _rejection(back_project(pano, 3, 100, sim))
    assert rejection.reason == "not_floor"
    assert "ceiling" in rejection.message and "2.40 m above the floor" in rejection.message

    sim.reset(pit_room(), Pose((1.8, 0.0, 2.0), -math.pi / 2))
    pano = sim.panorama(H, W)
    row, col = _pixel_of([3.0, -1.0, 2.0], pano["pose"])
    assert pixel_to_world(pano, row, col)[1] == pytest.approx(-1.0, abs=0.01)
    rejection = _rejection(back_project(pano, row, col, sim))
    assert rejection.reason == "not_floor" and "below the floor" in rejection.message


def test_obstacle_top_far_from_navigable_floor_is_off_map() -> None:
    bed = ((1.5, 0.0, 1.5), (5.5, 0.5, 5.5), "bed")
    sim, pano = _panorama_in(box_room(7.0, 7.0, extra=[bed]), Pose((0.7, 0.0, 0.7)))
    row, col = _pixel_of([3.5, 0.5, 3.5], pano["pose"])
    assert pixel_to_world(pano, row, col)[1] == pytest.approx(0.5, abs=0.01)  # the bed's top
    rejection = _rejection(back_project(pano, row, col, sim))
    assert rejection.reason == "off_map" and "obstacle 0.50 m high" in rejection.message
    # Its edge is a fine goal: the floor in front of it is navigable.
    assert isinstance(_goal_at([1.5, 0.5, 3.5], sim, pano), Waypoint)


def test_floor_seen_through_a_window_into_another_room_is_unreachable() -> None:
    sim, pano = _panorama_in(window_room(), Pose((2.3, 0.0, 2.0), -math.pi / 2))
    row, col = _pixel_of([4.5, 0.0, 2.0], pano["pose"])
    hit = pixel_to_world(pano, row, col)
    assert hit[0] > 4.0 and abs(hit[1]) < 0.02  # the floor behind the wall, through the window
    assert sim.snap_point(hit)[0] < 2.9  # that floor is another island
    rejection = _rejection(back_project(pano, row, col, sim))
    assert rejection.reason == "unreachable" and "cannot reach" in rejection.message
    # The floor on this side of the wall is fine.
    assert isinstance(_goal_at([2.6, 0.0, 1.0], sim, pano), Waypoint)


def test_candidate_numbers_not_on_the_image_are_rejected() -> None:
    sim, pano = _panorama_in(box_room(5.0, 4.0), Pose((1.0, 0.0, 1.0)))
    bev = BEVMap(sim.categories)
    bev.integrate(pano)
    candidates = propose_candidates(pano, bev, simulator=sim)
    assert candidates
    for index in (len(candidates), -1, 99):
        rejection = _rejection(choose_candidate(candidates, index, pano, sim, WaypointConfig()))
        assert rejection.reason == "no_candidate" and f"0..{len(candidates) - 1}" in rejection.message
    assert _rejection(choose_candidate([], 0, pano, sim, WaypointConfig())).reason == "no_candidate"
    chosen = choose_candidate(candidates, len(candidates) - 1, pano, sim, WaypointConfig())
    assert isinstance(chosen, Waypoint)
    assert _horizontal(chosen.target, candidates[-1].point) <= 1.5 * CELL


def test_mismatched_sensor_height_and_bad_config_are_clear_errors() -> None:
    sim, pano = _panorama_in(box_room(4.0, 4.0))
    with pytest.raises(ValueError, match="sensor_height"):
        back_project(pano, 100, 10, sim, WaypointConfig(sensor_height=0.88))
    with pytest.raises(ValueError, match="min_distance"):
        WaypointConfig(min_distance=5.0, max_distance=4.0)
    with pytest.raises(ValueError, match=r"WaypointConfig\.sectors must be a whole number >= 1, got 0"):
        WaypointConfig(sectors=0)
    with pytest.raises(
        ValueError, match=r"WaypointConfig\.lattice_step must be a whole number >= 1, got 2\.5"
    ):
        WaypointConfig(lattice_step=2.5)
    WaypointConfig(lattice_step=None)


# ---------------------------------------------------------------------- candidates


def test_candidates_are_navigable_bounded_one_per_sector_and_numbered_left_to_right() -> None:
    sim = EmbeddedSimulator()
    pose = sim.reset("procedural:seed=1,rooms=3")
    pano = sim.panorama(256, 512)
    bev = BEVMap(sim.categories)
    bev.integrate(pano)
    config = WaypointConfig(max_candidates=6)
    candidates = propose_candidates(pano, bev, config, sim)
    assert 3 <= len(candidates) <= config.max_candidates
    assert [c.index for c in candidates] == list(range(len(candidates)))
    assert [c.col for c in candidates] == sorted(c.col for c in candidates)
    sectors = [c.col * config.sectors // 512 for c in candidates]
    assert len(set(sectors)) == len(sectors)
    navigable = bev.navigable(sim.config.agent_radius)
    for c in candidates:
        assert sim.is_navigable(c.point)
        assert config.min_distance <= c.distance <= config.max_distance
        assert c.distance == pytest.approx(_horizontal(c.point, pose.array))
        np.testing.assert_allclose(c.point, pixel_to_world(pano, c.row, c.col))
        row, col = bev.to_grid(c.point)
        assert navigable[row, col]
        assert c.score == pytest.approx(c.gain_m2 - config.distance_weight * c.distance)
        assert 0.0 <= c.gain_m2 <= math.pi * config.sensing_radius**2 * 1.02
    diameter = 2 * marker_radius(256)
    for a, b in zip(candidates, candidates[1:], strict=False):
        assert math.hypot(a.row - b.row, _col_gap(a.col, b.col, 512)) > diameter  # no overlap
    # The farthest one, executed: the plan's step count is what goto spends.
    far = max(candidates, key=lambda c: c.distance)
    waypoint = choose_candidate(candidates, far.index, pano, sim, config)
    assert isinstance(waypoint, Waypoint)
    result = sim.goto(waypoint.target)
    assert result.reached and result.steps == waypoint.steps
    # The BEV alone (no simulator) proposes from the same lattice.
    assert propose_candidates(pano, bev, config)


def test_gain_is_highest_towards_the_unexplored_arm_of_an_l_corridor() -> None:
    sim = EmbeddedSimulator()
    sim.reset(l_corridor(arm=5.0, width=1.0), Pose((4.5, 0.0, 0.5), math.pi / 2))  # dead end of arm A
    pano = sim.panorama(256, 512)
    bev = BEVMap(sim.categories)
    bev.integrate(pano)
    candidates = propose_candidates(pano, bev, WaypointConfig(sectors=36), sim)
    best = max(candidates, key=lambda c: c.gain_m2)
    assert best.point[0] < 1.5  # at the corner, looking into arm B (x in [0, 1], z > 1)
    assert best.gain_m2 > 3.0
    assert best is max(candidates, key=lambda c: c.score)
    near_dead_end = [c for c in candidates if c.point[0] > 3.5]
    assert near_dead_end and all(c.gain_m2 < 0.5 for c in near_dead_end)
    # Once arm B has been seen from the corner, that spot promises much less.
    sim.goto(best.point)
    bev.integrate(sim.panorama(256, 512))
    after = _visible_unknown_area(bev, best.point[None, :], 2.0)[0]
    assert after < 0.3 * best.gain_m2


def test_visible_unknown_area_of_an_empty_map_and_a_seen_room() -> None:
    sim = EmbeddedSimulator()
    sim.reset(box_room(3.0, 3.0), Pose((1.5, 0.0, 1.5)))
    bev = BEVMap(sim.categories)
    point = np.array([[1.5, 0.0, 1.5]])
    assert _visible_unknown_area(bev, point, 2.0)[0] == pytest.approx(math.pi * 4.0, rel=0.03)
    bev.integrate(sim.panorama(256, 512))
    # Everything inside the walls is seen and the walls hide the rest: (almost) nothing left.
    assert _visible_unknown_area(bev, point, 2.0)[0] < 0.3
    assert _visible_unknown_area(bev, point, 1.0)[0] == pytest.approx(0.0, abs=0.05)


def test_proposing_for_a_large_panorama_is_fast() -> None:
    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=1,rooms=3")
    pano = sim.panorama(512, 1024)
    bev = BEVMap(sim.categories)
    bev.integrate(pano)
    propose_candidates(pano, bev, simulator=sim)  # compile / warm up
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        candidates = propose_candidates(pano, bev, simulator=sim)
        timings.append(time.perf_counter() - start)
    assert candidates
    assert min(timings) < 0.05


# ---------------------------------------------------------------------- drawing


def _candidate(index: int, row: int, col: int) -> WaypointCandidate:
    return WaypointCandidate(index, row, col, np.zeros(3), 1.0, 1.0, 0.5)


def test_markers_change_pixels_near_each_marker_only() -> None:
    rng = np.random.default_rng(3)
    rgb = rng.integers(40, 200, size=(H, W, 3), dtype=np.uint8)
    original = rgb.copy()
    candidates = [
        _candidate(0, 90, 1),
        _candidate(1, 100, 70),
        _candidate(2, 80, 150),
        _candidate(3, 110, 230),
    ]
    out = draw_candidates(rgb, candidates, chosen=2)
    assert out.shape == rgb.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(rgb, original)  # a new image, the input is untouched
    radius = marker_radius(H)
    assert radius == max(6, H // 32)
    rows, cols = np.nonzero(np.any(out != rgb, axis=-1))
    near = np.zeros(len(rows), dtype=bool)
    for c in candidates:
        gap = np.array([_col_gap(col, c.col) for col in cols])
        near |= np.hypot(rows - c.row, gap) <= radius + 1.5
    assert near.all()
    for c in candidates:
        disc = out[c.row - radius + 2 : c.row + radius - 1, c.col - 2 : c.col + 3] if c.col > 2 else None
        if disc is None:
            continue
        colour = (255, 210, 0) if c.index == 2 else (255, 255, 255)
        assert np.any(np.all(disc == colour, axis=-1)), c
        assert np.any(np.all(disc < 100, axis=-1))  # the dark number
    # The marker at column 1 wraps onto the right edge.
    assert np.any(out[90, W - 3 :] != rgb[90, W - 3 :])
    with pytest.raises(ValueError, match="chosen candidate 7"):
        draw_candidates(rgb, candidates, chosen=7)
    with pytest.raises(ValueError, match="uint8"):
        draw_candidates(rgb.astype(np.float32), candidates)  # type: ignore[arg-type]
