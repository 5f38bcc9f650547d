"""Scoring against crafted answers: exact, partial, malformed, set semantics, type and step diagnostics."""

from __future__ import annotations

import pytest

from embodia.core.parsing import ParseFailure, extract_json
from embodia.envs.dsr.core import DSRError, Step
from embodia.envs.dsr.scoring import (
    compare,
    first_wrong_step,
    parse_reply,
    score,
    score_reply,
    score_value,
)
from embodia.envs.dsr.suites import Instance


def _instance(truth: object, operation: str = "queue.compound", steps: tuple[Step, ...] = ()) -> Instance:
    structure = operation.split(".")[0]
    return Instance(
        id="main/test/short/00",
        suite="main",
        category="temporal",
        structure=structure,
        operation=operation,
        length="short",
        index=0,
        variant={},
        question="Q",
        truth=truth,
        data={},
        steps=steps,
    )


QUEUE = _instance(
    [82, 90, 42],
    steps=(Step("(enqueue, 82)", [82]), Step("(enqueue, 90)", [82, 90]), Step("(enqueue, 42)", [82, 90, 42])),
)


@pytest.mark.parametrize(
    "reply",
    [
        '{"final_answer": [82, 90, 42]}',
        '{"final_answer":[82,90,42]}',
        'Sure.\n```json\n{"final_answer": [82, 90, 42]}\n```\nHope that helps.',
        '<think>the queue is [1, 2]... {"final_answer": [1]}</think>{"final_answer": [82, 90, 42]}',
        # a string holding the list: str() of it matches, as in the reference
        '{"final_answer": "[82, 90, 42]"}',
        "{'final_answer': [82, 90, 42],}",  # Python-style quotes and a trailing comma
        'First {"steps": [], "final_answer": [1]} then corrected: {"final_answer": [82, 90, 42]}',
    ],
)
def test_exact_answers_in_the_shapes_models_write(reply: str) -> None:
    score = score_reply(reply, QUEUE)
    assert (score.exact, score.partial, score.failure) == (1.0, 1.0, None)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("The queue ends as 82, 90, 42.", "no JSON object"),
        ('{"final_answer": [82, 90', "cut off"),
        ('{"answer": [82, 90, 42]}', "no final_answer"),
        ("[82, 90, 42]", "not an object"),
        ("<think>thinking about [82] forever", "only a <think> block"),
    ],
)
def test_parse_failures_score_zero_with_the_reason(reply: str, reason: str) -> None:
    score = score_reply(reply, QUEUE)
    assert (score.exact, score.partial, score.failure) == (0.0, 0.0, "parse")
    assert reason in score.reason


def test_partial_credit_is_one_minus_normalised_levenshtein() -> None:
    # "[82,90,41]" vs "[82,90,42]": one substitution over 10 characters.
    assert compare([82, 90, 41], [82, 90, 42]) == (0.0, pytest.approx(0.9))
    # "[82,90]" vs "[82,90,42]": three deletions over 10 characters.
    assert compare([82, 90], [82, 90, 42]) == (0.0, pytest.approx(0.7))
    assert compare([], [82, 90, 42])[1] == pytest.approx(1 - 8 / 10)


def test_integers_as_strings_count_as_integers() -> None:
    access = _instance(64, "array.access")
    assert score_reply('{"final_answer": "64"}', access).exact == 1.0
    assert score_reply('{"final_answer": 64.0}', access).exact == 1.0
    assert score_reply('{"final_answer": " 64 "}', access).exact == 1.0
    wrong = score_reply('{"final_answer": "sixty-four"}', access)
    assert (wrong.exact, wrong.failure) == (0.0, "wrong_type")


def test_wrong_type_versus_wrong_final() -> None:
    assert score_reply('{"final_answer": 3}', QUEUE).failure == "wrong_type"
    assert score_reply('{"final_answer": ["82", "90", "42"]}', QUEUE).failure == "wrong_type"
    assert score_reply('{"final_answer": [42, 90, 82]}', QUEUE).failure == "wrong_final"
    both = _instance({"preorder": [2, 1, 3], "postorder": [1, 3, 2]}, "bst.insert")
    only_one = score_reply('{"final_answer": {"preorder": [2, 1, 3]}}', both)
    assert only_one.failure == "wrong_type" and "keys" in only_one.reason


def test_bst_answers_need_both_traversals_in_any_key_order() -> None:
    both = _instance({"preorder": [2, 1, 3], "postorder": [1, 3, 2]}, "bst.insert")
    assert score_reply('{"final_answer": {"postorder": [1, 3, 2], "preorder": [2, 1, 3]}}', both).exact == 1.0
    assert score_reply('{"final_answer": {"preorder": [2, 1, 3], "postorder": [3, 1, 2]}}', both).exact == 0.0


def test_lru_contents_compare_as_a_set() -> None:
    lru = _instance([3, 1, 2], "lru_cache.cache")
    assert score_value([1, 2, 3], lru).exact == 1.0
    assert score_value([2, 3, 1], lru).exact == 1.0
    assert score_value([1, 2], lru).exact == 0.0
    assert score_value([1, 2, 3], _instance([3, 1, 2])).exact == 0.0  # a queue is ordered


def test_first_wrong_step_points_at_the_first_bad_state() -> None:
    good = '{"output": "[82]"}, {"output": "[82, 90]"}, {"output": "[82, 90, 42]"}'
    assert score_reply(f'{{"steps": [{good}], "final_answer": [82, 90, 42]}}', QUEUE).first_wrong_step is None
    bad = '{"output": "[82]"}, {"output": "[90]"}, {"output": "[90, 42]"}'
    score = score_reply(f'{{"steps": [{bad}], "final_answer": [90, 42]}}', QUEUE)
    assert (score.first_wrong_step, score.steps_given) == (1, 3)
    assert first_wrong_step([{"output": [82]}], QUEUE.steps) == 1  # stopped early: the next one is missing
    assert first_wrong_step([{"output": "not a state"}], QUEUE.steps) == 0


def test_parse_reply_fast_path_and_fallback_agree() -> None:
    assert parse_reply('{"final_answer": 1}') == {"final_answer": 1}
    assert parse_reply('{"final_answer": 1,}') == {"final_answer": 1}  # invalid strict JSON: repaired
    assert isinstance(parse_reply("{not json at all}"), ParseFailure)


@pytest.mark.parametrize(
    "reply",
    [
        '{"final_answer": [1, 2]}',
        'Answer:\n```json\n{"final_answer": [1, 2]}\n```',
        '{"final_answer": [1, 2',
        '{"final_answer": [1, 2]} and then {"final_answer": [3]}',
        'The list [5] first, then {"final_answer": [1, 2]}',
        '{"steps": [{"output": "[1]"}], "final_answer": [1, 2',
        '{"final_answer": {"a": [1]}, "note": "x"}',
        '<think>{"final_answer": [9]}</think>{"final_answer": [1, 2]}',
        '{"final_answer": [1, 2]}\n]',
    ],
)
def test_fast_path_agrees_with_the_lenient_scan(reply: str) -> None:
    lenient = extract_json(reply)
    if isinstance(lenient, dict) and "final_answer" not in lenient:
        lenient = ParseFailure("the reply's JSON has no final_answer")
    assert parse_reply(reply) == lenient


def test_a_reply_is_scored_against_a_bare_truth_and_operation() -> None:
    """No Instance: a truth from another harness, compared the way its operation compares."""
    assert score('{"final_answer": [82, 90]}', [82, 90], "queue.compound").exact == 1.0
    # LRU contents compare as sets; the partial credit is the normalised Levenshtein of the texts
    assert score('Answer: {"final_answer": [3, 1, 2]}', [1, 2, 3], "lru_cache.cache").exact == 1.0
    wrong = score('{"final_answer": [82, 91]}', [82, 90], "queue.compound")
    assert wrong.exact == 0.0 and wrong.partial == pytest.approx(1 - 1 / 7) and wrong.failure == "wrong_final"
    assert score("no json here", [1], "stack.compound").failure == "parse"
    assert score('{"final_answer": 5}', [5], "stack.compound").failure == "wrong_type"
    with pytest.raises(DSRError, match="unknown DSR operation 'stack.push'"):
        score('{"final_answer": [1]}', [1], "stack.push")
