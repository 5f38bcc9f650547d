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

PHRASINGS: list[tuple[str, dict[str, Any], Any]] = [
    ("How many red cubes are there?", {"kind": "count", "filters": RED_CUBE}, 1),
    ("how many spheres?", {"kind": "count", "filters": {"shape": "sphere"}}, 2),
    (
        "How many big balls can you see in the image?",
        {"kind": "count", "filters": {"size": "large", "shape": "sphere"}},
        1,
    ),
    (
        "Count the tiny gray blocks.",
        {"kind": "count", "filters": {"size": "small", "colour": "grey", "shape": "cube"}},
        0,
    ),
    ("How many small things are in the scene?", {"kind": "count", "filters": {"size": "small"}}, 3),
    ("Can you tell me how many cyan objects there are?", {"kind": "count", "filters": {"colour": "cyan"}}, 0),
    ("Is there a blue sphere?", {"kind": "exists", "filters": {"colour": "blue", "shape": "sphere"}}, "yes"),
    (
        "Are there any purple cubes in the scene?",
        {"kind": "exists", "filters": {"colour": "purple", "shape": "cube"}},
        "no",
    ),
    (
        "Do you see a grey cylinder?",
        {"kind": "exists", "filters": {"colour": "grey", "shape": "cylinder"}},
        "yes",
    ),
    ("Is a red ball visible?", {"kind": "exists", "filters": {"colour": "red", "shape": "sphere"}}, "no"),
    (
        "Does the scene contain a green sphere?",
        {"kind": "exists", "filters": {"colour": "green", "shape": "sphere"}},
        "yes",
    ),
    (
        "What color is the large cube?",
        {"kind": "attribute", "target": {"size": "large", "shape": "cube"}, "attribute": "colour"},
        "red",
    ),
    (
        "What colour is the small cylinder?",  # two small cylinders: their sorted colours
        {"kind": "attribute", "target": {"size": "small", "shape": "cylinder"}, "attribute": "colour"},
        ["grey", "red"],
    ),
    (
        "What's the colour of the big gray ball?",
        {
            "kind": "attribute",
            "target": {"size": "large", "colour": "grey", "shape": "sphere"},
            "attribute": "colour",
        },
        "none",
    ),
    (
        "What shape is the blue thing?",
        {"kind": "attribute", "target": {"colour": "blue"}, "attribute": "shape"},
        "sphere",
    ),
    (
        "Is the green ball large or small?",
        {"kind": "attribute", "target": {"colour": "green", "shape": "sphere"}, "attribute": "size"},
        "large",
    ),
    (
        "What size is the grey object?",
        {"kind": "attribute", "target": {"colour": "grey"}, "attribute": "size"},
        "small",
    ),
    (
        "what shape is the object left of the red cube?",
        {"kind": "relation", "anchor": RED_CUBE, "relation": "left", "attribute": "shape"},
        "cylinder",
    ),
    (
        "What is behind the blue sphere?",
        {
            "kind": "relation",
            "anchor": {"colour": "blue", "shape": "sphere"},
            "relation": "behind",
            "attribute": "shape",
        },
        "sphere",
    ),
    (
        "What is the object in front of the red cube?",  # two cylinders in front: one value
        {"kind": "relation", "anchor": RED_CUBE, "relation": "front", "attribute": "shape"},
        ["cylinder"],
    ),
    (
        "What colour is the cube behind the small grey cylinder?",
        {
            "kind": "relation",
            "anchor": {"size": "small", "colour": "grey", "shape": "cylinder"},
            "relation": "behind",
            "attribute": "colour",
            "filters": {"shape": "cube"},
        },
        "red",
    ),
    (
        "Which colour does the sphere on the right side of the red cube have?",
        {
            "kind": "relation",
            "anchor": RED_CUBE,
            "relation": "right",
            "attribute": "colour",
            "filters": {"shape": "sphere"},
        },
        ["blue", "green"],
    ),
    (
        "is there anything to the right of the green ball",
        {
            "kind": "exists",
            "filters": {},
            "anchor": {"colour": "green", "shape": "sphere"},
            "relation": "right",
        },
        "yes",
    ),
    (
        "How many cubes are to the left of the red sphere?",  # no red sphere: no anchor
        {
            "kind": "count",
            "filters": {"shape": "cube"},
            "anchor": {"colour": "red", "shape": "sphere"},
            "relation": "left",
        },
        "none",
    ),
    (
        "Are there more cubes than spheres?",
        {"kind": "compare", "a": {"shape": "cube"}, "b": {"shape": "sphere"}, "op": "more"},
        "no",
    ),
    (
        "Are there fewer red objects than blue objects?",
        {"kind": "compare", "a": {"colour": "red"}, "b": {"colour": "blue"}, "op": "fewer"},
        "no",
    ),
    (
        "Is the number of cylinders greater than the number of cubes?",
        {"kind": "compare", "a": {"shape": "cylinder"}, "b": {"shape": "cube"}, "op": "more"},
        "yes",
    ),
    (
        "Are there the same number of cubes and blue objects?",
        {"kind": "compare", "a": {"shape": "cube"}, "b": {"colour": "blue"}, "op": "same"},
        "yes",
    ),
    (
        "Do the balls outnumber the blocks?",
        {"kind": "compare", "a": {"shape": "sphere"}, "b": {"shape": "cube"}, "op": "more"},
        "yes",
    ),
    (
        "Are there as many red things as small things?",
        {"kind": "compare", "a": {"colour": "red"}, "b": {"size": "small"}, "op": "same"},
        "no",
    ),
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
    assert parse_question("Look at the left part. Is there a red cube?") == {
        "kind": "exists",
        "filters": RED_CUBE,
    }
    assert parse_question("How many red cubes are there? Please be precise.") == {
        "kind": "count",
        "filters": RED_CUBE,
    }


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
