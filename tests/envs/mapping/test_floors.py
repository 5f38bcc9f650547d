"""Mapping a house of two floors: a map per floor, coverage over both floors' explorable area,
and the replay of a run that went upstairs."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import embodia.envs  # noqa: F401  (registers the env ids)
from embodia.envs.mapping.measures import ExplorableArea, floor_of, recompute_coverage
from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.habitat.simulator import floor_heights
from embodia.sim.worlds import UPPER_FLOOR, two_floor_house


def test_a_point_is_on_the_highest_floor_at_or_below_it() -> None:
    heights = [0.0, 3.0]
    assert [floor_of(heights, y, 0.2) for y in (-0.05, 0.0, 1.5, 2.79, 2.8, 3.0, 6.0)] == [
        0,
        0,
        0,
        0,
        1,
        1,
        1,
    ]
    assert floor_of([0.4], -3.0, 0.2) == 0


def test_floors_from_sampled_navmesh_heights() -> None:
    rng = np.random.default_rng(0)
    two = np.r_[rng.normal(0.0, 0.005, 300), rng.normal(2.7, 0.005, 250), rng.uniform(0.0, 2.7, 40)]
    assert floor_heights(two, agent_height=1.5) == pytest.approx([0.0, 2.7], abs=0.02)
    terrain = rng.uniform(-0.5, 0.5, 400)  # one floor whose height varies: its densest level
    assert len(floor_heights(terrain, agent_height=1.5)) == 1
    assert floor_heights([], 1.5) == []


def test_the_simulator_lists_every_floor_and_topdown_is_the_agents() -> None:
    sim = EmbeddedSimulator()
    sim.reset(two_floor_house(), Pose((4.0, 0.0, 4.0), 0.0))
    maps = sim.floor_maps(0.1)
    assert [m.floor_height for m in maps] == pytest.approx([0.0, UPPER_FLOOR], abs=0.01)
    assert np.array_equal(sim.topdown(0.1).navigable, maps[0].navigable)
    explorable = ExplorableArea.of(sim)
    assert explorable.area_m2 == pytest.approx(sim.nav.navigable_area)
    assert explorable.start_floor == 0
    sim.goto([4.0, UPPER_FLOOR, 4.0])
    assert np.array_equal(sim.topdown(0.1).navigable, maps[1].navigable)
    assert ExplorableArea.of(sim).start_floor == 1


def test_going_upstairs_maps_the_upper_floor_apart_and_counts_its_area() -> None:
    env = gymnasium.make(
        "embodia/ActiveMappingWaypoint-v0", max_steps=400, panorama_height=64, panorama_width=128
    )
    _, info = env.reset(
        seed=0, options={"scene": two_floor_house(), "start_pose": Pose((4.0, 0.0, 4.0), 0.0)}
    )
    mapping = env.unwrapped
    both = mapping.simulator.nav.navigable_area
    assert info["explorable_m2"] == pytest.approx(both, rel=0.01)  # both floors, from the start
    ground_only = info["coverage_m2"]
    assert ground_only < mapping.simulator.nav.floor_areas()[0] + 0.5
    _, _, _, _, info = mapping.step_to_point([4.0, UPPER_FLOOR, 4.0])
    assert mapping.simulator.pose.position[1] == pytest.approx(UPPER_FLOOR, abs=0.01)
    assert sorted(mapping.bevs) == [0, 1] and mapping.bev is mapping.bevs[1]
    assert info["coverage_m2"] > ground_only + 10.0, "the upper floor's area counts once seen"
    # the ground floor's map holds no view from upstairs: nothing was integrated there after
    # the agent left it (its trajectory ends on the stairs)
    assert mapping.bevs[0].trajectory[-1].position[1] < UPPER_FLOOR - 0.2
    # the replay of the run lands on the same coverage
    trajectory = mapping.coverage.trajectory
    curve = recompute_coverage(EmbeddedSimulator(), two_floor_house(), trajectory, (64, 128))
    assert curve[-1] == pytest.approx(info["coverage_ratio"], abs=1e-9)
    env.close()
