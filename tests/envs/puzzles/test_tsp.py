"""TSP: Held-Karp optimum against brute force, rotations/reversals accepted, near misses scored."""

from __future__ import annotations

import itertools

import pytest

from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.tsp import tour_length

TASK = make_task("tsp")


def test_optimum_matches_brute_force() -> None:
    for seed in range(5):
        inst = TASK.generate(seed, "medium")
        pts = inst.facts["points"]
        brute = min(tour_length(pts, [0, *p]) for p in itertools.permutations(range(1, len(pts))))
        assert inst.facts["optimal_length"] == pytest.approx(brute, abs=1e-9)


def test_sizes() -> None:
    assert [len(TASK.generate(0, d).facts["points"]) for d in ("easy", "medium", "hard")] == [5, 7, 10]


def test_rotation_reversal_and_near_miss() -> None:
    inst = TASK.generate(4)
    t = inst.answer
    assert TASK.check(t[3:] + t[:3], inst).correct
    assert TASK.check(t[::-1], inst).correct
    assert TASK.score(f"Tour: {' -> '.join(map(str, [*t, t[0]]))}", inst).correct
    swapped = list(t)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    v = TASK.check(swapped, inst)
    assert not v.correct and 0 < v.score < 1 and "optimal is" in v.reason


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("Visit the nearest point first.", "no answer found"),
        ('{"tour": [0, 1', "truncated"),
        ('{"tour": [0, 1, 1, 2, 3, 4, 5]}', "point 1 is visited more than once"),
        ('{"tour": [0, 1, 2, 3, 4, 5]}', "tour misses point 6"),
        ('{"tour": [0, 1, 2, 3, 4, 5, 9]}', "point 9 does not exist"),
    ],
)
def test_parser_failures(reply: str, reason: str) -> None:
    parsed = TASK.parse(reply, TASK.generate(0))
    assert not parsed.ok and reason in parsed.error


def test_check_step_exact() -> None:
    inst = TASK.generate(2)
    t = inst.answer
    assert TASK.check_step(t[:4], inst) and TASK.check_step(t[::-1][:4], inst)
    # an optimal tour uses only two edges at t[0]; most other first edges cannot be completed optimally
    assert not all(TASK.check_step([t[0], x], inst) for x in t[1:])
    assert not TASK.check_step([t[0], t[0]], inst)
