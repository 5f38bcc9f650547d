"""Recorded exploration runs: files, resume after a kill, evaluation over scene sets, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.errors import EmbodiaError
from embodia.evals.explore import ExploreSettings, evaluate_exploration, run_exploration, scene_set

SCENE = "procedural:seed=1,rooms=2"


def _settings(**overrides: object) -> ExploreSettings:
    base = dict(agent="frontier", scene=SCENE, steps=40, panorama_height=32, panorama_width=64, video=False)
    base.update(overrides)
    return ExploreSettings(**base)  # type: ignore[arg-type]


def test_run_writes_every_file_and_a_step_log(tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = run_exploration(_settings(video=True), out)
    for name in ("config.yaml", "episodes.jsonl", "summary.json", "bev.png", "coverage.png", "episode.mp4"):
        assert (out / name).stat().st_size > 0, name
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 41))
    assert summary["steps"] == 40
    assert summary["coverage_ratio"] == pytest.approx(records[-1]["coverage_ratio"])
    assert sum(r["reward"] for r in records) <= summary["coverage_m2"] + 1e-3


def test_a_killed_run_resumes_to_the_same_result(tmp_path: Path) -> None:
    whole = run_exploration(_settings(), tmp_path / "whole")
    killed = tmp_path / "killed"
    run_exploration(_settings(), killed)
    lines = (killed / "episodes.jsonl").read_text().splitlines()
    # Simulate a kill at step 17, mid-write of step 18.
    (killed / "episodes.jsonl").write_text("\n".join(lines[:17]) + "\n" + lines[17][:25])
    (killed / "summary.json").unlink()
    with pytest.raises(EmbodiaError, match="--resume"):
        run_exploration(_settings(), killed)
    resumed = run_exploration(_settings(), killed, resume=True)
    assert (killed / "episodes.jsonl").read_text() == (tmp_path / "whole" / "episodes.jsonl").read_text()
    for key in ("coverage_m2", "coverage_ratio", "coverage_auc", "path_length", "collisions", "steps"):
        assert resumed[key] == whole[key]


def test_resume_refuses_different_settings(tmp_path: Path) -> None:
    run_exploration(_settings(steps=5), tmp_path)
    (tmp_path / "summary.json").unlink()
    with pytest.raises(EmbodiaError, match="steps: 5 -> 6"):
        run_exploration(_settings(steps=6), tmp_path, resume=True)


def test_scene_sets_expand_seed_ranges() -> None:
    assert scene_set("procedural:seeds=3-5,rooms=2") == [
        "procedural:seed=3,rooms=2",
        "procedural:seed=4,rooms=2",
        "procedural:seed=5,rooms=2",
    ]
    assert scene_set("house.glb") == ["house.glb"]
    with pytest.raises(EmbodiaError, match="empty"):
        scene_set("procedural:seeds=5-3")
    with pytest.raises(EmbodiaError, match="invalid scene set"):
        scene_set("procedural:seeds=a-b")


def test_evaluation_aggregates_and_reuses_finished_scenes(tmp_path: Path) -> None:
    scenes = scene_set("procedural:seeds=0-1,rooms=2")
    result = evaluate_exploration("random", scenes, tmp_path, steps=10, panorama_height=32, panorama_width=64)
    ratio = result["measures"]["coverage_ratio"]
    assert ratio["n"] == 2 and 0.0 < ratio["mean"] <= 1.0
    first = sorted(tmp_path.glob("000-*"))[0] / "summary.json"
    stamp = first.stat().st_mtime_ns
    again = evaluate_exploration("random", scenes, tmp_path, steps=10, panorama_height=32, panorama_width=64)
    assert again["measures"] == result["measures"]
    assert first.stat().st_mtime_ns == stamp  # not rerun


def test_cli_explore_and_eval(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "cli"
    args = ["explore", "--agent", "frontier", "--scene", SCENE, "--steps", "15", "--out", str(out)]
    result = runner.invoke(app, [*args, "--height", "32", "--width", "64", "--no-video"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["steps"] == 15
    again = runner.invoke(app, [*args, "--no-video"])
    assert again.exit_code == 2 and "--resume" in again.output
    bad = runner.invoke(app, ["explore", "--agent", "greedy", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown agent" in bad.output and "Traceback" not in bad.output
    ev = runner.invoke(
        app,
        [
            "eval",
            "explore",
            "--agent",
            "random",
            "--scenes",
            "procedural:seeds=0-1,rooms=2",
            "--steps",
            "5",
            "--out",
            str(tmp_path / "ev"),
            "--height",
            "32",
            "--width",
            "64",
        ],
    )
    assert ev.exit_code == 0, ev.output
    assert "coverage_ratio" in ev.output and "+-" in ev.output
    bad_set = runner.invoke(app, ["eval", "explore", "--agent", "random", "--scenes", "procedural:seeds=9-1"])
    assert bad_set.exit_code == 2
    # a scene file that does not load: the others are evaluated and shown, then one error line
    broken = tmp_path / "broken.obj"
    broken.write_text("v not a number\n")
    args = ["eval", "explore", "--agent", "random", "--steps", "5", "--height", "32", "--width", "64"]
    scenes = ["--scenes", "procedural:seed=0,rooms=2", "--scenes", str(broken)]
    failed = runner.invoke(app, [*args, *scenes, "--out", str(tmp_path / "failed")])
    assert failed.exit_code == 2 and "coverage_ratio" in failed.output and "Traceback" not in failed.output
    assert f"1 of 2 scenes failed and are left out of the means (first: {broken}:" in " ".join(
        failed.output.split()
    )
    summary = json.loads((tmp_path / "failed" / "summary.json").read_text())
    assert summary["measures"]["coverage_ratio"]["n"] == 1 and summary["failures"][0]["scene"] == str(broken)


def test_waypoint_run_records_candidates_and_resumes(tmp_path: Path) -> None:
    settings = _settings(env="waypoint", steps=60)
    whole = run_exploration(settings, tmp_path / "whole")
    records = [json.loads(line) for line in (tmp_path / "whole" / "episodes.jsonl").read_text().splitlines()]
    assert all("candidate" in r and "action" not in r for r in records)
    assert records[-1]["steps"] == whole["steps"] <= 60
    killed = tmp_path / "killed"
    run_exploration(settings, killed)
    lines = (killed / "episodes.jsonl").read_text().splitlines()
    (killed / "episodes.jsonl").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    (killed / "summary.json").unlink()
    resumed = run_exploration(settings, killed, resume=True)
    assert resumed["coverage_auc"] == whole["coverage_auc"]
    with pytest.raises(EmbodiaError, match="unknown env"):
        _settings(env="continuous")
    with pytest.raises(EmbodiaError, match="unknown tool choice 'none': expected required or auto"):
        _settings(tool_choice="none")


def test_cli_explore_shows_the_vlm_decisions(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"text": '{"tool": "goto_waypoint", "arguments": {"index": 1}}'}) + "\n")
    out = tmp_path / "vlm"
    result = CliRunner().invoke(
        app,
        [
            "explore",
            "--agent",
            "dfs",
            "--policy",
            f"scripted:{replies}?loop=true",
            "--scene",
            SCENE,
            "--steps",
            "30",
            "--out",
            str(out),
            "--height",
            "32",
            "--width",
            "64",
            "--no-video",
        ],
    )
    assert result.exit_code == 0, result.output
    vlm = json.loads((out / "summary.json").read_text())["vlm"]
    assert vlm["decisions"] >= 1 and vlm["tool_errors"] == 0
    assert 'decision 1: waypoint 1 <- goto_waypoint({"index": 1})' in result.output
    assert f"vlm: {vlm['decisions']} decisions (0 fell back)" in result.output
