"""The live benchmark's whole report: every metric over matched prediction/label files.

:func:`evaluate` works in three steps, which a run over many workers takes apart
(:mod:`~embodia.evals.live.units`): :func:`plan_clips` matches the clips into units
(:class:`ClipUnit`: a prediction, its label and its baseline), :func:`score_clip` scores one
unit into a JSON-safe row (every per-clip result, the judges' included: this is where the
judges are called), and :func:`report_from_rows` sums the rows up with one tally per metric.
A row holds everything the summaries need, so a report built from rows read back from a file
is the report built from the rows as they were scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodia.core.scores import drop_silent, f1
from embodia.evals.live.judges import Judge, PairwiseJudge
from embodia.evals.live.pauc import DEFAULT_OMEGAS, MAX_Y, PaucTally, _check_omegas, pauc, unjudged_pauc
from embodia.evals.live.records import (
    MATCH_KEY,
    Clip,
    ClipKey,
    Counting,
    LiveEvalError,
    Missing,
    _clips,
    _index,
    _no_match,
    check_counting,
    drops_silent,
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
    clip_rates,
    co_commentary,
    concurrent_speech,
    guidance,
    real_time_factor,
    time_diff,
)
from embodia.evals.live.winrate import WinTally, judge_pair


@dataclass(frozen=True)
class ClipUnit:
    """One matched clip to score: the prediction, its label, and the baseline's prediction of
    the same clip when the win rate runs."""

    clip: Clip
    label: Clip
    baseline: Clip | None = None

    @property
    def key(self) -> ClipKey:
        return self.clip.key


@dataclass(frozen=True)
class ClipPlan:
    """The units to score, in the predictions' order (then the labels' without a prediction,
    with ``missing="empty"``), and what the report counts of the matching."""

    units: list[ClipUnit]
    pred_clips: int
    """How many predictions the caller gave (``units`` adds silent ones with ``missing="empty"``)."""
    label_clips: int
    labels_without_pred: int
    preds_without_label: tuple[Clip, ...] = ()
    """Predictions no label matches, left out of the units (the reference's counting)."""


def plan_clips(
    pred_records: Sequence[Clip | Mapping[str, Any]],
    label_records: Sequence[Clip | Mapping[str, Any]],
    baseline_records: Sequence[Clip | Mapping[str, Any]] | None = None,
    missing: Missing = "skip",
    counting: Counting = "embodia",
) -> ClipPlan:
    """Match predictions (and the baseline's, when given) to labels; every clip's match is
    checked here, before any judge is asked. ``missing`` says what a label without a prediction
    does: ``"skip"`` (the reference), ``"empty"`` (scored as silence) or ``"error"``. A
    prediction without a label is an error in embodia's ``counting``; in the reference's it is
    left out of the units and kept in :attr:`ClipPlan.preds_without_label` (PAUC counts it)."""
    if missing not in ("skip", "empty", "error"):
        raise LiveEvalError(f"missing must be 'skip', 'empty' or 'error', got {missing!r}")
    check_counting(counting)
    preds = _clips(pred_records, "pred", "prediction")
    labels = _clips(label_records, "label", "label")
    pred_index, label_index = _index(preds, "prediction"), _index(labels, "label")
    orphans = tuple(clip for clip in preds if clip.key not in label_index)
    if orphans and counting == "embodia":
        raise _no_match(orphans[0], label_index, "label")
    preds = [clip for clip in preds if clip.key in label_index]
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
    base_index: dict[ClipKey, Clip] | None = None
    if baseline_records is not None:
        base_index = _index(_clips(baseline_records, "pred", "B"), "B prediction")
        for clip in scored:
            if clip.key not in base_index:
                raise _no_match(clip, base_index, "B prediction")
    units = [
        ClipUnit(c, label_index[c.key], None if base_index is None else base_index[c.key]) for c in scored
    ]
    return ClipPlan(units, len(pred_index), len(labels), len(unmatched), orphans)


@dataclass(frozen=True)
class ClipOptions:
    """The settings one clip's row depends on (the report's other settings only sum rows up)."""

    k: int = 2
    alpha: float = 0.2
    omegas: tuple[float, ...] = DEFAULT_OMEGAS
    start_score: float = 0.0
    drop_silent_seconds: bool = True
    counting: Counting = "embodia"

    def __post_init__(self) -> None:
        _check_omegas(self.omegas)
        check_counting(self.counting)
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise LiveEvalError(
                f"k (TimeDiff's tolerance in seconds) must be a whole number >= 0, got {self.k!r}"
            )
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise LiveEvalError(
                f"alpha (TimeDiff's penalty per second) must be a number >= 0, got {self.alpha!r}"
            )
        if not (math.isfinite(self.start_score) and 0 <= self.start_score <= MAX_Y):
            raise LiveEvalError(
                f"start_score (PAUC's score before a reply) must lie in [0, {MAX_Y}], got {self.start_score}"
            )
        if self.counting == "reference" and self.drop_silent_seconds:
            raise LiveEvalError(
                "the reference's counting keeps filler seconds: drop_silent_seconds must be False"
            )


@dataclass(frozen=True)
class _Seconds:
    """One matched clip's seconds as the metrics read them: the speaking seconds, the seconds
    replies start at (TimeDiff, PAUC) and the label's. Speaking seconds and reply starts differ
    only for a caption, which speaks over the whole clip but is said at its begin."""

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
        return _Seconds(pred, {clip.begin: clip.caption} if said else {}, gold, 0)
    pred = drop_silent(clip.seconds) if drop_silent_seconds else clip.seconds
    return _Seconds(pred, pred, gold, len(clip.seconds) - len(pred))


def score_clip(
    unit: ClipUnit,
    options: ClipOptions | None = None,
    judge: Judge | None = None,
    pairwise_judge: PairwiseJudge | None = None,
) -> dict[str, Any]:
    """One clip's row, JSON-safe: ``clip`` (the report's row of the clip: F1, TimeDiff, rates,
    PAUC when ``judge`` is given, co-commentary, guidance, self-play and RTF where the records
    carry them), ``counts`` (seconds spoken by the agent and by the label, silent ones dropped),
    ``timing`` (the chunk timings, pooled for the run's RTF), ``win`` (the clip's two pairwise
    judgments when ``pairwise_judge`` is given) and ``judges`` (their names)."""
    options = options or ClipOptions()
    clip, label = unit.clip, unit.label
    s = _seconds(clip, label, options.drop_silent_seconds)
    silenced = drop_silent if options.drop_silent_seconds else dict
    row = clip.identity()
    row["f1"] = f1(s.pred, s.gold)
    row["timediff"] = time_diff(s.starts, s.gold, options.k, options.alpha)
    row.update(clip_rates(len(s.pred), len(s.gold), clip.duration))
    if judge is not None and clip.caption is not None and options.counting == "reference":
        row["pauc"] = None  # the reference's PAUC reads per-second predictions only
    elif judge is not None:
        row["pauc"] = pauc(
            s.starts, s.gold, judge, options.omegas, options.start_score, begin=clip.begin, end=clip.end
        )
    if label.other is not None:
        row["co_commentary"] = co_commentary(s.pred, silenced(label.other))
    if label.queries:
        row["guidance"] = guidance(s.pred, sorted(label.queries))
    if clip.agents:
        row["multi_agent"] = concurrent_speech(
            {n: silenced(t) for n, t in {"pred": s.pred, **clip.agents}.items()}
        )
    if clip.timing:
        row["rtf"] = real_time_factor([t[0] for t in clip.timing], [t[1] for t in clip.timing])["rtf"]
    win = None
    if pairwise_judge is not None:
        if unit.baseline is None:
            raise LiveEvalError(f"{clip.where}: the win rate needs the baseline's clip {clip.describe()}")
        win = judge_pair(
            clip,
            unit.baseline,
            label,
            pairwise_judge,
            drop_silent_seconds=options.drop_silent_seconds,
            baseline_as_stored=options.counting == "reference",
        )
    return {
        "clip": row,
        "counts": {"pred_seconds": len(s.pred), "label_seconds": len(s.gold), "silent_dropped": s.dropped},
        "timing": [list(t) for t in clip.timing] if clip.timing else None,
        "win": win,
        "judges": {
            "pauc": None if judge is None else judge.name,
            "pairwise": None if pairwise_judge is None else pairwise_judge.name,
        },
    }


def report_from_rows(
    rows: Sequence[Mapping[str, Any]],
    plan: ClipPlan,
    options: ClipOptions | None = None,
    *,
    answer_window: int = 5,
    missing: Missing = "skip",
    judge: str | None = None,
    pairwise_judge: str | None = None,
) -> dict[str, Any]:
    """The report of the plan's clips from their :func:`score_clip` rows, in the plan's order.
    ``judge`` and ``pairwise_judge`` name the judges that scored the rows: PAUC is summed up when
    ``judge`` is given, the win rate when ``pairwise_judge`` is."""
    options = options or ClipOptions()
    if len(rows) != len(plan.units):
        raise LiveEvalError(f"got {len(rows)} clip rows for {len(plan.units)} clips")
    f1s, delays, rates = F1Tally(), TimeDiffTally(options.k, options.alpha), RateTally()
    paucs = (
        PaucTally(None, options.omegas, options.start_score, judge_name=judge) if judge is not None else None
    )
    wins = WinTally(judge_name=pairwise_judge) if pairwise_judge is not None else None
    co, guide, multi, rtf = CoCommentaryTally(), GuidanceTally(answer_window), MultiAgentTally(), RtfTally()
    details: list[dict[str, Any]] = []
    for row in rows:
        clip, counts = row["clip"], row["counts"]
        tag = clip["tag"]
        f1s.add_result(clip["f1"], tag)
        delays.add_result(clip["timediff"], tag)
        rates.add_result(counts["pred_seconds"], counts["label_seconds"], clip["end"] - clip["begin"], tag)
        caption_left_out = options.counting == "reference" and "pauc" in clip and clip["pauc"] is None
        if paucs is not None and not caption_left_out:
            paucs.add_result(_part(clip, "pauc", "a PAUC judge"), tag)
        if "co_commentary" in clip:
            co.add_result(clip["co_commentary"])
        if "guidance" in clip:
            guide.add_result(clip["guidance"], tag)
        if "multi_agent" in clip:
            multi.add_result(clip["multi_agent"])
        if row["timing"]:
            rtf.add_result(row["timing"])
        if wins is not None:
            wins.add_result(_part(row, "win", "a pairwise judge"))
        details.append(clip)
    if paucs is not None and options.counting == "reference":
        for orphan in plan.preds_without_label:  # as the reference's PAUC: a clip with no reply judged
            paucs.add_result(unjudged_pauc(options.omegas, options.start_score), orphan.tag)
    report: dict[str, Any] = {
        "settings": {
            "k": options.k,
            "alpha": options.alpha,
            "omegas": list(options.omegas),
            "start_score": options.start_score,
            "answer_window": answer_window,
            "drop_silent": options.drop_silent_seconds,
            "counting": options.counting,
            "missing": missing,
            "match_key": list(MATCH_KEY),
        },
        "counts": {
            "pred_clips": plan.pred_clips,
            "label_clips": plan.label_clips,
            "evaluated_clips": len(rows),
            "labels_without_pred": plan.labels_without_pred,
            "preds_without_label": len(plan.preds_without_label),
            "empty_label_clips": sum(1 for r in rows if not r["counts"]["label_seconds"]),
            "silent_seconds_dropped": sum(r["counts"]["silent_dropped"] for r in rows),
        },
        "f1": f1s.summary(),
        "timediff": delays.summary(),
        "speaking_rate": rates.summary(),
        "pauc": paucs.summary() if paucs is not None else None,
        "win_rate": wins.summary() if wins is not None else None,
        "co_commentary": co.summary(),
        "guidance": guide.summary(),
        "multi_agent": multi.summary(),
        "rtf": rtf.summary(),
    }
    report["summary"] = _headline(report)
    report["clips"] = details
    return report


def _part(row: Mapping[str, Any], name: str, what: str) -> Any:
    value = row.get(name)
    if value is None:
        raise LiveEvalError(f"the row of clip {row.get('video_id', '?')} was scored without {what}")
    return value


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
    drop_silent_seconds: bool | None = None,
    missing: Missing = "skip",
    counting: Counting = "embodia",
) -> dict[str, Any]:
    """Every metric over matched prediction/label clips, as one JSON-serialisable report.

    PAUC runs when ``judge`` is given, the win rate when ``pairwise_judge`` and
    ``baseline_records`` are. ``missing`` says what a label without a prediction does: ``"skip"``
    (the reference), ``"empty"`` (scored as an agent that said nothing) or ``"error"``.
    ``counting="reference"`` counts as the reference's scripts do (filler seconds kept,
    predictions without a label left out, the baseline shown to the judge as stored; see
    :mod:`embodia.evals.live`); ``drop_silent_seconds`` defaults to embodia's counting.
    The clips are scored one after another here (:func:`score_clip`); ``embodia eval live``
    scores them as units of a resumable run instead (:mod:`~embodia.evals.live.units`).
    """
    if missing not in ("skip", "empty", "error"):
        raise LiveEvalError(f"missing must be 'skip', 'empty' or 'error', got {missing!r}")
    if (pairwise_judge is None) != (baseline_records is None):
        raise LiveEvalError("the win rate needs both a pairwise judge and baseline records")
    check_counting(counting)
    drop = drops_silent(counting, drop_silent_seconds)
    options = ClipOptions(k, alpha, tuple(omegas), start_score, drop, counting)
    plan = plan_clips(pred_records, label_records, baseline_records, missing, counting)
    rows = [score_clip(unit, options, judge, pairwise_judge) for unit in plan.units]
    return report_from_rows(
        rows,
        plan,
        options,
        answer_window=answer_window,
        missing=missing,
        judge=None if judge is None else judge.name,
        pairwise_judge=None if pairwise_judge is None else pairwise_judge.name,
    )


def _headline(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's headline numbers, flat (``None`` where a metric did not run)."""
    f1s, td = report["f1"]["overall"], report["timediff"]["overall"]
    out: dict[str, Any] = {
        "counting": report["settings"]["counting"],
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
