"""``benchmarks/training.py --quick`` runs and ends with its JSON line (the keys issue #20 names)."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark

pytest.importorskip("trl", reason="TRL is in the optional 'train' extra: pip install 'embodia[train]'")


@pytest.mark.slow
def test_quick_run_prints_the_measures() -> None:
    result = run_benchmark("training", "--quick")
    assert result["quick"] is True
    # speed: both steps timed, a positive ratio; rollouts measured in both vector envs
    assert result["grpo_step_embodia_ms"] > 0 and result["grpo_step_trl_ms"] > 0
    assert result["grpo_step_ratio_vs_trl"] == pytest.approx(
        result["grpo_step_trl_ms"] / result["grpo_step_embodia_ms"], rel=0.01
    )
    assert result["rollout_sync_episodes_per_s"] > 0 and result["rollout_async_episodes_per_s"] > 0
    assert 0.0 <= result["outside_model_share"] <= 1.0
    # the learning studies are skipped by --quick, and say so
    for key, reason in (
        ("text_reward_gain", "text_reward_skipped"),
        ("waypoint_auc_gain_vs_random", "waypoint_skipped"),
    ):
        assert key in result and result[key] is None
        assert "--quick" in result[reason]
