"""``embodia eval vocal``: a policy's verbal confidence against its correctness, the marker
profile VOCAL learns from it, and that profile set against people's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from embodia.cli.root import bold, console, err_console, eval_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _vocal_settings() -> type[Any]:
    from embodia.evals.uncertainty.elicit import VocalSettings

    return VocalSettings


EVAL_VOCAL_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "policy": FieldOption("The policy spec (hf:DIR, openai:URL#MODEL, scripted:FILE.jsonl, ...)."),
    "task": FieldOption(
        "Where the questions come from: puzzle (written as text), dsr (DSR-Bench) or scireas "
        "(generated science problems)."
    ),
    "puzzle": FieldOption("The puzzle asked, with --task puzzle (maze, sudoku, ...)."),
    "difficulty": FieldOption("The puzzle's difficulty."),
    "questions": FieldOption("Questions asked."),
    "consistency_samples": FieldOption("Extra samples per question for the consistency baseline (0: none)."),
    "temperature": FieldOption("Temperature of those samples."),
    "max_tokens": FieldOption("Tokens a reply may take."),
    "calibration_share": FieldOption("Share of the answers with a marker that the profile is fitted on."),
    "loss": FieldOption("The fit's scoring rule: log or brier."),
    "shrinkage": FieldOption("Pull of each marker towards its human level (0: none)."),
    "monotone": FieldOption("Keep the learned levels in the human order of the markers."),
    "bootstrap_rounds": FieldOption("Bootstrap refits for the intervals."),
    "readings": FieldOption("Also ask what probability each marker conveys, against the human levels."),
    "seed": FieldOption(),
}


@settings_command(eval_app, "vocal", _vocal_settings, EVAL_VOCAL_OPTIONS)
def eval_vocal(
    options: dict[str, Any],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Run directory (answers.jsonl, summary.json, markers.png, reliability.png)."
        ),
    ],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Ask a policy graded questions with its confidence in words, fit its marker profile
    (VOCAL) and compare it with people's and with two baselines."""
    from embodia.core.runs import RunFolder
    from embodia.evals.uncertainty.elicit import ANSWERS, VocalSettings, run_vocal

    with user_errors():
        RunFolder(out, ANSWERS)  # --out is checked before anything else
        settings = VocalSettings(**options)
        with err_console.status(f"asking {settings.questions} question(s)"):
            summary = run_vocal(settings, out, resume=resume)
    console.print(
        f"answered {summary['answered']}, accuracy {summary['accuracy']:.3f}, "
        f"a confidence in words in {summary['marker_rate']:.0%}",
        highlight=False,
    )
    if "note" in summary:
        console.print(summary["note"], highlight=False, soft_wrap=True)
    else:
        for name, report in summary["calibration"].items():
            if report is not None:
                console.print(
                    f"{name}: ECE {report['ece']:.3f}, Brier {report['brier']:.3f}, AUROC "
                    + ("n/a" if report["auroc"] is None else f"{report['auroc']:.3f}"),
                    highlight=False,
                )
        console.print(
            "overconfidence (human level minus learned, by use): "
            f"{summary['comparison']['overconfidence']:+.3f}",
            highlight=False,
        )
    if "readings" in summary:
        readings = summary["readings"]
        gap = readings["mean_absolute_gap"]
        console.print(
            f"markers read: {readings['read']}, mean gap to the human level "
            + ("n/a" if gap is None else f"{gap:.3f}"),
            highlight=False,
        )
    console.print(f"wrote {bold(out)}")
