"""CLEVR-like task: determinism, oracle, parser, checker, steps, the hallucination helper and
the free-text describe task."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.clevr import (
    ROUGE_L_THRESHOLD,
    ClevrDescribeTask,
    ClevrTask,
    describe,
    hallucinated_objects,
    mentioned_objects,
    oracle,
    question_text,
    related,
)
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


# --------------------------------------------------------------------------- hand-made scenes

OBJECTS: list[dict[str, Any]] = [
    {"id": 0, "shape": "cube", "colour": "red", "size": "large", "x": 60, "y": 120},
    {"id": 1, "shape": "sphere", "colour": "blue", "size": "small", "x": 120, "y": 120},
    {"id": 2, "shape": "sphere", "colour": "green", "size": "large", "x": 200, "y": 80},
    {"id": 3, "shape": "cylinder", "colour": "grey", "size": "small", "x": 260, "y": 180},
    {"id": 4, "shape": "cylinder", "colour": "red", "size": "small", "x": 30, "y": 200},
]


def asked(
    query: dict[str, Any], task: ClevrTask = TASK, objects: list[dict[str, Any]] = OBJECTS
) -> PuzzleInstance:
    """An instance of the hand-made scene asking ``query``."""
    facts: dict[str, Any] = {"objects": objects, "question": query}
    facts["answer_type"] = {"count": "count", "exists": "yesno", "compare": "yesno", "describe": "text"}.get(
        query["kind"], query.get("attribute")
    )
    return PuzzleInstance(task.name, "medium", 0, question_text(query), oracle(facts, query), facts)


def obj(i: int) -> dict[str, int]:
    return {"object": i}


# --------------------------------------------------------------------------- steps


def test_true_steps_are_accepted_prefix_by_prefix() -> None:
    kinds = set()
    for inst in INSTANCES:
        steps = TASK.steps(inst)
        kinds.add(inst.facts["question"]["kind"])
        assert steps, inst.facts["question"]
        assert all(TASK.check_step(steps[:k], inst) for k in range(len(steps) + 1))
        assert not TASK.check_step([*steps, steps[-1]], inst)  # nothing follows the answer
    assert kinds == {"count", "exists", "attribute", "compare", "relation"}


def test_count_steps_list_the_matching_objects_in_any_order_then_the_count() -> None:
    inst = asked({"kind": "count", "filters": {"size": "small"}})
    assert TASK.steps(inst) == [obj(1), obj(3), obj(4), {"count": 3}]
    assert TASK.check_step([obj(4), obj(1)], inst) and TASK.check_step(
        [obj(3), obj(4), obj(1), {"count": 3}], inst
    )
    assert not TASK.check_step([obj(0)], inst)  # a large object: does not match
    assert not TASK.check_step([obj(1), obj(1)], inst)  # a repeat
    assert not TASK.check_step([obj(9)], inst)  # no such object
    assert not TASK.check_step([obj(1), obj(3), obj(4), {"count": 4}], inst)  # a wrong count
    assert not TASK.check_step([obj(1), {"count": 3}], inst)  # the count before all are listed
    assert not TASK.check_step(["3"], inst) and not TASK.check_step(
        [obj(1), obj(3), obj(4), {"count": True}], inst
    )


def test_exists_steps_take_any_witness() -> None:
    inst = asked({"kind": "exists", "filters": {"shape": "cylinder"}})
    assert TASK.steps(inst) == [obj(3), {"answer": "yes"}]
    assert TASK.check_step([obj(4), {"answer": "yes"}], inst)  # the other cylinder also shows it
    assert not TASK.check_step([obj(1)], inst) and not TASK.check_step([{"answer": "yes"}], inst)
    assert not TASK.check_step([obj(3), {"answer": "no"}], inst) and not TASK.check_step(
        [{"answer": "no"}], inst
    )
    absent = asked({"kind": "exists", "filters": {"colour": "purple"}})
    assert TASK.steps(absent) == [{"answer": "no"}] and TASK.check_step([{"answer": "no"}], absent)
    assert not TASK.check_step([{"answer": "yes"}], absent) and not TASK.check_step([obj(0)], absent)


def test_attribute_relation_and_compare_steps() -> None:
    attribute = asked({"kind": "attribute", "target": {"colour": "blue"}, "attribute": "shape"})
    assert TASK.steps(attribute) == [obj(1), {"answer": "sphere"}]
    assert not TASK.check_step([obj(2)], attribute) and not TASK.check_step(
        [obj(1), {"answer": "cube"}], attribute
    )
    relation = asked(
        {
            "kind": "relation",
            "anchor": {"colour": "red", "shape": "cube"},
            "relation": "left",
            "attribute": "shape",
        }
    )
    assert TASK.steps(relation) == [obj(0), obj(4), {"answer": "cylinder"}]
    assert TASK.check_step([obj(0), obj(4)], relation)
    assert not TASK.check_step([obj(4)], relation)  # the anchor comes first
    assert not TASK.check_step([obj(0), obj(3)], relation)  # the grey cylinder is to the right
    compare = asked({"kind": "compare", "a": {"shape": "cylinder"}, "b": {"shape": "cube"}, "op": "more"})
    assert TASK.steps(compare) == [{"count": 2}, {"count": 1}, {"answer": "yes"}]
    assert not TASK.check_step([{"count": 3}], compare) and not TASK.check_step(
        [{"count": 2}, {"count": 2}], compare
    )
    missing = asked(
        {"kind": "relation", "anchor": {"colour": "cyan"}, "relation": "left", "attribute": "shape"}
    )
    assert TASK.steps(missing) == [{"answer": "none"}]


# --------------------------------------------------------------------------- hallucinations


def test_attribute_hallucinations_through_the_question() -> None:
    colour = asked({"kind": "attribute", "target": {"size": "large", "shape": "cube"}, "attribute": "colour"})
    facts = colour.facts
    assert colour.answer == "red" and hallucinated_objects("red", facts) == []
    # blue exists (the small sphere), but the large cube is not blue
    assert hallucinated_objects("blue", facts) == ["large blue cube"]
    assert hallucinated_objects("The large cube is purple.", facts) == ["purple", "large purple cube"]
    relation = asked(
        {
            "kind": "relation",
            "anchor": {"colour": "red", "shape": "cube"},
            "relation": "left",
            "attribute": "shape",
        }
    )
    assert hallucinated_objects("a cylinder", relation.facts) == []
    assert hallucinated_objects("It is a ball.", relation.facts) == ["sphere left of the red cube"]


def test_object_hallucinations_through_the_question() -> None:
    exists = asked({"kind": "exists", "filters": {"colour": "purple", "shape": "cube"}})
    assert hallucinated_objects("yes", exists.facts) == ["purple cube"]
    assert hallucinated_objects("no", exists.facts) == []
    assert hallucinated_objects("No, I don't see any purple cube.", exists.facts) == []
    count = asked({"kind": "count", "filters": {"colour": "purple", "shape": "cylinder"}})
    assert hallucinated_objects("2", count.facts) == ["purple cylinders"]
    assert hallucinated_objects("There are zero purple cylinders.", count.facts) == []
    # over-counting objects that exist is a counting error, not a hallucination
    assert hallucinated_objects("5", asked({"kind": "count", "filters": {"shape": "sphere"}}).facts) == []
    # a comparison asserts no object
    compare = asked({"kind": "compare", "a": {"colour": "purple"}, "b": {"colour": "red"}, "op": "more"})
    assert hallucinated_objects("yes", compare.facts) == []


def test_mentions_without_a_question() -> None:
    no_cylinders = {"objects": [o for o in OBJECTS if o["shape"] != "cylinder"]}
    assert hallucinated_objects("There is a cylinder.", no_cylinders) == ["cylinder"]
    assert hallucinated_objects("I can see a red cube.", no_cylinders) == []  # "can" is the verb here
    no_red = {"objects": [o for o in OBJECTS if o["colour"] != "red"]}
    assert hallucinated_objects("the red one", no_red) == ["red one"]
    assert hallucinated_objects("It is red.", no_red) == ["red"]
    assert hallucinated_objects("Nothing red here.", no_red) == []
    assert [p for p, _ in mentioned_objects("a big red block, a ball and purple things")] == [
        "big red block",
        "ball",
        "purple things",
    ]


# --------------------------------------------------------------------------- describe (free text)

DESCRIBE = ClevrDescribeTask()
LEFT_OF_CUBE = {"kind": "describe", "anchor": {"colour": "red", "shape": "cube"}, "relation": "left"}
PAIR = [OBJECTS[0], {**OBJECTS[1], "x": 30}]  # the blue sphere moved left of the red cube


def test_describe_references_follow_the_template() -> None:
    assert describe({"objects": PAIR}, {"kind": "describe"}) == (
        "There are 2 objects. From left to right: a small blue sphere and a large red cube."
    )
    assert (
        describe({"objects": PAIR}, LEFT_OF_CUBE) == "The object left of the red cube is a small blue sphere."
    )
    assert describe({"objects": PAIR}, {"kind": "describe", "target": {"shape": "cube"}}) == (
        "The cube is a large red cube."
    )
    assert describe({"objects": OBJECTS}, {"kind": "describe", "target": {"size": "small"}}) == (
        "The small objects are a small red cylinder, a small blue sphere and a small grey cylinder."
    )
    assert describe({"objects": PAIR}, {**LEFT_OF_CUBE, "relation": "behind"}) == "none"


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("The object left of the red cube is a small blue sphere.", 1.0),
        ("a small blue sphere", 0.5),  # P = 4/4, R = 4/12
        ("The object left of the red cube is a large blue sphere.", 11 / 12),
        ('{"answer": "It is a red cube."}', 4 / 17),  # LCS 2: P = 2/5, R = 2/12
        ("Let me think.\nblue", 2 / 13),  # the last line; P = 1, R = 1/12
    ],
)
def test_describe_answers_score_rouge_l(reply: str, score: float) -> None:
    inst = asked(LEFT_OF_CUBE, DESCRIBE, PAIR)
    assert inst.answer == "The object left of the red cube is a small blue sphere."
    verdict = DESCRIBE.score(reply, inst)
    assert verdict.score == pytest.approx(score)
    assert verdict.correct == (score >= ROUGE_L_THRESHOLD) and "ROUGE-L" in verdict.reason


def test_describe_parser_failures() -> None:
    inst = asked(LEFT_OF_CUBE, DESCRIBE, PAIR)
    assert DESCRIBE.parse("", inst).error == "empty reply"
    assert DESCRIBE.parse('{"answer": "  "}', inst).error == "empty description"
    verdict = DESCRIBE.score('{"answer": "a small', inst)
    assert not verdict.correct and verdict.score == 0.0 and "truncated" in verdict.reason


def test_describe_task_is_opt_in_and_shares_clevr_scenes() -> None:
    assert isinstance(make_task("clevr-describe"), ClevrDescribeTask)
    assert all(i.facts["question"]["kind"] != "describe" for i in INSTANCES)
    kinds = set()
    for seed in range(30):
        inst = DESCRIBE.generate(seed, "medium")
        assert inst.facts["objects"] == TASK.generate(seed, "medium").facts["objects"]
        query = inst.facts["question"]
        kinds.add("anchor" in query)
        assert inst.answer == describe(inst.facts, query) and inst.facts["answer_type"] == "text"
        assert DESCRIBE.score(f'{{"answer": "{inst.answer}"}}', inst).score == 1.0
        assert hallucinated_objects(inst.answer, inst.facts) == []
        steps = DESCRIBE.steps(inst)
        assert steps and all(DESCRIBE.check_step(steps[:k], inst) for k in range(len(steps) + 1))
    assert kinds == {True, False}  # both scene and object descriptions are asked
