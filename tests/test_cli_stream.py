"""`embodia stream run` and `embodia eval live`: files written, metrics, resume, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import pytest
from streams import annotation_record
from typer.testing import CliRunner, Result

from embodia.cli import app

runner = CliRunner()
SOURCE = "procedural:arena,seed=3,duration=40"


def _run(out: Path, *extra: str, source: str = SOURCE) -> Result:
    return runner.invoke(app, ["stream", "run", "--source", source, "--out", str(out), *extra])


def _decisions(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]


def _run_decisions(out: Path, source: str, *extra: str) -> list[dict[str, Any]]:
    """Run ``source`` into ``out``, which must succeed; the decisions it wrote."""
    result = _run(out, *extra, source=source)
    assert result.exit_code == 0, result.output
    return _decisions(out)


def test_stream_run_writes_the_reference_formats_and_media(tmp_path: Path) -> None:
    out = tmp_path / "solo"
    result = _run(out)
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert names >= {"config.yaml", "decisions.jsonl", "predictions.jsonl", "labels.jsonl", "summary.json"}
    assert names >= {"stream.mp4", "timeline.png"}
    decisions = _decisions(out)
    assert [d["second"] for d in decisions] == list(range(40))
    pred = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    label = json.loads((out / "labels.jsonl").read_text())
    assert set(pred) >= {"video_id", "begin", "end", "pred", "tag", "dataset_name", "idx"}
    assert pred["video_id"] == label["video_id"] and label["tag"] == "Solo commentators"
    assert {int(k) for k in pred["pred"]} == {d["second"] for d in decisions if d["text"]}
    assert all(len(text.split()) <= 12 for text in pred["pred"].values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seconds"] == 40 and summary["spoken_seconds"] == len(pred["pred"])
    assert summary["counting"] == "embodia" and summary["metrics"]["settings"]["drop_silent"] is True
    assert summary["latency"]["rtf"] < 1.0
    assert (out / "stream.mp4").stat().st_size > 10_000
    assert iio.imread(out / "timeline.png").ndim == 3
    # The same files through `eval live` give the same F1 as the run's own summary.
    report_path = tmp_path / "report.json"
    files = ["--pred", str(out / "predictions.jsonl"), "--label", str(out / "labels.jsonl")]
    result = runner.invoke(app, ["eval", "live", *files, "--out", str(report_path)])
    assert result.exit_code == 0, result.output
    assert json.loads(report_path.read_text())["f1"] == summary["metrics"]["f1"]


def test_killed_run_resumes_to_the_same_predictions(tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert _run(whole, "--no-video").exit_code == 0
    assert _run(cut, "--no-video").exit_code == 0
    # A kill after second 24, mid-way through writing the next record.
    lines = (cut / "decisions.jsonl").read_text().splitlines()
    (cut / "decisions.jsonl").write_text("\n".join(lines[:25]) + "\n" + lines[25][:10])
    for name in ("predictions.jsonl", "summary.json"):
        (cut / name).unlink()
    again = _run(cut, "--no-video")
    assert again.exit_code != 0 and "--resume" in again.output
    resumed = _run(cut, "--no-video", "--resume")
    assert resumed.exit_code == 0, resumed.output

    def preds(run: Path) -> list[dict[str, str]]:
        return [json.loads(line)["pred"] for line in (run / "predictions.jsonl").read_text().splitlines()]

    assert preds(cut) == preds(whole) and preds(whole)[0]
    # Replayed seconds keep the timing they were decided with.
    decisions = (cut / "decisions.jsonl").read_text().splitlines()
    assert decisions[:25] == lines[:25] and len(decisions) == 40
    changed = _run(cut, "--no-video", "--resume", "--token-cap", "5")
    assert changed.exit_code == 2 and "token_cap" in changed.output


def test_co_commentary_self_play_never_overlaps(tmp_path: Path) -> None:
    out = tmp_path / "co"
    result = _run(out, "--scenario", "co-commentary", "--agents", "2", "--no-video")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 2
    first, second = ({int(k) for k in r["pred"]} for r in records)
    assert not first & second
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["multi_agent"]["concurrent_seconds"] == 0
    assert summary["overlap_rate"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "procedural:chess,seed=1"], "chess"),
        (["--source", "procedural:arena,seed=x"], "seed"),
        (["--source", "video:missing.mp4,labels=missing.jsonl"], "missing"),
        (["--scenario", "karaoke"], "scenario"),
        (["--agents", "2"], "co-commentary"),
        (["--agent", "gate:/no/such/gate"], "gate"),
        (["--threshold", "5"], "threshold"),
        (["--fps", "2.5"], "fps"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["stream", "run", "--out", str(tmp_path / "x"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_eval_live_names_a_malformed_file(tmp_path: Path) -> None:
    pred = tmp_path / "pred.jsonl"
    pred.write_text("{not json\n")
    label = tmp_path / "label.jsonl"
    label.write_text(json.dumps({"video_id": "a", "label": {"3": "x"}}) + "\n")
    result = runner.invoke(app, ["eval", "live", "--pred", str(pred), "--label", str(label)])
    assert result.exit_code == 2 and "line 1" in result.output


@pytest.mark.slow
def test_train_a_gate_then_run_it_with_its_vlm_speaking(tmp_path: Path) -> None:
    """The whole learned path on a tiny random-weight VLM: features, training, saving,
    loading as `--agent gate:DIR`, and lines written by the same VLM under the token cap."""
    from embodia.policies.tiny_models import build_tiny_vlm

    model = build_tiny_vlm(tmp_path / "vlm")
    gate = tmp_path / "gate"
    training = ["--seeds", "0-1", "--held-out", "50", "--duration", "40", "--epochs", "60"]
    result = runner.invoke(
        app, ["stream", "train-gate", "--model", str(model), "--out", str(gate), *training]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["train_streams"] == 4 and (gate / "gate.json").exists()
    # the training curves, one line per epoch, ending at the reported loss
    epochs = [json.loads(line) for line in (gate / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in epochs] == list(range(60))
    assert epochs[-1]["loss"] == pytest.approx(report["final_loss"])
    held = report["held_out"]
    assert held["never_f1"] == 0.0 and held["gate_f1"] > held["always_f1"]
    out = tmp_path / "run"
    decisions = _run_decisions(
        out, "procedural:arena,seed=7,duration=20", "--agent", f"gate:{gate}", "--no-video"
    )
    assert len(decisions) == 20 and all(0.0 <= d["scores"]["0"] <= 1.0 for d in decisions)
    spoken = [d for d in decisions if d["text"]]
    assert all(d["scores"]["0"] > 0.3 for d in spoken)
    assert all(len(d["text"].split()) <= 12 and d["gen_ms"] > 0 for d in spoken)
    assert all(d["scores"]["0"] <= 0.3 for d in decisions if not d["text"] and d["speaker"] is None)


def test_a_users_video_with_its_annotations(tmp_path: Path) -> None:
    """A video file and annotation JSONL in the reference's format: a clip cut out of the
    video is streamed, the co-caster's lines are heard, and the files use the clip's seconds."""
    import imageio.v2 as imageio
    import numpy as np

    video = tmp_path / "final.mp4"
    writer = imageio.get_writer(video, fps=10, codec="libx264", quality=8, macro_block_size=16)
    for i in range(120):  # 12 s: dark, with a bright flash in seconds 5 and 9
        frame = np.full((64, 96, 3), 30, np.uint8)
        if i // 10 in (5, 9):
            frame[:] = 230
        writer.append_data(frame)
    writer.close()
    lines = [
        {"role": "assistant", "speaker": "SPEAKER_0", "start": 5, "end": 6, "text": "Big flash!"},
        {"role": "user", "speaker": "SPEAKER_1", "start": 7, "end": 8, "text": "Did you see that?"},
        {"role": "assistant", "speaker": "SPEAKER_0", "start": 9, "end": 10, "text": "Another one."},
    ]
    metadata = {"tag": "Multiple commentators", "dataset_name": "users-own"}
    record = annotation_record("/data/videos/final.mp4", 2, 12, 12, lines, metadata)
    labels = tmp_path / "final.jsonl"
    labels.write_text(json.dumps(record) + "\n")
    out = tmp_path / "run"
    decisions = _run_decisions(out, f"video:{video},labels={labels}", "--scenario", "co-commentary")
    assert [d["second"] for d in decisions] == list(range(2, 12))
    label = json.loads((out / "labels.jsonl").read_text())
    assert label["label"] == {"5": "Big flash!", "9": "Another one."} and label["other"] == {
        "7": "Did you see that?"
    }
    pred = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["speaker"] == "SPEAKER_0" and pred["begin"] == 2 and pred["end"] == 12
    assert "9" in pred["pred"]  # the second flash stands out against the frames before it
    assert (out / "stream.mp4").stat().st_size > 0


@pytest.mark.slow
def test_a_chat_vlm_decides_or_speaks(tmp_path: Path) -> None:
    """`--agent hf:DIR` asks the tiny VLM SPEAK or SILENT every second; `--speaker hf:DIR`
    has it write the lines the heuristic decides to say."""
    from embodia.policies.tiny_models import build_tiny_vlm

    model = build_tiny_vlm(tmp_path / "vlm")
    out = tmp_path / "prompted"
    decisions = _run_decisions(
        out, "procedural:dungeon,seed=2,duration=8", "--agent", f"hf:{model}", "--no-video"
    )
    assert len(decisions) == 8 and all(
        0.0 <= d["scores"]["0"] <= 1.0 and d["decide_ms"] > 0 for d in decisions
    )
    # A random-weight model answers neither SPEAK nor SILENT: every such reply is counted.
    summary = json.loads((out / "summary.json").read_text())
    unreadable = summary["deciders"][0]["unreadable"]
    assert unreadable == sum(1 for d in decisions if d["scores"]["0"] == 0.0) and unreadable >= 1

    out = tmp_path / "spoken"
    decisions = _run_decisions(
        out, "procedural:arena,seed=3,duration=20", "--speaker", f"hf:{model}", "--no-video"
    )
    spoken = [d for d in decisions if d["speaker"]]
    assert spoken and all(d["gen_ms"] > 0 and len(d["text"].split()) <= 12 for d in spoken)


def test_a_tool_calling_vlm_runs_the_stream_and_each_call_is_recorded(tmp_path: Path) -> None:
    """`--agent tools:SPEC`: one forced call a second (speak or stay_silent), written to the
    decisions with its result or error, bad ones counted in the summary."""
    replies = tmp_path / "replies.jsonl"
    calls = [{"name": "speak", "arguments": {"text": "Nice move."}}, {"name": "stay_silent", "arguments": {}}]
    replies.write_text(
        "".join(json.dumps({"text": f"<tool_call>{json.dumps(c)}</tool_call>"}) + "\n" for c in calls)
    )
    out = tmp_path / "tools"
    decisions = _run_decisions(
        out,
        "procedural:dungeon,seed=2,duration=6",
        "--agent",
        f"tools:scripted:{replies}?loop=true",
        "--no-video",
    )
    assert [d["text"] for d in decisions] == ["Nice move.", ""] * 3
    assert [d["calls"]["0"][0]["name"] for d in decisions] == ["speak", "stay_silent"] * 3
    assert decisions[0]["calls"]["0"][0]["result"] == {"said": "Nice move."}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["deciders"][0]["decider"].startswith("tools:scripted:")
    assert summary["deciders"][0]["unreadable"] == 0


def test_an_out_that_is_a_file_or_a_broken_run_is_named(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    result = _run(taken, "--no-video")
    assert result.exit_code == 2 and "is a file" in result.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.yaml").write_text("- just\n- a list\n")
    result = _run(broken, "--no-video", "--resume")
    assert result.exit_code == 2 and "no settings" in result.output


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 12-s dungeon clip written by `stream export`: the example video and its labels."""
    out = tmp_path_factory.mktemp("export") / "examples" / "dungeon.mp4"
    result = runner.invoke(
        app, ["stream", "export", "--source", "procedural:dungeon,seed=1,duration=12", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert f"video:{out},labels={out.with_suffix('.jsonl')}" in result.output.replace("\n", "")
    return out, out.with_suffix(".jsonl")


def test_an_exported_clip_runs_as_a_video_like_the_game_it_came_from(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    video, labels = exported
    runs = {}
    for name, source in (
        ("video", f"video:{video},labels={labels}"),
        ("game", "procedural:dungeon,seed=1,duration=12"),
    ):
        result = runner.invoke(
            app, ["stream", "run", "--source", source, "--no-video", "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 0, result.output
        runs[name] = tmp_path / name
    video_labels, game_labels = (
        json.loads((runs[n] / "labels.jsonl").read_text()) for n in ("video", "game")
    )
    assert video_labels["label"] == game_labels["label"] and video_labels["label"]
    assert video_labels["video_id"] == "dungeon:0-12"


def _one_error_line(result: object) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert result.exit_code == 2 and len(lines) == 1, result.stderr  # type: ignore[attr-defined]
    assert lines[0].startswith("error: ") and "Traceback" not in result.output  # type: ignore[attr-defined]
    return lines[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "tag",
            "co-commentary",
            "line 1: unknown metadata.tag 'co-commentary' (did you mean 'Multiple commentators'?); the tag "
            "must be one of the exact strings 'Solo commentators' (--scenario solo), 'Multiple commentators' "
            "(--scenario co-commentary), 'Guidance' (--scenario guidance)",
        ),
        ("active_speaker", "CASTER", "line 1: active_speaker must be an object like"),
        ("video_end", None, "line 1: missing field 'video_end'"),
    ],
)
def test_a_users_annotation_mistake_is_one_error_line(
    exported: tuple[Path, Path], tmp_path: Path, field: str, value: object, message: str
) -> None:
    video, labels = exported
    record = json.loads(labels.read_text())
    if field == "tag":
        record["metadata"]["tag"] = value
    elif value is None:
        del record[field]
    else:
        record[field] = value
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps(record) + "\n")
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        ["stream", "run", "--source", f"video:{video},labels={mine}", "--scenario", "co-commentary"]
        + ["--out", str(out)],
    )
    assert message in _one_error_line(result)
    assert "pass --scenario solo" not in result.output and not out.exists()


def _table_rows(output: str) -> dict[str, str]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 4:  # "│ metric │ value │"
            rows[cells[1]] = cells[2]
    return rows


def test_eval_live_prints_a_table_and_writes_the_report_beside_the_predictions(tmp_path: Path) -> None:
    from embodia.evals import live

    out = tmp_path / "guide"
    result = _run(out, "--scenario", "guidance", "--no-video")
    assert result.exit_code == 0, result.output
    pred, label = out / "predictions.jsonl", out / "labels.jsonl"
    args = ["eval", "live", "--pred", str(pred), "--label", str(label), "--baseline", str(pred)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) < 25  # a table, not the 400-line report
    expected = live.evaluate_files(
        pred, label, live.LexicalJudge(), baseline_path=pred, pairwise_judge=live.LexicalPairwiseJudge()
    )
    written = out / "live_report.json"
    assert json.loads(written.read_text()) == json.loads(json.dumps(expected, default=float))
    assert f"wrote the full report to {written}" in result.stdout.replace("\n", "")
    f1, guide = expected["f1"]["overall"], expected["guidance"]["overall"]
    rates = expected["speaking_rate"]["overall"]
    assert _table_rows(result.stdout) == {
        "counting": "embodia, fillers dropped",
        "k, alpha, start score": "2, 0.2, 0",
        "clips evaluated (of labelled)": "1 of 1",
        "F1, macro (mean over clips)": f"{100 * f1['macro']['f1']:.1f}%",
        "F1, micro (pooled seconds)": f"{100 * f1['micro']['f1']:.1f}%",
        "TimeDiff, mean (s)": f"{expected['timediff']['overall']['mean']:.2f}",
        "speaking rate": f"{100 * rates['pooled_pred_rate']:.1f}%",
        "speaking rate of the labels": f"{100 * rates['pooled_label_rate']:.1f}%",
        **{
            f"PAUC, ω = {omega}": f"{auc:.3f}"
            for omega, auc in expected["pauc"]["overall"]["mean_auc"].items()
        },
        "win rate against the baseline": f"{expected['win_rate']['overall']['win_rate']:.1f}%",
        "queries answered within 5 s": f"{100 * guide['answer_rate']:.1f}%",
        "real-time factor": f"{expected['rtf']['rtf']:.3f}",
    }
    # An earlier report is not replaced unless named; --out names where it goes.
    before = written.read_text()
    again = runner.invoke(app, args + ["--judge", "none"])
    assert f"{written} holds an earlier report: pass --out {written} to replace it" in _one_error_line(again)
    assert written.read_text() == before
    again = runner.invoke(app, args[:-2] + ["--judge", "none", "--out", str(written)])
    assert again.exit_code == 0, again.output
    assert json.loads(written.read_text())["pauc"] is None
    assert "PAUC" not in again.stdout and "win rate" not in again.stdout
    # --json prints the whole report alone on stdout (for pipes), as the file holds it.
    elsewhere = tmp_path / "reports" / "guide.json"
    as_json = runner.invoke(app, args + ["--json", "--out", str(elsewhere)])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == json.loads(elsewhere.read_text()) == json.loads(before)
