"""Puzzle answer parsers against the replies language models actually write: markdown, labels,
prose, arrows, Python-quoted objects, row labels, numbered lists, coordinates in the
reasoning; and malformed ones, which fail with a reason instead of raising."""

from __future__ import annotations

import json

import pytest

from embodia.envs.puzzles import make_task

MAZE = make_task("maze")
M = MAZE.generate(2, "easy")
PATH = M.answer
SPACED = " ".join(PATH)
ARROWS = {"U": "↑", "D": "↓", "L": "←", "R": "→"}
WORDS = {"U": "up", "D": "down", "L": "left", "R": "right"}
START, GOAL = M.facts["start"], M.facts["goal"]

MAZE_CORRECT = [
    json.dumps({"path": PATH}),
    f"```json\n{json.dumps({'path': PATH})}\n```",
    f'{{"path": "{PATH}"}}\nExplanation: from {START} I go around the wall to reach the goal at {GOAL}.',
    f"I start at {START} and the goal is at {GOAL}.\nFinal answer: {PATH}",
    f"**Final Answer:** {PATH}",
    f"**Answer**: {PATH}",
    f"Final answer: **{PATH}**",
    f"The answer is: {PATH}",
    f"So the shortest path is {SPACED}.",
    f"Path: {PATH}",
    f"Moves: {SPACED}",
    " → ".join(PATH),
    " ".join(ARROWS[m] for m in PATH),
    f"\\boxed{{{PATH}}}",
    f"{{'path': '{PATH}'}}",
    f'{{"path": "{PATH}",}}',
    json.dumps({"answer": {"path": PATH}}),
    "\n".join(f"{i}. {WORDS[m]}" for i, m in enumerate(PATH, 1)),
    f"Reasoning: the set {{1, 2}} of dead ends is avoided.\n{PATH}",
    f'{json.dumps({"path": PATH})}\n{{"confidence": "high"}}',
    f"<answer>{PATH.lower()}</answer>",
    ", ".join(WORDS[m] for m in PATH),
    json.dumps({"path": list(PATH)}),
]


@pytest.mark.parametrize("reply", MAZE_CORRECT)
def test_maze_reads_a_correct_path_however_it_is_written(reply: str) -> None:
    parsed = MAZE.parse(reply, M)
    assert parsed.ok and parsed.value == PATH, (reply, parsed)
    assert MAZE.score(reply, M).correct


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        (f'{{"path": "{PATH[:4]}', "truncated or malformed JSON"),
        ('{"path": [["a", "b"], ["c", "d"]]}', "is not a [row, col] pair of integers"),
        ('{"path": [[null, 1], [0, 1]]}', "is not a [row, col] pair of integers"),
        ('{"path": "RXD"}', "'RXD' is not a move"),
        ('{"path": 42}', "not a move string"),
        ("I am not sure how to solve this maze.", "is not a move"),
    ],
)
def test_maze_fails_malformed_replies_with_a_reason(reply: str, reason: str) -> None:
    parsed = MAZE.parse(reply, M)
    assert not parsed.ok and reason in (parsed.error or ""), parsed
    assert not MAZE.score(reply, M).correct


def test_frozenlake_ignores_the_list_of_holes_in_the_reasoning() -> None:
    lake = make_task("frozenlake")
    f = lake.generate(0, "easy")
    reply = f"The holes are at {json.dumps(f.facts['holes'])}. I avoid them.\nFinal answer: {f.answer}"
    assert lake.parse(reply, f).value == f.answer and lake.score(reply, f).correct


def test_grid_step_checks_refuse_junk_instead_of_raising() -> None:
    for prefix in ([None], [5], [[0.5, 1]], ["x"], [[True, 0]]):
        assert MAZE.check_step(prefix, M) is False


SUDOKU = make_task("sudoku")
S = SUDOKU.generate(0, "easy")
ROWS = [S.answer[9 * r : 9 * r + 9] for r in range(9)]


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps({"solution": S.answer}),
        json.dumps({"solution": S.answer}) + "\nFor example, cell [1, 2] is " + S.answer[1] + ".",
        json.dumps({"grid": [[int(d) for d in row] for row in ROWS]}),
        "\n".join(f"Row {r + 1}: " + " ".join(ROWS[r]) for r in range(9)),
        "\n".join(f"R{r + 1}: " + ROWS[r] for r in range(9)),
        "\n".join(f"{r + 1}. " + ROWS[r] for r in range(9)),
        "Final grid:\n"
        + "\n".join(" ".join(x[:3]) + " | " + " ".join(x[3:6]) + " | " + " ".join(x[6:]) for x in ROWS),
        f"**Answer:** {S.answer}",
        f"{{'solution': '{S.answer}'}}",
    ],
)
def test_sudoku_reads_a_solved_grid_however_it_is_written(reply: str) -> None:
    parsed = SUDOKU.parse(reply, S)
    assert parsed.ok and parsed.value == S.answer, (reply, parsed)


def test_sudoku_failures_and_steps_need_integers() -> None:
    assert "expected 81 digits, found 80" in (
        SUDOKU.parse(json.dumps({"solution": S.answer[:80]}), S).error or ""
    )
    holed = S.answer[:10] + "0" + S.answer[11:]
    assert "digit 0 at" in (SUDOKU.parse(json.dumps({"solution": holed}), S).error or "")
    r, c, d = SUDOKU.steps(S)[0]
    assert SUDOKU.check_step([[r, c, d]], S)
    assert not SUDOKU.check_step([[r, c, d + 0.7]], S)
    assert not SUDOKU.check_step([str(r) + str(c) + str(d)], S)
    assert not SUDOKU.check_step([[r, c]], S)


JIGSAW = make_task("jigsaw")
J = JIGSAW.generate(0, "medium")
K = J.facts["k"]
PERM = J.answer


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps({"permutation": PERM}),
        json.dumps({"permutation": [PERM[r * K : r * K + K] for r in range(K)]}),
        "\n".join(" ".join(map(str, PERM[r * K : r * K + K])) for r in range(K)),
        f"The {K}x{K} grid, row by row: " + " ".join(map(str, PERM)),
        json.dumps({"permutation": PERM}) + "\nTiles [4] and [5] were hard to tell apart.",
        "Answer: " + ", ".join(map(str, PERM)),
    ],
)
def test_jigsaw_reads_a_permutation_however_it_is_written(reply: str) -> None:
    parsed = JIGSAW.parse(reply, J)
    assert parsed.ok and parsed.value == PERM, (reply, parsed)


def test_jigsaw_rejects_bools_fractions_and_non_permutations() -> None:
    n = K * K
    assert "False is not a tile number" in (
        JIGSAW.parse(json.dumps({"permutation": [False, *PERM[1:]]}), J).error or ""
    )
    assert "0.5 is not a tile number" in (
        JIGSAW.parse(json.dumps({"permutation": [0.5, *PERM[1:]]}), J).error or ""
    )
    assert f"tile {n} does not exist" in (
        JIGSAW.parse(json.dumps({"permutation": [p + 1 for p in PERM]}), J).error or ""
    )
    assert "appears more than once" in (
        JIGSAW.parse(json.dumps({"permutation": [PERM[0]] * n}), J).error or ""
    )
    assert not JIGSAW.check(["a", *PERM[1:]], J).correct


TSP = make_task("tsp")
T = TSP.generate(0, "medium")
TOUR = T.answer


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps({"tour": TOUR}),
        json.dumps({"tour": [*TOUR, TOUR[0]]}),
        f"I visit all {len(TOUR)} points in the order " + " → ".join(map(str, TOUR)),
        f"Starting at point {TOUR[0]}: " + " -> ".join(map(str, TOUR)),
        json.dumps({"tour": TOUR}) + "\nI considered [0, 1, 2] first but it crosses.",
        f"Final answer: {TOUR}",
        f"\\boxed{{{', '.join(map(str, TOUR))}}}",
    ],
)
def test_tsp_reads_a_tour_however_it_is_written(reply: str) -> None:
    parsed = TSP.parse(reply, T)
    assert parsed.ok and parsed.value == TOUR, (reply, parsed)


def test_tsp_rejects_fractions_bools_and_stray_numbers_in_claims() -> None:
    assert "0.9 is not a point number" in (TSP.parse(json.dumps({"tour": [0.9, *TOUR[1:]]}), T).error or "")
    assert "False is not a point number" in (
        TSP.parse(json.dumps({"tour": [False, *TOUR[1:]]}), T).error or ""
    )
    assert "tour misses point" in (TSP.parse(json.dumps({"tour": TOUR[:-1]}), T).error or "")
    # Only integers inside a list are tour steps: a length in an object is no claim.
    assert TSP.claimed_steps('The length is {"length": 57}. Then [0, 1].', T) == [0, 1]


def test_records_are_copies_the_live_instance_does_not_share() -> None:
    truth = list(J.answer)
    record = J.to_record()
    record["answer"].reverse()
    record["facts"]["perm"].reverse()
    assert J.answer == truth and J.facts["perm"] == truth and JIGSAW.check(truth, J).correct
    maze_record = M.to_record()
    maze_record["facts"]["start"][0] += 1
    assert MAZE.check(PATH, M).correct
