"""``embodia eval rewards`` and ``embodia train reward-model``: CMI-style music reward models,
scored on a bench file of preference pairs, and trained on synthetic music."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from embodia.cli.root import bold, console, err_console, eval_app, train_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _eval_settings() -> type[Any]:
    from embodia.evals.reward_bench import RewardEvalSettings

    return RewardEvalSettings


def _study_settings() -> type[Any]:
    from embodia.evals.reward_bench import RewardStudySettings

    return RewardStudySettings


EVAL_REWARDS_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "model": FieldOption("The reward model folder (embodia train reward-model writes one in OUT/model)."),
    "bench": FieldOption("The bench file: JSONL preference pairs (docs/rewards.md)."),
    "tie_margin": FieldOption("Scores closer than this are the model's tie."),
    "batch_size": FieldOption("Pairs scored per batch."),
}

TRAIN_REWARD_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "train_pairs": FieldOption("Synthetic preference pairs to train on."),
    "test_pairs": FieldOption("Held-out pairs (other seeds), written to OUT/bench.jsonl."),
    "steps": FieldOption("Optimiser steps."),
    "batch_pairs": FieldOption("Pairs per step."),
    "learning_rate": FieldOption("AdamW's peak learning rate (cosine decay)."),
    "smoothing": FieldOption("Label smoothing of the Bradley-Terry targets."),
    "regression_weight": FieldOption("Weight of the regression loss on the pairs' pseudo-labels (0: none)."),
    "width": FieldOption("The fusion transformers' width."),
    "text_hidden": FieldOption("The text encoder's width."),
    "log_every": FieldOption("Steps per metrics.jsonl line."),
    "seed": FieldOption(),
}


def _print_accuracy(name: str, measured: dict[str, Any]) -> None:
    console.print(
        f"{name}: pairwise accuracy musicality {measured['musicality']['accuracy']:.3f}, "
        f"alignment {measured['alignment']['accuracy']:.3f} (ties count 0.5)",
        highlight=False,
        soft_wrap=True,
    )


@settings_command(eval_app, "rewards", _eval_settings, EVAL_REWARDS_OPTIONS)
def eval_rewards(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory (scores.jsonl, summary.json).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Score every preference pair of a bench file with a reward model: pairwise accuracy per
    dimension, by modality subset and by degradation."""
    from embodia.core.runs import RunFolder
    from embodia.evals.reward_bench import SCORES, RewardEvalSettings, run_reward_eval

    with user_errors():
        RunFolder(out, SCORES)  # --out is checked before anything else
        settings = RewardEvalSettings(**options)
        with err_console.status("scoring the bench's pairs"):
            summary = run_reward_eval(settings, out, resume=resume)
    _print_accuracy(f"{summary['pairs']} pairs", summary)
    console.print(f"wrote {bold(out)}")


@settings_command(train_app, "reward-model", _study_settings, TRAIN_REWARD_OPTIONS)
def train_reward_model(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory (model/, bench.jsonl, metrics.jsonl).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Train a CMI-style music reward model from scratch on synthetic preference pairs and
    measure it on held-out pairs against its untrained start."""
    from embodia.core.runs import RunFolder
    from embodia.evals.reward_bench import STAGES, RewardStudySettings, run_reward_study

    with user_errors():
        RunFolder(out, STAGES)
        settings = RewardStudySettings(**options)
        with err_console.status(f"training on {settings.train_pairs} pairs for {settings.steps} steps"):
            summary = run_reward_study(settings, out, resume=resume)
    _print_accuracy("untrained", summary["untrained"])
    _print_accuracy("trained", summary["trained"])
    console.print(
        f"the model in {bold(Path(out) / 'model')}, its held-out bench in {bold(Path(out) / 'bench.jsonl')}"
    )
