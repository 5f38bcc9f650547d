"""Coverage measures: AUC arithmetic, ground-truth/BEV cell matching, tracker, replay."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scenes import box_room, l_corridor

from embodia.envs.mapping.measures import (
    CoverageTracker,
    ExplorableArea,
    RegionCoverage,
    StepOutcome,
    TrajectoryStep,
    coverage_auc,
    coverage_auc_over_distance,
    recompute_coverage,
)
from embodia.errors import EmbodiaError
from embodia.perception.bev import BEVConfig, BEVMap
from embodia.sim import EmbeddedSimulator, Pose, TopDownMap
from embodia.sim.scene import Region

# ---------------------------------------------------------------------- AUC arithmetic


def test_auc_is_the_mean_over_the_budget_with_the_last_value_carried():
    curve = [0.1, 0.2, 0.4]
    assert coverage_auc(curve, 3) == pytest.approx(0.7 / 3)
    # Ended early: steps 4 and 5 carry 0.4.
    assert coverage_auc(curve, 5) == pytest.approx((0.1 + 0.2 + 0.4 + 0.4 + 0.4) / 5)
    # Steps beyond the budget do not count.
    assert coverage_auc(curve, 2) == pytest.approx(0.15)
    # No step taken: the initial value is carried over the whole budget.
    assert coverage_auc([], 4, initial=0.3) == pytest.approx(0.3)


@pytest.mark.parametrize("budget", [0, -3, 2.5, True])
def test_auc_rejects_a_budget_that_is_not_a_positive_step_count(budget):
    with pytest.raises(ValueError, match="budget"):
        coverage_auc([0.5], budget)


def test_auc_over_distance_integrates_a_step_function_of_metres():
    # initial 0.1 on [0, 0]; 0.1 on [0, 1]; 0.2 on [1, 1]; 0.3 on [1, 3]; 0.5 on [3, 4].
    distances = [0.0, 1.0, 1.0, 3.0]
    curve = [0.1, 0.2, 0.3, 0.5]
    assert coverage_auc_over_distance(distances, curve, 4.0, initial=0.1) == pytest.approx(1.2 / 4)
    # Cut at 2 m: 0.1 * 1 + 0.3 * 1.
    assert coverage_auc_over_distance(distances, curve, 2.0, initial=0.1) == pytest.approx(0.4 / 2)
    with pytest.raises(ValueError, match="cumulative"):
        coverage_auc_over_distance([1.0, 0.5], [0.1, 0.2], 2.0)


# ---------------------------------------------------------------------- cell matching


def _square_topdown(cells: int, resolution: float = 0.05) -> TopDownMap:
    return TopDownMap(
        navigable=np.ones((cells, cells), dtype=bool),
        origin=(0.0, 0.0),
        resolution=resolution,
        floor_height=0.0,
    )


def test_ground_truth_cells_are_matched_into_coarser_bev_cells_by_their_centres():
    # 20 x 20 GT cells of 5 cm = 1 m2; the BEV has 10 cm cells, so each BEV cell holds 4 GT cells.
    explorable = ExplorableArea(_square_topdown(20))
    assert explorable.area_m2 == pytest.approx(1.0)
    bev = BEVMap(["void", "floor"], BEVConfig(resolution=0.1))
    bev.ensure_covers((-1.0, 2.0), (-1.0, 2.0))
    rows, cols = bev.to_grid(np.array([[0.05, 0.0, 0.05], [0.45, 0.0, 0.75]]))
    bev.free_count[rows[0], cols[0]] = 1.0  # x, z in [0, 0.1): GT cells (0..1, 0..1)
    bev.occupied_count[rows[1], cols[1]] = 3.0  # occupied evidence counts as observed too
    assert explorable.covered_cells(bev) == 8
    # A BEV cell outside the explorable square adds nothing.
    r, c = bev.to_grid(np.array([1.55, 0.0, 0.05]))
    bev.free_count[r, c] = 1.0
    assert explorable.covered_cells(bev) == 8
    # Growing the grid towards -x shifts every index; the match must follow.
    bev.ensure_covers((-6.0, 2.0), (-1.0, 2.0))
    assert explorable.covered_cells(bev) == 8


def test_an_empty_ground_truth_is_an_error():
    topdown = TopDownMap(np.zeros((3, 3), dtype=bool), (0.0, 0.0), 0.05, 0.0)
    with pytest.raises(EmbodiaError, match="no navigable cell"):
        ExplorableArea(topdown)


# ---------------------------------------------------------------------- box room


def test_one_panorama_at_the_centre_of_a_box_room_covers_it():
    width, depth = 4.0, 3.0
    sim = EmbeddedSimulator()
    pose = sim.reset(box_room(width, depth), Pose((width / 2, 0.0, depth / 2)))
    bev = BEVMap(sim.categories)
    bev.integrate(sim.panorama(128, 256))
    tracker = CoverageTracker()
    tracker.reset(sim, pose, bev)
    metrics = tracker.metrics()
    # Explorable: the interior less the agent radius along each wall (5 cm cells).
    radius = sim.config.agent_radius
    assert metrics["explorable_m2"] == pytest.approx((width - 2 * radius) * (depth - 2 * radius), rel=0.03)
    assert metrics["coverage_ratio"] > 0.98
    assert metrics["coverage_m2"] == pytest.approx(metrics["explorable_m2"], rel=0.02)
    assert metrics["steps"] == 0 and metrics["path_length"] == 0.0


def test_tracker_carries_coverage_over_steps_without_observation():
    sim = EmbeddedSimulator()
    start = sim.reset(l_corridor(), Pose((0.5, 0.0, 0.5), yaw=-np.pi / 2))  # facing +x along arm A
    bev = BEVMap(sim.categories)
    bev.integrate(sim.panorama(64, 128))
    tracker = CoverageTracker(budget=10)
    tracker.reset(sim, start, bev)
    c0 = tracker.coverage_ratio.get_metric()
    assert 0.0 < c0 < 1.0
    assert tracker.initial_ratio == c0
    # Two blind steps (inside a goto), then an observation after walking 4 forward steps.
    for _ in range(4):
        sim.step("move_forward")
    tracker.update(StepOutcome(sim.pose, distance=0.25))
    tracker.update(StepOutcome(sim.pose, distance=0.25, collided=True))
    assert tracker.curve == [c0, c0]
    bev.integrate(sim.panorama(64, 128))
    tracker.update(StepOutcome(sim.pose, distance=0.5, bev=bev))
    tracker.end_decision()
    c3 = tracker.coverage_ratio.get_metric()
    assert c3 > c0
    metrics = tracker.metrics()
    assert metrics["steps"] == 3 and metrics["collisions"] == 1
    assert metrics["path_length"] == pytest.approx(1.0)
    assert metrics["coverage_m2"] == pytest.approx(c3 * metrics["explorable_m2"])
    assert metrics["coverage_auc"] == pytest.approx((c0 + c0 + 8 * c3) / 10)
    assert tracker.auc(3) == pytest.approx((2 * c0 + c3) / 3)
    assert tracker.distance_curve == pytest.approx([0.25, 0.5, 1.0])
    assert tracker.area_curve[-1] == pytest.approx(metrics["coverage_m2"])
    assert tracker.decision_curve() == [c3]
    assert [s.observed for s in tracker.trajectory] == [True, False, False, True]
    summary = tracker.summary()
    assert summary["coverage_auc_500"] == pytest.approx((2 * c0 + 498 * c3) / 500)
    assert summary["coverage_auc_1000"] == pytest.approx((2 * c0 + 998 * c3) / 1000)


def test_tracker_needs_a_reset():
    tracker = CoverageTracker()
    with pytest.raises(EmbodiaError, match="reset"):
        tracker.update(StepOutcome(Pose((0.0, 0.0, 0.0))))


def test_recompute_from_a_saved_trajectory_reproduces_the_curve():
    scene = l_corridor()
    sim = EmbeddedSimulator()
    pose = sim.reset(scene, Pose((0.5, 0.0, 0.5), yaw=-np.pi / 2))
    bev = BEVMap(sim.categories)
    bev.integrate(sim.panorama(64, 128))
    tracker = CoverageTracker(budget=20)
    tracker.reset(sim, pose, bev)
    actions = ["move_forward"] * 6 + ["turn_right"] * 3 + ["move_forward"] * 4 + ["turn_left"] * 2
    for i, action in enumerate(actions):
        result = sim.step(action)  # type: ignore[arg-type]
        observed = i % 3 != 1  # every third step observes nothing, as inside a goto
        if observed:
            bev.integrate(sim.panorama(64, 128))
        tracker.update(StepOutcome(result.pose, result.collided, bev=bev if observed else None))
    curve = recompute_coverage(EmbeddedSimulator(), scene, tracker.trajectory, (64, 128))
    assert curve == tracker.curve
    assert curve[-1] > tracker.initial_ratio
    # Replaying the same poses blind gives a flat curve: the comparison is not vacuous.
    blind = [tracker.trajectory[0], *(TrajectoryStep(s.pose, False) for s in tracker.trajectory[1:])]
    flat = recompute_coverage(EmbeddedSimulator(), scene, blind, (64, 128))
    assert flat == [tracker.initial_ratio] * len(actions) != curve
    with pytest.raises(ValueError, match="at least the reset pose"):
        recompute_coverage(sim, scene, [], (64, 128))


def test_non_positive_lengths_name_the_argument_and_unit() -> None:
    with pytest.raises(ValueError, match=r"^max_distance must be a positive number of metres, got 0$"):
        coverage_auc_over_distance([0.5], [1.0], 0)
    with pytest.raises(ValueError) as caught:
        CoverageTracker(resolution=math.nan)
    assert str(caught.value) == "coverage resolution must be a positive number of metres, got nan"


# ---------------------------------------------------------------------- one room's coverage


def test_region_coverage_counts_the_steps_until_a_room_is_seen():
    # 1 m2 of floor; the room is its half x < 0.5 (200 of the 400 cells of 5 cm).
    explorable = ExplorableArea(_square_topdown(20))
    room = Region("kitchen", 0.0, ((0.0, 0.0), (0.5, 0.0), (0.5, 1.0), (0.0, 1.0)))
    assert explorable.region_cells(room).sum() == 200
    tracker = CoverageTracker(budget=10)
    pose = Pose((0.8, 0.0, 0.5))
    tracker.reset(explorable, pose, None)
    watch = RegionCoverage(room)
    tracker.track(watch, None)
    bev = BEVMap(["void", "floor"], BEVConfig())
    bev.ensure_covers((-1.0, 2.0), (-1.0, 2.0))

    def see_up_to(x: float) -> BEVMap:
        rows, cols = bev.to_grid(np.array([[0.01, 0.0, 0.01], [x - 0.01, 0.0, 0.99]]))
        bev.free_count[rows[0] : rows[1] + 1, cols[0] : cols[1] + 1] = 1.0
        bev._version += 1  # written directly, not integrated
        return bev

    tracker.update(StepOutcome(pose))  # nothing observed
    tracker.update(StepOutcome(pose, bev=see_up_to(0.3)))
    tracker.update(StepOutcome(pose))  # carries 0.6
    tracker.update(StepOutcome(pose, bev=see_up_to(0.5)))
    assert watch.curve == pytest.approx([0.0, 0.6, 0.6, 1.0])
    assert (watch.steps_until(0.5), watch.steps_until(0.9), watch.steps_until(1.01)) == (2, 4, None)
    assert tracker.coverage_ratio.get_metric() == pytest.approx(0.5)  # the built-ins go on as before

    with pytest.raises(ValueError, match="already tracked"):
        tracker.track(RegionCoverage(room), None)
    upstairs = Region("kitchen", 2.7, room.outline)
    with pytest.raises(EmbodiaError, match="track measures after reset"):
        CoverageTracker().track(RegionCoverage(upstairs), None)
    tracker.reset(explorable, pose, None)
    with pytest.raises(EmbodiaError, match="holds no explorable cell"):
        tracker.track(RegionCoverage(upstairs), None)
