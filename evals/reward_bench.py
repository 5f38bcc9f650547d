"""CMIRewardBench-style scoring of music reward models (``docs/rewards.md``).

**Pairwise accuracy** (:func:`pairwise_accuracy`): a pair's label and a model's verdict are each
``a``, ``b`` or ``tie``. A pair scores 1 when they agree, **0.5 when either is a tie** (and they
differ), else 0, as CMIRewardBench's evaluator scores "both"/"neither". A model's verdict
comes from its two scores (:func:`verdict`): a tie when they are within ``tie_margin``.

**Score agreement** (:func:`correlations`): Spearman, Pearson and Kendall's tau between a
model's scores and reference scores (the benchmark's MOS sets).

**Breakdowns** (:func:`breakdown`): the pairwise accuracy per value of a pair's field, such as
its degradation or its modality subset (:func:`modality`: ``T`` text only, ``L`` text and
lyrics, ``A`` text and a reference audio prompt, ``C`` all three).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from embodia.errors import EmbodiaError

VERDICTS = ("a", "b", "tie")
DIMENSIONS = ("musicality", "alignment")


class RewardBenchError(EmbodiaError, ValueError):
    """Bench items or scores that cannot be scored; the message names the problem."""


def _check_verdict(value: object, where: str) -> str:
    if value not in VERDICTS:
        raise RewardBenchError(f"{where} is one of a, b, tie; got {value!r}")
    return str(value)


def pair_score(predicted: str, label: str) -> float:
    """1 when the verdict agrees with the label, 0.5 when either is a tie, else 0."""
    _check_verdict(predicted, "a verdict")
    _check_verdict(label, "a label")
    if predicted == label:
        return 1.0
    return 0.5 if "tie" in (predicted, label) else 0.0


def verdict(score_a: float, score_b: float, tie_margin: float = 0.0) -> str:
    """``a``, ``b`` or ``tie`` (scores within ``tie_margin``) from a model's two scores."""
    if not (np.isfinite(score_a) and np.isfinite(score_b)):
        raise RewardBenchError(f"scores must be finite, got {score_a} and {score_b}")
    if abs(score_a - score_b) <= tie_margin:
        return "tie"
    return "a" if score_a > score_b else "b"


def pairwise_accuracy(predicted: Sequence[str], labels: Sequence[str]) -> float:
    """The mean :func:`pair_score` over the pairs."""
    if len(predicted) != len(labels) or not labels:
        raise RewardBenchError(f"{len(predicted)} verdicts for {len(labels)} labels (and at least one pair)")
    return float(np.mean([pair_score(p, y) for p, y in zip(predicted, labels, strict=True)]))


def correlations(scores: Sequence[float], references: Sequence[float]) -> dict[str, float | None]:
    """Spearman, Pearson and Kendall's tau (b) of ``scores`` against ``references``; None where
    one side is constant."""
    from scipy import stats

    x, y = np.asarray(scores, dtype=np.float64), np.asarray(references, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise RewardBenchError(
            f"correlations need two equal-length series of at least 2, got {x.shape} and {y.shape}"
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise RewardBenchError("correlations need finite scores")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"spearman": None, "pearson": None, "kendall": None}
    return {
        "spearman": float(stats.spearmanr(x, y).statistic),
        "pearson": float(stats.pearsonr(x, y).statistic),
        "kendall": float(stats.kendalltau(x, y).statistic),
    }


def modality(item: Mapping[str, Any]) -> str:
    """A pair's modality subset: ``T``, ``L`` (lyrics), ``A`` (a reference audio) or ``C``."""
    lyrics = bool(str(item.get("instruction", {}).get("lyrics", "")).strip())
    reference = item.get("reference") is not None
    return {(False, False): "T", (True, False): "L", (False, True): "A", (True, True): "C"}[
        (lyrics, reference)
    ]


def breakdown(
    items: Sequence[Mapping[str, Any]],
    predicted: Sequence[str],
    labels: Sequence[str],
    key: Callable[[Mapping[str, Any]], str],
) -> dict[str, dict[str, float]]:
    """Pairwise accuracy and pair count per value of ``key(item)``, in sorted order."""
    if not len(items) == len(predicted) == len(labels):
        raise RewardBenchError(f"{len(items)} items, {len(predicted)} verdicts and {len(labels)} labels")
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(key(item), []).append(index)
    return {
        name: {
            "accuracy": pairwise_accuracy([predicted[i] for i in members], [labels[i] for i in members]),
            "pairs": float(len(members)),
        }
        for name, members in sorted(groups.items())
    }
