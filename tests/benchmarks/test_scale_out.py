"""``benchmarks/scale_out.py`` in a tiny run ends with its JSON line (the keys issue #21 names)."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark

pytest.importorskip("ray", reason="Ray is not installed (pip install 'embodia[ray]')")

TINY = ["--scenes", "3", "--steps", "20", "--instances", "30", "--noop-units", "50", "--rounds", "1"]


# The script starts (and stops) a Ray of its own with 2 CPUs, in its own process: that start is
# one of its measures, so it does not join the session's ray_runtime.
@pytest.mark.slow
@pytest.mark.ray
def test_tiny_run_prints_the_measures() -> None:
    result = run_benchmark("scale_out", *TINY)
    assert result["workers"] == 2 and result["worker_threads"] == 1
    assert result["explore_units"] == 3 and result["dsr_units"] == 30 and result["steps"] == 20
    assert result["throughput_includes_startup"] is False
    assert result["ray_init_s"] > 0 and result["ray_actor_start_s"] > 0
    for workload in ("explore", "dsr"):
        for kind in ("local", "ray"):
            assert result[f"{workload}_{kind}_units_per_s"] > 0
            assert result[f"{workload}_{kind}_units_per_s_with_startup"] > 0
        assert result[f"ray_speedup_{workload}"] == pytest.approx(
            result[f"{workload}_ray_units_per_s"] / result[f"{workload}_local_units_per_s"],
            rel=0.01,
            abs=1e-3,
        )  # each value is rounded to 3 decimals: at a small speedup that alone is over 1%
    assert result["explore_local_all_cores_units_per_s"] > 0
    assert result["ray_speedup_explore_vs_all_cores_local"] == pytest.approx(
        result["explore_ray_units_per_s"] / result["explore_local_all_cores_units_per_s"], rel=0.01, abs=1e-3
    )
    assert result["ray_overhead_ms_per_unit"] == pytest.approx(
        result["ray_noop_ms_per_unit_one_actor"] - result["local_noop_ms_per_unit"], abs=0.01
    )
    assert result["ray_noop_ms_per_unit_one_actor"] > 0
    assert result["explore_ray_unit_slowdown"] == pytest.approx(
        result["explore_ray_seconds_per_unit"] / result["explore_local_seconds_per_unit"], rel=0.01
    )
    assert result["cpu_ceiling_speedup"] > 0 and 0 <= result["other_cpu_share"] <= 1
