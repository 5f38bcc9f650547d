"""What the scene-question tasks (clevr, embodied) share: reading free questions, negation
scope in answers, and the steps of counting and existence questions.

**Reading a question.** :func:`read_question` turns the free question a language model asks
into a :class:`Reading`: its kind and the word lists of the phrases it is about, without
deciding what those words mean. Each task then reads the phrases with its own vocabulary
(CLEVR sizes, colours and shapes; house object categories) and builds the structured query
its oracle answers. Kinds and the forms they are recognised in (after lower-casing, dropping
punctuation, expanding "what's"/"there's", spelling "color" as "colour", and dropping a
polite lead such as "can you tell me" or a trailing "or not"):

- ``count``: "how many X (are there)", "count the X", "(what is) the number of X";
- ``exists``: "is/are there X", "do you see X", "does the scene contain X", "is a X visible";
- ``attribute``: "what/which colour|shape|size is X", "what is the colour of X",
  "is X large or small" (``attribute`` names the property);
- ``identify``: "what (object) is X", where X is usually a relation ("left of the sofa");
- ``compare``: "are there more/fewer X than Y", "is the number of X greater than (the
  number of) Y", "do the X outnumber the Y", "the same number of X and Y", "as many X as Y";
- ``describe``: "describe X", "give a description of X".

A question in none of these forms reads as None; so does anything the task's phrase reader
does not know, so an exact oracle is never handed a guess. :func:`parse_free` reads a longer
text (a task prompt, "Look left. Is there a cube?") by its one sentence that reads as a
question.

**Relations.** :func:`split_relation` cuts a phrase at its first spatial relation ("the
object to the left of the red cube" -> target words, ``"left"``, anchor words).

**Steps.** A count question's steps are the matching objects, each once, then the count; an
existence question's are one matching object then "yes", or just "no" when none matches
(:func:`count_steps`, :func:`exists_steps` and their prefix checkers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from embodia.envs.puzzles.core import MAX_DIGITS, Parsed, PuzzleError, Verdict, digits_int

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+")
NEGATIONS: frozenset[str] = frozenset(
    {
        "no",
        "not",
        "without",
        "isn't",
        "aren't",
        "don't",
        "doesn't",
        "can't",
        "cannot",
        "nor",
        "never",
        "none",
        "nothing",
        "neither",
        "zero",
        "0",
    }
)
NEGATION_WINDOW = 3
"""Words before a mention within which a negation cancels it ("I don't see any purple")."""


def tokens(text: str) -> list[str]:
    """Lower-cased words (apostrophes kept inside them) and digit runs."""
    return _TOKEN.findall(text.lower())


def negated(words: Sequence[str], start: int) -> bool:
    """Whether a negation word comes at most :data:`NEGATION_WINDOW` words before ``start``."""
    return any(w in NEGATIONS for w in words[max(0, start - NEGATION_WINDOW) : start])


def singular_forms(word: str) -> list[str]:
    """``word`` then the singulars it may be the plural of ("shelves" -> shelf, "boxes" -> box)."""
    forms = [word]
    if word.endswith("ves"):
        forms.append(word[:-3] + "f")
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s") and len(word) > 2:
        forms.append(word[:-1])
    return forms


def lookup(word: str, vocabulary: Mapping[str, str]) -> str | None:
    """The value ``word`` (or its singular) stands for in ``vocabulary``, else None."""
    for form in singular_forms(word):
        if form in vocabulary:
            return vocabulary[form]
    return None


# --------------------------------------------------------------------------- reading questions

_EXPANSIONS: dict[str, str] = {
    "what's": "what is",
    "there's": "there is",
    "which's": "which is",
    "color": "colour",
    "colors": "colours",
    "colored": "coloured",
}
DETERMINERS: frozenset[str] = frozenset({"the", "a", "an", "any", "some", "all", "every", "each"})
CONNECTORS: frozenset[str] = frozenset(
    {
        "that",
        "which",
        "is",
        "are",
        "located",
        "placed",
        "positioned",
        "situated",
        "sitting",
        "standing",
        "lying",
        "found",
        "immediately",
        "directly",
        "just",
        "there",
        "exactly",
        "currently",
    }
)
"""Words a phrase may carry that add nothing to what it picks out."""
_FILLERS: tuple[tuple[str, ...], ...] = tuple(
    sorted(
        (
            tuple(f.split())
            for f in (
                "in the scene",
                "in this scene",
                "in the image",
                "in this image",
                "in the picture",
                "in this picture",
                "in the photo",
                "in the room",
                "in this room",
                "in the house",
                "in the panorama",
                "in this panorama",
                "in the view",
                "in view",
                "in sight",
                "on the table",
                "in total",
                "altogether",
                "at all",
                "overall",
                "do you see",
                "can you see",
                "you can see",
                "can be seen",
                "do you count",
                "can you count",
                "you see",
                "i see",
                "visible",
                "present",
                "shown",
                "exist",
                "exists",
                "please",
            )
        ),
        key=len,
        reverse=True,
    )
)
"""Phrases that only say where or how to look; dropped wherever they occur."""

_SIDE_FORMS = (
    "to the {} of",
    "to the {} side of",
    "on the {} of",
    "on the {} side of",
    "at the {} of",
    "to {} of",
    "{} of",
)
RELATION_PHRASES: tuple[tuple[tuple[str, ...], str], ...] = tuple(
    sorted(
        [(tuple(form.format(side).split()), side) for side in ("left", "right") for form in _SIDE_FORMS]
        + [
            (("behind",), "behind"),
            (("in", "back", "of"), "behind"),
            (("at", "the", "back", "of"), "behind"),
            (("in", "front", "of"), "front"),
        ],
        key=lambda pr: len(pr[0]),
        reverse=True,
    )
)
"""Word sequences of the spatial relations, longest first so "to the left of" wins over "left of"."""


@dataclass(frozen=True)
class Reading:
    """What a free question asks, before a task's vocabulary gives its phrases meaning."""

    kind: str
    """count, exists, attribute, identify, compare or describe."""
    subject: tuple[str, ...]
    """Words of the phrase asked about (the first one for ``compare``)."""
    other: tuple[str, ...] = ()
    """Words of the second phrase of ``compare``."""
    op: str | None = None
    """``compare``: more, fewer or same."""
    attribute: str | None = None
    """``attribute``: colour, shape or size."""


_POLITE = re.compile(
    r"^(?:(?:ok|okay|so|now|also|and|then|next|first|finally|please) )*"
    r"(?:(?:can|could|would|will) you (?:please )?)?"
    r"(?:(?:tell me|say|check|determine|find out|let me know|report)(?: please)? )?"
    r"(?:(?:whether|if) )?"
)
_LEAD = r"(?:(?:are|is) there |there (?:are|is) |do you see |can you see |do we have )?"
_OPS = {
    "more": "more",
    "greater": "more",
    "larger": "more",
    "bigger": "more",
    "higher": "more",
    "fewer": "fewer",
    "less": "fewer",
    "smaller": "fewer",
    "lower": "fewer",
}
_NUMBER_OF = r"(?:the )?(?:total )?(?:number|count|amount|quantity) of "
_ATTR = r"(?P<attribute>colour|shape|size)"
_SIZE_CHOICE = r"(?:large|big|small|little|tiny)"
# What may follow the thing to describe ("...: its size, colour and shape"); not "in", which
# also opens "in front of".
_DESCRIBE_TAIL = r"(?: in detail| (?:its|their|with|including|giving|every|each|from) .*)?"
_OP = "(?P<op>" + "|".join(_OPS) + ")"
_THAN_B = rf"than (?:there are |there is )?(?:{_NUMBER_OF}|that of )?(?P<b>.+)"
_FRAMES: tuple[tuple[str, re.Pattern[str], dict[str, str]], ...] = tuple(
    (kind, re.compile(pattern), fixed)
    for kind, pattern, fixed in (
        ("compare", _LEAD + rf"(?:an? )?(?P<op>more|fewer|less) (?P<a>.+?) {_THAN_B}", {}),
        ("compare", rf"(?:is|are) {_NUMBER_OF}(?P<a>.+?) {_OP} {_THAN_B}", {}),
        ("compare", r"(?:do|does) (?P<a>.+?) outnumber (?P<b>.+)", {"op": "more"}),
        ("compare", r"(?:are|is) (?P<a>.+?) (?P<op>more|less) numerous than (?P<b>.+)", {}),
        (
            "compare",
            _LEAD + r"(?:an? |the )?(?:same|equal) (?:number|count|amount|quantity)s? of (?P<a>.+?) "
            r"(?:and|as) (?:of |there are )?(?P<b>.+)",
            {"op": "same"},
        ),
        ("compare", _LEAD + r"as many (?P<a>.+?) as (?:there are )?(?P<b>.+)", {"op": "same"}),
        (
            "compare",
            rf"(?:is|are) {_NUMBER_OF}(?P<a>.+?) (?:equal to|the same as|same as) "
            rf"(?:{_NUMBER_OF}|that of )?(?P<b>.+)",
            {"op": "same"},
        ),
        (
            "count",
            rf"(?:how many |count (?:all )?(?:of )?|what is {_NUMBER_OF}|what number of |{_NUMBER_OF})"
            r"(?P<a>.+)",
            {},
        ),
        ("describe", r"describe (?P<a>.+?)" + _DESCRIBE_TAIL, {}),
        (
            "describe",
            r"(?:give|write|provide) (?:me )?(?:a |the )?description of (?P<a>.+?)" + _DESCRIBE_TAIL,
            {},
        ),
        ("attribute", rf"(?:what|which) {_ATTR} (?:is|are|does|do) (?P<a>.+?)(?: have| has| be)?", {}),
        ("attribute", rf"(?:what|which) is (?:the )?{_ATTR} of (?P<a>.+)", {}),
        ("attribute", rf"(?:the )?{_ATTR} of (?P<a>.+)", {}),
        ("attribute", rf"(?:is|are) (?P<a>.+?) {_SIZE_CHOICE} or {_SIZE_CHOICE}", {"attribute": "size"}),
        (
            "identify",
            r"(?:what|which)(?: (?:kind|type|sort) of)?(?: objects?| things?| items?| ones?| shapes?"
            r"| furniture)? (?:is|are|sits|stands|lies|can be seen|do you see|can you see|appears) (?P<a>.+)",
            {},
        ),
        ("exists", r"(?:is there|are there|there is|there are) (?P<a>.+)", {}),
        ("exists", r"(?:(?:do|can|could) (?:you|i|we) )?(?:see|spot|find|notice|observe) (?P<a>.+)", {}),
        (
            "exists",
            r"(?:does|do) (?:the |this )?(?:scene|image|picture|photo|room|panorama|view|it) "
            r"(?:have|contain|show|include|feature)s? (?P<a>.+)",
            {},
        ),
        ("exists", r"(?:is|are) (?P<a>(?:a|an|any|some|anything|something) .+)", {}),
        ("exists", r"(?:is|are) (?P<a>.+?) (?:visible|present|in view|shown|there)(?: .*)?", {}),
        ("exists", r"any (?P<a>.+)", {}),
    )
)
"""Question forms, tried in order: a comparison before the existence question it opens with."""


def question_words(text: str) -> list[str]:
    """Lower-case words with contractions and spelling variants normalised, hyphens split."""
    out: list[str] = []
    for word in tokens(text.replace("-", " ")):
        out.extend(_EXPANSIONS.get(word, word).split())
    return out


def read_question(text: str) -> Reading | None:
    """The kind and phrases of a free question, or None when it has no known form."""
    if not isinstance(text, str):
        return None
    sentence = " ".join(question_words(text))
    sentence = _POLITE.sub("", sentence, count=1)
    sentence = re.sub(r" or not$", "", sentence)
    if not sentence:
        return None
    for kind, pattern, fixed in _FRAMES:
        match = pattern.fullmatch(sentence)
        if match is None:
            continue
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        op = fixed.get("op") or (_OPS[groups["op"]] if "op" in groups else None)
        subject = tuple(strip_fillers(groups["a"].split()))
        other = tuple(strip_fillers(groups["b"].split())) if "b" in groups else ()
        return Reading(kind, subject, other, op, fixed.get("attribute") or groups.get("attribute"))
    return None


Query = TypeVar("Query")
_SENTENCE_END = re.compile(r"\n+|(?<=[?!])\s*|\.(?:\s+|$)")


def parse_free(text: str, query_of: Callable[[Reading], Query | None]) -> Query | None:
    """``query_of`` the reading of the whole text, else of its one sentence (or line) that
    gives a query: several such sentences ask several things, and give None."""
    if not isinstance(text, str):
        return None
    whole = read_question(text)
    query = None if whole is None else query_of(whole)
    if query is not None:
        return query
    pieces = [p for p in _SENTENCE_END.split(text) if p.strip()]
    if len(pieces) < 2:
        return None
    readings = [r for r in (read_question(p) for p in pieces) if r is not None]
    found = [q for q in (query_of(r) for r in readings) if q is not None]
    return found[0] if len(found) == 1 else None


def strip_fillers(words: Sequence[str]) -> list[str]:
    """``words`` without the phrases that only say where or how to look ("in the scene")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        for filler in _FILLERS:
            if tuple(words[i : i + len(filler)]) == filler:
                i += len(filler)
                break
        else:
            out.append(words[i])
            i += 1
    return out


def split_relation(words: Sequence[str]) -> tuple[list[str], str, list[str]] | None:
    """(target words, relation, anchor words) at the first relation phrase, or None."""
    for i in range(len(words)):
        for phrase, relation in RELATION_PHRASES:
            if tuple(words[i : i + len(phrase)]) == phrase:
                return list(words[:i]), relation, list(words[i + len(phrase) :])
    return None


def content_words(words: Sequence[str], skip: frozenset[str] = frozenset()) -> list[str]:
    """``words`` without determiners, connectors and the task's own ``skip`` words."""
    return [w for w in words if w not in DETERMINERS and w not in CONNECTORS and w not in skip]


def compare_counts(na: int, nb: int, op: str) -> str:
    """ "yes"/"no": whether ``na`` is more than, fewer than or the same as ``nb`` (``op``)."""
    if op not in ("more", "fewer", "same"):
        raise PuzzleError(f"unknown comparison {op!r}; known: more, fewer, same")
    holds = na > nb if op == "more" else na < nb if op == "fewer" else na == nb
    return "yes" if holds else "no"


# --------------------------------------------------------------------------- steps


def count_steps(members: Sequence[Any]) -> list[Any]:
    """Every matching object once (in the order given), then ``{"count": n}``."""
    return [*members, {"count": len(members)}]


def check_count_prefix(prefix: Sequence[Any], members: Sequence[Any]) -> bool:
    """Matching objects in any order without repeats, then (only once all are listed) the count."""
    listed: list[Any] = []
    for position, step in enumerate(prefix):
        if isinstance(step, Mapping) and set(step) == {"count"}:
            count = step["count"]
            return (
                position == len(prefix) - 1
                and type(count) is int
                and count == len(members)
                and len(listed) == len(members)
            )
        if step not in members or step in listed:
            return False
        listed.append(step)
    return True


def exists_steps(members: Sequence[Any]) -> list[Any]:
    """One matching object then ``{"answer": "yes"}``, or ``[{"answer": "no"}]`` when none."""
    return [members[0], {"answer": "yes"}] if members else [{"answer": "no"}]


def check_exists_prefix(prefix: Sequence[Any], members: Sequence[Any]) -> bool:
    """Any one matching object (a witness) then "yes"; just "no" when nothing matches."""
    prefix = list(prefix)
    if not prefix:
        return True
    if not members:
        return prefix == [{"answer": "no"}]
    return prefix[0] in members and prefix[1:] in ([], [{"answer": "yes"}])


# --------------------------------------------------------------------------- answers

_NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {"none": 0, "no": 0}
_YES = {"yes", "y", "true", "yeah", "yep", "correct", "affirmative"}
_NO = {"no", "n", "false", "nope", "negative", "incorrect"}


def parse_count(text: str) -> Parsed:
    """An integer count from "3", "three", "3 objects"; fails on none or several numbers."""
    numbers = {
        digits_int(t) if t.isdigit() else _NUMBER_WORDS[t]
        for t in tokens(text)
        if t.isdigit() or t in _NUMBER_WORDS
    }
    if None in numbers:
        return Parsed.fail(f"answer {text[:60]!r} has a number of more than {MAX_DIGITS} digits")
    if len(numbers) > 1 and "no" in tokens(text):
        numbers.discard(0)
    if not numbers:
        return Parsed.fail(f"answer {text[:60]!r} has no number")
    if len(numbers) > 1:
        return Parsed.fail(f"answer {text[:60]!r} names several numbers")
    return Parsed(numbers.pop())


def parse_yes_no(text: str) -> Parsed:
    """ "yes"/"no" from yes/no variants (true/false, yeah, nope, ...)."""
    toks = set(tokens(text))
    yes, no = bool(toks & _YES), bool(toks & _NO)
    if yes == no:
        return Parsed.fail(f"answer {text[:60]!r} is not yes or no")
    return Parsed("yes" if yes else "no")


def count_answer(value: Any) -> Parsed:
    """A count from an answer value: a whole number as it is, text by :func:`parse_count`."""
    if isinstance(value, bool):
        return Parsed.fail(f"answer {value!r} is not a count")
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return Parsed(int(value))
    return parse_count(str(value))


def yes_no_answer(value: Any) -> Parsed:
    """ "yes"/"no" from an answer value: a JSON boolean as it is, text by :func:`parse_yes_no`."""
    if isinstance(value, bool):
        return Parsed("yes" if value else "no")
    return parse_yes_no(str(value))


def exact_check(value: Any, truth: Any) -> Verdict:
    """The verdict on an answer that is right only when it equals the truth."""
    if value == truth:
        return Verdict(True, 1.0, "correct")
    return Verdict(False, 0.0, f"expected {truth!r}, got {value!r}")
