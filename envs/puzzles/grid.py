"""Grid helpers shared by the maze and frozenlake tasks: moves, their parsing, BFS, and the part
of a task that reads, steps through and walks a move answer (:class:`MoveTask`)."""

from __future__ import annotations

import re
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from embodia.envs.puzzles.core import Parsed, PuzzleInstance, PuzzleTask, Verdict, as_int, find_answer

Cell = tuple[int, int]
MOVES: dict[str, Cell] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_WORDS = {
    "UP": "U",
    "DOWN": "D",
    "LEFT": "L",
    "RIGHT": "R",
    "NORTH": "U",
    "SOUTH": "D",
    "WEST": "L",
    "EAST": "R",
}
_TOKEN = re.compile(r"[A-Za-z]+|[^\sA-Za-z,;>\-|/]")
_ARROW_MOVES = {"↑": "U", "↓": "D", "←": "L", "→": "R", "⬆": "U", "⬇": "D", "⬅": "L", "➡": "R"}
_SEPARATORS = re.compile(r"->|=>|[→⇒➔⟶,;|/]")
# Spaces before the number stay on its line (a run of blank lines is not rescanned from each of
# them), and the other runs are possessive: what follows each never starts with its characters.
_NUMBERED = re.compile(
    r"^[^\S\n]*+(?:step\s*+)?\d++\s*+[.):]\s*+(?:move\s+|go\s+)?([A-Za-z]+)\b", re.I | re.M
)


def parse_moves(raw: Any, start: Cell) -> Parsed:
    """A move string ("RRDL", "R R D", "right, down", "R → R → D", "↓ ↓ →", ["R","D"]) or a
    cell list -> "RRDL".

    Cell lists may include the start cell; consecutive cells must be grid neighbours. Arrows
    are moves when the text has no letters, separators when it has. In prose ("so the path is
    R R D D."), the capital move letters are the moves.
    """
    if isinstance(raw, list) and raw and all(isinstance(c, list | tuple) and len(c) == 2 for c in raw):
        cells = [(as_int(r), as_int(c)) for r, c in raw]
        if any(r is None or c is None for r, c in cells):
            bad = next(list(p) for p, q in zip(raw, cells, strict=True) if None in q)
            return Parsed.fail(f"cell {bad!r} is not a [row, col] pair of integers")
        path = [(int(r), int(c)) for r, c in cells if r is not None and c is not None]
        if path[0] != start:
            path.insert(0, start)
        return Parsed(cells_to_moves(path)) if _adjacent(path) else Parsed.fail(_jump(path))
    if isinstance(raw, list):
        raw = " ".join(str(x) for x in raw)
    if not isinstance(raw, str):
        return Parsed.fail(f"answer is a {type(raw).__name__}, not a move string")
    text = raw.strip().strip(".")
    if not re.search(r"[A-Za-z]", text):
        text = "".join(_ARROW_MOVES.get(ch, ch) for ch in text)
    strict = _moves_of(_SEPARATORS.sub(" ", text))
    if strict.ok:
        return strict
    capitals = re.findall(r"\b[UDLR]+\b", text)
    if capitals and re.search(r"[a-z]{2}", text):
        return Parsed("".join(capitals))
    return strict


def _moves_of(text: str) -> Parsed:
    out: list[str] = []
    for tok in _TOKEN.findall(text.upper()):
        if tok in _WORDS:
            out.append(_WORDS[tok])
        elif set(tok) <= set(MOVES):
            out.extend(tok)
        else:
            return Parsed.fail(f"no answer found: {tok!r} is not a move (use U, D, L, R)")
    if not out:
        return Parsed.fail("no answer found: empty move sequence")
    return Parsed("".join(out))


def parse_move_reply(reply: str, start: Cell, keys: tuple[str, ...]) -> Parsed:
    """A grid task's answer from a whole reply: the answer :func:`find_answer` locates, else a
    numbered list of moves (``1. left`` / ``2. down`` ...), one per line."""
    raw = find_answer(reply, keys)
    parsed = parse_moves(raw.value, start) if raw.ok else raw
    if parsed.ok or not isinstance(reply, str):
        return parsed
    items = _NUMBERED.findall(reply)
    if len(items) >= 2:
        listed = _moves_of(" ".join(items))
        if listed.ok:
            return listed
    return parsed


def _adjacent(cells: list[Cell]) -> bool:
    return all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in zip(cells, cells[1:], strict=False))


def _jump(cells: list[Cell]) -> str:
    for i, (a, b) in enumerate(zip(cells, cells[1:], strict=False), start=1):
        if abs(a[0] - b[0]) + abs(a[1] - b[1]) != 1:
            return f"step {i} jumps from {list(a)} to {list(b)}"
    return "cells are not adjacent"


def cells_to_moves(cells: list[Cell]) -> str:
    inv = {v: k for k, v in MOVES.items()}
    return "".join(inv[(b[0] - a[0], b[1] - a[1])] for a, b in zip(cells, cells[1:], strict=False))


def moves_to_cells(moves: str, start: Cell) -> list[Cell]:
    cells = [start]
    for m in moves:
        dr, dc = MOVES[m]
        cells.append((cells[-1][0] + dr, cells[-1][1] + dc))
    return cells


def cells_after(moves: str, start: Cell) -> list[list[int]]:
    """The cell reached after each move, as ``[r, c]`` lists (the grid tasks' steps)."""
    return [list(cell) for cell in moves_to_cells(moves, start)[1:]]


GRID_STEP_FORMAT = (
    "state the cells you commit to as JSON [row, col] pairs (0-based), e.g. [[0, 1], [0, 2]], "
    "and the final answer as the JSON object asked for"
)


def bfs(start: Cell, neighbours: Callable[[Cell], Iterable[Cell]]) -> dict[Cell, Cell | None]:
    """Parent map of a breadth-first search: distances are path lengths back to ``start``."""
    parent: dict[Cell, Cell | None] = {start: None}
    queue = deque([start])
    while queue:
        cur = queue.popleft()
        for nxt in neighbours(cur):
            if nxt not in parent:
                parent[nxt] = cur
                queue.append(nxt)
    return parent


def distances(start: Cell, neighbours: Callable[[Cell], Iterable[Cell]]) -> dict[Cell, int]:
    """Path length from ``start`` to every reachable cell, in breadth-first order."""
    dist: dict[Cell, int] = {}
    for cell, parent in bfs(start, neighbours).items():  # parents come before their children
        dist[cell] = 0 if parent is None else dist[parent] + 1
    return dist


def grid_neighbours(
    rows: int, cols: int, passable: Callable[[Cell, Cell], bool]
) -> Callable[[Cell], Iterator[Cell]]:
    """The neighbours of a cell on a ``rows`` x ``cols`` grid, in :data:`MOVES` order: the cells
    one move away that are on the grid and that ``passable(cell, move)`` lets the move reach."""

    def neighbours(cell: Cell) -> Iterator[Cell]:
        r, c = cell
        for dr, dc in MOVES.values():
            if 0 <= r + dr < rows and 0 <= c + dc < cols and passable(cell, (dr, dc)):
                yield (r + dr, c + dc)

    return neighbours


def path_to(parent: dict[Cell, Cell | None], goal: Cell) -> list[Cell]:
    """The cells of the shortest path from a :func:`bfs`'s start to ``goal``, both included."""
    cells = [goal]
    while (p := parent[cells[-1]]) is not None:
        cells.append(p)
    return cells[::-1]


def moves_to(parent: dict[Cell, Cell | None], goal: Cell) -> str:
    """The moves of the shortest path from a :func:`bfs`'s start to ``goal`` (one per step)."""
    return cells_to_moves(path_to(parent, goal))


def prefix_moves(prefix: Any, start: Cell) -> Parsed:
    """A step prefix (a move string, a list of moves, or a list of cells after start) -> moves."""
    if not prefix:
        return Parsed("")
    if isinstance(prefix, str):
        return parse_moves(prefix, start)
    if all(isinstance(p, str) for p in prefix):
        return parse_moves("".join(prefix), start)
    if not all(isinstance(p, list | tuple) for p in prefix):
        return Parsed.fail("a step prefix is moves or [row, col] cells")
    return parse_moves([list(p) for p in prefix], start)


class MoveTask(PuzzleTask):
    """A grid task answered by moves U/D/L/R from ``facts["start"]``: the reply is read by
    :func:`parse_move_reply` under :attr:`answer_keys`, the steps are the cells reached, and an
    answer is walked by the task's :meth:`_walk`."""

    answer_keys: tuple[str, ...] = ("moves", "path", "answer")
    step_format = GRID_STEP_FORMAT

    @abstractmethod
    def _walk(self, moves: str, instance: PuzzleInstance) -> tuple[Cell, str | None]:
        """Where ``moves`` lead from the start, and why the walk broke a rule (None if it did not)."""

    def parse(self, reply: str, instance: PuzzleInstance) -> Parsed:
        return parse_move_reply(reply, tuple(instance.facts["start"]), self.answer_keys)

    def _walk_answer(self, value: Any, instance: PuzzleInstance) -> Cell | Verdict:
        """Where a parsed answer leads, or the failing verdict when it is no move string or its walk
        breaks a rule."""
        if not isinstance(value, str) or set(value) - set(MOVES):
            return Verdict(False, 0.0, "answer is not a move string")
        end, error = self._walk(value, instance)
        return Verdict(False, 0.0, error) if error else end

    def steps(self, instance: PuzzleInstance) -> list[Any]:
        """The cell reached after each move of the true path, as [r, c] lists."""
        return self.answer_steps(instance.answer, instance)

    def answer_steps(self, value: Any, instance: PuzzleInstance) -> list[Any]:
        return cells_after(str(value), tuple(instance.facts["start"]))
