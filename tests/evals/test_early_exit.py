"""The early-exit metrics against hand-computed values, and the study's run folder: every
method measured, losses written as they go, and a cut run resumed without repeats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embodia.core.runs import read_run_records
from embodia.evals.early_exit import (
    EVALS,
    METHODS,
    METRICS,
    SUMMARY,
    EarlyExitSettings,
    accuracy_at_budget,
    cost_accuracy_curve,
    eefp,
    efficiency,
    expected_calibration_error,
    run_early_exit_study,
)
from embodia.policies.early_exit import EarlyExitError


def test_ece_by_hand() -> None:
    confidence = np.array([[0.9, 0.9, 0.6, 0.3]])
    correct = np.array([[1, 0, 1, 1]], dtype=bool)
    # 15 bins: the two 0.9s share one (accuracy 0.5): 2/4 * 0.4; 0.6 sits on a bin's right
    # edge, alone: 1/4 * 0.4; 0.3 alone: 1/4 * 0.7
    assert expected_calibration_error(confidence, correct) == [pytest.approx(0.2 + 0.1 + 0.175)]
    assert expected_calibration_error(confidence, correct, bins=1) == [pytest.approx(abs(0.75 - 0.675))]


def test_eefp_by_hand() -> None:
    correct = np.array([[1, 0, 0, 1], [1, 1, 0, 0]], dtype=bool)
    confidence = np.array([[0.9, 0.6, 0.7, 0.4], [0.5, 0.5, 0.5, 0.5]])
    # head 0 is safe on samples 0 (right), 2 and 3 (the last head is wrong there too);
    # unsafe on 1, which the last head fixes: 0.9 and 0.7 outrank 0.6, 0.4 does not
    assert eefp(confidence, correct) == [pytest.approx(2 / 3)]
    # a head where every exit is safe has no score
    assert eefp(confidence, np.ones_like(correct)) == [None]
    with pytest.raises(EarlyExitError, match="one shape"):
        eefp(confidence, correct[:, :3])


def test_cost_accuracy_curve_budgets_and_efficiency_by_hand() -> None:
    confidence = np.array([[0.9, 0.5], [0.1, 0.1]])
    correct = np.array([[1, 0], [1, 1]], dtype=bool)
    curve = cost_accuracy_curve(confidence, correct, [1, 4])
    # threshold 0.5: both leave at the first head (a quarter of the MACs), one right;
    # 0.9: sample 1 goes on; above both: both go on
    assert curve == [(0.25, 0.5), (0.625, 1.0), (1.0, 1.0)]
    assert accuracy_at_budget(curve, 0.25) == 0.5
    assert accuracy_at_budget(curve, 0.5) == 0.5
    assert accuracy_at_budget(curve, 0.75) == 1.0
    assert accuracy_at_budget(curve, 0.2) is None
    # the envelope: 0.5 over [0.25, 0.625], 1 over [0.625, 1], over a width of 0.75
    assert efficiency(curve) == pytest.approx((0.5 * 0.375 + 1.0 * 0.375) / 0.75)
    with pytest.raises(EarlyExitError, match="1 costs for 2 heads"):
        cost_accuracy_curve(confidence, correct, [4])


def test_settings_name_what_is_wrong() -> None:
    with pytest.raises(EarlyExitError, match="datasets are distinct values of digits, puzzles"):
        EarlyExitSettings(datasets=("mnist",))
    with pytest.raises(EarlyExitError, match="image_size must be a multiple of 4"):
        EarlyExitSettings(image_size=30)
    with pytest.raises(EarlyExitError, match="train_steps"):
        EarlyExitSettings(train_steps=0)


def test_the_study_measures_every_method_and_resumes_a_cut_run(tmp_path: Path) -> None:
    settings = EarlyExitSettings(
        datasets=("digits",), architectures=("cnn",), seeds=(0, 1), train_steps=120, finetune_steps=40
    )
    out = tmp_path / "study"
    summary = run_early_exit_study(settings, out)
    lines = read_run_records(out / EVALS)
    assert [(line["seed"], set(line["methods"])) for line in lines] == [(0, set(METHODS)), (1, set(METHODS))]
    for line in lines:
        assert line["costs"] == sorted(line["costs"])
        assert line["train_loss_last"] < line["train_loss_first"]
        calibrated = line["methods"]["calibrated"]
        assert len(calibrated["temperatures"]) == 4
        # temperature scaling keeps every head's predictions
        assert calibrated["accuracy"] == line["methods"]["baseline"]["accuracy"]
    row = summary["networks"]["digits/cnn"]["methods"]["baseline"]
    assert row["final_accuracy"] > 0.5
    assert summary["points"] == 2 * 3
    losses = read_run_records(out / METRICS)
    assert {(r["seed"], r["stage"]) for r in losses} == {
        (s, m) for s in (0, 1) for m in ("train", "ce-heads", "eefp")
    }
    # cut after the first network: its line and losses stay, the second is made again, once
    (out / SUMMARY).unlink()
    (out / EVALS).write_text(json.dumps(lines[0]) + "\n")
    with (out / METRICS).open("a") as handle:
        handle.write(
            json.dumps({"dataset": "digits", "architecture": "cnn", "seed": 1, "stage": "train", "step": 1})
            + "\n"
        )
    resumed = run_early_exit_study(settings, out, resume=True)
    assert resumed["networks"] == summary["networks"]
    assert read_run_records(out / METRICS) == losses


def test_the_command_prints_each_method_and_the_correlations(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from embodia.cli import app

    args = [
        "eval",
        "early-exit",
        "--out",
        str(tmp_path / "run"),
        "--dataset",
        "digits",
        "--architecture",
        "vit",
    ]
    result = CliRunner().invoke(app, [*args, "--seed", "3", "--train-steps", "40", "--finetune-steps", "10"])
    assert result.exit_code == 0, result.output
    for method in METHODS:
        assert f"digits/vit {method}: accuracy at 25%" in result.output
    assert "EEFP change vs efficiency gain over 3 methods" in result.output
    assert json.loads((tmp_path / "run" / SUMMARY).read_text())["networks"]["digits/vit"]["seeds"] == 1
