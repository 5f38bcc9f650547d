"""`embodia eval csmr`: a scripted reasoner with the exact oracle on CLEVR scenes, resume,
ablations, bad input; and the tiny transformers models end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.envs.puzzles import make_task

runner = CliRunner()


def script_for(items: int, path: Path) -> Path:
    """A reasoner that asks the oracle the question's own structured query, then answers with
    what it was told (so it is right exactly when the oracle and the checker agree)."""
    task = make_task("clevr")
    lines = []
    for seed in range(items):
        instance = task.generate(seed, "easy")
        query = instance.facts["question"]
        lines.append(json.dumps(json.dumps({"action": "query", "question": "look", "query": query})))
        lines.append(json.dumps(json.dumps({"action": "answer", "answer": str(instance.answer)})))
    path.write_text("\n".join(lines) + "\n")
    return path


def csmr_args(task: str, script: Path, out: Path, items: int = 3) -> list[str]:
    return [
        "eval",
        "csmr",
        "--task",
        task,
        "--difficulty",
        "easy",
        "--items",
        str(items),
        "--reasoner",
        f"scripted:{script}",
        "--perceiver",
        "oracle",
        "--out",
        str(out),
    ]


def test_scripted_reasoner_with_the_oracle(tmp_path: Path) -> None:
    script = script_for(3, tmp_path / "reasoner.jsonl")
    out = tmp_path / "run"
    args = csmr_args("clevr", script, out)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["items"] == 3 and report["accuracy"] == 1.0
    assert report["queries_per_item"] == 1.0 and report["stops"] == {"answered": 3}
    assert report["hallucination_rate"] == 0.0 and report["rouge_l"] is None
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2] and all(
        r["evidence"][0]["source"] == "oracle" for r in rows
    )
    # Resuming asks nothing again: the scripted reasoner has no replies left, yet it passes.
    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "report.json").read_text())["accuracy"] == 1.0


def ask_then_answer(pairs: list[tuple[str, str]], path: Path) -> Path:
    """A reasoner that asks each question in plain words (no structured query), then answers."""
    lines = []
    for question, answer in pairs:
        lines.append(json.dumps(json.dumps({"action": "query", "question": question})))
        lines.append(json.dumps(json.dumps({"action": "answer", "answer": answer})))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_free_questions_reach_the_oracle_through_parse_question(tmp_path: Path) -> None:
    task = make_task("clevr")
    instances = [task.generate(seed, "easy") for seed in range(3)]
    script = ask_then_answer(
        [(i.facts["question_text"], str(i.answer)) for i in instances], tmp_path / "r.jsonl"
    )
    out = tmp_path / "run"
    result = runner.invoke(app, csmr_args("clevr", script, out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["accuracy"] == 1.0 and report["rouge_l"] is None and report["hallucination_rate"] == 0.0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["evidence"][0]["answer"] for r in rows] == [str(i.answer) for i in instances]


def test_describe_run_scores_free_text_with_rouge_l(tmp_path: Path) -> None:
    from embodia.core.scores import rouge_l
    from embodia.envs.puzzles.clevr import COLOURS

    task = make_task("clevr-describe")
    instances = [task.generate(seed, "easy") for seed in range(3)]
    words = str(instances[1].answer).split()
    absent = next(c for c in COLOURS if all(o["colour"] != c for o in instances[2].facts["objects"]))
    answers = [
        str(instances[0].answer),  # the reference, word for word
        " ".join(words[: 3 * len(words) // 4]),  # its first three quarters
        f"I see a {absent} cylinder.",  # wrong, and names an object that is not there
    ]
    pairs = [(i.facts["question_text"], a) for i, a in zip(instances, answers, strict=True)]
    out = tmp_path / "run"
    result = runner.invoke(
        app, csmr_args("clevr-describe", ask_then_answer(pairs, tmp_path / "r.jsonl"), out)
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert f"ROUGE-L {report['rouge_l']:.3f}" in result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # the oracle read each free "Describe ..." question and answered with the reference
    assert [r["evidence"][0]["answer"] for r in rows] == [str(i.answer) for i in instances]
    scores = [rouge_l(a, str(i.answer)) for a, i in zip(answers, instances, strict=True)]
    assert scores[0] == 1.0 and 0 < scores[2] < 0.5 < scores[1] < 1
    assert [r["rouge_l"] for r in rows] == pytest.approx(scores)
    assert report["rouge_l"] == pytest.approx(sum(scores) / 3)
    assert report["accuracy"] == pytest.approx(2 / 3)
    assert rows[2]["hallucinations"] == [f"{absent} cylinder"] and report[
        "hallucination_rate"
    ] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "chess"], "unknown puzzle task"),
        (["--ablation", "sometimes"], "ablation"),
        (["--task", "maze", "--perceiver", "oracle"], "no oracle"),
        (["--difficulty", "insane"], "difficulty"),
        (["--items", "0"], "items"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    script = tmp_path / "r.jsonl"
    script.write_text('"x"\n')
    result = runner.invoke(
        app, ["eval", "csmr", "--reasoner", f"scripted:{script}", "--out", str(tmp_path / "o"), *args]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_tiny_models_end_to_end(tmp_path: Path) -> None:
    """CSMR with a tiny random-weight LM reasoning and a tiny VLM perceiving, and SxS with the
    LM: the real backends run; random weights give unreadable replies, which are counted."""
    from embodia.agents.sxs import run_sxs
    from embodia.policies import make_policy
    from embodia.policies.recipes.sxs_data import numeric_support
    from embodia.policies.tiny_models import build_tiny_chat_lm, build_tiny_vlm

    lm, vlm = build_tiny_chat_lm(tmp_path / "lm"), build_tiny_vlm(tmp_path / "vlm")

    def tiny_csmr(out: Path, *extra: str) -> dict[str, Any]:
        models = ["--reasoner", f"hf:{lm}", "--perceiver", f"hf:{vlm}"]
        args = ["eval", "csmr", "--task", "clevr", "--items", "2", *models, *extra, "--out", str(out)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        return dict(json.loads((out / "report.json").read_text()))

    report = tiny_csmr(tmp_path / "csmr")
    assert report["items"] == 2 and sum(report["stops"].values()) == 2 and report["tokens_per_item"] > 0
    assert tiny_csmr(tmp_path / "direct", "--ablation", "direct")["queries_per_item"] == 1.0
    sxs = run_sxs("What is 2 + 3?", make_policy(f"hf:{lm}"), numeric_support, max_tokens=24)
    assert sxs.tokens > 0 and all(d.text for d in sxs.disclosures)
