"""Run discovery and view models, read from what the commands wrote."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from embodia.viewer.runs import NoSuchRun, RunError, discover, find, view_of


def test_every_run_is_found_with_its_kind_and_summary(runs_root: Path) -> None:
    runs = {r.id: r for r in discover(runs_root)}
    assert {k: r.kind for k, r in runs.items()} == {
        "broken": "explore",
        "dsr": "dsr",
        "duo": "stream",
        "gate": "training",
        "garbled-summary": "explore",
        "house/frontier": "explore",
        "house/going": "explore",
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


def test_a_dsr_evaluation_is_listed_with_its_scores_and_shown_answer_by_answer(
    runs_root: Path, tmp_path: Path
) -> None:
    run = find(runs_root, "dsr")
    report = json.loads((runs_root / "dsr" / "report.json").read_text())
    assert run.error is None and run.summary["suite"] == "main" and run.summary["mode"] == "none"
    assert run.summary["n"] == 2 == report["overall"]["n"]
    assert run.summary["exact"] == report["overall"]["exact"]
    view = view_of(run)
    answers = [json.loads(x) for x in (runs_root / "dsr" / "answers.jsonl").read_text().splitlines()]
    assert [r["id"] for r in view["rows"]] == [a["id"] for a in answers]
    assert [r["exact"] for r in view["rows"]] == [a["exact"] for a in answers]
    assert "reply" not in view["rows"][0] and view["images"] == ["report.png"]
    assert view["config"]["suite"] == "main"
    # killed before its report: the list still shows what the answers say so far
    going = tmp_path / "runs" / "dsr-going"
    going.mkdir(parents=True)
    for name in ("run.json", "answers.jsonl"):
        (going / name).write_text((runs_root / "dsr" / name).read_text())
    partial = find(tmp_path / "runs", "dsr-going")
    expected = sum(a["exact"] for a in answers) / len(answers)
    assert partial.summary["finished"] is False and partial.summary["n"] == 2
    assert partial.summary["exact"] == round(expected, 4)


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
    speaker = json.loads((runs_root / "stream" / "labels.jsonl").read_text())["speaker"]
    assert stream["time_unit"] == "second" and [lane["speaker"] for lane in stream["lanes"]] == [speaker]
    assert stream["lanes"][0]["pred"] == predictions["pred"]
    training = view_of(find(runs_root, "gate"))
    assert training["x"] == "epoch" and set(training["curves"]) == {"loss", "point", "smooth", "rate"}
    assert [x for x, _ in training["curves"]["loss"]] == list(range(15))


def test_a_co_commentary_run_has_one_lane_per_speaker(runs_root: Path) -> None:
    view = view_of(find(runs_root, "duo"))
    preds = [json.loads(x) for x in (runs_root / "duo" / "predictions.jsonl").read_text().splitlines()]
    label = json.loads((runs_root / "duo" / "labels.jsonl").read_text())
    assert [p["speaker"] for p in preds] == ["CASTER", "SPEAKER_1"] and label["speaker"] == "CASTER"
    assert view["lanes"] == [
        {"speaker": "CASTER", "pred": preds[0]["pred"], "label": label["label"]},
        {"speaker": "SPEAKER_1", "pred": preds[1]["pred"], "label": label["other_speakers"]["SPEAKER_1"]},
    ]
    assert label["other_speakers"]["SPEAKER_1"] == label["other"]  # the only co-caster


def test_lanes_of_runs_written_before_speakers_were_named(tmp_path: Path) -> None:
    run = tmp_path / "old"
    run.mkdir()
    clip = {"video_id": "v", "begin": 0, "end": 4}
    (run / "predictions.jsonl").write_text(
        json.dumps({**clip, "pred": {"1": "a"}}) + "\n" + json.dumps({**clip, "pred": {"2": "b"}}) + "\n"
    )
    (run / "labels.jsonl").write_text(json.dumps({**clip, "label": {"1": "x"}, "other": {"3": "y"}}) + "\n")
    assert view_of(find(tmp_path, "old"))["lanes"] == [
        {"speaker": "agent", "pred": {"1": "a"}, "label": {"1": "x"}},
        {"speaker": "co-casters", "pred": None, "label": {"3": "y"}},
        {"speaker": "agent 2", "pred": {"2": "b"}, "label": None},
    ]


def test_every_run_says_what_its_slider_steps_through(runs_root: Path) -> None:
    units = {r.id: r.listing()["time_unit"] for r in discover(runs_root)}
    assert units["house/long"] == units["house/frontier"] == "step"
    assert units["stream"] == units["duo"] == "second"
    assert units["gate"] is None and units["dsr"] is None


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
    # a line that ends with a newline was written whole: unreadable, it is a broken run
    (run / "episodes.jsonl").write_text('{"decision": 1, "choice": {}}\n{"deci\n')
    (listed,) = discover(tmp_path)
    assert listed.error == "episodes.jsonl line 2 is not valid JSON (Unterminated string starting at)"


def test_links_out_of_the_runs_folder_are_not_followed(tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "elsewhere").symlink_to(runs_root / "house")
    assert discover(tmp_path / "mine") == []


BAD_FILES = [
    ("stream-summary", {"predictions.jsonl": '{"video_id": "v", "pred": {}}\n', "labels.jsonl": "{}\n",
                        "summary.json": '"source"'}, "summary.json is not a JSON object"),
    ("csmr-report", {"results.jsonl": "{}\n", "report.json": "[1, 2]"}, "report.json is not a JSON object"),
    ("explore-attempts", {"episodes.jsonl": '{"choice": {}, "attempts": "many"}\n'},
     "line 1: attempts is not a list"),
    ("explore-choice", {"episodes.jsonl": '{"choice": 5}\n'}, "line 1: choice is not a JSON object"),
    ("explore-tree", {"episodes.jsonl": '{"choice": {}}\n', "tree.json": '{"nodes": [], "edges": {"a": 1}}'},
     "tree.json edges is not a list"),
    ("explore-settings", {"episodes.jsonl": '{"choice": {}}\n', "config.yaml": "settings: [1, 2]\n"},
     "config.yaml: settings is not a mapping"),
    ("explore-deep", {"episodes.jsonl": "[" * 100_000 + "]" * 100_000 + "\n{}\n"}, "nested too deeply"),
    ("stream-end", {"predictions.jsonl": '{"video_id": "v", "end": null}\n', "labels.jsonl": "{}\n"},
     "begin and end must be whole seconds"),
]  # fmt: skip


def test_valid_json_of_the_wrong_shape_is_named_and_never_takes_the_list_down(tmp_path: Path) -> None:
    for name, files, _ in BAD_FILES:
        (tmp_path / name).mkdir()
        for file, text in files.items():
            (tmp_path / name / file).write_text(text)
    (tmp_path / "explore-binary").mkdir()
    (tmp_path / "explore-binary" / "episodes.jsonl").write_text('{"choice": {}}\n')
    (tmp_path / "explore-binary" / "config.yaml").write_bytes(b"\xff\xfe\x00settings")
    listed = {r.id: r for r in discover(tmp_path)}
    assert len(listed) == len(BAD_FILES) + 1
    for name, _, message in BAD_FILES:
        problem = listed[name].error
        if problem is None:  # found only when the page asks for the run's views
            with pytest.raises(RunError) as raised:
                view_of(find(tmp_path, name))
            problem = str(raised.value)
        assert message in problem, (name, problem)
    with pytest.raises(RunError, match="config.yaml is not text"):
        view_of(find(tmp_path, "explore-binary"))


def test_files_linked_from_outside_the_runs_folder_are_never_read(
    run_beside_a_secret: tuple[Path, Path],
) -> None:
    run, secret = run_beside_a_secret
    (run / "tree.json").symlink_to(secret)
    with pytest.raises(RunError, match="tree.json links outside the runs folder"):
        view_of(find(run.parent, "run"))
    (run / "tree.json").unlink()
    (run / "summary.json").symlink_to(secret)
    (listed,) = discover(run.parent)
    assert listed.error == "summary.json links outside the runs folder"


def test_ids_name_only_folders_the_list_would_show(runs_root: Path) -> None:
    for bad in ("../runs0", "house/../house/long", "/etc", "house//long", ".hidden", "house/long/../../gate"):
        with pytest.raises(RunError, match="no run"):
            find(runs_root, bad)


def test_an_unfinished_video_leaves_the_rest_of_the_run_readable(runs_root: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(runs_root / "house" / "long", copy / "going")
    video = copy / "going" / "episode.mp4"
    video.write_bytes(video.read_bytes()[:2000])  # still being written: no index at the end yet
    view = view_of(find(copy, "going"))
    assert view["video"] is None and "episode.mp4 cannot be played yet" in view["video_error"]
    assert len(view["steps"]) > 0 and view["tree"] is not None


def test_long_training_curves_are_thinned_to_what_a_chart_can_show(tmp_path: Path) -> None:
    from embodia.viewer.runs import MAX_POINTS

    run = tmp_path / "long"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "loss": 1 / (i + 1)}) + "\n" for i in range(9000))
    )
    curve = view_of(find(tmp_path, "long"))["curves"]["loss"]
    assert len(curve) == MAX_POINTS and curve[0] == [0, 1.0] and curve[-1] == [8999, 1 / 9000]
    assert [x for x, _ in curve] == sorted(x for x, _ in curve)


EXPLORE = '{"decision": 1, "choice": {}, "coverage_ratio": 0.5, "steps": 3}\n'
SUMMARY = '{"decisions": 1, "coverage_ratio": 0.5}'


def special_runs(root: Path, make_fifo: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs with something other than a regular file where a run file belongs."""
    for name in ("fifo", "linked-fifo", "folder", "socket", "device", "summary-fifo", "config-fifo",
                 "tree-fifo", "video-fifo", "decisions-fifo", "fine"):  # fmt: skip
        (root / name).mkdir(parents=True)
    make_fifo(root / "fifo" / "episodes.jsonl")
    make_fifo(root / "linked-fifo" / "records.fifo")  # inside the run: the link itself is allowed
    (root / "linked-fifo" / "episodes.jsonl").symlink_to("records.fifo")
    (root / "folder" / "episodes.jsonl").mkdir()
    monkeypatch.chdir(root / "socket")  # a relative name: a socket's path is limited to 108 bytes
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("episodes.jsonl")
    listener.close()  # the socket file stays behind, as a crashed server's would
    (root / "device" / "episodes.jsonl").symlink_to("/dev/zero")
    for name in ("summary-fifo", "config-fifo", "tree-fifo", "video-fifo", "fine"):
        (root / name / "episodes.jsonl").write_text(EXPLORE)
    for name in ("tree-fifo", "video-fifo", "fine"):
        (root / name / "summary.json").write_text(SUMMARY)
    make_fifo(root / "summary-fifo" / "summary.json")
    make_fifo(root / "config-fifo" / "config.yaml")
    make_fifo(root / "tree-fifo" / "tree.json")
    make_fifo(root / "video-fifo" / "episode.mp4")
    (root / "decisions-fifo" / "predictions.jsonl").write_text('{"video_id": "v", "begin": 0, "end": 2}\n')
    (root / "decisions-fifo" / "labels.jsonl").write_text('{"video_id": "v"}\n')
    make_fifo(root / "decisions-fifo" / "decisions.jsonl")


LISTING_ERRORS = {
    "fifo": "episodes.jsonl is a FIFO (named pipe), not a regular file",
    "linked-fifo": "episodes.jsonl is a FIFO (named pipe), not a regular file",
    "folder": "episodes.jsonl is a folder, not a regular file",
    "socket": "episodes.jsonl is a socket, not a regular file",
    "device": "episodes.jsonl links outside the runs folder",
    "summary-fifo": "summary.json is a FIFO (named pipe), not a regular file",
    "config-fifo": "config.yaml is a FIFO (named pipe), not a regular file",
}
VIEW_ERRORS = {
    "tree-fifo": "tree.json is a FIFO (named pipe), not a regular file",
    "decisions-fifo": "decisions.jsonl is a FIFO (named pipe), not a regular file",
}


def test_a_fifo_socket_device_or_folder_as_a_run_file_is_an_error_on_that_run_never_a_hang(
    tmp_path: Path, make_fifo: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch, within: Any
) -> None:
    special_runs(tmp_path, make_fifo, monkeypatch)
    listed = {r.id: r for r in within(10, lambda: discover(tmp_path))}
    assert {name: listed[name].error for name in LISTING_ERRORS} == LISTING_ERRORS
    assert all(listed[name].error is None for name in (*VIEW_ERRORS, "video-fifo", "fine"))
    for name, message in {**LISTING_ERRORS, **VIEW_ERRORS}.items():
        with pytest.raises(RunError) as raised:
            within(10, lambda name=name: view_of(find(tmp_path, name)))
        assert str(raised.value) == message
    view = within(10, lambda: view_of(find(tmp_path, "video-fifo")))
    assert (
        view["video"] is None
        and view["video_error"] == "episode.mp4 is a FIFO (named pipe), not a regular file"
    )
    assert (
        len(view["steps"]) == 1
        and within(10, lambda: view_of(find(tmp_path, "fine")))["steps"] == view["steps"]
    )


def test_a_run_file_over_the_size_limit_is_an_error_not_an_unbounded_read(tmp_path: Path) -> None:
    from embodia.viewer.runs import MAX_FILE_BYTES

    (tmp_path / "huge").mkdir()
    with (tmp_path / "huge" / "metrics.jsonl").open("wb") as sparse:  # no disk used: a hole
        sparse.truncate(MAX_FILE_BYTES + 1)
    (listed,) = discover(tmp_path)
    assert (
        listed.error
        == f"metrics.jsonl holds more than the {MAX_FILE_BYTES >> 20} MiB the viewer reads of a file"
    )
    with pytest.raises(RunError, match="metrics.jsonl holds more than"):
        view_of(find(tmp_path, "huge"))


def test_ids_no_folder_can_have_name_no_run_and_raise_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 0}\n')
    for bad in ("x" * 60_000, "run/" + "y" * 256, "é" * 200, "run\x00", "\x00", "%zz", "\ufffd", "a/b/c/d/e"):
        with pytest.raises(NoSuchRun, match="no run"):
            find(tmp_path, bad)
    assert find(tmp_path, "run").kind == "training"
