"""Every parser of model replies on hostile shapes up to 1 MB: linear time, and it never raises.

Small models do write these: degenerate repetition up to the token limit, runaway brackets,
``<think>`` openers over and over. Each entry point must return a value or its failure (a
``ParseFailure``, a ``Parsed`` failure, a scorer's parse failure) within a budget that only a
quadratic parser misses: 16 KB took 12 s in ``parse_choice`` before, ×4 per doubling. Speed
itself is measured by benchmarks/parsing.py; the budgets here only catch a hang.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reply_parsers import reply_parsers

from embodia.agents.csmr import _action
from embodia.core.parsing import (
    MAX_JSON_DEPTH,
    ParseFailure,
    extract_json,
    parse_choice,
)
from embodia.envs.dsr import suites
from embodia.envs.dsr.env import _state_from_reply
from embodia.envs.dsr.scoring import score_reply
from embodia.envs.puzzles import find_answer

MB = 1 << 20
BUDGET_S = 10.0
"""Per call on a 1 MB reply: a hang guard, not a speed claim. Linear parsers take 0.1-2 s on a
2-core machine that other jobs load; a quadratic one took 12 s on 16 KB, hours on 1 MB."""

_DSR_INSTANCE = suites.make_instance(suites.groups("main")[0], "short", 0)
ENTRY_POINTS = reply_parsers()

# Each shape: (prefix, fragment repeated to fill the size, suffix).
SHAPES: dict[str, tuple[str, str, str]] = {
    "valid JSON, huge string": ('{"choice": 3, "final_answer": [1], "reasoning": "', "x", '"}'),
    "valid JSON, huge escaped string": ('{"choice": 3, "reasoning": "', '\\"a\\\\', '"}'),
    "unclosed brackets": ("", "[", ""),
    "unclosed objects, one level": ('{"choice": 2, ', '"k": [1, 2], ', ""),
    "nested braces": ("", "{", ""),
    "nested braces, closed": ("", "{{{{{}}}}}", ""),
    "nested lists of keys": ("", '{"a": [', ""),
    "think openers": ("", "<think>", "Answer: 2"),
    "think blocks": ("", "<think>3</think><thinking>", "Answer: 2"),
    "think closers": ("", "</think>", "Answer: 2"),
    "double quotes": ("", '"', ""),
    "single quotes in brackets": ("{", "'", ""),
    "quotes in brackets": ('{"a": ', "\"'", ""),
    "line comments": ("{", "// choice: 3\n", '"choice": 1}'),
    "block comments unclosed": ("[", "/*", ""),
    "block comments": ("{", "/* {[ */", '"choice": 1}'),
    "backslashes": ('{"choice": "', "\\", '"}'),
    "backslashes, bare": ("", "\\", ""),
    "many objects": ("", '{"choice": 1} ', ""),
    "many keys": ("{", '"k": "v", ', '"choice": 2}'),
    "many lenient keys": ("{", "k: 'v', ", "choice: 2,}"),
    "cut-off objects": ("", '{"choice": 1, "why": "x" ] ', ""),
    "cut-off at the end": ("", '{"choice": 1} ', '{"choice": 1'),
    "closers": ("", "}]", ""),
    "degenerate phrase": ("", "I choose waypoint 3 because it is open. ", ""),
    "degenerate answers": ("", "Answer: ", ""),
    "degenerate negation": ("", "I would not pick 3. ", ""),
    "answer tags": ("", "<answer>", ""),
    "boxed": ("", "\\boxed{", ""),
    "fences": ("", "```json\n", ""),
    "spaces after a marker": ("Answer:", " ", "x\nthe answer is 3"),
    "spaces after a phrase": ("the path is ", " ", "x."),
    "blank lines": ("", "\n", "1. up\n2. down"),
    "numbered moves": ("", "1. up\n", ""),
    "digits": ("Answer: ", "7", ""),
    "digits in JSON": ('{"answer": ', "7", "}"),
    "spaces in JSON": ('{"choice":', " ", "3}"),
    "mixed": ("", '<think>{"a": [\'x\\" // /* Answer: 3 ```', ""),
}


def reply_of(shape: str, size: int) -> str:
    prefix, fragment, suffix = SHAPES[shape]
    repeats = max(1, (size - len(prefix) - len(suffix)) // len(fragment))
    return prefix + fragment * repeats + suffix


def _check(entry: str, reply: str, budget_s: float) -> None:
    started = time.perf_counter()
    ENTRY_POINTS[entry](reply)  # must not raise
    elapsed = time.perf_counter() - started
    assert elapsed < budget_s, f"{entry} took {elapsed:.1f} s on {len(reply):,} characters"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_entry_point_reads_each_shape_in_linear_time(shape: str) -> None:
    reply = reply_of(shape, 16 << 10)  # 16 KB took 12 s in parse_choice when it was quadratic
    for entry in ENTRY_POINTS:
        _check(entry, reply, BUDGET_S / 4)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_reads_a_megabyte_of_each_shape(entry: str, shape: str) -> None:
    _check(entry, reply_of(shape, MB), BUDGET_S)


def test_a_megabyte_of_valid_json_is_read_in_time() -> None:
    """The case of the issue: 16 KB took 12 s in parse_choice, so 1 MB would have taken hours."""
    value = {"choice": 3, "final_answer": [1], "label": "SPEAK", "reasoning": "x" * MB}
    reply = json.dumps(value)
    expected = {"parse_choice": 3, "extract_json": value, "parse_label": "SPEAK", "dsr.parse_reply": value}
    for entry, result in expected.items():
        started = time.perf_counter()
        assert ENTRY_POINTS[entry](reply) == result
        assert time.perf_counter() - started < BUDGET_S, entry


DEEP = "[" * 1000 + "]" * 1000  # 2 KB: raised RecursionError out of every JSON entry point


@pytest.mark.parametrize("entry", ["extract_json", "parse_choice", "parse_label", "dsr.parse_reply"])
@pytest.mark.parametrize("reply", [DEEP, '{"choice": ' + DEEP + "}", "Answer: 2\n" + "{" * 5000])
def test_deep_nesting_is_a_clear_failure(entry: str, reply: str) -> None:
    result = ENTRY_POINTS[entry](reply)
    assert isinstance(result, ParseFailure)
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in result.reason


def test_deep_nesting_fails_the_other_readers_cleanly() -> None:
    reply = '{"final_answer": ' + DEEP + "}"
    assert score_reply(reply, _DSR_INSTANCE).failure == "parse"
    assert "nested deeper" in score_reply(reply, _DSR_INSTANCE).reason
    assert "nested deeper" in str(_action(DEEP))
    assert isinstance(_state_from_reply(DEEP), ParseFailure)
    assert "nested deeper" in str(find_answer(DEEP, ("answer",)).error)
    # a string answer holding a deep literal is not an answer, and comparing it does not recurse
    assert score_reply(json.dumps({"final_answer": DEEP}), _DSR_INSTANCE).exact == 0.0


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("digits", [400, 4_000, 5_000])
def test_huge_numbers_do_not_raise(entry: str, digits: int) -> None:
    """Python refuses to convert over 4,300 digits (ValueError), and a float overflows on 400."""
    number = "7" * digits
    as_json = f'{{"choice": {number}, "answer": {number}, "final_answer": {number}}}'
    for reply in (as_json, f"Answer: {number}"):
        ENTRY_POINTS[entry](reply)


def test_nesting_up_to_the_limit_still_parses() -> None:
    inner = "[" * (MAX_JSON_DEPTH - 1) + "3" + "]" * (MAX_JSON_DEPTH - 1)
    assert extract_json('{"choice": ' + inner + "}") == {"choice": json.loads(inner)}
    assert parse_choice('{"choice": [3]}', 6) == 3


# Hypothesis: replies built from (fragment, repeat count) pieces, so sizes reach a megabyte
# without generating it character by character.
FRAGMENTS = sorted({fragment for _, fragment, _ in SHAPES.values()} | {'{"choice": 2}', "Answer: 4", " "})
pieces = st.lists(
    st.tuples(st.sampled_from(FRAGMENTS), st.integers(min_value=1, max_value=60_000)), min_size=1, max_size=4
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces, st.sampled_from(sorted(ENTRY_POINTS)))
def test_no_entry_point_raises_or_hangs_on_mixed_shapes(parts: list[tuple[str, int]], entry: str) -> None:
    reply = "".join(fragment * count for fragment, count in parts)[:MB]
    _check(entry, reply, BUDGET_S)
