"""Sudoku: unique solutions, exact checking with partial credit, parser failure reasons."""

from __future__ import annotations

import pytest

from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.sudoku import count_solutions

TASK = make_task("sudoku")


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_unique_and_consistent(difficulty: str) -> None:
    for seed in range(10):
        inst = TASK.generate(seed, difficulty)
        givens = inst.facts["givens"]
        assert count_solutions([int(ch) for ch in givens]) == 1
        assert all(g in ("0", a) for g, a in zip(givens, inst.answer, strict=True))


def test_difficulty_changes_givens() -> None:
    counts = [TASK.generate(0, d).facts["num_givens"] for d in ("easy", "medium", "hard")]
    assert counts == sorted(counts, reverse=True) and len(set(counts)) == 3


def test_near_misses() -> None:
    inst = TASK.generate(3)
    g, a = inst.facts["givens"], inst.answer
    blank = g.index("0")
    wrong = a[:blank] + str(int(a[blank]) % 9 + 1) + a[blank + 1 :]
    v = TASK.check(wrong, inst)
    assert not v.correct and "repeats" in v.reason
    assert v.score == pytest.approx(1 - 1 / g.count("0"))
    given = next(i for i, ch in enumerate(g) if ch != "0")
    changed = a[:given] + str(int(a[given]) % 9 + 1) + a[given + 1 :]
    v = TASK.check(changed, inst)
    assert not v.correct and f"row {given // 9 + 1} col {given % 9 + 1} changed" in v.reason


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("This sudoku looks hard.", "expected 81 digits"),
        ('{"solution": "1234', "truncated or malformed JSON"),
    ],
)
def test_parser_failures(reply: str, reason: str) -> None:
    parsed = TASK.parse(reply, TASK.generate(0))
    assert not parsed.ok and reason in parsed.error


def test_parser_zero_reason_and_styles() -> None:
    inst = TASK.generate(0)
    a = inst.answer
    holed = a[:13] + "0" + a[14:]
    parsed = TASK.parse(f'{{"solution": "{holed}"}}', inst)
    assert parsed.error == "digit 0 at row 2 col 5"
    rows = [a[9 * r : 9 * r + 9] for r in range(9)]
    grid_text = "\n".join(" ".join(row) for row in rows)
    nested = [[int(ch) for ch in row] for row in rows]
    for reply in (
        f"Solved it:\n```\n{grid_text}\n```",
        f'{{"solution": "bad"}} then {{"solution": {nested}}}',
        f"Final answer: {a}",
    ):
        assert TASK.score(reply, inst).correct, reply


def test_check_step() -> None:
    inst = TASK.generate(1)
    steps = TASK.steps(inst)
    assert TASK.check_step(steps[::-1][:5], inst)
    r, c, d = steps[0]
    assert not TASK.check_step([[r, c, d % 9 + 1]], inst)
    assert not TASK.check_step([steps[0], steps[0]], inst)
