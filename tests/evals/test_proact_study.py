"""The Proact-VL study's run folder on a tiny budget: both gates trained, three agents run on
each held-out stream, their numbers and the decision F1 (checked by hand), and resume. Its
numbers are the recipes benchmark's (``docs/streams.md``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodia.core.scores import f1
from embodia.errors import EmbodiaError
from embodia.evals import proact_study


def test_the_study_runs_three_agents_and_resumes(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    settings = proact_study.ProactStudySettings(
        model=f"hf:{tiny_vlm_dir}",
        train_seeds=(0, 1),
        held_out_seeds=(100,),
        duration=8,
        epochs=1.0,
        window=4,
        gate_epochs=5,
    )
    out = tmp_path / "study"
    summary = proact_study.run_proact_study(settings, out)
    lines = [json.loads(line) for line in (out / "evals.jsonl").read_text().splitlines()]
    assert [(line["agent"], line["stream"]) for line in lines] == [(a, 100) for a in proact_study.AGENTS]
    for line in lines:
        run = out / "runs" / line["agent"] / "100"
        decisions = [json.loads(d) for d in (run / "decisions.jsonl").read_text().splitlines()]
        label = json.loads((run / "labels.jsonl").read_text())["label"]
        spoke = {d["second"] for d in decisions if d["speaker"]}
        expected = f1(spoke, {int(s) for s in label})
        assert expected is not None and line["decision_f1"] == pytest.approx(expected["f1"])
        assert summary[line["agent"]]["f1_macro"] == line["f1_macro"]
    assert json.loads((out / "frozen_gate" / "gate.json").read_text()).get("speaks") is None
    assert json.loads((out / "finetune" / "gate" / "gate.json").read_text())["speaks"] is True
    # cut after two agents: the resumed study runs the third only
    (out / "summary.json").unlink()
    (out / "evals.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines[:2]))
    assert proact_study.run_proact_study(settings, out, resume=True) == summary
    with pytest.raises(EmbodiaError, match="also a training stream"):
        proact_study.ProactStudySettings(model=f"hf:{tiny_vlm_dir}", train_seeds=(1, 2), held_out_seeds=(2,))
    with pytest.raises(EmbodiaError, match="finetune"):
        proact_study.ProactStudySettings(model=f"hf:{tiny_vlm_dir}", finetune={"gate_wieght": 2.0})
