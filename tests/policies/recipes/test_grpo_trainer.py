"""run_grpo end to end on the tiny chat LM: the run folder, resume after SIGKILL, the settings'
checks, dynamic sampling, Durian and the KL reference."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from embodia.errors import EmbodiaError
from embodia.policies.recipes.advantages import advantage_estimator
from embodia.policies.recipes.grpo_trainer import GRPOSettings, reward_to_go, run_grpo, turn_advantages
from embodia.policies.rollouts import RolloutError, Trajectory, Turn

DSR_OPTIONS = {"operation": "array.access", "length": "short"}


def _settings(model: Path, **overrides: Any) -> GRPOSettings:
    base: dict[str, Any] = {
        "policy": f"hf:{model}",
        "env": "embodia/DSR-v0",
        "env_options": DSR_OPTIONS,
        "steps": 3,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 4,
        "learning_rate": 1e-2,  # large: three steps must move the weights visibly
        "seed": 3,
    }
    return GRPOSettings(**{**base, **overrides})


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(run / "final" / "model.safetensors")


def _rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_run_writes_its_folder_and_trains(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    summary = run_grpo(
        _settings(tiny_chat_lm_dir, eval_prompts=2, eval_env_options={"instance_seed": 7}),
        tmp_path / "run",
        on_step=seen.append,
    )
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.jsonl", "rollouts.jsonl", "summary.json", "curves.png"):
        assert (run / name).is_file(), name
    rows = _rows(run)
    assert rows == seen
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert "eval_reward" in rows[0] and "eval_reward" in rows[-1]
    for row in rows[1:]:
        assert row["samples"] == 4 and row["groups_kept"] == 2
        assert 0 <= row["reward_mean"] <= 1 and row["completion_tokens"] <= 4 * 4
        assert row["ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # one pass: old logps = current
    trajectories = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(trajectories) == 3 * 2 * 2
    assert {(t["step"], t["seed"]) for t in trajectories} == {
        (s, (s - 1) * 2 + i) for s in (1, 2, 3) for i in (0, 1)
    }
    assert summary["policy"] == f"hf:{run / 'final'}"
    start = load_file(tiny_chat_lm_dir / "model.safetensors")
    trained = _weights(run)
    assert any(not torch.equal(start[k], trained[k]) for k in start)
    # the trained model is a chat policy again
    from embodia.policies.spec import make_policy

    reply = make_policy(summary["policy"]).complete([{"role": "user", "content": "hi"}], max_tokens=2)
    assert reply.completion_tokens >= 1
    # a finished run asked again returns its summary without training
    assert (
        run_grpo(
            _settings(tiny_chat_lm_dir, eval_prompts=2, eval_env_options={"instance_seed": 7}),
            run,
            resume=True,
        )
        == summary
    )


KILLED_RUN = """
import os, signal, sys
from pathlib import Path
from embodia.policies.recipes.grpo_trainer import GRPOSettings, run_grpo

def stop(line):
    if line.get("step") == 2:
        os.kill(os.getpid(), signal.SIGKILL)

settings = GRPOSettings(**{settings})
run_grpo(settings, Path(sys.argv[1]), on_step=stop)
"""


def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(
    tiny_chat_lm_dir: Path, tmp_path: Path
) -> None:
    settings = _settings(tiny_chat_lm_dir)
    run_grpo(settings, tmp_path / "whole")
    fields = {
        "policy": settings.policy,
        "env": settings.env,
        "env_options": dict(settings.env_options),
        "steps": 3,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 4,
        "learning_rate": 1e-2,
        "seed": 3,
    }
    script = textwrap.dedent(KILLED_RUN).replace("{settings}", repr(fields))
    killed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "killed")], capture_output=True, text=True
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (tmp_path / "killed" / "checkpoint").is_dir() and not (tmp_path / "killed" / "final").exists()
    with pytest.raises(EmbodiaError, match="--resume"):
        run_grpo(settings, tmp_path / "killed")
    summary = run_grpo(settings, tmp_path / "killed", resume=True)
    assert summary["resumed_after_step"] == 2
    assert [r["step"] for r in _rows(tmp_path / "killed")] == [1, 2, 3]
    whole, resumed = _weights(tmp_path / "whole"), _weights(tmp_path / "killed")
    assert whole.keys() == resumed.keys()
    for key in whole:
        assert torch.equal(whole[key], resumed[key]), key
    rollouts = (tmp_path / "killed" / "rollouts.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in rollouts] == [1] * 4 + [2] * 4 + [3] * 4


def test_a_finished_run_resumed_with_more_steps_trains_further_and_never_fewer(
    tiny_chat_lm_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    first = run_grpo(_settings(tiny_chat_lm_dir, steps=2), run)
    two = _weights(run)
    with pytest.raises(EmbodiaError, match=r"other settings \(steps: 2 -> 1\)"):
        run_grpo(_settings(tiny_chat_lm_dir, steps=1), run, resume=True)
    more = run_grpo(_settings(tiny_chat_lm_dir, steps=3), run, resume=True)
    assert first["steps"] == 2 and more["steps"] == 3 and more["resumed_after_step"] == 2
    assert [r["step"] for r in _rows(run)] == [1, 2, 3]
    assert "steps: 3" in (run / "config.yaml").read_text()
    assert any(not torch.equal(two[k], w) for k, w in _weights(run).items())  # trained on
    rollouts = (run / "rollouts.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in rollouts] == [1] * 4 + [2] * 4 + [3] * 4
    # the extended run is finished at its new length
    assert run_grpo(_settings(tiny_chat_lm_dir, steps=3), run, resume=True) == more


def test_dynamic_sampling_skips_groups_without_spread(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    # A random-weight model never answers a DSR question right: every group's rewards are 0.
    run_grpo(_settings(tiny_chat_lm_dir, steps=1, dynamic_sampling=True), tmp_path / "run")
    (row,) = _rows(tmp_path / "run")
    assert row["groups_kept"] == 0 and row["samples"] == 0 and "loss" not in row
    assert row["frac_reward_zero_std"] == 1.0
    start = load_file(tiny_chat_lm_dir / "model.safetensors")
    assert all(torch.equal(start[k], v) for k, v in _weights(tmp_path / "run").items())


def test_durian_and_the_kl_reference_run_through_the_trainer(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    run_grpo(
        _settings(tiny_chat_lm_dir, steps=2, advantage="durian", durian_levels=2, beta=0.1, num_iterations=2),
        tmp_path / "run",
    )
    first, second = _rows(tmp_path / "run")
    # before any update the policy is its own reference and its own old policy
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)
    assert second["kl"] >= 0.0
    assert first["scale_min"] >= 0.0  # Durian's shared stds


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"steps": 0}, "GRPOSettings.steps must be a whole number >= 1"),
        ({"prompts_per_step": 0}, "prompts_per_step"),
        ({"vectorization": "threads"}, "vectorization must be sync or async"),
        ({"advantage": "median"}, "advantage must be one of"),
        ({"eval_prompts": -1}, "eval_prompts must be a whole number >= 0"),
        ({"env_options": ["operation"]}, "env_options must be a mapping"),
    ],
)
def test_bad_settings_name_the_field(tiny_chat_lm_dir: Path, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(EmbodiaError, match=message):
        _settings(tiny_chat_lm_dir, **overrides)


def test_envs_a_chat_policy_cannot_play_are_refused_before_training(
    tiny_chat_lm_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(RolloutError, match="CartPole-v1"):
        run_grpo(_settings(tiny_chat_lm_dir, env="CartPole-v1", env_options={}), tmp_path / "cartpole")
    with pytest.raises(RolloutError, match="not registered"):
        run_grpo(_settings(tiny_chat_lm_dir, env="embodia/Nope-v0"), tmp_path / "nope")
    with pytest.raises(EmbodiaError, match="hf:DIR"):
        run_grpo(
            _settings(tiny_chat_lm_dir, policy="openai:http://localhost:1/v1?model=m"), tmp_path / "openai"
        )


@pytest.mark.slow
def test_a_vlm_trained_on_puzzle_images_serves_explore_and_csmr(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from embodia.cli import app

    summary = run_grpo(
        _settings(
            tiny_vlm_dir,
            env="embodia/Puzzle-v0",
            env_options={"task": "maze", "difficulty": "easy", "image_size": 64},
            steps=1,
            advantage="durian",
            durian_levels=1,
        ),
        tmp_path / "run",
    )
    (row,) = _rows(tmp_path / "run")
    assert row["samples"] == 4 and "loss" in row  # the images went back through the VLM for the loss
    trajectory = json.loads((tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()[0])
    assert trajectory["images"]["count"] == 1 and trajectory["images"]["entropy_bits"] > 0
    policy = summary["policy"]
    runner = CliRunner()
    explore = ["explore", "--agent", "dfs", "--policy", policy, "--scene", "procedural:seed=3,rooms=3"]
    result = runner.invoke(
        app,
        [
            *explore,
            "--steps",
            "20",
            "--height",
            "48",
            "--width",
            "96",
            "--no-video",
            "--max-fallback-share",
            "1",
        ]
        + ["--out", str(tmp_path / "explore")],
    )
    assert result.exit_code == 0, result.output
    csmr = ["eval", "csmr", "--task", "clevr", "--items", "1", "--reasoner", policy, "--perceiver", policy]
    result = runner.invoke(app, [*csmr, "--max-queries", "1", "--out", str(tmp_path / "csmr")])
    assert result.exit_code == 0, result.output


def test_a_text_lm_trains_on_the_waypoint_candidates_as_text(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    options = {"panorama_height": 32, "panorama_width": 64, "max_steps": 40, "rooms": 2, "bev_size": 32}
    settings = _settings(
        tiny_chat_lm_dir, env="embodia/ActiveMappingWaypoint-v0", env_options=options, steps=1, max_turns=2
    )
    with pytest.raises(EmbodiaError, match="does not take images"):
        run_grpo(settings, tmp_path / "pictures")
    run_grpo(dataclasses.replace(settings, images=False), tmp_path / "text")
    trajectory = json.loads((tmp_path / "text" / "rollouts.jsonl").read_text().splitlines()[0])
    assert "images" not in trajectory and " m away" in trajectory["turns"][0]["messages"][-1]["content"]


def test_dapo_with_gradient_accumulation_takes_the_whole_batch_step(tiny_chat_lm_dir: Path) -> None:
    from embodia.policies.recipes.grpo_trainer import TrainBatch, optimise
    from embodia.policies.spec import make_trainable_policy

    # Two micro-batches, [0:2] with 2 completion tokens and [2:3] with 4: each must divide by the
    # whole batch's 6 tokens for the summed gradient to be the whole-batch one.
    batch = TrainBatch(
        prompt_ids=[[5, 6, 7], [8, 9], [10, 11, 12, 13]],
        completion_ids=[[20], [22], [23, 24, 25, 26]],
        images=[[], [], []],
        advantages=torch.tensor([1.0, -0.5, 0.25]),
    )
    weights = []
    for accumulation in (1, 2):
        policy = make_trainable_policy(f"hf:{tiny_chat_lm_dir}", seed=0)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.5)  # the step is the gradient
        settings = _settings(tiny_chat_lm_dir, gradient_accumulation_steps=accumulation, max_grad_norm=0.0)
        optimise(policy, None, optimizer, batch, settings)
        weights.append({name: p.detach().clone() for name, p in policy.model.named_parameters()})
    start = load_file(tiny_chat_lm_dir / "model.safetensors")
    steps = [{k: w[k] - start[k] for k in start if k in w} for w in weights]
    largest = max(float(d.abs().max()) for d in steps[0].values())
    assert largest > 1e-4  # the step moved the weights
    for name, step in steps[0].items():
        # float32 sums in another order: the steps agree to a millionth of the largest one
        torch.testing.assert_close(steps[1][name], step, rtol=0, atol=1e-6 * largest)


def _trajectory(member: int, rewards: list[float]) -> Trajectory:
    turns = [Turn([], [1], [2], [-0.1], "Answer: 0", "stop", r, 0) for r in rewards]
    return Trajectory("test/Env-v0", 0, 0, member, turns, "terminated", {}, {})


def test_reward_to_go_sums_each_turns_own_and_later_rewards() -> None:
    table = reward_to_go([[1.0, 2.0, 4.0], [3.0], [0.5, 0.5]], prompts=1, group=3)
    assert table.shape == (3, 1, 3)
    expected = torch.tensor([[7.0, 3.0, 1.0], [6.0, math.nan, 0.5], [4.0, math.nan, math.nan]])
    torch.testing.assert_close(table[:, 0, :], expected, equal_nan=True)


def test_turn_credit_compares_each_turn_with_the_groups_same_turn() -> None:
    # Member 0 earns its reward early and wastes turn 2; member 1 the reverse. Same totals, so
    # episode credit gives every turn 0, while turn credit rewards the turn that earned.
    trajectories = [_trajectory(0, [3.0, 0.0]), _trajectory(1, [0.0, 3.0]), _trajectory(2, [1.0])]
    estimator = advantage_estimator("none")
    totals = torch.tensor([[3.0, 3.0, 1.0]])
    episode = estimator(totals)
    by_episode, no_stats = turn_advantages("episode", estimator, trajectories, episode, None, 1, 3)
    assert no_stats == {}
    assert by_episode == [[pytest.approx(2 / 3)] * 2, [pytest.approx(2 / 3)] * 2, [pytest.approx(-4 / 3)]]
    by_turn, stats = turn_advantages("turn", estimator, trajectories, episode, None, 1, 3)
    # turn 0: reward-to-go 3, 3, 1 (mean 7/3); turn 1: 0 and 3 (member 2 had ended; mean 1.5)
    assert by_turn == [
        [pytest.approx(2 / 3), pytest.approx(-1.5)],
        [pytest.approx(2 / 3), pytest.approx(1.5)],
        [pytest.approx(-4 / 3)],
    ]
    assert stats["advantage_abs_max"] == pytest.approx(1.5)
    # one turn per episode: the two credits are the same thing
    single = [_trajectory(0, [1.0]), _trajectory(1, [0.0]), _trajectory(2, [2.0])]
    group = advantage_estimator("group")
    first = group(torch.tensor([[1.0, 0.0, 2.0]]))
    assert (
        turn_advantages("turn", group, single, first, None, 1, 3)[0]
        == turn_advantages("episode", group, single, first, None, 1, 3)[0]
    )


def test_turn_credit_trains_on_the_waypoint_env(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    options = {"panorama_height": 32, "panorama_width": 64, "max_steps": 40, "rooms": 2, "bev_size": 32}
    settings = _settings(
        tiny_chat_lm_dir,
        env="embodia/ActiveMappingWaypoint-v0",
        env_options=options,
        steps=1,
        max_turns=3,
        images=False,
        credit="turn",
    )
    run_grpo(settings, tmp_path / "run")
    (row,) = _rows(tmp_path / "run")
    assert row["samples"] >= 2 and math.isfinite(row["advantage_abs_max"])
    with pytest.raises(EmbodiaError, match="credit must be one of episode, turn"):
        _settings(tiny_chat_lm_dir, credit="step")
