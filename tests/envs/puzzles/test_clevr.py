"""CLEVR-like task: determinism, oracle, parser, checker and the hallucination helper."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.envs.puzzles.clevr import ClevrTask, hallucinated_objects, mentioned_objects, oracle, related
from embodia.envs.puzzles.core import PuzzleError, PuzzleInstance

TASK = ClevrTask()
INSTANCES = [TASK.generate(s, d) for d in TASK.difficulties for s in range(40)]


def _of_type(kind: str) -> PuzzleInstance:
    return next(i for i in INSTANCES if i.facts["answer_type"] == kind)


def test_deterministic_records_and_images() -> None:
    a, b = TASK.generate(7, "hard"), TASK.generate(7, "hard")
    assert a.to_record() == b.to_record()
    assert np.array_equal(a.image, b.image)
    assert a.image.shape == (240, 320, 3) and a.image.dtype == np.uint8
    again = PuzzleInstance.from_record(a.to_record())
    assert again == a and np.array_equal(again.image, a.image)
    assert TASK.generate(8, "hard").to_record() != a.to_record()


def test_difficulty_sets_object_count_and_bad_inputs_raise() -> None:
    counts = {
        d: max(len(i.facts["objects"]) for i in INSTANCES if i.difficulty == d) for d in TASK.difficulties
    }
    assert counts["easy"] < counts["medium"] < counts["hard"]
    with pytest.raises(PuzzleError):
        TASK.generate(0, "extreme")
    with pytest.raises(PuzzleError):
        TASK.generate(-1, "easy")


def test_oracle_answers_the_generated_question_and_referents_are_unique() -> None:
    kinds = set()
    for inst in INSTANCES:
        q = inst.facts["question"]
        kinds.add(q["kind"])
        assert oracle(inst.facts, q) == inst.answer
        assert inst.facts["question_text"] in inst.prompt
        objs = inst.facts["objects"]
        if q["kind"] == "attribute":
            assert sum(all(o[k] == v for k, v in q["target"].items()) for o in objs) == 1
        if q["kind"] == "relation":
            (anchor,) = [o for o in objs if all(o[k] == v for k, v in q["anchor"].items())]
            found = [o for o in objs if o is not anchor and related(o, anchor, q["relation"])]
            assert len(found) == 1 and found[0][q["attribute"]] == inst.answer
            assert [found[0]["id"]] == inst.facts["relations"][q["relation"]][str(anchor["id"])]
    assert kinds == {"count", "exists", "attribute", "compare", "relation"}


def test_oracle_targeted_queries() -> None:
    facts = INSTANCES[-1].facts
    objs = facts["objects"]
    red = sum(o["colour"] == "red" for o in objs)
    assert oracle(facts, {"kind": "count", "filters": {"colour": "red"}}) == red
    assert oracle(facts, {"kind": "exists", "filters": {"colour": "red"}}) == ("yes" if red else "no")
    assert oracle(facts, {"kind": "count", "filters": {}}) == len(objs)
    first = objs[0]
    full = {k: first[k] for k in ("size", "colour", "shape")}
    hits = [o for o in objs if all(o[k] == v for k, v in full.items())]
    got = oracle(facts, {"kind": "attribute", "target": full, "attribute": "colour"})
    assert got == first["colour"] if len(hits) == 1 else isinstance(got, list)
    with pytest.raises(PuzzleError):
        oracle(facts, {"kind": "teleport"})
    with pytest.raises(PuzzleError):
        oracle(facts, {"kind": "count", "filters": {"weight": "heavy"}})


def test_checker_accepts_truth_and_rejects_near_misses() -> None:
    count = _of_type("count")
    assert TASK.check(count.answer, count).correct
    assert not TASK.check(count.answer + 1, count).correct
    assert not TASK.check(count.answer - 1, count).correct
    colour = _of_type("colour")
    assert TASK.check(colour.answer, colour).correct
    wrong = "blue" if colour.answer != "blue" else "red"
    verdict = TASK.check(wrong, colour)
    assert not verdict.correct and verdict.score == 0.0 and "expected" in verdict.reason
    assert TASK.score(f'{{"answer": "{colour.answer}"}}', colour).correct


def test_parser_accepts_real_model_output() -> None:
    count = _of_type("count")
    n = count.answer
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    for reply in (
        str(n),
        words[n],
        f"Answer: {n}",
        f'{{"answer": {n}}}',
        f"I count {words[n]} of them.\nAnswer: {n}",
    ):
        assert TASK.parse(reply, count).value == n, reply
    yn = _of_type("yesno")
    for reply, value in (("Yes", "yes"), ("no.", "no"), ('{"answer": true}', "yes"), ("Answer: nope", "no")):
        assert TASK.parse(reply, yn).value == value
    shape = _of_type("shape")
    assert TASK.parse("It is a ball.", shape).value == "sphere"
    assert TASK.parse('{"answer": "block"}', shape).value == "cube"
    colour = _of_type("colour")
    assert TASK.parse("Answer: gray", colour).value == "grey"


def test_parser_failure_reasons() -> None:
    count, yn, colour = _of_type("count"), _of_type("yesno"), _of_type("colour")
    assert TASK.parse("", count).error == "empty reply"
    assert "no number" in str(TASK.parse("I cannot tell from the picture", count).error)
    assert "truncated" in str(TASK.parse('{"answer": 3', count).error)
    assert "is not yes or no" in str(TASK.parse("Answer: maybe", yn).error)
    assert "names no colour" in str(TASK.parse("Answer: shiny", colour).error)
    assert "several" in str(TASK.parse("Answer: red or blue", colour).error)
    assert TASK.score("", count).reason.startswith("parse failure")


def test_hallucination_helper() -> None:
    facts = {"objects": [{"id": 0, "shape": "cube", "colour": "red", "size": "large", "x": 50, "y": 50}]}
    text = "I see a big red block and a purple cylinder, but no green ball."
    phrases = [p for p, _ in mentioned_objects(text)]
    assert phrases == ["big red block", "purple cylinder"]
    assert hallucinated_objects(text, facts) == ["purple cylinder"]
    assert hallucinated_objects("The red object is a cube.", facts) == []
    assert hallucinated_objects("a small red cube", facts) == ["small red cube"]
