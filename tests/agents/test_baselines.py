"""Baselines driving the real ActiveMapping env: the frontier agent must actually explore."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import embodia.envs  # noqa: F401  (registers the env ids)
from embodia.agents.baselines import make_agent
from embodia.errors import EmbodiaError
from embodia.evals.explore import _EnvView
from embodia.perception.planning import distance_field


def _run(agent_name: str, scene: str, steps: int, seed: int = 0) -> tuple[list[float], dict]:
    env = gymnasium.make("embodia/ActiveMapping-v0", max_steps=steps, panorama_height=64, panorama_width=128)
    observation, info = env.reset(seed=seed, options={"scene": scene})
    agent = make_agent(agent_name)
    agent.reset(_EnvView(env.unwrapped), seed=seed)
    curve = [info["coverage_ratio"]]
    for _ in range(steps):
        observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
        curve.append(info["coverage_ratio"])
        if terminated or truncated:
            break
    env.close()
    return curve, info


@pytest.mark.parametrize("seed", [0, 1])
def test_frontier_agent_covers_a_three_room_house_within_1000_steps(seed: int) -> None:
    curve, info = _run("frontier", f"procedural:seed={seed},rooms=3", 1000)
    assert max(curve) >= 0.9, f"frontier agent reached only {max(curve):.3f} coverage"
    assert info["collisions"] < 40  # bumps are remembered: no bump-and-retry loops


def test_frontier_beats_random_walk_on_the_same_house() -> None:
    frontier, _ = _run("frontier", "procedural:seed=2,rooms=4", 300)
    random_walk, _ = _run("random", "procedural:seed=2,rooms=4", 300)
    assert np.mean(frontier) > np.mean(random_walk)


def test_random_walk_travels_and_turns_after_bumping() -> None:
    curve, info = _run("random", "procedural:seed=3,rooms=3", 200)
    assert info["path_length"] > 5.0
    assert curve[-1] > curve[0]


def test_unknown_agent_is_a_clear_error() -> None:
    with pytest.raises(EmbodiaError, match="unknown agent 'greedy'"):
        make_agent("greedy")


def test_distance_field_matches_grid_geometry() -> None:
    free = np.ones((20, 30), dtype=bool)
    free[5:15, 10] = False  # a wall with gaps at both ends
    field = distance_field(free, (10, 5), 0.05)
    assert field.cost[10, 5] == 0.0
    assert field.cost[10, 0] == pytest.approx(5 * 0.05)
    assert field.cost[10, 8] == pytest.approx(3 * 0.05)
    # Across the wall the path goes round an end: longer than the straight 10 cells.
    assert field.cost[10, 15] > 10 * 0.05 + 0.2
    path = field.path_to(10, 15)
    assert tuple(path[0]) == (10, 5) and tuple(path[-1]) == (10, 15)
    assert free[path[:, 0], path[:, 1]].all()
    blocked = np.zeros_like(free)
    blocked[0, 0] = True
    assert not np.isfinite(distance_field(blocked, (0, 0), 0.05).cost[5, 5])


def test_baselines_drive_the_waypoint_env() -> None:
    results = {}
    for name in ("frontier", "random"):
        env = gymnasium.make(
            "embodia/ActiveMappingWaypoint-v0", max_steps=300, panorama_height=64, panorama_width=128
        )
        observation, info = env.reset(seed=0, options={"scene": "procedural:seed=4,rooms=5"})
        agent = make_agent(name)
        agent.reset(_EnvView(env.unwrapped), seed=0)
        while True:
            action = agent.act(observation, info)
            assert observation["candidate_mask"][action] or not observation["candidate_mask"].any()
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        results[name] = info["coverage_auc"]
        assert info["rejections"] == 0
        env.close()
    assert results["frontier"] > results["random"]
