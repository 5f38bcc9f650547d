"""VOCAL's fit on synthetic answers with a known marker profile, its shrinkage and monotone
options, the comparison with people, and the calibration metrics by hand."""

from __future__ import annotations

import pytest
from marker_profiles import TRUE_PROFILE
from marker_profiles import answers as _answers

from embodia.evals.uncertainty.corpus import UncertaintyError, load_corpus
from embodia.evals.uncertainty.vocal import (
    MarkerCounts,
    bootstrap_profile,
    calibration_report,
    compare_with_humans,
    fit_profile,
    pool_adjacent_violators,
    selective_accuracy,
)


@pytest.mark.parametrize("loss", ["log", "brier"])
def test_the_fit_recovers_a_known_profile_with_intervals_that_cover_it(loss: str) -> None:
    corpus = load_corpus()
    counts = MarkerCounts.of(*_answers(TRUE_PROFILE, 2000, seed=1), corpus)
    profile = fit_profile(counts, corpus, loss=loss)
    intervals = bootstrap_profile(counts, corpus, rounds=60, seed=0, loss=loss)
    covered = 0
    for marker, truth in TRUE_PROFILE.items():
        assert profile[marker] == pytest.approx(truth, abs=0.05), marker
        low, high = intervals[marker]
        assert low <= profile[marker] <= high and high - low < 0.08, (marker, low, high)
        covered += low <= truth <= high
    assert covered >= 9, covered
    # a marker the model never used keeps its human level
    assert profile["we believe"] == pytest.approx(corpus.prior("we believe"), abs=1e-4)


def test_without_shrinkage_the_log_loss_fit_is_each_markers_accuracy() -> None:
    corpus = load_corpus()
    counts = MarkerCounts({"likely": 10, "unlikely": 4}, {"likely": 7, "unlikely": 1})
    profile = fit_profile(counts, corpus, shrinkage=0.0)
    assert profile["likely"] == pytest.approx(0.7, abs=1e-4)
    assert profile["unlikely"] == pytest.approx(0.25, abs=1e-4)


def test_shrinkage_keeps_a_rarely_used_marker_near_its_human_level() -> None:
    corpus = load_corpus()
    counts = MarkerCounts({"almost certain": 3}, {"almost certain": 0})  # three answers, all wrong
    free = fit_profile(counts, corpus, shrinkage=0.0)["almost certain"]
    shrunk = fit_profile(counts, corpus, shrinkage=5.0)["almost certain"]
    assert free < 0.01 < shrunk < corpus.prior("almost certain")
    with pytest.raises(UncertaintyError, match="shrinkage"):
        fit_profile(counts, corpus, shrinkage=-1.0)
    with pytest.raises(UncertaintyError, match="loss is one of"):
        fit_profile(counts, corpus, loss="hinge")


def test_pool_adjacent_violators_by_hand() -> None:
    assert pool_adjacent_violators([1, 3, 2, 4], [1, 1, 1, 1]) == [1, 2.5, 2.5, 4]
    assert pool_adjacent_violators([3, 1, 2], [1, 3, 1]) == pytest.approx([1.5, 1.5, 2])  # (3 + 3) / 4
    assert pool_adjacent_violators([0.2, 0.1, 0.0], [1, 1, 1]) == pytest.approx([0.1, 0.1, 0.1])


def test_a_monotone_fit_keeps_the_human_order_and_reports_no_violation() -> None:
    corpus = load_corpus()
    # "likely" answers more often right than "highly likely" ones: an ordering violation
    profile = {**TRUE_PROFILE, "likely": 0.8}
    counts = MarkerCounts.of(*_answers(profile, 400, seed=2), corpus)
    free = fit_profile(counts, corpus)
    assert ["likely", "highly likely"] in compare_with_humans(free, counts, corpus)["ordering_violations"]
    monotone = fit_profile(counts, corpus, monotone=True)
    assert compare_with_humans(monotone, counts, corpus)["ordering_violations"] == []
    assert monotone["likely"] <= monotone["highly likely"]


def test_the_comparison_names_overconfidence_marker_by_marker() -> None:
    corpus = load_corpus()
    counts = MarkerCounts.of(*_answers(TRUE_PROFILE, 500, seed=3), corpus)
    profile = fit_profile(counts, corpus)
    report = compare_with_humans(profile, counts, corpus, bootstrap_profile(counts, corpus, rounds=20))
    rows = {row["marker"]: row for row in report["markers"]}  # type: ignore[union-attr]
    assert rows["very likely"]["shift"] == pytest.approx(profile["very likely"] - 0.925)
    assert rows["very likely"]["used"] == 500 and len(rows["very likely"]["interval"]) == 2
    # every marker here promises more than it delivers but "about even" and "maybe"
    assert report["overconfidence"] > 0.1


def test_calibration_metrics_by_hand() -> None:
    confidence = [0.9, 0.9, 0.6, 0.2]
    correct = [True, False, True, False]
    report = calibration_report(confidence, correct)
    # bins: 0.9 (two answers, accuracy 0.5), 0.6 (one, right), 0.2 (one, wrong)
    assert report["ece"] == pytest.approx(0.5 * 0.4 + 0.25 * 0.4 + 0.25 * 0.2)
    assert report["brier"] == pytest.approx((0.01 + 0.81 + 0.16 + 0.04) / 4)
    # right (0.9, 0.6) against wrong (0.9, 0.2): a tie, two wins and a loss in four pairs
    assert report["auroc"] == pytest.approx((0.5 + 1 + 0 + 1) / 4)
    assert selective_accuracy(confidence, correct) == [(0.5, 0.5), (0.75, 2 / 3), (1.0, 0.5)]
    assert report["selective_auc"] == pytest.approx(0.5 * 0.5 + 0.25 * 2 / 3 + 0.25 * 0.5)
    assert calibration_report([0.5], [True])["auroc"] is None
    with pytest.raises(UncertaintyError, match="probabilities"):
        calibration_report([1.5], [True])
