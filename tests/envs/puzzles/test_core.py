"""Puzzle contract: registry, records, lazy images, answer extraction, shared invariants."""

from __future__ import annotations

import json
import time

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


def test_generation_rate_printed() -> None:
    for name in ("maze", "sudoku"):
        task = make_task(name)
        for seed in range(200):  # warm caches (the sudoku base pool)
            task.generate(seed, "medium")
        n, t0 = 1000, time.perf_counter()
        for seed in range(n):
            task.generate(seed, "medium")
        rate = n / (time.perf_counter() - t0)
        print(f"{name} medium generation: {rate:.0f} instances/s")
