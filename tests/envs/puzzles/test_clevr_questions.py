"""CLEVR free questions: the phrasings a language model asks, read into the oracle's
structured queries, answered on a hand-made scene; generated questions read back exactly."""

from __future__ import annotations

from typing import Any

import pytest

from embodia.envs.puzzles.clevr import ClevrDescribeTask, ClevrTask, oracle, parse_question

# Image coordinates: left = smaller x, behind = smaller y; relations need a 12 px margin.
SCENE: dict[str, Any] = {
    "objects": [
        {"id": 0, "shape": "cube", "colour": "red", "size": "large", "x": 60, "y": 120},
        {"id": 1, "shape": "sphere", "colour": "blue", "size": "small", "x": 120, "y": 120},
        {"id": 2, "shape": "sphere", "colour": "green", "size": "large", "x": 200, "y": 80},
        {"id": 3, "shape": "cylinder", "colour": "grey", "size": "small", "x": 260, "y": 180},
        {"id": 4, "shape": "cylinder", "colour": "red", "size": "small", "x": 30, "y": 200},
    ]
}
RED_CUBE = {"colour": "red", "shape": "cube"}

Filters = dict[str, str]


def count_query(filters: Filters, **relative: Any) -> dict[str, Any]:
    return {"kind": "count", "filters": filters, **relative}


def exists_query(filters: Filters, **relative: Any) -> dict[str, Any]:
    return {"kind": "exists", "filters": filters, **relative}


def attribute_query(target: Filters, name: str) -> dict[str, Any]:
    return {"kind": "attribute", "target": target, "attribute": name}


def relation_query(anchor: Filters, side: str, name: str, filters: Filters | None = None) -> dict[str, Any]:
    query = {"kind": "relation", "anchor": anchor, "relation": side, "attribute": name}
    return query if filters is None else {**query, "filters": filters}


def compare_query(a: Filters, b: Filters, op: str) -> dict[str, Any]:
    return {"kind": "compare", "a": a, "b": b, "op": op}


CUBE, SPHERE, CYLINDER = {"shape": "cube"}, {"shape": "sphere"}, {"shape": "cylinder"}
RED, BLUE, SMALL = {"colour": "red"}, {"colour": "blue"}, {"size": "small"}
SMALL_GREY_CYLINDER = {"size": "small", "colour": "grey", "shape": "cylinder"}
GREEN_SPHERE = {"colour": "green", "shape": "sphere"}

PHRASINGS: list[tuple[str, dict[str, Any], Any]] = [
    ("How many red cubes are there?", count_query(RED_CUBE), 1),
    ("how many spheres?", count_query(SPHERE), 2),
    ("How many big balls can you see in the image?", count_query({"size": "large", "shape": "sphere"}), 1),
    ("Count the tiny gray blocks.", count_query({"size": "small", "colour": "grey", "shape": "cube"}), 0),
    ("How many small things are in the scene?", count_query(SMALL), 3),
    ("Can you tell me how many cyan objects there are?", count_query({"colour": "cyan"}), 0),
    ("Is there a blue sphere?", exists_query({"colour": "blue", "shape": "sphere"}), "yes"),
    ("Are there any purple cubes in the scene?", exists_query({"colour": "purple", "shape": "cube"}), "no"),
    ("Do you see a grey cylinder?", exists_query({"colour": "grey", "shape": "cylinder"}), "yes"),
    ("Is a red ball visible?", exists_query({"colour": "red", "shape": "sphere"}), "no"),
    ("Does the scene contain a green sphere?", exists_query(GREEN_SPHERE), "yes"),
    ("What color is the large cube?", attribute_query({"size": "large", "shape": "cube"}, "colour"), "red"),
    (
        "What colour is the small cylinder?",  # two small cylinders: their sorted colours
        attribute_query({"size": "small", "shape": "cylinder"}, "colour"),
        ["grey", "red"],
    ),
    (
        "What's the colour of the big gray ball?",
        attribute_query({"size": "large", "colour": "grey", "shape": "sphere"}, "colour"),
        "none",
    ),
    ("What shape is the blue thing?", attribute_query(BLUE, "shape"), "sphere"),
    ("Is the green ball large or small?", attribute_query(GREEN_SPHERE, "size"), "large"),
    ("What size is the grey object?", attribute_query({"colour": "grey"}, "size"), "small"),
    ("what shape is the object left of the red cube?", relation_query(RED_CUBE, "left", "shape"), "cylinder"),
    (
        "What is behind the blue sphere?",
        relation_query({"colour": "blue", "shape": "sphere"}, "behind", "shape"),
        "sphere",
    ),
    (
        "What is the object in front of the red cube?",  # two cylinders in front: one value
        relation_query(RED_CUBE, "front", "shape"),
        ["cylinder"],
    ),
    (
        "What colour is the cube behind the small grey cylinder?",
        relation_query(SMALL_GREY_CYLINDER, "behind", "colour", CUBE),
        "red",
    ),
    (
        "Which colour does the sphere on the right side of the red cube have?",
        relation_query(RED_CUBE, "right", "colour", SPHERE),
        ["blue", "green"],
    ),
    (
        "is there anything to the right of the green ball",
        exists_query({}, anchor=GREEN_SPHERE, relation="right"),
        "yes",
    ),
    (
        "How many cubes are to the left of the red sphere?",  # no red sphere: no anchor
        count_query(CUBE, anchor={"colour": "red", "shape": "sphere"}, relation="left"),
        "none",
    ),
    ("Are there more cubes than spheres?", compare_query(CUBE, SPHERE, "more"), "no"),
    ("Are there fewer red objects than blue objects?", compare_query(RED, BLUE, "fewer"), "no"),
    (
        "Is the number of cylinders greater than the number of cubes?",
        compare_query(CYLINDER, CUBE, "more"),
        "yes",
    ),
    ("Are there the same number of cubes and blue objects?", compare_query(CUBE, BLUE, "same"), "yes"),
    ("Do the balls outnumber the blocks?", compare_query(SPHERE, CUBE, "more"), "yes"),
    ("Are there as many red things as small things?", compare_query(RED, SMALL, "same"), "no"),
    ("Describe the scene.", {"kind": "describe"}, None),
    (
        "Please describe the object left of the red cube.",
        {"kind": "describe", "anchor": RED_CUBE, "relation": "left"},
        None,
    ),
]


@pytest.mark.parametrize(("question", "query", "answer"), PHRASINGS, ids=[p[0] for p in PHRASINGS])
def test_free_phrasings_read_into_queries_the_oracle_answers(
    question: str, query: dict[str, Any], answer: Any
) -> None:
    got = parse_question(question, SCENE)
    assert got == query
    if answer is not None:
        assert oracle(SCENE, got) == answer


def test_describe_queries_answer_with_the_reference_template() -> None:
    assert oracle(SCENE, parse_question("Describe the object left of the red cube.") or {}) == (
        "The object left of the red cube is a small red cylinder."
    )
    assert oracle(SCENE, {"kind": "describe"}) == (
        "There are 5 objects. From left to right: a small red cylinder, a large red cube, a small blue "
        "sphere, a large green sphere and a small grey cylinder."
    )


@pytest.mark.parametrize(
    "question",
    [
        "how many large metal things?",  # no materials in these scenes
        "How many shiny spheres?",
        "Is the red cube left of the blue sphere?",  # a definite relation check: no such query
        "Are there more cubes or spheres?",  # not a yes/no comparison
        "How many red blue cubes?",
        "What colour is it?",
        "What is left of the object?",  # an anchor needs a description
        "How many cubes are next to the sphere?",
        "Is there a red cube? What colour is the sphere?",  # two questions at once
        "What is the weather like?",
        "hello",
        "",
    ],
)
def test_questions_that_cannot_be_mapped_give_none(question: str) -> None:
    assert parse_question(question, SCENE) is None


def test_one_question_inside_a_longer_text_is_read() -> None:
    assert parse_question("Look at the left part. Is there a red cube?") == exists_query(RED_CUBE)
    assert parse_question("How many red cubes are there? Please be precise.") == count_query(RED_CUBE)


@pytest.mark.parametrize("task", [ClevrTask(), ClevrDescribeTask()], ids=["clevr", "clevr-describe"])
def test_generated_questions_and_prompts_read_back_to_their_query_and_answer(task: ClevrTask) -> None:
    kinds = set()
    for difficulty in task.difficulties:
        for seed in range(100):
            instance = task.generate(seed, difficulty)
            query = instance.facts["question"]
            kinds.add(query["kind"])
            for text in (instance.facts["question_text"], instance.prompt):
                parsed = parse_question(text, instance.facts)
                assert parsed == query, text
                assert oracle(instance.facts, parsed) == instance.answer
    assert kinds == (
        {"describe"}
        if task.name == "clevr-describe"
        else {"count", "exists", "attribute", "compare", "relation"}
    )
