"""Scores shared by several rooms: per-second speaking F1 (the live-commentary timing score),
ROUGE-L over lower-cased words, the ranking scores of a detector (AUROC, average
precision, FPR at 95% TPR), and the expected calibration error of confidences.

The live benchmark (``embodia.evals.live``), the speak gate's training, the stream media
checks and the CLEVR answer checks all score with these, so they live on the lowest floor.
Seconds are read from ``{second: text}`` objects whose keys are whole seconds (ints or digit
strings); a second whose text is empty or only an ellipsis is *silent*.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from embodia.errors import EmbodiaError

_SECOND = re.compile(r"\d+")
_TOKEN = re.compile(r"[a-z0-9]+")


class ScoreInputError(EmbodiaError, ValueError):
    """Seconds or texts handed to a score are malformed."""


def is_silent(text: str) -> bool:
    """Whether a second's text says nothing: empty, or only an ellipsis (the ``" ..."`` filler)."""
    return text.strip() in ("", "...", "…")


def drop_silent(seconds: Mapping[int, str]) -> dict[int, str]:
    """The seconds whose text is not silent (see :func:`is_silent`)."""
    return {t: s for t, s in seconds.items() if not is_silent(s)}


def second_key(key: object, where: str, error: type[EmbodiaError] = ScoreInputError) -> int:
    if isinstance(key, bool):
        raise error(f"{where}: second {key!r} is not an integer")
    if isinstance(key, int):
        if key < 0:
            raise error(f"{where}: second {key} is negative")
        return key
    if isinstance(key, str) and _SECOND.fullmatch(key):
        return int(key)
    raise error(f"{where}: second {key!r} is not a non-negative integer")


def parse_seconds(
    value: object, where: str = "seconds", error: type[EmbodiaError] = ScoreInputError
) -> dict[int, str]:
    """``{"<sec>": text}`` (string or int keys) as ``{sec: text}``, checking every entry."""
    if not isinstance(value, Mapping):
        raise error(f"{where} must be an object of {{second: text}}, got {type(value).__name__}")
    out: dict[int, str] = {}
    for key, text in value.items():
        second = second_key(key, where, error)
        if not isinstance(text, str):
            raise error(f"{where}: second {key!r} holds a {type(text).__name__}, not a string")
        if second in out:
            raise error(f"{where}: second {second} appears twice")
        out[second] = text
    return dict(sorted(out.items()))


def as_seconds(
    value: Mapping[Any, str] | Iterable[Any],
    where: str = "seconds",
    error: type[EmbodiaError] = ScoreInputError,
) -> dict[int, str]:
    """Seconds given as ``{sec: text}`` or as an iterable of seconds (each with empty text)."""
    if isinstance(value, Mapping):
        return parse_seconds(value, where, error)
    return {second_key(s, where, error): "" for s in value}


class F1Clip(TypedDict):
    precision: float
    recall: float
    f1: float
    tp: int
    pred_count: int
    label_count: int


def f1_from(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def f1(pred: Mapping[Any, str] | Iterable[Any], label: Mapping[Any, str] | Iterable[Any]) -> F1Clip | None:
    """Per-second speaking overlap of one clip; ``None`` when the label has no second (skipped)."""
    p, gt = set(as_seconds(pred, "pred")), set(as_seconds(label, "label"))
    if not gt:
        return None
    tp = len(p & gt)
    precision = tp / len(p) if p else 0.0
    recall = tp / len(gt)
    return F1Clip(
        precision=precision,
        recall=recall,
        f1=f1_from(precision, recall),
        tp=tp,
        pred_count=len(p),
        label_count=len(gt),
    )


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric words, the unit of the lexical judges."""
    return _TOKEN.findall(text.lower())


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 (longest common subsequence of :func:`tokens`), 0 when either side is empty."""
    a, b = tokens(prediction), tokens(reference)
    if not a or not b:
        return 0.0
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, start=1):
            keep = row[j]
            row[j] = prev + 1 if x == y else max(row[j], row[j - 1])
            prev = keep
    lcs = row[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


# --------------------------------------------------------------------------- ranking scores


def _ranking_inputs(
    positives: Iterable[float], negatives: Iterable[float]
) -> tuple[list[float], list[float]]:
    pos, neg = [float(x) for x in positives], [float(x) for x in negatives]
    if not pos or not neg:
        raise ScoreInputError(
            f"a ranking score needs both classes: {len(pos)} positive and {len(neg)} negative scores"
        )
    if any(x != x for x in pos + neg):
        raise ScoreInputError("a ranking score was given a NaN score")
    return pos, neg


def _thresholds(positives: list[float], negatives: list[float]) -> list[tuple[int, int]]:
    """Cumulative (true positives, false positives) at each distinct score, highest first:
    tied scores enter together, as one threshold."""
    scored = sorted([(x, 1) for x in positives] + [(x, 0) for x in negatives], key=lambda pair: -pair[0])
    out: list[tuple[int, int]] = []
    tp = fp = 0
    for i, (score, label) in enumerate(scored):
        tp, fp = tp + label, fp + (1 - label)
        if i + 1 == len(scored) or scored[i + 1][0] != score:
            out.append((tp, fp))
    return out


def auroc(positives: Iterable[float], negatives: Iterable[float]) -> float:
    """The area under the ROC curve: the chance that a positive outscores a negative, a tie
    counting one half (the Mann-Whitney statistic; as ``sklearn.metrics.roc_auc_score``)."""
    pos, neg = _ranking_inputs(positives, negatives)
    ordered = sorted(neg)
    wins = sum(
        bisect.bisect_left(ordered, x)
        + 0.5 * (bisect.bisect_right(ordered, x) - bisect.bisect_left(ordered, x))
        for x in pos
    )
    return wins / (len(pos) * len(neg))


def average_precision(positives: Iterable[float], negatives: Iterable[float]) -> float:
    """AUPR as average precision: Σ (R_n - R_(n-1)) · P_n over the distinct thresholds, highest
    score first (as ``sklearn.metrics.average_precision_score``)."""
    pos, neg = _ranking_inputs(positives, negatives)
    total, previous_recall = 0.0, 0.0
    for tp, fp in _thresholds(pos, neg):
        recall = tp / len(pos)
        total += (recall - previous_recall) * tp / (tp + fp)
        previous_recall = recall
    return total


def fpr_at_tpr(positives: Iterable[float], negatives: Iterable[float], tpr: float = 0.95) -> float:
    """The false-positive rate at the highest threshold whose true-positive rate reaches
    ``tpr`` (FPR@95%TPR by default)."""
    if not 0 < tpr <= 1:
        raise ScoreInputError(f"tpr must be in (0, 1]; got {tpr!r}")
    pos, neg = _ranking_inputs(positives, negatives)
    for tp, fp in _thresholds(pos, neg):
        if tp / len(pos) >= tpr:
            return fp / len(neg)
    return 1.0


def reliability_bins(
    confidence: Iterable[float], correct: Iterable[bool], bins: int = 10
) -> list[tuple[float, float, int]]:
    """(mean confidence, accuracy, count) of each non-empty equal-width confidence bin, lowest
    first (the first bin closed, the others open on the left, as the usual implementations):
    the points of a reliability diagram."""
    import numpy as np

    conf = np.asarray(list(confidence), dtype=np.float64)
    right = np.asarray(list(correct), dtype=np.float64)
    if conf.shape != right.shape or conf.ndim != 1 or not len(conf):
        raise ScoreInputError(
            f"calibration needs one confidence per answer, got {conf.shape} and {right.shape}"
        )
    if bins < 1:
        raise ScoreInputError(f"calibration needs at least one bin, got {bins}")
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    return [
        (float(conf[which == b].mean()), float(right[which == b].mean()), int((which == b).sum()))
        for b in range(bins)
        if (which == b).any()
    ]


def calibration_error(confidence: Iterable[float], correct: Iterable[bool], bins: int = 10) -> float:
    """The expected calibration error: the sum over the :func:`reliability_bins` of the bin's
    share of samples times ``|accuracy - mean confidence|`` in it."""
    points = reliability_bins(confidence, correct, bins)
    total = sum(count for _, _, count in points)
    return float(sum(count / total * abs(accuracy - mean) for mean, accuracy, count in points))
