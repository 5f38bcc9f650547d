"""The generated science problems: reproducible from their seed, right by hand, checked by the
scorer, and with ingredients that do not give the answer away."""

from __future__ import annotations

import math
import re

import pytest

from embodia.evals.scireas.problems import FAMILIES, GAS_CONSTANT, generate, problem_set
from embodia.evals.scireas.scoring import ScienceScoreError


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_checks_its_answer_and_keeps_its_ingredients_answer_agnostic(family: str) -> None:
    for seed in range(12):
        problem = generate(family, seed)
        assert problem == generate(family, seed)  # the same seed, the same problem
        assert problem.check(f"Answer: {problem.answer:.6g} {problem.unit}")
        assert not problem.check(f"Answer: {problem.answer * 1.1:.6g} {problem.unit}")
        assert problem.ingredients and all(problem.ingredients)
        written = re.compile(rf"(?<![\d.]){re.escape(f'{problem.answer:.3g}')}(?![\d])")
        assert not any(written.search(ingredient) for ingredient in problem.ingredients), (seed, written)
    assert len({generate(family, seed).question for seed in range(12)}) > 3


def test_answers_by_hand() -> None:
    gas = next(
        p
        for p in (generate("gas_laws", s) for s in range(50))
        if "1.0 mol" in p.question and "25 °C" in p.question
    )
    litres = float(gas.question.split("rigid ")[1].split(" L")[0])
    assert gas.answer == pytest.approx(1.0 * GAS_CONSTANT * 298.15 / (litres / 1000) / 1000)
    dice = next(p for p in (generate("probability", s) for s in range(50)) if "sum is 7" in p.question)
    assert dice.answer == pytest.approx(6 / 36) and dice.check("Answer: 1/6")
    drop = next(p for p in (generate("kinematics", s) for s in range(50)) if "height of 20 m" in p.question)
    assert drop.answer == pytest.approx(math.sqrt(2 * 9.81 * 20))


def test_a_problem_set_takes_the_families_in_turn() -> None:
    problems = problem_set(12)
    assert [p.family for p in problems[:6]] == list(FAMILIES)
    assert len({p.key for p in problems}) == 12
    with pytest.raises(ScienceScoreError, match="science problems are"):
        generate("alchemy", 0)
