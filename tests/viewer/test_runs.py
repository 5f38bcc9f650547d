"""Run discovery and view models, read from what the commands wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodia.viewer.runs import RunError, discover, find, view_of


def test_every_run_is_found_with_its_kind_and_summary(runs_root: Path) -> None:
    runs = {r.id: r for r in discover(runs_root)}
    assert {k: r.kind for k, r in runs.items()} == {
        "broken": "explore",
        "gate": "training",
        "garbled-summary": "explore",
        "house/frontier": "explore",
        "house/long": "explore",
        "house/short": "explore",
        "house/vlm": "explore",
        "stream": "stream",
        "sxs": "sxs",
    }
    long = runs["house/long"]
    summary = json.loads((runs_root / "house" / "long" / "summary.json").read_text())
    assert long.error is None and long.summary["coverage_ratio"] == summary["coverage_ratio"]
    assert runs["gate"].summary["steps"] == 15
    assert runs["broken"].error == "episodes.jsonl line 2 is not valid JSON (Expecting value)"
    assert (
        runs["garbled-summary"].error is not None
        and "summary.json is not valid JSON" in runs["garbled-summary"].error
    )


def test_the_exploration_view_follows_the_records_and_the_video(runs_root: Path) -> None:
    view = view_of(find(runs_root, "house/long"))
    records = [
        json.loads(x) for x in (runs_root / "house" / "long" / "episodes.jsonl").read_text().splitlines()
    ]
    assert [s["decision"] for s in view["steps"]] == [r["decision"] for r in records]
    assert [s["choice"] for s in view["steps"]] == [r["choice"] for r in records]
    # one video frame per decision plus the start, at the writer's 10 frames a second
    assert view["video"]["fps"] == 10 and view["video"]["frames"] == len(records) + 1
    assert view["panorama"] == {"height": 64, "width": 128}
    assert {n["id"] for n in view["tree"]["nodes"]} >= {"root", "waypoint-1"}


def test_a_primitive_exploration_counts_steps_not_decisions(runs_root: Path) -> None:
    view = view_of(find(runs_root, "house/frontier"))
    assert view["unit"] == "step" and len(view["steps"]) == 30 and view["tree"] is None
    assert view["steps"][0]["action"] == "move_forward"
    assert view_of(find(runs_root, "house/long"))["unit"] == "decision"


def test_stream_and_training_views(runs_root: Path) -> None:
    stream = view_of(find(runs_root, "stream"))
    predictions = json.loads((runs_root / "stream" / "predictions.jsonl").read_text().splitlines()[0])
    assert stream["seconds"] == 12 and stream["clips"][0]["pred"] == predictions["pred"]
    assert stream["video"]["file"] == "stream.mp4"
    training = view_of(find(runs_root, "gate"))
    assert training["x"] == "epoch" and set(training["curves"]) == {"loss", "point", "smooth", "rate"}
    assert [x for x, _ in training["curves"]["loss"]] == list(range(15))


def test_malformed_and_missing_runs_name_the_problem(runs_root: Path) -> None:
    with pytest.raises(RunError, match="episodes.jsonl line 2 is not valid JSON"):
        view_of(find(runs_root, "broken"))
    with pytest.raises(RunError, match="no run 'nowhere'"):
        find(runs_root, "nowhere")


def test_a_torn_last_line_is_a_run_still_going(tmp_path: Path) -> None:
    run = tmp_path / "live"
    run.mkdir()
    (run / "episodes.jsonl").write_text(
        '{"decision": 1, "choice": {}, "coverage_ratio": 0.2, "steps": 9}\n{"deci'
    )
    (listed,) = discover(tmp_path)
    assert listed.error is None and listed.summary == {
        "decisions": 1,
        "coverage_ratio": 0.2,
        "steps": 9,
        "finished": False,
    }


def test_links_out_of_the_runs_folder_are_not_followed(tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "elsewhere").symlink_to(runs_root / "house")
    assert discover(tmp_path / "mine") == []
