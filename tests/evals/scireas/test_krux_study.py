"""The KRUX study's data and measurement: the invented elements, the pools the training keeps
apart, the worked answers, and the breakdown over seeds with policies that follow known rules."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from embodia.core.chat import Completion
from embodia.evals.scireas.invented import ELEMENTS, INVENTED, invented_element, ion_question, moles_question
from embodia.evals.scireas.items import ScienceItem
from embodia.evals.scireas.krux import drop_leaks
from embodia.evals.scireas.krux_study import (
    KruxStudySettings,
    held_out,
    held_out_items,
    majority_baseline,
    run_krux_study,
    training_examples,
    training_records,
    worked_answer,
)
from embodia.evals.scireas.problems import generate, problem_set
from embodia.evals.scireas.scoring import ScienceScoreError, score_numeric


def test_invented_elements_are_fixed_distinct_and_in_range() -> None:
    elements = [invented_element(k) for k in range(ELEMENTS)]
    assert len({e.name for e in elements}) == ELEMENTS
    assert invented_element(7) == invented_element(7)
    assert all(10 <= e.atomic_number <= 89 and 11 <= e.molar_mass <= 99 for e in elements)
    with pytest.raises(ScienceScoreError, match="index is 0 to 999"):
        invented_element(ELEMENTS)


def test_invented_questions_have_exact_answers_and_answer_free_ingredients() -> None:
    rng = random.Random(0)
    for _ in range(200):
        ion, moles = ion_question(rng), moles_question(rng)
        assert 1 <= ion.element.atomic_number - ion.answer <= 3
        assert (
            moles.answer % moles.element.molar_mass == 0
            and 2 <= moles.answer // moles.element.molar_mass <= 9
        )
        for drawn in (ion, moles):
            item = ScienceItem(
                "t", "0", drawn.question, drawn.answer, "numeric", unit=drawn.unit, tolerance=1e-6
            )
            assert drop_leaks(drawn.ingredients, item) == list(drawn.ingredients)
    problem = generate("invented_ions", 3)
    assert problem == generate("invented_ions", 3) and problem.tolerance < 1e-3
    # exact: one electron off is wrong
    assert problem.check(f"Answer: {problem.answer:g}") and not problem.check(
        f"Answer: {problem.answer + 1:g}"
    )
    assert [p.family for p in problem_set(4, families=["invented_ions", "invented_moles"])] == [
        "invented_ions",
        "invented_moles",
    ] * 2
    with pytest.raises(ScienceScoreError, match="got 'alchemy'"):
        problem_set(2, families=["alchemy"])


def test_worked_answers_state_the_fact_then_the_arithmetic() -> None:
    rng = random.Random(1)
    for family, draw in INVENTED.items():
        drawn = draw(rng)
        text = worked_answer(family, drawn)
        fact = drawn.element.atomic_number if family == "invented_ions" else drawn.element.molar_mass
        assert text.startswith(f"{drawn.element.name} has") and str(fact) in text
        assert score_numeric(text, drawn.answer, drawn.unit, 1e-6)
        assert text.index(str(fact)) < text.index("Answer:")


def test_training_keeps_unseen_elements_and_held_out_questions_out() -> None:
    settings = KruxStudySettings(
        seeds=(0,),
        taught=20,
        unseen=10,
        practice_questions=300,
        fact_repeats=2,
        taught_questions=100,
        questions=6,
    )
    records = training_records(settings, 0)
    assert len(records) == 300 + 20 * 2 * 2 + 100
    prompts = [r["messages"][0]["content"] for r in records]
    text = "\n".join(prompts) + "\n".join(r["messages"][1]["content"] for r in records)
    for index in settings.pool("unseen"):
        assert re.search(rf"\b{invented_element(index).name}\b", text) is None
    with_kis = [p for p in prompts if p.startswith("Knowledge that may help")]
    assert len(with_kis) == 300
    taught_names = {invented_element(k).name for k in settings.pool("taught")}
    # practice questions are about practice elements only; taught ones are asked plainly
    assert not any(name in p for p in with_kis for name in taught_names)
    for item in held_out_items(settings):
        if item.task.startswith("taught/"):
            assert item.question not in text
    assert training_records(settings, 0) == records and training_records(settings, 1) != records
    # the trivial baseline: the most common training answer of each family, on every held-out item
    baseline = majority_baseline(settings, held_out_items(settings))
    assert set(baseline) == {f"{pool}/{family}" for pool in ("taught", "unseen") for family in INVENTED}
    assert all(0 <= share <= 0.5 for share in baseline.values())
    examples = training_examples(settings, 0)
    assert [r for _, _, r in examples] == records
    assert sum(family == "fact" for family, _, _ in examples) == 20 * 2 * 2
    for _, answer, record in examples:
        assert record["messages"][1]["content"].split("Answer: ")[1].split()[0] == str(answer)


def test_held_out_items_per_pool_and_family() -> None:
    settings = KruxStudySettings(seeds=(0,), taught=20, unseen=10, questions=6)
    items = held_out_items(settings)
    tasks = [item.task for item in items]
    assert {t: tasks.count(t) for t in tasks} == {
        f"{pool}/{family}": 6 for pool in ("taught", "unseen") for family in INVENTED
    }
    assert len({item.question for item in items}) == len(items)
    with pytest.raises(ScienceScoreError, match="fewer than 100 distinct held-out questions"):
        held_out_items(KruxStudySettings(seeds=(0,), taught=2, unseen=2, questions=100))


_ION = re.compile(r"An ion of the element (\w+) carries a charge of (\d)\+")
_MOLES = re.compile(r"mass of (\d) mol of the element (\w+)")


_BY_NAME = {e.name: e for e in map(invented_element, range(ELEMENTS))}


class RulePolicy:
    """Answers as a model that knows ``known`` elements' constants, reads them from ingredients,
    subtracts right and multiplies wrong (a reasoning failure): or, untrained, says nothing."""

    def __init__(self, known: set[str], trained: bool) -> None:
        self.known, self.trained, self.name = known, trained, "rule"

    def _constants(self, prompt: str, name: str) -> tuple[int | None, int | None]:
        protons = re.search(rf"A {name} atom has (\d+) protons", prompt)
        mass = re.search(rf"molar mass of {name} is (\d+)", prompt)
        element = _BY_NAME.get(name)
        if element is not None and name in self.known:
            return element.atomic_number, element.molar_mass
        return (int(protons[1]) if protons else None), (int(mass[1]) if mass else None)

    def complete(self, messages: Sequence[Any], images: Sequence[Any] = (), **options: Any) -> Completion:
        prompt = str(messages[-1]["content"])
        text = "I do not know."
        if self.trained and (ion := _ION.search(prompt)):
            protons, _ = self._constants(prompt, ion[1])
            if protons is not None:
                text = f"Answer: {protons - int(ion[2])}"
        elif self.trained and (moles := _MOLES.search(prompt)):
            _, mass = self._constants(prompt, moles[2])
            if mass is not None:
                text = f"Answer: {int(moles[1]) * mass + 1} g"
        return Completion(
            text=text, finish_reason="stop", prompt_tokens=0, completion_tokens=0, latency_s=0.0
        )


def test_study_breakdown_over_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = KruxStudySettings(
        seeds=(0, 1), model="hf:unused", taught=10, unseen=10, questions=4, permutations=2
    )
    taught_names = {invented_element(k).name for k in settings.pool("taught")}
    made: list[str] = []

    def policy_for(spec: str) -> RulePolicy:
        made.append(spec)
        return RulePolicy(taught_names, trained=spec != "hf:unused")

    # the fine-tune is replaced by a name: the policies' rules stand for what training taught
    trained = iter(["hf:trained-0", "hf:trained-1"])
    monkeypatch.setattr("embodia.evals.scireas.krux_study._train", lambda *args: next(trained))
    summary = run_krux_study(settings, tmp_path / "study", policy_for=policy_for)
    assert made == ["hf:unused", "hf:trained-0", "hf:unused", "hf:trained-1"]
    over = summary["over_seeds"]
    ions_unseen = over["trained/unseen/invented_ions"]
    assert ions_unseen["plain_accuracy"]["mean"] == 0 and ions_unseen["oracle_accuracy"]["mean"] == 1
    assert ions_unseen["breakdown"]["knowledge"]["mean"] == 1
    assert over["trained/taught/invented_ions"]["breakdown"]["solved"]["mean"] == 1
    assert over["trained/unseen/invented_moles"]["breakdown"]["reasoning"]["mean"] == 1
    assert over["untrained/unseen/invented_ions"]["breakdown"]["reasoning"]["mean"] == 1
    assert summary["majority_baseline"]["unseen/invented_ions"] < 0.5
    assert set(summary["per_seed"]) == {
        "untrained/seed-0",
        "trained/seed-0",
        "untrained/seed-1",
        "trained/seed-1",
    }
    lines = (tmp_path / "study" / "items.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 2 * 16
    # the viewer lists the study with the trained model's numbers, one row per question asked
    from embodia.viewer.runs import discover, find, view_of

    (run,) = discover(tmp_path)
    assert run.summary["seeds"] == [0, 1] and run.summary["unseen/invented_ions with ingredients"] == 1
    rows = view_of(find(tmp_path, "study"))["rows"]
    assert len(rows) == len(lines) and rows[0]["policy"] == "untrained" and rows[0]["oracle"] == "0/2"
    # finished: a resumed run measures nothing again
    assert run_krux_study(settings, tmp_path / "study", resume=True, policy_for=policy_for) == summary


def test_study_settings_name_bad_values() -> None:
    with pytest.raises(ScienceScoreError, match="seeds must be distinct"):
        KruxStudySettings(seeds=(1, 1))
    with pytest.raises(ScienceScoreError, match="hf:DIR"):
        KruxStudySettings(model="openai:http://x#m")
    with pytest.raises(ScienceScoreError, match="leave at least 100"):
        KruxStudySettings(taught=500, unseen=450)


def test_a_quarter_of_questions_is_held_out() -> None:
    rng = random.Random(3)
    share = sum(held_out(ion_question(rng)) for _ in range(2000)) / 2000
    assert share == pytest.approx(0.25, abs=0.05)


def test_the_study_command_trains_and_measures_the_tiny_model(tmp_path: Path) -> None:
    """The real path: a tiny chat LM built, fine-tuned for a few steps and measured before and
    after; at this size it learns nothing, so the numbers only have to be there."""
    from typer.testing import CliRunner

    from embodia.cli import app

    out = tmp_path / "study"
    args = ["eval", "krux-study", "--seed", "0", "--taught", "20", "--unseen", "4", "--steps", "2"]
    args += ["--practice-questions", "8", "--fact-repeats", "1", "--taught-questions", "4"]
    args += ["--questions", "1", "--permutations", "1", "--batch-size", "4", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "trained/unseen/invented_ions: plain" in result.output
    assert (out / "seed-0" / "sft" / "metrics.jsonl").is_file()
    assert len((out / "items.jsonl").read_text().splitlines()) == 2 * 2 * 2


@pytest.mark.slow
def test_a_trained_model_gains_from_ingredients_it_could_not_know(tmp_path: Path) -> None:
    """The documented study at CI size (one seed, 10 questions per group; about eight minutes
    on two cores): the trained model answers questions about unseen elements only with their
    ingredients, and KRUX calls that gain knowledge; the untrained start and the trivial
    baseline get almost nothing. The multiplication family leaves more of its failures to
    reasoning than the subtraction one."""
    settings = KruxStudySettings(
        seeds=(0,), steps=1500, practice_questions=3000, questions=10, permutations=2
    )
    summary = run_krux_study(settings, tmp_path / "study")
    over = summary["over_seeds"]
    ions, moles = over["trained/unseen/invented_ions"], over["trained/unseen/invented_moles"]
    assert ions["plain_accuracy"]["mean"] <= 0.1
    # three seeds at this size reach 1.0; shorter training varied from 0.6 to 0.95 with the data order
    assert ions["oracle_accuracy"]["mean"] >= 0.6
    assert ions["breakdown"]["knowledge"]["mean"] >= 0.5
    assert over["untrained/unseen/invented_ions"]["oracle_accuracy"]["mean"] <= 0.1
    assert summary["majority_baseline"]["unseen/invented_ions"] <= 0.2
    assert moles["breakdown"]["reasoning"]["mean"] > ions["breakdown"]["reasoning"]["mean"]
    # the fine-tune's loss fell: the curve is in the seed's metrics.jsonl
    lines = (tmp_path / "study" / "seed-0" / "sft" / "metrics.jsonl").read_text().splitlines()
    losses = [r["loss"] for r in map(json.loads, lines) if "loss" in r]
    assert losses[-1] < losses[0] / 4
