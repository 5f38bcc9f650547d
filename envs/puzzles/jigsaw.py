"""Jigsaw: a procedural picture is cut into k x k tiles and shuffled; recover the permutation.

Tiles are numbered row by row. The answer lists, for each position of the shuffled image
(row by row), the number of the original tile shown there. The picture is drawn from a seed
in the facts (smooth gradients plus shapes), so tile edges carry the continuity cues a solver
needs and records re-render exactly.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles.core import (
    Parsed,
    PuzzleInstance,
    PuzzleTask,
    Verdict,
    answer_format_note,
    as_int,
    find_answer,
    int_sequence,
)

SIZES: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4}
SIDE = 240


def picture(seed: int, side: int = SIDE) -> np.ndarray:
    """A deterministic RGB picture: a two-colour gradient with random discs and bars."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    angle = rng.uniform(0, 2 * np.pi)
    t = np.clip(0.5 + (np.cos(angle) * (xx - 0.5) + np.sin(angle) * (yy - 0.5)), 0, 1)[..., None]
    a, b = rng.uniform(30, 225, 3), rng.uniform(30, 225, 3)
    img = a * (1 - t) + b * t
    for _ in range(6):
        color = rng.uniform(0, 255, 3)
        cx, cy, r = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.08, 0.25)
        img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = color
    for _ in range(3):
        color = rng.uniform(0, 255, 3)
        if rng.random() < 0.5:
            y0 = rng.uniform(0, 0.9)
            img[(yy > y0) & (yy < y0 + 0.05)] = color
        else:
            x0 = rng.uniform(0, 0.9)
            img[(xx > x0) & (xx < x0 + 0.05)] = color
    return img.astype(np.uint8)


class JigsawTask(PuzzleTask):
    """Answer = list of original tile numbers at each shuffled position (row by row, 0-based)."""

    name = "jigsaw"

    def generate(self, seed: int, difficulty: str = "medium") -> PuzzleInstance:
        seed = self._seed(seed)
        k = SIZES[self._difficulty(difficulty)]
        rng = random.Random(f"jigsaw/{difficulty}/{seed}")
        perm = list(range(k * k))
        while perm == sorted(perm):
            rng.shuffle(perm)
        prompt = (
            f"The image is a picture cut into a {k}x{k} grid of tiles that were shuffled. Number the tiles "
            f"of the original picture 0-{k * k - 1} row by row. For each position of the shuffled image, "
            "row by row, give the number of the original tile shown there. "
            + answer_format_note('{"permutation": [2, 0, 3, 1]}')
        )
        facts = {"k": k, "picture_seed": rng.randrange(2**31), "perm": perm, "tile_px": SIDE // k}
        return self._instance(seed, difficulty, prompt, perm, facts)

    def render(self, instance: PuzzleInstance) -> np.ndarray:
        f = instance.facts
        k, t = f["k"], f["tile_px"]
        src = picture(f["picture_seed"], k * t)
        out = np.empty_like(src)
        for pos, tile in enumerate(f["perm"]):
            pr, pc, tr, tc = pos // k, pos % k, tile // k, tile % k
            out[pr * t : (pr + 1) * t, pc * t : (pc + 1) * t] = src[
                tr * t : (tr + 1) * t, tc * t : (tc + 1) * t
            ]
        return out

    def parse(self, reply: str, instance: PuzzleInstance) -> Parsed:
        raw = find_answer(reply, ("permutation", "perm", "answer", "tiles"))
        if not raw.ok:
            return raw
        k = instance.facts["k"]
        n = k * k
        parsed = int_sequence(raw.value, "tile")
        if isinstance(raw.value, str) and (not parsed.ok or len(parsed.value) != n):
            grid = _grid_rows(reply, k)  # the k x k grid written as k lines of k numbers
            if grid is not None:
                parsed = Parsed(grid)
        if not parsed.ok:
            return parsed
        perm = parsed.value
        if len(perm) != n:
            return Parsed.fail(f"expected {n} tile numbers, found {len(perm)}")
        bad = [v for v in perm if not 0 <= v < n]
        if bad:
            return Parsed.fail(f"tile {bad[0]} does not exist (tiles are 0-{n - 1})")
        dup = sorted(v for v in set(perm) if perm.count(v) > 1)
        if dup:
            return Parsed.fail(f"not a permutation: tile {dup[0]} appears more than once")
        return Parsed(perm)

    def check(self, value: Any, instance: PuzzleInstance) -> Verdict:
        truth = instance.answer
        if (
            not isinstance(value, list)
            or any(as_int(v) != v for v in value)
            or sorted(value) != list(range(len(truth)))
        ):
            return Verdict(False, 0.0, "answer is not a permutation of the tiles")
        wrong = [p for p, (a, b) in enumerate(zip(value, truth, strict=True)) if a != b]
        score = 1 - len(wrong) / len(truth)
        if not wrong:
            return Verdict(True, 1.0, "all tiles placed")
        if len(wrong) == 2:
            return Verdict(False, score, f"tiles at positions {wrong[0]} and {wrong[1]} are swapped")
        return Verdict(
            False, score, f"{len(wrong)} of {len(truth)} positions wrong, first at position {wrong[0]}"
        )

    def steps(self, instance: PuzzleInstance) -> list[Any]:
        """The original tile number at each position, in position order."""
        return list(instance.answer)

    def check_step(self, prefix: Sequence[Any], instance: PuzzleInstance) -> bool:
        return list(prefix) == list(instance.answer[: len(prefix)])


def _grid_rows(reply: str, k: int) -> list[int] | None:
    """The last ``k`` consecutive lines that each hold exactly ``k`` numbers, flattened."""
    numeric = re.compile(r"[\s\d,;|\[\]]+")
    rows = [re.findall(r"\d+", ln) if numeric.fullmatch(ln) else [] for ln in reply.splitlines()]
    for end in range(len(rows), k - 1, -1):
        block = rows[end - k : end]
        if all(len(r) == k for r in block):
            return [int(t) for r in block for t in r]
    return None

