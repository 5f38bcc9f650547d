"""Generated waypoint teacher episodes: the teacher picks the largest estimated unseen area, each
record's prompt is the waypoint view's prompt, and each reply reads back as the teacher's pick."""

from __future__ import annotations

import re
from typing import Any

import gymnasium
import numpy as np
import pytest

import embodia.envs  # noqa: F401  (registers the env ids)
from embodia.policies.recipes.solutions import (
    WAYPOINT_ENV_ID,
    waypoint_episode,
    waypoint_reply,
    waypoint_solution_records,
    waypoint_teacher,
    waypoint_teacher_choice,
)
from embodia.policies.rollout_views import RolloutError, WaypointView

SMALL = {"max_steps": 12, "rooms": 2, "panorama_height": 32, "panorama_width": 64}
"""A short budget in a small house with small panoramas: episodes of a few decisions, in seconds."""


@pytest.fixture(scope="module")
def env_and_view() -> Any:
    env = gymnasium.make(WAYPOINT_ENV_ID, **SMALL)
    yield env, WaypointView(WAYPOINT_ENV_ID, env.observation_space, env.action_space, images=False)
    env.close()


def test_the_teacher_picks_the_largest_gain_the_prompt_shows(env_and_view: Any) -> None:
    env, view = env_and_view
    observations = []
    for seed in range(3):
        observation, _ = env.reset(seed=seed)
        observations.append(observation)
        shown = np.flatnonzero(observation["candidate_mask"])
        observations.append(env.step(int(shown[-1]))[0])  # a second position, not the start
    checked = 0
    for observation in observations:
        shown = np.flatnonzero(observation["candidate_mask"])
        if len(shown) < 2:
            continue
        # the gains as the prompt shows them: "about N m2 unseen around it"
        text = view.prompt(observation).messages[-1]["content"]
        lines = [(int(k), int(n)) for k, n in re.findall(r"^(\d+): .*about (\d+) m2 unseen", text, re.M)]
        listed = dict(lines)
        assert sorted(listed) == [int(k) for k in shown]
        # largest shown gain first, ties by number: the teacher's pick is the first line
        assert lines == sorted(lines, key=lambda line: (-line[1], line[0]))
        choice = waypoint_teacher_choice(observation)
        assert choice == lines[0][0]
        assert listed[choice] == max(listed.values())
        assert all(listed[k] < listed[choice] for k in listed if k < choice)  # ties go to the lowest
        checked += 1
    assert checked >= 3


def test_ties_go_to_the_lowest_shown_number_and_hidden_candidates_never_win() -> None:
    observation = {
        "candidate_mask": np.array([0, 1, 1, 1, 0], dtype=np.int8),
        "candidate_gain_m2": np.array([9.0, 2.0, 5.0, 5.0, 7.0], dtype=np.float32),
    }
    assert waypoint_teacher_choice(observation) == 2
    # 5.4 and 5.2 both read "about 5 m2": the lower number wins, as a reader of the text would pick
    observation["candidate_gain_m2"] = np.array([9.0, 2.0, 5.2, 5.4, 7.0], dtype=np.float32)
    assert waypoint_teacher_choice(observation) == 2
    observation["candidate_gain_m2"] = np.array([9.0, 2.0, 5.2, 5.6, 7.0], dtype=np.float32)
    assert waypoint_teacher_choice(observation) == 3
    observation["candidate_mask"] = np.zeros(5, dtype=np.int8)
    assert waypoint_teacher_choice(observation) is None


def test_records_are_the_views_prompts_and_their_replies_read_back_as_the_teachers_pick(
    env_and_view: Any,
) -> None:
    env, view = env_and_view
    total = 0
    for seed in (0, 1):
        records = waypoint_solution_records([seed], env_options=SMALL)
        assert records, "a teacher episode makes at least one decision"
        observation, _ = env.reset(seed=seed)
        for record in records:
            *prompt, reply = record["messages"]
            assert prompt == list(view.prompt(observation).messages)
            assert [m["role"] for m in prompt] == ["system", "user"] and reply["role"] == "assistant"
            choice = waypoint_teacher_choice(observation)
            assert reply["content"] == waypoint_reply(choice) == f"Answer: {choice}"
            assert view.action(reply["content"], observation) == choice
            observation, _, terminated, truncated, _ = env.step(choice)
        assert terminated or truncated  # the episode ran to the env's own end
        total += len(records)
    assert waypoint_solution_records([0, 1], env_options=SMALL) == (
        waypoint_solution_records([0], env_options=SMALL) + waypoint_solution_records([1], env_options=SMALL)
    )
    assert total >= 3


def test_records_are_deterministic_and_other_seeds_are_other_houses() -> None:
    first = waypoint_solution_records(range(2), env_options=SMALL)
    assert first == waypoint_solution_records(range(2), env_options=SMALL)
    other = waypoint_solution_records(range(100, 102), env_options=SMALL)
    assert {r["messages"][1]["content"] for r in first}.isdisjoint(r["messages"][1]["content"] for r in other)
    assert len(waypoint_solution_records(range(2), env_options=SMALL, max_turns=1)) == 2


def test_an_episode_scores_its_picker_and_reports_the_env_info(env_and_view: Any) -> None:
    env, view = env_and_view
    records, info = waypoint_episode(env, view, 0, waypoint_teacher)
    assert 0 < info["coverage_auc"] <= 1 and info["steps"] == SMALL["max_steps"]

    def lowest(observation: Any) -> int:
        return int(np.flatnonzero(observation["candidate_mask"])[0])

    picked, _ = waypoint_episode(env, view, 0, lowest, max_turns=2)
    assert len(picked) <= 2 and picked[0]["messages"][:-1] == records[0]["messages"][:-1]
    assert picked[0]["messages"][-1]["content"] == waypoint_reply(lowest(env.reset(seed=0)[0]))


def test_a_pick_the_view_cannot_read_back_is_an_error(env_and_view: Any) -> None:
    env, view = env_and_view
    with pytest.raises(
        RolloutError, match="'Answer: 99' does not read back as waypoint 99: choice 99 is not one of"
    ):
        waypoint_episode(env, view, 0, lambda observation: 99)


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda: waypoint_solution_records([-1], env_options=SMALL), "non-negative integers"),
        (lambda: waypoint_solution_records([0], env_options=SMALL, max_turns=0), "max_turns must be"),
        (lambda: waypoint_solution_records([0], env_options={**SMALL, "flavour": 1}), "cannot make"),
        (
            lambda: waypoint_solution_records([0], env_options={**SMALL, "action_type": "pixel"}),
            "action_type='index'",
        ),
    ],
)
def test_bad_input_names_the_problem(call: Any, problem: str) -> None:
    with pytest.raises(RolloutError, match=problem):
        call()
