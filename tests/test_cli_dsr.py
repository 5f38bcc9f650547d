"""`embodia dsr generate|stats` and `embodia eval dsr`: files written, counts, resume, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.envs.dsr.suites import read_jsonl

runner = CliRunner()


def test_generate_then_stats_reports_4140(tmp_path: Path) -> None:
    result = runner.invoke(app, ["dsr", "generate", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "code.jsonl",
        "main.jsonl",
        "realistic.jsonl",
        "spatial.jsonl",
    ]
    assert len(read_jsonl(tmp_path / "main.jsonl")) == 2790
    result = runner.invoke(app, ["dsr", "stats", "--instances", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    assert counts["instances"] == 4140
    assert counts["suite"] == {"code": 630, "main": 2790, "realistic": 270, "spatial": 450}
    assert counts["length"] == {"long": 1380, "medium": 1380, "short": 1380}
    assert set(counts["category"]) == {
        "linear",
        "temporal",
        "associative",
        "hierarchical",
        "network",
        "hybrid",
        "spatial",
    }
    assert len(counts["structure"]) == 20
    assert len(counts["operation"]) == 35
    table = runner.invoke(app, ["dsr", "stats", "--suite", "main"])
    assert table.exit_code == 0 and "2790" in table.stdout and "by operation" in table.stdout


def test_eval_dsr_writes_a_report_and_resumes(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text("\n".join(json.dumps('{"final_answer": []}') for _ in range(4)) + "\n")
    out = tmp_path / "run"
    args = [
        "eval",
        "dsr",
        "--policy",
        f"scripted:{replies}",
        "--suite",
        "main",
        "--length",
        "short",
        "--limit",
        "4",
    ]
    result = runner.invoke(app, [*args, "--mode", "none", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["overall"]["n"] == 4 and (out / "report.png").is_file()
    assert "all" in result.stdout
    again = runner.invoke(app, [*args, "--mode", "none", "--out", str(out), "--limit", "4"])
    assert again.exit_code == 0, (
        again.output
    )  # nothing left to ask: the scripted file is never read past its end


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dsr", "generate", "--out", "x", "--suite", "mains"], "unknown DSR suite 'mains'"),
        (["dsr", "stats", "--instances", "missing.jsonl"], "instance file not found"),
        (
            ["eval", "dsr", "--policy", "scripted:r.jsonl", "--out", "x", "--mode", "fewshot"],
            "unknown prompt mode",
        ),
        (["eval", "dsr", "--policy", "scripted:r.jsonl", "--out", "x", "--length", "tiny"], "unknown length"),
        (
            ["eval", "dsr", "--policy", "scripted:r.jsonl", "--out", "x", "--operation", "heap.sort"],
            "unknown DSR operation",
        ),
        (["eval", "dsr", "--policy", "scripted:none.jsonl", "--out", "x"], "not found"),
        (
            ["eval", "dsr", "--policy", "scripted:r.jsonl", "--out", "x", "--concurrency", "0"],
            "--concurrency",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "r.jsonl").write_text('"{}"\n')
    args = [str(tmp_path / a) if a in ("x", "missing.jsonl") else a for a in args]
    args = [a.replace("scripted:r.jsonl", f"scripted:{tmp_path / 'r.jsonl'}") for a in args]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output


def _escaping_replies(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """Code replies that try to write outside the run folder, with and without a shell."""
    outside = tmp_path / "outside.txt"
    escape = (
        "```python\ndef solution():\n"
        "    for cls in ().__class__.__mro__[1].__subclasses__():\n"
        "        if cls.__name__ == '_wrap_close':\n"
        "            g = cls.__init__.__globals__\n"
        f"    g['system']('id > {outside}')\n"
        f"    g['open']({str(outside)!r}, g['O_WRONLY'] | g['O_CREAT'])\n"
        "    return []\n```"
    )
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(escape) + "\n" for _ in range(count)))
    return replies, outside


def test_code_suite_contains_escaping_replies_and_scores_them_zero(tmp_path: Path) -> None:
    from embodia.envs.dsr.sandbox import isolation_problem

    if isolation_problem() is not None and os.environ.get("EMBODIA_REQUIRE_SANDBOX") != "1":
        pytest.skip(f"the operating-system sandbox cannot run here: {isolation_problem()}")
    replies, outside = _escaping_replies(tmp_path, 3)
    out = tmp_path / "run"
    args = ["eval", "dsr", "--policy", f"scripted:{replies}", "--suite", "code", "--limit", "3"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 3
    assert all(a["exact"] == 0.0 and "sandbox violation: os.system" in a["reason"] for a in answers)
    assert not outside.exists()


def test_code_suite_refuses_to_run_without_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from embodia.envs.dsr import sandbox

    replies, outside = _escaping_replies(tmp_path, 1)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    sandbox.isolation_problem.cache_clear()
    out = tmp_path / "run"
    args = ["eval", "dsr", "--policy", f"scripted:{replies}", "--suite", "code", "--limit", "1"]
    try:
        refused = runner.invoke(app, [*args, "--out", str(out)])
    finally:
        sandbox.isolation_problem.cache_clear()
    assert refused.exit_code == 2, refused.output
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "bubblewrap" in lines[0] and "--unsafe-no-sandbox" in lines[0]
    assert not out.exists()
    # the explicit escape hatch runs it, still stopping the escape in-process
    unsafe = runner.invoke(app, [*args, "--out", str(out), "--unsafe-no-sandbox"])
    assert unsafe.exit_code == 0, unsafe.output
    answer = json.loads((out / "answers.jsonl").read_text())
    assert answer["exact"] == 0.0 and "os.system" in answer["reason"]
    assert not outside.exists()
