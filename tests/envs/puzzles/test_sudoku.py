"""Sudoku: unique solutions, exact checking with partial credit, parser failure reasons."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.sudoku import GIVENS, POOL, base_puzzle, count_solutions

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


def _oracle_count(givens: str, limit: int = 2) -> int:
    """Solutions of a sudoku (up to ``limit``) by plain set-based backtracking: an oracle that
    shares nothing with the module's bitmask solver."""
    grid = [int(ch) for ch in givens]
    units = [
        [
            j
            for j in range(81)
            if j // 9 == i // 9 or j % 9 == i % 9 or (j // 27, j % 9 // 3) == (i // 27, i % 9 // 3)
        ]
        for i in range(81)
    ]

    def candidates(i: int) -> set[int]:
        return set(range(1, 10)) - {grid[j] for j in units[i]}

    for i, v in enumerate(grid):
        if v and any(grid[j] == v for j in units[i] if j != i):
            return 0

    def count() -> int:
        blanks = [i for i in range(81) if not grid[i]]
        if not blanks:
            return 1
        i = min(blanks, key=lambda b: len(candidates(b)))
        found = 0
        for d in sorted(candidates(i)):
            grid[i] = d
            found += count()
            grid[i] = 0
            if found >= limit:
                break
        return found

    return count()


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_unique_by_an_independent_solver(difficulty: str) -> None:
    for seed in range(4):
        inst = TASK.generate(seed, difficulty)
        givens = inst.facts["givens"]
        assert _oracle_count(givens) == 1
        assert _oracle_count(inst.answer) == 1 and "0" not in inst.answer
        assert all(g in ("0", a) for g, a in zip(givens, inst.answer, strict=True))
        # any other digit in a blank admits no solution at all (the solution is the only one)
        i = givens.index("0")
        for d in set("123456789") - {inst.answer[i]}:
            assert _oracle_count(givens[:i] + d + givens[i + 1 :]) == 0
    assert _oracle_count("0" * 81) == 2


def test_every_base_has_exactly_the_promised_givens() -> None:
    """GIVENS is a promise (40 easy, 32 medium, 26 hard): every pool base keeps it, so every
    instance does (one hard base used to stop at 27)."""
    assert GIVENS == {"easy": 40, "medium": 32, "hard": 26}
    for difficulty, target in GIVENS.items():
        for k in range(POOL):
            givens, solution = base_puzzle(difficulty, k)
            assert sum(1 for v in givens if v) == target, (difficulty, k)
            assert count_solutions(list(givens)) == 1 and 0 not in solution
        for seed in range(50):
            f = TASK.generate(seed, difficulty).facts
            assert f["num_givens"] == target == sum(ch != "0" for ch in f["givens"])


def _cell_crops(img: np.ndarray) -> list[np.ndarray]:
    """The inside of each of the 81 cells (26 px cells after a 6 px margin), grid lines cut off."""
    cell, pad, inset = 26, 6, 3
    assert img.shape == (9 * cell + 2 * pad, 9 * cell + 2 * pad, 3)
    return [
        img[
            pad + r * cell + inset : pad + (r + 1) * cell - inset + 1,
            pad + c * cell + inset : pad + (c + 1) * cell - inset + 1,
        ]
        for r in range(9)
        for c in range(9)
    ]


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_image_matches_facts(difficulty: str) -> None:
    """Dark ink lies in exactly the cells with givens; cells with the same given look the same
    and cells with different givens look different (caught: digits transposed or misplaced)."""
    for seed in range(8):
        inst = TASK.generate(seed, difficulty)
        givens = inst.facts["givens"]
        crops = _cell_crops(inst.image)
        inked = [bool((crop.max(axis=2) < 128).any()) for crop in crops]
        assert inked == [ch != "0" for ch in givens], seed
        looks: dict[str, bytes] = {}
        for ch, crop in zip(givens, crops, strict=True):
            if ch != "0":
                assert looks.setdefault(ch, crop.tobytes()) == crop.tobytes(), (seed, ch)
        assert len(set(looks.values())) == len(looks)
