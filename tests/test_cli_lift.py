"""``embodia lift`` as a user runs it: a subprocess that learns a needle and says where the tuned
model is, a run killed mid-training that resumes from its checkpoint, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app

pytest.importorskip("torch")

QA = {"question": "What is the secret code of the lighthouse?", "answer": "4821"}


def _inputs(tmp_path: Path, filler: int) -> tuple[Path, Path, str]:
    words = " ".join(f"Sentence {i} is about the weather on the coast." for i in range(filler))
    document = tmp_path / "coast.txt"
    document.write_text(f"{words} The secret code of the lighthouse is 4821. {words}", encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps(QA) + "\n", encoding="utf-8")
    # the generator: one fixed reply for every sentence (a server stands here in real use)
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps(json.dumps({"qa_list": [QA]})) + "\n", encoding="utf-8")
    return document, questions, f"scripted:{replies}?loop=true"


def _command(
    model: Path, document: Path, questions: Path, generator: str, out: Path, *extra: str
) -> list[str]:
    return [
        sys.executable, "-m", "embodia.cli", "lift", "--doc", str(document), "--questions", str(questions),
        "--policy", f"hf:{model}", "--generator", generator, "--out", str(out),
        "--learning-rate", "0.003", "--batch-size", "4", "--epochs", "12", "--save-steps", "20", *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_lift_command_learns_the_needle(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    document, questions, generator = _inputs(tmp_path, filler=2)
    done = subprocess.run(
        _command(tiny_chat_lm_dir, document, questions, generator, tmp_path / "run"),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answers that contain the expected one: 100.0%" in done.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["sentences"] == 5 and summary["pairs"] == 5
    assert (tmp_path / "run" / "train" / "final" / "model.safetensors").is_file()
    metrics = [
        json.loads(line) for line in (tmp_path / "run" / "train" / "metrics.jsonl").read_text().splitlines()
    ]
    assert metrics[-1]["loss"] < metrics[0]["loss"]


@pytest.mark.slow
def test_a_killed_lift_run_resumes_from_its_checkpoint(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    document, questions, generator = _inputs(tmp_path, filler=10)  # 21 sentences: 63 steps
    out = tmp_path / "run"
    command = _command(tiny_chat_lm_dir, document, questions, generator, out)
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    checkpoints = out / "train" / "checkpoints"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if any((c / "trainer_state.json").is_file() for c in checkpoints.glob("checkpoint-*")):
            break
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before its first checkpoint"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "summary.json").exists()
    done = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    trained = json.loads((out / "train" / "summary.json").read_text())
    assert summary["resumed"] and trained["resumed_from_step"] >= 20
    assert summary["train_steps"] == 63 and summary["accuracy"] == 1.0


def test_bad_lift_input_is_one_line_and_exit_2(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    document, questions, generator = _inputs(tmp_path, filler=1)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    runner = CliRunner()
    base = [
        "lift",
        "--policy",
        f"hf:{tiny_chat_lm_dir}",
        "--generator",
        generator,
        "--out",
        str(tmp_path / "o"),
    ]
    for arguments, problem in (
        (["--doc", str(empty)], "is empty: there is nothing to learn"),
        (["--doc", str(tmp_path / "missing.txt")], "cannot read"),
        (["--doc", str(document), "--questions", str(document)], "coast.txt line 1: bad JSON"),
        (["--doc", str(document), "--epochs", "0"], "epochs"),
    ):
        result = runner.invoke(app, [*base, *arguments])
        assert result.exit_code == 2, result.output
        assert problem in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()
