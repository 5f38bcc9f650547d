"""``embodia eval diffusion-reasoning``: the DiffThinker study, a diffusion model that draws a
puzzle's solution, against a random solver, a text policy trained by SFT then GRPO, and the two
together."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from embodia.cli.root import bold, console, err_console, eval_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _diffusion_settings() -> type[Any]:
    from embodia.evals.diffusion_reasoning import DiffusionStudySettings

    return DiffusionStudySettings


EVAL_DIFFUSION_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "puzzle": FieldOption("The puzzle drawn: maze, frozenlake, sudoku or jigsaw."),
    "difficulty": FieldOption("The puzzle's size: easy, medium or hard."),
    "seeds": FieldOption("A seed, repeatable: one reasoner and one text policy per seed.", flag="--seed"),
    "train_instances": FieldOption(
        "Training instances of the reasoner (the text policy's are the first ones)."
    ),
    "test_instances": FieldOption("Held-out instances every solver answers."),
    "width": FieldOption("Channels of the reasoner's recurrent block."),
    "iterations": FieldOption("Passes of the reasoner's recurrent block."),
    "train_steps": FieldOption("Flow-matching steps of the reasoner."),
    "batch_size": FieldOption("The reasoner's batch size."),
    "learning_rate": FieldOption("The reasoner's peak learning rate (cosine decay)."),
    "sampling_steps": FieldOption("A sampling-step count to measure, repeatable.", flag="--sampling-steps"),
    "answer_steps": FieldOption("Sampling steps of the best-of-n and collaboration answers."),
    "samples": FieldOption("Samples per puzzle for best-of-n and the text policy's choice."),
    "text_policy": FieldOption("The chat LM to train (hf:DIR); default: a tiny random-weight one."),
    "text_sft_instances": FieldOption("Instances the text policy is fine-tuned on."),
    "text_sft_steps": FieldOption("SFT steps of the text policy (0 skips SFT)."),
    "text_sft_learning_rate": FieldOption(),
    "text_grpo_steps": FieldOption("GRPO steps of the text policy (0 skips GRPO)."),
    "text_grpo_prompts": FieldOption("Instances per GRPO step."),
    "text_grpo_group": FieldOption("Samples per instance in a GRPO group."),
    "text_grpo_learning_rate": FieldOption(),
    "log_every": FieldOption("Reasoner steps per metrics.jsonl line."),
}


@settings_command(eval_app, "diffusion-reasoning", _diffusion_settings, EVAL_DIFFUSION_OPTIONS)
def eval_diffusion_reasoning(
    options: dict[str, Any],
    out: Annotated[
        Path, typer.Option("--out", help="Run directory (evals.jsonl, metrics.jsonl, seed-N/, summary.json).")
    ],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Train a diffusion reasoner to draw puzzle solutions and a text policy (SFT then GRPO) on
    the same instances; report accuracy and seconds per answer by sampling steps, best-of-n,
    the random solver, the text policy, and the text policy choosing among the drawings."""
    from embodia.core.runs import RunFolder
    from embodia.evals.diffusion_reasoning import EVALS, DiffusionStudySettings, run_diffusion_study

    with user_errors():
        RunFolder(out, EVALS)  # --out is checked before anything else
        settings = DiffusionStudySettings(**options)
        with err_console.status(f"training and measuring {len(settings.seeds)} seed(s)"):
            summary = run_diffusion_study(settings, out, resume=resume)
    for steps, accuracy in summary["accuracy_by_sampling_steps"].items():
        seconds = summary["seconds_per_answer_by_sampling_steps"][steps]
        console.print(
            f"diffusion, {steps} sampling step(s): accuracy {accuracy:.3f}, {1000 * seconds:.1f} ms/answer",
            highlight=False,
        )
    text, together = summary["text_accuracy"], summary["collaboration_accuracy"]
    console.print(
        f"diffusion best-of-{settings.samples} {summary['diffusion_best_of_n_accuracy']:.3f}; "
        f"random solver {summary['random_accuracy']:.3f}; "
        + (
            f"text policy {text:.3f}; text policy choosing among the drawings {together:.3f}"
            if text is not None
            else f"no text policy (the {settings.puzzle} has no text drawing)"
        ),
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        "partial scores (the checker's, first sample): "
        f"diffusion {summary['diffusion_first_sample_score']:.3f}, "
        f"random solver {summary['random_score']:.3f}"
        + (f", text policy {summary['text_score']:.3f}" if text is not None else ""),
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"wrote {bold(out)}")
