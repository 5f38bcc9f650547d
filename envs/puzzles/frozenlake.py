"""FrozenLake-style visual spatial planning: walk from start to goal without stepping in a hole.

Any valid route is correct (as in the gymnasium game); the verdict reason reports whether it
was optimal, so planners can be compared on path length without failing them for detours.

Start and goal are drawn anywhere on the grid; a layout is redrawn from the same seeded rng
until it meets its level's guarantees:

- easy: 4x4, ~15% holes, start and goal at Manhattan distance >= 4, goal reachable (a
  straight or staircase route may work);
- medium: 6x6, ~20% holes, Manhattan distance >= 6, and the shortest path is at least 2 moves
  longer than the Manhattan distance: every monotone route is blocked, so no blind staircase
  (alternating the two needed directions, in either order) or other guess that only heads
  towards the goal reaches it;
- hard: 8x8, ~25% holes, Manhattan distance >= 8, shortest path >= Manhattan distance + 4.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles import grid as lattice
from embodia.envs.puzzles.core import PuzzleInstance, Verdict, answer_format_note

SIZES: dict[str, int] = {"easy": 4, "medium": 6, "hard": 8}
HOLES: dict[str, float] = {"easy": 0.15, "medium": 0.2, "hard": 0.25}
SEPARATION: dict[str, int] = {"easy": 4, "medium": 6, "hard": 8}
"""Least Manhattan distance between start and goal (the grid side)."""
DETOUR: dict[str, int] = {"easy": 0, "medium": 2, "hard": 4}
"""Least excess of the shortest path over the Manhattan distance."""


def _neighbours(rows: Sequence[str]) -> Callable[[lattice.Cell], Iterator[lattice.Cell]]:
    def off_holes(cell: lattice.Cell, move: lattice.Cell) -> bool:
        return rows[cell[0] + move[0]][cell[1] + move[1]] != "H"

    return lattice.grid_neighbours(len(rows), len(rows), off_holes)


class FrozenLakeTask(lattice.MoveTask):
    """Grid of ice ('F'), holes ('H'), start ('S') and goal ('G'); answer = moves U/D/L/R."""

    name = "frozenlake"

    def generate(self, seed: int, difficulty: str = "medium") -> PuzzleInstance:
        seed, rng = self._seeded(seed, difficulty)
        n = SIZES[difficulty]
        while True:  # redraw (deterministically, from the same rng) until the level's promise holds
            start, goal = divmod(rng.randrange(n * n), n), divmod(rng.randrange(n * n), n)
            manhattan = abs(start[0] - goal[0]) + abs(start[1] - goal[1])
            if manhattan < SEPARATION[difficulty]:
                continue
            cells = ["H" if rng.random() < HOLES[difficulty] else "F" for _ in range(n * n)]
            cells[start[0] * n + start[1]] = "S"
            cells[goal[0] * n + goal[1]] = "G"
            rows = ["".join(cells[r * n : r * n + n]) for r in range(n)]
            parent = lattice.bfs(start, _neighbours(rows))
            if goal in parent and len(lattice.moves_to(parent, goal)) >= manhattan + DETOUR[difficulty]:
                break
        moves = lattice.moves_to(parent, goal)
        prompt = (
            f"The image shows a {n}x{n} frozen lake: light blue is ice, dark blue cells are holes, the "
            "green cell is the start and the gold cell is the goal. Give moves U (up), D (down), "
            "L (left), R (right) that walk from start to goal without entering a hole or leaving the grid. "
            + answer_format_note('{"moves": "DDRR"}')
        )
        facts = {
            "size": n,
            "rows": rows,
            "start": list(start),
            "goal": list(goal),
            "holes": [[r, c] for r in range(n) for c in range(n) if rows[r][c] == "H"],
            "shortest_length": len(moves),
        }
        return self._instance(seed, difficulty, prompt, moves, facts)

    def render(self, instance: PuzzleInstance) -> np.ndarray:
        rows = instance.facts["rows"]
        colors = {"F": (200, 230, 250), "H": (20, 40, 110), "S": (60, 180, 80), "G": (230, 180, 30)}
        px = 256 // len(rows)
        img = np.array([[colors[ch] for ch in row] for row in rows], dtype=np.uint8)
        img = img.repeat(px, axis=0).repeat(px, axis=1)
        img[::px, :] = img[:, ::px] = 255  # grid lines so cells can be counted
        return np.ascontiguousarray(img)

    def _walk(self, moves: str, instance: PuzzleInstance) -> tuple[lattice.Cell, str | None]:
        f = instance.facts
        rows, n = f["rows"], f["size"]
        r, c = f["start"]
        for i, m in enumerate(moves, start=1):
            if rows[r][c] == "G":
                return (r, c), f"moves continue after reaching the goal at step {i - 1}"
            dr, dc = lattice.MOVES[m]
            r, c = r + dr, c + dc
            if not (0 <= r < n and 0 <= c < n):
                return (r, c), f"path leaves the grid at step {i}"
            if rows[r][c] == "H":
                return (r, c), f"step {i} ({m}) falls into the hole at [{r}, {c}]"
        return (r, c), None

    def check(self, value: Any, instance: PuzzleInstance) -> Verdict:
        end = self._walk_answer(value, instance)
        if isinstance(end, Verdict):
            return end
        if list(end) != list(instance.facts["goal"]):
            return Verdict(False, 0.0, f"path ends at {list(end)}, not at the goal")
        best = instance.facts["shortest_length"]
        if len(value) == best:
            return Verdict(True, 1.0, f"reaches the goal in {best} moves (optimal)")
        return Verdict(True, 1.0, f"reaches the goal in {len(value)} moves (optimal is {best})")

    def text(self, instance: PuzzleInstance) -> str:
        f = instance.facts
        return (
            f"Frozen lake of {f['size']}x{f['size']} cells, row 0 at the top (S start, G goal, F ice, "
            "H hole):\n" + "\n".join(f["rows"])
        )

    def check_step(self, prefix: Sequence[Any], instance: PuzzleInstance) -> bool:
        """A move prefix is consistent iff it stays on ice and the goal is still reachable."""
        f = instance.facts
        parsed = lattice.prefix_moves(prefix, tuple(f["start"]))
        if not parsed.ok:
            return False
        end, error = self._walk(parsed.value, instance)
        return error is None and tuple(f["goal"]) in lattice.distances(end, _neighbours(f["rows"]))
