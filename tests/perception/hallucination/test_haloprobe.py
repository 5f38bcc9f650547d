"""HaloProbe on synthetic mentions whose true posterior is known.

The generator follows the confounding the method is built for: hallucinations grow more
common with a mention's position, attention to the image fades with the position, and within
a position hallucinated mentions draw *more* attention. Pooled, real mentions look better
attended (Simpson's paradox).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from embodia.perception.hallucination.haloprobe import HaloProbe, fit_logistic, posterior, simpson_report
from embodia.perception.hallucination.mentions import HallucinationError

SIGMA, DECAY, LIFT = 1.0, 0.15, 1.0


def _rate(position: np.ndarray) -> np.ndarray:
    return 0.05 + 0.7 * position / 39


def _mentions(seed: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    position = rng.integers(0, 40, count)
    hallucinated = rng.random(count) < _rate(position)
    attention = 6 - DECAY * position + LIFT * hallucinated + rng.normal(0, SIGMA, count)
    repeats = np.zeros(count, dtype=bool)
    return attention[:, None], position, repeats, hallucinated


def _true_posterior(attention: np.ndarray, position: np.ndarray) -> np.ndarray:
    mean0 = 6 - DECAY * position
    log_ratio = (LIFT * (attention - mean0) - LIFT**2 / 2) / SIGMA**2
    prior = _rate(position)
    return np.asarray(1 / (1 + np.exp(-(log_ratio + np.log(prior / (1 - prior))))))


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def test_posterior_is_the_product_of_odds() -> None:
    assert posterior(np.array([0.5]), np.array([0.2]))[0] == pytest.approx(0.2)
    # odds 3 x odds 1/4 = 3/4 -> 3/7
    assert posterior(np.array([0.75]), np.array([0.2]))[0] == pytest.approx(3 / 7)


def test_fit_logistic_recovers_known_coefficients() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20_000, 2))
    y = rng.random(20_000) < 1 / (1 + np.exp(-(1.5 * x[:, 0] - 2 * x[:, 1] + 0.5)))
    beta = fit_logistic(x, y, np.ones(20_000), l2=0.0)
    assert beta == pytest.approx([1.5, -2.0, 0.5], abs=0.1)


def test_the_synthetic_mentions_show_simpsons_paradox() -> None:
    attention, position, repeats, hallucinated = _mentions(0, 6000)
    probe = HaloProbe.fit(attention, position, repeats, hallucinated)
    report = simpson_report(attention[:, 0], hallucinated, probe.stratum(position, repeats))
    assert report["pooled_difference"] > 0  # pooled: real mentions draw more attention
    assert report["within_difference"] < 0  # within a position bucket: fewer
    assert report["paradox"] is True
    assert all(s["difference"] < 0 for s in report["strata"])


def test_haloprobe_recovers_the_true_posterior_and_beats_a_naive_classifier() -> None:
    train = _mentions(1, 8000)
    test_attention, test_position, test_repeats, test_labels = _mentions(2, 8000)
    probe = HaloProbe.fit(*train, position_buckets=8, l2=0.01)
    predicted = probe.predict(test_attention, test_position, test_repeats)
    truth = _true_posterior(test_attention[:, 0], test_position)
    assert np.mean(np.abs(predicted["posterior"] - truth)) < 0.05
    # The naive classifier reads attention alone from the natural data: it learns the
    # pooled (reversed) trend, that more attention means fewer hallucinations.
    naive = fit_logistic(train[0], train[3], np.ones(len(train[3])), l2=0.01)
    naive_p = 1 / (1 + np.exp(-(test_attention[:, 0] * naive[0] + naive[1])))
    assert naive[0] < 0
    labels = test_labels.astype(float)
    assert _log_loss(predicted["posterior"], labels) < _log_loss(naive_p, labels) - 0.05
    assert _log_loss(predicted["posterior"], labels) < _log_loss(truth, labels) + 0.02
    # The prior alone is the stratum's rate; the balanced estimator alone ignores it.
    assert _log_loss(predicted["posterior"], labels) < _log_loss(predicted["prior"], labels)


def test_the_balanced_estimator_sees_no_position_shortcut() -> None:
    """Within a stratum both classes weigh the same, so with no internal evidence f stays at
    one half wherever the mention stands, and the posterior is the prior."""
    rng = np.random.default_rng(3)
    position = rng.integers(0, 40, 5000)
    hallucinated = rng.random(5000) < _rate(position)
    noise = rng.normal(size=(5000, 1))
    probe = HaloProbe.fit(noise, position, np.zeros(5000, dtype=bool), hallucinated, l2=10.0)
    predicted = probe.predict(noise, position, np.zeros(5000, dtype=bool))
    assert np.max(np.abs(predicted["balanced"] - 0.5)) < 0.1
    assert np.corrcoef(predicted["posterior"], _rate(position))[0, 1] > 0.9


def test_haloprobe_round_trips_and_names_bad_input(tmp_path: Path) -> None:
    attention, position, repeats, hallucinated = _mentions(4, 500)
    probe = HaloProbe.fit(attention, position, repeats, hallucinated, feature_names=["attention"])
    loaded = HaloProbe.load(probe.save(tmp_path).parent)
    assert loaded == probe
    np.testing.assert_array_equal(
        loaded.predict(attention, position, repeats)["posterior"],
        probe.predict(attention, position, repeats)["posterior"],
    )
    with pytest.raises(HallucinationError, match="fitted on 1 internal features"):
        probe.predict(np.zeros((2, 3)), [0, 1], [False, False])
    with pytest.raises(HallucinationError, match="both real and hallucinated"):
        HaloProbe.fit(attention, position, repeats, np.zeros(500, dtype=bool))
    with pytest.raises(HallucinationError, match="no fitted HaloProbe"):
        HaloProbe.load(tmp_path / "elsewhere")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "haloprobe.json").write_text('{"position_edges": []}')
    with pytest.raises(HallucinationError, match="not a saved HaloProbe"):
        HaloProbe.load(tmp_path / "broken")
    assert math.isfinite(loaded.prior_table[0])
