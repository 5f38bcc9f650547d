"""``embodia train sxs`` as a user runs it: a tiny run in a subprocess, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app

pytest.importorskip("torch")


@pytest.mark.slow
def test_train_sxs_runs_sft_then_grpo(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable, "-m", "embodia.cli", "train", "sxs", "--policy", f"hf:{tiny_chat_lm_dir}",
            "--source", "dsr:queue.compound", "--sft-items", "8", "--sft-batch-size", "4",
            "--grpo-steps", "1", "--grpo-prompts-per-step", "2", "--grpo-group-size", "2",
            "--max-new-tokens", "16", "--eval-prompts", "0", "--out", str(out),
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "SxS training done" in done.stdout and "SFT loss" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sft"]["train_loss_last"] < summary["sft"]["train_loss_first"]
    assert (out / "grpo" / "final" / "model.safetensors").is_file()
    assert (out / "sft" / "metrics.jsonl").is_file() and (out / "grpo" / "metrics.jsonl").is_file()


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["--source", "chess"], "unknown SxS source 'chess'"),
        (["--latency-weight", "-1"], "latency_weight"),
        (["--sft-items", "0"], "sft_items"),
    ],
)
def test_bad_train_sxs_input_is_one_line(tmp_path: Path, arguments: list[str], problem: str) -> None:
    out = tmp_path / "o"
    result = CliRunner().invoke(
        app, ["train", "sxs", "--policy", "hf:models/none", "--out", str(out), *arguments]
    )
    assert result.exit_code == 2 and problem in result.output and "Traceback" not in result.output
    assert not out.exists()
