"""``benchmarks/tools.py --quick`` ends with its JSON line (the keys issue #23 names)."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark


@pytest.mark.slow
def test_quick_run_prints_the_measures() -> None:
    result = run_benchmark("tools", "--quick")
    assert result["calls"] == 200 and result["rounds"] == 5 and result["replies"] == 3
    assert result["native_call_us"] > result["direct_call_us"] > 0
    assert result["tool_call_overhead_ms"] == pytest.approx(
        (result["native_call_us"] - result["direct_call_us"]) / 1e3, abs=1e-4
    )
    assert result["constrained_ms_per_token"] > 0 and result["free_ms_per_token"] > 0
    assert "constrained_overhead_ms_per_token" in result
