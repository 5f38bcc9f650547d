"""``benchmarks/vocal.py --quick``: marker extraction and the profile fit run and print their keys."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark


@pytest.mark.slow
def test_quick_run_reads_markers_as_the_naive_reader_and_fits_the_profile() -> None:
    result = run_benchmark("vocal", "--quick")
    assert result["same_markers"] is True
    assert result["marker_replies_per_s"] > 0 and result["naive_replies_per_s"] > 0
    assert result["max_profile_error"] < 0.05  # 20,000 answers over ten markers
    assert result["fit_s"] > 0 and result["bootstrap_s"] > 0
