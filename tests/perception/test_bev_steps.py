"""Stairs, ramps and platforms in the 360-BEV: which cells off the floor's height the map lets
the agent walk on (steps), at which height, and where it must not cross (ledges); checked
against the analytic worlds' exact geometry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scenes import STAIR_RISE, UPPER_FLOOR, box_room, ramp_room, two_floor_house

from embodia.perception.bev import COLUMN_BIN, BEVConfig, BEVMap, _mark
from embodia.perception.waypoints import back_project, choose_candidate, propose_candidates, world_to_pixel
from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.scene import Scene

EAST = -math.pi / 2  # yaw facing +x
PANORAMA = (256, 512)


def mapped(scene: Scene, pose: Pose) -> tuple[EmbeddedSimulator, BEVMap]:
    sim = EmbeddedSimulator()
    sim.reset(scene, pose)
    bev = BEVMap(sim.categories, BEVConfig())
    bev.integrate(sim.panorama(*PANORAMA))
    return sim, bev


def step_points(bev: BEVMap) -> NDArray[np.float64]:
    rows, cols = np.nonzero(bev.walkable_steps)
    return bev.from_grid(rows, cols)


def tread_height(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The two-floor house's flight: step k (from 1) covers x in [1 + 0.3 (k-1), 1 + 0.3 k]."""
    return STAIR_RISE * np.ceil((x - 1.0) / 0.3)


@pytest.fixture(scope="module")
def stair_foot() -> tuple[EmbeddedSimulator, BEVMap]:
    return mapped(two_floor_house(), Pose((0.5, 0.0, 0.5), EAST))


def test_a_flight_seen_from_its_foot_is_walkable_at_its_treads_heights(
    stair_foot: tuple[EmbeddedSimulator, BEVMap],
) -> None:
    _, bev = stair_foot
    points = step_points(bev)
    on_flight = (points[:, 0] > 0.95) & (points[:, 0] < 7.05) & (points[:, 2] > -0.05) & (points[:, 2] < 1.05)
    assert len(points) > 400 and on_flight.mean() > 0.97
    # the lower treads, those seen from above, are walkable nearly throughout
    rows, cols = np.indices(bev.shape)
    centres = bev.from_grid(rows, cols)
    lower = (centres[..., 0] > 1.05) & (centres[..., 0] < 2.8) & (np.abs(centres[..., 2] - 0.5) < 0.35)
    assert bev.walkable_steps[lower].mean() > 0.9
    # each at its tread's height (to a bin), not the floor's
    x = points[on_flight, 0]
    error = np.abs(points[on_flight, 1] - tread_height(x))
    inner = np.abs(((x - 1.0) % 0.3) - 0.15) < 0.1  # away from the risers' cells
    assert np.quantile(error[inner], 0.9) <= COLUMN_BIN + 1e-6
    # the map lets the agent walk there: free, not occupied, explored
    steps = bev.walkable_steps
    assert bev.free[steps & ~bev.ledges].all() and not bev.occupied[steps & ~bev.ledges].any()
    assert bev.explored[steps].all()


def test_walkable_neighbours_never_differ_by_more_than_a_climb(
    stair_foot: tuple[EmbeddedSimulator, BEVMap],
) -> None:
    _, bev = stair_foot
    free = bev.free
    rows, cols = np.nonzero(free)
    height = np.full(bev.shape, np.nan)
    height[rows, cols] = bev.surface_height(rows, cols)
    limit = bev.config.max_climb + COLUMN_BIN + 1e-6
    for a, b in ((height[1:], height[:-1]), (height[:, 1:], height[:, :-1])):
        both = np.isfinite(a) & np.isfinite(b)
        assert np.all(np.abs(a - b)[both] <= limit)


def test_walkable_cells_beside_a_higher_or_lower_one_are_ledges() -> None:
    # A strip of steps 0.15 m apart along +x, the floor all along its side: where a step is
    # more than a climb above the floor beside it, both cells are ledges (occupied), so a
    # 2D planner cannot cut onto the middle of a flight from its side.
    bev = BEVMap(["floor"], BEVConfig())
    bev.ensure_covers((0.0, 0.5), (0.0, 0.5))
    r, c = bev.to_grid(np.array([0.0, 0.0, 0.0]))
    r0, c0 = int(r), int(c)
    bev.free_count[r0 : r0 + 2, c0 : c0 + 7] = 3.0
    bev.ground_top[r0 : r0 + 2, c0 : c0 + 7] = 0.0
    for k in range(1, 6):
        bev.free_count[r0, c0 + k] = 0.0
        bev.occupied_count[r0, c0 + k] = 5.0
        _mark(bev.column, r0, c0 + k, 0.15 * k - 0.01, bev.config.below_depth)
    bev._version += 1  # the layers were written directly
    steps = bev.walkable_steps[r0, c0 : c0 + 7]
    assert steps.tolist() == [False, True, True, True, True, True, False]
    assert np.nonzero(bev.ledges[r0, c0 : c0 + 7])[0].tolist() == [2, 3, 4, 5, 6]
    assert np.nonzero(bev.ledges[r0 + 1, c0 : c0 + 7])[0].tolist() == [2, 3, 4, 5]
    assert not bev.free[r0, c0 + 3] and bev.occupied[r0 + 1, c0 + 3]
    assert bev.free[r0, c0 + 1] and bev.free[r0 + 1, c0 + 1]


def test_a_ramp_is_walkable_along_its_slope_and_not_over_its_side_drop() -> None:
    _, bev = mapped(ramp_room(), Pose((1.0, 0.0, 2.0), EAST))
    points = step_points(bev)
    on_ramp = (points[:, 0] > 3.0) & (points[:, 0] < 6.0) & (points[:, 2] > 1.0) & (points[:, 2] < 3.0)
    assert len(points) > 500 and on_ramp.mean() > 0.97
    expected = (points[on_ramp, 0] - 3.0) / 3.0
    assert np.quantile(np.abs(points[on_ramp, 1] - expected), 0.9) <= COLUMN_BIN + 0.02
    assert points[on_ramp, 1].max() > 0.8  # seen and filled in up to near its top


@pytest.mark.parametrize(("height", "walkable"), [(0.15, True), (0.35, False), (0.75, False)])
def test_a_platform_is_a_step_only_within_max_climb(height: float, walkable: bool) -> None:
    platform = ((2.0, 0.0, 1.5), (3.0, height, 2.5), "table")
    _, bev = mapped(box_room(5.0, 4.0, extra=[platform]), Pose((0.8, 0.0, 2.0)))
    rows, cols = np.indices(bev.shape)
    centres = bev.from_grid(rows, cols)
    top = (np.abs(centres[..., 0] - 2.5) < 0.4) & (np.abs(centres[..., 2] - 2.0) < 0.4)
    assert bev.explored[top].mean() > 0.9
    if walkable:
        assert bev.walkable_steps[top].mean() > 0.9
        assert bev.surface_height(rows[top], cols[top]) == pytest.approx(height, abs=COLUMN_BIN + 1e-6)
    else:
        # nothing on its top; at most a stray cell or two where its face straddles a cell edge
        assert not bev.walkable_steps[top].any() and bev.walkable_steps.sum() <= 4


def test_a_step_needs_the_agents_headroom() -> None:
    platform = ((2.0, 0.0, 1.5), (3.0, 0.15, 2.5), "table")
    shelf = ((1.9, 1.0, 1.4), (3.1, 1.05, 2.6), "shelf")  # 0.85 m over the platform
    _, bev = mapped(box_room(5.0, 4.0, extra=[platform, shelf]), Pose((0.8, 0.0, 2.0)))
    rows, cols = np.indices(bev.shape)
    centres = bev.from_grid(rows, cols)
    under = (np.abs(centres[..., 0] - 2.5) < 0.4) & (np.abs(centres[..., 2] - 2.0) < 0.4)
    assert bev.explored[under].mean() > 0.9 and not bev.walkable_steps[under].any()


def test_stairs_down_from_the_upper_floor_are_steps_below_its_height() -> None:
    _, bev = mapped(two_floor_house(), Pose((5.0, UPPER_FLOOR, 2.0), 0.0))
    points = step_points(bev)
    assert len(points) > 20
    # down the flight as far as the map keeps surfaces below the floor (below_depth)
    deepest = UPPER_FLOOR - BEVConfig().below_depth
    assert np.all(points[:, 1] < UPPER_FLOOR) and np.all(points[:, 1] >= deepest)
    assert points[:, 1].min() < UPPER_FLOOR - 1.0
    # on the flight, but for a stray cell or two where the slab's edge straddles a cell edge
    on_flight = (points[:, 2] < 1.05) & (points[:, 0] > 1.0)
    assert (~on_flight).sum() <= 4
    error = np.abs(points[on_flight, 1] - tread_height(points[on_flight, 0]))
    assert np.quantile(error, 0.9) <= COLUMN_BIN + 1e-6


def test_candidates_and_pixels_on_the_stairs_are_goals_on_the_stairs(
    stair_foot: tuple[EmbeddedSimulator, BEVMap],
) -> None:
    sim, _ = stair_foot
    sim.reset(two_floor_house(), Pose((0.5, 0.0, 0.5), EAST))
    panorama = sim.panorama(*PANORAMA)
    bev = BEVMap(sim.categories, BEVConfig())
    bev.integrate(panorama)
    candidates = propose_candidates(panorama, bev, simulator=sim)
    up = [c for c in candidates if c.point[1] > 0.1]
    assert up, "a candidate on the flight"
    plan = choose_candidate(candidates, up[0].index, panorama, sim)
    assert not hasattr(plan, "reason"), plan
    assert plan.target[1] == pytest.approx(tread_height(np.array([plan.target[0]]))[0], abs=0.02)
    result = sim.goto(plan.target)
    assert result.reached and result.pose.position[1] > 0.1
    # a pixel on a tread the proposer did not pick: the same kind of goal
    sim.reset(two_floor_house(), Pose((0.5, 0.0, 0.5), EAST))
    row, col = world_to_pixel([2.05, 0.6, 0.5], panorama["pose"], *PANORAMA)
    row, col = round(row), round(col) % PANORAMA[1]
    plan = back_project(panorama, row, col, sim)
    assert not hasattr(plan, "reason"), plan
    assert plan.target[1] == pytest.approx(0.6, abs=0.02) and abs(plan.target[0] - 2.05) < 0.1


def test_a_table_top_is_never_a_step_in_a_furnished_house() -> None:
    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=5,floors=1")
    bev = BEVMap(sim.categories, BEVConfig())
    start = sim.pose
    for k in range(6):
        bev.integrate(sim.panorama(128, 256))
        for _ in range(4):
            sim.step("move_forward")
        sim.step("turn_left" if k % 2 else "turn_right")
    assert start is not None
    points = step_points(bev)
    # only at most a few cells (the floor seen past an edge), never a furniture top
    assert len(points) < 50 and (len(points) == 0 or points[:, 1].max() < 0.2)


def test_what_is_seen_of_the_next_floor_from_the_stairs_is_not_explored_on_this_one() -> None:
    # The ground floor's map, then a view from the flight's 16th step (2.4 m up, head above
    # the upper floor): the upper floor's surface shows in this map as steps to walk on,
    # but those cells were not seen at the ground floor's storey.
    sim = EmbeddedSimulator()
    sim.reset(two_floor_house(), Pose((0.5, 0.0, 0.5), EAST))
    bev = BEVMap(sim.categories, BEVConfig())
    bev.integrate(sim.panorama(*PANORAMA))
    bev.ensure_covers((-1.0, 9.0), (-1.0, 7.0))  # the whole house: no growth below
    seen_below = bev.explored.copy()
    bev.integrate(sim.panorama_at(Pose((5.65, 2.4, 0.5), EAST), *PANORAMA))
    layers = bev._step_layers()
    rows, cols = np.indices(bev.shape)
    centres = bev.from_grid(rows, cols)
    upstairs = layers.overhead & (centres[..., 2] > 1.4)
    walkable = upstairs & bev.walkable_steps
    assert upstairs.sum() > 100 and walkable.sum() > 0.5 * upstairs.sum()
    assert np.all(centres[walkable][:, 1] > UPPER_FLOOR - 0.2)  # the upper floor's surface
    assert not (bev.explored & upstairs & ~seen_below).any()
