"""HaloProbe: the probability that a mentioned object is hallucinated, as the Bayesian
combination of an internal estimator trained without the caption's confounders and a prior
over those confounders.

Image attention looks like evidence of a real object, but it is confounded: objects named
late in a caption are more often hallucinated, and attention to the image fades with the
position anyway; repeated mentions differ again. Pooled over positions, real objects draw more
attention; within a position they may not (Simpson's paradox, :func:`simpson_report`).

- **external features** ``x_e``: the mention's position bucket (token position in the
  caption, cut at quantiles of the training positions) and whether it repeats an earlier
  mention; together one *stratum*;
- **internal features** ``x_i``: the decoding signals of the mention's tokens
  (:func:`~embodia.perception.hallucination.detectors.token_signals`: image attention per
  layer and head, entropy, lens probabilities, log-probability), as their mean and minimum
  over the tokens (:func:`mention_features`);
- **balanced estimator** ``f(x_i, x_e)``: L2-regularised logistic regression trained with
  weights ``1 / (2 n(y, stratum))``, so that within every stratum both classes weigh the same
  and ``x_e`` cannot act as a shortcut; strata holding one class only carry no internal
  evidence and are left out of its training;
- **prior** ``g(x_e) = p(y = 1 | x_e)``: the hallucination rate of the stratum on the natural
  (imbalanced) data, smoothed towards the overall rate with ``prior_strength`` pseudo-counts;
- **posterior** ``p = f g / (f g + (1 - f)(1 - g))``: when ``f`` is balanced within strata it
  is ``L / (1 + L)`` for the internal likelihood ratio ``L``, so the product of odds is
  Bayes' rule.

The estimator architectures are unpublished; logistic regression and a smoothed stratum
table are this module's choices.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodia.core.runs import write_json
from embodia.errors import read_text_file
from embodia.perception.hallucination.mentions import HallucinationError

PROBE_FILE = "haloprobe.json"
EPSILON = 1e-6


def mention_features(token_rows: np.ndarray) -> np.ndarray:
    """A mention's internal features from its tokens' signal rows (tokens x signals): the
    mean and the minimum over the tokens, side by side."""
    rows = np.asarray(token_rows, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise HallucinationError(f"a mention's signals are a (tokens, signals) array; got shape {rows.shape}")
    return np.concatenate([rows.mean(axis=0), rows.min(axis=0)])


def posterior(balanced: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Bayes' combination f g / (f g + (1 - f)(1 - g)) of a balanced estimate and a prior."""
    f = np.clip(np.asarray(balanced, dtype=np.float64), EPSILON, 1 - EPSILON)
    g = np.clip(np.asarray(prior, dtype=np.float64), EPSILON, 1 - EPSILON)
    return f * g / (f * g + (1 - f) * (1 - g))


def fit_logistic(
    features: np.ndarray, labels: np.ndarray, weights: np.ndarray, l2: float, iterations: int = 100
) -> np.ndarray:
    """Weighted L2-regularised logistic regression by Newton's method (IRLS); returns the
    coefficients with the intercept last (the intercept is not regularised)."""
    x = np.hstack([features, np.ones((features.shape[0], 1))])
    y, w = labels.astype(np.float64), weights.astype(np.float64)
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0
    beta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-np.clip(x @ beta, -30, 30)))
        gradient = x.T @ (w * (p - y)) + penalty * beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return beta


def _sigmoid_of(features: np.ndarray, beta: np.ndarray) -> np.ndarray:
    z = np.hstack([features, np.ones((features.shape[0], 1))]) @ beta
    return np.asarray(1 / (1 + np.exp(-np.clip(z, -30, 30))))


@dataclass
class HaloProbe:
    """A fitted HaloProbe (module docstring); :meth:`fit` builds one, :meth:`save` /
    :meth:`load` keep it as one JSON file."""

    position_edges: list[float]
    """Inner edges of the position buckets."""
    feature_mean: list[float]
    feature_std: list[float]
    balanced_coefficients: list[float]
    """f's coefficients: standardised internal features, then the strata one-hot, then the intercept."""
    prior_table: list[float]
    """g per stratum."""
    feature_names: list[str] = field(default_factory=list)

    @property
    def strata(self) -> int:
        return len(self.prior_table)

    def stratum(self, positions: Sequence[float], repeats: Sequence[bool]) -> np.ndarray:
        """Each mention's stratum: position bucket x (first mention, repeat)."""
        buckets = np.searchsorted(
            np.asarray(self.position_edges), np.asarray(positions, dtype=np.float64), "right"
        )
        return buckets * 2 + np.asarray(repeats, dtype=np.int64)

    def _design(self, internal: np.ndarray, strata: np.ndarray) -> np.ndarray:
        internal = np.asarray(internal, dtype=np.float64)
        if internal.ndim != 2 or internal.shape[1] != len(self.feature_mean):
            raise HallucinationError(
                f"HaloProbe was fitted on {len(self.feature_mean)} internal features; "
                f"got shape {internal.shape}"
            )
        standard = (internal - np.asarray(self.feature_mean)) / np.asarray(self.feature_std)
        one_hot = np.eye(self.strata)[strata]
        return np.hstack([standard, one_hot])

    def predict(
        self, internal: np.ndarray, positions: Sequence[float], repeats: Sequence[bool]
    ) -> dict[str, np.ndarray]:
        """For each mention: ``balanced`` (f), ``prior`` (g) and ``posterior`` p(hallucinated)."""
        strata = self.stratum(positions, repeats)
        balanced = _sigmoid_of(self._design(internal, strata), np.asarray(self.balanced_coefficients))
        prior = np.asarray(self.prior_table)[strata]
        return {"balanced": balanced, "prior": prior, "posterior": posterior(balanced, prior)}

    @classmethod
    def fit(
        cls,
        internal: np.ndarray,
        positions: Sequence[float],
        repeats: Sequence[bool],
        hallucinated: Sequence[bool],
        *,
        position_buckets: int = 5,
        l2: float = 1.0,
        prior_strength: float = 2.0,
        feature_names: Sequence[str] = (),
    ) -> HaloProbe:
        """Fit both estimators on labelled mentions (module docstring)."""
        internal = np.asarray(internal, dtype=np.float64)
        labels = np.asarray(hallucinated, dtype=bool)
        if internal.ndim != 2 or internal.shape[0] != labels.shape[0] or len(positions) != labels.shape[0]:
            raise HallucinationError(
                f"HaloProbe needs one feature row, position and label per mention; got {internal.shape}, "
                f"{len(positions)} positions, {labels.shape[0]} labels"
            )
        if labels.all() or not labels.any():
            raise HallucinationError("HaloProbe needs both real and hallucinated mentions to fit")
        if position_buckets < 1:
            raise HallucinationError(f"position_buckets must be at least 1; got {position_buckets}")
        quantiles = np.quantile(
            np.asarray(positions, dtype=np.float64), np.linspace(0, 1, position_buckets + 1)[1:-1]
        )
        edges = sorted(set(float(q) for q in quantiles))
        std = internal.std(axis=0)
        probe = cls(
            position_edges=edges,
            feature_mean=internal.mean(axis=0).tolist(),
            feature_std=np.where(std > 0, std, 1.0).tolist(),
            balanced_coefficients=[],
            prior_table=[],
            feature_names=list(feature_names),
        )
        strata = probe.stratum(positions, repeats)
        count = (len(edges) + 1) * 2
        overall = float(labels.mean())
        table = []
        for s in range(count):
            members = labels[strata == s]
            table.append((members.sum() + prior_strength * overall) / (members.size + prior_strength))
        probe.prior_table = [float(v) for v in table]
        weights = np.zeros(labels.shape[0])
        for s in range(count):
            for value in (False, True):
                chosen = (strata == s) & (labels == value)
                other = (strata == s) & (labels != value)
                if chosen.any() and other.any():
                    weights[chosen] = 1 / (2 * chosen.sum())
        kept = weights > 0
        if not kept.any():
            raise HallucinationError(
                "no stratum holds both real and hallucinated mentions: "
                "the balanced estimator has nothing to learn"
            )
        weights = weights / weights[kept].mean()
        design = probe._design(internal, strata)
        probe.balanced_coefficients = fit_logistic(design[kept], labels[kept], weights[kept], l2).tolist()
        return probe

    def save(self, folder: Path | str) -> Path:
        path = Path(folder) / PROBE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, asdict(self))
        return path

    @classmethod
    def load(cls, folder: Path | str) -> HaloProbe:
        path = Path(folder) / PROBE_FILE
        if not path.is_file():
            raise HallucinationError(f"no fitted HaloProbe in {folder} (no {PROBE_FILE})")
        try:
            values: dict[str, Any] = json.loads(read_text_file(path, HallucinationError))
            return cls(**values)
        except (TypeError, json.JSONDecodeError) as error:
            raise HallucinationError(f"{path} is not a saved HaloProbe: {error}") from error


def simpson_report(
    feature: Sequence[float] | np.ndarray,
    hallucinated: Sequence[bool] | np.ndarray,
    strata: Sequence[int] | np.ndarray,
) -> dict[str, Any]:
    """Pooled vs stratified trends of one feature (e.g. total image attention): the mean of
    real minus hallucinated mentions over all mentions, and within each stratum holding both
    classes. ``paradox`` is true when the pooled difference has the opposite sign of the
    size-weighted within-strata difference (Simpson's paradox)."""
    values = np.asarray(feature, dtype=np.float64)
    labels = np.asarray(hallucinated, dtype=bool)
    groups = np.asarray(strata)
    if labels.all() or not labels.any():
        raise HallucinationError("a Simpson's-paradox report needs both real and hallucinated mentions")
    pooled = float(values[~labels].mean() - values[labels].mean())
    within = []
    for s in sorted(set(groups.tolist())):
        members = groups == s
        real, fake = values[members & ~labels], values[members & labels]
        if real.size and fake.size:
            within.append(
                {
                    "stratum": int(s),
                    "real_mean": float(real.mean()),
                    "hallucinated_mean": float(fake.mean()),
                    "difference": float(real.mean() - fake.mean()),
                    "mentions": int(members.sum()),
                    "hallucination_rate": float(fake.size / members.sum()),
                }
            )
    weighted = (
        sum(w["difference"] * w["mentions"] for w in within) / sum(w["mentions"] for w in within)
        if within
        else 0.0
    )
    return {
        "pooled_difference": pooled,
        "within_difference": float(weighted),
        "paradox": bool(within) and pooled * weighted < 0,
        "strata": within,
    }
