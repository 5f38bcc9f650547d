"""embodia/DSR-v0 and embodia/DSRInteractive-v0: env checker, determinism, options, rewards and info."""

from __future__ import annotations

import json

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import embodia.envs  # noqa: F401  (registers the ids)
from embodia.envs.dsr.core import DSRError, canonical


@pytest.mark.parametrize("env_id", ["embodia/DSR-v0", "embodia/DSRInteractive-v0"])
def test_env_checker(env_id: str) -> None:
    env = gymnasium.make(env_id, operation="queue.compound", length="short")
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ["embodia/DSR-v0", "embodia/DSRInteractive-v0"])
def test_same_seed_same_episode(env_id: str) -> None:
    first = gymnasium.make(env_id, structure="heap")
    second = gymnasium.make(env_id, structure="heap")
    observations = [first.reset(seed=s)[0] for s in (1, 2, 3)]
    assert observations == [second.reset(seed=s)[0] for s in (1, 2, 3)]
    assert len(set(observations)) > 1


def test_correct_answer_scores_one_and_info_has_the_diagnostics() -> None:
    env = gymnasium.make("embodia/DSR-v0", mode="none")
    prompt, info = env.reset(seed=0, options={"operation": "bst.inorder", "length": "medium"})
    assert (
        info["operation"] == "bst.inorder"
        and info["length"] == "medium"
        and info["category"] == "hierarchical"
    )
    assert "No additional text needed." in prompt and prompt.endswith("A: ")
    instance = env.unwrapped.instance
    _, reward, terminated, truncated, info = env.step(json.dumps({"final_answer": instance.truth}))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["failure"] is None and info["exact"] == 1.0


def test_malformed_and_wrong_answers() -> None:
    env = gymnasium.make("embodia/DSR-v0", reward="partial")
    env.reset(seed=4, options={"operation": "queue.compound"})
    _, reward, _, _, info = env.step('{"final_answer": [1, 2')
    assert reward == 0.0 and info["failure"] == "parse" and "cut off" in info["reason"]
    env.reset(seed=4, options={"operation": "queue.compound"})
    truth = env.unwrapped.instance.truth
    _, reward, _, _, info = env.step(json.dumps({"final_answer": [*truth, 5]}))
    assert 0.0 < reward < 1.0 and info["failure"] == "wrong_final"


def test_options_choose_suite_structure_and_index() -> None:
    env = gymnasium.make("embodia/DSR-v0")
    _, info = env.reset(options={"suite": "spatial", "structure": "kd_tree", "length": "long", "index": 2})
    assert (info["suite"], info["structure"], info["length"]) == ("spatial", "kd_tree", "long")
    _, info = env.reset(options={"suite": "realistic", "operation": "queue.compound"})
    assert info["suite"] == "realistic"
    with pytest.raises(DSRError, match="unknown reset options"):
        env.reset(options={"structur": "heap"})
    with pytest.raises(DSRError, match="unknown length"):
        env.reset(options={"length": "huge"})
    with pytest.raises(DSRError, match="unknown DSR operation"):
        env.reset(options={"operation": "heap.sort"})


def test_code_only_mode_runs_the_solution_in_the_sandbox() -> None:
    env = gymnasium.make("embodia/DSR-v0", mode="CodeOnly")
    prompt, _ = env.reset(seed=0, options={"operation": "stack.compound", "length": "short"})
    assert "def solution" not in prompt and "`solution()`" in prompt
    ops = env.unwrapped.instance.data["ops"]
    code = (
        "```python\ndef solution():\n    stack = []\n"
        f"    for op in {ops!r}:\n"
        "        if op[0] == 'push':\n            stack.append(op[1])\n"
        "        else:\n            stack.pop()\n"
        "    return stack\n```"
    )
    _, reward, _, _, info = env.step(code)
    assert reward == 1.0, info
    env.reset(seed=0, options={"operation": "stack.compound", "length": "short"})
    _, reward, _, _, info = env.step("```python\nimport os\ndef solution():\n    return []\n```")
    assert reward == 0.0 and "import of 'os'" in info["reason"]


def test_code_suite_instances_carry_their_own_mode() -> None:
    env = gymnasium.make("embodia/DSR-v0", suite="code")
    modes = {env.reset(options={"index": i})[1]["prompt_mode"] for i in range(3)}
    assert modes == {"CodeOnly", "CodeEnforce", "CodeMaybe"}


def test_interactive_env_scores_each_state() -> None:
    env = gymnasium.make("embodia/DSRInteractive-v0", operation="queue.compound", length="short")
    observation, info = env.reset(seed=0)
    instance = env.unwrapped.instance
    assert info["steps"] == len(instance.steps) and "Current state of the queue: []" in observation
    rewards = []
    for number, step in enumerate(instance.steps):
        assert step.label in observation
        # the second answer is wrong on purpose
        answer = [999] if number == 1 else step.state
        observation, reward, terminated, _, info = env.step(json.dumps({"state": answer}))
        rewards.append(reward)
        assert info["truth"] == step.state
        if not terminated:
            # feedback="truth": the next observation shows the reference's state, not the mistake
            assert f"Current state of the queue: {canonical(step.state)}" in observation
    assert terminated and rewards[1] == 0.0 and sum(rewards) == len(rewards) - 1


def test_interactive_env_own_feedback_shows_the_agents_state() -> None:
    env = gymnasium.make("embodia/DSRInteractive-v0", operation="stack.compound", feedback="own")
    env.reset(seed=1)
    observation, *_ = env.step('{"state": [12345]}')
    assert "Current state of the stack: [12345]" in observation


def test_interactive_env_refuses_single_shot_operations() -> None:
    env = gymnasium.make("embodia/DSRInteractive-v0", operation="array.access")
    with pytest.raises(DSRError, match="nothing to step through"):
        env.reset(seed=0)
