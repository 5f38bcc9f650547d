"""VOCAL: the probability each uncertainty marker conveys *for one model*, learned from whether
its answers carrying that marker were right, set against what people read in the marker.

**The fit** (:func:`fit_profile`). Each answer carries one marker m (the one qualifying it,
:mod:`embodia.evals.uncertainty.extract`) and is right or wrong. The profile gives each marker a
probability ``theta_m = sigmoid(z_m)``, chosen to minimise a proper scoring rule of the answers
plus a shrinkage towards the human prior ``h_m`` (:mod:`embodia.evals.uncertainty.corpus`):

    sum_i loss(theta_{m_i}, y_i) + shrinkage * sum_m (z_m - logit h_m)^2

with the log loss (default) or the Brier score. The sum splits by marker, so only each marker's
count and number right matter; with no shrinkage and the log loss, ``theta_m`` is the marker's
accuracy (Tian et al.'s Ling. 1S-opt), and a marker used rarely stays near its human level.
``monotone=True`` then makes the profile agree with the human ordering of the markers: a
weighted isotonic regression (pool adjacent violators) over the markers ordered by human prior
(ties broken by the surveys' mean, then the name), each weighted by its count plus one.

**Uncertainty** (:func:`bootstrap_profile`): answers are resampled with replacement (a
multinomial draw over the (marker, right) cells, the same as resampling the answers) and the
fit repeated; the percentile interval of each marker's probability.

**The comparison with people** (:func:`compare_with_humans`): per marker, the human level, the
learned one, their shift and its interval; the pairs of used markers whose learned order
contradicts the human one (ordering violations); and the usage-weighted mean shift (human
minus learned: positive when the model's words promise more than its answers deliver, that is,
overconfidence).

**Calibration** (:func:`calibration_report`): ECE (10 bins, with the reliability diagram's
points: each non-empty bin's mean confidence, accuracy and count), Brier score, AUROC of the
confidence for right against wrong answers, and the selective accuracy curve and its area, for
any confidences: the human mapping, the learned one, or a baseline's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from embodia.core.scores import auroc, calibration_error, reliability_bins
from embodia.evals.uncertainty.corpus import MarkerCorpus, UncertaintyError, load_corpus

LOSSES = ("log", "brier")
_BOUND = 12.0
"""|logit| limit of a learned probability (1e-5 from 0 or 1): a marker always right or always
wrong, with no shrinkage, would otherwise run off to infinity."""


@dataclass(frozen=True)
class MarkerCounts:
    """Per marker, the answers carrying it and how many were right."""

    used: Mapping[str, int]
    right: Mapping[str, int]

    @classmethod
    def of(cls, markers: Sequence[str], correct: Sequence[bool], corpus: MarkerCorpus) -> MarkerCounts:
        if len(markers) != len(correct):
            raise UncertaintyError(f"{len(markers)} markers for {len(correct)} answers")
        used: dict[str, int] = {}
        right: dict[str, int] = {}
        for marker, ok in zip(markers, correct, strict=True):
            name = corpus.marker(marker).marker
            used[name] = used.get(name, 0) + 1
            right[name] = right.get(name, 0) + int(bool(ok))
        return cls(used, right)


def _logit(p: float) -> float:
    p = min(max(p, 1e-5), 1 - 1e-5)
    return math.log(p / (1 - p))


def human_order(corpus: MarkerCorpus) -> list[str]:
    """The markers from the least to the most probable for people (module docstring)."""

    def key(name: str) -> tuple[float, float, str]:
        means = [level.mean for level in corpus.markers[name].surveys if level.mean is not None]
        return corpus.prior(name), statistics.fmean(means) if means else corpus.prior(name) * 100, name

    return sorted(corpus.markers, key=key)


def pool_adjacent_violators(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """The non-decreasing sequence nearest ``values`` in weighted squared error."""
    blocks: list[list[float]] = []  # [mean, weight, length]
    for value, weight in zip(values, weights, strict=True):
        blocks.append([float(value), float(weight), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean_b, weight_b, length_b = blocks.pop()
            mean_a, weight_a, length_a = blocks.pop()
            total = weight_a + weight_b
            blocks.append([(mean_a * weight_a + mean_b * weight_b) / total, total, length_a + length_b])
    return [mean for mean, _, length in blocks for _ in range(int(length))]


def fit_profile(
    counts: MarkerCounts,
    corpus: MarkerCorpus | None = None,
    *,
    loss: str = "log",
    shrinkage: float = 1.0,
    monotone: bool = False,
) -> dict[str, float]:
    """Every corpus marker's learned probability (module docstring); a marker never used keeps
    its human prior."""
    from scipy.optimize import minimize

    corpus = corpus or load_corpus()
    if loss not in LOSSES:
        raise UncertaintyError(f"the loss is one of {', '.join(LOSSES)}; got {loss!r}")
    if not (math.isfinite(shrinkage) and shrinkage >= 0):
        raise UncertaintyError(f"shrinkage must be >= 0, got {shrinkage}")
    names = human_order(corpus)
    n = np.array([counts.used.get(name, 0) for name in names], dtype=np.float64)
    k = np.array([counts.right.get(name, 0) for name in names], dtype=np.float64)
    if (k > n).any() or (k < 0).any():
        raise UncertaintyError("a marker has more right answers than answers")
    prior = np.array([_logit(corpus.prior(name)) for name in names])

    def objective(z: np.ndarray) -> tuple[float, np.ndarray]:
        p = 1 / (1 + np.exp(-z))
        if loss == "log":
            value = -(k * np.log(p) + (n - k) * np.log1p(-p))
            slope = n * p - k
        else:
            value = n * p * p - 2 * k * p + k
            slope = (2 * n * p - 2 * k) * p * (1 - p)
        value = value + shrinkage * (z - prior) ** 2
        slope = slope + 2 * shrinkage * (z - prior)
        return float(value.sum()), slope

    start = np.where(n > 0, [_logit((ki + 0.5) / (ni + 1)) for ki, ni in zip(k, n, strict=True)], prior)
    result = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(-_BOUND, _BOUND)] * len(names))
    theta = 1 / (1 + np.exp(-result.x))
    if monotone:
        theta = np.array(pool_adjacent_violators(theta.tolist(), (n + 1).tolist()), dtype=np.float64)
    return {name: float(value) for name, value in zip(names, theta, strict=True)}


def bootstrap_profile(
    counts: MarkerCounts,
    corpus: MarkerCorpus | None = None,
    *,
    rounds: int = 200,
    level: float = 0.95,
    seed: int = 0,
    loss: str = "log",
    shrinkage: float = 1.0,
    monotone: bool = False,
) -> dict[str, tuple[float, float]]:
    """Each marker's percentile interval over ``rounds`` bootstrap refits with the fit's
    settings (module docstring)."""
    corpus = corpus or load_corpus()
    if rounds < 2 or not 0 < level < 1:
        raise UncertaintyError(f"the bootstrap needs rounds >= 2 and 0 < level < 1, got {rounds}, {level}")
    used = sorted(counts.used)
    cells = np.array([[counts.right[m], counts.used[m] - counts.right[m]] for m in used], dtype=np.float64)
    total = int(cells.sum())
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(rounds):
        sample = rng.multinomial(total, (cells / total).ravel()).reshape(cells.shape)
        resampled = MarkerCounts(
            {m: int(sample[i].sum()) for i, m in enumerate(used)},
            {m: int(sample[i, 0]) for i, m in enumerate(used)},
        )
        draws.append(fit_profile(resampled, corpus, loss=loss, shrinkage=shrinkage, monotone=monotone))
    tail = (1 - level) / 2
    return {
        name: (
            float(np.quantile([d[name] for d in draws], tail)),
            float(np.quantile([d[name] for d in draws], 1 - tail)),
        )
        for name in corpus.markers
    }


def compare_with_humans(
    profile: Mapping[str, float],
    counts: MarkerCounts,
    corpus: MarkerCorpus | None = None,
    intervals: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, object]:
    """The marker-level comparison (module docstring)."""
    corpus = corpus or load_corpus()
    rows = []
    for name in human_order(corpus):
        human = corpus.prior(name)
        row: dict[str, object] = {
            "marker": name,
            "used": counts.used.get(name, 0),
            "human": human,
            "learned": profile[name],
            "shift": profile[name] - human,
        }
        if intervals is not None:
            row["interval"] = list(intervals[name])
        rows.append(row)
    used = [name for name in human_order(corpus) if counts.used.get(name, 0)]
    violations = [
        [low, high]
        for i, low in enumerate(used)
        for high in used[i + 1 :]
        if corpus.prior(low) < corpus.prior(high) and profile[low] > profile[high]
    ]
    total = sum(counts.used.values())
    overconfidence = (
        sum(counts.used[name] * (corpus.prior(name) - profile[name]) for name in used) / total
        if total
        else 0.0
    )
    return {"markers": rows, "ordering_violations": violations, "overconfidence": overconfidence}


def selective_accuracy(confidence: Sequence[float], correct: Sequence[bool]) -> list[tuple[float, float]]:
    """(coverage, accuracy) answering in decreasing confidence, one point per distinct
    confidence (tied answers enter together)."""
    order = sorted(zip(confidence, correct, strict=True), key=lambda pair: -pair[0])
    points = []
    right = 0
    for i, (conf, ok) in enumerate(order):
        right += int(bool(ok))
        if i + 1 == len(order) or order[i + 1][0] != conf:
            points.append(((i + 1) / len(order), right / (i + 1)))
    return points


def calibration_report(confidence: Sequence[float], correct: Sequence[bool]) -> dict[str, object]:
    """ECE, Brier, AUROC and the selective accuracy curve with its area (module docstring);
    AUROC is None when every answer is right or every one wrong."""
    conf = np.asarray(confidence, dtype=np.float64)
    right = np.asarray(correct, dtype=bool)
    if conf.shape != right.shape or not len(conf):
        raise UncertaintyError(f"one confidence per answer, got {len(conf)} for {len(right)}")
    if ((conf < 0) | (conf > 1)).any():
        raise UncertaintyError("confidences are probabilities in [0, 1]")
    curve = selective_accuracy(conf.tolist(), right.tolist())
    area, previous = 0.0, 0.0
    for coverage, accuracy in curve:
        area += (coverage - previous) * accuracy
        previous = coverage
    return {
        "ece": calibration_error(conf, right, bins=10),
        "brier": float(np.mean((conf - right) ** 2)),
        "auroc": auroc(conf[right], conf[~right]) if right.any() and not right.all() else None,
        "selective_auc": area,
        "selective_curve": [list(point) for point in curve],
        "reliability": [list(point) for point in reliability_bins(conf, right, bins=10)],
    }
