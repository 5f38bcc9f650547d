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
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from embodia.policies.base import Message, Policy, PolicyError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ParseFailure:
    """Why a reply could not be used, as one line fit to show the model."""

    reason: str


# ---------------------------------------------------------------------------------------------
# Thinking blocks


_THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1\s*>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*>", re.I)
_THINK_OPEN = re.compile(r"<(?:think|thinking)>", re.I)


def strip_thinking(text: str) -> str:
    """The reply without its reasoning blocks, stripped of surrounding whitespace.

    Removes closed ``<think>...</think>`` (or ``<thinking>``) blocks, everything up to a
    closing tag whose opening tag was part of the prompt, and an unclosed block running to
    the end of the reply (a reply cut off while thinking has no answer).
    """
    rest = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(rest))
    if closes:
        rest = rest[closes[-1].end() :]
    opening = _THINK_OPEN.search(rest)
    if opening:
        rest = rest[: opening.start()]
    return rest.strip()


# ---------------------------------------------------------------------------------------------
# JSON


@dataclass(frozen=True)
class _JsonSpan:
    start: int
    end: int
    value: dict[str, object] | list[object]


_CLOSER = {"{": "}", "[": "]"}


def _string_end(text: str, start: int) -> int | None:
    """Index just past the string literal opened at ``start`` (either quote), None if unclosed."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return i + 1
        i += 1
    return None


_UNCLOSED = -1


def _balanced_end(text: str, start: int) -> int | None:
    """End (exclusive) of the bracketed value opened at ``start``.

    Strings (double or single quoted) and ``//`` / ``/* */`` comments are skipped so braces
    inside them do not count. Returns ``_UNCLOSED`` when the text ends with brackets still
    open (a cut-off reply) and None when a closing bracket does not match.
    """
    stack: list[str] = []
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            end = _string_end(text, i)
            if end is None:
                return _UNCLOSED
            i = end
            continue
        if text.startswith("//", i):
            newline = text.find("\n", i)
            if newline == -1:
                return _UNCLOSED
            i = newline + 1
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close == -1:
                return _UNCLOSED
            i = close + 2
            continue
        if c in _CLOSER:
            stack.append(_CLOSER[c])
        elif c in "}]":
            if not stack or stack.pop() != c:
                return None
            if not stack:
                return i + 1
        i += 1
    return _UNCLOSED


_DQ_STRING = re.compile(r'"(?:\\.|[^"\\])*"', re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*:)")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_PY_LITERAL = re.compile(r"\b(True|False|None)\b")


def _single_to_double_quoted(literal: str) -> str:
    body = literal[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append("'" if nxt == "'" else c + nxt)
            i += 2
            continue
        out.append('\\"' if c == '"' else c)
        i += 1
    return '"' + "".join(out) + '"'


def _lenient_json_text(span: str) -> str:
    """Rewrite the near-JSON small models write into JSON.

    Drops comments, turns single-quoted strings into double-quoted ones, removes trailing
    commas, quotes bare identifier keys and maps Python's True/False/None. Text inside
    strings is never touched.
    """
    pieces: list[str] = []
    i = 0
    while i < len(span):
        c = span[i]
        if c in "\"'":
            end = _string_end(span, i)
            if end is None:
                pieces.append(span[i:])
                break
            literal = span[i:end]
            pieces.append(literal if c == '"' else _single_to_double_quoted(literal))
            i = end
        elif span.startswith("//", i):
            newline = span.find("\n", i)
            i = len(span) if newline == -1 else newline
        elif span.startswith("/*", i):
            close = span.find("*/", i + 2)
            i = len(span) if close == -1 else close + 2
        else:
            pieces.append(c)
            i += 1
    joined = "".join(pieces)
    out: list[str] = []
    last = 0
    for match in _DQ_STRING.finditer(joined):
        out.append(_fix_bare(joined[last : match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_fix_bare(joined[last:]))
    return "".join(out)


def _fix_bare(segment: str) -> str:
    segment = _TRAILING_COMMA.sub(r"\1", segment)
    segment = _BARE_KEY.sub(r'\1"\2"\3', segment)
    return _PY_LITERAL.sub(lambda m: _PY_LITERALS[m.group(1)], segment)


def _load_lenient(span: str) -> dict[str, object] | list[object] | None:
    for candidate in (span, _lenient_json_text(span)):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict | list):
            return value
    return None


def _json_spans(text: str) -> tuple[list[_JsonSpan], int | None]:
    """The outermost parseable JSON values in ``text``, in order, and where the first unclosed bracket is.

    Scans left to right; an opening bracket whose value does not parse is skipped so that a
    valid value nested inside prose braces is still found.
    """
    spans: list[_JsonSpan] = []
    unclosed_at: int | None = None
    i = 0
    while i < len(text):
        if text[i] not in _CLOSER:
            i += 1
            continue
        end = _balanced_end(text, i)
        if end == _UNCLOSED:
            if unclosed_at is None:
                unclosed_at = i
        elif end is not None:
            value = _load_lenient(text[i:end])
            if value is not None:
                spans.append(_JsonSpan(i, end, value))
                i = end
                continue
        i += 1
    return spans, unclosed_at


def extract_json(text: str) -> dict[str, object] | list[object] | ParseFailure:
    """The last JSON object or array in a reply (reasoning blocks ignored).

    Code fences and prose around it are fine; trailing commas, comments, single-quoted
    strings, bare keys and Python literals are repaired where that is unambiguous. A reply
    that ends with brackets still open is cut off and fails, even if a complete value came
    earlier or sits inside the open one: the value the model meant is incomplete.
    """
    body = strip_thinking(text)
    if not body:
        return ParseFailure(_empty_reason(text))
    spans, unclosed_at = _json_spans(body)
    if unclosed_at is not None:  # whatever parsed before or inside it, the last value is incomplete
        return ParseFailure("the JSON in the reply is cut off (brackets left open)")
    if spans:
        return spans[-1].value
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
_NUM = rf"(?P<num>-?\d+(?:\.\d+)?(?![A-Za-z0-9_])|(?:{_WORDS})\b(?!\s+of\b))"
_NOUN = r"(?:waypoint|option|choice|marker|number|index|candidate|no\.)"
# What may sit between a marker and its number: quotes, markdown, brackets, "#", a noun.
_DECOR = rf"[\s\"'*_`\[(#]*(?:{_NOUN}\s*[\s\"'*_`\[(#]*)?"
_VERB = (
    r"\b(?:choose|chose|choosing|pick|picked|picking|select|selected|selecting|"
    r"go\s+with|going\s+with|opt\s+for|settle\s+on)\b"
    rf"|\b(?:go|move|head|navigate)\s+(?:to|towards)\s+(?:the\s+)?(?={_NOUN})"
)
_VERB_ANSWER = re.compile(rf"(?:{_VERB})\s*(?:the\s+)?{_DECOR}{_NUM}", re.I)
_CJK_ANSWER = re.compile(rf"(?:答案|选择|我选)\s*(?:是|为)?\s*[:：]?\s*{_DECOR}{_NUM}", re.I)
_BARE_LINE = re.compile(rf"^[^\w\n-]*(?:{_NOUN}\s*)?[^\w\n-]*{_NUM}[^\w\n]*$", re.I | re.M)
_LOOSE_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![A-Za-z0-9_])")
_NEGATION_BEFORE = re.compile(r"(?:\bnot|\bnever|n't|\bno)\s+(?:\w+\s+){0,2}$", re.I)


def _marker_answer(keys: Sequence[str]) -> re.Pattern[str]:
    names = sorted({*(k.lower() for k in keys), "answer"}, key=len, reverse=True)
    any_key = "|".join(re.escape(k) for k in names)
    # "is" only after answer-like words: "the nearest waypoint is 3 m away" is not an answer
    return re.compile(
        rf"\b(?:final\s+)?(?:(?:{any_key})s?\b[\"'*_`]*\s*[:：=]|(?:answer|choice|selection|decision|pick)"
        rf"\b\s*(?:is|would\s+be|will\s+be)\b)\s*{_DECOR}{_NUM}",
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
    """The first of ``keys`` (case-insensitive) in a JSON object, searched depth-first, and its value."""
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
        match = re.fullmatch(rf"[\s\[(#]*(?:{_NOUN}\s*)?{_NUM}[\s\])]*", value, re.I)
        return match.group("num") if match else None
    return None


def _not_negated(text: str, start: int) -> bool:
    return _NEGATION_BEFORE.search(text[max(0, start - 30) : start]) is None


def parse_choice(
    text: str, n_options: int, *, keys: Sequence[str] = ("choice", "answer", "waypoint", "index")
) -> int | ParseFailure:
    """The option index ``0 .. n_options-1`` a reply chose (rules in the module docstring)."""
    if n_options < 1:
        raise ValueError(f"n_options must be at least 1, got {n_options}")
    body = strip_thinking(text)
    if not body:
        return ParseFailure(_empty_reason(text))
    spans, unclosed_at = _json_spans(body)
    candidates: list[_Candidate] = []
    masked = list(body)
    for span in spans:
        found = _json_choice(span.value, keys)
        if found is None:
            continue
        key, value = found
        raw = _json_number(value)
        if raw is None:
            candidates.append(
                _Candidate(span.end, f"the JSON {key!r} value {json.dumps(value)} is not a number", "bad")
            )
        else:
            candidates.append(_Candidate(span.end, raw, "json"))
        masked[span.start : span.end] = " " * (span.end - span.start)  # its strings are not answers
    searchable = "".join(masked)
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
    for number in ruled_out:  # "I would not pick 3" does not make 3 the one number mentioned
        searchable = re.sub(rf"(?<![\w.]){re.escape(number)}(?![A-Za-z0-9_])", " ", searchable)
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
    loose = sorted({m.group(0) for m in _LOOSE_NUMBER.finditer(searchable)}, key=_loose_sort_key)
    if not loose and ruled_out:
        return ParseFailure(f"the reply only rules out {', '.join(ruled_out)} and gives no answer")
    if not loose:
        return ParseFailure("no number in the reply")
    if len(loose) > 1:
        return ParseFailure(
            f"the reply mentions several numbers ({', '.join(loose)}) but gives no explicit answer"
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
    spans, _ = _json_spans(body)
    for span in spans:
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
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return []


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
) -> Decision[T]:
    """Ask ``policy`` and parse its reply, re-asking up to ``max_retries`` times, then ``default``.

    A reply that does not parse is answered with the model's reply as an assistant message and
    a user message naming the problem ("Your reply could not be used: <reason>. Reply with
    <format_hint> only."). A backend :class:`PolicyError` (server down, malformed response)
    counts as a failed attempt and the same conversation is sent again; it never propagates.
    Images go with every attempt (attached, as always, to the last user message).

    ``parse`` may also return a :class:`FollowUp` (the model called an information tool): its
    message goes back as a user message and the model is asked again; up to ``max_follow_ups``
    of these are free, further ones count as failed attempts.

    ``on_text(attempt, piece)`` streams each reply as the backend generates it.
    """
    if parse is None:
        raise TypeError("ask() needs a parse function: parse(text) -> value | ParseFailure")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    if max_follow_ups < 0:
        raise ValueError(f"max_follow_ups must be >= 0, got {max_follow_ups}")
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
            latency = time.perf_counter() - started
            attempts.append(AskRecord(attempt, prompt_chars, "", None, f"policy error: {error}", latency))
            logger.warning("%s attempt %d failed: %s", policy.name, attempt, error)
            failures += 1
            continue
        result = parse(completion.text)
        if isinstance(result, FollowUp) and follow_ups < max_follow_ups:
            follow_ups += 1
            attempts.append(
                AskRecord(
                    attempt, prompt_chars, completion.text, None, None, completion.latency_s, result.message
                )
            )
            conversation += [
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": f"{result.message}\nNow reply with {format_hint}."},
            ]
            continue
        if isinstance(result, FollowUp):
            result = ParseFailure(f"{max_follow_ups} tool results were given already; an answer is needed")
        if isinstance(result, ParseFailure):
            failures += 1
            attempts.append(
                AskRecord(attempt, prompt_chars, completion.text, None, result.reason, completion.latency_s)
            )
            logger.info("%s reply %d unusable: %s", policy.name, attempt, result.reason)
            conversation += [
                {"role": "assistant", "content": completion.text},
                {
                    "role": "user",
                    "content": f"Your reply could not be used: {result.reason}. "
                    f"Reply with {format_hint} only.",
                },
            ]
            continue
        attempts.append(AskRecord(attempt, prompt_chars, completion.text, result, None, completion.latency_s))
        return Decision(result, False, tuple(attempts))
    logger.warning(
        "%s gave no usable reply in %d attempts (last: %s); using the default %r",
        policy.name,
        len(attempts),
        attempts[-1].failure,
        default,
    )
    return Decision(default, True, tuple(attempts))
