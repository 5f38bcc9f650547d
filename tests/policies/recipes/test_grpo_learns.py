"""GRPO teaches the tiny chat LM a verifiable task from rewards alone, with every advantage
estimator: SFT gives it the answer format (held-out reward near chance), GRPO lifts the
held-out reward clearly above its start and above the best constant answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from say_digit import constant_baseline, grpo_settings, warm_up

from embodia.policies.recipes.grpo_trainer import run_grpo

pytest.importorskip("trl", reason="the SFT warm-up uses TRL (the train extra)")


@pytest.fixture(scope="module")
def formatted(tiny_chat_lm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warm_up(tiny_chat_lm_dir, tmp_path_factory.mktemp("say-digit") / "sft")


@pytest.mark.slow
@pytest.mark.parametrize("advantage", ["group", "batch", "none", "durian"])
def test_grpo_raises_the_held_out_reward(formatted: Path, tmp_path: Path, advantage: str) -> None:
    summary = run_grpo(grpo_settings(formatted, advantage), tmp_path / "run")
    start, end = summary["eval_reward_start"], summary["eval_reward_end"]
    baseline = constant_baseline(32)
    assert start < 0.15  # the format alone does not solve the task
    assert end >= start + 0.15, (start, end)
    assert end >= baseline + 0.05, (baseline, end)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward_mean"] for r in rows if "reward_mean" in r]
    assert sum(rewards[-20:]) / 20 > sum(rewards[:20]) / 20 + 0.1  # the training curve rises too
