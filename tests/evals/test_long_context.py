"""Long-input evaluation (``evals/long_context.py``): the generated documents, truncation, the
summary computed by hand, and a small grid where LIFT finds the needle and the baselines do not."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from fact_qa import FACT, fact_pairs

from embodia.evals import long_context as lc


@pytest.fixture(scope="module")
def tokenizer(tiny_chat_lm_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_chat_lm_dir)


def test_filler_never_states_a_fact() -> None:
    rng = random.Random(0)
    for _ in range(500):
        sentence = lc.filler_sentence(rng)
        assert FACT.match(sentence) is None and fact_pairs(sentence, 5) == []


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_the_needle_sits_at_its_depth_in_a_haystack_of_the_asked_length(tokenizer: Any, depth: float) -> None:
    case = lc.niah_case(tokenizer, 2000, depth, seed=3)
    tokens = len(tokenizer(case.document, add_special_tokens=False)["input_ids"])
    assert 1900 <= tokens <= 2100
    (needle,) = case.needles
    assert case.document.count(needle) == 1
    position = case.document.index(needle) / len(case.document)
    assert abs(position - depth) < 0.05
    (question,) = case.questions
    assert question["answer"] in needle and fact_pairs(needle, 1)[0]["answer"] == question["answer"]
    assert lc.niah_case(tokenizer, 2000, depth, seed=3) == case  # seeded


def test_a_facts_document_spreads_its_needles(tokenizer: Any) -> None:
    case = lc.facts_case(tokenizer, 3000, facts=4, seed=1)
    positions = [case.document.index(n) / len(case.document) for n in case.needles]
    assert positions == sorted(positions)
    assert [round(p * 4 - 0.5) for p in positions] == [0, 1, 2, 3]
    assert len({q["question"] for q in case.questions}) == 4


def test_truncation_keeps_the_front_and_back_halves(tokenizer: Any) -> None:
    case = lc.niah_case(tokenizer, 1000, 0.5, seed=0)
    kept = lc.truncated_context(tokenizer, case.document, 200)
    front, back = kept.split(" ... ")
    ids = tokenizer(case.document, add_special_tokens=False)["input_ids"]
    assert front == tokenizer.decode(ids[:100]) and back == tokenizer.decode(ids[-100:])
    assert case.needles[0] not in kept
    assert lc.truncated_context(tokenizer, "short text.", 200) == "short text."


def test_accuracy_summary_by_hand() -> None:
    lines = [
        {"method": "lift", "length": 512, "depth": 0.0, "correct": True, "in_truncated_context": True},
        {"method": "lift", "length": 512, "depth": 0.5, "correct": False, "in_truncated_context": False},
        {"method": "lift", "length": 1024, "depth": 0.5, "correct": True, "in_truncated_context": False},
        {"method": "truncated", "length": 512, "depth": 0.0, "correct": True, "in_truncated_context": True},
    ]
    summary = lc.accuracy_summary(lines)
    lift = summary["methods"]["lift"]
    assert lift["accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert lift["by_length"] == {"512": 0.5, "1024": 1.0}
    assert lift["by_depth"] == {"0": 1.0, "0.5": 0.5}
    assert summary["methods"]["truncated"]["accuracy"] == 1.0
    assert summary["in_truncated_context"] == 0.5


def test_settings_name_the_bad_value() -> None:
    with pytest.raises(lc.LongContextError, match="unknown methods"):
        lc.LongContextSettings(model="hf:m", generator="scripted:x", methods=("rag",))
    with pytest.raises(lc.LongContextError, match="depths"):
        lc.LongContextSettings(model="hf:m", generator="scripted:x", depths=(1.5,))
    with pytest.raises(lc.LongContextError, match="task"):
        lc.LongContextSettings(model="hf:m", generator="scripted:x", task="summarise")


@pytest.mark.slow
def test_lift_finds_the_needle_beyond_the_window_and_the_baselines_do_not(tmp_path: Path) -> None:
    from fact_qa import FactQAPolicy

    from embodia.policies.tiny_models import build_tiny_chat_lm

    model = build_tiny_chat_lm(tmp_path / "lm", context_tokens=256)
    settings = lc.LongContextSettings(
        model=f"hf:{model}",
        generator="scripted:unused",
        lengths=(1024,),
        depths=(0.5,),
        lift={"epochs": 20, "learning_rate": 3e-3, "batch_size": 5},
    )
    summary = lc.run_long_context(settings, tmp_path / "run", generator=FactQAPolicy())
    methods = summary["methods"]
    assert methods["lift"]["accuracy"] == 1.0
    assert methods["truncated"]["accuracy"] == 0.0 and methods["raw"]["accuracy"] == 0.0
    assert summary["in_truncated_context"] == 0.0  # 4x the window: the middle is cut
    lines = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert [line["method"] for line in lines if "correct" in line] == ["lift", "truncated", "raw"]
    assert [line["status"] for line in lines if "status" in line] == ["started", "done"] * 3
    # a run cut inside its last cell: the cut cell is done again, the others are kept
    (tmp_path / "run" / "summary.json").unlink()
    path = tmp_path / "run" / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines[:-2]))  # raw's answer and "done" lost
    writer = FactQAPolicy()
    again = lc.run_long_context(settings, tmp_path / "run", resume=True, generator=writer)
    assert again["questions"] == 3 and writer.calls == 0  # only the raw cell ran again
    assert again["methods"] == methods
