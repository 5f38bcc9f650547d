"""Maze: BFS optimum, any shortest path accepted, walls / grid edges / detours rejected."""

from __future__ import annotations

import collections

import numpy as np
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


def _image_blocks(inst: PuzzleInstance) -> np.ndarray:
    """The rendered maze read back as one RGB colour per block (each block a uniform square)."""
    img, nb = inst.image, 2 * inst.facts["rows"] + 1
    px = img.shape[0] // nb
    assert img.shape == (nb * px, nb * px, 3) and px >= 1
    blocks = img.reshape(nb, px, nb, px, 3)
    assert (blocks == blocks[:, :1, :, :1]).all(), "blocks are not uniform squares"
    return blocks[:, 0, :, 0].astype(int)


def _cell_of(blocks: np.ndarray, pick: np.ndarray) -> list[int]:
    ys, xs = np.nonzero(pick)
    assert len(ys) == 1, f"{len(ys)} blocks of that colour"
    assert ys[0] % 2 == 1 and xs[0] % 2 == 1, "a marker sits on a wall block"
    return [int(ys[0]) // 2, int(xs[0]) // 2]


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_image_matches_facts(difficulty: str) -> None:
    """Read back from the pixels: dark blocks are exactly the walls, the one green block is the
    start, the one red block is the goal (caught: colours swapped, rows/cols transposed)."""
    for seed in range(15):
        inst = TASK.generate(seed, difficulty)
        f, blocks = inst.facts, _image_blocks(inst)
        r, g, b = blocks[..., 0], blocks[..., 1], blocks[..., 2]
        dark = blocks.max(axis=2) < 100
        assert dark.tolist() == [[ch == "#" for ch in row] for row in f["grid"]]
        assert _cell_of(blocks, (g > r + 60) & (g > b + 60)) == f["start"]
        assert _cell_of(blocks, (r > g + 100) & (r > b + 100)) == f["goal"]


def _image_bfs(blocks: np.ndarray) -> int:
    """Shortest start-goal path in cell moves, found on the picture alone: BFS over open blocks
    from the green block to the red block (two blocks per move)."""
    r, g, b = blocks[..., 0], blocks[..., 1], blocks[..., 2]
    (sy,), (sx,) = np.nonzero((g > r + 60) & (g > b + 60))
    (gy,), (gx,) = np.nonzero((r > g + 100) & (r > b + 100))
    open_ = blocks.max(axis=2) >= 100
    dist = {(sy, sx): 0}
    queue = collections.deque([(sy, sx)])
    while queue:
        y, x = queue.popleft()
        for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
            inside = 0 <= ny < open_.shape[0] and 0 <= nx < open_.shape[1]
            if inside and open_[ny, nx] and (ny, nx) not in dist:
                dist[(ny, nx)] = dist[(y, x)] + 1
                queue.append((ny, nx))
    steps = dist[(gy, gx)]
    assert steps % 2 == 0
    return steps // 2


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_shortest_length_confirmed_on_the_image(difficulty: str) -> None:
    """An oracle independent of the module's BFS: the picture's own shortest path length."""
    for seed in range(15):
        inst = TASK.generate(seed, difficulty)
        assert _image_bfs(_image_blocks(inst)) == inst.facts["shortest_length"] == len(inst.answer)
