"""``benchmarks/recipes.py --quick``: the AIR, LIFT and BYORn studies run end to end and print their keys."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark


@pytest.mark.slow
def test_quick_recipes_run_prints_the_air_lift_and_byorn_keys() -> None:
    result = run_benchmark("recipes", "--quick")
    assert result["sft_loss_last"] < result["sft_loss_first"]
    assert result["air_samples_per_s"] > 0
    for kind in ("lookup", "compute", "answer"):
        assert isinstance(result[f"air_{kind}_step_score"], float)
        assert isinstance(result[f"air_random_{kind}_step_score"], float)
    assert len(result["critical_heads"]) == len(result["random_heads"]) == 1
    assert result["critical_heads"] != result["random_heads"]
    for key in ("byorn_asr", "sft_asr", "byorn_clean_acc", "sft_clean_acc", "pretrained_clean_acc"):
        assert 0 <= result[key] <= 1, key
    # the flags find the poisoned records: their reply is implausible to the pretrained model
    assert result["byorn_flag_recall"] >= 0.9 and result["byorn_flag_precision"] >= 0.9
    assert result["byorn_asr"] <= result["sft_asr"]
    for prefix in ("proact_ft", "frozen_gate", "heuristic"):
        assert 0 <= result[f"{prefix}_f1"] <= 1 and result[f"{prefix}_timediff"] >= 0, prefix
        assert len(result[f"{prefix}_f1_per_stream"]) == result["proact_held_out_streams"]
    # the joint training fits the gate: its loss falls on the training streams
    assert result["proact_gate_loss_last"] < result["proact_gate_loss_first"]
