"""``benchmarks/recipes.py --quick``: the AIR and LIFT studies run end to end and print their keys."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark


@pytest.mark.slow
def test_quick_recipes_run_prints_the_air_and_lift_keys() -> None:
    result = run_benchmark("recipes", "--quick")
    assert result["sft_loss_last"] < result["sft_loss_first"]
    assert result["air_samples_per_s"] > 0
    for kind in ("lookup", "compute", "answer"):
        assert isinstance(result[f"air_{kind}_step_score"], float)
        assert isinstance(result[f"air_random_{kind}_step_score"], float)
    assert len(result["critical_heads"]) == len(result["random_heads"]) == 1
    assert result["critical_heads"] != result["random_heads"]
