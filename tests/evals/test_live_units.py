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
