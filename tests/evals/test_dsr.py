"""Full DSR-Bench evaluation runs: scripted policy (exact numbers), resume after a crash, tiny model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from embodia.envs.dsr.core import DSRError
from embodia.evals.dsr import ANSWERS_FILE, CHART_FILE, REPORT_FILE, DSRSettings, run_dsr, select_instances
from embodia.policies import PolicyError, ScriptedPolicy


def _settings(**overrides: object) -> DSRSettings:
    values: dict[str, object] = {
        "policy": "scripted",
        "suite": "main",
        "lengths": ("short",),
        "limit": 6,
        "mode": "none",
    }
    values.update(overrides)
    return DSRSettings(**values)  # type: ignore[arg-type]


def test_limit_spreads_over_operations() -> None:
    chosen = select_instances(_settings(limit=31))
    assert len({i.operation for i in chosen}) == 31


def test_scripted_run_reports_exact_numbers(tmp_path: Path) -> None:
    settings = _settings()
    instances = select_instances(settings)
    replies = [
        json.dumps({"final_answer": instances[0].truth}),
        json.dumps({"final_answer": instances[1].truth}),
        "I could not work it out.",
        '```json\n{"final_answer": 7}\n```'
        if not isinstance(instances[3].truth, int)
        else '{"final_answer": [7]}',
        '{"final_answer": [1, 2',
        json.dumps({"final_answer": instances[5].truth}),
    ]
    report = run_dsr(settings, tmp_path, policy=ScriptedPolicy(replies))
    assert report["overall"]["n"] == 6
    assert report["overall"]["exact"] == pytest.approx(0.5, abs=1e-4)
    assert report["overall"]["failures"] == {"parse": 2, "wrong_type": 1, "wrong_final": 0}
    assert sum(row["n"] for row in report["by_category"].values()) == 6
    assert report["by_operation"][instances[0].operation]["exact"] == 1.0
    assert (tmp_path / CHART_FILE).stat().st_size > 10_000
    assert json.loads((tmp_path / REPORT_FILE).read_text()) == report
    records = [json.loads(line) for line in (tmp_path / ANSWERS_FILE).read_text().splitlines()]
    assert [r["id"] for r in records] == [i.id for i in instances]
    assert records[2]["reply"] == "I could not work it out." and records[2]["failure"] == "parse"


def test_a_crashed_run_resumes_without_asking_again(tmp_path: Path) -> None:
    settings = _settings()
    instances = select_instances(settings)
    answers = [json.dumps({"final_answer": i.truth}) for i in instances]
    with pytest.raises(PolicyError, match="ran out of outputs"):
        run_dsr(settings, tmp_path, policy=ScriptedPolicy(answers[:4]))  # the "server" dies after 4 answers
    assert len((tmp_path / ANSWERS_FILE).read_text().splitlines()) == 4
    rest = ScriptedPolicy(answers[4:])
    report = run_dsr(settings, tmp_path, policy=rest)
    assert rest.calls == 2  # only the two missing instances were asked
    assert report["overall"] == {
        "n": 6,
        "exact": 1.0,
        "partial": 1.0,
        "failures": {"parse": 0, "wrong_type": 0, "wrong_final": 0},
    }
    again = ScriptedPolicy([])
    run_dsr(settings, tmp_path, policy=again)
    assert again.calls == 0


def test_a_torn_last_line_is_asked_again(tmp_path: Path) -> None:
    settings = _settings(limit=2)
    instances = select_instances(settings)
    answers = [json.dumps({"final_answer": i.truth}) for i in instances]
    run_dsr(settings, tmp_path, policy=ScriptedPolicy(answers))
    log = tmp_path / ANSWERS_FILE
    lines = log.read_text().splitlines()
    log.write_text(lines[0] + "\n" + lines[1][:20])  # killed while writing the second record
    retry = ScriptedPolicy(answers[1:])
    report = run_dsr(settings, tmp_path, policy=retry)
    assert retry.calls == 1 and report["overall"]["exact"] == 1.0


def test_resume_with_other_settings_is_refused(tmp_path: Path) -> None:
    run_dsr(_settings(), tmp_path, policy=ScriptedPolicy(["{}"] * 6))
    with pytest.raises(DSRError, match="mode: 'none' -> 'stepwise'"):
        run_dsr(_settings(mode="stepwise"), tmp_path, policy=ScriptedPolicy([]))


def test_concurrent_run_answers_every_instance_once(tmp_path: Path) -> None:
    settings = _settings(limit=12)
    report = run_dsr(
        settings, tmp_path, concurrency=4, policy=ScriptedPolicy(['{"final_answer": []}'], loop=True)
    )
    ids = [json.loads(line)["id"] for line in (tmp_path / ANSWERS_FILE).read_text().splitlines()]
    assert sorted(ids) == sorted(i.id for i in select_instances(settings))
    assert report["overall"]["n"] == 12


def test_code_suite_run_executes_solutions(tmp_path: Path) -> None:
    settings = _settings(suite="code", limit=3, operations=("stack.compound",))
    instances = select_instances(settings)
    assert [i.variant["mode"] for i in instances] == ["CodeOnly", "CodeEnforce", "CodeMaybe"]
    code_only = (
        "```python\ndef solution():\n    s = []\n"
        f"    for op in {instances[0].data['ops']!r}:\n"
        "        s.append(op[1]) if op[0] == 'push' else s.pop()\n    return s\n```"
    )
    enforce = json.dumps({"code": "def solution(): ...", "final_answer": instances[1].truth})
    maybe = "Thinking... " + json.dumps({"final_answer": instances[2].truth})
    report = run_dsr(settings, tmp_path, policy=ScriptedPolicy([code_only, enforce, maybe]))
    assert report["overall"]["exact"] == 1.0
    assert set(report["by_prompt_mode"]) == {"CodeOnly", "CodeEnforce", "CodeMaybe"}


@pytest.mark.slow
def test_tiny_transformers_model_run(tmp_path: Path) -> None:
    from embodia.policies import make_policy
    from embodia.policies.tiny_models import build_tiny_chat_lm

    model = build_tiny_chat_lm(tmp_path / "tiny-chat")
    policy = make_policy(f"hf:{model}")
    # the tiny model has a 1,024-token context: name-only descriptions and short operations fit
    settings = _settings(
        policy=f"hf:{model}",
        limit=3,
        tokens=24,
        description="name",
        operations=("stack.compound", "queue.compound", "array.access"),
    )
    report = run_dsr(settings, tmp_path / "run", policy=policy)
    records = [json.loads(line) for line in (tmp_path / "run" / ANSWERS_FILE).read_text().splitlines()]
    assert len(records) == 3 and all(0 < r["completion_tokens"] <= 24 for r in records)
    assert all(r["prompt_tokens"] > 100 for r in records)  # the whole prompt went in
    # random weights: whatever it says is scored, every failure classified
    assert sum(report["overall"]["failures"].values()) + round(report["overall"]["exact"] * 3) == 3


def test_any_instance_file_is_evaluated_and_resumed(tmp_path: Path) -> None:
    """Instances of the user's own (here: a file written by the generator, with one truth
    changed by hand), selected by length and operation as the suites are."""
    from embodia.envs.dsr import suites

    generated = list(suites.generate(("main",), lengths=("short", "medium"), operations=("queue.compound",)))[
        :4
    ]
    own = [replace(generated[0], id="mine/0", truth=[1, 2, 3]), *generated[1:]]
    path = tmp_path / "mine.jsonl"
    suites.write_jsonl(own, path)
    settings = _settings(instances=str(path), lengths=("short", "medium"), limit=None)
    chosen = select_instances(settings)
    assert [i.id for i in chosen] == [i.id for i in own]
    replies = ['{"final_answer": [1, 2, 3]}'] + [json.dumps({"final_answer": i.truth}) for i in own[1:3]]
    with pytest.raises(PolicyError):
        run_dsr(settings, tmp_path / "run", policy=ScriptedPolicy(replies))  # dies before the last
    report = run_dsr(settings, tmp_path / "run", policy=ScriptedPolicy(['{"final_answer": []}']))
    assert report["overall"]["n"] == 4 and report["overall"]["exact"] == pytest.approx(0.75, abs=1e-4)
    shorts = select_instances(_settings(instances=str(path), lengths=("short",), limit=None))
    assert [i.id for i in shorts] == [i.id for i in own if i.length == "short"] and shorts
    with pytest.raises(DSRError, match="no such file"):
        _settings(instances=str(tmp_path / "missing.jsonl"))
    with pytest.raises(DSRError, match="no instance of the lengths and operations"):
        select_instances(_settings(instances=str(path), operations=("stack.compound",)))
