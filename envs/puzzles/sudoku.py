"""Sudoku: fill a 9x9 grid whose givens admit exactly one solution.

Checking uniqueness after every removal costs milliseconds in Python, far too slow for the
>= 1,000 instances/s target. Uniqueness is invariant under sudoku symmetries (digit relabelling,
row swaps within a band, band swaps, the same for columns, transposition), so a small pool of
base puzzles per difficulty is built once (pattern-shuffled full grid, random removal order,
a solution-counting solver keeps each removal unique) and every instance is a seeded symmetry
of one of them: ~1.2e12 distinct puzzles per base, each provably unique, generated in ~0.1 ms.
Every base, hence every instance, has exactly ``GIVENS[difficulty]`` givens (40 easy, 32
medium, 26 hard); symmetries move givens but never add or remove one.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from embodia.envs.puzzles import core

GIVENS: dict[str, int] = {"easy": 40, "medium": 32, "hard": 26}
POOL = 32
_BOX = [3 * (i // 27) + (i % 9) // 3 for i in range(81)]
_PEERS = [
    sorted({j for j in range(81) if j != i and (j // 9 == i // 9 or j % 9 == i % 9 or _BOX[j] == _BOX[i])})
    for i in range(81)
]


def count_solutions(cells: list[int], limit: int = 2) -> int:
    """Number of completions of ``cells`` (0 = blank), stopping at ``limit``; bitmask DFS with MRV."""
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    blanks = []
    for i, v in enumerate(cells):
        if v:
            bit = 1 << v
            if (rows[i // 9] | cols[i % 9] | boxes[_BOX[i]]) & bit:
                return 0
            rows[i // 9] |= bit
            cols[i % 9] |= bit
            boxes[_BOX[i]] |= bit
        else:
            blanks.append(i)
    full = 0b1111111110

    def solve(todo: list[int]) -> int:
        if not todo:
            return 1
        best, best_free, best_n = -1, 0, 10
        for k, i in enumerate(todo):
            free = full & ~(rows[i // 9] | cols[i % 9] | boxes[_BOX[i]])
            n = free.bit_count()
            if n < best_n:
                best, best_free, best_n = k, free, n
                if n <= 1:
                    break
        if best_n == 0:
            return 0
        i = todo[best]
        rest = todo[:best] + todo[best + 1 :]
        r, c, b = i // 9, i % 9, _BOX[i]
        found = 0
        while best_free:
            bit = best_free & -best_free
            best_free ^= bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            found += solve(rest)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            if found >= limit:
                break
        return found

    return solve(blanks)


def full_grid(rng: random.Random) -> list[int]:
    """A random complete grid: the canonical pattern under random bands, rows, stacks, columns, digits."""

    def order() -> list[int]:
        bands = rng.sample(range(3), 3)
        return [3 * b + r for b in bands for r in rng.sample(range(3), 3)]

    rows, cols, digits = order(), order(), rng.sample(range(1, 10), 9)
    return [digits[(3 * (r % 3) + r // 3 + c) % 9] for r in rows for c in cols]


@functools.cache
def base_puzzle(difficulty: str, k: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(givens, solution) of pool entry ``k``: remove cells in random order while unique.

    A removal pass can get stuck above the target (every remaining given is needed for
    uniqueness); it then starts over on a fresh grid from the same rng, so every base has
    exactly ``GIVENS[difficulty]`` givens."""
    rng = random.Random(f"sudoku-base/{difficulty}/{k}")
    target = GIVENS[difficulty]
    while True:
        solution = full_grid(rng)
        cells = list(solution)
        for i in rng.sample(range(81), 81):
            if sum(1 for v in cells if v) <= target:
                break
            keep, cells[i] = cells[i], 0
            if count_solutions(cells) != 1:
                cells[i] = keep
        if sum(1 for v in cells if v) == target:
            return tuple(cells), tuple(solution)


def _symmetry(rng: random.Random) -> tuple[list[int], list[int], bool, list[int]]:
    def order() -> list[int]:
        bands = rng.sample(range(3), 3)
        return [3 * b + r for b in bands for r in rng.sample(range(3), 3)]

    return order(), order(), rng.random() < 0.5, [0, *rng.sample(range(1, 10), 9)]


def _apply(cells: Sequence[int], sym: tuple[list[int], list[int], bool, list[int]]) -> str:
    rows, cols, transpose, digits = sym
    if transpose:
        return "".join(str(digits[cells[cols[c] * 9 + rows[r]]]) for r in range(9) for c in range(9))
    return "".join(str(digits[cells[rows[r] * 9 + cols[c]]]) for r in range(9) for c in range(9))


def _rc(i: int) -> str:
    return f"row {i // 9 + 1} col {i % 9 + 1}"


class SudokuTask(core.PuzzleTask):
    """Classic sudoku; answer = the 81 digits of the solved grid, row by row."""

    name = "sudoku"

    def generate(self, seed: int, difficulty: str = "medium") -> core.PuzzleInstance:
        seed, rng = self._seeded(seed, difficulty)
        givens, solution = base_puzzle(difficulty, rng.randrange(POOL))
        sym = _symmetry(rng)
        puzzle, answer = _apply(givens, sym), _apply(solution, sym)
        prompt = (
            "The image shows a sudoku: fill every empty cell with a digit 1-9 so that each row, column "
            "and 3x3 box holds each digit once. Give the full solved grid as 81 digits, row by row. "
            + core.answer_format_note('{"solution": "534678912..."}')
        )
        facts = {
            "givens": puzzle,
            "rows": [puzzle[9 * r : 9 * r + 9] for r in range(9)],
            "num_givens": sum(ch != "0" for ch in puzzle),
            "legend": "givens: 81 chars row by row, '0' = empty; rows/cols are 1-based in messages",
        }
        return self._instance(seed, difficulty, prompt, answer, facts)

    def render(self, instance: core.PuzzleInstance) -> np.ndarray:
        cell, pad = 26, 6
        size = 9 * cell + 2 * pad
        img = Image.new("RGB", (size, size), (255, 255, 255))
        draw = ImageDraw.Draw(img)
        for k in range(10):
            w = 3 if k % 3 == 0 else 1
            p = pad + k * cell
            draw.line([(pad, p), (pad + 9 * cell, p)], fill=(0, 0, 0), width=w)
            draw.line([(p, pad), (p, pad + 9 * cell)], fill=(0, 0, 0), width=w)
        for i, ch in enumerate(instance.facts["givens"]):
            if ch != "0":
                x, y = pad + (i % 9) * cell + cell // 2, pad + (i // 9) * cell + cell // 2
                draw.text((x, y), ch, fill=(0, 0, 0), anchor="mm", font_size=18)
        return np.asarray(img)

    def parse(self, reply: str, instance: core.PuzzleInstance) -> core.Parsed:
        raw = core.find_answer(reply, ("solution", "grid", "answer"))
        text = _flatten(raw.value) if raw.ok else ""
        if len(text) != 81 and isinstance(reply, str):
            # a row label ("Row 1:", "R1:", "1.") is not a digit of the grid
            rows = [re.sub(r"[^0-9.]", "", _ROW_LABEL.sub("", ln)) for ln in reply.splitlines()]
            rows = [r for r in rows if len(r) == 9]
            if len(rows) >= 9:
                text = "".join(rows[-9:])
        if len(text) != 81:
            if not raw.ok:
                return raw
            return core.Parsed.fail(f"expected 81 digits, found {len(text)}")
        for i, ch in enumerate(text):
            if ch in "0.":
                return core.Parsed.fail(f"digit {ch} at {_rc(i)}")
        return core.Parsed(text)

    def check(self, value: Any, instance: core.PuzzleInstance) -> core.Verdict:
        if not isinstance(value, str) or len(value) != 81 or not set(value) <= set("123456789"):
            return core.Verdict(False, 0.0, "answer is not 81 digits 1-9")
        givens, answer = instance.facts["givens"], instance.answer
        blanks = [i for i, g in enumerate(givens) if g == "0"]
        right = sum(value[i] == answer[i] for i in blanks)
        score = right / len(blanks)
        for i, g in enumerate(givens):
            if g != "0" and value[i] != g:
                return core.Verdict(False, score, f"given {g} at {_rc(i)} changed to {value[i]}")
        if value == answer:
            return core.Verdict(True, 1.0, "solved")
        for i in range(81):
            for j in _PEERS[i]:
                if j > i and value[i] == value[j]:
                    return core.Verdict(False, score, f"digit {value[i]} repeats at {_rc(i)} and {_rc(j)}")
        wrong = [i for i in blanks if value[i] != answer[i]]
        return core.Verdict(
            False, score, f"{len(wrong)} of {len(blanks)} cells wrong, first at {_rc(wrong[0])}"
        )

    step_format = (
        "state each digit you commit to as a JSON [row, col, digit] triple (1-based), e.g. [1, 3, 4], "
        "and the final answer as the JSON object asked for"
    )

    def text(self, instance: core.PuzzleInstance) -> str:
        rows = instance.facts["rows"]
        return "Sudoku, row by row ('.' is an empty cell):\n" + "\n".join(
            " ".join("." if ch == "0" else ch for ch in row) for row in rows
        )

    def answer_steps(self, value: Any, instance: core.PuzzleInstance) -> list[Any]:
        g = instance.facts["givens"]
        return [[i // 9 + 1, i % 9 + 1, int(value[i])] for i in range(81) if g[i] == "0"]

    def steps(self, instance: core.PuzzleInstance) -> list[Any]:
        """Placements [row, col, digit] (1-based) of the blank cells in row-major order."""
        return self.answer_steps(instance.answer, instance)

    def check_step(self, prefix: Sequence[Any], instance: core.PuzzleInstance) -> bool:
        """Placements in any order are consistent iff each fills a blank with its (unique) solution digit."""
        g, a = instance.facts["givens"], instance.answer
        seen: set[int] = set()
        for step in prefix:
            if not isinstance(step, list | tuple) or len(step) != 3:
                return False
            r, c, d = (core.as_int(x) if not isinstance(x, str) else None for x in step)
            if r is None or c is None or d is None:
                return False
            i = (r - 1) * 9 + (c - 1)
            if not (1 <= r <= 9 and 1 <= c <= 9) or g[i] != "0" or a[i] != str(d) or i in seen:
                return False
            seen.add(i)
        return True


_ROW_LABEL = re.compile(r"^\s*(?:row\s*|r)?\d\s*[:.)]\s*(?=\S)", re.I)


def _flatten(value: Any) -> str:
    if isinstance(value, list):
        return "".join(_flatten(v) for v in value)
    return re.sub(r"[^0-9.]", "", str(value))
