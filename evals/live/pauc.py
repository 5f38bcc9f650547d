"""PAUC of the live benchmark: the area under a clip's step curve of judge scores."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodia.core.scores import as_seconds
from embodia.evals.live.judges import Judge
from embodia.evals.live.records import LiveEvalError

MAX_Y = 2
"""The top of the PAUC y-axis: judge scores 1..3 become 0..2."""
DEFAULT_OMEGAS: tuple[float, ...] = (0.0, 0.5, 1.0)


def reference_text(label: Mapping[Any, str]) -> str:
    """The label's texts in time order, each stripped, empty ones skipped, joined by spaces."""
    parts = [text.strip() for _, text in sorted(as_seconds(label, "label", LiveEvalError).items())]
    return " ".join(p for p in parts if p)


def _strip_ellipsis(text: str) -> str:
    text = text.rstrip()
    if text.endswith("..."):
        return text[:-3].rstrip()
    if text.endswith("…"):
        return text[:-1].rstrip()
    return text


def merge_adjacent(items: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """Runs of consecutive seconds as one reply at the run's first second; the earlier piece's
    trailing ellipsis is dropped before the next is appended (``items`` sorted by second)."""
    merged: list[tuple[int, str]] = []
    last: int | None = None
    for t, text in items:
        if merged and last is not None and t - last == 1:
            start, buf = merged[-1]
            buf = _strip_ellipsis(buf)
            merged[-1] = (start, f"{buf} {text}" if buf and text else buf + text)
        else:
            merged.append((t, text))
        last = t
    return merged


def area_under_steps(
    points: Sequence[tuple[float, float]],
    max_x: float,
    max_y: float = MAX_Y,
    omega: float = 0.5,
    start_score: float = 0.0,
) -> float:
    """Normalised area under the step function through ``points`` (each ``y`` holds from its ``x``
    to the next point; ``start_score`` before the first), ``x`` scaled by ``1 - omega``, held to
    ``max_x``; 0 when there are no points."""
    if not points:
        return 0.0
    if max_x <= 0 or max_y <= 0:
        raise LiveEvalError(f"PAUC needs a positive span and y-range, got {max_x} and {max_y}")
    steps = sorted(((x * (1 - omega), y) for x, y in points), key=lambda p: p[0])
    steps.append((max_x, steps[-1][1]))
    area, prev_x, prev_y = 0.0, 0.0, start_score
    for x, y in steps:
        area += (x - prev_x) * prev_y
        prev_x, prev_y = x, y
    return area / (max_x * max_y)


def _omega_key(omega: float) -> str:
    return f"{omega:g}"


def _check_omegas(omegas: Sequence[float]) -> None:
    if not omegas:
        raise LiveEvalError("PAUC needs at least one omega")
    for omega in omegas:
        if not 0 <= omega <= 1:
            raise LiveEvalError(f"omega must lie in [0, 1], got {omega}")


def pauc(
    pred: Mapping[Any, str],
    label: Mapping[Any, str],
    judge: Judge,
    omegas: Sequence[float] = DEFAULT_OMEGAS,
    start_score: float = 0.0,
    *,
    begin: int,
    end: int,
) -> dict[str, Any]:
    """PAUC of one clip ``[begin, end]`` for each omega, with the judge's raw answers.

    Returns ``{"auc": {"0": ..., "0.5": ..., "1": ...}, "points": [[second, y], ...],
    "judgments": [...], "reference_empty", "unparseable"}``.
    """
    _check_omegas(omegas)
    if end <= begin:
        raise LiveEvalError(f"PAUC needs end > begin, got [{begin}, {end}]")
    gold = reference_text(label)
    points: list[tuple[int, int]] = []
    judgments: list[dict[str, Any]] = []
    unparseable = 0
    if gold:
        spoken = sorted(
            (t, text.strip())
            for t, text in as_seconds(pred, "pred", LiveEvalError).items()
            if begin <= t <= end and text.strip()
        )
        said: list[str] = []
        for t, reply in merge_adjacent(spoken):
            if reply in said:
                continue
            said.append(reply)
            cumulative = " ".join(said)
            verdict = judge.score(cumulative, gold)
            score = verdict.score
            if score is not None and not 1 <= score <= MAX_Y + 1:
                score = None
            judgments.append({"second": t, "prediction": cumulative, "raw": verdict.raw, "score": score})
            if score is None:
                unparseable += 1
            else:
                points.append((t, score - 1))
    if not points:
        unjudged = unjudged_pauc(omegas, start_score)
        unjudged.update(judgments=judgments, reference_empty=not gold, unparseable=unparseable)
        return unjudged
    xy = [(float(t - begin), float(y)) for t, y in points]
    return {
        "auc": {_omega_key(o): area_under_steps(xy, end - begin, MAX_Y, o, start_score) for o in omegas},
        "points": [[t, y] for t, y in points],
        "judgments": judgments,
        "reference_empty": not gold,
        "unparseable": unparseable,
    }


def unjudged_pauc(omegas: Sequence[float] = DEFAULT_OMEGAS, start_score: float = 0.0) -> dict[str, Any]:
    """The PAUC result of a clip with no judged reply: ``start_score / 2`` at every omega, as the
    reference counts it (also the reference's count of a prediction no label matches)."""
    return {
        "auc": {_omega_key(o): start_score / MAX_Y for o in omegas},
        "points": [],
        "judgments": [],
        "reference_empty": True,
        "unparseable": 0,
    }


def _pauc_summary(results: Sequence[dict[str, Any]], omegas: Sequence[float]) -> dict[str, Any]:
    return {
        "clips": len(results),
        "mean_auc": {
            _omega_key(o): float(np.mean([r["auc"][_omega_key(o)] for r in results])) if results else None
            for o in omegas
        },
    }


@dataclass
class PaucTally:
    """PAUC clip by clip with one judge: :meth:`add` scores one clip (:func:`pauc`, then
    :meth:`add_result`), :meth:`summary` gives the mean per omega, overall and per tag, with the
    judge's call counts. A tally of results computed elsewhere (on other workers) needs no
    judge, only its ``judge_name``."""

    judge: Judge | None = None
    omegas: Sequence[float] = DEFAULT_OMEGAS
    start_score: float = 0.0
    results: list[dict[str, Any]] = field(default_factory=list)
    by_tag: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    judge_name: str | None = None
    """The judge's name in the summary (default: ``judge.name``)."""

    def add(
        self, pred: Mapping[Any, str], label: Mapping[Any, str], tag: str, *, begin: int, end: int
    ) -> dict[str, Any]:
        if self.judge is None:
            raise LiveEvalError("PaucTally.add needs a judge (add_result takes results judged elsewhere)")
        result = pauc(pred, label, self.judge, self.omegas, self.start_score, begin=begin, end=end)
        return self.add_result(result, tag)

    def add_result(self, result: dict[str, Any], tag: str) -> dict[str, Any]:
        """Tally one clip's :func:`pauc` result computed already."""
        self.results.append(result)
        self.by_tag[tag].append(result)
        return result

    def summary(self) -> dict[str, Any]:
        results = self.results
        name = self.judge_name if self.judge_name is not None else getattr(self.judge, "name", None)
        return {
            "judge": name,
            "start_score": self.start_score,
            "overall": _pauc_summary(results, self.omegas),
            "by_tag": {t: _pauc_summary(self.by_tag[t], self.omegas) for t in sorted(self.by_tag)},
            "judge_calls": sum(len(r["judgments"]) for r in results),
            "unparseable": sum(r["unparseable"] for r in results),
            "clips_without_reference_text": sum(1 for r in results if r["reference_empty"]),
        }
