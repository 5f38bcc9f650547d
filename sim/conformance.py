"""Conformance checks every :class:`~embodia.sim.protocol.Simulator` backend passes.

Third-party backends call :func:`check_simulator` from their own tests::

    def test_my_backend():
        check_simulator(MyBackend(), "path/to/scene.glb")

Each check raises ``AssertionError`` with a message naming the broken rule of
``docs/simulator.md``. The checks need a scene whose start point has open floor around it
(any room does). :func:`check_multilevel` adds the multi-level cases (two floors joined by
stairs, a ramp, a terrain patch) from :mod:`embodia.sim.worlds`; a backend that loads files
passes them exported (``Scene.export``)::

    files = {name: world().export(tmp / f"{name}.glb") for name, world in WORLDS.items()}
    check_multilevel(MyBackend(), files)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embodia.sim import worlds
from embodia.sim.geometry import equirect_angles, forward_vector, wrap_angle
from embodia.sim.protocol import Pose, SceneSpec, Simulator
from embodia.sim.scene import Scene

WORLDS: dict[str, Callable[[], Scene]] = {
    "two_floor_house": worlds.two_floor_house,
    "ramp_room": worlds.ramp_room,
    "terrain_patch": worlds.terrain_patch,
}
"""The multi-level worlds :func:`check_multilevel` walks, by name."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def check_simulator(sim: Simulator, scene: SceneSpec, start_pose: Pose | None = None) -> None:
    """Run every conformance check against ``sim`` on ``scene``."""
    pose = sim.reset(scene, start_pose)
    _check(isinstance(pose, Pose), "reset must return a Pose")
    _check(sim.pose == pose, "sim.pose must equal the pose reset returned")
    _check(sim.is_navigable(pose.position), "the start pose must be navigable")
    _check(sim.categories[:1] == ["void"], "categories[0] must be 'void'")
    check_panorama(sim)
    check_panorama_at(sim)
    check_pinhole_matches_panorama(sim)
    check_turns_roll_panorama(sim)
    check_actions(sim)
    check_navigation(sim)
    sim.reset(scene, pose)
    _check(
        np.allclose(sim.pose.position, pose.position, atol=1e-6),
        "reset(scene, pose) must restore the pose",
    )


def check_panorama_at(sim: Simulator, height: int = 32, width: int = 64) -> None:
    """``panorama_at`` renders what ``panorama`` would at that pose, and leaves the agent."""
    here = sim.pose
    same = sim.panorama_at(here, height, width)
    _check(
        np.array_equal(same["depth"], sim.panorama(height, width)["depth"]),
        "panorama_at(sim.pose) must equal panorama()",
    )
    turned = Pose(here.position, here.yaw + math.pi / 2)
    view = sim.panorama_at(turned, height, width)
    _check(sim.pose == here, "panorama_at must not move the agent")
    _check(view["pose"] == turned, "panorama_at carries the pose it was rendered at")
    back = np.roll(view["depth"], -(width // 4), axis=1)
    close = np.abs(back - same["depth"]) < 0.01 + 0.01 * same["depth"]
    _check(float(close.mean()) > 0.97, "panorama_at a quarter turn left rolls the panorama by W/4")


def check_panorama(sim: Simulator, height: int = 64, width: int = 128) -> None:
    """Shapes, dtypes, value ranges and radial range of a panorama."""
    pano = sim.panorama(height, width)
    _check(
        pano["rgb"].shape == (height, width, 3) and pano["rgb"].dtype == np.uint8,
        "panorama rgb must be (H, W, 3) uint8",
    )
    _check(
        pano["depth"].shape == (height, width) and pano["depth"].dtype == np.float32,
        "panorama depth must be (H, W) float32",
    )
    _check(
        pano["semantic"].shape == (height, width) and np.issubdtype(pano["semantic"].dtype, np.integer),
        "panorama semantic must be (H, W) integer",
    )
    _check(
        bool(np.all(pano["depth"] >= 0)) and bool(np.all(np.isfinite(pano["depth"]))),
        "depth must be finite and >= 0 (0 = no hit)",
    )
    _check(
        int(pano["semantic"].max()) < len(sim.categories) and int(pano["semantic"].min()) >= 0,
        "semantic ids must index categories",
    )
    _check(pano["pose"] == sim.pose, "a panorama carries the pose it was taken at")
    # Radial range: floor points seen 40-70 deg below the horizon back-project onto the floor
    # (per-face planar depth read as range would put them 20% too high at the face edges).
    rows = np.arange(height)
    lat, _ = equirect_angles(rows, np.zeros(height), height, width)
    band = (lat < -math.radians(40)) & (lat > -math.radians(70))
    depth = pano["depth"][band].astype(np.float64)
    y = sim.config.sensor_height + depth * np.sin(lat[band])[:, None]
    hits = depth > 0
    on_floor = np.abs(y - 0.0) < 0.03
    _check(bool(hits.any()), "the panorama sees no floor below the horizon")
    _check(
        float(on_floor[hits].mean()) > 0.5,
        "panorama depth is not radial range: pixels 40-70 deg below the horizon miss the floor",
    )


def check_pinhole_matches_panorama(sim: Simulator) -> None:
    """The forward pixel of a pinhole frame and of a panorama see the same depth."""
    frame = sim.pinhole(65, 65, 90.0)
    _check(
        frame["depth"].shape == (65, 65) and frame["rgb"].shape == (65, 65, 3),
        "pinhole shapes must be (H, W[, 3])",
    )
    _check(math.isclose(frame["hfov_deg"], 90.0), "pinhole frames report their hfov")
    pano = sim.panorama(65, 129)  # pixel (32, 64) looks exactly forward
    a, b = float(frame["depth"][32, 32]), float(pano["depth"][32, 64])
    _check(
        abs(a - b) < 0.02 + 0.01 * b,
        f"forward pinhole depth {a:.3f} != forward panorama range {b:.3f}",
    )
    # Planar depth: choose the hfov that puts column 12 exactly one turn to the left; after
    # turn_left the forward pixel sees that point at its range, planar depth = range * cos.
    theta = math.radians(sim.config.turn_angle_deg)
    if theta < math.radians(60):
        focal = 20.0 / math.tan(theta)
        hfov = math.degrees(2 * math.atan(32.5 / focal))
        side = float(sim.pinhole(65, 65, hfov)["depth"][32, 12])
        sim.step("turn_left")
        ahead = float(sim.pinhole(65, 65, hfov)["depth"][32, 32])
        sim.step("turn_right")
        expected = ahead * math.cos(theta)
        _check(
            abs(side - expected) < 0.02 + 0.01 * ahead,
            f"pinhole depth is not planar: {side:.3f} off-axis vs {expected:.3f} = range * cos",
        )


def check_turns_roll_panorama(sim: Simulator, height: int = 32, width: int = 128) -> None:
    """Turning left by 90 deg rolls the panorama right by a quarter of its width."""
    turn = sim.config.turn_angle_deg
    turns = round(90.0 / turn)
    if not math.isclose(turns * turn, 90.0):
        return
    before = sim.panorama(height, width)["depth"]
    start = sim.pose
    for _ in range(turns):
        result = sim.step("turn_left")
        _check(not result.collided, "turning never collides")
    _check(np.allclose(sim.pose.position, start.position), "turning must not move the agent")
    _check(
        abs(wrap_angle(sim.pose.yaw - start.yaw - math.pi / 2)) < 1e-6,
        "turn_left must add turn_angle to yaw",
    )
    after = sim.panorama(height, width)["depth"]
    rolled = np.roll(before, width // 4, axis=1)
    close = np.abs(after - rolled) < 0.01 + 0.01 * rolled
    _check(float(close.mean()) > 0.97, "turn_left by 90 deg must roll the panorama by W/4 columns")
    for _ in range(turns):
        sim.step("turn_right")
    _check(abs(wrap_angle(sim.pose.yaw - start.yaw)) < 1e-6, "turn_right must undo turn_left")


def check_actions(sim: Simulator, steps: int = 12) -> None:
    """move_forward moves forward_step along the heading or stops short with collided."""
    for i in range(steps):
        before = sim.pose
        result = sim.step("move_forward")
        moved = result.pose.array - before.array
        moved[1] = 0.0
        distance = float(np.linalg.norm(moved))
        if result.collided:
            _check(distance < sim.config.forward_step - 1e-6, "a collided move must stop short")
        else:
            expected = sim.config.forward_step * forward_vector(before.yaw)
            _check(
                np.allclose(moved, expected, atol=1e-3),
                "move_forward must move forward_step along -z of the agent",
            )
        if distance > 1e-9:
            _check(float(moved @ forward_vector(before.yaw)) > 0, "move_forward never moves backwards")
        _check(sim.is_navigable(result.pose.position), "move_forward must keep the agent navigable")
        if i % 3 == 2:
            sim.step("turn_left")


def check_navigation(sim: Simulator) -> None:
    """snap_point, shortest_path, geodesic_distance, goto and topdown agree."""
    pose = sim.pose
    snapped = sim.snap_point(pose.position)
    _check(np.allclose(snapped, pose.position, atol=0.05), "snap_point of a navigable point returns it")
    far = sim.snap_point(np.array(pose.position) + np.array([1000.0, 0.0, 1000.0]))
    _check(
        bool(np.all(np.isnan(far))) or sim.is_navigable(far),
        "snap_point returns a navigable point or NaNs",
    )

    top = sim.topdown(0.1)
    _check(
        bool(top.navigable.dtype == np.bool_ and top.navigable.any()),
        "topdown must mark navigable cells",
    )
    _check(top.explorable_area_m2 > 0.5, "explorable area must be positive")
    row, col = top.to_grid(np.array(pose.position))
    inside = 0 <= row < top.navigable.shape[0] and 0 <= col < top.navigable.shape[1]
    _check(bool(inside), "the agent lies inside its top-down map")
    floors = sim.floor_maps(0.1)
    _check(
        len(floors) >= 1
        and any(
            m.navigable.shape == top.navigable.shape and np.array_equal(m.navigable, top.navigable)
            for m in floors
        ),
        "floor_maps holds the agent's floor, as topdown maps it",
    )
    heights = [m.floor_height for m in floors]
    _check(heights == sorted(heights), "floor_maps lists the floors lowest first")

    cells = np.argwhere(top.navigable)
    rng = np.random.default_rng(0)
    for r, c in cells[rng.choice(len(cells), size=min(5, len(cells)), replace=False)]:
        goal = sim.snap_point(top.from_grid(r, c))
        if not np.all(np.isfinite(goal)):
            continue
        path = sim.shortest_path(sim.pose.position, goal)
        _check(path.found, "a point of the agent's island must be reachable")
        _check(np.allclose(path.points[0], sim.pose.position, atol=0.15), "a path starts at its start")
        _check(np.allclose(path.points[-1], goal, atol=0.15), "a path ends at its goal")
        length = float(np.sum(np.linalg.norm(np.diff(path.points, axis=0), axis=1)))
        _check(
            math.isclose(length, path.geodesic_distance, rel_tol=1e-3, abs_tol=1e-3),
            "geodesic_distance is the path's length",
        )
        euclid = float(np.linalg.norm(np.subtract(goal, sim.pose.position)[[0, 2]]))
        _check(
            path.geodesic_distance >= euclid - 0.1,
            "a geodesic is never shorter than the straight line",
        )
        geo = sim.geodesic_distance(sim.pose.position, goal)
        _check(
            math.isclose(geo, path.geodesic_distance, rel_tol=1e-6, abs_tol=1e-6),
            "geodesic_distance matches shortest_path",
        )
        result = sim.goto(goal)
        _check(result.reached, "goto reaches a reachable goal without a step budget")
        _check(np.allclose(result.pose.position, goal, atol=0.15), "goto ends at the goal")
        in_plan = float(np.sum(np.hypot(*np.diff(path.points, axis=0)[:, [0, 2]].T)))
        _check(
            result.steps >= math.ceil(in_plan / sim.config.forward_step - 1e-6),
            "goto counts at least one forward step per forward_step metres walked in plan",
        )
        _check(sim.is_navigable(result.pose.position), "goto ends on the navigable island")


def _path_checks(sim: Simulator, start: Any, goal: Any) -> Any:
    path = sim.shortest_path(start, goal)
    _check(path.found, f"a path from {list(start)} to {list(goal)} exists")
    _check(np.allclose(path.points[0], start, atol=0.05), "a path starts at its start")
    _check(np.allclose(path.points[-1], goal, atol=0.05), "a path ends at its goal")
    length = float(np.sum(np.linalg.norm(np.diff(path.points, axis=0), axis=1)))
    _check(
        math.isclose(length, path.geodesic_distance, rel_tol=1e-3, abs_tol=1e-3),
        "geodesic_distance is the path's length",
    )
    _check(
        path.geodesic_distance >= float(np.linalg.norm(np.subtract(goal, start))) - 0.05,
        "a geodesic is never shorter than the straight line",
    )
    return path


def check_multilevel(sim: Simulator, scenes: Mapping[str, SceneSpec | Scene | Path] | None = None) -> None:
    """Navigation across levels (``docs/simulator.md``): stairs between two floors, a ramp
    to a platform whose other edges are drops, and a terrain patch. ``scenes`` maps the names
    of :data:`WORLDS` to what ``sim.reset`` loads (default: the worlds themselves)."""
    given = dict(scenes) if scenes is not None else {name: world() for name, world in WORLDS.items()}
    missing = sorted(set(WORLDS) - set(given))
    if missing:
        raise ValueError(f"check_multilevel needs every world; missing {', '.join(missing)}")

    upper = worlds.UPPER_FLOOR
    sim.reset(given["two_floor_house"], Pose((4.0, 0.0, 4.0), 0.0))
    ground, above = np.array([4.0, 0.0, 4.0]), np.array([4.0, upper, 4.0])
    _check(sim.is_navigable(ground) and sim.is_navigable(above), "both floors of the house are navigable")
    _check(abs(sim.snap_point(above)[1] - upper) < 0.05, "a point on the upper floor snaps to that floor")
    path = _path_checks(sim, ground, above)
    _check(
        bool(np.all(np.diff(path.points[:, 1]) >= -0.05)),
        "the path up to the other floor climbs the stairs without going down",
    )
    foot, top = np.array([1.0, 0.0, 0.9]), np.array([7.0, upper, 0.9])
    legs = float(np.linalg.norm(foot - ground) + np.linalg.norm(top - foot) + np.linalg.norm(above - top))
    _check(
        0.85 * legs <= path.geodesic_distance <= 1.15 * legs,
        "the geodesic between floors is the walk by the stairs",
    )
    heights = [m.floor_height for m in sim.floor_maps(0.1)]
    _check(
        len(heights) == 2 and abs(heights[0]) < 0.05 and abs(heights[1] - upper) < 0.05,
        "floor_maps holds the house's two floors",
    )
    result = sim.goto(above)
    _check(result.reached and abs(result.pose.position[1] - upper) < 0.05, "goto climbs to the other floor")
    top_map = sim.topdown(0.1)
    _check(
        abs(top_map.floor_height - upper) < 0.05 and 30.0 < top_map.explorable_area_m2 < 48.0,
        "topdown maps the floor the agent stands on",
    )
    # Walking off the upper floor's edge into the stairwell (the flight 1.5 m below there):
    # the agent stops at the edge instead of dropping onto the stairs.
    sim.reset(given["two_floor_house"], Pose((4.0, upper, 1.6), 0.0))
    for _ in range(3):
        stepped = sim.step("move_forward")
        _check(abs(stepped.pose.position[1] - upper) < 0.05, "move_forward never drops off a ledge")
    _check(stepped.collided and stepped.pose.position[2] > 1.3, "the stairwell's edge stops the agent")

    sim.reset(given["ramp_room"], Pose((1.0, 0.0, 2.0), 0.0))
    on_ramp = np.array([4.5, 0.5, 2.0])
    _check(sim.is_navigable(on_ramp), "the ramp is navigable")
    path = _path_checks(sim, np.array([1.0, 0.0, 2.0]), np.array([8.0, 1.0, 2.0]))
    _check(
        math.isclose(path.geodesic_distance, 4.0 + math.hypot(3.0, 1.0), rel_tol=0.03),
        "the geodesic up a ramp is measured along its slope",
    )
    below, beyond = np.array([5.8, 0.0, 0.5]), np.array([6.3, 1.0, 0.5])
    _check(
        sim.geodesic_distance(below, beyond) > 2.5,
        "a 1 m drop is not climbed: the way up is round by the ramp",
    )

    start = np.array([2.0, float(worlds.terrain_height(np.array(2.0), np.array(2.0))), 2.0])
    sim.reset(given["terrain_patch"], Pose(tuple(start), 0.0))
    _check(sim.is_navigable(start), "undulating terrain is navigable")
    area = sim.topdown(0.1).explorable_area_m2
    _check(abs(area - 19.8**2) < 0.04 * 19.8**2, "all of the terrain but its edge is navigable")
    _check(len(sim.floor_maps(0.1)) == 1, "a terrain's hills are one floor")
    goal = np.array([18.0, float(worlds.terrain_height(np.array(18.0), np.array(18.0))), 18.0])
    _path_checks(sim, start, goal)
