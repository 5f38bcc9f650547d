"""Every bad input through the real CLI: exit 2, one ``error:`` line, no traceback, nothing in --out.

Each row is an input the independent probe of issue 17 saw end in a traceback, an allocation
of many GiB, a hang, or a run that pretended to work; they all fail at validation, so the
table runs in seconds.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app

runner = CliRunner()

_CLIP = {"video_id": "v", "begin": 0, "end": 10, "tag": "Solo commentators", "dataset_name": "d", "idx": 0}


def _closed_port() -> int:
    """A loopback port nothing listens on: bound, noted, closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture()
def inputs(tmp_path: Path) -> dict[str, str]:
    """The files and folders the rows refer to, by placeholder name."""
    (tmp_path / "latin1.jsonl").write_bytes('{"text": "caf\xe9"}\n'.encode("latin-1"))
    (tmp_path / "pred.jsonl").write_text(json.dumps({**_CLIP, "pred": {"3": "a goal"}}) + "\n")
    (tmp_path / "label.jsonl").write_text(json.dumps({**_CLIP, "label": {"3": "a goal"}}) + "\n")
    for name, begin in (("nan", "NaN"), ("inf", "Infinity"), ("negative", "-4")):
        record = json.dumps({**_CLIP, "pred": {"3": "x"}}).replace('"begin": 0', f'"begin": {begin}')
        (tmp_path / f"{name}-begin.jsonl").write_text(record + "\n")
    (tmp_path / "replies.jsonl").write_text('"3"\n')
    (tmp_path / "empty").mkdir()
    server = f"http://127.0.0.1:{_closed_port()}/v1"
    return {
        "{out}": str(tmp_path / "out"),
        "{latin1}": str(tmp_path / "latin1.jsonl"),
        "{pred}": str(tmp_path / "pred.jsonl"),
        "{label}": str(tmp_path / "label.jsonl"),
        "{nan-begin}": str(tmp_path / "nan-begin.jsonl"),
        "{inf-begin}": str(tmp_path / "inf-begin.jsonl"),
        "{negative-begin}": str(tmp_path / "negative-begin.jsonl"),
        "{replies}": str(tmp_path / "replies.jsonl"),
        "{empty}": str(tmp_path / "empty"),
        "{server}": server,
        "{openai}": f"openai:{server}?model=m&max_retries=0",
    }


STREAM = ["stream", "run", "--out", "{out}", "--no-video"]
EXPLORE = ["explore", "--agent", "frontier", "--out", "{out}", "--steps", "5", "--no-video"]
DSR = ["eval", "dsr", "--out", "{out}", "--limit", "1"]
DOWN = "cannot reach the policy server at {server}"

CASES = {
    # files that are not UTF-8 text
    "live --pred latin-1": (["eval", "live", "--pred", "{latin1}", "--label", "{label}"], "not UTF-8 text"),
    "live --label latin-1": (["eval", "live", "--pred", "{pred}", "--label", "{latin1}"], "not UTF-8 text"),
    "dsr stats latin-1": (["dsr", "stats", "--instances", "{latin1}"], "not UTF-8 text"),
    "scripted: latin-1": ([*DSR, "--policy", "scripted:{latin1}"], "not UTF-8 text"),
    # seeds, checked where they are parsed
    "explore --seed -1": ([*EXPLORE, "--seed", "-1"], "--seed"),
    "explore --seed 2**32": ([*EXPLORE, "--seed", str(2**32)], "4,294,967,295"),
    "csmr --seed -1": (
        ["eval", "csmr", "--reasoner", "scripted:{replies}", "--out", "{out}", "--seed", "-1"],
        "--seed",
    ),
    "sxs data --seed -1": (["sxs", "data", "--out", "{out}/sft.jsonl", "--seed", "-1"], "--seed"),
    "stream seed=-1": ([*STREAM, "--source", "procedural:arena,seed=-1"], "seed must be in 0.."),
    "train-gate --seeds 5-2": (
        ["stream", "train-gate", "--model", "{empty}", "--out", "{out}", "--seeds", "5-2"],
        "is empty",
    ),
    # live records: begin must be a whole second from 0
    "live begin NaN": (["eval", "live", "--pred", "{nan-begin}", "--label", "{label}"], "got nan"),
    "live begin Infinity": (["eval", "live", "--pred", "{inf-begin}", "--label", "{label}"], "got inf"),
    "live begin -4": (["eval", "live", "--pred", "{negative-begin}", "--label", "{label}"], "got -4"),
    # sizes, bounded before anything is allocated
    "stream --fps 1e6": ([*STREAM, "--fps", "1e6"], "at most 60"),
    "sim render 100000x200000": (
        ["sim", "render", "--scene", "procedural:seed=1", "--out", "{out}", "--height", "100000"]
        + ["--width", "200000"],
        "1..4096 pixels",
    ),
    "explore 100000x200000": ([*EXPLORE, "--height", "100000", "--width", "200000"], "1..4096 pixels"),
    "eval explore 100000x200000": (
        ["eval", "explore", "--agent", "frontier", "--scenes", "procedural:seed=1", "--out", "{out}"]
        + ["--height", "100000", "--width", "200000"],
        "1..4096 pixels",
    ),
    "explore --steps 1e6": ([*EXPLORE[:-3], "--steps", "1000000"], "1..100,000"),
    "stream duration=1e9": ([*STREAM, "--source", "procedural:arena,seed=0,duration=1e9"], "1..14400"),
    "stream frame 100000x100000": (
        [*STREAM, "--source", "procedural:arena,seed=0,height=100000,width=100000"],
        "1..4096 pixels",
    ),
    "stream --agents 1000": ([*STREAM, "--scenario", "co-commentary", "--agents", "1000"], "1..16"),
    "eval explore seeds=0-1e8": (
        [
            "eval",
            "explore",
            "--agent",
            "frontier",
            "--out",
            "{out}",
            "--scenes",
            "procedural:seeds=0-100000000",
        ],
        "1..100,000",
    ),
    "train-gate --seeds 0-1e8": (
        ["stream", "train-gate", "--model", "{empty}", "--out", "{out}", "--seeds", "0-100000000"],
        "1..100,000",
    ),
    "eval sxs --items 1e6": (
        ["eval", "sxs", "--modes", "sft_target", "--out", "{out}", "--items", "1000000"],
        "1..100,000",
    ),
    "sxs data --items 1e6": (["sxs", "data", "--out", "{out}/sft.jsonl", "--items", "1000000"], "1..100,000"),
    "dsr --concurrency 1e6": ([*DSR, "--policy", "scripted:{replies}", "--concurrency", "10000"], "1..1024"),
    "sxs data empty --tokenizer": (
        ["sxs", "data", "--out", "{out}/sft.jsonl", "--items", "1", "--tokenizer", "{empty}"],
        "holds no usable AutoTokenizer files",
    ),
    "sxs --support nli:<empty dir>": (
        ["eval", "sxs", "--policy", "scripted:{replies}", "--support", "nli:{empty}", "--out", "{out}"]
        + ["--items", "1", "--modes", "sxs"],
        "NLI model",
    ),
    # an OpenAI-compatible server that is down: every runner fails fast, naming it
    "explore dfs, server down": (
        ["explore", "--agent", "dfs", "--policy", "{openai}", "--out", "{out}", "--steps", "5", "--no-video"],
        DOWN,
    ),
    "eval dsr, server down": ([*DSR, "--policy", "{openai}"], DOWN),
    "eval dsr --instances missing": (
        [*DSR, "--policy", "scripted:{replies}", "--instances", "{out}/missing.jsonl"],
        "no such file",
    ),
    "eval csmr, server down": (
        ["eval", "csmr", "--reasoner", "{openai}", "--out", "{out}", "--items", "1"],
        DOWN,
    ),
    "eval sxs, server down": (
        ["eval", "sxs", "--policy", "{openai}", "--out", "{out}", "--items", "1"],
        DOWN,
    ),
    "stream run, server down": ([*STREAM, "--agent", "{openai}"], DOWN),
    "eval live judge, server down": (
        ["eval", "live", "--pred", "{pred}", "--label", "{label}", "--judge", "{openai}", "--out", "{out}"],
        DOWN,
    ),
    # float options: finite numbers only
    "dsr --temperature nan": ([*DSR, "--policy", "scripted:{replies}", "--temperature", "nan"], "finite"),
    "dsr --temperature inf": ([*DSR, "--policy", "scripted:{replies}", "--temperature", "inf"], "finite"),
    "dsr --temperature -1": ([*DSR, "--policy", "scripted:{replies}", "--temperature", "-1"], "temperature"),
    "stream --time-scale nan": ([*STREAM, "--time-scale", "nan"], "finite"),
    "stream --fps nan": ([*STREAM, "--fps", "nan"], "finite"),
    "stream --threshold nan": ([*STREAM, "--threshold", "nan"], "finite"),
    "train-gate --threshold nan": (
        ["stream", "train-gate", "--model", "{empty}", "--out", "{out}", "--threshold", "nan"],
        "finite",
    ),
    "early-exit --dataset mnist": (
        ["eval", "early-exit", "--out", "{out}", "--dataset", "mnist"],
        "datasets are distinct values of digits, puzzles",
    ),
    "early-exit --failure-weight nan": (
        ["eval", "early-exit", "--out", "{out}", "--failure-weight", "nan"],
        "finite",
    ),
    "early-exit --seed -1": (
        ["eval", "early-exit", "--out", "{out}", "--seed", "-1"],
        "seeds must be in 0..",
    ),
    "diffusion-reasoning --puzzle sokoban": (
        ["eval", "diffusion-reasoning", "--out", "{out}", "--puzzle", "sokoban"],
        "draws maze, frozenlake",
    ),
    "diffusion-reasoning --sampling-steps 0": (
        ["eval", "diffusion-reasoning", "--out", "{out}", "--sampling-steps", "0"],
        "sampling_steps must be counts >= 1",
    ),
    "diffusion-reasoning --text-sft-instances above --train-instances": (
        [
            "eval",
            "diffusion-reasoning",
            "--out",
            "{out}",
            "--train-instances",
            "10",
            "--text-sft-instances",
            "20",
        ],
        "must not exceed train_instances",
    ),
    "eval rewards, no bench file": (
        ["eval", "rewards", "--model", "{empty}", "--bench", "{empty}/bench.jsonl", "--out", "{out}"],
        "bench file not found",
    ),
    "eval rewards, a bench line that is no pair": (
        ["eval", "rewards", "--model", "{empty}", "--bench", "{replies}", "--out", "{out}"],
        "line 1: expected a JSON object, got str",
    ),
    "train reward-model --smoothing 1": (
        ["train", "reward-model", "--out", "{out}", "--smoothing", "1"],
        "smoothing is in [0, 1)",
    ),
    "train reward-model --regression-weight -1": (
        ["train", "reward-model", "--out", "{out}", "--regression-weight", "-1"],
        "regression_weight must be >= 0",
    ),
    "eval scireas --ingredients wikipedia": (
        ["eval", "scireas", "--policy", "scripted:{replies}", "--ingredients", "wikipedia", "--out", "{out}"],
        "--ingredients is one of none, oracle, extracted, both",
    ),
    "eval scireas --families alchemy": (
        ["eval", "scireas", "--policy", "x", "--families", "alchemy", "--out", "{out}"],
        "the generated families are kinematics",
    ),
    "eval krux-study --seed 1 --seed 1": (
        ["eval", "krux-study", "--seed", "1", "--seed", "1", "--out", "{out}"],
        "seeds must be distinct",
    ),
    "eval scireas-pro --source missing": (
        [
            "eval",
            "scireas-pro",
            "--low",
            "x",
            "--high",
            "y",
            "--source",
            "{out}/missing.json",
            "--out",
            "{out}",
        ],
        "is neither",
    ),
    "eval vocal --task trivia": (
        ["eval", "vocal", "--policy", "scripted:{replies}", "--task", "trivia", "--out", "{out}"],
        "--task is one of puzzle, dsr, scireas; got 'trivia'",
    ),
    "eval diffusion-reasoning --puzzle go": (
        ["eval", "diffusion-reasoning", "--out", "{out}", "--puzzle", "go"],
        "draws maze, frozenlake, sudoku, jigsaw; got 'go'",
    ),
    # usage errors are one line too
    "explore without --agent": (["explore", "--out", "{out}"], "Missing option '--agent'"),
}


def _fill(text: str, inputs: dict[str, str]) -> str:
    for key, value in inputs.items():
        text = text.replace(key, value)
    return text


@pytest.mark.parametrize(("args", "message"), CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_error_line_and_leaves_nothing(
    inputs: dict[str, str], args: list[str], message: str
) -> None:
    result = runner.invoke(app, [_fill(a, inputs) for a in args])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert _fill(message, inputs) in lines[0] and "Traceback" not in result.output
    out = Path(inputs["{out}"])
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
