"""`eval live` clip by clip: per-clip rows that sum up to the one-go report, a records file
written as clips are scored, resume after a kill, and the same report on Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from embodia.evals.live import (
    ClipOptions,
    LexicalJudge,
    LexicalPairwiseJudge,
    LiveEvalError,
    evaluate,
    evaluate_files,
    plan_clips,
    read_clips,
    report_from_rows,
    score_clip,
    win_rate,
)

SOLO, MULTI, GUIDE = "Solo commentators", "Multiple commentators", "Guidance"


def secs(*seconds: int, text: str = "x") -> dict[str, str]:
    return {str(t): text for t in seconds}


def rec(video: str, begin: int, end: int, tag: str, dataset: str, idx: Any, **rest: Any) -> dict[str, Any]:
    return {
        "video_id": video,
        "begin": begin,
        "end": end,
        "tag": tag,
        "dataset_name": dataset,
        "idx": idx,
        **rest,
    }


LABELS = [
    rec("g1", 100, 130, SOLO, "lol", 0,
        label={"110": "the red team takes the tower", "111": "what a play", "115": "gg"}),
    rec("g2", 0, 20, MULTI, "lol", 1, label={"5": "nice fight", "6": "yes"}, other=secs(2, 3, 4, 10)),
    rec("g3", 0, 30, GUIDE, "mc", 2, label={"12": "open the chest", "13": "take the pickaxe"},
        queries={"10": "how do I mine?", "25": "now what?"}),
    rec("g4", 0, 10, SOLO, "lol", 3, label={"4": "unanswered clip"}),
    rec("g5", 0, 10, SOLO, "dota", "x", label={"3": "first blood", "4": " ..."}),
    rec("g6", 5, 25, GUIDE, "mc", None, label={}),
]  # fmt: skip
PREDS = [
    rec("g1", 100, 130, SOLO, "lol", 0, timing=[0.5, {"processing_s": 1.5}, 0.8],
        pred={"108": "red team pushes", "110": "red team takes the tower", "111": " ...", "140": "late"}),
    rec("g2", 0, 20, MULTI, "lol", 1, pred={"3": "a fight", "4": "nice", "5": "nice fight", "6": "yes"},
        agents={"caster2": secs(6, 7)}),
    rec("g3", 0, 30, GUIDE, "mc", 2, pred={"12": "open the chest", "13": ""},
        timing=[{"processing_s": 2.0, "stream_s": 1.0}]),
    rec("g5", 0, 10, SOLO, "dota", "x", pred="first blood for the red team"),
    rec("g6", 5, 25, GUIDE, "mc", None, pred={"7": "hello"}),
]  # fmt: skip
BASELINE = [dict(r, pred={"3": "first blood", "110": "the tower"}) for r in PREDS]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    return (
        _write(tmp_path / "pred.jsonl", PREDS),
        _write(tmp_path / "label.jsonl", LABELS),
        _write(tmp_path / "base.jsonl", BASELINE),
    )


def _json(value: Any) -> Any:
    """``value`` as it reads back from a JSON file."""
    return json.loads(json.dumps(value, default=float))


# ----------------------------------------------------------------------------- rows and the report


def test_rows_read_back_from_json_make_the_one_go_report(tmp_path: Path) -> None:
    pred, label, base = _files(tmp_path)
    preds, labels, baseline = read_clips(pred, "pred"), read_clips(label, "label"), read_clips(base, "pred")
    judge, pairwise = LexicalJudge(), LexicalPairwiseJudge()
    one_go = evaluate(preds, labels, judge, pairwise_judge=pairwise, baseline_records=baseline)
    options = ClipOptions()
    plan = plan_clips(preds, labels, baseline)
    assert [u.clip.video_id for u in plan.units] == ["g1", "g2", "g3", "g5", "g6"]
    assert (plan.pred_clips, plan.label_clips, plan.labels_without_pred) == (5, 6, 1)
    # Each row alone, JSON-safe, scored in reverse order and read back: the same report.
    rows = {u.key: _json(score_clip(u, options, judge, pairwise)) for u in reversed(plan.units)}
    ordered = [rows[u.key] for u in plan.units]
    rebuilt = report_from_rows(ordered, plan, options, judge=judge.name, pairwise_judge=pairwise.name)
    assert rebuilt == _json(one_go)
    # The win rate per clip sums up to win_rate over the whole set, as evaluate computed it.
    assert rebuilt["win_rate"] == _json(win_rate(preds, baseline, labels, pairwise))
    assert rebuilt["win_rate"]["overall"]["judgments"] == 10
    # The numbers, by hand: g2 speaks at {3,4,5,6} against {5,6}: P .5, R 1 -> F1 2/3; g6's
    # label is empty (skipped by F1 and TimeDiff); g5's caption speaks over all 11 seconds.
    g2 = rows[plan.units[1].key]
    assert g2["clip"]["f1"]["f1"] == pytest.approx(2 / 3)
    assert g2["counts"] == {"pred_seconds": 4, "label_seconds": 2, "silent_dropped": 0}
    assert g2["clip"]["co_commentary"]["overlap_seconds"] == 2  # {3, 4} with the co-caster
    assert g2["clip"]["multi_agent"]["seconds"] == [6]
    assert rows[plan.units[0].key]["counts"]["silent_dropped"] == 1  # g1's " ..." at 111
    assert rows[plan.units[0].key]["timing"] == [[0.5, 1.0], [1.5, 1.0], [0.8, 1.0]]
    assert rows[plan.units[3].key]["counts"]["pred_seconds"] == 11
    assert rows[plan.units[4].key]["clip"]["f1"] is None
    assert one_go["counts"]["empty_label_clips"] == 1 and one_go["f1"]["skipped_empty_label"] == 1
    # g1 ("red team pushes red team takes the tower late" vs "the tower") wins both orders.
    g1_win = rows[plan.units[0].key]["win"]
    assert (g1_win["ab"], g1_win["ba"]) == ("A", "B")
    assert set(one_go["f1"]["by_tag"]) == {SOLO, MULTI, GUIDE}
    assert one_go["rtf"]["chunks"] == 4 and one_go["rtf"]["rtf"] == pytest.approx(4.8 / 4)
    # Without judges the rows hold no PAUC and no judgments, and the report none either.
    bare = [_json(score_clip(u, options)) for u in plan.units]
    assert "pauc" not in bare[0]["clip"] and bare[0]["win"] is None
    assert report_from_rows(bare, plan, options) == _json(evaluate(preds, labels))
    with pytest.raises(LiveEvalError, match="without a PAUC judge"):
        report_from_rows(bare, plan, options, judge="lexical-rougeL")


def test_rows_keep_every_option(tmp_path: Path) -> None:
    pred, label, base = _files(tmp_path)
    options = ClipOptions(k=1, alpha=0.5, omegas=(0.25, 1.0), start_score=0.5, drop_silent_seconds=False)
    kwargs: dict[str, Any] = {"k": 1, "alpha": 0.5, "omegas": [0.25, 1.0], "start_score": 0.5}
    one_go = evaluate_files(
        pred, label, LexicalJudge(), **kwargs, drop_silent_seconds=False, answer_window=1, missing="empty"
    )
    plan = plan_clips(read_clips(pred, "pred"), read_clips(label, "label"), missing="empty")
    assert len(plan.units) == 6  # g4 scored as silence
    rows = [_json(score_clip(u, options, LexicalJudge())) for u in plan.units]
    rebuilt = report_from_rows(rows, plan, options, answer_window=1, missing="empty", judge="lexical-rougeL")
    assert rebuilt == _json(one_go)
    assert set(rows[0]["clip"]["pauc"]["auc"]) == {"0.25", "1"}
    # A baseline without g4 cannot be planned with it: the error comes before any judge is asked.
    with pytest.raises(LiveEvalError, match="no B prediction for clip g4"):
        plan_clips(read_clips(pred, "pred"), read_clips(label, "label"), read_clips(base, "pred"), "empty")


# ----------------------------------------------------------------------------- records and resume


def _settings(tmp_path: Path, **changes: Any) -> Any:
    from embodia.evals.live import LiveEvalSettings

    pred, label, base = _files(tmp_path)
    return LiveEvalSettings(**{"pred": pred, "label": label, "baseline": base, **changes})


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _clip_lines(path: Path) -> list[str]:
    """The clip records of a records file, as sorted JSON text (their order left out)."""
    return sorted(json.dumps(line, sort_keys=True) for line in _lines(path) if "key" in line)


class _Calls:
    """Counts the lexical judges' calls in this process; raises once ``fail_after`` are made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_after: int | None = None) -> None:
        self.count, self.fail_after = 0, fail_after
        for cls, method in ((LexicalJudge, "score"), (LexicalPairwiseJudge, "compare")):
            monkeypatch.setattr(cls, method, self._wrap(getattr(cls, method)))

    def _wrap(self, original: Any) -> Any:
        def call(judge: Any, *args: Any) -> Any:
            if self.fail_after is not None and self.count >= self.fail_after:
                raise RuntimeError("the judge went away")
            self.count += 1
            return original(judge, *args)

        return call


def _calls_when_recorded(
    monkeypatch: pytest.MonkeyPatch, settings: Any, out: Path
) -> tuple[dict[str, Any], list[int]]:
    """A run's report, and how many judge calls had been made when each clip was recorded."""
    from embodia.evals.live import run_eval_live

    with monkeypatch.context() as patch:
        calls = _Calls(patch)
        after: list[int] = []
        report = run_eval_live(settings, out, on_clip=lambda *_: after.append(calls.count))
    assert after[-1] > after[1] + 1  # g3 onwards asks the judges something
    return report, after


def test_the_run_records_each_clip_and_writes_the_one_go_report(tmp_path: Path) -> None:
    from embodia.evals.live import clips_path, run_eval_live

    settings = _settings(tmp_path)
    out = tmp_path / "reports" / "live.json"
    seen: list[tuple[str, int, int]] = []
    report = run_eval_live(
        settings, out, on_clip=lambda row, done, total: seen.append((row["clip"]["video_id"], done, total))
    )
    expected = evaluate_files(
        settings.pred,
        settings.label,
        LexicalJudge(),
        pairwise_judge=LexicalPairwiseJudge(),
        baseline_path=settings.baseline,
    )
    assert report == _json(expected) == json.loads(out.read_text())
    assert seen == [("g1", 1, 5), ("g2", 2, 5), ("g3", 3, 5), ("g5", 4, 5), ("g6", 5, 5)]
    records = clips_path(out)
    assert records == tmp_path / "reports" / "live.clips.jsonl"
    lines = _lines(records)
    assert lines[0] == {"eval": "live", "settings": settings.clip_settings()}
    assert [line["key"] for line in lines[1:-1]] == [
        ["g1", 100, 130, "lol", 0],
        ["g2", 0, 20, "lol", 1],
        ["g3", 0, 30, "mc", 2],
        ["g5", 0, 10, "dota", "x"],
        ["g6", 5, 25, "mc", None],
    ]
    assert lines[-1] == {"finished": 5}
    # A finished evaluation is continued with --resume at no cost, and replaced without it.
    assert run_eval_live(settings, out, resume=True) == report
    assert _lines(records) == lines  # nothing judged, nothing appended
    none = run_eval_live(_settings(tmp_path, judge="none", baseline=None), out)
    assert none["pauc"] is None and none["win_rate"] is None
    assert _lines(records)[0]["settings"]["judge"] == "none" and len(_lines(records)) == 7


def test_a_killed_run_resumes_to_the_same_report_with_each_clip_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from embodia.evals.live import clips_path, run_eval_live

    settings = _settings(tmp_path)
    whole, after = _calls_when_recorded(monkeypatch, settings, tmp_path / "whole.json")
    # The judges go away one call into g3: g1 and g2 are recorded, g3 (in flight) is not.
    out = tmp_path / "cut.json"
    with monkeypatch.context() as patch:
        _Calls(patch, fail_after=after[1] + 1)
        with pytest.raises(RuntimeError, match="the judge went away"):
            run_eval_live(settings, out)
    records = clips_path(out)
    cut = _lines(records)
    assert not out.exists() and [line["key"][0] for line in cut[1:]] == ["g1", "g2"]
    # Without --resume the clips scored are not thrown away.
    with pytest.raises(LiveEvalError, match=r"did not finish \(2 clips scored\): pass --resume"):
        run_eval_live(settings, out)
    # Other settings are refused, each named.
    with pytest.raises(LiveEvalError, match=r"other settings \(k: 2 -> 3\)"):
        run_eval_live(_settings(tmp_path, k=3), out, resume=True)
    # A torn last line (a kill mid-write) is dropped; resumed, only the clips without a
    # record are judged, and the report is the uninterrupted run's.
    records.write_text(records.read_text() + '{"key": ["g3", 0, 30')
    with monkeypatch.context() as patch:
        resumed = _Calls(patch)
        report = run_eval_live(settings, out, resume=True)
    assert report == whole == json.loads(out.read_text())
    assert resumed.count == after[-1] - after[1]
    keys = [json.dumps(line["key"]) for line in _lines(records) if "key" in line]
    assert len(keys) == len(set(keys)) == 5
    assert _clip_lines(records) == _clip_lines(clips_path(tmp_path / "whole.json"))


def test_a_changed_clip_is_not_resumed(tmp_path: Path) -> None:
    from embodia.evals.live import clips_path, run_eval_live

    settings = _settings(tmp_path)
    out = tmp_path / "live.json"
    run_eval_live(settings, out)
    lines = _lines(clips_path(out))
    _write(clips_path(out), lines[:3])  # g1, g2 scored; the run did not finish
    _write(settings.pred, [dict(PREDS[0], pred={"110": "blue team"}), *PREDS[1:]])
    with pytest.raises(LiveEvalError, match="clip g1 .* is not the one scored there"):
        run_eval_live(settings, out, resume=True)


# ----------------------------------------------------------------------------- the command, local and on Ray


def _eval_live(pred: Path, label: Path, out: Path, *extra: str) -> Any:
    from typer.testing import CliRunner

    from embodia.cli import app

    args = ["eval", "live", "--pred", str(pred), "--label", str(label), "--out", str(out), "--json", *extra]
    return CliRunner().invoke(app, args)


def test_eval_live_refuses_an_unfinished_evaluation_without_resume(tmp_path: Path) -> None:
    pred, label, base = _files(tmp_path)
    out = tmp_path / "live.json"
    done = _eval_live(pred, label, out, "--baseline", str(base))
    assert done.exit_code == 0, done.output
    records = tmp_path / "live.clips.jsonl"
    whole = records.read_text()
    records.write_text("".join(whole.splitlines(keepends=True)[:3]))  # killed after two clips
    out.unlink()
    refused = _eval_live(pred, label, out, "--baseline", str(base))
    assert refused.exit_code == 2
    assert "did not finish (2 clips scored): pass --resume to continue it" in " ".join(refused.output.split())
    resumed = _eval_live(pred, label, out, "--baseline", str(base), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout) == json.loads(out.read_text()) == json.loads(done.stdout)
    assert records.read_text() == whole


@pytest.mark.ray
def test_eval_live_on_ray_gives_the_local_report_and_resumes_across_backends(
    tmp_path: Path, ray_runtime: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from embodia.evals.live import LiveEvalSettings, clips_path

    pred, label, base = _files(tmp_path)
    ray = ("--backend", "ray", "--num-workers", "2", "--judge", "lexical", "--baseline", str(base))
    local = _eval_live(pred, label, tmp_path / "local.json", "--baseline", str(base))
    assert local.exit_code == 0, local.output
    with monkeypatch.context() as patch:
        _Calls(patch, fail_after=0)  # a judge asked in this process fails: Ray's workers judge
        on_ray = _eval_live(pred, label, tmp_path / "ray.json", *ray)
    assert on_ray.exit_code == 0, on_ray.output
    report = json.loads(local.stdout)
    assert json.loads(on_ray.stdout) == report == json.loads((tmp_path / "ray.json").read_text())
    assert _clip_lines(clips_path(tmp_path / "ray.json")) == _clip_lines(clips_path(tmp_path / "local.json"))
    # Started here, killed one judge call into g3, resumed on Ray.
    out = tmp_path / "here-then-ray.json"
    _, after = _calls_when_recorded(
        monkeypatch, LiveEvalSettings(pred, label, baseline=base), tmp_path / "n.json"
    )
    with monkeypatch.context() as patch:
        _Calls(patch, fail_after=after[1] + 1)
        cut = _eval_live(pred, label, out, "--baseline", str(base))
    assert cut.exit_code != 0 and len(_lines(clips_path(out))) == 3
    with monkeypatch.context() as patch:
        _Calls(patch, fail_after=0)
        resumed = _eval_live(pred, label, out, *ray, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(out.read_text()) == report
    assert _clip_lines(clips_path(out)) == _clip_lines(clips_path(tmp_path / "local.json"))
    # Started on Ray, cut after two clips, resumed here.
    records = clips_path(tmp_path / "ray.json")
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:3]))
    (tmp_path / "ray.json").unlink()
    back = _eval_live(pred, label, tmp_path / "ray.json", "--baseline", str(base), "--resume")
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout) == report
