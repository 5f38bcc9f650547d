"""``benchmarks/explore.py``: the instruction-following summary, computed by hand, and the
``--instruction-only --quick`` run ending with its JSON line."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
from benchmark_runs import ROOT, run_benchmark


def _explore_benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("explore_benchmark", ROOT / "benchmarks" / "explore.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_instruction_summary_means_and_pools_the_houses() -> None:
    summary = _explore_benchmark().instruction_summary(
        [
            {"instructed_room": "kitchen", "room_steps_plain": 7, "room_steps_instructed": 5},
            {"instructed_room": "living", "room_steps_plain": 400, "room_steps_instructed": 100},
            # never covered told: counts the whole budget
            {"instructed_room": "office", "room_steps_plain": 100, "room_steps_instructed": None},
            {},  # a house with no room of a kind it has one of
        ],
        steps=500,
    )
    assert summary["instruction_houses"] == 3
    assert summary["instruction_runs_not_covered"] == 1
    # mean of 5/7, 100/400 and 500/100
    assert summary["instruction_steps_ratio"] == pytest.approx((5 / 7 + 0.25 + 5.0) / 3, abs=1e-4)
    # (5 + 100 + 500) / (7 + 400 + 100)
    assert summary["instruction_steps_ratio_pooled"] == pytest.approx(605 / 507, abs=1e-4)


def test_a_room_covered_from_the_first_panorama_counts_one_step() -> None:
    summary = _explore_benchmark().instruction_summary(
        [
            # 0 steps is a count, not a run that never got there
            {"instructed_room": "kitchen", "room_steps_plain": 20, "room_steps_instructed": 0},
            # seen whole from the start by both runs: no gain, not a free one
            {"instructed_room": "living", "room_steps_plain": 0, "room_steps_instructed": 0},
        ],
        steps=500,
    )
    assert summary["instruction_steps_ratio"] == pytest.approx((1 / 20 + 1.0) / 2)
    assert summary["instruction_runs_not_covered"] == 0


def test_the_oracle_ratio_is_the_mean_over_the_houses_it_ran() -> None:
    summary = _explore_benchmark().instruction_summary(
        [
            {
                "instructed_room": "kitchen",
                "room_steps_plain": 400,
                "room_steps_instructed": 300,
                "room_steps_oracle": 100,
            },
            # an oracle that never got there counts the whole budget, as the explorer does
            {
                "instructed_room": "living",
                "room_steps_plain": 250,
                "room_steps_instructed": 200,
                "room_steps_oracle": None,
            },
            # a row from before the oracle: left out of the oracle's mean only
            {"instructed_room": "office", "room_steps_plain": 10, "room_steps_instructed": 10},
        ],
        steps=500,
    )
    assert summary["instruction_houses"] == 3
    assert summary["instruction_steps_ratio_oracle"] == pytest.approx((100 / 400 + 500 / 250) / 2, abs=1e-4)


@pytest.mark.slow
def test_the_oracle_walks_to_a_far_room_before_the_untold_explorer_sees_it() -> None:
    benchmark = _explore_benchmark()
    spec, seed = benchmark.scene(1005), 1005  # its kitchen lies far from the start
    oracle = benchmark.oracle_steps_to_cover(spec, 150, seed)
    assert oracle is not None and 0 < oracle < 60
    kind, untold = benchmark.steps_to_cover(spec, 150, seed, instructed=False)
    assert kind == "kitchen"
    assert untold is None or untold > 2 * oracle


def test_instruction_summary_of_no_house_is_empty() -> None:
    summary = _explore_benchmark().instruction_summary([{}, {}], steps=500)
    assert summary["instruction_steps_ratio"] is None and summary["instruction_steps_ratio_pooled"] is None
    assert summary["instruction_houses"] == 0


@pytest.mark.slow
def test_quick_instruction_run_prints_the_keys() -> None:
    result = run_benchmark("explore", "--instruction-only", "--quick")
    assert result["instruction_houses"] >= 1
    assert result["instruction_steps_ratio_pooled"] > 0 and result["instruction_steps_ratio"] > 0
    assert result["instruction_steps_ratio_oracle"] > 0


def test_ratio_interval_brackets_the_ratio_of_means() -> None:
    ratio_interval = _explore_benchmark().ratio_interval
    # every house twice the other's: every resample's ratio is 2
    assert ratio_interval([2.0, 4.0, 6.0], [1.0, 2.0, 3.0]) == [2.0, 2.0]
    ours, theirs = [150.0, 90.0, 120.0, 200.0], [100.0, 100.0, 110.0, 150.0]
    low, high = ratio_interval(ours, theirs)
    point = sum(ours) / sum(theirs)
    assert low < point < high
    # no resample can leave the range of the houses' own ratios
    assert min(o / t for o, t in zip(ours, theirs, strict=True)) <= low
    assert high <= max(o / t for o, t in zip(ours, theirs, strict=True))
