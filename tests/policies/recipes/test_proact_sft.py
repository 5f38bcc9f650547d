"""Proact-VL fine-tuning on the tiny VLM: the per-second records, the gate read at the flag
exactly where the frozen gate reads it, the joint run's folder and gate (loaded by a stream
agent, which writes its own lines), resume after a kill with the head's state, and bad
input named. Whether it learns is the recipes benchmark's (``docs/streams.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from killed_runs import kill_after_step
from safetensors.torch import load_file

from embodia.envs.streams.sources import open_stream
from embodia.errors import EmbodiaError
from embodia.policies.recipes import proact_sft
from embodia.policies.recipes.sft import OBJECTIVE_WEIGHTS, image_batch, load_records, load_vlm
from embodia.policies.speak_gate import (
    FLAG,
    FlagFeatures,
    LearnedGate,
    ProactSpeaker,
    ResponseHead,
    stream_labels,
)
from embodia.policies.trainable import save_model_folder

SPECS = ("procedural:arena,seed=1,duration=8", "procedural:arena,seed=2,duration=8")


def _settings(model: Path, **changes: Any) -> proact_sft.ProactSFTSettings:
    values: dict[str, Any] = {
        "model": f"hf:{model}",
        "streams": SPECS,
        "window": 4,
        "max_steps": 4,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_steps": 2,
        **changes,
    }
    return proact_sft.ProactSFTSettings(**values)


def test_one_record_per_second_with_its_line_or_silence(tmp_path: Path) -> None:
    stream = open_stream(SPECS[0], "solo")
    records = proact_sft.stream_records(stream, 3, tmp_path)
    assert [r["second"] for r in records] == list(stream.seconds) and {r["clip"] for r in records} == {3}
    assert [r["gate"] for r in records] == [int(v) for v in stream_labels(stream).tolist()]
    assert any(r["gate"] for r in records) and not all(r["gate"] for r in records)
    for record in records:
        user, reply = record["messages"]
        assert user["content"][-1] == {"type": "text", "text": FLAG}
        assert sum(p["type"] == "image" for p in user["content"]) == len(record["images"]) == 2
        expected = stream.label.get(record["second"]) or proact_sft.SILENCE
        assert reply["content"] == expected
        assert record["train_reply"] == (reply["content"] != proact_sft.SILENCE)
        assert all((tmp_path / name).is_file() for name in record["images"])
    # the SFT recipe reads them as image records with content in parts
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert len(load_records(str(path))) == len(records)


def test_the_gate_reads_the_flag_state_the_frozen_gate_reads(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    """The objective's logits on a training batch equal the head applied to FlagFeatures'
    vectors for the same chunks: same layer, same token, the reply after it unseen."""
    features = FlagFeatures(tiny_vlm_dir)
    start = save_model_folder(features.model, features.processor, tmp_path / "start", source=tiny_vlm_dir)
    stream = open_stream(SPECS[0], "solo")
    path = tmp_path / "data" / "train.jsonl"
    records = proact_sft.stream_records(stream, 0, path.parent)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    loaded = load_records(str(path))[:4]
    processor, model = load_vlm(f"hf:{start}")
    torch.manual_seed(0)
    head = ResponseHead(int(model.config.text_config.hidden_size))
    objective = proact_sft.GateObjective(head, features.flag_id, -2, 1.0)
    batch = image_batch(processor, loaded, max_length=4096)
    labels = batch.pop("labels")
    # a silent second's reply is not trained on; a line is
    for row, record in enumerate(loaded):
        assert bool((labels[row] != -100).any()) == record["train_reply"]
    with torch.no_grad(), objective.capture(model):
        model(**batch)
        logits = objective.logits(batch["input_ids"], batch["attention_mask"])
    frozen = FlagFeatures(start).batch([stream.chunk(s) for s in range(4)])
    torch.testing.assert_close(logits, head(frozen), rtol=1e-3, atol=1e-3)  # batch shapes differ
    last_layer = proact_sft.GateObjective(head, features.flag_id, -1, 1.0)
    with pytest.raises(EmbodiaError, match="not an inner decoder layer"), last_layer.capture(model):
        pass


def test_a_joint_run_writes_a_gate_that_speaks_with_its_own_model(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = proact_sft.run_proact_sft(_settings(tiny_vlm_dir), out)
    assert summary["records"] == 16 and 0 < summary["speaking_records"] < 16
    metrics = [json.loads(line) for line in (out / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert all(m["gate_loss"] > 0 for m in metrics)
    assert (out / "sft" / "checkpoints" / "checkpoint-2" / OBJECTIVE_WEIGHTS).is_file()
    meta = json.loads((out / "gate" / "gate.json").read_text())
    assert meta["speaks"] is True and Path(meta["model_dir"]) == (out / "sft" / "final").resolve()
    gate = LearnedGate.from_dir(out / "gate")
    assert gate.speaks and gate.features.added_tokens == []  # the fine-tuned model has the tokens
    trained = load_file(str(out / "sft" / "final" / OBJECTIVE_WEIGHTS))
    torch.testing.assert_close(gate.head.state_dict()["down_proj.weight"], trained["down_proj.weight"])
    stream = open_stream("procedural:arena,seed=9,duration=3", "solo")
    scores = gate.scores(stream)
    assert len(scores) == 3 and all(0 <= p <= 1 for p in scores)

    class Request:
        chunk = stream.chunk(0)
        max_words = 6
        on_text = None

    line = ProactSpeaker(gate).line(Request())
    assert isinstance(line, str) and "\n" not in line
    assert proact_sft.run_proact_sft(_settings(tiny_vlm_dir), out, resume=True) == summary


def test_a_killed_run_resumes_the_model_and_the_head(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tiny_vlm_dir, lora_r=0)
    whole = proact_sft.run_proact_sft(settings, tmp_path / "whole")
    out = tmp_path / "killed"
    killed = kill_after_step(settings, "run_proact_sft", out, 3)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (out / "summary.json").exists()
    resumed = proact_sft.run_proact_sft(settings, out, resume=True)
    assert resumed["sft"]["steps"] == 4
    for name in ("model.safetensors", OBJECTIVE_WEIGHTS):
        expected = load_file(str(tmp_path / "whole" / "sft" / "final" / name))
        got = load_file(str(out / "sft" / "final" / name))
        for key in expected:
            torch.testing.assert_close(got[key], expected[key], rtol=0, atol=1e-5, msg=f"{name}: {key}")
    assert whole["gate_loss_last"] == pytest.approx(resumed["gate_loss_last"], abs=1e-5)


def test_bad_input_is_named(tiny_vlm_dir: Path, tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(EmbodiaError, match="at least one training stream"):
        _settings(tiny_vlm_dir, streams=())
    with pytest.raises(EmbodiaError, match="scenario"):
        _settings(tiny_vlm_dir, scenarios=("debate",))
    with pytest.raises(EmbodiaError, match="window"):
        _settings(tiny_vlm_dir, window=1)
    with pytest.raises(EmbodiaError, match="text-only"):
        proact_sft.run_proact_sft(_settings(tiny_chat_lm_dir), tmp_path / "text")
    with pytest.raises(EmbodiaError, match="source"):
        proact_sft.run_proact_sft(_settings(tiny_vlm_dir, streams=("arena",)), tmp_path / "bad")


@pytest.mark.parametrize(
    ("scenario", "marker"), [("co-commentary", "<|history_start|>"), ("guidance", "<|query_start|>")]
)
def test_co_commentary_and_guidance_records_carry_what_was_heard_and_asked(
    scenario: str, marker: str, tmp_path: Path
) -> None:
    """A co-caster's lines come into the next second's turn as history, a player's question as
    the query, and the labels are the active speaker's own."""
    stream = open_stream("procedural:arena,seed=1,duration=30", scenario)
    records = proact_sft.stream_records(stream, 0, tmp_path)
    texts = [[p["text"] for p in r["messages"][0]["content"] if p["type"] == "text"] for r in records]
    assert any(marker in text for turn in texts for text in turn)
    assert [r["gate"] for r in records] == [int(v) for v in stream_labels(stream).tolist()]
    for record, turn in zip(records, texts, strict=True):
        chunk = stream.chunk(record["second"])
        assert (marker in "".join(turn)) == bool(
            chunk.history if scenario == "co-commentary" else chunk.query
        )
