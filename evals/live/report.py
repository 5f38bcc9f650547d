"""The live benchmark's whole report: every metric over matched prediction/label files."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodia.core.scores import drop_silent, f1
from embodia.evals.live.judges import Judge, PairwiseJudge
from embodia.evals.live.pauc import DEFAULT_OMEGAS, _check_omegas, _pauc_summary, pauc
from embodia.evals.live.records import (
    Clip,
    LiveEvalError,
    Missing,
    _clips,
    _index,
    _no_match,
    read_clips,
)
from embodia.evals.live.timing import (
    _longest_run,
    _runs,
    concurrent_speech,
    f1_report,
    overlap_rate,
    query_response_delay,
    real_time_factor,
    time_diff,
    time_diff_report,
)
from embodia.evals.live.winrate import win_rate


def _mean_or_none(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


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
    if missing == "empty":
        preds = preds + [
            Clip(c.video_id, c.begin, c.end, {}, c.tag, c.dataset_name, c.idx, where=c.where)
            for c in unmatched
        ]

    dropped = 0
    # Per clip: the speaking seconds, the seconds replies start at (TimeDiff, PAUC) and the label.
    # They differ only for a caption, which speaks over the whole clip but is said at its begin.
    pairs: list[tuple[Clip, dict[int, str], dict[int, str], dict[int, str]]] = []
    for clip in preds:
        gt = label_index[clip.key].seconds
        if drop_silent_seconds:
            gt = drop_silent(gt)
        if clip.caption is not None:
            said = bool(clip.caption.strip())
            p = {t: clip.caption for t in range(clip.begin, clip.end + 1)} if said else {}
            starts = {clip.begin: clip.caption} if said else {}
        else:
            p = drop_silent(clip.seconds) if drop_silent_seconds else clip.seconds
            dropped += len(clip.seconds) - len(p)
            starts = p
        pairs.append((clip, p, starts, gt))
    tags = [clip.tag for clip, _, _, _ in pairs]

    details: list[dict[str, Any]] = []
    pauc_results: list[dict[str, Any]] = []
    pauc_by_tag: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rates_by_tag: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    co_rows: list[dict[str, Any]] = []
    guide_delays: list[int | None] = []
    guide_by_tag: dict[str, list[int | None]] = defaultdict(list)
    multi_rows: list[dict[str, Any]] = []
    timings: list[tuple[float, float]] = []
    for clip, p, starts, gt in pairs:
        label = label_index[clip.key]
        row: dict[str, Any] = {
            "video_id": clip.video_id,
            "begin": clip.begin,
            "end": clip.end,
            "dataset_name": clip.dataset_name,
            "idx": clip.idx,
            "tag": clip.tag,
            "f1": f1(p, gt),
            "timediff": time_diff(starts, gt, k, alpha),
            "speaking_rate": len(p) / clip.duration,
            "label_speaking_rate": len(gt) / clip.duration,
        }
        rates_by_tag[clip.tag].append((len(p), len(gt), clip.duration))
        if judge is not None:
            result = pauc(starts, gt, judge, omegas, start_score, begin=clip.begin, end=clip.end)
            pauc_results.append(result)
            pauc_by_tag[clip.tag].append(result)
            row["pauc"] = result
        if label.other is not None:
            other = drop_silent(label.other) if drop_silent_seconds else label.other
            both = set(p) & set(other)
            co = {
                "overlap_rate": overlap_rate(p, other),
                "overlap_seconds": len(both),
                "max_consecutive_overlap": _longest_run(both),
                "sustained_overlaps": sum(1 for n in _runs(both) if n >= 2),
                "pred_seconds": len(p),
            }
            co_rows.append(co)
            row["co_commentary"] = co
        if label.queries:
            delays = query_response_delay(p, sorted(label.queries))
            guide_delays.extend(delays)
            guide_by_tag[clip.tag].extend(delays)
            row["guidance"] = {"query_seconds": sorted(label.queries), "delays": delays}
        if clip.agents:
            everyone = {"pred": p, **clip.agents}
            if drop_silent_seconds:
                everyone = {n: drop_silent(s) for n, s in everyone.items()}
            multi = concurrent_speech(everyone)
            multi_rows.append(multi)
            row["multi_agent"] = multi
        if clip.timing:
            timings.extend(clip.timing)
            row["rtf"] = real_time_factor([t[0] for t in clip.timing], [t[1] for t in clip.timing])["rtf"]
        details.append(row)

    def rate_summary(rows: Sequence[tuple[int, int, int]]) -> dict[str, Any]:
        spoken, gold, duration = (sum(r[i] for r in rows) for i in range(3))
        return {
            "clips": len(rows),
            "mean_pred_rate": _mean_or_none([r[0] / r[2] for r in rows]),
            "mean_label_rate": _mean_or_none([r[1] / r[2] for r in rows]),
            "pooled_pred_rate": spoken / duration if duration else None,
            "pooled_label_rate": gold / duration if duration else None,
            "pred_to_label_ratio": spoken / gold if gold else None,
        }

    def guide_summary(delays: Sequence[int | None]) -> dict[str, Any]:
        answered = [d for d in delays if d is not None]
        return {
            "queries": len(delays),
            "never_answered": len(delays) - len(answered),
            "mean_delay": _mean_or_none(answered),
            "median_delay": float(np.median(answered)) if answered else None,
            "answer_rate": (sum(1 for d in answered if d <= answer_window) / len(delays) if delays else None),
            "window": answer_window,
            "window_inclusive": True,
        }

    report: dict[str, Any] = {
        "settings": {
            "k": k,
            "alpha": alpha,
            "omegas": list(omegas),
            "start_score": start_score,
            "answer_window": answer_window,
            "drop_silent": drop_silent_seconds,
            "missing": missing,
            "match_key": ["video_id", "begin", "end", "dataset_name", "idx"],
        },
        "counts": {
            "pred_clips": len(pred_index),
            "label_clips": len(labels),
            "evaluated_clips": len(pairs),
            "labels_without_pred": len(unmatched),
            "empty_label_clips": sum(1 for *_, gt in pairs if not gt),
            "silent_seconds_dropped": dropped,
        },
        "f1": f1_report([(p, gt) for _, p, _, gt in pairs], tags),
        "timediff": time_diff_report([(starts, gt) for _, _, starts, gt in pairs], tags, k, alpha),
        "speaking_rate": {
            "overall": rate_summary([r for rows in rates_by_tag.values() for r in rows]),
            "by_tag": {t: rate_summary(rates_by_tag[t]) for t in sorted(rates_by_tag)},
        },
        "pauc": None,
        "win_rate": None,
        "co_commentary": None,
        "guidance": None,
        "multi_agent": None,
        "rtf": None,
    }
    if judge is not None:
        report["pauc"] = {
            "judge": judge.name,
            "start_score": start_score,
            "overall": _pauc_summary(pauc_results, omegas),
            "by_tag": {t: _pauc_summary(pauc_by_tag[t], omegas) for t in sorted(pauc_by_tag)},
            "judge_calls": sum(len(r["judgments"]) for r in pauc_results),
            "unparseable": sum(r["unparseable"] for r in pauc_results),
            "clips_without_reference_text": sum(1 for r in pauc_results if r["reference_empty"]),
        }
    if pairwise_judge is not None and baseline_records is not None:
        report["win_rate"] = win_rate(
            [c for c, *_ in pairs],
            baseline_records,
            labels,
            pairwise_judge,
            drop_silent_seconds=drop_silent_seconds,
        )
    if co_rows:
        spoken = sum(r["pred_seconds"] for r in co_rows)
        overlapping = sum(r["overlap_seconds"] for r in co_rows)
        report["co_commentary"] = {
            "clips": len(co_rows),
            "mean_overlap_rate": _mean_or_none(
                [r["overlap_rate"] for r in co_rows if r["overlap_rate"] is not None]
            ),
            "pooled_overlap_rate": overlapping / spoken if spoken else None,
            "silent_clips": sum(1 for r in co_rows if r["overlap_rate"] is None),
            "max_consecutive_overlap": max(r["max_consecutive_overlap"] for r in co_rows),
            "sustained_overlaps": sum(r["sustained_overlaps"] for r in co_rows),
        }
    if guide_delays:
        report["guidance"] = {
            "overall": guide_summary(guide_delays),
            "by_tag": {t: guide_summary(guide_by_tag[t]) for t in sorted(guide_by_tag)},
        }
    if multi_rows:
        report["multi_agent"] = {
            "clips": len(multi_rows),
            "concurrent_seconds": sum(r["count"] for r in multi_rows),
            "clips_with_concurrent_speech": sum(1 for r in multi_rows if r["count"]),
            "max_speakers": max(r["max_speakers"] for r in multi_rows),
        }
    if timings:
        report["rtf"] = real_time_factor([t[0] for t in timings], [t[1] for t in timings])
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
