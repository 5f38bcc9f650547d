"""The frontier tour planner (TARE's idea): clusters of frontier segments, a tour over them with
the least size-weighted latency, and the agent driving the env with it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from embodia.agents.baselines import make_agent
from embodia.agents.baselines.tour import cluster_frontiers, plan_tour, tour_costs, tour_latency
from embodia.perception.bev import FrontierSegment


def _segment(index: int, cells: list[tuple[int, int]]) -> FrontierSegment:
    array = np.array(cells, dtype=np.int64)
    return FrontierSegment(index, array, np.zeros(3), np.zeros(3), len(cells))


def test_nearby_segments_form_one_cluster_entered_at_its_cheapest_cell() -> None:
    cost = np.full((40, 40), np.inf)
    cost[:, :30] = np.add.outer(np.arange(40), np.arange(40))[:, :30] * 0.05  # reachable part
    segments = [
        _segment(0, [(10, 10), (10, 11), (10, 12)]),
        _segment(1, [(12, 14), (13, 14)]),  # 4.5 cells from segment 0: the same cluster
        _segment(2, [(30, 5), (31, 5), (32, 5), (33, 5)]),
        _segment(3, [(5, 35), (6, 35)]),  # beyond what is reachable: left out
    ]
    clusters = cluster_frontiers(segments, cost, radius_cells=5.0)
    assert len(clusters) == 2
    near = next(c for c in clusters if c.size == 5)
    assert near.anchor == (10, 10) and near.cost == pytest.approx(20 * 0.05)
    far = next(c for c in clusters if c.size == 4)
    assert far.anchor == (30, 5)


def test_tours_are_near_the_best_weighted_latency() -> None:
    rng = np.random.default_rng(0)
    exact = 0
    for _ in range(30):
        points = rng.uniform(0, 20, size=(6, 2))  # the agent and 5 clusters on an open floor
        costs = np.linalg.norm(points[:, None] - points[None, :], axis=-1)
        sizes = rng.integers(3, 60, size=5).astype(float)
        order = plan_tour(costs, sizes)
        assert sorted(order) == list(range(5))
        best = min(tour_latency(costs, sizes, list(p)) for p in itertools.permutations(range(5)))
        found = tour_latency(costs, sizes, order)
        assert found <= 1.1 * best
        exact += math.isclose(found, best)
    assert exact >= 20


def test_a_large_cluster_a_little_further_comes_before_a_sliver_next_door() -> None:
    # agent, a 5-cell sliver 1 m away, a 200-cell doorway 3 m away in the other direction
    costs = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 4.0], [3.0, 4.0, 0.0]])
    assert plan_tour(costs, np.array([5.0, 200.0])) == [1, 0]
    assert plan_tour(costs, np.array([200.0, 5.0])) == [0, 1]


def test_costs_between_clusters_follow_the_map() -> None:
    from embodia.agents.baselines.tour import Cluster

    free = np.ones((20, 30), dtype=bool)
    free[0:15, 15] = False  # a wall open at the bottom
    clusters = [Cluster((5, 5), 1.0, 10), Cluster((5, 25), 2.0, 10)]
    costs = tour_costs(clusters, free, 0.05)
    assert costs.shape == (3, 3) and costs[0, 1] == pytest.approx(1.0)
    assert costs[1, 2] > 20 * 0.05 + 0.3  # round the wall (1.47 m), not through it (1 m)
    assert np.allclose(costs, costs.T)


def test_the_tour_agent_explores_a_house() -> None:
    import gymnasium

    import embodia.envs  # noqa: F401
    from embodia.evals.explore import _EnvView

    env = gymnasium.make("embodia/ActiveMapping-v0", max_steps=600, panorama_height=64, panorama_width=128)
    observation, info = env.reset(seed=0, options={"scene": "procedural:seed=1,rooms=3"})
    agent = make_agent("tour")
    agent.reset(_EnvView(env.unwrapped), seed=0)
    tours = []
    while True:
        observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
        tours.append(len(agent.last_tour))  # type: ignore[attr-defined]
        if terminated or truncated:
            break
    env.close()
    assert info["coverage_ratio"] >= 0.9
    assert max(tours) >= 2, "some plans visited more than one cluster"
