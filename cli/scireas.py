"""``embodia eval scireas`` and ``embodia eval scireas-pro``: science questions asked plainly
and with knowledge ingredients (KRUX), and the SciReas-Pro selection over two policy settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from embodia.cli.root import bold, console, err_console, eval_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _krux_settings() -> type[Any]:
    from embodia.evals.scireas.krux import SciReasSettings

    return SciReasSettings


def _pro_settings() -> type[Any]:
    from embodia.evals.scireas.krux import ProSelectionSettings

    return ProSelectionSettings


_SOURCE = FieldOption(
    "'generated' (the built-in science problems), a benchmark file, or a folder (saved by the "
    "datasets library, or a downloaded dataset repository)."
)
_LAYOUT = FieldOption(
    "The benchmark file's layout: gpqa, mmlu_pro, supergpqa, sciknoweval, labbench, "
    "scibench, olympiadbench, scireas_pro, sciriff, ugphysics, scieval or items."
)

_FAMILIES = FieldOption(
    "A generated family to ask (repeat for several; default: the six science families). "
    "invented_ions and invented_moles are about invented elements no model knows."
)

EVAL_SCIREAS_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "policy": FieldOption("The policy measured (hf:DIR, openai:URL#MODEL, scripted:FILE.jsonl, ...)."),
    "source": _SOURCE,
    "layout": _LAYOUT,
    "items": FieldOption("Questions asked."),
    "first_seed": FieldOption("The first generated problem's seed."),
    "families": _FAMILIES,
    "ingredients": FieldOption("Knowledge ingredients given: none, oracle, extracted or both."),
    "extractor": FieldOption("The policy that extracts ingredients from a trace (default: --policy)."),
    "tracer": FieldOption(
        "The policy whose trace ingredients are extracted from (default: --policy's answer)."
    ),
    "permutations": FieldOption("Random orders of the ingredients per question."),
    "max_tokens": FieldOption("Tokens a reply may take."),
    "seed": FieldOption(),
}

EVAL_PRO_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "low": FieldOption("The policy setting with less reasoning (a policy spec)."),
    "high": FieldOption("The policy setting with more reasoning (a policy spec)."),
    "source": _SOURCE,
    "layout": _LAYOUT,
    "items": FieldOption("Questions asked."),
    "first_seed": FieldOption("The first generated problem's seed."),
    "families": _FAMILIES,
    "low_max_tokens": FieldOption("Tokens a --low reply may take."),
    "high_max_tokens": FieldOption("Tokens a --high reply may take."),
    "judge": FieldOption(
        "A policy that keeps only the selected questions it judges more reasoning-intensive than "
        "an easy question of the same task (default: no judge)."
    ),
    "judge_max_tokens": FieldOption("Tokens a --judge reply may take."),
}


@settings_command(eval_app, "scireas", _krux_settings, EVAL_SCIREAS_OPTIONS)
def eval_scireas(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory (items.jsonl, summary.json).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Ask science questions plainly and with knowledge ingredients in several orders (KRUX);
    report the accuracies, the gain, and how much failure is knowledge and how much reasoning."""
    from embodia.core.runs import RunFolder
    from embodia.evals.scireas.krux import RECORDS, SciReasSettings, run_krux

    with user_errors():
        RunFolder(out, RECORDS)  # --out is checked before anything else
        settings = SciReasSettings(**options)
        with err_console.status(f"asking {settings.items} question(s)"):
            summary = run_krux(settings, out, resume=resume)
    console.print(
        f"{summary['items']} questions, plain accuracy {summary['plain_accuracy']:.3f}", highlight=False
    )
    for source in ("oracle", "extracted"):
        if source in summary:
            part = summary[source]
            shares = ", ".join(f"{k} {v:.2f}" for k, v in part["breakdown"].items())
            console.print(
                f"with {source} ingredients: accuracy {part['accuracy']:.3f} (spread over orders "
                f"{part['accuracy_spread']:.3f}), gain {part['gain']:+.3f}; {shares}",
                highlight=False,
                soft_wrap=True,
            )
    console.print(f"wrote {bold(out)}")


@settings_command(eval_app, "scireas-pro", _pro_settings, EVAL_PRO_OPTIONS)
def eval_scireas_pro(
    options: dict[str, Any],
    out: Annotated[
        Path, typer.Option("--out", help="Run directory (selection.jsonl, pro.jsonl, summary.json).")
    ],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Keep the questions the --high setting answers right and the --low one wrong (the
    SciReas-Pro rule), and with --judge those it finds reasoning-intensive, as an item file
    embodia eval scireas reads (--layout items)."""
    from embodia.core.runs import RunFolder
    from embodia.evals.scireas.krux import SELECTION, ProSelectionSettings, run_pro_selection

    with user_errors():
        RunFolder(out, SELECTION)
        settings = ProSelectionSettings(**options)
        with err_console.status(f"asking {settings.items} question(s) twice"):
            summary = run_pro_selection(settings, out, resume=resume)
    judged = f" ({summary['effort_items']} by effort, then the judge's)" if settings.judge is not None else ""
    console.print(
        f"low {summary['low_accuracy']:.3f}, high {summary['high_accuracy']:.3f}; "
        f"kept {summary['pro_items']} of {summary['items']} questions{judged}",
        highlight=False,
    )
    console.print(f"wrote {bold(out)}")


def _study_settings() -> type[Any]:
    from embodia.evals.scireas.krux_study import KruxStudySettings

    return KruxStudySettings


EVAL_KRUX_STUDY_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "seeds": FieldOption("A seed, repeatable: one fine-tune per seed.", flag="--seed"),
    "model": FieldOption("The chat LM to fine-tune (hf:DIR); default: a tiny random-weight one per seed."),
    "taught": FieldOption("Invented elements whose constants the training teaches."),
    "unseen": FieldOption("Invented elements the training never mentions."),
    "practice_questions": FieldOption("Training questions with their ingredients given."),
    "fact_repeats": FieldOption("Times each taught element's constants are asked in training."),
    "taught_questions": FieldOption("Training questions about taught elements, without ingredients."),
    "steps": FieldOption("SFT steps per seed."),
    "learning_rate": FieldOption("The SFT peak learning rate (cosine decay)."),
    "batch_size": FieldOption("SFT records per step."),
    "questions": FieldOption("Held-out questions per family and element pool."),
    "permutations": FieldOption("Orders of the ingredients per held-out question."),
}


@settings_command(eval_app, "krux-study", _study_settings, EVAL_KRUX_STUDY_OPTIONS)
def eval_krux_study(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory (items.jsonl, seed-N/, summary.json).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Teach a chat LM some invented elements' constants and how to use given ones, then measure
    it with KRUX on questions it never saw: plainly and with the true ingredients, about taught
    and unseen elements, against its untrained start."""
    from embodia.core.runs import RunFolder
    from embodia.evals.scireas.krux_study import RECORDS, KruxStudySettings, run_krux_study

    with user_errors():
        RunFolder(out, RECORDS)  # --out is checked before anything else
        settings = KruxStudySettings(**options)
        with err_console.status(f"training and measuring {len(settings.seeds)} seed(s)"):
            summary = run_krux_study(settings, out, resume=resume)
    for group, numbers in summary["over_seeds"].items():
        shares = ", ".join(f"{k} {v['mean']:.2f}" for k, v in numbers["breakdown"].items())
        given = numbers["oracle_accuracy"]
        console.print(
            f"{group}: plain {numbers['plain_accuracy']['mean']:.3f}, with ingredients "
            f"{given['mean']:.3f} (sd over seeds {given['sd']:.3f}); {shares}",
            highlight=False,
            soft_wrap=True,
        )
    baseline = ", ".join(f"{group} {share:.3f}" for group, share in summary["majority_baseline"].items())
    console.print(f"trivial baseline (the most common training answer): {baseline}", highlight=False)
    console.print(f"wrote {bold(out)}")
