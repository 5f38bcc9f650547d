"""Maze: BFS optimum, any shortest path accepted, walls / grid edges / detours rejected."""

from __future__ import annotations

import pytest

from embodia.envs.puzzles import PuzzleInstance, make_task
from embodia.envs.puzzles.grid import MOVES, distances
from embodia.envs.puzzles.maze import _neighbours

TASK = make_task("maze")


def _blocked_move(inst: PuzzleInstance, r: int, c: int) -> str:
    f = inst.facts
    for m, (dr, dc) in MOVES.items():
        if (
            0 <= r + dr < f["rows"]
            and 0 <= c + dc < f["cols"]
            and f["grid"][2 * r + 1 + dr][2 * c + 1 + dc] == "#"
        ):
            return m
    raise AssertionError("no wall around the start")


def test_sizes_grow_with_difficulty() -> None:
    sizes = [TASK.generate(0, d).facts["rows"] for d in ("easy", "medium", "hard")]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3


def test_answer_is_bfs_optimal() -> None:
    for seed in range(20):
        inst = TASK.generate(seed, "medium")
        f = inst.facts
        dist = distances(tuple(f["start"]), _neighbours(f["grid"], f["rows"], f["cols"]))
        assert dist[tuple(f["goal"])] == len(inst.answer) == f["shortest_length"]


def test_any_shortest_path_accepted() -> None:
    """Loops make ties; a different path of optimal length must also pass."""
    found = 0
    for seed in range(60):
        inst = TASK.generate(seed, "hard")
        f = inst.facts
        nb = _neighbours(f["grid"], f["rows"], f["cols"])
        to_goal = distances(tuple(f["goal"]), nb)
        # walk greedily preferring moves in reversed order: another shortest path when ties exist
        cell, moves = tuple(f["start"]), ""
        while cell != tuple(f["goal"]):
            for m in "RLDU":
                nxt = (cell[0] + MOVES[m][0], cell[1] + MOVES[m][1])
                if nxt in to_goal and nxt in set(nb(cell)) and to_goal[nxt] == to_goal[cell] - 1:
                    cell, moves = nxt, moves + m
                    break
        assert TASK.check(moves, inst).correct
        found += moves != inst.answer
    assert found > 0


def test_near_misses() -> None:
    inst = TASK.generate(4, "medium")
    r, c = inst.facts["start"]
    wall = _blocked_move(inst, r, c)
    v = TASK.check(wall + inst.answer, inst)
    assert not v.correct and ("wall at step 1" in v.reason or "leaves the grid at step 1" in v.reason)
    first = inst.answer[0]
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}[first]
    longer = first + back + inst.answer
    v = TASK.check(longer, inst)
    assert not v.correct and "shortest has" in v.reason and 0 < v.score < 1
    v = TASK.check(inst.answer[:-1], inst)
    assert not v.correct and "not at the goal" in v.reason
    # the grid edge: start at a corner-adjacent edge by walking off from row 0 if possible
    edge = next(s for s in range(100) if TASK.generate(s, "easy").facts["start"][0] == 0)
    e = TASK.generate(edge, "easy")
    assert "leaves the grid at step 1" in TASK.check("U" + e.answer, e).reason


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("I am not sure where to go.", "no answer found"),
        ('{"path": "RRD', "truncated or malformed JSON"),
        ('{"path": "RRX"}', "no answer found"),
        ('{"path": [[0, 0], [2, 0]]}', "jumps"),
    ],
)
def test_parser_failures(reply: str, reason: str) -> None:
    inst = TASK.generate(1, "easy")
    parsed = TASK.parse(reply, inst)
    assert not parsed.ok and reason in parsed.error
    assert TASK.score(reply, inst).score == 0.0


def test_parser_accepts_model_styles() -> None:
    inst = TASK.generate(2, "medium")
    spaced = " ".join(inst.answer)
    words = ", ".join({"U": "up", "D": "down", "L": "left", "R": "right"}[m] for m in inst.answer)
    cells = [list(inst.facts["start"]), *TASK.steps(inst)]
    for reply in (
        f'```json\n{{"path": "{inst.answer}"}}\n```',
        f'{{"path": "UUUU"}} wait, no. {{"path": "{inst.answer}"}}',
        f"Thinking about it...\nFinal answer: {spaced}",
        f"Answer: {words}",
        f'{{"path": {cells}}}'.replace("(", "[").replace(")", "]"),
    ):
        assert TASK.score(reply, inst).correct, reply


def test_check_step_supports_shortest_prefixes_only() -> None:
    inst = TASK.generate(5, "medium")
    assert TASK.check_step(inst.answer[:4], inst)
    assert TASK.check_step(list(inst.answer[:4]), inst)
    first = inst.answer[0]
    assert not TASK.check_step(first + {"U": "D", "D": "U", "L": "R", "R": "L"}[first], inst)
