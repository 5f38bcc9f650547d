"""Generated SFT solutions: every reply gets full marks from the DSR env's own scorer, the prompts
are the env's observations, and seed ranges are deterministic and disjoint."""

from __future__ import annotations

import json

import gymnasium
import pytest

from embodia.envs.dsr.core import DSRError
from embodia.policies.recipes.solutions import (
    DSR_ENV_ID,
    dsr_env_options,
    dsr_instances,
    dsr_solution_records,
)

TRAIN = range(0, 200)
HELD_OUT = range(10_000, 10_100)


@pytest.mark.parametrize("operation", ["array.access", "queue.compound", "bst.inorder"])
def test_every_reply_scores_full_marks_through_the_env(operation: str) -> None:
    seeds = range(40)
    records = dsr_solution_records(seeds, operation=operation)
    instances = dsr_instances(seeds, operation=operation)
    env = gymnasium.make(DSR_ENV_ID, **dsr_env_options(instances))
    for index, (record, instance) in enumerate(zip(records, instances, strict=True)):
        user, assistant = record["messages"]
        assert (user["role"], assistant["role"]) == ("user", "assistant")
        observation, info = env.reset(options={"index": index})
        assert observation == user["content"]
        assert info["operation"] == operation
        _, reward, terminated, _, step_info = env.step(assistant["content"])
        assert (reward, terminated, step_info["failure"]) == (1.0, True, None)
        assert json.loads(assistant["content"]) == {"final_answer": instance.truth}
    env.close()


def test_the_scorer_refuses_a_wrong_answer() -> None:
    """The round trip above can fail: the same env gives 0 to an answer one off the truth."""
    (instance,) = dsr_instances([3])
    env = gymnasium.make(DSR_ENV_ID, **dsr_env_options([instance]))
    env.reset(options={"index": 0})
    _, reward, _, _, info = env.step(json.dumps({"final_answer": instance.truth + 1}))
    assert reward == 0.0 and info["failure"] == "wrong_final"
    env.close()


def test_records_are_deterministic_by_seed_and_ranges_do_not_overlap() -> None:
    train = dsr_solution_records(TRAIN)
    assert train == dsr_solution_records(TRAIN)
    assert dsr_solution_records([5, 7]) == [train[5], train[7]]
    held_out = dsr_solution_records(HELD_OUT)
    train_prompts = {r["messages"][0]["content"] for r in train}
    held_out_prompts = {r["messages"][0]["content"] for r in held_out}
    assert len(train_prompts) == len(TRAIN) and len(held_out_prompts) == len(HELD_OUT)
    assert not train_prompts & held_out_prompts
    other_family = dsr_solution_records(TRAIN, instance_seed=1)
    assert not train_prompts & {r["messages"][0]["content"] for r in other_family}


def test_a_system_message_comes_first() -> None:
    (record,) = dsr_solution_records([0], system="Answer in JSON.")
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant"]
    assert record["messages"][0]["content"] == "Answer in JSON."


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"seeds": [-1]}, "non-negative integers"),
        ({"seeds": [1.5]}, "non-negative integers"),
        ({"seeds": [0], "operation": "array.nope"}, "unknown DSR operation"),
        ({"seeds": [0], "operation": "kd_tree.construct"}, "spatial suite"),
        ({"seeds": [0], "length": "huge"}, "unknown length"),
    ],
)
def test_bad_input_names_the_problem(kwargs: dict[str, object], problem: str) -> None:
    with pytest.raises(DSRError, match=problem):
        dsr_solution_records(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("task", ["maze", "frozenlake", "sudoku"])
def test_puzzle_records_show_the_text_drawing_and_solve_it(task: str) -> None:
    from embodia.policies.recipes.solutions import PUZZLE_ENV_ID, puzzle_solution_records

    records = puzzle_solution_records(task, "easy", [3, 4])
    env = gymnasium.make(PUZZLE_ENV_ID, task=task, difficulty="easy", text=True)
    for seed, record in zip([3, 4], records, strict=True):
        user, assistant = record["messages"]
        observation, _ = env.reset(options={"seed": seed})
        drawing = env.unwrapped.task.text(env.unwrapped.instance)
        assert user == {"role": "user", "content": observation["prompt"]} and drawing in user["content"]
        assert env.step(assistant["content"])[1] == 1.0
    if task == "maze":
        assert json.loads(records[0]["messages"][1]["content"]) == {
            "path": env.unwrapped.task.generate(3, "easy").answer
        }
