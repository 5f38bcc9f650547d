"""``embodia lift``: absorb a long document into a LoRA-tuned copy of a model, then answer
questions about it without the document in the context (LIFT, docs/training.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from embodia.cli.root import app, bold, console, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _lift_settings() -> type[Any]:
    from embodia.policies.recipes.lift import LIFTSettings

    return LIFTSettings


LIFT_OPTIONS: OptionTable = {
    "document": FieldOption("The long input, a UTF-8 text file.", flag="--doc"),
    "questions": OWN,
    "model": FieldOption("The model to fine-tune: hf:DIR.", flag="--policy"),
    "generator": FieldOption(
        "The policy that writes the question-answer pairs, e.g. openai:http://127.0.0.1:8000/v1?model=NAME."
    ),
    "out": OWN,
    "resume": OWN,
    "title": FieldOption("How questions name the document (default: the file's name)."),
    "tasks_per_sentence": FieldOption("Pairs asked for per sentence."),
    "context_chars": FieldOption("Characters before a sentence given with it as its passage."),
    "max_sentence_chars": FieldOption(
        "Pack sentences into pieces of at most this many characters (-1: none)."
    ),
    "needle_only": FieldOption("Ask for pairs only about sentences unrelated to their passage."),
    "concurrency": FieldOption("Generator calls in flight at once."),
    "max_retries": FieldOption("Tries after the first for a reply that cannot be read."),
    "generator_max_tokens": FieldOption("Tokens a generator reply may take."),
    "overlap": FieldOption("Train on the first pairs while the rest are generated."),
    "epochs": FieldOption("Passes over the pairs."),
    "learning_rate": FieldOption("AdamW's learning rate (constant)."),
    "batch_size": FieldOption("Pairs per optimiser step."),
    "lora_r": FieldOption("LoRA rank; 0 trains every weight."),
    "lora_alpha": FieldOption("LoRA's scale numerator."),
    "max_length": FieldOption("Tokens per training record."),
    "answer_max_tokens": FieldOption("Tokens an answer may take."),
    "save_steps": FieldOption("Steps between checkpoints (a resume continues from the last)."),
    "seed": FieldOption("Seed of the data order and LoRA initialisation."),
}


@settings_command(app, "lift", _lift_settings, LIFT_OPTIONS)
def lift(
    options: dict[str, Any],
    out: Annotated[
        Path, typer.Option("--out", help="Run folder (tasks.jsonl, train/, answers.jsonl, summary.json).")
    ],
    questions: Annotated[
        Path | None,
        typer.Option(
            "--questions",
            help='Questions to answer after training: JSONL of {"question": ..., "answer": ...}.',
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the pairs already generated and continue training.")
    ] = False,
) -> None:
    """Fine-tune a LoRA adapter on question-answer pairs about a long document, then answer
    questions without the document in the context (LIFT)."""
    from embodia.policies.recipes.lift import LIFTSettings, read_questions, run_lift

    with user_errors():
        settings = LIFTSettings(**options)
        asked = read_questions(str(questions)) if questions is not None else []
        summary = run_lift(settings, out, resume=resume, questions=asked)
    parts = summary["ttft_parts_s"]
    console.print(
        f"{summary['sentences']} sentences, {summary['pairs']} pairs, {summary['train_steps']} steps "
        f"(loss {summary['train_loss_first']:.3f} -> {summary['train_loss_last']:.3f}), "
        f"training {parts['training']:.1f} s"
    )
    if summary.get("ttft_s") is not None:
        console.print(f"time to the first answer's first token: {summary['ttft_s']:.1f} s")
    if "accuracy" in summary:
        console.print(f"answers that contain the expected one: {summary['accuracy']:.1%}")
    console.print(f"the tuned model: --policy {bold(summary['policy'])}")
