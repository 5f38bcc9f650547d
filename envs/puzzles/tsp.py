"""Travelling salesman on plotted points: give the order of a shortest closed tour.

Points sit on an integer 0..100 lattice so the facts are exact; the optimum comes from
Held-Karp dynamic programming (n <= 10 keeps it at a few ms). Score = optimum / tour length.
The optimum is clear-cut: point sets whose second-best cycle (not a rotation or reversal of
the optimal one) is within ``MIN_GAP`` of the optimum are redrawn from the same seeded rng.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from embodia.envs.puzzles import core

SIZES: dict[str, int] = {"easy": 5, "medium": 7, "hard": 10}
TOL = 1e-6
MIN_GAP = 0.01
"""Every other cycle is at least 1% longer than the optimal tour. Near-ties (down to 1e-6 of
the optimum) are unresolvable on a 240-pixel plot; a 1% margin is ~6 px of total tour length,
the least a careful solver measuring the plot can tell apart. Costs ~1/3 redraws at hard."""


def tour_length(points: Sequence[Sequence[int]], order: Sequence[int]) -> float:
    return sum(math.dist(points[a], points[b]) for a, b in zip(order, [*order[1:], order[0]], strict=True))


def best_path(dist: list[list[float]], first: int, last: int, rest: Sequence[int]) -> float:
    """Shortest path from ``last`` through all of ``rest`` ending at ``first`` (Held-Karp)."""
    rest = list(rest)
    if not rest:
        return dist[last][first]
    m = len(rest)

    @functools.cache
    def dp(mask: int, j: int) -> float:  # min cost from `last` visiting mask, ending at rest[j]
        if mask == 1 << j:
            return dist[last][rest[j]]
        prev = mask ^ (1 << j)
        return min(dp(prev, k) + dist[rest[k]][rest[j]] for k in range(m) if prev >> k & 1)

    full = (1 << m) - 1
    return min(dp(full, j) + dist[rest[j]][first] for j in range(m))


def ranked_tours(points: Sequence[Sequence[int]], keep: int = 3) -> list[tuple[float, list[int]]]:
    """The ``keep`` shortest tours starting at point 0, shortest first, as (length, order).

    Held-Karp keeping the ``keep`` shortest partial paths per state (a k-best DP: the k best
    paths into a state extend the k best of its predecessors). Tours are directed, so every
    cycle appears twice (once per direction): entries 0 and 1 are the optimal cycle both ways
    and entry 2 has the length of the best different cycle (the optimum again when two cycles
    tie). Equal lengths go to the lower last point, then the lower rank, so entry 0 is the
    order plain Held-Karp reconstruction gives.
    """
    n = len(points)
    dist = [[math.dist(a, b) for b in points] for a in points]
    cols = [[row[j] for row in dist] for j in range(n)]
    # best[(mask, j)]: up to `keep` (length, previous point, its rank) of paths 0 -> mask -> j
    best: dict[tuple[int, int], list[tuple[float, int, int]]] = {}
    for j in range(1, n):
        best[(1 << j, j)] = [(dist[0][j], 0, 0)]
    for mask in range(2, 1 << n, 2):  # predecessors (mask minus one point) are smaller masks
        if mask & (mask - 1) == 0:
            continue
        for j in range(1, n):
            if mask >> j & 1:
                prev, dj = mask ^ (1 << j), cols[j]
                cand = [
                    (c + dj[k], k, r)
                    for k in range(1, n)
                    if prev >> k & 1
                    for r, (c, _, _) in enumerate(best[(prev, k)])
                ]
                cand.sort()
                best[(mask, j)] = cand[:keep]
    full = ((1 << n) - 1) ^ 1
    ends = sorted((c + dist[j][0], j, r) for j in range(1, n) for r, (c, _, _) in enumerate(best[(full, j)]))
    out = []
    for length, last, rank in ends[:keep]:
        order, mask, j, r = [], full, last, rank
        while j:
            order.append(j)
            _, k, r = best[(mask, j)][r]
            mask, j = mask ^ (1 << j), k
        out.append((length, [0, *order[::-1]]))
    return out


def solve(points: Sequence[Sequence[int]]) -> tuple[float, list[int]]:
    """Optimal tour starting at point 0, by Held-Karp with path reconstruction."""
    return ranked_tours(points, 1)[0]


def tie_gap(points: Sequence[Sequence[int]]) -> float:
    """Relative excess of the best tour that is a different cycle from the optimal one (not the
    same up to rotation and reversal) over the optimum: 0 when two optimal cycles tie."""
    ranked = ranked_tours(points, 3)
    return ranked[2][0] / ranked[0][0] - 1


class TSPTask(core.PuzzleTask):
    """Numbered points on a plot; answer = the visiting order of a shortest closed tour."""

    name = "tsp"

    def generate(self, seed: int, difficulty: str = "medium") -> core.PuzzleInstance:
        seed, rng = self._seeded(seed, difficulty)
        n = SIZES[difficulty]
        while True:
            points: list[list[int]] = []
            while len(points) < n:  # keep points apart so labels stay legible
                p = [rng.randint(5, 95), rng.randint(5, 95)]
                if all(math.dist(p, q) >= 12 for q in points):
                    points.append(p)
            ranked = ranked_tours(points, 3)
            if ranked[2][0] >= (1 + MIN_GAP) * ranked[0][0]:
                break  # otherwise another cycle is nearly as short: redraw the points
        best, order = ranked[0]
        prompt = (
            f"The image shows {n} numbered points (0-{n - 1}). Give the order in which to visit every "
            "point exactly once, returning to the first, so that the total straight-line length is as "
            "short as possible. " + core.answer_format_note('{"tour": [0, 3, 1, 2]}')
        )
        facts = {"points": points, "optimal_length": best, "legend": "points are [x, y] on 0..100, y down"}
        return self._instance(seed, difficulty, prompt, order, facts)

    def render(self, instance: core.PuzzleInstance) -> np.ndarray:
        size, scale = 240, 2.2
        img = Image.new("RGB", (size, size), (255, 255, 255))
        draw = ImageDraw.Draw(img)
        for i, (x, y) in enumerate(instance.facts["points"]):
            cx, cy = 10 + x * scale, 10 + y * scale
            draw.ellipse([cx - 4, cy - 4, cx + 4, cy + 4], fill=(200, 40, 40))
            draw.text((cx + 6, cy - 6), str(i), fill=(0, 0, 0), font_size=12)
        return np.asarray(img)

    def parse(self, reply: str, instance: core.PuzzleInstance) -> core.Parsed:
        raw = core.find_answer(reply, ("tour", "order", "answer"))
        if not raw.ok:
            return raw
        parsed = core.int_sequence(raw.value, "point")
        if not parsed.ok:
            return parsed
        order = parsed.value
        if len(order) > 1 and order[0] == order[-1]:
            order = order[:-1]  # a closed tour written with the start repeated
        n = len(instance.facts["points"])
        bad = [v for v in order if not 0 <= v < n]
        if bad:
            return core.Parsed.fail(f"point {bad[0]} does not exist (points are 0-{n - 1})")
        dup = [v for v in set(order) if order.count(v) > 1]
        if dup:
            return core.Parsed.fail(f"point {min(dup)} is visited more than once")
        if len(order) != n:
            missing = sorted(set(range(n)) - set(order))
            return core.Parsed.fail(f"tour misses point {missing[0]}")
        return core.Parsed(order)

    def check(self, value: Any, instance: core.PuzzleInstance) -> core.Verdict:
        points = instance.facts["points"]
        if not core.is_permutation(value, len(points)):
            return core.Verdict(False, 0.0, "answer is not a permutation of the points")
        length, best = tour_length(points, value), instance.facts["optimal_length"]
        if length <= best + TOL:
            return core.Verdict(True, 1.0, f"optimal tour (length {best:.3f})")
        return core.Verdict(False, best / length, f"tour length {length:.3f}; optimal is {best:.3f}")

    step_format = (
        "state the tour so far as a JSON list of point numbers, e.g. [0, 3], and the final answer as "
        "the JSON object asked for; write coordinates as (x, y), never as JSON lists"
    )

    def text(self, instance: core.PuzzleInstance) -> str:
        return "Points as (x, y), y down:\n" + "\n".join(
            f"point {i}: ({x}, {y})" for i, (x, y) in enumerate(instance.facts["points"])
        )

    def steps(self, instance: core.PuzzleInstance) -> list[Any]:
        return list(instance.answer)

    def check_step(self, prefix: Sequence[Any], instance: core.PuzzleInstance) -> bool:
        """A partial tour is consistent iff its best completion is still optimal (exact DP)."""
        points = instance.facts["points"]
        n = len(points)
        try:
            order = [int(v) for v in prefix]
        except (TypeError, ValueError):
            return False
        if len(set(order)) != len(order) or any(not 0 <= v < n for v in order):
            return False
        if len(order) <= 1:
            return True
        dist = [[math.dist(a, b) for b in points] for a in points]
        done = sum(dist[a][b] for a, b in zip(order, order[1:], strict=False))
        rest = [v for v in range(n) if v not in order]
        total = done + best_path(dist, order[0], order[-1], rest)
        return total <= instance.facts["optimal_length"] + TOL
