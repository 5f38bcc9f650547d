"""Which numbered option a reply chose (:func:`parse_choice`; its rules are in the package docstring).

Every pattern here runs in time linear in the reply: runs are possessive, so no pattern can
backtrack over a long run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from embodia.core.parsing.failure import ParseFailure
from embodia.core.parsing.json_scan import scan_reply

_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_WORDS = "|".join(_NUMBER_WORDS)
# An explicit number: digits (a decimal is caught to report it) or a word ("one of" is prose).
_NUM = rf"(?P<num>-?\d++(?:\.\d++)?(?![A-Za-z0-9_])|(?:{_WORDS})\b(?!\s+of\b))"
_NOUN = r"(?:waypoint|option|choice|marker|number|index|candidate|no\.)"
# What may sit between a marker and its number: quotes, markdown, brackets, "#", a noun.
# Possessive runs (*+): what follows never starts with one of their characters, so giving
# characters back could not help a match; it would only make long runs cost quadratic time.
_DECOR = rf"[\s\"'*_`\[(#]*+(?:{_NOUN}\s*+[\s\"'*_`\[(#]*+)?"
_VERB = (
    r"\b(?:choose|chose|choosing|pick|picked|picking|select|selected|selecting|"
    r"go\s+with|going\s+with|opt\s+for|settle\s+on)\b"
    rf"|\b(?:go|move|head|navigate)\s+(?:to|towards)\s+(?:the\s+)?(?={_NOUN})"
)
_VERB_ANSWER = re.compile(rf"(?:{_VERB})\s*+(?:the\s++)?{_DECOR}{_NUM}", re.I)
_CJK_ANSWER = re.compile(rf"(?:答案|选择|我选)\s*+(?:是|为)?\s*+[:：]?\s*+{_DECOR}{_NUM}", re.I)
_BARE_LINE = re.compile(rf"^[^\w\n-]*+(?:{_NOUN}\s*+)?[^\w\n-]*+{_NUM}[^\w\n]*+$", re.I | re.M)
_LOOSE_NUMBER = re.compile(r"(?<![\w.])-?\d++(?:\.\d++)?(?![A-Za-z0-9_])")
_NEGATION_BEFORE = re.compile(r"(?:\bnot|\bnever|n't|\bno)\s+(?:\w+\s+){0,2}$", re.I)
_NEGATION_WINDOW = 30
_JSON_VALUE_NUMBER = re.compile(rf"[\s\[(#]*+(?:{_NOUN}\s*+)?{_NUM}[\s\])]*+", re.I)


def _marker_answer(keys: Sequence[str]) -> re.Pattern[str]:
    names = sorted({*(k.lower() for k in keys), "answer"}, key=len, reverse=True)
    any_key = "|".join(re.escape(k) for k in names)
    # "is" only after answer-like words: "the nearest waypoint is 3 m away" is not an answer
    return re.compile(
        rf"\b(?:final\s+)?(?:(?:{any_key})s?\b[\"'*_`]*+\s*+[:：=]|(?:answer|choice|selection|decision|pick)"
        rf"\b\s*+(?:is|would\s+be|will\s+be)\b)\s*+{_DECOR}{_NUM}",
        re.I,
    )


@dataclass(frozen=True)
class _Candidate:
    position: int
    raw: str | int | float
    source: str


def _to_number(raw: str | int | float) -> int | float | None:
    if isinstance(raw, int | float):
        return raw
    word = raw.strip().lower()
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word]
    try:
        return int(word)
    except ValueError:
        pass
    try:
        return float(word)
    except ValueError:
        return None


def _json_choice(value: object, keys: Sequence[str]) -> tuple[str, object] | None:
    """The first of ``keys`` (case-insensitive) in a JSON object, searched depth-first, and its value.

    Recursive: values come from replies nested at most :data:`MAX_JSON_DEPTH` deep.
    """
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        for key in keys:
            if key.lower() in lowered:
                inner = lowered[key.lower()]
                # {"answer": {"choice": 2}}: the number is one level down
                return (
                    (_json_choice(inner, keys) or (key, inner)) if isinstance(inner, dict) else (key, inner)
                )
        for nested in value.values():
            found = _json_choice(nested, keys)
            if found is not None:
                return found
    return None


def _json_number(value: object) -> str | int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, list) and len(value) == 1:
        return _json_number(value[0])
    if isinstance(value, str):
        match = _JSON_VALUE_NUMBER.fullmatch(value)
        return match.group("num") if match else None
    return None


def _not_negated(text: str, start: int) -> bool:
    return _NEGATION_BEFORE.search(text[max(0, start - _NEGATION_WINDOW) : start]) is None


def _preview(value: object, limit: int = 80) -> str:
    """A JSON value as one short line for a failure reason (a reply may hold megabytes)."""
    text = json.dumps(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _listing(items: Sequence[str], limit: int = 8) -> str:
    """Distinct items, in order, for a failure reason: the first ``limit`` of them, then "..."."""
    distinct = list(dict.fromkeys(items))
    shown = ", ".join(distinct[:limit])
    return shown if len(distinct) <= limit else f"{shown}, ..."


def parse_choice(
    text: str, n_options: int, *, keys: Sequence[str] = ("choice", "answer", "waypoint", "index")
) -> int | ParseFailure:
    """The option index ``0 .. n_options-1`` a reply chose (rules: :mod:`embodia.core.parsing`)."""
    if n_options < 1:
        raise ValueError(f"n_options must be at least 1, got {n_options}")
    scanned = scan_reply(text)
    if isinstance(scanned, ParseFailure):
        return scanned
    body, scan = scanned
    candidates: list[_Candidate] = []
    # The text the patterns search: each JSON value holding a key becomes one space (its strings
    # are not answers). One space, not a run as long as the value: the patterns' whitespace runs
    # would otherwise be as long as the reply.
    pieces: list[str] = []
    kept_from = removed = 0
    unclosed_at = scan.unclosed_at
    for span in scan.spans:
        found = _json_choice(span.value, keys)
        if found is None:
            continue
        pieces += [body[kept_from : span.start], " "]
        removed += span.end - span.start - 1
        kept_from = span.end
        position = span.end - removed
        key, value = found
        raw = _json_number(value)
        if raw is None:
            reason = f"the JSON {key!r} value {_preview(value)} is not a number"
            candidates.append(_Candidate(position, reason, "bad"))
        else:
            candidates.append(_Candidate(position, raw, "json"))
        if scan.unclosed_at is not None and scan.unclosed_at >= span.end:
            unclosed_at = scan.unclosed_at - removed
    pieces.append(body[kept_from:])
    searchable = "".join(pieces)
    ruled_out: list[str] = []
    for pattern, source in (
        (_marker_answer(keys), "marker"),
        (_VERB_ANSWER, "verb"),
        (_CJK_ANSWER, "marker"),
        (_BARE_LINE, "line"),
    ):
        for match in pattern.finditer(searchable):
            if source == "verb" and not _not_negated(searchable, match.start()):
                ruled_out.append(match.group("num"))
                continue
            candidates.append(_Candidate(match.start("num"), match.group("num"), source))
    if candidates:
        winner = max(candidates, key=lambda c: c.position)
        if winner.source == "bad":
            return ParseFailure(str(winner.raw))
        if winner.source == "marker" and unclosed_at is not None and unclosed_at < winner.position:
            number_end = winner.position + len(str(winner.raw))
            if not searchable[number_end:].strip():
                return ParseFailure(
                    f"the reply is cut off inside a JSON object right after {winner.raw} "
                    "(the number may be incomplete)"
                )
        return _check_range(winner.raw, n_options)
    # "I would not pick 3" does not make 3 the one number mentioned
    excluded = set(ruled_out)
    loose = sorted({m.group(0) for m in _LOOSE_NUMBER.finditer(searchable)} - excluded, key=_loose_sort_key)
    if not loose and ruled_out:
        return ParseFailure(f"the reply only rules out {_listing(ruled_out)} and gives no answer")
    if not loose:
        return ParseFailure("no number in the reply")
    if len(loose) > 1:
        return ParseFailure(
            f"the reply mentions several numbers ({_listing(loose)}) but gives no explicit answer"
        )
    return _check_range(loose[0], n_options)


def _loose_sort_key(number: str) -> float:
    return float(number)


def _check_range(raw: str | int | float, n_options: int) -> int | ParseFailure:
    value = _to_number(raw)
    if value is None:
        return ParseFailure(f"{raw!r} is not a number")
    if isinstance(value, float):
        if not value.is_integer():
            return ParseFailure(f"choice {value:g} is not a whole number")
        value = int(value)
    if not 0 <= value < n_options:
        return ParseFailure(f"choice {value} is not one of 0..{n_options - 1}")
    return value
