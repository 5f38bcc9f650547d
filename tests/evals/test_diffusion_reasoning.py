"""The DiffThinker study at a tiny size: every stage runs and is recorded, resume returns the
finished summary, and the text policy's choice among candidates is its likeliest reply."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from embodia.evals.diffusion_reasoning import (
    DiffusionStudyError,
    DiffusionStudySettings,
    _chat,
    choose_by_likelihood,
    run_diffusion_study,
)
from embodia.policies.diffusion_reasoner import puzzle_images

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

    # cut after the training, before the seed's line: the resumed run keeps the trained models
    # and their loss curve, and measures the same accuracies again
    (out / "summary.json").unlink()
    (out / "evals.jsonl").write_text("")
    again = run_diffusion_study(TINY, out, resume=True)
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [
        5,
        10,
        15,
        20,
    ]
    for key in (
        "accuracy_by_sampling_steps",
        "diffusion_best_of_n_accuracy",
        "text_accuracy",
        "random_accuracy",
    ):
        assert again[key] == summary[key], key
    assert again["text_train_seconds"] == summary["text_train_seconds"]  # kept, not re-measured

    # the command line reaches the same study: with these settings it finds it finished
    from typer.testing import CliRunner

    from embodia.cli import app

    flags = [f"--{key.replace('_', '-')}" for key in ("train_instances", "test_instances", "train_steps")]
    args = ["eval", "diffusion-reasoning", "--out", str(out), "--resume", "--seed", "0"]
    args += [flags[0], "400", flags[1], "8", flags[2], "20", "--batch-size", "16"]
    args += ["--sampling-steps", "1", "--sampling-steps", "2", "--answer-steps", "2", "--samples", "3"]
    args += ["--text-sft-instances", "40", "--text-sft-steps", "4", "--text-grpo-steps", "1"]
    args += ["--text-grpo-prompts", "2", "--text-grpo-group", "2", "--log-every", "5"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"diffusion best-of-3 {summary['diffusion_best_of_n_accuracy']:.3f}" in result.output
    assert "diffusion, 2 sampling step(s): accuracy" in result.output


@pytest.mark.parametrize("puzzle", ["sudoku", "jigsaw"])
def test_the_study_draws_sudoku_and_jigsaw_with_their_partial_scores(tmp_path: Path, puzzle: str) -> None:
    """The same stages on the other two puzzles: answers are digit strings and tile lists, and
    the checker's partial score (blank cells right, tiles in place) is reported beside accuracy."""
    settings = dataclasses.replace(
        TINY, puzzle=puzzle, train_instances=60, text_sft_instances=20, text_sft_steps=2, text_grpo_steps=0
    )
    summary = run_diffusion_study(settings, tmp_path / puzzle)
    (line,) = summary["per_seed"]
    for arm in ("diffusion_first_sample_score", "random_score"):
        assert 0.0 <= summary[arm] <= 1.0, arm
    assert line["reasoner"]["first_sample_score"] >= line["reasoner"]["first_sample_accuracy"]
    if puzzle == "sudoku":
        # a random digit among those the givens leave open is right about half the time
        assert 0.3 < summary["random_score"] < 0.7
        assert 0.0 <= summary["text_score"] <= 1.0
        assert 0.0 <= summary["collaboration_accuracy"] <= 1.0
    else:
        # a text-only policy cannot see a jigsaw: its arms are not run, and say so
        assert line["text"] is None and line["collaboration"] is None
        assert summary["text_accuracy"] is None and summary["collaboration_accuracy"] is None
        assert not (tmp_path / puzzle / "seed-0" / "text").exists()
    assert (tmp_path / puzzle / "seed-0" / "frames.png").is_file()


def test_the_collaborator_picks_its_likeliest_reply_per_token(tiny_chat_lm_dir: Path) -> None:
    from embodia.policies.spec import make_trainable_policy

    policy = make_trainable_policy(f"hf:{tiny_chat_lm_dir}")
    prompt = "Solve the maze."
    candidates = ["RRD", "DDLU", "RRD", ""]
    prompt_ids = policy._encode(_chat(prompt).messages, (), to_device=False)["input_ids"][0].tolist()
    alone = {}
    for moves in set(candidates):
        completion = policy.tokenizer(json.dumps({"path": moves}), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            scores = policy.completion_logps([prompt_ids], [completion])
        alone[moves] = float((scores.logps * scores.mask).sum() / scores.mask.sum())
    chosen = choose_by_likelihood(policy, prompt, candidates, puzzle_images("maze").task)
    assert chosen == max(alone, key=alone.__getitem__)


def test_bad_settings_are_named() -> None:
    with pytest.raises(DiffusionStudyError, match="must not exceed train_instances"):
        DiffusionStudySettings(train_instances=10, text_sft_instances=20)
    with pytest.raises(DiffusionStudyError, match="sampling_steps"):
        DiffusionStudySettings(sampling_steps=(0,))
    with pytest.raises(DiffusionStudyError, match="difficulty"):
        DiffusionStudySettings(difficulty="enormous")


def test_the_collaborator_compares_tile_lists_as_answers(tiny_chat_lm_dir: Path) -> None:
    from embodia.policies.spec import make_trainable_policy

    policy = make_trainable_policy(f"hf:{tiny_chat_lm_dir}")
    candidates = [[1, 0, 3, 2], [2, 3, 0, 1], [1, 0, 3, 2]]
    chosen = choose_by_likelihood(policy, "Reassemble the picture.", candidates, puzzle_images("jigsaw").task)
    assert chosen in candidates


def test_a_new_run_cut_after_training_keeps_its_reasoner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure in the text policy's stage comes after minutes of the reasoner's training: the
    folder stays (it holds a record), and the resumed run loads the reasoner, not retrains it."""
    import embodia.evals.diffusion_reasoning as study

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the text policy's stage failed")

    out = tmp_path / "study"
    monkeypatch.setattr(study, "train_text_policy", broken)
    with pytest.raises(RuntimeError, match="text policy"):
        run_diffusion_study(TINY, out)
    assert (out / "seed-0" / "reasoner.safetensors").is_file()
    (note,) = [json.loads(x) for x in (out / "evals.jsonl").read_text().splitlines() if '"stage"' in x]
    assert note["stage"] == "reasoner trained" and note["seed"] == 0
    losses = (out / "metrics.jsonl").read_text()
    monkeypatch.undo()
    summary = run_diffusion_study(TINY, out, resume=True)
    assert (out / "metrics.jsonl").read_text() == losses  # not trained again
    assert summary["diffusion_train_seconds"] == note["train_seconds"]
