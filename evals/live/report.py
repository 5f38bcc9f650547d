"""The live benchmark's whole report: every metric over matched prediction/label files.

:func:`evaluate` matches the clips, reads each one's seconds once (:class:`_Seconds`) and hands
them to one tally per metric, which keeps that metric's per-clip results and sums them up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodia.core.scores import drop_silent
from embodia.evals.live.judges import Judge, PairwiseJudge
from embodia.evals.live.pauc import DEFAULT_OMEGAS, PaucTally, _check_omegas
from embodia.evals.live.records import (
    MATCH_KEY,
    Clip,
    ClipKey,
    LiveEvalError,
    Missing,
    _clips,
    _index,
    _no_match,
    read_clips,
)
from embodia.evals.live.timing import (
    CoCommentaryTally,
    F1Tally,
    GuidanceTally,
    MultiAgentTally,
    RateTally,
    RtfTally,
    TimeDiffTally,
)
from embodia.evals.live.winrate import win_rate


@dataclass(frozen=True)
class _Matched:
    """The prediction clips to score, the labels (and by key), and the labels without a prediction."""

    preds: list[Clip]
    labels: list[Clip]
    label_index: dict[ClipKey, Clip]
    unmatched: list[Clip]
    pred_clips: int
    """How many predictions the caller gave (``preds`` adds silent ones with ``missing="empty"``)."""


def _match(
    pred_records: Sequence[Clip | Mapping[str, Any]],
    label_records: Sequence[Clip | Mapping[str, Any]],
    missing: Missing,
) -> _Matched:
    preds = _clips(pred_records, "pred", "prediction")
    labels = _clips(label_records, "label", "label")
    pred_index, label_index = _index(preds, "prediction"), _index(labels, "label")
    for clip in preds:
        if clip.key not in label_index:
            raise _no_match(clip, label_index, "label")
    unmatched = [c for c in labels if c.key not in pred_index]
    if unmatched and missing == "error":
        raise LiveEvalError(
            f"{unmatched[0].where}: no prediction for clip {unmatched[0].describe()} "
            f"({len(unmatched)} labels have none)"
        )
    scored = preds
    if missing == "empty":
        scored = preds + [
            Clip(c.video_id, c.begin, c.end, {}, c.tag, c.dataset_name, c.idx, where=c.where)
            for c in unmatched
        ]
    return _Matched(scored, labels, label_index, unmatched, len(pred_index))


@dataclass(frozen=True)
class _Seconds:
    """One matched clip's seconds as the metrics read them: the speaking seconds, the seconds
    replies start at (TimeDiff, PAUC) and the label's. Speaking seconds and reply starts differ
    only for a caption, which speaks over the whole clip but is said at its begin."""

    clip: Clip
    label: Clip
    pred: dict[int, str]
    starts: dict[int, str]
    gold: dict[int, str]
    dropped: int
    """Silent seconds dropped from the prediction."""


def _seconds(clip: Clip, label: Clip, drop_silent_seconds: bool) -> _Seconds:
    gold = drop_silent(label.seconds) if drop_silent_seconds else label.seconds
    if clip.caption is not None:
        said = bool(clip.caption.strip())
        pred = {t: clip.caption for t in range(clip.begin, clip.end + 1)} if said else {}
        return _Seconds(clip, label, pred, {clip.begin: clip.caption} if said else {}, gold, 0)
    pred = drop_silent(clip.seconds) if drop_silent_seconds else clip.seconds
    return _Seconds(clip, label, pred, pred, gold, len(clip.seconds) - len(pred))


def evaluate(
    pred_records: Sequence[Clip | Mapping[str, Any]],
    label_records: Sequence[Clip | Mapping[str, Any]],
    judge: Judge | None = None,
    *,
    pairwise_judge: PairwiseJudge | None = None,
    baseline_records: Sequence[Clip | Mapping[str, Any]] | None = None,
    k: int = 2,
    alpha: float = 0.2,
    omegas: Sequence[float] = DEFAULT_OMEGAS,
    start_score: float = 0.0,
    answer_window: int = 5,
    drop_silent_seconds: bool = True,
    missing: Missing = "skip",
) -> dict[str, Any]:
    """Every metric over matched prediction/label clips, as one JSON-serialisable report.

    PAUC runs when ``judge`` is given, the win rate when ``pairwise_judge`` and
    ``baseline_records`` are. ``missing`` says what a label without a prediction does: ``"skip"``
    (the reference), ``"empty"`` (scored as an agent that said nothing) or ``"error"``.
    """
    if missing not in ("skip", "empty", "error"):
        raise LiveEvalError(f"missing must be 'skip', 'empty' or 'error', got {missing!r}")
    if (pairwise_judge is None) != (baseline_records is None):
        raise LiveEvalError("the win rate needs both a pairwise judge and baseline records")
    _check_omegas(omegas)
    matched = _match(pred_records, label_records, missing)
    clips = [_seconds(c, matched.label_index[c.key], drop_silent_seconds) for c in matched.preds]
    silenced = drop_silent if drop_silent_seconds else dict
    f1s, delays, rates = F1Tally(), TimeDiffTally(k, alpha), RateTally()
    paucs = PaucTally(judge, omegas, start_score) if judge is not None else None
    co, guidance, multi, rtf = (
        CoCommentaryTally(),
        GuidanceTally(answer_window),
        MultiAgentTally(),
        RtfTally(),
    )
    details: list[dict[str, Any]] = []
    for s in clips:
        clip, label, tag = s.clip, s.label, s.clip.tag
        row = clip.identity()
        row["f1"] = f1s.add(s.pred, s.gold, tag)
        row["timediff"] = delays.add(s.starts, s.gold, tag)
        row.update(rates.add(s.pred, s.gold, clip.duration, tag))
        if paucs is not None:
            row["pauc"] = paucs.add(s.starts, s.gold, tag, begin=clip.begin, end=clip.end)
        if label.other is not None:
            row["co_commentary"] = co.add(s.pred, silenced(label.other))
        if label.queries:
            row["guidance"] = guidance.add(s.pred, sorted(label.queries), tag)
        if clip.agents:
            row["multi_agent"] = multi.add(
                {n: silenced(t) for n, t in {"pred": s.pred, **clip.agents}.items()}
            )
        if clip.timing:
            row["rtf"] = rtf.add(clip.timing)
        details.append(row)
    report: dict[str, Any] = {
        "settings": {
            "k": k,
            "alpha": alpha,
            "omegas": list(omegas),
            "start_score": start_score,
            "answer_window": answer_window,
            "drop_silent": drop_silent_seconds,
            "missing": missing,
            "match_key": list(MATCH_KEY),
        },
        "counts": {
            "pred_clips": matched.pred_clips,
            "label_clips": len(matched.labels),
            "evaluated_clips": len(clips),
            "labels_without_pred": len(matched.unmatched),
            "empty_label_clips": sum(1 for s in clips if not s.gold),
            "silent_seconds_dropped": sum(s.dropped for s in clips),
        },
        "f1": f1s.summary(),
        "timediff": delays.summary(),
        "speaking_rate": rates.summary(),
        "pauc": paucs.summary() if paucs is not None else None,
        "win_rate": None,
        "co_commentary": co.summary(),
        "guidance": guidance.summary(),
        "multi_agent": multi.summary(),
        "rtf": rtf.summary(),
    }
    if pairwise_judge is not None and baseline_records is not None:
        report["win_rate"] = win_rate(
            [s.clip for s in clips],
            baseline_records,
            matched.labels,
            pairwise_judge,
            drop_silent_seconds=drop_silent_seconds,
        )
    report["summary"] = _headline(report)
    report["clips"] = details
    return report


def _headline(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's headline numbers, flat (``None`` where a metric did not run)."""
    f1s, td = report["f1"]["overall"], report["timediff"]["overall"]
    out: dict[str, Any] = {
        "clips": report["counts"]["evaluated_clips"],
        "f1_macro": f1s["macro"]["f1"],
        "f1_micro": f1s["micro"]["f1"],
        "timediff_mean": td["mean"],
        "pred_speaking_rate": report["speaking_rate"]["overall"]["pooled_pred_rate"],
        "label_speaking_rate": report["speaking_rate"]["overall"]["pooled_label_rate"],
    }
    pauc_report = report["pauc"]
    for omega, value in (pauc_report["overall"]["mean_auc"] if pauc_report else {}).items():
        out[f"pauc_omega_{omega}"] = value
    out["win_rate"] = report["win_rate"]["overall"]["win_rate"] if report["win_rate"] else None
    out["overlap_rate"] = report["co_commentary"]["pooled_overlap_rate"] if report["co_commentary"] else None
    out["answer_rate"] = report["guidance"]["overall"]["answer_rate"] if report["guidance"] else None
    out["rtf"] = report["rtf"]["rtf"] if report["rtf"] else None
    return out


def evaluate_files(
    pred_path: str | Path, label_path: str | Path, judge: Judge | None = None, **options: Any
) -> dict[str, Any]:
    """:func:`evaluate` over a prediction JSONL and a label JSONL (errors name file and line)."""
    preds, labels = read_clips(pred_path, "pred"), read_clips(label_path, "label")
    baseline = options.pop("baseline_path", None)
    if baseline is not None:
        options["baseline_records"] = read_clips(baseline, "pred")
    return evaluate(preds, labels, judge, **options)
