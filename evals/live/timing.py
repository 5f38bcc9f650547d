"""Timing metrics of the live benchmark: speaking F1 and TimeDiff reports, speaking rate,
co-commentary overlap, guidance delays, concurrent speech and the real-time factor."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from embodia.core.scores import F1Clip, as_seconds, f1, f1_from
from embodia.evals.live.records import UNTAGGED, LiveEvalError

# --------------------------------------------------------------------------- F1 and TimeDiff


def _f1_summary(results: Sequence[F1Clip]) -> dict[str, Any]:
    n = len(results)
    tp = sum(r["tp"] for r in results)
    pred_count = sum(r["pred_count"] for r in results)
    label_count = sum(r["label_count"] for r in results)
    micro_p = tp / pred_count if pred_count else 0.0
    micro_r = tp / label_count if label_count else 0.0
    return {
        "macro": {
            "clips": n,
            "precision": sum(r["precision"] for r in results) / n if n else 0.0,
            "recall": sum(r["recall"] for r in results) / n if n else 0.0,
            "f1": sum(r["f1"] for r in results) / n if n else 0.0,
        },
        "micro": {
            "clips": n,
            "tp": tp,
            "pred_count": pred_count,
            "label_count": label_count,
            "precision": micro_p,
            "recall": micro_r,
            "f1": f1_from(micro_p, micro_r),
        },
    }


def _tags(n: int, tags: Sequence[str] | None) -> list[str]:
    if tags is None:
        return [UNTAGGED] * n
    if len(tags) != n:
        raise LiveEvalError(f"got {len(tags)} tags for {n} clips")
    return list(tags)


@dataclass
class F1Tally:
    """Speaking F1 clip by clip: :meth:`add` scores one clip (:func:`f1`, then
    :meth:`add_result`), :meth:`summary` gives macro and micro F1, overall and per tag."""

    results: list[F1Clip] = field(default_factory=list)
    by_tag: dict[str, list[F1Clip]] = field(default_factory=lambda: defaultdict(list))
    skipped: int = 0

    def add(self, pred: Mapping[Any, str], label: Mapping[Any, str], tag: str = UNTAGGED) -> F1Clip | None:
        """One clip's F1 (``None``, and skipped, when its label is empty)."""
        return self.add_result(f1(pred, label), tag)

    def add_result(self, result: F1Clip | None, tag: str = UNTAGGED) -> F1Clip | None:
        """Tally one clip's F1 computed already (``None``: its label was empty, skipped)."""
        if result is None:
            self.skipped += 1
        else:
            self.results.append(result)
            self.by_tag[tag].append(result)
        return result

    def summary(self) -> dict[str, Any]:
        return {
            "overall": _f1_summary(self.results),
            "by_tag": {tag: _f1_summary(self.by_tag[tag]) for tag in sorted(self.by_tag)},
            "skipped_empty_label": self.skipped,
        }


def f1_report(
    pairs: Sequence[tuple[Mapping[Any, str], Mapping[Any, str]]], tags: Sequence[str] | None = None
) -> dict[str, Any]:
    """Macro and micro F1 over ``(pred, label)`` pairs, overall and per tag."""
    tally = F1Tally()
    for (pred, label), tag in zip(pairs, _tags(len(pairs), tags), strict=True):
        tally.add(pred, label, tag)
    return tally.summary()


class TimeDiffClip(TypedDict):
    first: int
    last: int
    response: int | None
    base: float
    out_of_range: int
    penalty: float
    timediff: float


def time_diff(
    pred: Mapping[Any, str], label: Mapping[Any, str] | Iterable[Any], k: int = 2, alpha: float = 0.2
) -> TimeDiffClip | None:
    """Response delay of one clip with the out-of-range penalty; ``None`` when the label is empty.

    The response is the first predicted second at or after the first label second, whatever
    its text; only seconds with non-empty text count towards the penalty (as the reference).
    """
    if k < 0 or alpha < 0:
        raise LiveEvalError(f"time_diff needs k >= 0 and alpha >= 0, got k={k} alpha={alpha}")
    p, gt = as_seconds(pred, "pred", LiveEvalError), as_seconds(label, "label", LiveEvalError)
    if not gt:
        return None
    first, last = min(gt), max(gt)
    later = [t for t in p if t >= first]
    response = min(later) if later else None
    base = float((response if response is not None else last) - first)
    out = sum(1 for t, text in p.items() if text and (t < first - k or t > last + k))
    penalty = alpha * out
    return TimeDiffClip(
        first=first,
        last=last,
        response=response,
        base=base,
        out_of_range=out,
        penalty=penalty,
        timediff=base + penalty,
    )


def _mean_summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "mean": float(np.mean(values)) if values else None,
        "min": float(min(values)) if values else None,
        "max": float(max(values)) if values else None,
    }


@dataclass
class TimeDiffTally:
    """TimeDiff clip by clip: :meth:`add` scores one clip (:func:`time_diff`, then
    :meth:`add_result`), :meth:`summary` gives the mean, overall (with the penalties and the
    clips never answered) and per tag."""

    k: int = 2
    alpha: float = 0.2
    results: list[TimeDiffClip] = field(default_factory=list)
    by_tag: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    skipped: int = 0

    def add(
        self, pred: Mapping[Any, str], label: Mapping[Any, str], tag: str = UNTAGGED
    ) -> TimeDiffClip | None:
        """One clip's TimeDiff (``None``, and skipped, when its label is empty)."""
        return self.add_result(time_diff(pred, label, self.k, self.alpha), tag)

    def add_result(self, result: TimeDiffClip | None, tag: str = UNTAGGED) -> TimeDiffClip | None:
        """Tally one clip's TimeDiff computed already (``None``: its label was empty, skipped)."""
        if result is None:
            self.skipped += 1
        else:
            self.results.append(result)
            self.by_tag[tag].append(result["timediff"])
        return result

    def summary(self) -> dict[str, Any]:
        results = self.results
        overall = _mean_summary([r["timediff"] for r in results])
        overall["total_penalty"] = sum(r["penalty"] for r in results)
        overall["total_out_of_range"] = sum(r["out_of_range"] for r in results)
        overall["never_responded"] = sum(1 for r in results if r["response"] is None)
        return {
            "overall": overall,
            "by_tag": {tag: _mean_summary(self.by_tag[tag]) for tag in sorted(self.by_tag)},
            "skipped_empty_label": self.skipped,
            "k": self.k,
            "alpha": self.alpha,
        }


def time_diff_report(
    pairs: Sequence[tuple[Mapping[Any, str], Mapping[Any, str]]],
    tags: Sequence[str] | None = None,
    k: int = 2,
    alpha: float = 0.2,
) -> dict[str, Any]:
    """Mean TimeDiff (seconds) over ``(pred, label)`` pairs, overall and per tag."""
    tally = TimeDiffTally(k, alpha)
    for (pred, label), tag in zip(pairs, _tags(len(pairs), tags), strict=True):
        tally.add(pred, label, tag)
    return tally.summary()


# --------------------------------------------------------------------------- co-commentary, guidance, rates


def overlap_rate(
    pred: Mapping[Any, str] | Iterable[Any], other_label: Mapping[Any, str] | Iterable[Any]
) -> float | None:
    """Share of the agent's speaking seconds on which another caster also speaks; ``None`` when
    the agent never speaks."""
    p, o = set(as_seconds(pred, "pred", LiveEvalError)), set(as_seconds(other_label, "other", LiveEvalError))
    return len(p & o) / len(p) if p else None


def _longest_run(seconds: Iterable[int]) -> int:
    best = run = 0
    last: int | None = None
    for t in sorted(set(seconds)):
        run = run + 1 if last is not None and t == last + 1 else 1
        best, last = max(best, run), t
    return best


def _runs(seconds: Iterable[int]) -> list[int]:
    lengths: list[int] = []
    last: int | None = None
    for t in sorted(set(seconds)):
        if last is not None and t == last + 1:
            lengths[-1] += 1
        else:
            lengths.append(1)
        last = t
    return lengths


def max_consecutive_overlap(
    pred: Mapping[Any, str] | Iterable[Any], other_label: Mapping[Any, str] | Iterable[Any]
) -> int:
    """The longest run of consecutive seconds on which the agent and another caster both speak."""
    return _longest_run(
        set(as_seconds(pred, "pred", LiveEvalError)) & set(as_seconds(other_label, "other", LiveEvalError))
    )


def concurrent_speech(preds: Mapping[str, Mapping[Any, str] | Iterable[Any]]) -> dict[str, Any]:
    """Seconds on which two or more agents speak, for self-play over one clip."""
    speakers: dict[int, list[str]] = defaultdict(list)
    for name, seconds in preds.items():
        for t in as_seconds(seconds, f"agent {name!r}", LiveEvalError):
            speakers[t].append(name)
    clash = sorted(t for t, names in speakers.items() if len(names) >= 2)
    return {
        "seconds": clash,
        "count": len(clash),
        "max_speakers": max((len(v) for v in speakers.values()), default=0),
        "longest_run": _longest_run(clash),
    }


def query_response_delay(
    pred: Mapping[Any, str] | Iterable[Any], query_seconds: Iterable[int]
) -> list[int | None]:
    """Per query: first predicted second at or after the query's second, minus it (``None`` when
    the agent never speaks again)."""
    spoken = sorted(as_seconds(pred, "pred", LiveEvalError))
    out: list[int | None] = []
    for q in query_seconds:
        after = [t for t in spoken if t >= q]
        out.append(after[0] - q if after else None)
    return out


def answer_rate(
    pred: Mapping[Any, str] | Iterable[Any], query_seconds: Iterable[int], window: int = 5
) -> float | None:
    """Share of queries answered with a delay ``<= window`` seconds (inclusive); ``None`` with no
    queries."""
    if window < 0:
        raise LiveEvalError(f"answer window must be >= 0, got {window}")
    delays = query_response_delay(pred, query_seconds)
    if not delays:
        return None
    return sum(1 for d in delays if d is not None and d <= window) / len(delays)


def speaking_rate(seconds: Mapping[Any, str] | Iterable[Any], duration: int) -> float:
    """Spoken seconds per second of clip."""
    if duration <= 0:
        raise LiveEvalError(f"speaking rate needs a positive duration, got {duration}")
    return len(as_seconds(seconds, "seconds", LiveEvalError)) / duration


def real_time_factor(
    processing_s: Sequence[float], stream_s: float | Sequence[float] = 1.0
) -> dict[str, Any]:
    """Processing time over stream time for a run of chunks, and the backlog a real-time player
    would build (each chunk's work queued behind the previous ones' excess)."""
    proc = [float(p) for p in processing_s]
    stream = (
        [float(stream_s)] * len(proc) if isinstance(stream_s, int | float) else [float(s) for s in stream_s]
    )
    if len(stream) != len(proc):
        raise LiveEvalError(f"got {len(stream)} stream durations for {len(proc)} chunks")
    if any(not math.isfinite(p) or p < 0 for p in proc) or any(
        not math.isfinite(s) or s <= 0 for s in stream
    ):
        raise LiveEvalError("chunk timings must be finite, processing >= 0 and stream > 0")
    backlog = max_backlog = 0.0
    for p, s in zip(proc, stream, strict=True):
        backlog = max(0.0, backlog + p - s)
        max_backlog = max(max_backlog, backlog)
    total_p, total_s = sum(proc), sum(stream)
    return {
        "chunks": len(proc),
        "processing_s": total_p,
        "stream_s": total_s,
        "rtf": total_p / total_s if proc else None,
        "max_chunk_rtf": max((p / s for p, s in zip(proc, stream, strict=True)), default=None),
        "late_chunks": sum(1 for p, s in zip(proc, stream, strict=True) if p > s),
        "final_backlog_s": backlog,
        "max_backlog_s": max_backlog,
    }


# --------------------------------------------------------------------------- tallies for the report


def _mean_or_none(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _rate_summary(rows: Sequence[tuple[int, int, int]]) -> dict[str, Any]:
    spoken, gold, duration = (sum(r[i] for r in rows) for i in range(3))
    return {
        "clips": len(rows),
        "mean_pred_rate": _mean_or_none([r[0] / r[2] for r in rows]),
        "mean_label_rate": _mean_or_none([r[1] / r[2] for r in rows]),
        "pooled_pred_rate": spoken / duration if duration else None,
        "pooled_label_rate": gold / duration if duration else None,
        "pred_to_label_ratio": spoken / gold if gold else None,
    }


def clip_rates(spoken: int, gold: int, duration: int) -> dict[str, float]:
    """One clip's speaking rate beside its label's, from the seconds each speaks."""
    return {"speaking_rate": spoken / duration, "label_speaking_rate": gold / duration}


@dataclass
class RateTally:
    """Speaking rates clip by clip, the agent's beside the label's; mean and pooled, per tag."""

    by_tag: dict[str, list[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(list))

    def add(
        self, pred: Mapping[int, str], label: Mapping[int, str], duration: int, tag: str
    ) -> dict[str, float]:
        return self.add_result(len(pred), len(label), duration, tag)

    def add_result(self, spoken: int, gold: int, duration: int, tag: str) -> dict[str, float]:
        """Tally one clip from its counts: seconds spoken by the agent and by the label."""
        self.by_tag[tag].append((spoken, gold, duration))
        return clip_rates(spoken, gold, duration)

    def summary(self) -> dict[str, Any]:
        return {
            "overall": _rate_summary([r for rows in self.by_tag.values() for r in rows]),
            "by_tag": {t: _rate_summary(self.by_tag[t]) for t in sorted(self.by_tag)},
        }


@dataclass
class _RowTally(ABC):
    """A tally that keeps one row per clip it saw; its summary is ``None`` when it saw none."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add_result(self, row: dict[str, Any]) -> dict[str, Any]:
        """Tally one clip's row computed already."""
        self.rows.append(row)
        return row

    def summary(self) -> dict[str, Any] | None:
        return self._summarise(self.rows) if self.rows else None

    @abstractmethod
    def _summarise(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The summary of the rows (at least one)."""


def co_commentary(pred: Mapping[int, str], other: Mapping[int, str]) -> dict[str, Any]:
    """One clip's overlap with the other casters: its rate, seconds, longest and sustained runs."""
    both = set(pred) & set(other)
    return {
        "overlap_rate": overlap_rate(pred, other),
        "overlap_seconds": len(both),
        "max_consecutive_overlap": _longest_run(both),
        "sustained_overlaps": sum(1 for n in _runs(both) if n >= 2),
        "pred_seconds": len(pred),
    }


class CoCommentaryTally(_RowTally):
    """Overlap with the other casters clip by clip (the clips whose label has them)."""

    def add(self, pred: Mapping[int, str], other: Mapping[int, str]) -> dict[str, Any]:
        return self.add_result(co_commentary(pred, other))

    def _summarise(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        spoken = sum(r["pred_seconds"] for r in rows)
        overlapping = sum(r["overlap_seconds"] for r in rows)
        return {
            "clips": len(rows),
            "mean_overlap_rate": _mean_or_none(
                [r["overlap_rate"] for r in rows if r["overlap_rate"] is not None]
            ),
            "pooled_overlap_rate": overlapping / spoken if spoken else None,
            "silent_clips": sum(1 for r in rows if r["overlap_rate"] is None),
            "max_consecutive_overlap": max(r["max_consecutive_overlap"] for r in rows),
            "sustained_overlaps": sum(r["sustained_overlaps"] for r in rows),
        }


def guidance(pred: Mapping[int, str], query_seconds: Sequence[int]) -> dict[str, Any]:
    """One clip's query seconds and each query's response delay (:func:`query_response_delay`)."""
    return {"query_seconds": list(query_seconds), "delays": query_response_delay(pred, query_seconds)}


@dataclass
class GuidanceTally:
    """Query response delays clip by clip; the answer rate counts delays ``<= window`` (inclusive).
    ``None`` as the summary when no label had a query."""

    window: int = 5
    delays: list[int | None] = field(default_factory=list)
    by_tag: dict[str, list[int | None]] = field(default_factory=lambda: defaultdict(list))

    def add(self, pred: Mapping[int, str], query_seconds: Sequence[int], tag: str) -> dict[str, Any]:
        return self.add_result(guidance(pred, query_seconds), tag)

    def add_result(self, row: dict[str, Any], tag: str) -> dict[str, Any]:
        """Tally one clip's ``{"query_seconds", "delays"}`` computed already."""
        self.delays.extend(row["delays"])
        self.by_tag[tag].extend(row["delays"])
        return row

    def _summary(self, delays: Sequence[int | None]) -> dict[str, Any]:
        answered = [d for d in delays if d is not None]
        return {
            "queries": len(delays),
            "never_answered": len(delays) - len(answered),
            "mean_delay": _mean_or_none(answered),
            "median_delay": float(np.median(answered)) if answered else None,
            "answer_rate": (sum(1 for d in answered if d <= self.window) / len(delays) if delays else None),
            "window": self.window,
            "window_inclusive": True,
        }

    def summary(self) -> dict[str, Any] | None:
        if not self.delays:
            return None
        return {
            "overall": self._summary(self.delays),
            "by_tag": {t: self._summary(self.by_tag[t]) for t in sorted(self.by_tag)},
        }


class MultiAgentTally(_RowTally):
    """Concurrent speech of self-play agents clip by clip (the clips with other agents)."""

    def add(self, agents: Mapping[str, Mapping[int, str]]) -> dict[str, Any]:
        return self.add_result(concurrent_speech(agents))

    def _summarise(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {
            "clips": len(rows),
            "concurrent_seconds": sum(r["count"] for r in rows),
            "clips_with_concurrent_speech": sum(1 for r in rows if r["count"]),
            "max_speakers": max(r["max_speakers"] for r in rows),
        }


@dataclass
class RtfTally:
    """Chunk timings clip by clip: each clip's real-time factor, and the whole run's (with its
    backlog) as the summary; ``None`` when no prediction carried timings."""

    timings: list[tuple[float, float]] = field(default_factory=list)

    def add(self, timing: Sequence[tuple[float, float]]) -> float | None:
        """Tally one clip's chunk timings; its own real-time factor."""
        rtf: float | None = real_time_factor([t[0] for t in timing], [t[1] for t in timing])["rtf"]
        self.add_result(timing)
        return rtf

    def add_result(self, timing: Sequence[Sequence[float]]) -> None:
        """Tally one clip's ``(processing_s, stream_s)`` chunk timings (the summary pools them)."""
        self.timings.extend((float(p), float(s)) for p, s in timing)

    def summary(self) -> dict[str, Any] | None:
        if not self.timings:
            return None
        return real_time_factor([t[0] for t in self.timings], [t[1] for t in self.timings])
