"""Live Gaming Benchmark metrics: every number below is worked out by hand in the comments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from embodia.errors import EmbodiaError
from embodia.evals.live import (
    Judgment,
    LexicalJudge,
    LexicalPairwiseJudge,
    LiveEvalError,
    PolicyJudge,
    PolicyPairwiseJudge,
    answer_rate,
    area_under_steps,
    concurrent_speech,
    evaluate,
    evaluate_files,
    f1,
    f1_report,
    flatten_commentary,
    max_consecutive_overlap,
    merge_adjacent,
    overlap_rate,
    parse_preference,
    parse_score,
    pauc,
    query_response_delay,
    read_records,
    real_time_factor,
    rouge_l,
    speaking_rate,
    time_diff,
    time_diff_report,
    win_rate,
)
from embodia.policies import ScriptedPolicy

SOLO, MULTI, GUIDE = "Solo commentators", "Multiple commentators", "Guidance"


def secs(*seconds: int, text: str = "x") -> dict[str, str]:
    return {str(t): text for t in seconds}


class SeqJudge:
    """Answers the scores it was given, in order, and remembers what it was asked."""

    name = "seq"

    def __init__(self, scores: Sequence[int | None]) -> None:
        self.scores = list(scores)
        self.calls: list[tuple[str, str]] = []

    def score(self, prediction: str, reference: str) -> Judgment:
        self.calls.append((prediction, reference))
        score = self.scores.pop(0)
        return Judgment(score, f"raw {score}")


# ----------------------------------------------------------------------------- F1


def test_f1_per_clip() -> None:
    # P = {1,2,3,10}, L = {2,3,4,5}: TP = 2, precision 2/4, recall 2/4, F1 0.5.
    r = f1(secs(1, 2, 3, 10), secs(2, 3, 4, 5))
    assert r is not None
    assert (r["tp"], r["pred_count"], r["label_count"]) == (2, 4, 4)
    assert r["precision"] == r["recall"] == r["f1"] == 0.5
    # An agent that never speaks: everything 0.
    r = f1({}, secs(7))
    assert r is not None and (r["precision"], r["recall"], r["f1"]) == (0.0, 0.0, 0.0)
    # An agent that speaks every second 0..29 against L = {10,11,12}:
    # precision 3/30 = 0.1, recall 1, F1 = 2 * 0.1 / 1.1 = 0.1818...
    r = f1(secs(*range(30)), secs(10, 11, 12))
    assert r is not None
    assert r["precision"] == pytest.approx(0.1) and r["recall"] == 1.0
    assert r["f1"] == pytest.approx(0.2 / 1.1)
    # An empty label is skipped, as the reference.
    assert f1(secs(1), {}) is None


def test_f1_report_macro_micro_per_tag() -> None:
    pairs = [
        (secs(1, 2, 3, 10), secs(2, 3, 4, 5)),  # solo: P .5 R .5 F1 .5 (tp 2, |P| 4, |L| 4)
        ({}, secs(7)),  # solo: all 0 (tp 0, |P| 0, |L| 1)
        (secs(1, 2), secs(2)),  # guidance: P .5 R 1 F1 2/3 (tp 1, |P| 2, |L| 1)
        (secs(4), {}),  # guidance: empty label, skipped
    ]
    report = f1_report(pairs, [SOLO, SOLO, GUIDE, GUIDE])
    assert report["skipped_empty_label"] == 1
    macro, micro = report["overall"]["macro"], report["overall"]["micro"]
    # macro: P (.5 + 0 + .5)/3, R (.5 + 0 + 1)/3, F1 (.5 + 0 + 2/3)/3
    assert macro["clips"] == 3
    assert macro["precision"] == pytest.approx(1 / 3)
    assert macro["recall"] == pytest.approx(0.5)
    assert macro["f1"] == pytest.approx((0.5 + 2 / 3) / 3)
    # micro: TP 3 of |P| 6 and |L| 6 -> P = R = F1 = .5
    assert (micro["tp"], micro["pred_count"], micro["label_count"]) == (3, 6, 6)
    assert micro["f1"] == pytest.approx(0.5)
    solo = report["by_tag"][SOLO]
    # solo macro F1 (.5 + 0)/2; micro TP 2, |P| 4, |L| 5 -> P .5, R .4, F1 .4/.9
    assert solo["macro"]["f1"] == pytest.approx(0.25)
    assert solo["micro"]["precision"] == pytest.approx(0.5)
    assert solo["micro"]["recall"] == pytest.approx(0.4)
    assert solo["micro"]["f1"] == pytest.approx(0.4 / 0.9)
    assert report["by_tag"][GUIDE]["macro"]["f1"] == pytest.approx(2 / 3)
    assert report["by_tag"][GUIDE]["macro"]["clips"] == 1


# ----------------------------------------------------------------------------- TimeDiff


def test_time_diff_cases() -> None:
    label = {"10": "a", "15": "b"}  # first 10, last 15; in range with k=2: [8, 17]
    # Responds at 12 (first second >= 10): base 2; 20 is out of range (+0.2); 30 is out of
    # range but has empty text, which the reference does not penalise; 8 is in range.
    r = time_diff({"8": "x", "12": "y", "20": "z", "30": ""}, label)
    assert r is not None
    assert (r["first"], r["last"], r["response"], r["out_of_range"]) == (10, 15, 12, 1)
    assert r["base"] == 2.0 and r["timediff"] == pytest.approx(2.2)
    # Never responds (only speaks at 5 < 10): base = last - first = 5, and 5 < 8 costs 0.2.
    r = time_diff({"5": "a"}, label)
    assert r is not None and r["response"] is None and r["timediff"] == pytest.approx(5.2)
    # Empty prediction: base 5, no penalty.
    r = time_diff({}, label)
    assert r is not None and r["timediff"] == 5.0
    # Speaks every second 0..29: responds at 10 (base 0); 0..7 and 18..29 are out: 8 + 12 = 20
    # seconds at 0.2 each -> 4.0.
    r = time_diff(secs(*range(30)), label)
    assert r is not None and r["base"] == 0.0 and r["out_of_range"] == 20
    assert r["timediff"] == pytest.approx(4.0)
    # k=0, alpha=0.5: responds at 16 (base 6); 9 and 16 fall outside [10, 15] -> +1.0.
    r = time_diff({"9": "a", "16": "b"}, label, k=0, alpha=0.5)
    assert r is not None and r["timediff"] == pytest.approx(7.0)
    assert time_diff(secs(3), {}) is None
    with pytest.raises(LiveEvalError, match="alpha"):
        time_diff({}, label, alpha=-1)


def test_time_diff_report_per_tag() -> None:
    label = {"10": "a", "15": "b"}
    pairs = [({"12": "y", "20": "z"}, label), ({}, label), ({"1": "a"}, {})]
    report = time_diff_report(pairs, [SOLO, GUIDE, GUIDE])
    # 2.2 and 5.0 -> mean 3.6; the empty label is skipped; one clip never responded.
    assert report["overall"]["count"] == 2
    assert report["overall"]["mean"] == pytest.approx(3.6)
    assert report["overall"]["never_responded"] == 1
    assert report["overall"]["total_out_of_range"] == 1
    assert report["by_tag"][SOLO]["mean"] == pytest.approx(2.2)
    assert report["by_tag"][GUIDE]["mean"] == 5.0
    assert report["skipped_empty_label"] == 1


# ----------------------------------------------------------------------------- PAUC


def test_merge_adjacent_and_area() -> None:
    # 3 and 4 are adjacent: one reply at 3, the earlier piece's trailing "..." dropped (none
    # here), the later one's kept; 8, 9, 10 merge with "y ..." losing its ellipsis.
    items = [(3, "red team"), (4, "takes tower ..."), (8, "x"), (9, "y ..."), (10, "z")]
    assert merge_adjacent(items) == [(3, "red team takes tower ..."), (8, "x y z")]
    # Steps (3, 1), (8, 2) over [0, 10], y max 2: 3*0 + 5*1 + 2*2 = 9 of 20.
    assert area_under_steps([(3, 1), (8, 2)], 10, 2, omega=0) == pytest.approx(0.45)
    assert area_under_steps([], 10, 2) == 0.0


def test_pauc_hand_example() -> None:
    label = {"2": "the red team takes the tower", "5": "great fight"}
    pred = {"3": "red team", "4": "takes tower ...", "8": "red team takes the tower", "12": "after the end"}
    judge = SeqJudge([2, 3])
    r = pauc(pred, label, judge, begin=0, end=10)
    # Replies: "red team takes tower ..." at 3, then the cumulative text at 8; 12 > end is ignored.
    gold = "the red team takes the tower great fight"
    assert judge.calls == [
        ("red team takes tower ...", gold),
        ("red team takes tower ... red team takes the tower", gold),
    ]
    assert r["points"] == [[3, 1], [8, 2]]  # scores 2, 3 -> y 1, 2
    # omega 0:   3*0 + 5*1 + 2*2 = 9 / 20 = .45
    # omega 0.5: x -> 1.5, 4: 1.5*0 + 2.5*1 + 6*2 = 14.5 / 20 = .725
    # omega 1:   x -> 0, 0: 10*2 = 20 / 20 = 1
    assert r["auc"] == pytest.approx({"0": 0.45, "0.5": 0.725, "1": 1.0})
    assert [j["raw"] for j in r["judgments"]] == ["raw 2", "raw 3"]
    # start_score 0.5 holds before the first reply: omega 0: 3*.5 + 5 + 4 = 10.5 / 20;
    # omega 0.5: 1.5*.5 + 2.5 + 12 = 15.25 / 20.
    r = pauc(pred, label, SeqJudge([2, 3]), start_score=0.5, begin=0, end=10)
    assert r["auc"] == pytest.approx({"0": 0.525, "0.5": 0.7625, "1": 1.0})
    # Seconds are absolute: the same clip at [100, 110] gives the same areas.
    shifted = {str(int(t) + 100): text for t, text in pred.items()}
    r = pauc(shifted, {"102": label["2"], "105": label["5"]}, SeqJudge([2, 3]), begin=100, end=110)
    assert r["auc"] == pytest.approx({"0": 0.45, "0.5": 0.725, "1": 1.0})


def test_pauc_edge_cases() -> None:
    label = {"1": "goal"}
    # A repeated reply is not judged again: one call, y 2 at x 1 -> 9*2 / 20 = .9.
    judge = SeqJudge([3])
    r = pauc({"1": "goal", "5": "goal"}, label, judge, begin=0, end=10)
    assert len(judge.calls) == 1 and r["auc"]["0"] == pytest.approx(0.9)
    # Unparseable answers (None, or out of 1..3) give no point: the clip scores start / 2.
    r = pauc({"1": "goal", "5": "gol"}, label, SeqJudge([None, 7]), begin=0, end=10)
    assert r["unparseable"] == 2 and r["points"] == [] and r["auc"]["0"] == 0.0
    r = pauc({"1": "goal"}, label, SeqJudge([None]), start_score=1.0, begin=0, end=10)
    assert r["auc"] == {"0": 0.5, "0.5": 0.5, "1": 0.5}
    # No prediction: no call, 0.
    judge = SeqJudge([])
    assert pauc({}, label, judge, begin=0, end=10)["auc"]["0"] == 0.0 and judge.calls == []
    # No reference text: no call, start / 2, flagged.
    r = pauc({"1": "goal"}, {"1": "  "}, SeqJudge([]), start_score=1.0, begin=0, end=10)
    assert r["reference_empty"] and r["auc"]["1"] == 0.5
    with pytest.raises(LiveEvalError, match="omega"):
        pauc({}, label, SeqJudge([]), omegas=(1.5,), begin=0, end=10)


def test_lexical_judge() -> None:
    # LCS of "the red team takes the tower" and "red team takes tower" is 4 words:
    # P 4/6, R 4/4 -> F 0.8.
    assert rouge_l("the red team takes the tower", "red team takes tower") == pytest.approx(0.8)
    judge = LexicalJudge()
    ref = "the red team takes the tower"
    assert judge.score("The red team takes the tower!", ref).score == 3
    # "red" alone: P 1, R 1/6 -> F 2/7 = .286 -> between .2 and .5 -> 2
    assert judge.score("red", ref).score == 2
    assert judge.score("blue base", ref).score == 1
    assert judge.score("", ref).score == 1


def test_policy_judge_records_and_parses() -> None:
    policy = ScriptedPolicy(["2", "Score: 3", "no idea"], name="judge-model")
    judge = PolicyJudge(policy)
    pred = {"1": "a", "3": "b", "5": "c"}
    r = pauc(pred, {"1": "reference text"}, judge, begin=0, end=10)
    # scores 2 (y 1 at 1), 3 (y 2 at 3), unparseable at 5:
    # omega 0: 1*0 + 2*1 + 7*2 = 16 / 20 = .8
    assert r["points"] == [[1, 1], [3, 2]] and r["unparseable"] == 1
    assert r["auc"]["0"] == pytest.approx(0.8)
    assert judge.name == "judge-model"
    assert [rec["raw"] for rec in judge.records] == ["2", "Score: 3", "no idea"]
    assert [rec["score"] for rec in judge.records] == [2, 3, None]
    assert all(req.temperature == 0.0 for req in policy.requests)
    user = policy.requests[1].messages[1]["content"]
    assert user == "Ground Truth Answer: reference text\nPredicted Answer: a b"


def test_parsers() -> None:
    assert parse_score("2") == 2 and parse_score(" 3.") == 3 and parse_score("Score: 1") == 1
    assert parse_score("0") is None and parse_score("10") is None and parse_score("good") is None
    assert parse_preference("A") == "A" and parse_preference(" b ".upper()) == "B"
    assert parse_preference("**B**") == "B"
    assert parse_preference("Commentary A is better aligned with the human commentary") == "A"
    assert parse_preference("Commentary B is better aligned than Commentary A.") == "B"
    assert parse_preference("It's a tie.") == "tie"
    assert parse_preference("I cannot decide") is None


# ----------------------------------------------------------------------------- win rate


def test_flatten_commentary() -> None:
    # Numeric order 1, 2, 9, 10; " ..." is silence; "hello ..." loses its trailing " ...".
    seconds = {"10": "late", "9": "hello ...", "2": " ...", "1": "a"}
    assert flatten_commentary(seconds) == "a hello late"


def _clip(
    video: str, field: str, seconds: dict[str, str] | str, tag: str = SOLO, **extra: Any
) -> dict[str, Any]:
    record = {"video_id": video, "begin": 0, "end": 10, field: seconds, "tag": tag, "dataset_name": "lol"}
    record["idx"] = int(video[-1])
    record.update(extra)
    return record


def test_win_rate_both_orders_scripted() -> None:
    model = [_clip("v1", "pred", {"1": "model one"}), _clip("v2", "pred", {"1": "model two"}, GUIDE)]
    base = [_clip("v1", "pred", {"1": "base one"}), _clip("v2", "pred", {"1": "base two"}, GUIDE)]
    labels = [_clip("v1", "label", {"1": "gold one"}), _clip("v2", "label", {"1": "gold two"}, GUIDE)]
    policy = ScriptedPolicy(["A", "B", "Commentary B is better aligned", "cannot decide"], name="pj")
    judge = PolicyPairwiseJudge(policy)
    r = win_rate(model, base, labels, judge)
    # v1: model is A in the first order and wins ("A"), is B in the second and wins ("B");
    # v2: loses the first order, the second answer is unreadable. 2 wins of 4 judgments.
    overall = r["overall"]
    assert (overall["wins"], overall["losses"], overall["ties"], overall["invalid"]) == (2, 1, 0, 1)
    assert overall["judgments"] == 4 and overall["win_rate"] == 50.0
    assert r["by_tag"][SOLO]["win_rate"] == 100.0 and r["by_tag"][GUIDE]["win_rate"] == 0.0
    assert r["by_dataset"]["lol"]["win_rate"] == 50.0
    assert r["judge"] == "pj" and r["judgments"][1]["ba_raw"] == "cannot decide"
    first, second = (req.messages[0]["content"] for req in policy.requests[:2])
    assert first.index("model one") < first.index("base one") < first.index("gold one")
    assert second.index("base one") < second.index("model one")
    assert all(req.temperature == 0.0 for req in policy.requests)
    assert judge.records[0]["prompt"] == first and judge.records[3]["winner"] is None


def test_win_rate_lexical_ties_and_missing_baseline() -> None:
    labels = [_clip("v1", "label", {"1": "the red team takes the tower"})]
    model = [_clip("v1", "pred", {"1": "red team takes the tower ..."})]
    base = [_clip("v1", "pred", {"1": "blue base is quiet"})]
    r = win_rate(model, base, labels, LexicalPairwiseJudge())
    assert r["overall"]["win_rate"] == 100.0
    # Same text on both sides: two ties, no wins.
    r = win_rate(model, model, labels, LexicalPairwiseJudge())
    assert r["overall"]["ties"] == 2 and r["overall"]["win_rate"] == 0.0
    with pytest.raises(LiveEvalError, match="no B prediction"):
        win_rate(model, [_clip("v1", "pred", {}, idx=5)], labels, LexicalPairwiseJudge())


# ----------------------------------------------------------------------------- co-commentary, guidance


def test_overlap_and_concurrent_speech() -> None:
    # P = {1,2,3,4,8}, O = {2,3,4,9}: overlap {2,3,4} -> 3/5, longest run 3.
    assert overlap_rate(secs(1, 2, 3, 4, 8), secs(2, 3, 4, 9)) == pytest.approx(0.6)
    assert max_consecutive_overlap(secs(1, 2, 3, 4, 8), secs(2, 3, 4, 9)) == 3
    assert overlap_rate({}, secs(1)) is None and max_consecutive_overlap({}, secs(1)) == 0
    # a {1,2,3}, b {3,4}, c {3,4,5}: 3 has three speakers, 4 has two.
    r = concurrent_speech({"a": secs(1, 2, 3), "b": secs(3, 4), "c": secs(3, 4, 5)})
    assert r == {"seconds": [3, 4], "count": 2, "max_speakers": 3, "longest_run": 2}


def test_guidance_delay_and_answer_rate() -> None:
    pred = secs(9, 12, 26)
    # query 10 -> 12 (2), query 20 -> 26 (6), query 30 -> never.
    assert query_response_delay(pred, [10, 20, 30]) == [2, 6, None]
    assert answer_rate(pred, [10, 20, 30], window=5) == pytest.approx(1 / 3)
    # The window is inclusive: an answer exactly 5 s late counts.
    assert answer_rate(secs(15), [10], window=5) == 1.0
    assert answer_rate(secs(15), [10], window=4) == 0.0
    assert answer_rate({}, [10]) == 0.0 and answer_rate(pred, []) is None


def test_speaking_rate_and_rtf() -> None:
    assert speaking_rate(secs(*range(6)), 30) == pytest.approx(0.2)
    # 0.5 + 1.5 + 0.8 = 2.8 s over 3 s; backlog 0 -> 0.5 -> 0.3.
    r = real_time_factor([0.5, 1.5, 0.8])
    assert r["rtf"] == pytest.approx(2.8 / 3) and r["late_chunks"] == 1
    assert r["max_chunk_rtf"] == 1.5
    assert r["final_backlog_s"] == pytest.approx(0.3) and r["max_backlog_s"] == pytest.approx(0.5)
    with pytest.raises(LiveEvalError):
        real_time_factor([1.0], [0.0])


# ----------------------------------------------------------------------------- evaluate


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n", encoding="utf-8")
    return path


def _files(tmp_path: Path) -> tuple[Path, Path]:
    def rec(
        video: str, begin: int, end: int, tag: str, dataset: str, idx: int, **rest: Any
    ) -> dict[str, Any]:
        return {
            "video_id": video,
            "begin": begin,
            "end": end,
            "tag": tag,
            "dataset_name": dataset,
            "idx": idx,
            **rest,
        }

    labels = [
        rec("g1", 100, 130, SOLO, "lol", 0,
            label={"110": "the red team takes the tower", "111": "what a play", "115": "gg"}),
        rec("g2", 0, 20, MULTI, "lol", 1, label={"5": "nice", "6": "yes"}, other=secs(2, 3, 4, 10)),
        rec("g3", 0, 30, GUIDE, "mc", 2, label={"12": "open the chest", "13": "take the pickaxe"},
            queries={"10": "how do I mine?", "25": "now what?"}),
        rec("g4", 0, 10, SOLO, "lol", 3, label={"4": "unanswered clip"}),
    ]  # fmt: skip
    preds = [
        rec("g1", 100, 130, SOLO, "lol", 0, timing=[0.5, {"processing_s": 1.5}, 0.8],
            pred={"108": "red team pushes", "110": "red team takes the tower", "111": " ...", "140": "late"}),
        rec("g2", 0, 20, MULTI, "lol", 1, pred=secs(3, 4, 5, 6), agents={"caster2": secs(6, 7)}),
        rec("g3", 0, 30, GUIDE, "mc", 2, pred={"12": "open the chest"}),
    ]  # fmt: skip
    return _write(tmp_path / "pred.jsonl", preds), _write(tmp_path / "label.jsonl", labels)


def test_evaluate_files_end_to_end(tmp_path: Path) -> None:
    pred_path, label_path = _files(tmp_path)
    report = evaluate_files(pred_path, label_path, LexicalJudge())
    json.dumps(report, allow_nan=False)
    counts = report["counts"]
    assert counts["evaluated_clips"] == 3 and counts["labels_without_pred"] == 1
    assert counts["silent_seconds_dropped"] == 1  # g1's " ..." at 111
    # g1: P {108,110,140}, L {110,111,115}: tp 1 -> F1 1/3; TimeDiff: responds at 110 (0) and
    #     140 is outside [108, 117] -> 0.2.
    # g2: P {3,4,5,6}, L {5,6}: P .5, R 1 -> F1 2/3; responds at 5, all inside [3, 8] -> 0.
    # g3: P {12}, L {12,13}: P 1, R .5 -> F1 2/3; responds at 12 -> 0.
    f1s = report["f1"]
    assert f1s["overall"]["macro"]["f1"] == pytest.approx(5 / 9)
    # micro: tp 1+2+1 = 4, |P| 3+4+1 = 8, |L| 3+2+2 = 7 -> P .5, R 4/7, F1 56/105
    assert f1s["overall"]["micro"]["f1"] == pytest.approx(56 / 105)
    assert f1s["by_tag"][SOLO]["macro"]["f1"] == pytest.approx(1 / 3)
    assert set(f1s["by_tag"]) == {SOLO, MULTI, GUIDE}
    assert report["timediff"]["overall"]["mean"] == pytest.approx(0.2 / 3)
    assert report["timediff"]["by_tag"][SOLO]["mean"] == pytest.approx(0.2)
    # Speaking rate: g1 3/30, g2 4/20, g3 1/30; labels 3/30, 2/20, 2/30.
    rates = report["speaking_rate"]["overall"]
    assert rates["pooled_pred_rate"] == pytest.approx(8 / 80)
    assert rates["pooled_label_rate"] == pytest.approx(7 / 80)
    assert rates["pred_to_label_ratio"] == pytest.approx(8 / 7)
    # Co-commentary (g2): overlap with the co-caster {2,3,4,10} is {3,4}: 2/4, a 2-s run.
    co = report["co_commentary"]
    assert co["clips"] == 1 and co["mean_overlap_rate"] == 0.5
    assert co["max_consecutive_overlap"] == 2 and co["sustained_overlaps"] == 1
    # Guidance (g3): query 10 answered at 12 (2 s), query 25 never.
    guide = report["guidance"]["overall"]
    assert guide["queries"] == 2 and guide["never_answered"] == 1
    assert guide["mean_delay"] == 2.0 and guide["answer_rate"] == 0.5 and guide["window_inclusive"]
    # Self-play on g2: caster2 also speaks at 6.
    assert report["multi_agent"]["concurrent_seconds"] == 1
    assert report["rtf"]["rtf"] == pytest.approx(2.8 / 3)
    pauc_report = report["pauc"]
    assert pauc_report["judge"] == "lexical-rougeL" and set(pauc_report["overall"]["mean_auc"]) == {
        "0",
        "0.5",
        "1",
    }
    assert pauc_report["judge_calls"] == 4  # g1: 108 and 110 (140 is past the end); g2: 3..6 merged; g3: one
    # g3: "open the chest" vs "open the chest take the pickaxe": F = 2*1*.5/1.5 = .667 -> 3 -> y 2 at
    # x 12 of 30: omega 0 -> 18*2/60 = .6
    g3 = next(c for c in report["clips"] if c["video_id"] == "g3")
    assert g3["pauc"]["auc"]["0"] == pytest.approx(0.6)
    assert report["win_rate"] is None
    summary = report["summary"]
    assert summary["f1_micro"] == pytest.approx(56 / 105) and summary["timediff_mean"] == pytest.approx(
        0.2 / 3
    )
    assert summary["pauc_omega_0"] == pauc_report["overall"]["mean_auc"]["0"]
    assert summary["answer_rate"] == 0.5 and summary["overlap_rate"] == 0.5 and summary["win_rate"] is None


def test_evaluate_options(tmp_path: Path) -> None:
    pred_path, label_path = _files(tmp_path)
    # Keeping silent keys reads them as the reference does: g1's 111 then counts as speech.
    kept = evaluate_files(pred_path, label_path, drop_silent_seconds=False)
    assert kept["counts"]["silent_seconds_dropped"] == 0
    assert kept["f1"]["by_tag"][SOLO]["micro"]["tp"] == 2
    assert kept["pauc"] is None
    # A label without a prediction scored as silence: g4 adds F1 0 and TimeDiff 0 (never: 4-4).
    empty = evaluate_files(pred_path, label_path, missing="empty")
    assert empty["counts"]["evaluated_clips"] == 4
    assert empty["f1"]["overall"]["macro"]["f1"] == pytest.approx(5 / 12)
    with pytest.raises(LiveEvalError, match="no prediction for clip g4"):
        evaluate_files(pred_path, label_path, missing="error")
    # The win rate against a silent baseline: g1 and g3 share words with their labels and win
    # both orders; g2's "x x x x" shares none, a tie (0 = 0) twice: 4 wins of 6.
    base = _write(tmp_path / "base.jsonl", [dict(r, pred={}) for r in read_records(pred_path)])
    r = evaluate_files(pred_path, label_path, pairwise_judge=LexicalPairwiseJudge(), baseline_path=base)
    assert r["win_rate"]["overall"]["wins"] == 4 and r["win_rate"]["overall"]["ties"] == 2
    assert r["win_rate"]["overall"]["win_rate"] == pytest.approx(400 / 6)
    with pytest.raises(LiveEvalError, match="both a pairwise judge and baseline"):
        evaluate_files(pred_path, label_path, pairwise_judge=LexicalPairwiseJudge())


def test_caption_predictions() -> None:
    # An offline caption over [0, 10] against L = {4, 5}, as the reference reads it:
    # F1 speaks at all 11 seconds 0..10 -> P 2/11, R 1; TimeDiff says it at 0 < first = 4, so
    # it never responds (base 5 - 4 = 1) and 0 lies outside [2, 7] (+0.2).
    labels = [_clip("v1", "label", {"4": "red team takes the tower", "5": "what a fight"})]
    caption = [_clip("v1", "pred", "the red team takes the tower")]
    report = evaluate(caption, labels, SeqJudge([2]))
    f1_clip = report["clips"][0]["f1"]
    assert (f1_clip["pred_count"], f1_clip["tp"]) == (11, 2)
    assert f1_clip["f1"] == pytest.approx(2 * (2 / 11) / (2 / 11 + 1))
    assert report["timediff"]["overall"]["mean"] == pytest.approx(1.2)
    # PAUC: one reply at 0 scored 2 -> y 1 over the whole span -> 10*1 / 20 = .5.
    assert report["clips"][0]["pauc"]["auc"]["0"] == pytest.approx(0.5)
    # The pairwise judge sees the caption whole.
    model = [_clip("v1", "pred", {"4": "red team takes the tower ..."})]
    r = win_rate(model, caption, labels, LexicalPairwiseJudge())
    assert r["judgments"][0]["ab_raw"].startswith("rougeL_f") and r["overall"]["judgments"] == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{", r"pred\.jsonl line 2: bad JSON"),
        ("[1, 2]", r"pred\.jsonl line 2: expected a JSON object"),
        ('{"video_id": "a", "begin": 0, "end": 5}', r"pred\.jsonl line 2: missing key 'pred'"),
        ('{"video_id": "a", "begin": 0, "end": 5, "pred": {"1.5": "x"}}', "second '1.5' is not"),
        ('{"video_id": "a", "begin": 0, "end": 5, "pred": {"one": "x"}}', "second 'one' is not"),
        ('{"video_id": "a", "begin": 0, "end": 5, "pred": {"1": 3}}', "holds a int, not a string"),
        ('{"video_id": "a", "begin": 5, "end": 5, "pred": {}}', "not after its begin"),
        ('{"video_id": "a", "begin": "0", "end": 5, "pred": {}}', "'begin' must be an integer"),
        ('{"video_id": "a", "begin": 0, "end": 5, "pred": []}', "must be an object"),
        ('{"video_id": "v", "begin": 0, "end": 5, "pred": {}, "idx": 0}', "no label for clip v"),
        ('{"video_id": "a", "begin": 0, "end": 5, "pred": {}, "timing": ["x"]}', "timing entry 0"),
    ],
)
def test_malformed_files(tmp_path: Path, line: str, message: str) -> None:
    label = _write(tmp_path / "label.jsonl", [{"video_id": "a", "begin": 0, "end": 5, "label": {"1": "x"}}])
    good = '{"video_id": "a", "begin": 0, "end": 5, "pred": {"1": "x"}}'
    pred = tmp_path / "pred.jsonl"
    pred.write_text(f"{good}\n{line}\n", encoding="utf-8")
    with pytest.raises(LiveEvalError, match=message) as info:
        evaluate_files(pred, label)
    assert isinstance(info.value, EmbodiaError)


def test_record_errors(tmp_path: Path) -> None:
    label = _write(tmp_path / "label.jsonl", [{"video_id": "a", "begin": 0, "end": 5, "label": {"1": "x"}}])
    twice = _write(tmp_path / "twice.jsonl", [{"video_id": "a", "begin": 0, "end": 5, "pred": {}}] * 2)
    with pytest.raises(LiveEvalError, match=r"twice\.jsonl line 2: prediction for clip a .* appears twice"):
        evaluate_files(twice, label)
    with pytest.raises(LiveEvalError, match=r"file not found: .*nope\.jsonl"):
        evaluate_files(tmp_path / "nope.jsonl", label)
    # A label file that holds predictions only.
    one = _write(tmp_path / "one.jsonl", [{"video_id": "a", "begin": 0, "end": 5, "pred": {}}])
    with pytest.raises(LiveEvalError, match=r"one\.jsonl line 1: missing key 'label'"):
        evaluate_files(one, one)
    # The hint names the label that shares the video_id.
    other = _write(tmp_path / "other.jsonl", [{"video_id": "a", "begin": 0, "end": 5, "pred": {}, "idx": 7}])
    with pytest.raises(LiveEvalError, match="idx=None"):
        evaluate_files(other, label)
    with pytest.raises(LiveEvalError, match="missing must be"):
        evaluate([], [], missing="sometimes")  # type: ignore[arg-type]
