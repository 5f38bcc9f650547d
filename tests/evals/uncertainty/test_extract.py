"""Marker extraction on replies as models write them: multi-word markers read whole, hedging
forms, negation, the modal words only when they hedge, and which marker qualifies the answer."""

from __future__ import annotations

import pytest

from embodia.evals.uncertainty.corpus import load_corpus
from embodia.evals.uncertainty.extract import MarkerLexicon, elicitation_prompt, markers_of


@pytest.fixture(scope="module")
def lexicon() -> MarkerLexicon:
    return MarkerLexicon()


def _read(lexicon: MarkerLexicon, reply: str) -> list[tuple[str, bool]]:
    return [(m.marker, m.negated) for m in lexicon.mentions(reply)]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Answer: Paris. Confidence: Highly Likely.", [("highly likely", False)]),
        # the longest spelling wins: not "unlikely", not "probably", not "almost certain"
        ("It is HIGHLY unlikely.", [("highly unlikely", False)]),
        ("Probably not: the answer is 4.", [("probably not", False)]),
        ("Almost certainly not B.", [("almost certainly not", False)]),
        # hyphens, spaces and line breaks inside a marker
        ("I'd call it fifty-fifty.", [("about even", False)]),
        ("It is almost\n  certain", [("almost certain", False)]),
        ("50-50 between A and C", [("about even", False)]),
        # hedging forms
        ("I doubt it is 7.", [("we doubt", False)]),
        ("Chances are slim that it halts.", [("chances are slight", False)]),
        ("It might be 12.", [("might", False)]),
        # bare modals and "a certain" are not markers
        ("I could not parse the input; May 5 is the date.", []),
        ("After a certain number of steps it stops.", []),
        # a marker inside a word is not a marker
        ("The likelihood is unlikelyish", []),
        ("", []),
    ],
)
def test_markers_as_models_write_them(lexicon: MarkerLexicon, reply: str, expected: list) -> None:
    assert _read(lexicon, reply) == expected


def test_negation_reads_the_opposite_or_leaves_no_level(lexicon: MarkerLexicon) -> None:
    (plain,) = lexicon.mentions("It is not likely to be B.")
    assert (plain.marker, plain.negated, plain.level) == ("unlikely", False, load_corpus().prior("unlikely"))
    (contracted,) = lexicon.mentions("It isn't possible.")
    assert contracted.marker == "impossible" and contracted.level == 0.0
    # "not certain" is not "impossible", and "not highly likely" not "highly unlikely"
    for reply, marker in (("It is not certain.", "certain"), ("Not highly likely, though.", "highly likely")):
        (mention,) = lexicon.mentions(reply)
        assert (mention.marker, mention.negated, mention.level) == (marker, True, None)
    # a negation in another sentence, or two words away, does not reach the marker
    assert _read(lexicon, "Not B. Likely C.") == [("likely", False)]
    assert _read(lexicon, "Not that it is likely.") == [("likely", False)]
    assert lexicon.confidence("It is not certain.") is None


def test_the_qualifying_marker_is_the_answers_own(lexicon: MarkerLexicon) -> None:
    reply = "Maybe it is A. On reflection the answer is B, very likely. Almost certain it is not D."
    at = reply.index("B")
    qualifier = lexicon.qualifying(reply, at, at + 1)
    assert qualifier is not None
    assert (qualifier.mention.marker, qualifier.position, qualifier.distance) == (
        "very likely",
        "same sentence",
        2,
    )
    # no marker in the answer's sentence: the nearest one before it, else the first after
    reply = "Highly likely. Answer: 12. Unlikely alternatives: 13."
    before = lexicon.qualifying(reply, reply.index("12"), reply.index("12") + 2)
    assert before is not None and (before.mention.marker, before.position) == ("highly likely", "before")
    reply = "Answer: 12. Confidence: almost certain."
    after = lexicon.qualifying(reply, 8, 10)
    assert after is not None and (after.mention.marker, after.position) == ("almost certain", "after")
    assert lexicon.confidence(reply, "12") == pytest.approx(0.95)
    # the answer not found: the reply's last marker with a level
    assert lexicon.confidence("Unlikely. Then again, probably.", "Z") == pytest.approx(0.725)
    assert lexicon.qualifying("No hedge at all.", 0, 2) is None


def test_decimals_do_not_end_a_sentence(lexicon: MarkerLexicon) -> None:
    (mention,) = lexicon.mentions("x is 3.5, likely.")
    assert mention.sentence == 0


def test_the_elicitation_prompt_lists_every_marker_most_probable_first() -> None:
    prompt = elicitation_prompt("What is 2 + 2?")
    assert prompt.startswith("What is 2 + 2?")
    assert prompt.index('"certain"') < prompt.index('"likely"') < prompt.index('"impossible"')
    assert all(f'"{name}"' in prompt for name in load_corpus().markers)


def test_markers_of_many_replies(lexicon: MarkerLexicon) -> None:
    found = markers_of(["likely", "no hedge", "unlikely; maybe"], lexicon)
    assert [[m.marker for m in mentions] for mentions in found] == [["likely"], [], ["unlikely", "maybe"]]
