"""IDEAL's training objective against hand values, its batches, the run folder (resumed after a
kill to the same weights), ``embodia train fusion``, and the evidence that it learns."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from embodia.errors import EmbodiaError
from embodia.perception.fusion.data import fusion_pairs
from embodia.perception.fusion.errors import FusionError
from embodia.perception.fusion.metrics import METRICS
from embodia.perception.fusion.model import FusionOutput, build_ideal, load_ideal
from embodia.perception.fusion.training import (
    CHECKPOINT_FILE,
    METHODS,
    METRICS_FILE,
    MODEL_FOLDER,
    SUMMARY_FILE,
    FusionTrainSettings,
    as_saved,
    crop_batch,
    fusion_losses,
    gradient_magnitude,
    run_fusion_training,
    ssim_index,
    training_pairs,
    weak_evidence_probe,
)

TINY: dict[str, Any] = {
    "steps": 6,
    "batch_size": 2,
    "crop": 32,
    "kinds": ("ir_vis", "medical"),
    "train_pairs": 1,
    "pair_size": 48,
    "eval_pairs": 1,
    "eval_size": 48,
    "width": 4,
    "log_every": 1,
    "checkpoint_every": 2,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": 0}, r"steps must be a whole number in 1\.\.1000000, got 0"),
        ({"crop": 64, "pair_size": 48}, r"crop \(64\) must not exceed pair_size \(48\)"),
        ({"kinds": ("ir_vis", "radar")}, "kinds must be distinct names among"),
        ({"kinds": ("ir_vis", "ir_vis")}, "kinds must be distinct names among"),
        ({"kl_weight": -1.0}, "kl_weight must be a finite number >= 0"),
        ({"learning_rate": 0.0}, "learning_rate must be positive"),
        ({"agree_share": 1.5}, r"agree_share must be in 0\.\.1"),
        ({"seed": -1}, "seed must be in"),
        ({"stride": 3}, "stride must be 1, 2, 4 or 8"),
    ],
)
def test_bad_settings_are_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(FusionError, match=message):
        FusionTrainSettings(**change)


def test_the_loss_terms_by_hand() -> None:
    from scipy.ndimage import sobel
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (20, 24))
    y = np.clip(x + rng.normal(0, 0.1, x.shape), 0, 1)
    as_tensor = lambda image: torch.from_numpy(image).float()[None, None]  # noqa: E731
    expected = np.abs(sobel(x, axis=1, mode="nearest")) + np.abs(sobel(x, axis=0, mode="nearest"))
    assert np.allclose(gradient_magnitude(as_tensor(x))[0, 0].numpy(), expected, atol=1e-5)
    assert float(ssim_index(as_tensor(x), as_tensor(y))) == pytest.approx(
        structural_similarity(x, y, data_range=1.0), abs=1e-5
    )
    a, b = as_tensor(x), as_tensor(y)
    grid = torch.ones(1, 1, 5, 6)

    def output(fused: torch.Tensor, alpha: float, beta: float) -> FusionOutput:
        return FusionOutput(fused, grid, grid, grid, alpha * grid, beta * grid, grid, grid)

    terms = fusion_losses(output(torch.maximum(a, b), 2.0, 2.0), a, b, prior=2.0)
    assert float(terms["intensity"]) == 0.0
    assert float(terms["kl"]) == pytest.approx(0.0, abs=1e-6)
    # KL(Beta(1, 1) || Beta(2, 2)) = ln B(2, 2) - ln B(1, 1) - 2 psi(1) + 2 psi(2) = 2 - ln 6
    terms = fusion_losses(output(a, 1.0, 1.0), a, b, prior=2.0)
    assert float(terms["kl"]) == pytest.approx(2 - math.log(6), abs=1e-5)
    assert float(terms["intensity"]) == pytest.approx(float(np.mean(np.maximum(x, y) - x)), abs=1e-6)
    assert float(terms["ssim"]) == pytest.approx(1 - structural_similarity(x, y, data_range=1.0), abs=1e-5)


def test_batches_are_reproducible_crops_with_agreement_rectangles() -> None:
    settings = FusionTrainSettings(**{**TINY, "batch_size": 4, "agree_share": 1.0})
    pairs = training_pairs(settings)
    a, b = crop_batch(pairs, settings, step=3)
    again_a, again_b = crop_batch(pairs, settings, step=3)
    assert a.shape == b.shape == (4, 1, 32, 32) and float(a.min()) >= 0 and float(a.max()) <= 1
    assert torch.equal(a, again_a) and torch.equal(b, again_b)
    assert not torch.equal(a, crop_batch(pairs, settings, step=4)[0])
    for first, second in zip(a, b, strict=True):  # a rectangle of at least 8 x 8 where B is A
        assert int((first == second).sum()) >= 64


def test_saved_form_rounds_and_clips() -> None:
    assert np.array_equal(
        as_saved(np.array([[-3.0, 0.5, 1.5, 254.6, 300.0]])), [[0.0, 0.0, 2.0, 255.0, 255.0]]
    )


def test_the_weak_evidence_probe_of_a_new_model() -> None:
    (pair,) = fusion_pairs("ir_vis", 1, 160, split="test")
    probe = weak_evidence_probe(build_ideal().eval(), pair)
    assert probe.agree_weight == 0.0  # no difference: the trigger keeps the mix even
    assert probe.differ_weight > 0


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_ideal(folder / MODEL_FOLDER).state_dict()


def test_a_run_writes_its_folder_and_a_killed_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    settings = FusionTrainSettings(**TINY)
    whole = run_fusion_training(settings, tmp_path / "whole")
    assert sorted(p.name for p in (tmp_path / "whole").iterdir()) == sorted(
        ["config.yaml", METRICS_FILE, CHECKPOINT_FILE, MODEL_FOLDER, SUMMARY_FILE]
    )
    records = [json.loads(line) for line in (tmp_path / "whole" / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert whole["loss_first"] == records[0]["loss"] and whole["loss_last"] == records[-1]["loss"]
    assert set(whole["table"]) == {"ir_vis", "medical"}
    for methods in whole["table"].values():
        assert list(methods) == list(METHODS)
        assert all(list(row) == list(METRICS) for row in methods.values())
    assert json.loads((tmp_path / "whole" / SUMMARY_FILE).read_text()) == whole

    class Killed(Exception):
        pass

    def kill_at_step_5(record: dict[str, Any]) -> None:
        if record["step"] == 5:
            raise Killed

    with pytest.raises(Killed):
        run_fusion_training(settings, tmp_path / "cut", on_step=kill_at_step_5)
    with pytest.raises(EmbodiaError, match="already holds a run: pass --resume"):
        run_fusion_training(settings, tmp_path / "cut")
    resumed = run_fusion_training(settings, tmp_path / "cut", resume=True)
    steps = [json.loads(line)["step"] for line in (tmp_path / "cut" / METRICS_FILE).read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]  # step 5's line, written after the checkpoint at 4, is made again
    for name, tensor in _weights(tmp_path / "whole").items():
        assert torch.equal(tensor, _weights(tmp_path / "cut")[name]), name
    assert resumed["table"] == whole["table"]
    # a finished run resumed with more steps trains on from its last checkpoint
    longer = run_fusion_training(FusionTrainSettings(**{**TINY, "steps": 8}), tmp_path / "cut", resume=True)
    assert longer["steps"] == 8
    assert json.loads((tmp_path / "cut" / METRICS_FILE).read_text().splitlines()[-1])["step"] == 8


def test_train_fusion_command(tmp_path: Path) -> None:
    from embodia.cli import app

    out = tmp_path / "run"
    tiny = ["--steps", "2", "--batch-size", "2", "--crop", "32", "--kind", "medical", "--train-pairs", "1"]
    tiny += ["--pair-size", "48", "--eval-pairs", "1", "--eval-size", "48", "--width", "4"]
    result = CliRunner().invoke(app, ["train", "fusion", *tiny, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "IDEAL fusion done: 2 steps" in result.output and "held-out medical" in result.output
    assert load_ideal(out / MODEL_FOLDER).config.width == 4
    refused = CliRunner().invoke(
        app, ["train", "fusion", *tiny, "--crop", "64", "--out", str(tmp_path / "x")]
    )
    assert refused.exit_code == 2 and "crop (64) must not exceed pair_size (48)" in refused.output
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_training_lowers_the_loss_and_keeps_weak_evidence_even(tmp_path: Path) -> None:
    settings = FusionTrainSettings(
        steps=120,
        batch_size=6,
        crop=64,
        kinds=("ir_vis", "medical"),
        train_pairs=4,
        pair_size=128,
        eval_pairs=1,
        eval_size=160,
        log_every=20,
        checkpoint_every=120,
    )
    summary = run_fusion_training(settings, tmp_path / "run")
    assert summary["loss_last"] < 0.8 * summary["loss_first"]
    probe = summary["weak_evidence"]
    # decisive where the sources differ, even where they agree
    assert probe["differ_weight"] > 0.2
    assert probe["agree_weight"] < 0.02
    # the policy itself (its Beta mean, before the modulation) leans less where they agree
    assert probe["agree_mean"] < probe["differ_mean"]
