"""The shipped human marker corpus: every marker has a cited level, the priors follow the stated
rule (checked by hand), the human distribution's quartiles are its Beta's, and a broken corpus
is named."""

from __future__ import annotations

import copy
import json

import pytest
from scipy.stats import beta

from embodia.evals.uncertainty.corpus import CORPUS, UncertaintyError, load_corpus, parse_corpus

ISSUE_MARKERS = (
    "almost certain",
    "highly likely",
    "very likely",
    "probably",
    "likely",
    "we believe",
    "possible",
    "maybe",
    "about even",
    "unlikely",
    "doubtful",
    "highly unlikely",
    "almost no chance",
)


def test_every_marker_the_issue_names_has_a_cited_human_level() -> None:
    corpus = load_corpus()
    for name in ISSUE_MARKERS:
        marker = corpus.marker(name)
        assert 0.0 <= corpus.prior(name) <= 1.0, name
        for level in marker.surveys:
            assert corpus.sources[level.source]["citation"], (name, level.source)
    assert corpus.marker("Doubtful").marker == "we doubt"  # an alias, any case


def test_priors_follow_the_rule_by_hand() -> None:
    corpus = load_corpus()
    # the median of the survey medians: 95, 95, 95 and Kent's 93
    assert corpus.prior("almost certain") == pytest.approx(0.95)
    # 70, 75, 70 and Kent's 75: the median of four is the mean of the middle two
    assert corpus.prior("probable") == pytest.approx(0.725)
    # no survey: the median of the yardsticks' midpoints (95, 92.5, 87.5)
    assert corpus.prior("very likely") == pytest.approx(0.925)
    # a proxy borrows its proxy's level
    assert corpus.prior("possible") == corpus.prior("might") == pytest.approx(0.40)
    assert corpus.marker("possible").proxy_why


def test_the_human_distribution_is_the_largest_surveys_beta() -> None:
    corpus = load_corpus()
    # CAPphrase (5,174 respondents) over Fagen-Ulmschneider (123)
    assert corpus.distribution("unlikely") == (2.46, 10.69)
    assert corpus.distribution("we believe") == (5.58, 1.85)  # Fagen-Ulmschneider only
    low, high = corpus.iqr("unlikely") or (0, 0)
    assert (low, high) == pytest.approx(tuple(beta.ppf([0.25, 0.75], 2.46, 10.69)))
    assert low < corpus.prior("unlikely") < high
    assert corpus.distribution("very likely") is None and corpus.iqr("very likely") is None


def test_the_priors_order_markers_as_people_do() -> None:
    corpus = load_corpus()
    order = corpus.by_prior()
    assert order.index("almost no chance") < order.index("unlikely") < order.index("about even")
    assert order.index("about even") < order.index("likely") < order.index("highly likely")
    assert order.index("highly likely") < order.index("almost certain")


def test_a_broken_corpus_is_named() -> None:
    document = json.loads(CORPUS.read_text())
    with pytest.raises(UncertaintyError, match="expected version 1"):
        parse_corpus({**document, "version": 2})
    bad = copy.deepcopy(document)
    bad["markers"][0]["surveys"]["capphrase"]["median"] = 140
    with pytest.raises(UncertaintyError, match=r"certain\) capphrase.median must be a percentage"):
        parse_corpus(bad)
    bad = copy.deepcopy(document)
    bad["markers"][1]["aliases"].append("likely")
    with pytest.raises(UncertaintyError, match="'likely' names both"):
        parse_corpus(bad)
    bad = copy.deepcopy(document)
    bad["markers"][0]["surveys"]["nobody"] = {"median": 50}
    with pytest.raises(UncertaintyError, match="'nobody' is not among the sources"):
        parse_corpus(bad)
    with pytest.raises(UncertaintyError, match="is not a marker"):
        load_corpus().marker("tremendously probable")
