"""The DiffThinker study at a tiny size: every stage runs and is recorded, resume returns the
finished summary, and the text policy's choice among candidates is its likeliest reply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from embodia.evals.diffusion_reasoning import (
    DiffusionStudyError,
    DiffusionStudySettings,
    _chat,
    _reply,
    choose_by_likelihood,
    run_diffusion_study,
)

TINY = DiffusionStudySettings(
    train_instances=400,
    test_instances=8,
    train_steps=20,
    batch_size=16,
    sampling_steps=(1, 2),
    answer_steps=2,
    samples=3,
    text_sft_instances=40,
    text_sft_steps=4,
    text_grpo_steps=1,
    text_grpo_prompts=2,
    text_grpo_group=2,
    log_every=5,
)


def test_the_study_runs_every_stage_and_resumes_finished(tmp_path: Path) -> None:
    out = tmp_path / "study"
    summary = run_diffusion_study(TINY, out)
    (line,) = [json.loads(x) for x in (out / "evals.jsonl").read_text().splitlines() if '"reasoner"' in x]
    assert set(line["reasoner"]["by_sampling_steps"]) == {"1", "2"}
    for number in (
        line["random_accuracy"],
        line["text"]["accuracy"],
        line["collaboration"]["accuracy"],
        line["reasoner"]["best_of_n_accuracy"],
    ):
        assert 0.0 <= number <= 1.0
    # best-of-n checks every sample, the first sample is one of them
    assert line["reasoner"]["best_of_n_accuracy"] >= line["reasoner"]["first_sample_accuracy"]
    assert (out / "seed-0" / "frames.png").is_file()
    assert (out / "seed-0" / "text" / "grpo" / "final").is_dir()
    losses = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in losses] == [5, 10, 15, 20]
    assert summary["random_accuracy"] == line["random_accuracy"]
    assert run_diffusion_study(TINY, out, resume=True) == summary


def test_the_collaborator_picks_its_likeliest_reply(tiny_chat_lm_dir: Path) -> None:
    from embodia.policies.spec import make_trainable_policy

    policy = make_trainable_policy(f"hf:{tiny_chat_lm_dir}")
    prompt = "Solve the maze."
    candidates = ["RRD", "DDLU", "RRD", ""]
    prompt_ids = policy._encode(_chat(prompt).messages, (), to_device=False)["input_ids"][0].tolist()
    alone = {}
    for moves in set(candidates):
        completion = policy.tokenizer(_reply(moves), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            scores = policy.completion_logps([prompt_ids], [completion])
        alone[moves] = float((scores.logps * scores.mask).sum())
    assert choose_by_likelihood(policy, prompt, candidates) == max(alone, key=alone.__getitem__)


def test_bad_settings_are_named() -> None:
    with pytest.raises(DiffusionStudyError, match="must not exceed train_instances"):
        DiffusionStudySettings(train_instances=10, text_sft_instances=20)
    with pytest.raises(DiffusionStudyError, match="sampling_steps"):
        DiffusionStudySettings(sampling_steps=(0,))
    with pytest.raises(DiffusionStudyError, match="difficulty"):
        DiffusionStudySettings(difficulty="enormous")
