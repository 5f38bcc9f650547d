"""``embodia eval early-exit``: early-exit networks trained and measured, calibration (ECE)
against early-exit failure prediction (EEFP) as proxies for the compute they save."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from embodia.cli.root import bold, console, err_console, eval_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _early_exit_settings() -> type[Any]:
    from embodia.evals.early_exit import EarlyExitSettings

    return EarlyExitSettings


EVAL_EARLY_EXIT_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "datasets": FieldOption(
        "A dataset, repeatable: digits (scikit-learn's), puzzles (close-ups of renders).", flag="--dataset"
    ),
    "architectures": FieldOption("An architecture, repeatable: cnn, vit.", flag="--architecture"),
    "seeds": FieldOption(
        "A seed, repeatable: one network per dataset, architecture and seed.", flag="--seed"
    ),
    "train_steps": FieldOption("Joint training steps of each network."),
    "finetune_steps": FieldOption("Steps of the heads' further training (ce-heads and eefp)."),
    "failure_weight": FieldOption("Weight of the failure-prediction term (eefp)."),
    "batch_size": FieldOption(),
    "cnn_learning_rate": FieldOption("Joint training's peak learning rate for the CNNs (cosine decay)."),
    "vit_learning_rate": FieldOption("Joint training's peak learning rate for the ViTs."),
    "finetune_learning_rate": FieldOption("The heads' further training's peak learning rate."),
    "puzzle_images": FieldOption(
        "Training close-ups per puzzle network (held-out and test: a quarter each)."
    ),
    "image_size": FieldOption("Side of a puzzle close-up in pixels (a multiple of 4)."),
    "log_every": FieldOption("Steps per metrics.jsonl line."),
}


@settings_command(eval_app, "early-exit", _early_exit_settings, EVAL_EARLY_EXIT_OPTIONS)
def eval_early_exit(
    options: dict[str, Any],
    out: Annotated[
        Path, typer.Option("--out", help="Run directory (evals.jsonl, metrics.jsonl, summary.json).")
    ],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Train early-exit CNNs and ViTs, then compare the heads as trained, temperature-scaled,
    retrained by cross-entropy and retrained with the failure-prediction term: accuracy at
    25/50/75% of the MACs, ECE, EEFP, and how each proxy's change follows the efficiency gained."""
    from embodia.core.runs import RunFolder
    from embodia.evals.early_exit import EVALS, EarlyExitSettings, run_early_exit_study

    with user_errors():
        RunFolder(out, EVALS)  # --out is checked before anything else
        settings = EarlyExitSettings(**options)
        networks = len(settings.datasets) * len(settings.architectures) * len(settings.seeds)
        with err_console.status(f"training and measuring {networks} early-exit networks"):
            summary = run_early_exit_study(settings, out, resume=resume)
    for network, row in summary["networks"].items():
        for method, measured in row["methods"].items():
            budgets = ", ".join(
                f"{float(b):.0%} {'-' if a is None else f'{a:.3f}'}"
                for b, a in measured["accuracy_at"].items()
            )
            eefp = "-" if measured["eefp"] is None else f"{measured['eefp']:.3f}"
            console.print(
                f"{network} {method}: accuracy at {budgets}; ECE {measured['ece']:.3f}, EEFP {eefp}, "
                f"efficiency {measured['efficiency']:.3f}",
                highlight=False,
                soft_wrap=True,
            )
    for proxy in ("eefp", "ece"):
        corr = summary[f"{proxy}_efficiency"]
        spearman = "-" if corr["spearman"] is None else f"{corr['spearman']:.2f}"
        console.print(
            f"{proxy.upper()} change vs efficiency gain over {summary['points']} methods: "
            f"Spearman {spearman}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"wrote {bold(out)}")
