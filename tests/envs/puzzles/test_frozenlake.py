"""FrozenLake: any valid route accepted with optimality reported; holes and edges rejected."""

from __future__ import annotations

import pytest

from embodia.envs.puzzles import make_task
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


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("", "empty reply"), ("Walk carefully on the ice.", "no answer found"), ('{"moves": "DD', "truncated")],
)
def test_parser_failures(reply: str, reason: str) -> None:
    parsed = TASK.parse(reply, TASK.generate(0))
    assert not parsed.ok and reason in parsed.error


def test_check_step() -> None:
    inst = TASK.generate(3)
    assert TASK.check_step(inst.answer[:2], inst)
    rows, (r, c) = inst.facts["rows"], inst.facts["start"]
    off = next(
        m for m, (dr, dc) in MOVES.items() if not (0 <= r + dr < len(rows) and 0 <= c + dc < len(rows))
    )
    assert not TASK.check_step(off, inst)
