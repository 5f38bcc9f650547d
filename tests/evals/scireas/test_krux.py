"""KRUX's loop with scripted policies: plain and with-ingredient verdicts over orders, the
knowledge-vs-reasoning breakdown, extracted ingredients without leaks, and the Pro rule."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from embodia.evals.scireas.benchmarks import load_items
from embodia.evals.scireas.items import ScienceItem, from_problem
from embodia.evals.scireas.krux import (
    ProSelectionSettings,
    SciReasSettings,
    drop_leaks,
    easy_comparison,
    parse_ingredients,
    run_krux,
    run_pro_selection,
    science_items,
)
from embodia.evals.scireas.problems import generate
from embodia.evals.scireas.scoring import ScienceScoreError
from embodia.policies.scripted import ScriptedPolicy


def _right(item: ScienceItem) -> str:
    return f"Working it out... Answer: {float(item.answer):.6g} {item.unit}"


def _wrong(item: ScienceItem) -> str:
    return f"Answer: {float(item.answer) * 3 + 1:.6g} {item.unit}"


def test_oracle_ingredients_separate_knowledge_from_reasoning(tmp_path: Path) -> None:
    settings = SciReasSettings(policy="scripted", items=6, ingredients="oracle", permutations=3)
    items = science_items("generated", "items", 6)
    # plain: items 0 and 1 right; with ingredients, per order:
    with_kis = {0: "RRR", 1: "WWW", 2: "RRR", 3: "RRR", 4: "WWW", 5: "RWW"}
    outputs = []
    for k, item in enumerate(items):
        outputs.append(_right(item) if k < 2 else _wrong(item))
        outputs += [_right(item) if v == "R" else _wrong(item) for v in with_kis[k]]
    policy = ScriptedPolicy(outputs)
    summary = run_krux(settings, tmp_path / "krux", policy=policy)
    assert summary["plain_accuracy"] == pytest.approx(2 / 6)
    oracle = summary["oracle"]
    # per order: 4/6, 3/6, 3/6
    assert oracle["accuracy"] == pytest.approx((4 + 3 + 3) / 18)
    assert oracle["gain"] == pytest.approx((4 + 3 + 3) / 18 - 2 / 6)
    assert oracle["breakdown"] == pytest.approx(
        {"solved": 1 / 6, "knowledge": 2 / 6, "reasoning": 2 / 6, "hurt": 1 / 6}
    )
    assert set(oracle["by_task"]) == {item.task for item in items}
    # the ingredients come before the question, every one of them, in shuffled orders
    asked = [r.messages[0]["content"] for r in policy.requests]
    assert "Knowledge that may help" not in asked[0]
    for ingredient in items[2].ingredients:
        assert ingredient in asked[9]
    orders = {tuple(line for line in text.splitlines() if line.startswith("- ")) for text in asked[9:12]}
    assert len(items[2].ingredients) < 2 or len(orders) > 1
    assert run_krux(settings, tmp_path / "krux", resume=True) == summary


def test_extracted_ingredients_are_read_and_leaks_dropped(tmp_path: Path) -> None:
    settings = SciReasSettings(policy="scripted", items=2, ingredients="extracted", permutations=2)
    items = science_items("generated", "items", 2)
    outputs = []
    for item in items:
        leak = f"- The result is {float(item.answer):.3g} {item.unit}."
        outputs += [
            _wrong(item),
            f"Ingredients:\n- Newton's second law: F = m a.\n{leak}\n* Energy is conserved.",
            _right(item),
            _wrong(item),
        ]
    summary = run_krux(settings, tmp_path / "extracted", policy=ScriptedPolicy(outputs))
    records = [
        json.loads(x)
        for x in (tmp_path / "extracted" / "items.jsonl").read_text().splitlines()
        if '"key"' in x
    ]
    assert records[0]["extracted"]["ingredients"] == ["Newton's second law: F = m a.", "Energy is conserved."]
    assert summary["extracted"]["accuracy"] == pytest.approx(0.5) and summary["plain_accuracy"] == 0


def test_parsing_and_leak_rules_by_hand() -> None:
    reply = "Here they are:\n1. Ohm's law: V = I R\n- Ohm's law: V = I R\n2) R = R1 + R2\nThat is all."
    assert parse_ingredients(reply) == ["Ohm's law: V = I R", "R = R1 + R2"]
    item = from_problem(generate("circuits", 0))
    leaky = [f"The current is {float(item.answer):.3g} A", "Ohm's law: V = I R"]
    assert drop_leaks(leaky, item) == ["Ohm's law: V = I R"]
    choice = ScienceItem("t", "1", "Which?", "C", "choice", ("a", "b", "c"))
    assert drop_leaks(["The answer is C.", "Cells divide."], choice) == ["Cells divide."]


def test_the_pro_rule_keeps_what_only_more_reasoning_solves(tmp_path: Path) -> None:
    items = science_items("generated", "items", 4)
    low = ScriptedPolicy([_right(items[0]), _wrong(items[1]), _wrong(items[2]), _wrong(items[3])])
    high = ScriptedPolicy([_right(items[0]), _right(items[1]), _wrong(items[2]), _right(items[3])])
    settings = ProSelectionSettings(low="scripted", high="scripted", items=4)
    summary = run_pro_selection(settings, tmp_path / "pro", low=low, high=high)
    assert summary["pro_items"] == 2 and summary["low_accuracy"] == 0.25 and summary["high_accuracy"] == 0.75
    kept = load_items(tmp_path / "pro" / "pro.jsonl", "items")
    assert [i.key for i in kept] == [items[1].key, items[3].key]
    assert kept[0].ingredients == items[1].ingredients  # the oracle travels with the item


def test_the_judge_keeps_what_it_finds_reasoning_intensive(tmp_path: Path) -> None:
    """Six questions, three tasks: items 0-2 only the high setting solves, 3-5 both. The judge
    calls 0 and 2 the harder of their pair and gives no verdict on 1."""
    items = science_items("generated", "items", 6)
    low = ScriptedPolicy([_wrong(i) for i in items[:3]] + [_right(i) for i in items[3:]])
    high = ScriptedPolicy([_right(i) for i in items])
    hard_first = [random.Random(f"pro-judge-order/{i.key}").random() < 0.5 for i in items[:3]]
    picks = ["A" if hard_first[0] else "B", "I cannot tell.", "A" if hard_first[2] else "B"]
    judge = ScriptedPolicy([f"The first needs two laws combined. Answer: {p}" for p in picks])
    settings = ProSelectionSettings(low="scripted", high="scripted", items=6, judge="scripted")
    summary = run_pro_selection(settings, tmp_path / "pro", low=low, high=high, judge=judge)
    assert summary["effort_items"] == 3 and summary["pro_items"] == 2 and summary["judge_unreadable"] == 1
    kept = load_items(tmp_path / "pro" / "pro.jsonl", "items")
    assert [i.key for i in kept] == [items[0].key, items[2].key]
    assert kept[0].extra["reasoning_intensive"] is True
    assert kept[0].extra["easy_comparison"] in {i.key for i in items[3:]}
    assert "two laws" in kept[0].extra["reasoning_comparison_explanation"]
    # each judgement shows the selected question and its comparison, in the order drawn
    for request, item, first in zip(judge.requests, items[:3], hard_first, strict=True):
        text = request.messages[0]["content"]
        a, b = text.index("Question A:"), text.index("Question B:")
        assert (a < text.index(item.question) < b) == first
    assert easy_comparison(items[0], []) is None


def test_bad_settings_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScienceScoreError, match="--ingredients is one of"):
        SciReasSettings(policy="x", ingredients="wikipedia")
    with pytest.raises(ScienceScoreError, match="is neither"):
        SciReasSettings(policy="x", source=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ScienceScoreError, match="layouts are"):
        SciReasSettings(policy="x", layout="arxiv")


def test_the_commands_run_the_tiny_model_end_to_end(tmp_path: Path, tiny_chat_lm_dir: Path) -> None:
    """The real transformers path: the tiny random-weight model answers, extracts and answers
    again with ingredients; it knows nothing, so the numbers only have to be there."""
    from typer.testing import CliRunner

    from embodia.cli import app

    policy = f"hf:{tiny_chat_lm_dir}"
    args = ["eval", "scireas", "--policy", policy, "--items", "2", "--ingredients", "both"]
    args += ["--permutations", "2", "--max-tokens", "8", "--out", str(tmp_path / "krux")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "with oracle ingredients: accuracy" in result.output
    summary = json.loads((tmp_path / "krux" / "summary.json").read_text())
    assert summary["items"] == 2 and 0 <= summary["oracle"]["accuracy"] <= 1
    args = ["eval", "scireas-pro", "--low", policy, "--high", policy, "--items", "2"]
    args += ["--low-max-tokens", "4", "--high-max-tokens", "8", "--out", str(tmp_path / "pro")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "of 2 questions" in result.output and (tmp_path / "pro" / "pro.jsonl").is_file()


def test_the_viewer_lists_krux_and_pro_runs(tmp_path: Path) -> None:
    from embodia.viewer.runs import discover, find, view_of

    root = tmp_path / "runs"
    items = science_items("generated", "items", 2)
    outputs = [
        _wrong(items[0]),
        _right(items[0]),
        _right(items[0]),
        _right(items[1]),
        _wrong(items[1]),
        _right(items[1]),
    ]
    summary = run_krux(
        SciReasSettings(policy="scripted", items=2, permutations=2),
        root / "krux",
        policy=ScriptedPolicy(outputs),
    )
    run_pro_selection(
        ProSelectionSettings(low="scripted", high="scripted", items=2),
        root / "pro",
        low=ScriptedPolicy([_wrong(items[0]), _wrong(items[1])]),
        high=ScriptedPolicy([_right(items[0]), _wrong(items[1])]),
    )
    runs = {run.id: run for run in discover(root)}
    assert {k: r.kind for k, r in runs.items()} == {"krux": "scireas", "pro": "scireas-pro"}
    assert runs["krux"].summary["oracle gain"] == summary["oracle"]["gain"]
    assert runs["pro"].summary["pro_items"] == 1
    view = view_of(find(root, "krux"))
    assert [row["oracle"] for row in view["rows"]] == ["2/2", "1/2"] and "reply" not in view["rows"][0]
