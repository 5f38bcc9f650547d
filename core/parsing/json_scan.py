"""Finding JSON in a reply: bracketed regions in one linear pass, near-JSON repaired, nesting bounded.

A region that is not JSON is looked into only a few levels deep, and JSON nested deeper than
:data:`MAX_JSON_DEPTH` fails with a clear reason before a decoder (which recurses per level)
sees it, so a hostile reply costs time linear in its length.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from embodia.core.json_bounds import MAX_JSON_DEPTH, Unreadable, load_bounded, too_deep
from embodia.core.parsing.failure import ParseFailure
from embodia.core.parsing.thinking import empty_reason, strip_thinking

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


NOT_JSON = ParseFailure("the reply is not JSON as a whole")


def decode_bounded(text: str) -> object:
    """``json.loads(text)`` for a reply that may be JSON as a whole: the value, :data:`NOT_JSON`,
    or :data:`TOO_DEEP` when it nests deeper than :data:`MAX_JSON_DEPTH`."""
    value = load_bounded(text)
    if value is Unreadable.NOT_JSON:
        return NOT_JSON
    return TOO_DEEP if value is Unreadable.TOO_DEEP else value


def checked_depth(value: object, text: str) -> object:
    """``value`` decoded from ``text``, or :data:`TOO_DEEP`."""
    return TOO_DEEP if too_deep(value, text) else value


def scan_reply(text: str) -> tuple[str, JsonScan] | ParseFailure:
    """The reply without its reasoning blocks and what :func:`scan_json` finds in it, or why
    there is nothing to read: an empty reply, or JSON nested deeper than :data:`MAX_JSON_DEPTH`."""
    body = strip_thinking(text)
    if not body:
        return ParseFailure(empty_reason(text))
    scan = scan_json(body)
    if scan.too_deep:
        return TOO_DEEP
    return body, scan


def extract_json(text: str) -> dict[str, object] | list[object] | ParseFailure:
    """The last JSON object or array in a reply (reasoning blocks ignored).

    Code fences and prose around it are fine; trailing commas, comments, single-quoted
    strings, bare keys and Python literals are repaired where that is unambiguous. A reply
    that ends with brackets still open is cut off and fails, even if a complete value came
    earlier or sits inside the open one: the value the model meant is incomplete. Nesting
    deeper than :data:`MAX_JSON_DEPTH` fails.
    """
    scanned = scan_reply(text)
    if isinstance(scanned, ParseFailure):
        return scanned
    body, scan = scanned
    if scan.unclosed_at is not None:  # whatever parsed before or inside it, the last value is incomplete
        return CUT_OFF
    if scan.spans:
        return scan.spans[-1].value
    if "{" in body or "[" in body:
        return ParseFailure("the reply has brackets but no valid JSON")
    return ParseFailure("no JSON object in the reply")
