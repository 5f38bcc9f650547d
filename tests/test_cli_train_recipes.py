"""``embodia train air``, ``train byorn`` and ``train proact`` as a user runs them: tiny runs
in a subprocess (the artefacts load, the metrics are written, the loss falls), and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app

pytest.importorskip("torch")


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embodia.cli", *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_train_air_scores_and_sft_trains_on_its_step_weights(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "reasoning.jsonl"
    records = []
    for i in range(12):
        value, added = i % 7 + 10, i % 3
        records.append(
            {
                "prompt": f"Table: A{i}={value}, B{i}={i % 5 + 20}. What is A{i} plus {added}?\n",
                "completion": f"Step 1: A{i} = {value}.\nStep 2: {value} + {added} = {value + added}.\n"
                f"Answer: {value + added}",
            }
        )
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "air"
    done = _run(
        "train", "air", "--policy", f"hf:{tiny_chat_lm_dir}", "--data", str(data), "--select-fraction", "0.5",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "AIR done: 12 samples scored" in done.stdout and "6 selected" in done.stdout
    weighted = [json.loads(line) for line in (out / "weighted.jsonl").read_text().splitlines()]
    assert len(weighted) == 12 and all("completion_weights" in r for r in weighted)
    sft = _run(
        "train", "sft", "--policy", f"hf:{tiny_chat_lm_dir}", "--data", str(out / "weighted.jsonl"),
        "--steps", "6", "--batch-size", "4", "--learning-rate", "3e-3", "--out", str(tmp_path / "sft"),
    )  # fmt: skip
    assert sft.returncode == 0, sft.stderr
    summary = json.loads((tmp_path / "sft" / "summary.json").read_text())
    assert summary["train_loss_last"] < summary["train_loss_first"]
    from embodia.policies import make_policy

    assert (
        make_policy(summary["policy"]).complete([{"role": "user", "content": "A1?"}], max_tokens=2).text
        is not None
    )


def test_train_byorn_flags_the_poison_and_trains(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    from embodia.evals.backdoor import vqa_records, write_records

    data = write_records(
        vqa_records(tmp_path / "data", 4, 16, poison_rate=0.25), tmp_path / "data" / "train.jsonl"
    )
    out = tmp_path / "run"
    done = _run(
        "train", "byorn", "--policy", f"hf:{tiny_vlm_dir}", "--data", str(data), "--quantile", "0.25",
        "--max-steps", "6", "--batch-size", "4", "--learning-rate", "1e-3", "--logging-steps", "1",
        "--regenerate-every", "3", "--max-new-tokens", "4", "--lora-r", "4", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "BYORn done: 6 steps, 4 of 16 records flagged" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sft"]["train_loss_last"] < summary["sft"]["train_loss_first"]
    assert (out / "sft" / "final" / "model.safetensors").is_file() and (out / "scores.jsonl").is_file()
    from embodia.policies import make_policy

    assert make_policy(summary["policy"]).accepts_images  # type: ignore[attr-defined]


def test_train_proact_writes_a_gate_a_stream_run_uses(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _run(
        "train", "proact", "--policy", f"hf:{tiny_vlm_dir}", "--stream", "procedural:arena,seed=1,duration=8",
        "--stream", "procedural:arena,seed=2,duration=8", "--window", "4", "--max-steps", "8",
        "--learning-rate", "1e-3", "--logging-steps", "1", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Proact-VL fine-tune done: 8 steps" in done.stdout and "gate loss" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    metrics = [json.loads(line) for line in (out / "sft" / "metrics.jsonl").read_text().splitlines()]
    # 4 batches an epoch, drawn in order: step k+4 sees step k's seconds again, after training on them
    for step in range(4):
        assert metrics[step + 4]["gate_loss"] < metrics[step]["gate_loss"], step
    gate = summary["gate"]
    ran = _run(
        "stream", "run", "--source", "procedural:arena,seed=5,duration=4", "--agent", f"gate:{gate}",
        "--no-video", "--out", str(tmp_path / "stream"),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    decisions = [
        json.loads(line) for line in (tmp_path / "stream" / "decisions.jsonl").read_text().splitlines()
    ]
    assert len(decisions) == 4 and all("scores" in d for d in decisions)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["air", "--data", "x.jsonl", "--probe", "needles"], "unknown probe 'needles'"),
        (["air", "--data", "x.jsonl", "--head-fraction", "0"], "head_fraction"),
        (["byorn", "--data", "x.jsonl", "--replace", "ignore"], "unknown replace 'ignore'"),
        (["byorn", "--data", "x.jsonl", "--quantile", "2"], "quantile"),
        (["proact", "--stream", "procedural:arena,seed=0", "--scenario", "debate"], "debate"),
        (["proact", "--stream", "procedural:arena,seed=0", "--window", "1"], "window"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, arguments: list[str], problem: str) -> None:
    out = tmp_path / "o"
    command, *rest = arguments
    result = CliRunner().invoke(
        app, ["train", command, "--policy", "hf:models/none", "--out", str(out), *rest]
    )
    assert result.exit_code == 2 and problem in result.output and "Traceback" not in result.output
    assert not out.exists()
