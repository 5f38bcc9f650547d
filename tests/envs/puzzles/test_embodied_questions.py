"""Embodied free questions: the phrasings a language model asks about a panorama, read into
the oracle's structured queries and answered on hand-made facts; generated questions read
back exactly; steps and hallucinations on the same facts."""

from __future__ import annotations

from typing import Any

import pytest

from embodia.envs.puzzles.core import PuzzleInstance
from embodia.envs.puzzles.embodied import (
    EmbodiedTask,
    hallucinated_objects,
    oracle,
    parse_question,
    question_text,
)
from embodia.sim.scene import CATEGORIES


def thing(instance: int, category: str, pixels: int, lo: float, hi: float) -> dict[str, Any]:
    return {
        "instance": instance,
        "category": category,
        "pixels": pixels,
        "azimuth_min": lo,
        "azimuth_max": hi,
        "azimuth_centre": (lo + hi) / 2,
        "wraps": False,
        "mean_depth": 2.0,
    }


# Azimuth: negative = left. The plant has pixels but too few to be visible (MIN_PIXELS = 30).
FACTS: dict[str, Any] = {
    "min_pixels": 30,
    "objects": [
        thing(5, "sofa", 400, -20, 20),
        thing(7, "chair", 200, -80, -60),
        thing(8, "chair", 150, 60, 76),
        thing(9, "table", 300, 100, 130),
        thing(10, "plant", 10, -150, -148),
        thing(11, "tv", 100, -120, -100),
    ],
}


def count_query(category: str) -> dict[str, Any]:
    return {"kind": "count", "category": category}


def exists_query(category: str) -> dict[str, Any]:
    return {"kind": "exists", "category": category}


def relation_query(anchor: str, side: str) -> dict[str, Any]:
    return {"kind": "relation", "anchor": anchor, "relation": side}


def compare_query(a: str, b: str, op: str) -> dict[str, Any]:
    return {"kind": "compare", "a": a, "b": b, "op": op}


PHRASINGS: list[tuple[str, dict[str, Any], Any]] = [
    ("how many chairs are in this room?", count_query("chair"), 2),
    ("How many couches can you see?", count_query("sofa"), 1),
    ("Count the armchairs.", count_query("chair"), 2),
    ("How many TVs are there?", count_query("tv"), 1),
    ("What is the number of dining tables in the panorama?", count_query("table"), 1),
    ("how many potted plants are visible?", count_query("plant"), 0),
    ("How many bookshelves are there?", count_query("shelf"), 0),
    ("is there a bed?", exists_query("bed"), "no"),
    ("Is there a tv in view?", exists_query("tv"), "yes"),
    ("Do you see a television?", exists_query("tv"), "yes"),
    ("Can you see a sofa?", exists_query("sofa"), "yes"),
    ("Are there any plants?", exists_query("plant"), "no"),
    ("Does the room contain a fridge?", exists_query("refrigerator"), "no"),
    ("Is a table visible?", exists_query("table"), "yes"),
    ("what is left of the sofa?", relation_query("sofa", "left"), "chair"),
    (
        "What object is immediately to the right of the couch in the panorama?",
        relation_query("sofa", "right"),
        "chair",
    ),
    ("What's to the right of the dining table?", relation_query("table", "right"), "none"),
    ("Which object is on the left side of the table?", relation_query("table", "left"), "chair"),
    ("What is the object to the left of the sofa?", relation_query("sofa", "left"), "chair"),
    ("What do you see to the left of the TV?", relation_query("tv", "left"), "none"),
    ("Are there more chairs than tables?", compare_query("chair", "table", "more"), "yes"),
    ("Are there fewer sofas than chairs?", compare_query("sofa", "chair", "fewer"), "yes"),
    ("Are there as many beds as sofas?", compare_query("bed", "sofa", "same"), "no"),
    ("Is the number of chairs equal to the number of TVs?", compare_query("chair", "tv", "same"), "no"),
]


@pytest.mark.parametrize(("question", "query", "answer"), PHRASINGS, ids=[p[0] for p in PHRASINGS])
def test_free_phrasings_read_into_queries_the_oracle_answers(
    question: str, query: dict[str, Any], answer: Any
) -> None:
    got = parse_question(question, FACTS)
    assert got == query
    assert oracle(FACTS, got) == answer


@pytest.mark.parametrize(
    "question",
    [
        "what colour is the sofa?",  # the facts hold categories, not colours
        "is there a red sofa?",
        "how many walls are there?",  # structure is not an object
        "what is behind the sofa?",  # only left/right are modelled
        "is there anything to the left of the bed?",
        "which chair is left of the sofa?",
        "is the chair left of the table?",
        "how many spaceships are there?",
        "How many chairs and tables are there?",
        "describe the room",
        "",
    ],
)
def test_questions_that_cannot_be_mapped_give_none(question: str) -> None:
    assert parse_question(question, FACTS) is None


def test_every_generated_question_form_reads_back() -> None:
    """All queries the generator can ask, over the whole category vocabulary."""
    objects = [c for c in CATEGORIES if c not in ("void", "wall", "floor", "ceiling", "door", "object")]
    queries = [make(c) for c in objects for make in (count_query, exists_query)]
    queries += [relation_query(c, side) for c in objects for side in ("left", "right")]
    queries += [
        compare_query(a, b, op) for a in objects[:3] for b in objects[-3:] for op in ("more", "fewer", "same")
    ]
    for query in queries:
        assert parse_question(question_text(query)) == query, question_text(query)


@pytest.mark.slow
def test_generated_questions_and_prompts_read_back_to_their_answer() -> None:
    task = EmbodiedTask()
    kinds = set()
    for seed in range(100):
        instance = task.generate(seed, task.difficulties[seed % 3])
        kinds.add(instance.facts["question"]["kind"])
        for text in (instance.facts["question_text"], instance.prompt):
            parsed = parse_question(text, instance.facts)
            assert parsed == instance.facts["question"], text
            assert oracle(instance.facts, parsed) == instance.answer
        steps = task.steps(instance)
        assert all(task.check_step(steps[:k], instance) for k in range(len(steps) + 1))
        assert hallucinated_objects(str(instance.answer), instance.facts) == []
    assert kinds == {"count", "exists", "relation"}


# --------------------------------------------------------------------------- steps

TASK = EmbodiedTask()


def asked(query: dict[str, Any]) -> PuzzleInstance:
    facts = {**FACTS, "question": query}
    return PuzzleInstance("embodied", "medium", 0, question_text(query), oracle(facts, query), facts)


def seen(instance: int, category: str) -> dict[str, Any]:
    return {"instance": instance, "category": category}


def test_count_and_exists_steps() -> None:
    count = asked(count_query("chair"))
    assert TASK.steps(count) == [seen(7, "chair"), seen(8, "chair"), {"count": 2}]
    assert TASK.check_step([seen(8, "chair"), seen(7, "chair"), {"count": 2}], count)
    assert not TASK.check_step([seen(5, "sofa")], count)  # not a chair
    assert not TASK.check_step([seen(7, "chair"), seen(7, "chair")], count)  # a repeat
    assert not TASK.check_step([seen(99, "chair")], count)  # no such instance
    assert not TASK.check_step([seen(7, "chair"), seen(8, "chair"), {"count": 3}], count)  # a wrong count
    plants = asked(count_query("plant"))
    assert TASK.steps(plants) == [{"count": 0}]
    assert not TASK.check_step([seen(10, "plant")], plants)  # 10 pixels: not visible
    exists = asked(exists_query("chair"))
    assert TASK.check_step([seen(8, "chair"), {"answer": "yes"}], exists)
    assert not TASK.check_step([{"answer": "no"}], exists) and not TASK.check_step([seen(9, "table")], exists)
    absent = asked(exists_query("bed"))
    assert TASK.steps(absent) == [{"answer": "no"}] and not TASK.check_step([{"answer": "yes"}], absent)


def test_relation_and_compare_steps() -> None:
    relation = asked(relation_query("sofa", "right"))
    assert TASK.steps(relation) == [seen(5, "sofa"), seen(8, "chair"), {"answer": "chair"}]
    assert TASK.check_step([seen(5, "sofa"), seen(8, "chair")], relation)
    assert not TASK.check_step([seen(5, "sofa"), seen(7, "chair")], relation)  # that chair is on the left
    assert not TASK.check_step([seen(5, "sofa"), seen(8, "chair"), {"answer": "table"}], relation)
    nothing = asked(relation_query("table", "right"))
    assert TASK.steps(nothing) == [seen(9, "table"), {"answer": "none"}]
    compare = asked(compare_query("chair", "table", "more"))
    assert TASK.steps(compare) == [{"count": 2}, {"count": 1}, {"answer": "yes"}]
    assert not TASK.check_step([{"count": 1}], compare)


# --------------------------------------------------------------------------- hallucinations


def test_mentioned_categories_not_in_the_panorama() -> None:
    assert hallucinated_objects("There is a bed and a chair.", FACTS) == ["bed"]
    assert hallucinated_objects("The couch faces two armchairs and a TV.", FACTS) == []
    assert hallucinated_objects("I see a plant in the corner.", FACTS) == []  # a few pixels: it is there
    assert hallucinated_objects("There is no bed here.", FACTS) == []
    assert hallucinated_objects("A fridge stands by the wall.", FACTS) == ["refrigerator"]


def test_hallucinations_through_the_question() -> None:
    exists = asked(exists_query("bed")).facts
    assert hallucinated_objects("yes", exists) == ["bed"] and hallucinated_objects("no", exists) == []
    count = asked(count_query("bathtub")).facts
    assert hallucinated_objects("1", count) == ["bathtub"] and hallucinated_objects("0", count) == []
    relation = asked(relation_query("sofa", "right")).facts
    assert hallucinated_objects("chair", relation) == []
    assert hallucinated_objects("table", relation) == []  # wrong (not the nearest), but on that side
    assert hallucinated_objects("the TV", relation) == ["tv right of the sofa"]
    assert hallucinated_objects("a bathtub", relation) == ["bathtub", "bathtub right of the sofa"]
