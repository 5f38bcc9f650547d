"""``embodia eval vocal``'s runner with a scripted policy whose words say more than its answers:
every question recorded as it is answered, the stated marker read, the profile fitted on one
part and measured on the other beside the baselines, plots written, and a cut run resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodia.evals.uncertainty.corpus import UncertaintyError, load_corpus
from embodia.evals.uncertainty.elicit import VocalSettings, elicited_marker, run_vocal
from embodia.evals.uncertainty.extract import MarkerLexicon
from embodia.policies.recipes.solutions import puzzle_solution_records
from embodia.policies.scripted import ScriptedPolicy

QUESTIONS = 40


def _outputs() -> list[str]:
    """Per question a greedy reply and one sample: "highly likely" answers are right on three
    of five questions, "unlikely" ones on one of five."""
    solutions = [
        r["messages"][1]["content"] for r in puzzle_solution_records("maze", "easy", range(QUESTIONS))
    ]
    outputs = []
    for k, solution in enumerate(solutions):
        if k % 2 == 0:
            right = k % 10 in (0, 2, 4)
            reply = (solution if right else '{"path": "U"}') + " Confidence: highly likely."
        else:
            right = k % 10 == 1
            reply = (solution if right else '{"path": "L"}') + "\nConfidence: unlikely"
        outputs += [reply, reply if k % 3 else '{"path": "R"}']
    return outputs


SETTINGS = VocalSettings(
    policy="scripted", questions=QUESTIONS, consistency_samples=1, shrinkage=0.0, bootstrap_rounds=20
)


def test_the_run_fits_the_stated_markers_and_reports_them_beside_the_baselines(tmp_path: Path) -> None:
    out = tmp_path / "vocal"
    summary = run_vocal(SETTINGS, out, policy=ScriptedPolicy(_outputs()))
    records = [
        json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines() if '"key"' in line
    ]
    assert len(records) == QUESTIONS and summary["marker_rate"] == 1.0
    assert summary["accuracy"] == pytest.approx(0.4)  # (3 + 1) of every 10
    assert summary["calibration_answers"] == summary["test_answers"] == 20
    rows = {row["marker"]: row for row in summary["comparison"]["markers"]}
    # no shrinkage: each marker's accuracy on the first 20 answers
    assert rows["highly likely"]["learned"] == pytest.approx(0.6, abs=1e-3)
    assert rows["unlikely"]["learned"] == pytest.approx(0.2, abs=1e-3)
    assert rows["highly likely"]["human"] == pytest.approx(load_corpus().prior("highly likely"))
    assert summary["comparison"]["overconfidence"] > 0
    calibration = summary["calibration"]
    # the learned mapping is calibrated on the test part, the human one is not
    assert calibration["learned"]["ece"] < calibration["human"]["ece"]
    assert calibration["consistency"] is not None
    assert calibration["token_probability"] is None  # the scripted replies carry no logprobs
    assert (out / "markers.png").is_file() and (out / "reliability.png").is_file()
    assert run_vocal(SETTINGS, out, resume=True) == summary


def test_a_cut_run_asks_only_the_questions_left(tmp_path: Path) -> None:
    out = tmp_path / "vocal"
    first = ScriptedPolicy(_outputs()[:20])  # ten questions, then out of outputs
    with pytest.raises(Exception, match="ran out of outputs"):
        run_vocal(SETTINGS, out, policy=first)
    assert len((out / "answers.jsonl").read_text().splitlines()) >= 10
    rest = ScriptedPolicy(_outputs()[20:])
    summary = run_vocal(SETTINGS, out, resume=True, policy=rest)
    assert summary["answered"] == QUESTIONS and rest.calls == 2 * (QUESTIONS - 10)
    assert "Confidence:" in first.requests[0].messages[-1]["content"]


def test_the_stated_confidence_wins_over_hedges_in_the_reasoning() -> None:
    lexicon = MarkerLexicon()
    reply = "It is unlikely to be A, so B.\nConfidence: very likely"
    marker = elicited_marker(reply, lexicon)
    assert marker is not None and marker.marker == "very likely"
    assert elicited_marker("Probably B.", lexicon).marker == "probably"  # type: ignore[union-attr]
    assert elicited_marker("B.", lexicon) is None


def test_bad_settings_are_named() -> None:
    with pytest.raises(UncertaintyError, match="--task is one of"):
        VocalSettings(policy="x", task="trivia")
    with pytest.raises(UncertaintyError, match="no text drawing"):
        VocalSettings(policy="x", puzzle="jigsaw")
    with pytest.raises(UncertaintyError, match="calibration_share"):
        VocalSettings(policy="x", calibration_share=1.0)


def test_dsr_questions_are_graded_by_the_benchmarks_scorer(tmp_path: Path) -> None:
    from embodia.evals.dsr import DSRSettings, select_instances

    settings = VocalSettings(
        policy="scripted", task="dsr", questions=8, consistency_samples=0, bootstrap_rounds=5
    )
    instances = select_instances(DSRSettings(policy="scripted", limit=8, lengths=("short",)))
    outputs = [
        (json.dumps({"final_answer": i.truth}) if k % 2 else '{"final_answer": null}')
        + "\nConfidence: "
        + ("likely" if k % 2 else "almost certain")
        for k, i in enumerate(instances)
    ]
    policy = ScriptedPolicy(outputs)
    summary = run_vocal(settings, tmp_path / "dsr", policy=policy)
    assert summary["accuracy"] == 0.5 and summary["marker_rate"] == 1.0
    assert summary["calibration"]["consistency"] is None  # no samples asked
    # the benchmark's own answer format stays asked for, the confidence line added after it
    prompt = policy.requests[0].messages[-1]["content"]
    assert "final_answer" in prompt and prompt.rstrip().endswith("Confidence: <expression>")


def test_too_few_stated_confidences_are_said_not_fitted(tmp_path: Path) -> None:
    settings = VocalSettings(policy="scripted", questions=4, consistency_samples=0)
    summary = run_vocal(settings, tmp_path / "quiet", policy=ScriptedPolicy(['{"path": "U"}'] * 4))
    assert summary["marker_rate"] == 0.0 and "too few" in summary["note"]
    assert not (tmp_path / "quiet" / "markers.png").exists()


def test_the_command_runs_a_scripted_policy_and_prints_the_side_by_side(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from embodia.cli import app

    replies = tmp_path / "replies.jsonl"
    replies.write_text("\n".join(json.dumps(reply) for reply in _outputs()) + "\n")
    args = ["eval", "vocal", "--policy", f"scripted:{replies}", "--questions", str(QUESTIONS)]
    args += ["--consistency-samples", "1", "--shrinkage", "0", "--bootstrap-rounds", "20", "--monotone"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "accuracy 0.400, a confidence in words in 100%" in result.output
    assert "learned: ECE" in result.output and "consistency: ECE" in result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["settings"]["monotone"] is True and summary["comparison"]["ordering_violations"] == []


def test_the_viewer_lists_a_vocal_run_and_shows_it_question_by_question(tmp_path: Path) -> None:
    from embodia.viewer.runs import discover, find, view_of

    root = tmp_path / "runs"
    summary = run_vocal(SETTINGS, root / "vocal", policy=ScriptedPolicy(_outputs()))
    (run,) = discover(root)
    assert run.kind == "vocal" and run.error is None
    assert run.summary["accuracy"] == summary["accuracy"] and run.summary["task"] == "puzzle"
    assert run.summary["learned ECE"] == summary["calibration"]["learned"]["ece"]
    assert run.summary["overconfidence"] == summary["comparison"]["overconfidence"]
    view = view_of(find(root, "vocal"))
    assert len(view["rows"]) == QUESTIONS and "reply" not in view["rows"][0]
    assert view["rows"][0]["marker"] == "highly likely"
    assert view["images"] == ["markers.png", "reliability.png"]
    # cut short: the list says what the answers say so far
    going = root / "going"
    going.mkdir()
    for name in ("answers.jsonl", "config.yaml"):
        (going / name).write_text((root / "vocal" / name).read_text())
    partial = find(root, "going")
    assert partial.summary["finished"] is False and partial.summary["answered"] == QUESTIONS


def test_science_questions_are_graded_by_their_numbers_and_units(tmp_path: Path) -> None:
    from embodia.evals.scireas.krux import science_items

    items = science_items("generated", "items", 6)
    outputs = []
    for k, item in enumerate(items):
        value = float(item.answer) if k % 2 == 0 else float(item.answer) * 2
        greedy = f"Answer: {value:.6g} {item.unit}\nConfidence: {'likely' if k % 2 == 0 else 'highly likely'}"
        outputs += [greedy, f"Answer: {value:.6g} {item.unit}"]  # the sample agrees
    settings = VocalSettings(
        policy="scripted", task="scireas", questions=6, consistency_samples=1, bootstrap_rounds=5
    )
    summary = run_vocal(settings, tmp_path / "science", policy=ScriptedPolicy(outputs))
    assert summary["accuracy"] == 0.5 and summary["marker_rate"] == 1.0
    records = [
        json.loads(x)
        for x in (tmp_path / "science" / "answers.jsonl").read_text().splitlines()
        if '"key"' in x
    ]
    assert [r["consistency"] for r in records] == [1.0] * 6


def test_the_policy_reads_each_marker_as_a_speakers_probability(tmp_path: Path) -> None:
    from embodia.evals.uncertainty.elicit import marker_readings, read_probability

    assert read_probability("70") == 0.7 and read_probability("About 85%.") == 0.85
    assert read_probability("0.3") == pytest.approx(0.3) and read_probability("I'd say 1") == 0.01
    assert read_probability("no idea") is None and read_probability("250") is None
    corpus = load_corpus()
    # a reader who takes every marker at 60%: right for "better than even", far from the ends
    policy = ScriptedPolicy(["60"], loop=True)
    readings = marker_readings(policy)
    rows = {row["marker"]: row for row in readings["markers"]}
    assert readings["read"] == len(corpus.markers) and policy.calls == 3 * len(corpus.markers)
    assert (
        rows["better than even"]["gap"] == pytest.approx(0.0) and rows["better than even"]["within_human_iqr"]
    )
    assert (
        rows["almost certain"]["gap"] == pytest.approx(0.6 - 0.95)
        and not rows["almost certain"]["within_human_iqr"]
    )
    prompt = policy.requests[0].messages[0]["content"]
    assert '"It is certain that the meeting will start late."' in prompt
    settings = VocalSettings(policy="scripted", questions=2, consistency_samples=0, readings=True)
    summary = run_vocal(
        settings, tmp_path / "r", policy=ScriptedPolicy(['{"path": "U"}', '{"path": "U"}', *["40"] * 87])
    )
    assert summary["readings"]["read"] == len(corpus.markers)
