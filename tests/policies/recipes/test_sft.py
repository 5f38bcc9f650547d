"""The SFT recipe on a tiny model and generated DSR solutions: an honest learning signal (held-out
loss far below the untrained model's and below a context-free baseline, answers in the env's
format), the run folder, resume from the last checkpoint, LoRA merged into ``final``, packing,
and bad input named."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from embodia.core.chat import PolicyError
from embodia.core.random_weights import TRAINED_BY, read_marker
from embodia.envs.dsr.env import score_answer
from embodia.errors import EmbodiaError
from embodia.policies import make_policy
from embodia.policies.recipes.sft import (
    SFTError,
    SFTSettings,
    load_records,
    run_sft,
    trainer_rows,
    unigram_entropy,
)
from embodia.policies.recipes.solutions import dsr_instances, dsr_solution_records

HELD_OUT = range(10_000, 10_032)


@pytest.fixture(scope="module")
def train_records() -> tuple[dict[str, Any], ...]:
    return tuple(dsr_solution_records(range(240)))


@pytest.fixture(scope="module")
def held_out_records() -> tuple[dict[str, Any], ...]:
    return tuple(dsr_solution_records(HELD_OUT))


def _settings(model_dir: Path, data: Any, **overrides: Any) -> SFTSettings:
    values: dict[str, Any] = {
        "model": f"hf:{model_dir}",
        "data": data,
        "learning_rate": 3e-3,
        "lr_scheduler": "constant",
        "batch_size": 8,
        "max_length": 320,
        "logging_steps": 4,
        **overrides,
    }
    return SFTSettings(**values)


@pytest.mark.slow
def test_sft_learns_the_answer_format(
    tiny_chat_lm_dir: Path, train_records, held_out_records, tmp_path
) -> None:
    """24 steps of 8 records: the held-out completion loss falls far below the untrained
    model's and below the unigram entropy of the held-out targets (the best a predictor that
    ignores the context can do), and the saved model answers held-out prompts in the format
    the DSR env's scorer reads."""
    lines: list[dict[str, Any]] = []
    out = tmp_path / "run"
    settings = _settings(
        tiny_chat_lm_dir, train_records, eval_data=held_out_records, max_steps=24, save_steps=100
    )
    summary = run_sft(settings, out, on_log=lines.append)

    assert summary["steps"] == 24
    assert summary["eval_loss_start"] > 5.0  # random weights: worse than uniform over the vocabulary
    assert summary["eval_loss"] < 0.2 * summary["eval_loss_start"]
    assert summary["eval_loss"] < 0.6 * summary["eval_unigram_entropy"]
    assert summary["train_loss_last"] < summary["train_loss_first"]

    written = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert written == lines
    train_lines = [line for line in written if "loss" in line]
    assert [line["step"] for line in train_lines] == [4, 8, 12, 16, 20, 24]
    assert all(line["tokens_per_s"] > 0 and line["learning_rate"] == 3e-3 for line in train_lines)
    assert all(b["tokens"] > a["tokens"] for a, b in zip(train_lines, train_lines[1:], strict=False))
    assert [line["step"] for line in written if "eval_loss" in line] == [0, 24]
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "data_sha256" in (out / "config.yaml").read_text()

    policy = make_policy(summary["policy"])
    # trained from a random-weight build: still a toy, and its loader says so
    assert policy.name.endswith("(random weights)")
    assert read_marker(out / "final")[TRAINED_BY] == ["sft"]
    assert "Its starting point had random weights" in (out / "final" / "README.md").read_text()
    replies = []
    for record, instance in zip(held_out_records[:8], dsr_instances(HELD_OUT[:8]), strict=True):
        reply = policy.complete(record["messages"][:-1], max_tokens=16, temperature=0).text
        replies.append(reply)
        assert score_answer(reply, instance, "none").failure != "parse", replies


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def test_a_killed_run_resumes_from_its_last_checkpoint(
    tiny_chat_lm_dir: Path, train_records, tmp_path
) -> None:
    """A run killed after step 5 with checkpoints at 2 and 4 (and a torn one at 6): the
    resumed run continues from step 4, makes the lines after it again, and ends with the
    weights of the uninterrupted run."""
    settings = _settings(
        tiny_chat_lm_dir, train_records[:24], max_steps=6, batch_size=4, logging_steps=1, save_steps=2
    )
    whole = run_sft(settings, tmp_path / "whole")
    out = tmp_path / "killed"
    run_sft(settings, out)
    # what a kill while saving checkpoint 6 leaves: no final model, no summary, a torn checkpoint
    shutil.rmtree(out / "final")
    (out / "summary.json").unlink()
    (out / "checkpoints" / "checkpoint-6" / "trainer_state.json").unlink()
    metrics = out / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(lines[:5]) + "\n" + lines[5][:10])  # step 6 torn mid-write

    with pytest.raises(EmbodiaError, match="already holds a run"):
        run_sft(settings, out)
    with pytest.raises(EmbodiaError, match="max_steps: 6 -> 7"):
        run_sft(
            _settings(
                tiny_chat_lm_dir, train_records[:24], max_steps=7, batch_size=4, logging_steps=1, save_steps=2
            ),
            out,
            resume=True,
        )

    resumed = run_sft(settings, out, resume=True)
    assert resumed["resumed_from_step"] == 4 and resumed["steps"] == 6
    assert (out / "checkpoints" / "checkpoint-6.incomplete").is_dir()
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]
    expected, got = _weights(Path(whole["final"])), _weights(Path(resumed["final"]))
    assert expected.keys() == got.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
    assert run_sft(settings, out, resume=True) == json.loads((out / "summary.json").read_text())


def test_lora_is_merged_into_the_final_model(tiny_chat_lm_dir: Path, train_records, tmp_path) -> None:
    settings = _settings(
        tiny_chat_lm_dir, train_records[:16], max_steps=2, lora_r=4, lora_targets=("q_proj", "v_proj")
    )
    summary = run_sft(settings, tmp_path / "lora")
    final = Path(summary["final"])
    assert not (final / "adapter_config.json").exists()
    base, tuned = _weights(tiny_chat_lm_dir), _weights(final)
    assert base.keys() == tuned.keys()  # no lora_A / lora_B left: merged into the base weights
    changed = {name for name in base if not torch.equal(base[name], tuned[name])}
    assert changed and all("q_proj.weight" in n or "v_proj.weight" in n for n in changed)
    full = sum(t.numel() for t in base.values())
    assert 0 < summary["trainable_parameters"] < full / 20
    make_policy(summary["policy"])  # loads as hf:OUT/final


def test_packing_and_prompt_completion_records(tiny_chat_lm_dir: Path, tmp_path) -> None:
    records = tuple(
        {"prompt": "Which waypoint leads to the kitchen? Answer: ", "completion": str(n)} for n in range(40)
    )
    summary = run_sft(
        _settings(tiny_chat_lm_dir, records, max_steps=2, packing=True, max_length=64), tmp_path / "p"
    )
    assert summary["steps"] == 2 and math.isfinite(summary["train_loss_mean"])


def test_trainer_rows_put_the_loss_on_the_last_assistant_message() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"},
        ]
    }
    (row,) = trainer_rows([chat], completion_only_loss=True)
    assert row["prompt"] == chat["messages"][:-1] and row["completion"] == chat["messages"][-1:]
    assert trainer_rows([chat], completion_only_loss=False) == [{"messages": chat["messages"]}]
    plain = {"prompt": "2+2=", "completion": "4"}
    assert trainer_rows([plain], completion_only_loss=True) == [plain]
    assert trainer_rows([plain], completion_only_loss=False) == [{"text": "2+2=4"}]


def test_unigram_entropy() -> None:
    assert unigram_entropy([[-100, 1, 2], [1, 2, -100]]) == pytest.approx(math.log(2))
    assert unigram_entropy([[7, 7, 7]]) == 0.0
    with pytest.raises(SFTError, match="no trained-on tokens"):
        unigram_entropy([[-100]])


def test_a_model_directory_without_tokenizer_is_named(
    tiny_chat_lm_dir: Path, train_records, tmp_path
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(tiny_chat_lm_dir / name, bare / name)
    with pytest.raises(SFTError, match="has no tokenizer"):
        run_sft(_settings(bare, train_records[:4], max_steps=1), tmp_path / "run")
    assert not (tmp_path / "run").exists()  # a run that failed before its first record leaves nothing
    with pytest.raises(SFTError, match="cannot load the model"):
        run_sft(_settings(tmp_path / "missing", train_records[:4], max_steps=1), tmp_path / "run")


def test_unknown_lora_targets_are_named(tiny_chat_lm_dir: Path, train_records, tmp_path) -> None:
    with pytest.raises(SFTError, match="cannot set up SFT"):
        run_sft(
            _settings(tiny_chat_lm_dir, train_records[:4], max_steps=1, lora_r=2, lora_targets=("nope",)),
            tmp_path / "r",
        )


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"model": "openai:http://x/v1?model=m"}, "must be hf:DIR"),
        ({"model": "nope"}, "SCHEME:TARGET"),
        ({"epochs": 0}, "epochs must be a positive number"),
        ({"max_steps": -1}, "max_steps must be in 0..100,000"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"lr_scheduler": "step"}, "unknown lr_scheduler"),
        ({"batch_size": 0}, "batch_size must be in"),
        ({"max_length": 4}, "max_length must be in"),
        ({"lora_targets": ("q_proj",)}, "lora_r is 0"),
        ({"lora_r": 4, "lora_dropout": 1.0}, "lora_dropout"),
        ({"seed": -1}, "seed"),
        ({"data": ""}, "data is empty"),
        ({"data": [{"prompt": "a", "completion": "b"}]}, "tuple of records"),
    ],
)
def test_bad_settings_are_named(overrides: dict[str, Any], problem: str) -> None:
    values: dict[str, Any] = {"model": "hf:/some/dir", "data": "data.jsonl", **overrides}
    with pytest.raises((SFTError, PolicyError), match=problem):
        SFTSettings(**values)


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (
            ['{"messages": [{"role": "user", "content": "hi"}]}'],
            "line 1: the last message must be the assistant",
        ),
        (['{"messages": [{"role": "robot", "content": "hi"}]}'], "line 1: message 0 must have a role"),
        (['{"messages": [{"role": "assistant", "content": 3}]}'], "no string content"),
        (['{"prompt": "a", "completion": ""}'], "completion is empty"),
        (['{"text": "a"}'], "expected"),
        (
            ['{"prompt": "a", "completion": "b"}', '{"messages": [{"role": "assistant", "content": "b"}]}'],
            "mixes chat records and prompt/completion",
        ),
        (['{"prompt": "a", "completion": "b"}', "{oops"], "line 2: bad JSON"),
        ([], "holds no records"),
    ],
)
def test_bad_data_is_named(tmp_path: Path, lines: list[str], problem: str) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(SFTError, match=problem):
        load_records(str(path))


def test_a_missing_data_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SFTError, match="data file not found"):
        load_records(str(tmp_path / "none.jsonl"))


@pytest.mark.slow
def test_a_vlm_learns_image_records_and_stays_a_vlm(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    """Chat records with images (paths relative to the JSONL file): the held-out loss falls
    below the context-free baseline, so the replies use the images, and ``final`` is a VLM."""
    from embodia.evals.backdoor import vqa_records, write_records

    train = write_records(vqa_records(tmp_path / "data", 1, 120), tmp_path / "data" / "train.jsonl")
    held_out = write_records(vqa_records(tmp_path / "data", 2, 30), tmp_path / "data" / "held_out.jsonl")
    summary = run_sft(
        SFTSettings(
            model=f"hf:{tiny_vlm_dir}",
            data=str(train),
            eval_data=str(held_out),
            max_steps=80,
            batch_size=8,
            learning_rate=1e-3,
            logging_steps=20,
        ),
        tmp_path / "run",
    )
    assert summary["eval_loss"] < summary["eval_unigram_entropy"] < summary["eval_loss_start"]
    assert make_policy(summary["policy"]).accepts_images  # type: ignore[attr-defined]


def test_image_records_are_checked(tiny_vlm_dir: Path, tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    chat = {"messages": [{"role": "user", "content": "Colour?"}, {"role": "assistant", "content": "red"}]}
    (tmp_path / "a.png").write_bytes(b"")
    with pytest.raises(SFTError, match="images go with chat records"):
        load_records(({"prompt": "p", "completion": "c", "images": ["a.png"]},))
    with pytest.raises(SFTError, match=r"images must be a list of 1 to \d+ image file paths"):
        load_records(({**chat, "images": []},))
    with pytest.raises(SFTError, match="train_reply goes with image records"):
        load_records(({**chat, "train_reply": False},))
    with pytest.raises(SFTError, match="train_reply must be true or false"):
        load_records(({**chat, "images": [str(tmp_path / "a.png")], "train_reply": "no"},))
    with pytest.raises(SFTError, match="content in parts goes with images"):
        load_records(
            (
                {
                    "messages": [
                        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                        chat["messages"][1],
                    ]
                },
            )
        )
    with pytest.raises(SFTError, match=r"places 2 image\(s\) but the record has 1"):
        two = [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Colour?"}]
        load_records(
            (
                {
                    "messages": [{"role": "user", "content": two}, chat["messages"][1]],
                    "images": [str(tmp_path / "a.png")],
                },
            )
        )
    with pytest.raises(SFTError, match="has no images while other records do"):
        load_records(({**chat, "images": [str(tmp_path / "a.png")]}, chat))
    with pytest.raises(SFTError, match="image file 'b.png' not found"):
        load_records(({**chat, "images": ["b.png"]},))
    system_only = {"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "x"}]}
    with pytest.raises(SFTError, match="no user message"):
        load_records(({**system_only, "images": ["a.png"]},))
    image_records = ({**chat, "images": [str(tmp_path / "a.png")]},)
    with pytest.raises(SFTError, match="text-only model"):
        run_sft(_settings(tiny_chat_lm_dir, image_records, max_steps=1), tmp_path / "text")
    with pytest.raises(SFTError, match="vision-language model"):
        run_sft(_settings(tiny_vlm_dir, (chat,), max_steps=1), tmp_path / "vlm")
    with pytest.raises(SFTError, match="cannot be packed"):
        run_sft(_settings(tiny_vlm_dir, image_records, max_steps=1, packing=True), tmp_path / "packed")
