"""Scoring DSR-Bench answers exactly as the public benchmark does, with diagnostics.

1. ``final_answer`` is read from the reply's JSON: the whole reply when it is one object, else
   the last JSON value in it (code fences, prose and think blocks around it are fine). No
   parseable ``final_answer``: both scores 0, failure ``parse``.
2. Exact match: the canonical serialisations are equal (``core.canonical``: ``str`` without
   spaces); integers given as strings count as integers, as the reference's ``int()`` does,
   and an answer given as a string holding a literal is read as that literal (``str`` of it
   is what the reference compares). LRU answers are compared as sets.
3. Partial credit: ``1 - Levenshtein(a, b) / max(len(a), len(b))`` on the canonical strings.

Failures are classified for the taxonomy: ``parse`` (no answer could be read), ``wrong_type``
(an answer of another shape than the truth, e.g. an int for a list) and ``wrong_final``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Literal

from rapidfuzz.distance import Levenshtein

from embodia.core.parsing import (
    CUT_OFF,
    NOT_JSON,
    TOO_DEEP,
    ParseFailure,
    checked_depth,
    decode_bounded,
    extract_json,
    nested_deeper_than,
)
from embodia.envs.dsr.core import Comparison, Operation, Step, canonical, get_operation
from embodia.envs.dsr.suites import Instance

Failure = Literal["parse", "wrong_type", "wrong_final"]
FAILURES: tuple[Failure, ...] = ("parse", "wrong_type", "wrong_final")


@dataclass(frozen=True)
class Score:
    exact: float
    partial: float
    failure: Failure | None
    reason: str = ""
    """Why a parse failed, or what was wrong with the answer's type."""
    answer: Any = None
    first_wrong_step: int | None = None
    """Index of the first step whose stated output differs from the truth (stepwise replies)."""
    steps_given: int = 0

    def to_json(self) -> dict[str, Any]:
        """Every field by name, in order (the answer as it was read, not copied)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


_MISSING = object()


_DECODER = json.JSONDecoder()
_FINAL_OBJECT = '{"final_answer"'


def _fast_object(text: str) -> object:
    """The reply's JSON without the lenient scan, for the common well-formed shapes, else ``None``.

    The whole reply as one object, or prose and a code fence around one ``{"final_answer": ...}``
    object with no other bracket before or after it: exactly the cases where the lenient scan
    would find the same value.
    """
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        value = decode_bounded(stripped)
        return None if value is NOT_JSON else value
    start = text.rfind(_FINAL_OBJECT)
    if start < 0 or "<think" in text or "{" in text[:start] or "[" in text[:start]:
        return None
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as error:
        # It broke off at the very end: the reply was cut short (what the lenient scan reports too).
        return CUT_OFF if error.pos >= len(text.rstrip()) else None
    except ValueError:  # a number of more than 4,300 digits: the lenient scan decides
        return None
    except RecursionError:  # the C decoder gives up near the interpreter's recursion limit
        return TOO_DEEP
    rest = text[end:]
    return None if "{" in rest or "[" in rest or "}" in rest or "]" in rest else checked_depth(value, text)


def parse_reply(text: str) -> dict[str, Any] | ParseFailure:
    """The reply's JSON object holding ``final_answer``."""
    value = _fast_object(text)
    if value is None:
        value = extract_json(text)
    if isinstance(value, ParseFailure):
        return value
    if not isinstance(value, dict):
        return ParseFailure("the last JSON value in the reply is not an object")
    if "final_answer" not in value:
        return ParseFailure("the reply's JSON has no final_answer")
    return value


def _read_literal(text: str) -> Any:
    """The literal a string answer holds, or ``_MISSING``; one nested deeper than the replies'
    JSON may be is no answer (comparing it would recurse as deep)."""
    value = decode_bounded(text)
    if value is NOT_JSON:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return _MISSING
    if value is TOO_DEEP or nested_deeper_than(value):
        return _MISSING
    return value


def normalise(answer: Any, truth: Any) -> Any:
    """The answer as the reference would compare it against ``truth``."""
    if isinstance(answer, str) and not isinstance(truth, str):
        text = answer.strip()
        if isinstance(truth, int) and not isinstance(truth, bool):
            try:
                return int(text)
            except ValueError:
                pass
        literal = _read_literal(text)
        if literal is not _MISSING:
            answer = literal
    if isinstance(answer, tuple):
        answer = list(answer)
    if isinstance(answer, float) and answer.is_integer() and isinstance(truth, int):
        return int(answer)
    return answer


def _shape(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list" if not value else f"list[{_shape(value[0])}]"
    return type(value).__name__


def _type_mismatch(answer: Any, truth: Any) -> str:
    if isinstance(truth, dict) and isinstance(answer, dict):
        return "" if set(answer) == set(truth) else f"keys {sorted(answer)} instead of {sorted(truth)}"
    have, want = _shape(answer), _shape(truth)
    if (
        have == want
        or (have.startswith("list") and want == "list")
        or (have == "list" and want.startswith("list"))
    ):
        return ""
    return f"{have} instead of {want}"


def _as_set_text(value: Any) -> str:
    items = value if isinstance(value, list) else [value]
    return "[" + ",".join(sorted(canonical(item) for item in items)) + "]"


def compare(
    answer: Any, truth: Any, comparison: Comparison = "exact", prepare: Callable[[Any], Any] | None = None
) -> tuple[float, float]:
    """(exact, partial) for an already parsed answer."""
    answer = normalise(answer, truth)
    if prepare is not None:
        answer = prepare(answer)
    if comparison == "set":
        have, want = _as_set_text(answer), _as_set_text(truth)
    else:
        have, want = canonical(answer), canonical(truth)
    if have == want:
        return 1.0, 1.0
    return 0.0, 1.0 - Levenshtein.normalized_distance(have, want)


def first_wrong_step(
    given: list[Any], steps: tuple[Step, ...], operation: Operation | None = None
) -> int | None:
    """Index of the first stated step output that differs from the reference's state after that step."""
    comparison: Comparison = operation.comparison if operation else "exact"
    prepare = operation.prepare if operation else None
    for index, (entry, step) in enumerate(zip(given, steps, strict=False)):
        output = entry.get("output") if isinstance(entry, dict) else entry
        if compare(output, step.state, comparison, prepare)[0] != 1.0:
            return index
    if len(given) < len(steps):
        return len(given)
    return None


def score_answer(answer: Any, truth: Any, operation: str) -> Score:
    """Score a final answer that is already a value against ``truth``, as ``operation``
    (``structure.name``) compares them: no :class:`Instance` needed."""
    compared = get_operation(operation)
    exact, partial = compare(answer, truth, compared.comparison, compared.prepare)
    if exact == 1.0:
        return Score(exact, partial, None, answer=answer)
    mismatch = _type_mismatch(normalise(answer, truth), truth)
    failure: Failure = "wrong_type" if mismatch else "wrong_final"
    return Score(exact, partial, failure, reason=mismatch, answer=answer)


def score(reply: str, truth: Any, operation: str) -> Score:
    """Score a model's reply text against ``truth`` for ``operation`` (``structure.name``), e.g.
    an answer to a question from another harness; without an :class:`Instance` there are no
    per-step diagnostics (:func:`score_reply` gives them)."""
    parsed = parse_reply(reply)
    if isinstance(parsed, ParseFailure):
        return Score(0.0, 0.0, "parse", reason=parsed.reason)
    return score_answer(parsed["final_answer"], truth, operation)


def score_value(answer: Any, instance: Instance) -> Score:
    """Score a final answer that is already a value (the code probe's ``solution()`` result)."""
    return score_answer(answer, instance.truth, instance.operation)


def score_reply(text: str, instance: Instance) -> Score:
    """Score a model's reply text against ``instance``."""
    reply = parse_reply(text)
    if isinstance(reply, ParseFailure):
        return Score(0.0, 0.0, "parse", reason=reply.reason)
    result = score_value(reply["final_answer"], instance)
    given = reply.get("steps")
    if not isinstance(given, list) or not instance.steps:
        return result
    return Score(
        result.exact,
        result.partial,
        result.failure,
        result.reason,
        result.answer,
        first_wrong_step(given, instance.steps, get_operation(instance.operation)),
        len(given),
    )


def parse_failure_score(reason: str) -> Score:
    return Score(0.0, 0.0, "parse", reason=reason)
