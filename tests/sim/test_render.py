"""Sensor geometry checked against analytic answers in an axis-aligned box room."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scenes import CAT, analytic_box_range, box_room

from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.geometry import (
    direction_to_equirect_pixel,
    direction_to_pinhole_pixel,
    equirect_directions,
    pinhole_directions,
    pinhole_pixel_to_direction,
    yaw_matrix,
)

SIZE = (6.0, 2.5, 4.0)  # W, H, D


def _sim(yaw: float = 0.0) -> EmbeddedSimulator:
    sim = EmbeddedSimulator()
    sim.reset(box_room(SIZE[0], SIZE[2], SIZE[1]), Pose((2.3, 0.0, 1.7), yaw))
    return sim


def test_panorama_range_is_analytic_distance_for_every_pixel() -> None:
    yaw = math.radians(37.0)
    sim = _sim(yaw)
    pano = sim.panorama(128, 256)
    camera = sim.pose.sensor_position(sim.config.sensor_height)
    world_dirs = equirect_directions(128, 256).reshape(-1, 3).astype(np.float64) @ yaw_matrix(yaw).T
    expected, _ = analytic_box_range(camera, world_dirs, SIZE)
    error = np.abs(pano["depth"].reshape(-1) - expected)
    assert error.max() < 0.01, f"worst radial range error {error.max():.4f} m"


def test_pinhole_depth_is_planar() -> None:
    sim = _sim(0.0)
    frame = sim.pinhole(64, 96, 90.0)
    camera = sim.pose.sensor_position(sim.config.sensor_height)
    dirs = pinhole_directions(64, 96, 90.0).reshape(-1, 3).astype(np.float64)
    ranges, _ = analytic_box_range(camera, dirs / np.linalg.norm(dirs, axis=1, keepdims=True), SIZE)
    planar = ranges * (1.0 / np.linalg.norm(dirs, axis=1))  # range * cos(angle to axis)
    assert np.abs(frame["depth"].reshape(-1) - planar).max() < 0.01
    # The facing wall (z = 0, 1.7 m ahead) has the same planar depth across the image centre row.
    centre_row = frame["depth"][32]
    assert np.allclose(centre_row, 1.7, atol=0.01)


def test_semantic_ids_match_the_surface_hit() -> None:
    table = ((3.5, 0.0, 0.5), (4.5, 0.75, 1.2), "table")
    sim = EmbeddedSimulator()
    sim.reset(box_room(SIZE[0], SIZE[2], SIZE[1], extra=[table]), Pose((2.0, 0.0, 2.5), 0.0))
    pano = sim.panorama(96, 192)
    camera = sim.pose.sensor_position(sim.config.sensor_height)
    dirs = equirect_directions(96, 192).reshape(-1, 3).astype(np.float64)
    ranges, axis = analytic_box_range(camera, dirs, SIZE)
    points = camera + ranges[:, None] * dirs
    expected = np.where(axis == 1, np.where(dirs[:, 1] < 0, CAT["floor"], CAT["ceiling"]), CAT["wall"])
    sem = pano["semantic"].reshape(-1)
    depth = pano["depth"].reshape(-1)
    # Pixels that see the table: nearer than the room, and labelled table.
    occluded = depth < ranges - 0.01
    assert occluded.any()
    assert np.all(sem[occluded] == CAT["table"])
    hit = camera + depth[occluded, None] * dirs[occluded]
    lo, hi = np.array(table[0]), np.array(table[1])
    assert np.all((hit >= lo - 0.01) & (hit <= hi + 0.01))
    # Everywhere else the label is the room surface the analytic ray hits (edges aside).
    visible = ~occluded
    agree = sem[visible] == expected[visible]
    assert agree.mean() > 0.995
    assert np.all(np.isfinite(points))


def test_pixel_ray_maps_invert() -> None:
    rng = np.random.default_rng(1)
    rows, cols = rng.uniform(0, 63, 500), rng.uniform(0, 127, 500)
    from embodia.sim.geometry import equirect_pixel_to_direction

    d = equirect_pixel_to_direction(rows, cols, 64, 128)
    r2, c2 = direction_to_equirect_pixel(d * 3.0, 64, 128)
    assert np.allclose(r2, rows) and np.allclose(c2, cols)
    d = pinhole_pixel_to_direction(rows, cols, 64, 128, 70.0)
    r3, c3, front = direction_to_pinhole_pixel(d * 2.0, 64, 128, 70.0)
    assert front.all() and np.allclose(r3, rows) and np.allclose(c3, cols)


def test_equirect_layout_centre_forward_quarter_left() -> None:
    d = equirect_directions(65, 129)
    assert np.allclose(d[32, 64], [0, 0, -1], atol=1e-6)
    left = equirect_directions(64, 128)[32, 31:33].mean(axis=0)
    assert left[0] < -0.99  # the quarter column looks left (-x)
    assert np.allclose(
        equirect_directions(64, 128)[0, 0][1], math.sin(math.pi / 2 - math.pi * 0.5 / 64), atol=1e-6
    )


def _raycast_pinhole(
    sim: EmbeddedSimulator, camera: np.ndarray, yaw: float, height: int, width: int, hfov: float
):
    """The pinhole frame by ray casting through every pixel centre (the rasteriser's oracle)."""
    dirs = pinhole_directions(height, width, hfov).reshape(-1, 3).astype(np.float64) @ yaw_matrix(yaw).T
    t_hit, prim, _ = sim.renderer.raycaster.cast_from(camera, dirs)
    depth = np.where(np.isfinite(t_hit), t_hit, 0.0).reshape(height, width)
    semantic = np.append(sim.scene.face_category, 0)[prim].reshape(height, width)
    return depth, semantic


def test_rasterised_pinhole_equals_ray_cast_through_pixel_centres() -> None:
    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=3,rooms=4")
    rng = np.random.default_rng(0)
    cells = np.argwhere(sim.nav.island)
    for row, col in cells[rng.choice(len(cells), size=6, replace=False)]:
        camera = sim.nav.cell_centre(row, col) + np.array([0.0, rng.uniform(0.3, 1.8), 0.0])
        yaw = float(rng.uniform(-math.pi, math.pi))
        frame = sim.renderer.pinhole(camera, yaw, 72, 96, 79.0)
        depth, semantic = _raycast_pinhole(sim, camera, yaw, 72, 96, 79.0)
        close = np.abs(frame.depth - depth) <= 1e-3 * np.maximum(depth, 1.0)
        # Only pixel centres that graze an edge between two surfaces may differ.
        assert close.mean() > 0.995, f"depth agrees on {close.mean():.4f} of pixels"
        assert (frame.semantic == semantic).mean() > 0.99
        assert ((frame.depth == 0) == (depth == 0)).mean() > 0.999


def test_pinhole_clips_geometry_behind_and_beside_the_camera() -> None:
    # Walls pass behind the camera and the facing wall is 5 cm away: the image must still be
    # fully covered (near-plane clipping keeps triangles that cross the camera plane).
    sim = _sim()
    frame = sim.renderer.pinhole(np.array([2.3, 1.2, 0.05]), 0.0, 48, 64, 120.0)
    assert (frame.depth > 0).all()
    assert np.allclose(frame.depth[24], 0.05, atol=1e-4)
    assert np.allclose(frame.depth, 0.05, atol=1e-4)  # the whole view is the facing wall


def test_ray_casting_takes_its_thread_count_from_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from embodia.sim.raycast import Raycaster

    room = box_room(SIZE[0], SIZE[2], SIZE[1])
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert Raycaster(room).nthreads == 0  # Open3D's default: every core
    for value, threads in (("1", 1), ("3", 3), ("0", 0), ("", 0), ("four", 0)):
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        assert Raycaster(room).nthreads == threads, value
    assert Raycaster(room, nthreads=2).nthreads == 2  # given explicitly, the variable is not read
    # one thread or all of them, the same picture
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = _sim(0.4).panorama(64, 128)["depth"]
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert np.array_equal(one, _sim(0.4).panorama(64, 128)["depth"])
