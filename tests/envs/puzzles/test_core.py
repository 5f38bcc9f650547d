"""Puzzle contract: registry, records, lazy images, answer extraction, shared invariants."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from embodia.envs.puzzles import TASKS, PuzzleError, PuzzleInstance, find_answer, make_task
from embodia.errors import EmbodiaError

OURS = ["maze", "sudoku", "jigsaw", "frozenlake", "tsp"]


def test_registry_lazy_and_errors() -> None:
    assert TASKS["clevr"] == "embodia.envs.puzzles.clevr:ClevrTask"
    assert TASKS["embodied"] == "embodia.envs.puzzles.embodied:EmbodiedTask"
    with pytest.raises(PuzzleError, match="known: .*maze"):
        make_task("nope")
    assert issubclass(PuzzleError, EmbodiaError) and issubclass(PuzzleError, ValueError)
    with pytest.raises(PuzzleError, match="unknown difficulty"):
        make_task("maze").generate(0, "extreme")


@pytest.mark.parametrize("name", OURS)
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_determinism_record_roundtrip_and_truth(name: str, difficulty: str) -> None:
    task = make_task(name)
    a, b = task.generate(11, difficulty), task.generate(11, difficulty)
    assert a.to_record() == b.to_record()
    assert a.image.tobytes() == b.image.tobytes()
    assert a.image.dtype == np.uint8 and a.image.ndim == 3 and max(a.image.shape[:2]) <= 256
    rec = json.loads(json.dumps(a.to_record()))
    back = PuzzleInstance.from_record(rec)
    assert back == a and back.image.tobytes() == a.image.tobytes()
    assert task.generate(12, difficulty).to_record() != a.to_record()
    verdict = task.score(json.dumps({"answer": a.answer}), a)
    assert verdict.correct and verdict.score == 1.0, verdict
    steps = task.steps(a)
    assert steps and task.check_step(steps[: len(steps) // 2], a) and task.check_step([], a)


def test_lazy_image_not_rendered_by_generate() -> None:
    calls: list[int] = []
    task = make_task("maze")
    inst = task.generate(3)
    counted = PuzzleInstance(**{**inst.to_record(), "renderer": lambda i: calls.append(1) or task.render(i)})
    assert calls == []
    _ = counted.image, counted.image
    assert calls == [1]
    with pytest.raises(PuzzleError, match="no renderer"):
        _ = PuzzleInstance(**inst.to_record()).image


def test_from_record_rejects_incomplete() -> None:
    with pytest.raises(PuzzleError, match="lacks"):
        PuzzleInstance.from_record({"task": "maze"})


@pytest.mark.parametrize(
    ("reply", "value", "error"),
    [
        ("", None, "empty reply"),
        ("   \n ", None, "empty reply"),
        ('{"path": "RRD', None, "truncated or malformed JSON"),
        ('I think {"path": "UU"} first, but then {"path": "RR"}', "RR", None),
        ('```json\n{"path": "DD"}\n```', "DD", None),
        ("Let me think.\nThe route goes around.\nRRDD", "RRDD", None),
        ("reasoning...\nFinal answer: LLUU", "LLUU", None),
        ("<answer>UD</answer> trailing", "UD", None),
        ("The tour is [0, 2, 1].", [0, 2, 1], None),
        ('{"other": 1, "x": 2}\nUU', "UU", None),
    ],
)
def test_find_answer(reply: str, value: object, error: str | None) -> None:
    got = find_answer(reply, ("path",))
    assert got.error == error and got.value == value


@pytest.mark.parametrize("name", OURS)
@pytest.mark.parametrize("seed", [1.5, True, -1, "3", None, 2.0])
def test_bad_seeds_rejected(name: str, seed: object) -> None:
    """A seed is a non-negative integer: floats, bools, negatives and strings are refused by
    name (they would otherwise seed the rng with their text and record a different int)."""
    with pytest.raises(PuzzleError, match=re.escape(f"got {seed!r}")):
        make_task(name).generate(seed, "easy")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", OURS)
def test_numpy_integer_seed_is_the_same_instance(name: str) -> None:
    task = make_task(name)
    a, b = task.generate(np.int64(7), "easy"), task.generate(7, "easy")  # type: ignore[arg-type]
    assert a.to_record() == b.to_record() and type(a.seed) is int


# What a reply that cannot be read fails with, per task; the instance is seed 0 at medium
# difficulty, or the one named in PARSE_INSTANCES.
PARSE_INSTANCES = {"maze": (1, "easy")}


@pytest.mark.parametrize(
    ("task", "reply", "reason"),
    [
        ("frozenlake", "", "empty reply"),
        ("frozenlake", "Walk carefully on the ice.", "no answer found"),
        ("frozenlake", '{"moves": "DD', "truncated"),
        ("jigsaw", "", "empty reply"),
        ("jigsaw", "The picture shows a sunset.", "no answer found"),
        ("jigsaw", '{"permutation": [1, 2', "truncated or malformed JSON"),
        ("jigsaw", '{"permutation": [0, 0, 1, 2, 3, 4, 5, 6, 7]}', "appears more than once"),
        ("jigsaw", '{"permutation": [0, 1, 2, 3, 4, 5, 6, 7, 9]}', "tile 9 does not exist"),
        ("maze", "", "empty reply"),
        ("maze", "I am not sure where to go.", "no answer found"),
        ("maze", '{"path": "RRD', "truncated or malformed JSON"),
        ("maze", '{"path": "RRX"}', "no answer found"),
        ("maze", '{"path": [[0, 0], [2, 0]]}', "jumps"),
        ("sudoku", "", "empty reply"),
        ("sudoku", "This sudoku looks hard.", "expected 81 digits"),
        ("sudoku", '{"solution": "1234', "truncated or malformed JSON"),
        ("tsp", "", "empty reply"),
        ("tsp", "Visit the nearest point first.", "no answer found"),
        ("tsp", '{"tour": [0, 1', "truncated"),
        ("tsp", '{"tour": [0, 1, 1, 2, 3, 4, 5]}', "point 1 is visited more than once"),
        ("tsp", '{"tour": [0, 1, 2, 3, 4, 5]}', "tour misses point 6"),
        ("tsp", '{"tour": [0, 1, 2, 3, 4, 5, 9]}', "point 9 does not exist"),
    ],
)
def test_parser_failures(task: str, reply: str, reason: str) -> None:
    puzzle = make_task(task)
    parsed = puzzle.parse(reply, puzzle.generate(*PARSE_INSTANCES.get(task, (0, "medium"))))
    assert not parsed.ok and reason in parsed.error
