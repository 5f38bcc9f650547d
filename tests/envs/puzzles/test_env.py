"""embodia/Puzzle-v0: registration, checker, determinism, scoring through the env."""

from __future__ import annotations

import json

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import embodia.envs  # noqa: F401  (registers the ids)
from embodia.envs.puzzles.core import PuzzleError


@pytest.mark.parametrize("task", ["maze", "sudoku", "jigsaw", "frozenlake", "tsp"])
def test_every_grid_puzzle_passes_the_checker(task: str) -> None:
    env = gymnasium.make("embodia/Puzzle-v0", task=task, difficulty="easy", image_size=64)
    check_env(env.unwrapped, skip_render_check=True)


def test_the_true_answer_earns_full_reward_and_a_near_miss_less() -> None:
    env = gymnasium.make("embodia/Puzzle-v0", task="maze", difficulty="medium", image_size=64)
    obs, info = env.reset(seed=0, options={"seed": 11})
    assert obs["image"].shape == (64, 64, 3) and "maze" in obs["prompt"].lower()
    assert info["instance"] == {"task": "maze", "difficulty": "medium", "seed": 11}  # no answer, no facts
    truth = env.unwrapped.ground_truth()["answer"]
    answer = truth if isinstance(truth, str) else json.dumps(truth)
    _, reward, terminated, _, step_info = env.step(json.dumps({"answer": answer}))
    assert terminated and reward == 1.0 and step_info["correct"]
    env.reset(options={"seed": 11})
    _, reward, _, _, step_info = env.step("I am not sure")
    assert reward < 1.0 and not step_info["correct"] and step_info["reason"]


def test_same_seed_same_puzzle_and_bad_options() -> None:
    a = gymnasium.make("embodia/Puzzle-v0", task="sudoku")
    b = gymnasium.make("embodia/Puzzle-v0", task="sudoku")
    (obs_a, info_a), (obs_b, info_b) = a.reset(seed=3), b.reset(seed=3)
    assert info_a["instance"] == info_b["instance"] and (obs_a["image"] == obs_b["image"]).all()
    with pytest.raises(PuzzleError, match="difficulty"):
        gymnasium.make("embodia/Puzzle-v0", task="maze", difficulty="impossible")
    with pytest.raises(PuzzleError, match="unknown puzzle task"):
        gymnasium.make("embodia/Puzzle-v0", task="chess")


@pytest.mark.parametrize("task", ["maze", "sudoku", "jigsaw", "frozenlake", "tsp", "clevr", "embodied"])
def test_nothing_an_agent_sees_at_reset_holds_the_answer(task: str) -> None:
    env = gymnasium.make("embodia/Puzzle-v0", task=task, difficulty="easy", image_size=32)
    obs, info = env.reset(options={"seed": 5})
    truth = env.unwrapped.ground_truth()
    assert set(info["instance"]) == {"task", "difficulty", "seed"}
    assert "answer" not in json.dumps(info) and "facts" not in json.dumps(info)
    assert truth["seed"] == 5 and "answer" in truth and "facts" in truth
    _, _, terminated, _, step_info = env.step("no idea")
    assert terminated and step_info["instance"] == truth  # the record comes once the episode is over


def test_ground_truth_before_reset_is_an_error() -> None:
    with pytest.raises(PuzzleError, match="before reset"):
        gymnasium.make("embodia/Puzzle-v0", task="maze").unwrapped.ground_truth()


@pytest.mark.parametrize("task", ["maze", "sudoku", "frozenlake", "tsp"])
def test_text_prompts_carry_the_puzzles_text_drawing(task: str) -> None:
    env = gymnasium.make("embodia/Puzzle-v0", task=task, difficulty="easy", image_size=64, text=True)
    plain = gymnasium.make("embodia/Puzzle-v0", task=task, difficulty="easy", image_size=64)
    obs, _ = env.reset(options={"seed": 4})
    plain_obs, _ = plain.reset(options={"seed": 4})
    drawing = env.unwrapped.task.text(env.unwrapped.instance)
    assert obs["prompt"] == f"{plain_obs['prompt']}\n\n{drawing}"
    assert env.observation_space["prompt"].contains(obs["prompt"])


def test_text_prompts_are_refused_for_a_puzzle_without_a_text_drawing() -> None:
    with pytest.raises(PuzzleError, match="jigsaw puzzle has no text drawing"):
        gymnasium.make("embodia/Puzzle-v0", task="jigsaw", text=True)
