"""FrozenLake: any valid route accepted with optimality reported; holes and edges rejected."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.frozenlake import DETOUR, SEPARATION, SIZES
from embodia.envs.puzzles.grid import MOVES

TASK = make_task("frozenlake")


def test_sizes_and_solvable() -> None:
    assert [TASK.generate(0, d).facts["size"] for d in ("easy", "medium", "hard")] == [4, 6, 8]
    for seed in range(30):
        inst = TASK.generate(seed, "hard")
        assert TASK.check(inst.answer, inst).correct


def test_detour_accepted_but_not_optimal() -> None:
    for seed in range(50):
        inst = TASK.generate(seed, "easy")
        first = inst.answer[0]
        back = {"U": "D", "D": "U", "L": "R", "R": "L"}[first]
        v = TASK.check(first + back + inst.answer, inst)
        assert v.correct and "optimal is" in v.reason
        assert "(optimal)" in TASK.check(inst.answer, inst).reason


def test_hole_and_edge_and_overshoot() -> None:
    hit = 0
    for seed in range(50):
        inst = TASK.generate(seed, "medium")
        rows, (r, c) = inst.facts["rows"], inst.facts["start"]
        for m, (dr, dc) in MOVES.items():
            nr, nc = r + dr, c + dc
            if not (0 <= nr < len(rows) and 0 <= nc < len(rows)):
                assert TASK.check(m + inst.answer, inst).reason == "path leaves the grid at step 1"
            elif rows[nr][nc] == "H":
                v = TASK.check(m, inst)
                assert not v.correct and "step 1" in v.reason and "hole" in v.reason
                hit += 1
    assert hit > 0
    inst = TASK.generate(0)
    assert "after reaching the goal" in TASK.check(inst.answer + "U", inst).reason


def test_check_step() -> None:
    # start and goal lie anywhere: take the first instance whose start is on the edge
    inst = next(
        i for i in map(TASK.generate, range(3, 100)) if 0 in i.facts["start"] or 5 in i.facts["start"]
    )
    assert TASK.check_step(inst.answer[:2], inst)
    rows, (r, c) = inst.facts["rows"], inst.facts["start"]
    off = next(
        m for m, (dr, dc) in MOVES.items() if not (0 <= r + dr < len(rows) and 0 <= c + dc < len(rows))
    )
    assert not TASK.check_step(off, inst)


def _walks_to_goal(moves: str, rows: list[str], start: list[int], goal: list[int]) -> bool:
    r, c = start
    for m in moves:
        r, c = r + MOVES[m][0], c + MOVES[m][1]
        if not (0 <= r < len(rows) and 0 <= c < len(rows)) or rows[r][c] == "H":
            return False
    return [r, c] == goal


def _staircases(start: list[int], goal: list[int]) -> list[str]:
    """The two blind diagonal guesses: alternate the two needed directions, vertical or
    horizontal first, then finish the longer leg straight."""
    dv, dh = goal[0] - start[0], goal[1] - start[1]
    v, h = ("D" if dv > 0 else "U") * abs(dv), ("R" if dh > 0 else "L") * abs(dh)
    out = []
    for first, second in ((v, h), (h, v)):
        pairs = "".join(a + b for a, b in zip(first, second, strict=False))
        k = min(len(first), len(second))
        out.append(pairs + first[k:] + second[k:])
    return out


def _bfs_length(rows: list[str], start: list[int], goal: list[int]) -> int | None:
    n, seen, frontier, steps = len(rows), {tuple(start)}, [tuple(start)], 0
    while frontier:
        if tuple(goal) in frontier:
            return steps
        nxt = []
        for r, c in frontier:
            for dr, dc in MOVES.values():
                cell = (r + dr, c + dc)
                if (
                    0 <= cell[0] < n
                    and 0 <= cell[1] < n
                    and rows[cell[0]][cell[1]] != "H"
                    and cell not in seen
                ):
                    seen.add(cell)
                    nxt.append(cell)
        frontier, steps = nxt, steps + 1
    return None


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_level_guarantees(difficulty: str) -> None:
    """What each level promises (module docstring), checked by an independent BFS: separation
    of start and goal, reachability, and at medium/hard a forced detour that defeats both blind
    staircases. Start and goal really move around the grid."""
    starts, lengths = set(), []
    for seed in range(150):
        inst = TASK.generate(seed, difficulty)
        f = inst.facts
        rows, start, goal, n = f["rows"], f["start"], f["goal"], f["size"]
        manhattan = abs(start[0] - goal[0]) + abs(start[1] - goal[1])
        assert manhattan >= SEPARATION[difficulty] == n
        best = _bfs_length(rows, start, goal)
        assert best is not None and best == f["shortest_length"] == len(inst.answer)
        assert best >= manhattan + DETOUR[difficulty]
        if difficulty != "easy":
            assert best > manhattan
            assert not any(_walks_to_goal(s, rows, start, goal) for s in _staircases(start, goal)), seed
        assert _walks_to_goal(inst.answer, rows, start, goal)
        starts.add(tuple(start))
        lengths.append(best)
    assert len(starts) > 2 * SIZES[difficulty]  # not just the corners
    interior = {(r, c) for r, c in starts if 0 < r < SIZES[difficulty] - 1 and 0 < c < SIZES[difficulty] - 1}
    assert interior


def test_levels_really_differ() -> None:
    mean = {
        d: sum(TASK.generate(s, d).facts["shortest_length"] for s in range(100)) / 100
        for d in ("easy", "medium", "hard")
    }
    assert mean["easy"] + 3 < mean["medium"] < mean["hard"] - 3, mean
    # a blind staircase never solves medium or hard, but sometimes solves easy
    easy = [TASK.generate(s, "easy").facts for s in range(100)]
    assert any(
        any(_walks_to_goal(m, f["rows"], f["start"], f["goal"]) for m in _staircases(f["start"], f["goal"]))
        for f in easy
    )


def _classify(rgb: np.ndarray) -> str:
    """The prompt's colour words: light blue ice, dark blue hole, green start, gold goal."""
    r, g, b = (int(v) for v in rgb)
    if b > r + 40 and b > g and r + g + b > 500:
        return "F"
    if b > r + 40 and b > g and r + g + b < 250:
        return "H"
    if g > r + 60 and g > b + 60:
        return "S"
    if r > b + 120 and g > b + 80:
        return "G"
    return "?"


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_image_matches_facts(difficulty: str) -> None:
    """Each cell's colour, read back from its pixels, is the facts' cell: holes exactly at the
    facts holes, start and goal where the facts say (caught: holes drawn as ice)."""
    for seed in range(15):
        inst = TASK.generate(seed, difficulty)
        f, img = inst.facts, inst.image
        n = f["size"]
        px = img.shape[0] // n
        assert img.shape == (n * px, n * px, 3)
        seen = []
        for r in range(n):
            cells = img[r * px + 1 : (r + 1) * px, :].reshape(px - 1, n, px, 3)[:, :, 1:]
            assert (cells == cells[:1, :, :1]).all(), "cells are not uniform inside their grid lines"
            seen.append("".join(_classify(cells[0, c, 0]) for c in range(n)))
        assert seen == f["rows"]
        assert sorted([r, c] for r in range(n) for c in range(n) if seen[r][c] == "H") == sorted(f["holes"])
        assert seen[f["start"][0]][f["start"][1]] == "S" and seen[f["goal"][0]][f["goal"][1]] == "G"
