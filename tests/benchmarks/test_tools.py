"""``benchmarks/tools.py --quick`` ends with its JSON line (the keys issue #23 names)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run_prints_the_measures() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "tools.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["calls"] == 200 and result["rounds"] == 5 and result["replies"] == 3
    assert result["native_call_us"] > result["direct_call_us"] > 0
    assert result["tool_call_overhead_ms"] == pytest.approx(
        (result["native_call_us"] - result["direct_call_us"]) / 1e3, abs=1e-4
    )
    assert result["constrained_ms_per_token"] > 0 and result["free_ms_per_token"] > 0
    assert "constrained_overhead_ms_per_token" in result
