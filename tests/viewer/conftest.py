"""A runs folder made by the real commands (two explorations of one house, a live stream, a
co-commentary self-play stream, an SxS evaluation), a training run's curves from the real gate
trainer, and malformed runs; and guards that turn a read blocked forever into a failed test
instead of a hung suite."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

from embodia.cli import app

SCENE = "procedural:seed=0,rooms=5"
VLM_REPLIES = [  # native tool calls, as the model's Hermes markup
    '<tool_call>{"name": "describe_map", "arguments": {}}</tool_call>',  # answered, asked again
    '<tool_call>{"name": "goto_waypoint", "arguments": {"index": "two"}}</tool_call>',  # invalid
    'Sure. <tool_call>{"name": "goto_waypoint", "arguments": {"index": 0}}</tool_call>',
]


T = TypeVar("T")


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, run in a thread: a test failure when it has not returned after ``seconds``
    (a regression that blocks on a FIFO fails instead of hanging the suite)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the test below
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"no answer within {seconds} s: something blocks"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


@pytest.fixture
def within() -> Callable[[float, Callable[[], Any]], Any]:
    """:func:`_within`, for the tests (tests share helpers through fixtures here)."""
    return _within


@pytest.fixture
def make_fifo() -> Iterator[Callable[[Path], Path]]:
    """Makes FIFOs; at the end each gets a writer that closes at once, so a reader a regression
    left blocked on one sees the end of the file and its thread ends."""
    made: list[Path] = []

    def make(path: Path) -> Path:
        os.mkfifo(path)
        made.append(path)
        return path

    yield make
    for path in made:
        try:
            writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader is waiting on it (ENXIO): nothing to release
            continue
        os.close(writer)


def _invoke(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from embodia.policies.speak_gate import TRAIN_METRICS, train_gate

    root = tmp_path_factory.mktemp("runs")
    explore = ["explore", "--agent", "dfs", "--policy", "heuristic", "--scene", SCENE]
    explore += ["--height", "64", "--width", "128"]
    _invoke(*explore, "--steps", "60", "--out", str(root / "house" / "short"))
    _invoke(*explore, "--steps", "120", "--out", str(root / "house" / "long"))
    _invoke(
        "explore",
        "--agent",
        "frontier",
        "--scene",
        SCENE,
        "--steps",
        "30",
        "--out",
        str(root / "house" / "frontier"),
    )
    replies = root.parent / "vlm-replies.jsonl"
    replies.write_text("".join(json.dumps({"text": t}) + "\n" for t in VLM_REPLIES))
    _invoke(
        *explore,
        "--steps",
        "40",
        "--policy",
        f"scripted:{replies}?loop=true",
        "--out",
        str(root / "house" / "vlm"),
    )
    _invoke(
        "stream", "run", "--scenario", "solo", "--source", "procedural:arena,seed=3,duration=12",
        "--agent", "heuristic", "--out", str(root / "stream"),
    )  # fmt: skip
    _invoke(
        "stream", "run", "--scenario", "co-commentary", "--agents", "2", "--no-video",
        "--source", "procedural:arena,seed=3,duration=20", "--agent", "heuristic", "--out", str(root / "duo"),
    )  # fmt: skip
    _invoke("eval", "sxs", "--source", "maze", "--difficulty", "easy", "--modes", "sft_target",
            "--items", "2", "--out", str(root / "sxs"))  # fmt: skip
    dsr_replies = root.parent / "dsr-replies.jsonl"
    dsr_replies.write_text(json.dumps('{"final_answer": []}') + "\n" + json.dumps("no idea") + "\n")
    _invoke("eval", "dsr", "--policy", f"scripted:{dsr_replies}", "--suite", "main", "--length", "short",
            "--limit", "2", "--mode", "none", "--out", str(root / "dsr"))  # fmt: skip
    training = root / "gate"
    training.mkdir()
    generator = torch.Generator().manual_seed(0)
    features = [torch.randn(12, 8, generator=generator) for _ in range(3)]
    labels = [[int(i % 3 == 0) for i in range(12)] for _ in range(3)]
    with (training / TRAIN_METRICS).open("w") as sink:
        train_gate(features, labels, epochs=15, on_epoch=lambda e: sink.write(json.dumps(e) + "\n"))
    going = root / "house" / "going"  # a run whose video is still being written
    shutil.copytree(root / "house" / "short", going)
    (going / "episode.mp4").write_bytes((going / "episode.mp4").read_bytes()[:2000])
    bad = root / "broken"
    bad.mkdir()
    (bad / "episodes.jsonl").write_text('{"decision": 1}\nnot json at all\n{"decision": 3}\n')
    garbled = root / "garbled-summary"
    garbled.mkdir()
    (garbled / "episodes.jsonl").write_text('{"decision": 1, "choice": {}}\n')
    (garbled / "summary.json").write_text("{ this is not json")
    return root


@pytest.fixture
def run_beside_a_secret(tmp_path: Path) -> tuple[Path, Path]:
    """``(run, secret)``: an explore run at ``runs/run`` under ``tmp_path``, and beside the runs
    folder a secret JSON file shaped like a run's tree (a link to it must never be read)."""
    secret = tmp_path / "secret.json"
    secret.write_text('{"nodes": [{"id": "password: hunter2"}], "edges": [], "api_key": "hunter2"}')
    run = tmp_path / "runs" / "run"
    run.mkdir(parents=True)
    (run / "episodes.jsonl").write_text('{"choice": {}}\n')
    return run, secret
