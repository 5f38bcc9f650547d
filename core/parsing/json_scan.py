"""Reading decisions out of model replies, and asking again when a reply cannot be used.

Model replies are messy: JSON in code fences with prose around it, ``<think>`` blocks full of
numbers, "Answer: 3", "I choose waypoint [2].", trailing commas, single quotes, comments,
replies cut off by the token limit. The parsers here return either a value or a
:class:`ParseFailure` whose ``reason`` is one line that can be shown to the model; :func:`ask`
uses that reason to re-ask, then falls back to a declared default, and keeps every attempt.

Rules :func:`parse_choice` follows (the tests hold a table of real-looking replies):

- Reasoning is ignored: ``<think>``/``<thinking>`` blocks, a leading block whose opening tag
  was in the prompt (only ``</think>`` in the reply), and an unclosed block at the end.
- An *explicit* answer is a JSON object with one of ``keys`` (``{"choice": 3}``), a marker
  (``Answer: 3``, ``the answer is 3``, ``choice = 3``, ``答案：3``), a choosing verb
  (``I pick 4``, ``I choose waypoint [2]``, ``go to waypoint 5``; negated ones such as
  ``I would not pick 3`` are skipped) or a line holding only the number (``[3]``, ``**3**``).
  The *last* explicit answer in the reply wins over everything before it.
- Without an explicit answer, a reply that mentions exactly one number uses it
  (``Waypoint 3 looks best.``); several different numbers are ambiguous and fail.
- Number words ``zero`` .. ``ten`` count in explicit answers only (``Answer: three``), not
  as loose mentions, because "one of the doors" is prose, not a choice.
- A reply cut off right after a number inside an unclosed JSON object (``{"choice": 1``)
  fails: the number may be the first digits of a longer one.

Hostile replies (small models repeat themselves up to the token limit, or open brackets
forever) are read safely:

- Every parser here runs in time linear in the reply: one pass finds the bracketed regions
  (:func:`scan_json`), no pattern can backtrack over a long run, and a region that is not JSON
  is looked into only a few levels deep (benchmarks/parsing.py measures it).
- JSON nested deeper than :data:`MAX_JSON_DEPTH` fails with a clear reason before a decoder
  (which recurses per level) sees it. No parser raises on any reply.
- :func:`ask` cuts a reply longer than ``max_reply_chars`` (default :data:`MAX_REPLY_CHARS`)
  before parsing it and records the cut; an exception from a parser is a failed attempt.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from embodia.core.chat import ContextOverflowError, Message, Policy, PolicyError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ParseFailure:
    """Why a reply could not be used, as one line fit to show the model."""

    reason: str


# ---------------------------------------------------------------------------------------------
# Thinking blocks


_THINK_OPENER = re.compile(r"<(think|thinking)>", re.I)
_THINK_CLOSER = {name: re.compile(rf"</{name}\s*+>", re.I) for name in ("think", "thinking")}
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*+>", re.I)


def _without_think_blocks(text: str) -> str:
    """``text`` without its closed ``<think>...</think>`` blocks: each opening tag ends at the first
    closing tag of the same name after it; an opening tag with none stays.

    Linear: the text after a block is searched from the block's end, and once no closing tag of
    a name is left, later opening tags of that name are not searched from (a lazy
    ``<think>.*?</think>`` would rescan to the end from each of 100k unclosed openers).
    """
    pieces: list[str] = []
    kept_from = position = 0
    unclosed: set[str] = set()  # names with no closing tag after ``position``
    while (opener := _THINK_OPENER.search(text, position)) is not None:
        name = opener.group(1).lower()
        closer = None if name in unclosed else _THINK_CLOSER[name].search(text, opener.end())
        if closer is None:
            unclosed.add(name)
            position = opener.end()
            continue
        pieces.append(text[kept_from : opener.start()])
        kept_from = position = closer.end()
    pieces.append(text[kept_from:])
    return "".join(pieces)


def strip_thinking(text: str) -> str:
    """The reply without its reasoning blocks, stripped of surrounding whitespace.

    Removes closed ``<think>...</think>`` (or ``<thinking>``) blocks, everything up to a
    closing tag whose opening tag was part of the prompt, and an unclosed block running to
    the end of the reply (a reply cut off while thinking has no answer).
    """
    rest = _without_think_blocks(text)
    last_close = collections.deque(_THINK_CLOSE.finditer(rest), maxlen=1)
    if last_close:
        rest = rest[last_close[0].end() :]
    opening = _THINK_OPENER.search(rest)
    if opening:
        rest = rest[: opening.start()]
    return rest.strip()


# ---------------------------------------------------------------------------------------------
# JSON

MAX_JSON_DEPTH = 100
"""Deepest nesting of brackets a reply's JSON may have. Deeper replies (runaway brackets) fail
with a clear reason before any decoder sees them: Python's decoders recurse per level."""
TOO_DEEP = ParseFailure(f"the JSON in the reply is nested deeper than {MAX_JSON_DEPTH} levels")
CUT_OFF = ParseFailure("the JSON in the reply is cut off (brackets left open)")
_MAX_FAILED_LEVELS = 4
"""How many enclosing bracketed regions that are not JSON a value may sit inside and still be
found (``{prose {"choice": 2}}``). Each level reads its region once more, so this bounds the
work to a few passes over the reply."""

_UNCLOSED = -1
_BROKEN = -2


@dataclass
class _Regions:
    """The bracketed regions of a text in order of their opening brackets, as parallel lists of
    integers (a reply may hold hundreds of thousands of regions; an object each would keep the
    garbage collector busy). Region ``k`` is ``text[start[k]:end[k]]``; ``end[k]`` is
    ``_UNCLOSED`` if the text ends inside it, or ``_BROKEN`` if a closing bracket of the other
    kind ended it. Its nested regions are those numbered ``k + 1`` up to ``after[k]``."""

    start: list[int]
    end: list[int]
    after: list[int]
    too_deep: bool = False


@dataclass(frozen=True)
class JsonSpan:
    """A JSON value found in a reply: ``reply[start:end]`` decoded."""

    start: int
    end: int
    value: dict[str, object] | list[object]


@dataclass(frozen=True)
class JsonScan:
    """What :func:`scan_json` found."""

    spans: list[JsonSpan]
    unclosed_at: int | None
    """Where the first bracket left open at the end of the reply is."""
    too_deep: bool


_OPENER = re.compile(r"[{\[]")
# Inside brackets, one token at a time: a bracket, a whole string or comment (possessive, so a
# string that never closes is scanned once and never backtracked over), or a lone quote or
# slash, which is a string or comment that never ends (or a plain slash).
_INSIDE_TOKEN = re.compile(
    r"""[{}\[\]]|"(?:[^"\\]++|\\.)*+"|'(?:[^'\\]++|\\.)*+'|//[^\n]*+\n|/\*|["'/]""", re.S
)
_PAIRS = ("{}", "[]")


def _bracket_regions(text: str) -> _Regions:
    """The bracketed regions of ``text``, nested ones included, in one pass; the scan stops at the
    first region nested deeper than :data:`MAX_JSON_DEPTH` (``too_deep``).

    Outside brackets the text is prose: quotes there are apostrophes. Inside, double or single
    quoted strings and ``//`` / ``/* */`` comments are skipped, so brackets in them do not count;
    one that never ends leaves every open region unclosed.
    """
    regions = _Regions([], [], [])
    start, end, after = regions.start, regions.end, regions.after
    stack: list[int] = []

    def close_all(how: int) -> None:
        for region in stack:
            end[region] = how
            after[region] = len(start)
        stack.clear()

    position = 0
    while (opener := _OPENER.search(text, position)) is not None:
        stack.append(len(start))
        start.append(opener.start())
        end.append(_UNCLOSED)
        after.append(-1)
        position = opener.end()
        while stack:
            for token in _INSIDE_TOKEN.finditer(text, position):
                kind = token.group()
                if kind == "{" or kind == "[":
                    if len(stack) >= MAX_JSON_DEPTH:
                        regions.too_deep = True
                        return regions
                    stack.append(len(start))
                    start.append(token.start())
                    end.append(_UNCLOSED)
                    after.append(-1)
                elif kind == "}" or kind == "]":
                    region = stack[-1]
                    if text[start[region]] + kind in _PAIRS:
                        stack.pop()
                        end[region] = token.end()
                        after[region] = len(start)
                    else:  # a mismatched closer: it breaks every region still open around it
                        close_all(_BROKEN)
                    if not stack:
                        position = token.end()
                        break
                elif kind == "/*":
                    close = text.find("*/", token.end())
                    if close < 0:
                        close_all(_UNCLOSED)
                        return regions
                    position = close + 2
                    break  # go on after the comment
                elif len(kind) == 1 and (kind != "/" or text.startswith("//", token.start())):
                    close_all(_UNCLOSED)  # a string or a line comment that never ends
                    return regions
            else:
                close_all(_UNCLOSED)  # the text ends inside the regions still open
                return regions
    return regions


# An object whose first member is an object or a list is neither JSON nor repairable nor a
# Python literal (a dict key must be hashable): such regions are looked into without decoding.
_NOT_A_VALUE = re.compile(r"\{\s*+[{\[]")


def scan_json(
    text: str, load: Callable[[str], dict[str, object] | list[object] | None] | None = None
) -> JsonScan:
    """The outermost parseable JSON values in ``text``, in order, where the first unclosed bracket
    is, and whether the nesting is too deep (then nothing is decoded). ``load`` decodes one
    bracketed region or returns None (default: JSON with the repairs :func:`extract_json` makes).
    Time is linear in ``text``.

    A closed region that does not parse is looked into, so a valid value inside prose braces is
    still found (up to ``_MAX_FAILED_LEVELS`` such regions deep); so are unclosed and broken ones.
    """
    with _collector_paused():
        return _scan_json(text, load or _load_lenient)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: a long reply yields hundreds of thousands of small
    acyclic objects (decoded values, region indices), and collections triggered by their
    allocation would traverse all of them again and again, making large replies slower per
    character (twice as slow at 1 MB). Nested or concurrent pauses only delay a collection."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _scan_json(text: str, load: Callable[[str], dict[str, object] | list[object] | None]) -> JsonScan:
    regions = _bracket_regions(text)
    if regions.too_deep:
        return JsonScan([], None, True)
    start, end, after = regions.start, regions.end, regions.after
    unclosed_at = next((start[r] for r in range(len(start)) if end[r] == _UNCLOSED), None)
    spans: list[JsonSpan] = []
    failed_around: list[int] = []  # the ``after`` of each enclosing region that did not parse
    region = 0
    while region < len(start):
        while failed_around and failed_around[-1] <= region:
            failed_around.pop()
        if end[region] < 0:  # unclosed or broken: only what is inside may be a value
            region += 1
            continue
        if len(failed_around) > _MAX_FAILED_LEVELS:
            region = after[region]
            continue
        value = None if _NOT_A_VALUE.match(text, start[region]) else load(text[start[region] : end[region]])
        if value is None:
            failed_around.append(after[region])
            region += 1
        else:
            spans.append(JsonSpan(start[region], end[region], value))
            region = after[region]
    return JsonScan(spans, unclosed_at, False)


_TRAILING_COMMA = re.compile(r",(\s*+[}\]])")
_BARE_KEY = re.compile(r"([{,]\s*+)([A-Za-z_][A-Za-z0-9_]*+)(\s*+:)")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_PY_LITERAL = re.compile(r"\b(True|False|None)\b")
_LENIENT_PIECE = re.compile(r"""[^"'/]++|"(?:[^"\\]++|\\.)*+"|'(?:[^'\\]++|\\.)*+'|//[^\n]*+|/\*|/""", re.S)
_SINGLE_QUOTED_ESCAPE = re.compile(r"\\(.)|\"", re.S)


def _single_to_double_quoted(literal: str) -> str:
    def convert(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped is None:
            return '\\"'
        return "'" if escaped == "'" else match.group(0)

    return '"' + _SINGLE_QUOTED_ESCAPE.sub(convert, literal[1:-1]) + '"'


def _lenient_json_text(span: str) -> str:
    """Rewrite the near-JSON small models write into JSON.

    Drops comments, turns single-quoted strings into double-quoted ones, removes trailing
    commas, quotes bare identifier keys and maps Python's True/False/None. Text inside
    strings is never touched.
    """
    out: list[str] = []
    bare: list[str] = []  # text between strings, repaired as one piece (a comment may split it)
    position = 0
    while position < len(span):
        piece = _LENIENT_PIECE.match(span, position)
        if piece is None:  # a string that never closes: kept as it is
            bare.append(span[position:])
            break
        text = piece.group()
        position = piece.end()
        if text[0] in "\"'":
            out.append(_fix_bare("".join(bare)))
            bare = []
            out.append(text if text[0] == '"' else _single_to_double_quoted(text))
        elif text == "/*":
            close = span.find("*/", position)
            position = len(span) if close < 0 else close + 2
        elif not text.startswith("//"):
            bare.append(text)
    out.append(_fix_bare("".join(bare)))
    return "".join(out)


def _fix_bare(segment: str) -> str:
    segment = _TRAILING_COMMA.sub(r"\1", segment)
    segment = _BARE_KEY.sub(r'\1"\2"\3', segment)
    return _PY_LITERAL.sub(lambda m: _PY_LITERALS[m.group(1)], segment)


# What the repairs of _lenient_json_text act on; a region without any is not rewritten.
_REPAIRABLE = re.compile(r"['/]|,\s*+[}\]]|[{,]\s*+[A-Za-z_]|True|False|None")
# How JSON can begin; "{{" and "{ prose" cannot, and decoding them only to fail costs most of the
# time on replies made of many small bracketed regions.
_JSON_START = re.compile(r"\[|\{\s*+[\"}]")


def _load_lenient(span: str) -> dict[str, object] | list[object] | None:
    if _JSON_START.match(span):
        try:
            value = json.loads(span)
        except ValueError:  # not JSON, or a number of more than 4,300 digits
            pass
        else:
            return value if isinstance(value, dict | list) else None
    if _REPAIRABLE.search(span) is None:
        return None
    try:
        value = json.loads(_lenient_json_text(span))
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def nested_deeper_than(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a decoded value nests lists/dicts more than ``limit`` deep (walked without recursion)."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


NOT_JSON = ParseFailure("the reply is not JSON as a whole")


def decode_bounded(text: str) -> object:
    """``json.loads(text)`` for a reply that may be JSON as a whole: the value, :data:`NOT_JSON`,
    or :data:`TOO_DEEP` when it nests deeper than :data:`MAX_JSON_DEPTH`."""
    try:
        value = json.loads(text)
    except ValueError:  # not JSON, or a number of more than 4,300 digits
        return NOT_JSON
    except RecursionError:  # the C decoder gives up near the interpreter's recursion limit
        return TOO_DEEP
    return checked_depth(value, text)


def checked_depth(value: object, text: str) -> object:
    """``value`` decoded from ``text``, or :data:`TOO_DEEP`. The count of brackets in the text
    bounds the depth, so the common small reply is not walked."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return value
    return TOO_DEEP if nested_deeper_than(value) else value


def extract_json(text: str) -> dict[str, object] | list[object] | ParseFailure:
    """The last JSON object or array in a reply (reasoning blocks ignored).

    Code fences and prose around it are fine; trailing commas, comments, single-quoted
    strings, bare keys and Python literals are repaired where that is unambiguous. A reply
    that ends with brackets still open is cut off and fails, even if a complete value came
    earlier or sits inside the open one: the value the model meant is incomplete. Nesting
    deeper than :data:`MAX_JSON_DEPTH` fails.
    """
    body = strip_thinking(text)
    if not body:
        return ParseFailure(_empty_reason(text))
    scan = scan_json(body)
    if scan.too_deep:
        return TOO_DEEP
    if scan.unclosed_at is not None:  # whatever parsed before or inside it, the last value is incomplete
        return CUT_OFF
    if scan.spans:
        return scan.spans[-1].value
    if "{" in body or "[" in body:
        return ParseFailure("the reply has brackets but no valid JSON")
    return ParseFailure("no JSON object in the reply")


def _empty_reason(original: str) -> str:
    if original.strip():
        return "the reply has only a <think> block and no answer after it"
    return "empty reply"


# ---------------------------------------------------------------------------------------------
# Choices


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
    """The option index ``0 .. n_options-1`` a reply chose (rules in the module docstring)."""
    if n_options < 1:
        raise ValueError(f"n_options must be at least 1, got {n_options}")
    body = strip_thinking(text)
    if not body:
        return ParseFailure(_empty_reason(text))
    scan = scan_json(body)
    if scan.too_deep:
        return TOO_DEEP
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


# ---------------------------------------------------------------------------------------------
# Labels


_LABEL_MARKER = (
    r"\b(?:final\s+)?(?:answer|decision|label|choice|action|output|response)\b[\"']?\s*(?:[:：=]|is\b)"
)


def parse_label(text: str, labels: Sequence[str]) -> str | ParseFailure:
    """Which of ``labels`` a reply gave (case-insensitive), returned as spelled in ``labels``.

    Explicit forms win (``Answer: SPEAK``, a JSON string value, a line holding only the
    label), the last one in the reply; otherwise the last whole-word occurrence of any label.
    """
    if not labels:
        raise ValueError("parse_label needs at least one label")
    canonical = {label.lower(): label for label in labels}
    if len(canonical) != len(labels):
        raise ValueError(f"labels must differ ignoring case: {list(labels)}")
    body = strip_thinking(text)
    if not body:
        return ParseFailure(_empty_reason(text))
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    word = rf"(?<![A-Za-z0-9_])(?P<label>{alternatives})(?![A-Za-z0-9_])"
    explicit: list[tuple[int, str]] = []
    scan = scan_json(body)
    if scan.too_deep:
        return TOO_DEEP
    for span in scan.spans:
        for value in _json_strings(span.value):
            if value.strip().lower() in canonical:
                explicit.append((span.end, value.strip().lower()))
    for pattern in (
        re.compile(rf"{_LABEL_MARKER}[\s\"'*_`\[(]*{word}", re.I),
        re.compile(rf"^[^\w\n]*{word}[^\w\n]*$", re.I | re.M),
    ):
        explicit.extend((m.start("label"), m.group("label").lower()) for m in pattern.finditer(body))
    if explicit:
        return canonical[max(explicit)[1]]
    mentions = [(m.start("label"), m.group("label").lower()) for m in re.finditer(word, body, re.I)]
    if not mentions:
        return ParseFailure(f"none of {', '.join(labels)} in the reply")
    return canonical[max(mentions)[1]]


def _json_strings(value: object) -> list[str]:
    """Every string in a JSON value (walked with a stack, not recursion; order does not matter)."""
    strings: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return strings


# ---------------------------------------------------------------------------------------------
# Asking with re-asks and a fallback


@dataclass(frozen=True)
class AskRecord:
    """One attempt of :func:`ask`: what was sent (size), what came back, what it parsed to."""

    attempt: int
    prompt_chars: int
    """Characters of message content sent in this attempt (images not counted)."""
    reply: str
    parsed: object | None
    failure: str | None
    """Why the reply could not be used (a parse failure or a backend error), None if it could."""
    latency_s: float
    follow_up: str | None = None
    """What was sent back when the reply was a step towards an answer (a tool's result)."""
    reply_chars: int | None = None
    """The reply's length as the model gave it, when that was over ``max_reply_chars`` and it was
    cut (``reply`` holds what was kept and parsed); None when the reply was kept whole."""


@dataclass(frozen=True)
class FollowUp:
    """A reply that is not the answer yet but asks for something (a tool call whose result the
    model needs): ``message`` goes back to it and it is asked again, without using a re-ask."""

    message: str


@dataclass(frozen=True)
class Decision(Generic[T]):
    """The value a decision settled on, whether it is the declared default, and every attempt."""

    value: T
    fallback: bool
    attempts: tuple[AskRecord, ...]


MAX_REPLY_CHARS = 65_536
"""Default of :func:`ask`'s ``max_reply_chars``: far above any answer asked for (a few hundred
tokens), far below what a model repeating itself up to a large token limit writes."""


def _parse_safely(
    parse: Callable[[str], T | ParseFailure | FollowUp], reply: str, policy_name: str, attempt: int
) -> T | ParseFailure | FollowUp:
    """``parse(reply)``, with any exception it raises turned into a :class:`ParseFailure`: a bug in a
    parser costs one attempt, never the run (which would hit the same reply again on resume)."""
    try:
        return parse(reply)
    except Exception as error:  # whatever a parser raises, the run goes on
        logger.exception("%s reply %d: the parser raised %s", policy_name, attempt, type(error).__name__)
        message = str(error)
        message = message if len(message) <= 200 else f"{message[:197]}..."
        return ParseFailure(f"the reply could not be parsed ({type(error).__name__}: {message})")


def ask(
    policy: Policy,
    messages: Sequence[Message],
    images: Sequence[NDArray[np.uint8]] = (),
    parse: Callable[[str], T | ParseFailure | FollowUp] | None = None,
    *,
    default: T,
    max_retries: int = 2,
    max_follow_ups: int = 3,
    on_text: Callable[[int, str], None] | None = None,
    max_tokens: int = 256,
    temperature: float = 0.0,
    format_hint: str = "the answer in the format asked for above",
    max_reply_chars: int = MAX_REPLY_CHARS,
) -> Decision[T]:
    """Ask ``policy`` and parse its reply, re-asking up to ``max_retries`` times, then ``default``.

    A reply that does not parse is answered with the model's reply as an assistant message and
    a user message naming the problem ("Your reply could not be used: <reason>. Reply with
    <format_hint> only."). A backend :class:`PolicyError` (server down, malformed response)
    counts as a failed attempt and the same conversation is sent again; it never propagates,
    except a :class:`ContextOverflowError` on the first attempt: the conversation as given does
    not fit the model's context. A re-ask that outgrows the context (the model's own replies and
    the re-ask messages added up) ends the asking with the default, as no later one can fit.
    Images go with every attempt (attached, as always, to the last user message).

    ``parse`` may also return a :class:`FollowUp` (the model called an information tool): its
    message goes back as a user message and the model is asked again; up to ``max_follow_ups``
    of these are free, further ones count as failed attempts.

    ``on_text(attempt, piece)`` streams each reply as the backend generates it.

    A reply longer than ``max_reply_chars`` is cut to that length before it is parsed, kept or
    sent back (degenerate repetition up to the token limit); the record keeps its full length
    in ``reply_chars``. An exception raised by ``parse`` (a parser bug) is logged and counts as a
    failed attempt with its reason; it never propagates.
    """
    if parse is None:
        raise TypeError("ask() needs a parse function: parse(text) -> value | ParseFailure")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    if max_follow_ups < 0:
        raise ValueError(f"max_follow_ups must be >= 0, got {max_follow_ups}")
    if max_reply_chars < 1:
        raise ValueError(f"max_reply_chars must be >= 1, got {max_reply_chars}")
    conversation: list[Message] = list(messages)
    attempts: list[AskRecord] = []
    failures = follow_ups = 0
    while failures <= max_retries:
        attempt = len(attempts)
        prompt_chars = sum(len(m["content"]) for m in conversation)
        started = time.perf_counter()
        try:
            completion = policy.complete(
                conversation,
                images,
                max_tokens=max_tokens,
                temperature=temperature,
                on_text=None if on_text is None else functools.partial(on_text, attempt),
            )
        except PolicyError as error:
            if isinstance(error, ContextOverflowError) and not attempts:
                raise  # the conversation as given does not fit: so would every other decision's
            latency = time.perf_counter() - started
            attempts.append(AskRecord(attempt, prompt_chars, "", None, f"policy error: {error}", latency))
            logger.warning("%s attempt %d failed: %s", policy.name, attempt, error)
            failures += 1
            if isinstance(error, ContextOverflowError):
                break  # the re-asks grew past the context; further ones would only grow more
            continue
        reply, reply_chars = completion.text, None
        if len(reply) > max_reply_chars:
            reply_chars, reply = len(reply), reply[:max_reply_chars]
            logger.warning(
                "%s reply %d has %d characters; parsing the first %d",
                policy.name,
                attempt,
                reply_chars,
                max_reply_chars,
            )
        record = functools.partial(
            AskRecord, attempt, prompt_chars, reply, latency_s=completion.latency_s, reply_chars=reply_chars
        )
        result = _parse_safely(parse, reply, policy.name, attempt)
        if isinstance(result, FollowUp) and follow_ups < max_follow_ups:
            follow_ups += 1
            attempts.append(record(None, None, follow_up=result.message))
            conversation += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": f"{result.message}\nNow reply with {format_hint}."},
            ]
            continue
        if isinstance(result, FollowUp):
            result = ParseFailure(f"{max_follow_ups} tool results were given already; an answer is needed")
        if isinstance(result, ParseFailure):
            failures += 1
            attempts.append(record(None, result.reason))
            logger.info("%s reply %d unusable: %s", policy.name, attempt, result.reason)
            conversation += [
                {"role": "assistant", "content": reply},
                {
                    "role": "user",
                    "content": f"Your reply could not be used: {result.reason}. "
                    f"Reply with {format_hint} only.",
                },
            ]
            continue
        attempts.append(record(result, None))
        return Decision(result, False, tuple(attempts))
    logger.warning(
        "%s gave no usable reply in %d attempts (last: %s); using the default %r",
        policy.name,
        len(attempts),
        attempts[-1].failure,
        default,
    )
    return Decision(default, True, tuple(attempts))
