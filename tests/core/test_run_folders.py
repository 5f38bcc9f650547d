"""Run folders: records are never lost (atomic rewrites, every readable line recovered, gaps
made again), a damaged or missing checkpoint is a warning naming what is made again, a run id
that survives renaming the folder, and every runner's --out, validation and --resume errors
are one line with exit 2."""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from typer.testing import CliRunner

from embodia.cli import app
from embodia.core import runs as resume
from embodia.errors import EmbodiaError
from embodia.evals.explore import ExploreSettings, run_exploration

SCENE = "procedural:seed=3,rooms=3"


def _decision_lines(count: int) -> str:
    return "".join(
        json.dumps({"decision": d, "choice": {"by": "vlm", "reply": "x" * 150}}) + "\n"
        for d in range(1, count + 1)
    )


# ------------------------------------------------------------------ records are never lost


def test_a_write_that_dies_midway_while_cutting_records_back_loses_none(tmp_path: Path) -> None:
    # The file size limit makes the write fail after 500 bytes, as a kill or a full disk
    # would: cutting 11 records back to 4 (about 800 bytes) must leave all 11 in place.
    log = tmp_path / "episodes.jsonl"
    log.write_text(_decision_lines(11))
    code = (
        "import sys; from pathlib import Path; from embodia.agents.runtime import RunRecorder;"
        "RunRecorder(Path(sys.argv[1]), keep_decisions=4)"
    )

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (500, 500))

    done = subprocess.run(
        [sys.executable, "-c", code, str(log)], preexec_fn=limit_file_size, capture_output=True, check=False
    )
    assert done.returncode != 0, "the write was meant to fail"
    assert log.read_text() == _decision_lines(11)
    # The next resume then cuts back for real.
    from embodia.agents.runtime import RunRecorder

    RunRecorder(log, keep_decisions=4).close()
    assert [r["decision"] for r in resume.read_run_records(log)] == [1, 2, 3, 4]


def test_a_resume_with_nothing_to_drop_only_appends(tmp_path: Path) -> None:
    from embodia.agents.runtime import RunRecorder

    log = tmp_path / "episodes.jsonl"
    log.write_text(_decision_lines(5))
    os.utime(log, ns=(1, 1))
    recorder = RunRecorder(log, keep_decisions=5)
    assert log.stat().st_mtime_ns == 1  # not rewritten
    recorder.write({"decision": 6})
    recorder.close()
    assert [r["decision"] for r in resume.read_run_records(log)] == [1, 2, 3, 4, 5, 6]


def test_write_atomic_keeps_the_old_file_when_the_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.json"
    target.write_text('{"decisions": 11}\n')

    def broken_fsync(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        resume.write_atomic(target, '{"decisions": 12}\n')
    assert target.read_text() == '{"decisions": 11}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary left
    monkeypatch.undo()
    resume.write_atomic(target, '{"decisions": 12}\n')
    assert target.read_text() == '{"decisions": 12}\n'


def test_every_readable_line_is_recovered_and_the_dropped_ones_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "results.jsonl"
    lines = [json.dumps({"index": i}) for i in range(10)]
    lines[4] = '{"index": 4, "cut'  # damaged in the middle
    lines[7] = "[7]"  # JSON, but not a record
    log.write_text("\n".join(lines) + "\n" + '{"index": 10, "torn')
    with caplog.at_level(logging.WARNING):
        records = resume.read_run_records(log)
    assert [r["index"] for r in records] == [0, 1, 2, 3, 5, 6, 8, 9]
    assert "line 11 is incomplete" in caplog.text
    assert "lines 5, 8 cannot be read" in caplog.text
    assert "keeping the 8 readable lines" in caplog.text
    # The file continues with exactly what was kept, so the next append starts a line.
    resume.continue_records(log, records)
    assert [r["index"] for r in resume.read_run_records(log)] == [0, 1, 2, 3, 5, 6, 8, 9]


def test_only_the_text_after_the_last_newline_is_a_torn_line() -> None:
    data = b'{"a": 1}\nnot json\n[1]\n\n{"b": 2}\n{"c": 3, "cut'
    records, bad = resume.parse_jsonl(data)
    assert records == [(1, {"a": 1}), (5, {"b": 2})]
    found = [(b.number, b.kind, b.torn) for b in bad]
    assert found == [(2, "json", False), (3, "type", False), (6, "json", True)]
    assert bad[1].problem == "expected a JSON object, got list"
    # a bad last line that ends with a newline was written whole: it is not torn
    assert [b.torn for b in resume.parse_jsonl(b'{"a": 1}\n{"b"\n')[1]] == [False]


def test_a_run_folder_begins_resumes_appends_and_finishes(tmp_path: Path) -> None:
    out, settings = tmp_path / "run", {"items": 3, "seed": 0}
    folder = resume.RunFolder(out, "results.jsonl")
    assert not folder.begin(settings, resume=False) and folder.kept_records() == []
    with folder.recording([], {"settings": settings}) as log:
        log.append({"index": 0})
        log.append({"index": 1})
        assert log.last == {"index": 1}
    folder.log.write_text(folder.log.read_text() + '{"index": 2, "to')  # killed mid-write
    with pytest.raises(EmbodiaError, match="already holds a run: pass --resume"):
        resume.RunFolder(out, "results.jsonl").begin(settings, resume=False)
    with pytest.raises(EmbodiaError, match="items: 3 -> 4"):
        resume.RunFolder(out, "results.jsonl").begin({**settings, "items": 4}, resume=True)
    again = resume.RunFolder(out, "results.jsonl")
    assert again.begin(settings, resume=True) and again.finished() is None
    kept = again.kept_records()
    assert kept == [{"index": 0}, {"index": 1}]
    with again.recording(kept, {"settings": settings}) as log:
        assert log.last == {"index": 1}
        log.append({"index": 2})
    assert [r["index"] for r in again.read_records()] == [0, 1, 2]
    again.finish("summary.json", {"items": 3})
    assert again.finished() == {"items": 3}
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "results.jsonl", "summary.json"]


def test_every_runner_has_the_runner_shape() -> None:
    import inspect

    from embodia.evals.csmr import run_csmr
    from embodia.evals.dsr import run_dsr
    from embodia.evals.live_run import run_live
    from embodia.evals.sxs_run import run_sxs_eval

    for runner in (run_exploration, run_csmr, run_sxs_eval, run_live, run_dsr):
        parameters = list(inspect.signature(runner).parameters.values())
        assert [p.name for p in parameters[:2]] == ["settings", "out"], runner.__name__
        rest = {p.name: p for p in parameters[2:]}
        assert rest["resume"].kind is inspect.Parameter.KEYWORD_ONLY, runner.__name__
        # DSR runs are always continued by `embodia eval dsr` (no --resume); the others only on --resume.
        assert rest["resume"].default is (runner is run_dsr), runner.__name__
        assert all(p.default is not inspect.Parameter.empty for p in rest.values()), runner.__name__


def test_records_after_a_gap_are_dropped_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    records = [{"second": s} for s in (10, 11, 12, 14, 15)]
    with caplog.at_level(logging.WARNING):
        kept = resume.records_before_gap(records, "second", 10, tmp_path / "decisions.jsonl", "seconds")
    assert kept == records[:3]
    assert "second 13 is missing; the 2 records after it (seconds 14, 15)" in caplog.text
    assert resume.records_before_gap(records[:3], "second", 10, tmp_path, "seconds") == records[:3]


@pytest.mark.slow
def test_a_lost_step_of_a_primitive_run_is_made_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ExploreSettings(
        agent="frontier",
        scene="procedural:seed=1,rooms=2",
        steps=12,
        panorama_height=32,
        panorama_width=64,
        video=False,
    )
    run_exploration(settings, tmp_path / "whole")
    whole = (tmp_path / "whole" / "episodes.jsonl").read_text()
    shutil.copytree(tmp_path / "whole", tmp_path / "damaged")
    log = tmp_path / "damaged" / "episodes.jsonl"
    lines = whole.splitlines(keepends=True)
    log.write_text("".join(lines[:4]) + "garbage\n" + "".join(lines[5:]))
    (tmp_path / "damaged" / "summary.json").unlink()
    with caplog.at_level(logging.WARNING):
        run_exploration(settings, tmp_path / "damaged", resume=True)
    assert log.read_text() == whole
    assert "line 5 cannot be read" in caplog.text and "step 5 is missing" in caplog.text


@pytest.mark.slow
def test_a_lost_second_of_a_stream_is_decided_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from embodia.evals.live_run import LiveSettings, run_live

    settings = LiveSettings(source="procedural:arena,seed=0,duration=8", video=False)
    run_live(settings, tmp_path / "whole")
    whole = resume.read_run_records(tmp_path / "whole" / "decisions.jsonl")
    shutil.copytree(tmp_path / "whole", tmp_path / "lost")
    log = tmp_path / "lost" / "decisions.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:3] + lines[4:]))  # second 3 is gone
    with caplog.at_level(logging.WARNING):
        run_live(settings, tmp_path / "lost", resume=True)
    again = resume.read_run_records(log)
    assert [r["second"] for r in again] == list(range(8))  # 3 decided again, then the rest
    assert [(r["speaker"], r["text"]) for r in again] == [(r["speaker"], r["text"]) for r in whole]
    assert "second 3 is missing; the 4 records after it (seconds 4, 5, 6, 7)" in caplog.text


def test_an_answer_after_a_torn_line_is_kept(tmp_path: Path) -> None:
    from embodia.envs.dsr.core import DSRError
    from embodia.evals.dsr import ANSWERS_FILE, DSRSettings, run_dsr, select_instances
    from embodia.policies import ScriptedPolicy

    settings = DSRSettings(policy="scripted", lengths=("short",), limit=3, mode="none")
    answers = [json.dumps({"final_answer": i.truth}) for i in select_instances(settings)]
    run_dsr(settings, tmp_path, policy=ScriptedPolicy(answers))
    log = tmp_path / ANSWERS_FILE
    lines = log.read_text().splitlines()
    log.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:30])  # killed mid-write
    run_dsr(settings, tmp_path, policy=ScriptedPolicy(answers[2:]))
    # The new answer starts a line of its own: all three are readable, none is asked again.
    assert [r["id"] for r in resume.read_run_records(log)] == [json.loads(line)["id"] for line in lines]
    asked = ScriptedPolicy([])
    assert run_dsr(settings, tmp_path, policy=asked)["overall"]["exact"] == 1.0 and asked.calls == 0
    with pytest.raises(DSRError, match="holds a DSR run already"):
        run_dsr(settings, tmp_path, resume=False, policy=asked)


# ------------------------------------------------------------------ the dfs explorer's checkpoint


def _dfs_settings() -> ExploreSettings:
    return ExploreSettings(
        agent="dfs", scene=SCENE, steps=30, panorama_height=32, panorama_width=64, video=False
    )


class _WholeRun(NamedTuple):
    out: Path
    log: str
    """Its ``episodes.jsonl``."""
    decisions: int


@pytest.fixture(scope="module")
def whole_dfs_run(tmp_path_factory: pytest.TempPathFactory) -> _WholeRun:
    out = tmp_path_factory.mktemp("dfs") / "whole"
    summary = run_exploration(_dfs_settings(), out)
    assert summary["decisions"] >= 3
    log = (out / "episodes.jsonl").read_text()
    return _WholeRun(out, log, len(log.splitlines()))


def _interrupted_copy(whole: Path, parent: Path, name: str | None = None) -> Path:
    """The finished run as a killed one (no summary), in ``parent`` under its own name unless
    ``name`` renames it."""
    target = parent / (name or whole.name)
    shutil.copytree(whole, target)
    (target / "summary.json").unlink()
    return target


@pytest.fixture
def killed_run(whole_dfs_run: _WholeRun, tmp_path: Path) -> Path:
    """A fresh interrupted copy of the whole run, for one test to damage."""
    return _interrupted_copy(whole_dfs_run.out, tmp_path / "run")


def _resume(out: Path, caplog: pytest.LogCaptureFixture) -> tuple[dict, list[int]]:
    """Resumes the run with its warnings in ``caplog``: the summary and the decisions made again."""
    events: list[dict] = []
    with caplog.at_level(logging.WARNING):
        summary = run_exploration(_dfs_settings(), out, resume=True, on_event=events.append)
    return summary, [e["decision"] for e in events if e.get("event") == "navigate"]


@pytest.mark.slow
def test_lost_records_are_made_again_from_the_checkpoint_before_them(
    whole_dfs_run: _WholeRun, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    whole, total = whole_dfs_run.log, whole_dfs_run.decisions
    # A rewrite killed midway (before the fix) left the file empty while the checkpoint went on.
    emptied = _interrupted_copy(whole_dfs_run.out, tmp_path / "emptied")
    (emptied / "episodes.jsonl").write_text("")
    summary, made = _resume(emptied, caplog)
    assert made == list(range(1, total + 1))
    assert (emptied / "episodes.jsonl").read_text() == whole
    assert summary["decisions"] == total
    assert f"decisions 1-{total} will be made again" in caplog.text
    # A damaged middle line: decisions from it on are made again, those before it are kept.
    caplog.clear()
    damaged = _interrupted_copy(whole_dfs_run.out, tmp_path / "damaged")
    lines = whole.splitlines(keepends=True)
    (damaged / "episodes.jsonl").write_text("".join(lines[:1]) + "\x00garbage\n" + "".join(lines[2:]))
    summary, made = _resume(damaged, caplog)
    assert made == list(range(2, total + 1))
    assert (damaged / "episodes.jsonl").read_text() == whole
    assert "line 2 cannot be read" in caplog.text
    assert f"decisions 2-{total} will be made again, from the checkpoint after decision 1" in caplog.text


@pytest.mark.slow
def test_an_unreadable_checkpoint_is_kept_aside_and_the_restart_named(
    whole_dfs_run: _WholeRun, killed_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    whole, total, out = whole_dfs_run.log, whole_dfs_run.decisions, killed_run
    garbage = os.urandom(4096)
    (out / "checkpoint.sqlite").write_bytes(garbage)
    args = ["explore", "--agent", "dfs", "--scene", SCENE, "--steps", "30", "--out", str(out)]
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(app, [*args, "--height", "32", "--width", "64", "--no-video", "--resume"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert (out / "checkpoint.sqlite.corrupt").read_bytes() == garbage  # kept, never deleted
    assert (out / "episodes.jsonl.before-restart").read_text() == whole
    assert (out / "episodes.jsonl").read_text() == whole
    assert (
        f"{out / 'checkpoint.sqlite'} is unreadable (file is not a database); moved to "
        f"checkpoint.sqlite.corrupt; decisions 1-{total} recorded in episodes.jsonl will be made again"
    ) in caplog.text


@pytest.mark.slow
def test_a_missing_checkpoint_is_a_warning_naming_what_is_made_again(
    whole_dfs_run: _WholeRun, killed_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (killed_run / "checkpoint.sqlite").unlink()
    _, made = _resume(killed_run, caplog)
    total = whole_dfs_run.decisions
    assert made == list(range(1, total + 1))
    assert f"checkpoint.sqlite is missing; decisions 1-{total} recorded in episodes.jsonl" in caplog.text


@pytest.mark.slow
def test_a_moved_run_resumes_its_own_checkpoint(
    whole_dfs_run: _WholeRun, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    whole, total = whole_dfs_run.log, whole_dfs_run.decisions
    moved = _interrupted_copy(whole_dfs_run.out, tmp_path / "elsewhere", "renamed")
    summary, made = _resume(moved, caplog)
    assert made == []  # nothing made again: the checkpoint was found under the new name
    assert summary["decisions"] == total and (moved / "episodes.jsonl").read_text() == whole
    assert caplog.text == ""
    assert resume.read_config(moved)["run_id"] == resume.read_config(whole_dfs_run.out)["run_id"]
    # A run started before run ids (thread = its folder's old name) resumes its only thread.
    old = _interrupted_copy(whole_dfs_run.out, tmp_path / "old", "old-run")
    config = resume.read_config(old)
    thread = config.pop("run_id")
    (old / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    _, made = _resume(old, caplog)
    assert made == []
    assert f"resuming checkpoint thread {thread!r}" in caplog.text
    assert resume.read_config(old)["run_id"] == thread


# ------------------------------------------------------------------ --resume with other arguments


def test_resume_names_every_argument_that_differs(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "run"
    base = ["explore", "--agent", "random", "--scene", "procedural:seed=1,rooms=2", "--out", str(out)]
    small = ["--height", "32", "--width", "64", "--no-video"]
    assert runner.invoke(app, [*base, "--steps", "5", *small]).exit_code == 0
    for finished in (True, False):  # a finished run, and a killed one
        if not finished:
            (out / "summary.json").unlink()
        result = runner.invoke(app, [*base, "--steps", "6", "--seed", "2", *small, "--resume"])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: cannot resume"), result.output
        assert "steps: 5 -> 6" in lines[0] and "seed: 0 -> 2" in lines[0]
    sxs = ["eval", "sxs", "--modes", "sft_target", "--source", "maze", "--out", str(tmp_path / "sxs")]
    assert runner.invoke(app, [*sxs, "--items", "1"]).exit_code == 0
    result = runner.invoke(app, [*sxs, "--items", "2", "--seed", "3", "--resume"])
    assert result.exit_code == 2
    assert "items: 1 -> 2" in result.output and "seed: 0 -> 3" in result.output


def test_check_resumable_lists_all_differences(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"settings": {"a": 1, "b": "x", "c": True}}))
    assert resume.check_resumable(tmp_path, {"a": 1, "b": "x", "c": True}, resume=True)
    with pytest.raises(EmbodiaError) as error:
        resume.check_resumable(tmp_path, {"a": 2, "b": "y", "c": True}, resume=True)
    assert "a: 1 -> 2; b: 'x' -> 'y'" in str(error.value)


# ------------------------------------------------------------------ --out and validation


def _runner_commands(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Every command that writes under --out: its arguments (but --out), and what --out is."""
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"text": "{}"}) + "\n")
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    records = tmp_path / "records.jsonl"
    records.write_text("")
    document = tmp_path / "document.txt"
    document.write_text("A sentence to learn.\n")
    return {
        "sim render": (["sim", "render", "--scene", "procedural:seed=0"], "folder"),
        "explore": (["explore", "--agent", "random", "--steps", "3"], "folder"),
        "eval explore": (
            ["eval", "explore", "--agent", "random", "--scenes", "procedural:seeds=0-0"],
            "folder",
        ),
        "dsr generate": (["dsr", "generate", "--suite", "main"], "folder"),
        "eval dsr": (["eval", "dsr", "--policy", f"scripted:{replies}", "--limit", "1"], "folder"),
        "eval csmr": (["eval", "csmr", "--reasoner", f"scripted:{replies}", "--items", "1"], "folder"),
        "eval sxs": (["eval", "sxs", "--modes", "sft_target", "--items", "1"], "folder"),
        "eval hallucination": (["eval", "hallucination", "--model", f"hf:{model}"], "folder"),
        "stream run": (["stream", "run", "--source", "procedural:arena,seed=0,duration=5"], "folder"),
        "stream train-gate": (["stream", "train-gate", "--model", str(model)], "folder"),
        "stream export": (["stream", "export", "--source", "procedural:arena,seed=0,duration=2"], "file"),
        "models tiny": (["models", "tiny", "chat"], "folder"),
        "eval live": (["eval", "live", "--pred", str(records), "--label", str(records)], "file"),
        "sxs data": (["sxs", "data", "--items", "1"], "file"),
        "dsr import": (["dsr", "import", str(tmp_path)], "file"),
        "train sft": (["train", "sft", "--policy", f"hf:{model}", "--data", str(records)], "folder"),
        "train grpo": (["train", "grpo", "--policy", f"hf:{model}", "--env", "embodia/DSR-v0"], "folder"),
        "train sxs": (["train", "sxs", "--policy", f"hf:{model}"], "folder"),
        "train byorn": (["train", "byorn", "--policy", f"hf:{model}", "--data", str(records)], "folder"),
        "train air": (["train", "air", "--policy", f"hf:{model}", "--data", str(records)], "folder"),
        "train maa": (["train", "maa", "--encoder", str(model)], "folder"),
        "train fusion": (["train", "fusion"], "folder"),
        "train tokenizer": (["train", "tokenizer"], "folder"),
        "train reward-model": (["train", "reward-model"], "folder"),
        "eval early-exit": (["eval", "early-exit"], "folder"),
        "eval diffusion-reasoning": (["eval", "diffusion-reasoning"], "folder"),
        "eval rewards": (["eval", "rewards", "--model", str(model), "--bench", str(records)], "folder"),
        "eval scireas": (["eval", "scireas", "--policy", f"scripted:{replies}", "--items", "1"], "folder"),
        "eval scireas-pro": (
            [
                "eval",
                "scireas-pro",
                "--low",
                f"scripted:{replies}",
                "--high",
                f"scripted:{replies}",
                "--items",
                "1",
            ],
            "folder",
        ),
        "eval krux-study": (["eval", "krux-study"], "folder"),
        "eval vocal": (["eval", "vocal", "--policy", f"scripted:{replies}", "--questions", "1"], "folder"),
        "train proact": (
            ["train", "proact", "--policy", f"hf:{model}", "--stream", "procedural:arena,seed=0,duration=2"],
            "folder",
        ),
        "lift": (
            ["lift", "--doc", str(document), "--policy", f"hf:{model}", "--generator", f"scripted:{replies}"],
            "folder",
        ),
    }


def test_the_table_covers_every_command_with_an_out_option(tmp_path: Path) -> None:
    import typer.main

    group = typer.main.get_command(app)
    found = set()

    def walk(command: object, prefix: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{prefix} {name}".strip())
        if any("--out" in getattr(p, "opts", ()) for p in getattr(command, "params", ())):
            found.add(prefix)

    walk(group, "")
    assert found == set(_runner_commands(tmp_path))


@pytest.mark.parametrize("bad", ["existing file", "under a file", "read-only"])
def test_an_unusable_out_is_one_error_line_for_every_runner(tmp_path: Path, bad: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    a_folder = tmp_path / "a-folder"
    a_folder.mkdir()
    runner = CliRunner()
    for name, (args, kind) in _runner_commands(tmp_path).items():
        out = {
            "existing file": a_file if kind == "folder" else a_folder,
            "under a file": a_file / ("run" if kind == "folder" else "out.jsonl"),
            # Root ignores permission bits; /proc refuses new entries to everyone.
            "read-only": Path("/proc/embodia-out" + ("" if kind == "folder" else ".jsonl")),
        }[bad]
        result = runner.invoke(app, [*args, "--out", str(out)])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2, (name, result.output, result.exception)
        assert len(lines) == 1 and lines[0].startswith("error: --out "), (name, result.output)
        assert str(out) in lines[0], (name, lines[0])
    assert a_file.read_text() == "not a folder\n" and list(a_folder.iterdir()) == []


def test_a_run_refused_at_validation_leaves_nothing_behind(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "runs" / "first"
    small = ["--steps", "3", "--height", "32", "--width", "64", "--no-video", "--out", str(out)]
    refused = runner.invoke(
        app, ["explore", "--agent", "random", "--scene", str(tmp_path / "none.glb"), *small]
    )
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert not (tmp_path / "runs").exists()
    fixed = runner.invoke(
        app, ["explore", "--agent", "random", "--scene", "procedural:seed=1,rooms=2", *small]
    )
    assert fixed.exit_code == 0, fixed.output
    stream = tmp_path / "stream"
    stream.mkdir()  # an empty folder given as --out stays, empty
    refused = runner.invoke(
        app, ["stream", "run", "--source", "procedural:nosuchgame,seed=0", "--out", str(stream)]
    )
    assert refused.exit_code == 2 and list(stream.iterdir()) == []


def test_a_run_failing_before_its_first_record_removes_only_what_it_created(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    with pytest.raises(RuntimeError), resume.run_folder(out, "results.jsonl"):
        (out / "config.yaml").write_text("settings: {}\n")
        raise RuntimeError("the model could not be reached")
    assert not (tmp_path / "new").exists()
    given = tmp_path / "given"
    given.mkdir()
    (given / "notes.txt").write_text("mine\n")
    with pytest.raises(RuntimeError), resume.run_folder(given, "results.jsonl"):
        (given / "config.yaml").write_text("settings: {}\n")
        raise RuntimeError("the model could not be reached")
    assert sorted(p.name for p in given.iterdir()) == ["notes.txt"]
    with pytest.raises(RuntimeError), resume.run_folder(out, "results.jsonl"):
        (out / "config.yaml").write_text("settings: {}\n")
        (out / "results.jsonl").write_text('{"index": 0}\n')
        raise RuntimeError("killed after a record")
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "results.jsonl"]  # resumable


def test_a_run_saved_before_a_setting_existed_resumes_with_its_old_value(tmp_path: Path) -> None:
    from dataclasses import asdict

    settings = asdict(ExploreSettings(agent="frontier", steps=5, video=False))
    older = {k: v for k, v in settings.items() if k != "sim"}  # written before --sim existed
    resume.write_config(tmp_path, {"command": "explore", "settings": older})
    assert resume.check_resumable(tmp_path, settings, resume=True)
    with pytest.raises(EmbodiaError, match="sim: None -> 'habitat'"):
        resume.check_resumable(tmp_path, {**settings, "sim": "habitat"}, resume=True)
