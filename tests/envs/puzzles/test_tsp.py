"""TSP: Held-Karp optimum against brute force, rotations/reversals accepted, near misses scored."""

from __future__ import annotations

import functools
import itertools
import math
import random

import numpy as np
import pytest
from scipy import ndimage

from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.tsp import MIN_GAP, ranked_tours, tie_gap, tour_length

TASK = make_task("tsp")


def test_optimum_matches_brute_force() -> None:
    for seed in range(5):
        inst = TASK.generate(seed, "medium")
        pts = inst.facts["points"]
        brute = min(tour_length(pts, [0, *p]) for p in itertools.permutations(range(1, len(pts))))
        assert inst.facts["optimal_length"] == pytest.approx(brute, abs=1e-9)


def test_sizes() -> None:
    assert [len(TASK.generate(0, d).facts["points"]) for d in ("easy", "medium", "hard")] == [5, 7, 10]


def test_rotation_reversal_and_near_miss() -> None:
    inst = TASK.generate(4)
    t = inst.answer
    assert TASK.check(t[3:] + t[:3], inst).correct
    assert TASK.check(t[::-1], inst).correct
    assert TASK.score(f"Tour: {' -> '.join(map(str, [*t, t[0]]))}", inst).correct
    swapped = list(t)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    v = TASK.check(swapped, inst)
    assert not v.correct and 0 < v.score < 1 and "optimal is" in v.reason


def test_check_step_exact() -> None:
    inst = TASK.generate(2)
    t = inst.answer
    assert TASK.check_step(t[:4], inst) and TASK.check_step(t[::-1][:4], inst)
    # an optimal tour uses only two edges at t[0]; most other first edges cannot be completed optimally
    assert not all(TASK.check_step([t[0], x], inst) for x in t[1:])
    assert not TASK.check_step([t[0], t[0]], inst)


@functools.cache
def _cycles(n: int) -> np.ndarray:
    """Every closed tour of n points once: 0 first, then orders whose second point is below the
    last (one of each reversal pair), as index rows [0, ..., 0]."""
    perms = np.array(list(itertools.permutations(range(1, n))), dtype=np.int8)
    perms = perms[perms[:, 0] < perms[:, -1]]
    zero = np.zeros((len(perms), 1), dtype=np.int8)
    return np.hstack([zero, perms, zero])


def _brute_lengths(points: list[list[int]]) -> np.ndarray:
    """Sorted lengths of all distinct cycles (not the same up to rotation or reversal)."""
    p = np.asarray(points, dtype=float)
    dist = np.sqrt(((p[:, None] - p[None]) ** 2).sum(axis=2))
    tours = _cycles(len(points))
    return np.sort(dist[tours[:, :-1], tours[:, 1:]].sum(axis=1))


@pytest.mark.parametrize(("difficulty", "seeds"), [("easy", 60), ("medium", 40), ("hard", 15)])
def test_optimum_is_clear_cut_by_brute_force(difficulty: str, seeds: int) -> None:
    """Brute force over every distinct cycle: the answer is the optimum and every other cycle is
    at least MIN_GAP (1%) longer, so the optimum can be told apart on the plot."""
    for seed in range(seeds):
        inst = TASK.generate(seed, difficulty)
        pts = inst.facts["points"]
        lengths = _brute_lengths(pts)
        assert inst.facts["optimal_length"] == pytest.approx(lengths[0], abs=1e-9)
        assert tour_length(pts, inst.answer) == pytest.approx(lengths[0], abs=1e-9)
        assert lengths[1] >= (1 + MIN_GAP) * lengths[0], (seed, lengths[:2])


def test_ranked_tours_against_brute_force_including_ties() -> None:
    rng = random.Random(5)
    for _ in range(20):
        pts = [[rng.randint(0, 100), rng.randint(0, 100)] for _ in range(rng.randint(5, 8))]
        lengths = _brute_lengths(pts)
        ranked = ranked_tours(pts, 3)
        assert [x for x, _ in ranked] == pytest.approx([lengths[0], lengths[0], lengths[1]], abs=1e-9)
        assert all(tour_length(pts, order) == pytest.approx(x, abs=1e-9) for x, order in ranked)
        assert tie_gap(pts) == pytest.approx(lengths[1] / lengths[0] - 1, abs=1e-12)
    # a square with its centre: the centre joins any of 4 sides, 4 different optimal cycles
    assert tie_gap([[0, 0], [20, 0], [20, 20], [0, 20], [10, 10]]) == pytest.approx(0, abs=1e-12)


def _red_dots(img: np.ndarray) -> list[tuple[float, float]]:
    red = (img[..., 0] > 150) & (img[..., 1] < 100) & (img[..., 2] < 100)
    labels, count = ndimage.label(red)
    centres = ndimage.center_of_mass(red, labels, range(1, count + 1))
    return [(float(x), float(y)) for y, x in centres]


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_image_matches_facts(difficulty: str) -> None:
    """Red dots read back from the pixels sit at the documented scale (pixel = 10 + 2.2 * unit,
    x to the right, y down), one per fact point, each with a dark label to its right (caught:
    x and y swapped)."""
    for seed in range(10):
        inst = TASK.generate(seed, difficulty)
        img = inst.image.astype(int)
        assert img.shape == (240, 240, 3)
        dots = _red_dots(img)
        pts = inst.facts["points"]
        assert len(dots) == len(pts)
        for x, y in pts:
            px, py = 10 + 2.2 * x, 10 + 2.2 * y
            assert sum(math.hypot(dx - px, dy - py) < 1.5 for dx, dy in dots) == 1, (seed, x, y)
            label = img[int(py) - 8 : int(py) + 8, int(px) + 5 : int(px) + 22]
            assert (label.max(axis=2) < 100).sum() >= 5, "no label next to the dot"
