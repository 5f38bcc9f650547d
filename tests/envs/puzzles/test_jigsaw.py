"""Jigsaw: permutation answer, swapped tiles named, parser failure reasons."""

from __future__ import annotations

import pytest

from embodia.envs.puzzles import make_task

TASK = make_task("jigsaw")


def test_sizes_and_shuffle() -> None:
    ks = [TASK.generate(0, d).facts["k"] for d in ("easy", "medium", "hard")]
    assert ks == [2, 3, 4]
    for seed in range(20):
        perm = TASK.generate(seed, "easy").answer
        assert perm != sorted(perm)


def test_tiles_really_moved() -> None:
    inst = TASK.generate(2)
    f = inst.facts
    t, k = f["tile_px"], f["k"]
    from embodia.envs.puzzles.jigsaw import picture

    src = picture(f["picture_seed"], k * t)
    tile = inst.answer[0]
    assert (
        inst.image[:t, :t] == src[(tile // k) * t : (tile // k + 1) * t, (tile % k) * t : (tile % k + 1) * t]
    ).all()


def test_near_misses() -> None:
    inst = TASK.generate(5)
    swapped = list(inst.answer)
    swapped[1], swapped[4] = swapped[4], swapped[1]
    v = TASK.check(swapped, inst)
    assert not v.correct and v.reason == "tiles at positions 1 and 4 are swapped"
    assert v.score == pytest.approx(1 - 2 / 9)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("The picture shows a sunset.", "no answer found"),
        ('{"permutation": [1, 2', "truncated or malformed JSON"),
        ('{"permutation": [0, 0, 1, 2, 3, 4, 5, 6, 7]}', "appears more than once"),
        ('{"permutation": [0, 1, 2, 3, 4, 5, 6, 7, 9]}', "tile 9 does not exist"),
    ],
)
def test_parser_failures(reply: str, reason: str) -> None:
    parsed = TASK.parse(reply, TASK.generate(0))
    assert not parsed.ok and reason in parsed.error


def test_parser_styles() -> None:
    inst = TASK.generate(0)
    p = inst.answer
    rows = [p[i : i + 3] for i in range(0, 9, 3)]
    for reply in (f'```json\n{{"permutation": {p}}}\n```', f"Answer: {' '.join(map(str, p))}", f"{rows}"):
        assert TASK.score(reply, inst).correct, reply
