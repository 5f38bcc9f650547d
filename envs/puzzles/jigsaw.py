"""Jigsaw: a procedural picture is cut into k x k tiles and shuffled; recover the permutation.

Tiles are numbered row by row. The answer lists, for each position of the shuffled image
(row by row), the number of the original tile shown there. The picture is drawn from a seed
in the facts (smooth gradients plus shapes), so tile edges carry the continuity cues a solver
needs and records re-render exactly. A picture in which two tiles look alike would make a
swapped answer visually identical to the truth, so generation redraws the picture seed (from
the same seeded rng) until every pair of tiles differs clearly (see ``tiles_distinct``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles import core

SIZES: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4}
SIDE = 240
DISTINCT_LEVELS = 24
"""Two tiles differ at a pixel when some channel differs by more than this many grey levels."""
DISTINCT_FRACTION = 0.05
"""Every pair of tiles differs at no less than this fraction of their pixels (180 of the 3,600
pixels of a hard tile): a swap of any two tiles is then plainly visible."""


@functools.cache
def _unit_grid(side: int) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    yy.setflags(write=False)
    xx.setflags(write=False)
    return yy, xx


def picture(seed: int, side: int = SIDE) -> np.ndarray:
    """A deterministic RGB picture: a two-colour gradient with random discs and bars.

    Drawn channel by channel (channel-first) for speed; the arithmetic is the same per pixel,
    so pictures are bit-identical to the original interleaved drawing."""
    rng = np.random.default_rng(seed)
    yy, xx = _unit_grid(side)
    angle = rng.uniform(0, 2 * np.pi)
    t = np.clip(0.5 + (np.cos(angle) * (xx - 0.5) + np.sin(angle) * (yy - 0.5)), 0, 1)
    a, b = rng.uniform(30, 225, 3), rng.uniform(30, 225, 3)
    u = 1 - t
    img = np.empty((3, side, side))
    for ch in range(3):
        np.add(a[ch] * u, b[ch] * t, out=img[ch])
    for _ in range(6):
        color = rng.uniform(0, 255, 3)
        cx, cy, r = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.08, 0.25)
        mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        for ch in range(3):
            img[ch][mask] = color[ch]
    for _ in range(3):
        color = rng.uniform(0, 255, 3)
        if rng.random() < 0.5:
            y0 = rng.uniform(0, 0.9)
            mask = (yy > y0) & (yy < y0 + 0.05)
        else:
            x0 = rng.uniform(0, 0.9)
            mask = (xx > x0) & (xx < x0 + 0.05)
        for ch in range(3):
            img[ch][mask] = color[ch]
    return np.ascontiguousarray(img.astype(np.uint8).transpose(1, 2, 0))


def tiles(image: np.ndarray, k: int) -> np.ndarray:
    """The ``k * k`` tiles of a square image, row by row: shape (k*k, t, t, channels)."""
    t = image.shape[0] // k
    return image[: k * t, : k * t].reshape(k, t, k, t, -1).swapaxes(1, 2).reshape(k * k, t, t, -1)


def tiles_distinct(image: np.ndarray, k: int) -> bool:
    """Whether every pair of tiles differs clearly: on at least ``DISTINCT_FRACTION`` of the
    pixels, some channel differs by more than ``DISTINCT_LEVELS`` grey levels."""
    n = k * k
    # channel-first (tile, channel, pixel) so the per-pixel "any channel" reduction is fast
    flat = np.ascontiguousarray(tiles(image, k).reshape(n, -1, image.shape[-1]).transpose(0, 2, 1))
    need = DISTINCT_FRACTION * flat.shape[2]
    for i in range(n - 1):
        a, b = flat[i], flat[i + 1 :]
        diff = np.maximum(a, b)
        diff -= np.minimum(a, b)  # |a - b| without leaving uint8
        far = (diff > DISTINCT_LEVELS).any(axis=1)
        if (np.count_nonzero(far, axis=1) < need).any():
            return False
    return True


class JigsawTask(core.PuzzleTask):
    """Answer = list of original tile numbers at each shuffled position (row by row, 0-based)."""

    name = "jigsaw"

    def generate(self, seed: int, difficulty: str = "medium") -> core.PuzzleInstance:
        seed, rng = self._seeded(seed, difficulty)
        k = SIZES[difficulty]
        perm = list(range(k * k))
        while perm == sorted(perm):
            rng.shuffle(perm)
        prompt = (
            f"The image is a picture cut into a {k}x{k} grid of tiles that were shuffled. Number the tiles "
            f"of the original picture 0-{k * k - 1} row by row. For each position of the shuffled image, "
            "row by row, give the number of the original tile shown there. "
            + core.answer_format_note('{"permutation": [2, 0, 3, 1]}')
        )
        picture_seed = rng.randrange(2**31)
        while not tiles_distinct(picture(picture_seed, k * (SIDE // k)), k):
            picture_seed = rng.randrange(2**31)  # two tiles look alike: a swap would be invisible
        facts = {"k": k, "picture_seed": picture_seed, "perm": list(perm), "tile_px": SIDE // k}
        return self._instance(seed, difficulty, prompt, perm, facts)

    def render(self, instance: core.PuzzleInstance) -> np.ndarray:
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

    def parse(self, reply: str, instance: core.PuzzleInstance) -> core.Parsed:
        raw = core.find_answer(reply, ("permutation", "perm", "answer", "tiles"))
        if not raw.ok:
            return raw
        k = instance.facts["k"]
        n = k * k
        parsed = core.int_sequence(raw.value, "tile")
        if isinstance(raw.value, str) and (not parsed.ok or len(parsed.value) != n):
            grid = _grid_rows(reply, k)  # the k x k grid written as k lines of k numbers
            if grid is not None:
                parsed = core.Parsed(grid)
        if not parsed.ok:
            return parsed
        perm = parsed.value
        if len(perm) != n:
            return core.Parsed.fail(f"expected {n} tile numbers, found {len(perm)}")
        bad = [v for v in perm if not 0 <= v < n]
        if bad:
            return core.Parsed.fail(f"tile {bad[0]} does not exist (tiles are 0-{n - 1})")
        dup = sorted(v for v in set(perm) if perm.count(v) > 1)
        if dup:
            return core.Parsed.fail(f"not a permutation: tile {dup[0]} appears more than once")
        return core.Parsed(perm)

    def check(self, value: Any, instance: core.PuzzleInstance) -> core.Verdict:
        truth = instance.answer
        if not core.is_permutation(value, len(truth)):
            return core.Verdict(False, 0.0, "answer is not a permutation of the tiles")
        wrong = [p for p, (a, b) in enumerate(zip(value, truth, strict=True)) if a != b]
        score = 1 - len(wrong) / len(truth)
        if not wrong:
            return core.Verdict(True, 1.0, "all tiles placed")
        if len(wrong) == 2:
            return core.Verdict(False, score, f"tiles at positions {wrong[0]} and {wrong[1]} are swapped")
        return core.Verdict(
            False, score, f"{len(wrong)} of {len(truth)} positions wrong, first at position {wrong[0]}"
        )

    def steps(self, instance: core.PuzzleInstance) -> list[Any]:
        """The original tile number at each position, in position order."""
        return list(instance.answer)

    def check_step(self, prefix: Sequence[Any], instance: core.PuzzleInstance) -> bool:
        return list(prefix) == list(instance.answer[: len(prefix)])


def _grid_rows(reply: str, k: int) -> list[int] | None:
    """The last ``k`` consecutive lines that each hold exactly ``k`` numbers, flattened."""
    numeric = re.compile(r"[\s\d,;|\[\]]+")
    block: list[list[str]] = []  # the rows read so far, from the last line up
    for line in reversed(reply.splitlines()):
        row = re.findall(r"\d+", line) if numeric.fullmatch(line) else []
        if len(row) == k and all(len(t) <= core.MAX_DIGITS for t in row):
            block.append(row)
            if len(block) == k:
                return [int(t) for r in reversed(block) for t in r]
        elif block:
            block = []
    return None
