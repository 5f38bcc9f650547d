"""Maze: find the shortest path through a seeded grid maze.

The maze is carved by randomized depth-first search (a perfect maze), then a few extra walls
are knocked down on medium/hard so that loops exist and several shortest paths may tie; the
checker therefore accepts any valid path whose length equals the BFS optimum.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles import grid as lattice
from embodia.envs.puzzles.core import PuzzleInstance, Verdict, answer_format_note

SIZES: dict[str, int] = {"easy": 5, "medium": 9, "hard": 15}
LOOPS: dict[str, float] = {"easy": 0.0, "medium": 0.08, "hard": 0.12}


def carve(rows: int, cols: int, rng: random.Random, loop_fraction: float) -> list[str]:
    """Block grid of ``(2*rows+1) x (2*cols+1)`` chars: '#' wall, '.' open; cell (r, c) is at (2r+1, 2c+1)."""
    width = 2 * cols + 1
    g = bytearray(b"#" * (width * (2 * rows + 1)))
    seen = bytearray(rows * cols)
    stack = [(rng.randrange(rows), rng.randrange(cols))]
    r0, c0 = stack[0]
    seen[r0 * cols + c0] = 1
    g[(2 * r0 + 1) * width + 2 * c0 + 1] = 46
    dirs = ((-1, 0), (1, 0), (0, -1), (0, 1))
    while stack:
        r, c = stack[-1]
        options = [
            (r + dr, c + dc)
            for dr, dc in dirs
            if 0 <= r + dr < rows and 0 <= c + dc < cols and not seen[(r + dr) * cols + c + dc]
        ]
        if not options:
            stack.pop()
            continue
        nr, nc = options[rng.randrange(len(options))] if len(options) > 1 else options[0]
        seen[nr * cols + nc] = 1
        g[(r + nr + 1) * width + c + nc + 1] = 46
        g[(2 * nr + 1) * width + 2 * nc + 1] = 46
        stack.append((nr, nc))
    inner = [
        (y, x)
        for y in range(1, 2 * rows)
        for x in range(1, 2 * cols)
        if (y + x) % 2 == 1 and g[y * width + x] == 35
    ]
    for y, x in rng.sample(inner, int(loop_fraction * len(inner))):
        g[y * width + x] = 46
    text = g.decode()
    return [text[i : i + width] for i in range(0, len(text), width)]


def _neighbours(
    grid: Sequence[str], rows: int, cols: int
) -> Callable[[lattice.Cell], Iterator[lattice.Cell]]:
    def no_wall(cell: lattice.Cell, move: lattice.Cell) -> bool:
        return grid[2 * cell[0] + 1 + move[0]][2 * cell[1] + 1 + move[1]] == "."

    return lattice.grid_neighbours(rows, cols, no_wall)


class MazeTask(lattice.MoveTask):
    """Shortest path from the green start cell to the red goal cell; answer = moves U/D/L/R."""

    name = "maze"
    answer_keys = ("path", "moves", "answer")

    def generate(self, seed: int, difficulty: str = "medium") -> PuzzleInstance:
        seed, rng = self._seeded(seed, difficulty)
        n = SIZES[difficulty]
        grid = carve(n, n, rng, LOOPS[difficulty])
        start = (rng.randrange(n), rng.randrange(n))
        parent = lattice.bfs(start, _neighbours(grid, n, n))
        goal = _farthest(parent)
        moves = lattice.moves_to(parent, goal)
        prompt = (
            f"The image shows a {n}x{n} maze: dark blocks are walls, the green cell is the start and the "
            "red cell is the goal. Give a shortest path from start to goal as a string of moves "
            "U (up), D (down), L (left), R (right), one move per cell. "
            + answer_format_note('{"path": "RRDL"}')
        )
        facts = {
            "rows": n,
            "cols": n,
            "start": list(start),
            "goal": list(goal),
            "grid": grid,
            "shortest_length": len(moves),
            "legend": "grid rows are blocks: '#' wall, '.' open; cell (r, c) is grid[2r+1][2c+1]",
        }
        return self._instance(seed, difficulty, prompt, moves, facts)

    def render(self, instance: PuzzleInstance) -> np.ndarray:
        f = instance.facts
        blocks = np.array([[ch == "#" for ch in row] for row in f["grid"]])
        px = max(1, 256 // blocks.shape[0])
        img = np.where(blocks[..., None], np.uint8(40), np.uint8(245)).repeat(3, axis=2)
        for (r, c), color in ((f["start"], (40, 180, 60)), (f["goal"], (220, 50, 50))):
            img[2 * r + 1, 2 * c + 1] = color
        return np.ascontiguousarray(img.repeat(px, axis=0).repeat(px, axis=1))

    def _walk(self, moves: str, instance: PuzzleInstance) -> tuple[lattice.Cell, str | None]:
        f = instance.facts
        rows, cols, grid = f["rows"], f["cols"], f["grid"]
        r, c = f["start"]
        for i, m in enumerate(moves, start=1):
            dr, dc = lattice.MOVES[m]
            if not (0 <= r + dr < rows and 0 <= c + dc < cols):
                return (r, c), f"path leaves the grid at step {i} ({m} from [{r}, {c}])"
            if grid[2 * r + 1 + dr][2 * c + 1 + dc] != ".":
                return (r, c), f"path hits a wall at step {i} ({m} from [{r}, {c}])"
            r, c = r + dr, c + dc
        return (r, c), None

    def check(self, value: Any, instance: PuzzleInstance) -> Verdict:
        end = self._walk_answer(value, instance)
        if isinstance(end, Verdict):
            return end
        best = instance.facts["shortest_length"]
        if list(end) != list(instance.facts["goal"]):
            return Verdict(False, 0.0, f"path ends at {list(end)}, not at the goal {instance.facts['goal']}")
        if len(value) > best:
            return Verdict(False, best / len(value), f"path has {len(value)} moves; the shortest has {best}")
        return Verdict(True, 1.0, f"shortest path ({best} moves)")

    def text(self, instance: PuzzleInstance) -> str:
        f = instance.facts
        blocks = [list(row) for row in f["grid"]]
        for (r, c), mark in ((f["start"], "S"), (f["goal"], "G")):
            blocks[2 * r + 1][2 * c + 1] = mark
        return (
            f"Maze of {f['rows']}x{f['cols']} cells drawn as blocks ('#' wall, '.' open, S start, G goal); "
            "cell [r, c] is block row 2r+1, block column 2c+1, and a move crosses the block between "
            "two cells:\n" + "\n".join("".join(row) for row in blocks)
        )

    def check_step(self, prefix: Sequence[Any], instance: PuzzleInstance) -> bool:
        """A move or cell prefix lies on SOME shortest path: each cell is at BFS distance k from
        the start and at distance optimum - k from the goal."""
        f = instance.facts
        start = tuple(f["start"])
        parsed = lattice.prefix_moves(prefix, start)
        if not parsed.ok or len(parsed.value) > f["shortest_length"]:
            return False
        end, error = self._walk(parsed.value, instance)
        if error:
            return False
        nb = _neighbours(f["grid"], f["rows"], f["cols"])
        from_goal = lattice.distances(tuple(f["goal"]), nb)
        return from_goal.get(end, -1) == f["shortest_length"] - len(parsed.value)


def _farthest(parent: dict[lattice.Cell, lattice.Cell | None]) -> lattice.Cell:
    # BFS parent maps are filled in distance order, so the last key inserted is a farthest cell.
    return next(reversed(parent))
