"""``benchmarks/eefp_diffusion_cmi.py --quick``: the early-exit study, the DiffThinker study and
the reward study run end to end and print their keys."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark


@pytest.mark.slow
def test_quick_run_prints_the_early_exit_table_and_correlations() -> None:
    result = run_benchmark("eefp_diffusion_cmi", "--quick")
    assert result["correlation_points"] == 3 * 3  # three methods against the baseline, three seeds
    for proxy in ("eefp", "ece"):
        assert -1 <= result[f"{proxy}_efficiency_corr"] <= 1, proxy
    for method in ("baseline", "calibrated", "ce_heads", "eefp"):
        key = f"digits_cnn_{method}"
        assert 0 < result[f"{key}_acc75"] <= 1 and 0 < result[f"{key}_efficiency"] <= 1, method
        assert 0 <= result[f"{key}_ece"] <= 1 and 0 <= result[f"{key}_eefp"] <= 1, method
    # temperature scaling is fitted to cut calibration error
    assert result["digits_cnn_calibrated_ece"] < result["digits_cnn_baseline_ece"]
    for key in ("diffthinker_maze_acc", "diffthinker_best_of_4_acc", "random_maze_acc", "grpo_text_maze_acc"):
        assert 0 <= result[key] <= 1, key
    assert result["collaboration_maze_acc"] <= result["diffthinker_best_of_4_acc"]  # the checker's ceiling
    assert 0 < result["diffthinker_s_per_answer_steps_1"] < result["diffthinker_s_per_answer_steps_8"]
    for key in ("cmi_pairwise_acc", "cmi_musicality_acc", "cmi_alignment_acc", "cmi_untrained_alignment_acc"):
        assert 0 <= result[key] <= 1, key
    assert result["cmi_pairs_per_s"] > 0
    assert result["cmi_seeds"] == 1 and result["cmi_pairwise_acc_per_seed"] == [result["cmi_pairwise_acc"]]
    for key in ("cmi_musicality_spearman", "cmi_alignment_kendall"):
        assert result[key] is None or -1 <= result[key] <= 1, key
