"""The tokenizer study's runner: its settings' errors, its run folder, a resume after a kill
that ends where an uninterrupted run ends, the command, and (slow) that the tokenizer learns."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from embodia.cli.root import app
from embodia.core.runs import read_run_records
from embodia.errors import EmbodiaError
from embodia.evals.tokenizer_study import (
    TokenizerStudySettings,
    learning_rate_at,
    run_tokenizer_study,
    study_images,
    tokenizer_throughput,
    views_in_child_process,
)
from embodia.perception.tokenizers import metrics
from embodia.perception.tokenizers.autoencoder import load_tokenizer, reconstruct
from embodia.perception.tokenizers.bitwise_ar import load_unified_ar
from embodia.perception.tokenizers.lfq import TokenizerError

TINY = TokenizerStudySettings(
    source="clevr",
    train_images=24,
    eval_images=8,
    height=16,
    width=32,
    bits=4,
    channels=(8, 16),
    steps=12,
    batch_size=8,
    log_every=1,
    eval_every=6,
    checkpoint_every=4,
    ar_steps=6,
    ar_width=32,
    ar_batch_size=8,
    ar_flip_probability=0.05,
)
TIMING = ("images_per_s", "ar_examples_per_s")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": "sim", "ar_steps": 5}, "needs described images"),
        ({"height": 50}, "multiples of its stride 4, got 50x64"),
        ({"quantizer": "vq"}, "unknown quantizer 'vq'"),
        ({"bits": 16}, "entropy_group_size"),
        ({"ar_steps": 5, "ar_group": 3}, "12x16 code grid cannot be cut into 3x3"),
        ({"steps": 0}, "steps must be an integer in 1.."),
        ({"source": "photos"}, "unknown source 'photos'"),
        ({"channels": (8, 12)}, "multiple of 8"),
        ({"ar_flip_probability": 0.7}, "ar_flip_probability must be in 0..0.5"),
        ({"ar_temperature": -1.0}, "ar_temperature must be in 0..10"),
    ],
)
def test_bad_settings_name_the_problem(change: dict[str, Any], message: str) -> None:
    with pytest.raises(TokenizerError, match=message):
        TokenizerStudySettings(**change)


def test_the_learning_rate_warms_up_then_decays() -> None:
    assert learning_rate_at(5, 100, 1.0, 10) == pytest.approx(0.5)
    assert learning_rate_at(10, 100, 1.0, 10) == pytest.approx(1.0)
    assert learning_rate_at(100, 100, 1.0, 10) == pytest.approx(0.05)
    assert learning_rate_at(55, 100, 1.0, 10) == pytest.approx(0.05 + 0.95 * 0.5)


def test_held_out_puzzles_are_not_training_puzzles() -> None:
    train, held_out = study_images(dataclasses.replace(TINY, train_images=16, eval_images=16))
    assert train.images.shape == (16, 16, 32, 3) and len(train.captions) == 16
    assert not any(np.array_equal(a, b) for a in train.images for b in held_out.images)


def test_simulator_views_are_rendered_by_a_child_process() -> None:
    views = views_in_child_process([0], 3, 16, 24, seed=0)
    assert views.shape == (3, 16, 24, 3) and views.dtype == np.uint8
    assert all(float(view.std()) > 0 for view in views)
    with pytest.raises(TokenizerError, match="rendering the simulator views failed: .*views must be"):
        views_in_child_process([0], 0, 16, 24, seed=0)


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {
        f"{path.name}:{name}": value
        for path in sorted(folder.glob("*.safetensors"))
        for name, value in load_file(str(path)).items()
    }


def _untimed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    # put back after: a later test that compares a run in this process with one in a subprocess
    # (default threads) would otherwise compare two thread counts
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path_factory.mktemp("study") / "run"
        yield out, run_tokenizer_study(TINY, out)
    finally:
        torch.set_num_threads(before)


def test_the_run_folder_and_its_summary(whole_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = whole_run
    for name in (
        "config.yaml",
        "metrics.jsonl",
        "summary.json",
        "samples.png",
        "ar_samples.png",
        "curves.png",
    ):
        assert (out / name).is_file(), name
    assert summary["bits_per_image"] == 4 * 8 * 2 * 4  # grid 4x8, 2 levels of 4 bits
    assert summary["baselines"]["downsample"]["bits_per_image"] <= summary["bits_per_image"]
    rows = read_run_records(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(19))
    assert [r["phase"] for r in rows] == ["tokenizer"] * 13 + ["ar"] * 6
    assert "eval_psnr" in rows[0] and "eval_psnr" in rows[6] and "eval_ar_bit_cross_entropy" in rows[-1]
    assert summary["untrained"]["psnr"] == rows[0]["eval_psnr"]
    # the summary's held-out numbers are those of the saved tokenizer on the held-out images
    _, held_out = study_images(TINY)
    reconstructions, bits = reconstruct(load_tokenizer(out / "final"), held_out.images)
    assert summary["held_out"]["psnr"] == pytest.approx(
        metrics.dataset_psnr(held_out.images, reconstructions)
    )
    assert summary["held_out"]["bit_balance"] == pytest.approx(metrics.bit_balance(bits))
    model, vocab, group = load_unified_ar(out / "final")
    assert group == 2 and model.config.steps == 8 and model.config.bits_per_step == 4 * 2 * 4
    ar = summary["ar"]
    assert 0 <= ar["reencoded_bit_agreement"] <= 1 and len(ar["sample_captions"]) == 8
    assert run_tokenizer_study(TINY, out, resume=True) == json.loads((out / "summary.json").read_text())
    with pytest.raises(EmbodiaError, match="already holds a run"):
        run_tokenizer_study(TINY, out)
    with pytest.raises(EmbodiaError, match="other settings.*steps: 12 -> 13"):
        run_tokenizer_study(dataclasses.replace(TINY, steps=13), out, resume=True)


KILL = """
import os, signal, sys
from pathlib import Path
from embodia.evals.tokenizer_study import TokenizerStudySettings, run_tokenizer_study

def kill(line):
    if line["step"] == {step}:
        os.kill(os.getpid(), signal.SIGKILL)

run_tokenizer_study(TokenizerStudySettings(**{fields}), Path(sys.argv[1]), on_record=kill)
"""


@pytest.mark.parametrize("step", [10, 17])  # in the tokenizer's steps; in the AR model's
def test_a_killed_run_resumes_to_the_uninterrupted_result(
    whole_run: tuple[Path, dict[str, Any]], tmp_path: Path, step: int
) -> None:
    fields = {f.name: getattr(TINY, f.name) for f in dataclasses.fields(TINY)}
    script = textwrap.dedent(KILL).format(step=step, fields=repr(fields))
    out = tmp_path / "run"
    killed = subprocess.run(
        [sys.executable, "-c", script, str(out)], capture_output=True, text=True, check=False
    )
    assert killed.returncode == -9, killed.stderr
    assert not (out / "summary.json").exists()
    summary = run_tokenizer_study(TINY, out, resume=True)
    assert summary["resumed_after_step"] == (8 if step == 10 else 16)
    reference_out, reference = whole_run
    first, second = _tensors(reference_out / "final"), _tensors(out / "final")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert _untimed(read_run_records(out / "metrics.jsonl")) == _untimed(
        read_run_records(reference_out / "metrics.jsonl")
    )
    assert summary["held_out"] == reference["held_out"]
    assert {**summary["ar"], "model": None} == {**reference["ar"], "model": None}


def test_the_throughput_function_for_the_benchmark() -> None:
    result = tokenizer_throughput(batch_size=4, repeats=1)
    assert result["images"] == 4 and result["height"] == 48 and result["width"] == 64
    assert result["encode_images_per_s"] > 0 and result["decode_images_per_s"] > 0


def test_the_command_trains_and_names_a_bad_setting(tmp_path: Path) -> None:
    runner = CliRunner()
    small = [
        "--source",
        "clevr",
        "--train-images",
        "16",
        "--eval-images",
        "4",
        "--height",
        "16",
        "--width",
        "32",
    ]
    small += ["--channel", "8", "--channel", "16", "--bits", "4", "--steps", "3", "--batch-size", "4"]
    result = runner.invoke(app, ["train", "tokenizer", *small, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "tokenizer done: 3 steps, 256 bits per image; held-out PSNR" in " ".join(result.output.split())
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["settings"]["channels"] == [8, 16]
    refused = runner.invoke(app, ["train", "tokenizer", "--height", "50", "--out", str(tmp_path / "bad")])
    lines = refused.output.strip().splitlines()
    assert refused.exit_code == 2 and len(lines) == 1 and "got 50x64" in lines[0]
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_the_tokenizer_learns_to_reconstruct_held_out_renders(tmp_path: Path) -> None:
    settings = TokenizerStudySettings(train_images=128, eval_images=32, steps=300, eval_every=100)
    summary = run_tokenizer_study(settings, tmp_path / "run")
    psnr, untrained = summary["held_out"]["psnr"], summary["untrained"]["psnr"]
    assert untrained < 12.0 < 20.0 < psnr
    assert psnr > summary["baselines"]["mean_image"]["psnr"] + 3.0
    assert summary["held_out"]["group_code_usage"] > 0.5  # most sub-codes of 8 bits occur
    curve = [r["eval_psnr"] for r in read_run_records(tmp_path / "run" / "metrics.jsonl") if "eval_psnr" in r]
    assert curve == sorted(curve)  # held-out PSNR rises at every measurement
