"""``embodia eval hallucination``: object hallucination in a VLM's captions, and how well InsLen,
HaloProbe and the attention-mass baseline detect it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from embodia.cli import backend_options as backends
from embodia.cli.root import bold, console, err_console, eval_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _hallucination_settings() -> type[Any]:
    from embodia.evals.hallucination import HallucinationEvalSettings

    return HallucinationEvalSettings


EVAL_HALLUCINATION_OPTIONS: OptionTable = {
    "out": OWN,
    "model": FieldOption("The VLM: hf:DIR, a local image-text-to-text model with its processor."),
    "source": FieldOption("The captioned scenes: simulator (panoramas of procedural houses) or clevr."),
    "detectors": FieldOption(
        "A detector to measure, repeatable: inslen, haloprobe, attention-baseline (default: all three).",
        flag="--detector",
    ),
    "captions": FieldOption("Held-out scenes captioned, labelled and scored."),
    "probe_captions": FieldOption("Scenes whose captions fit HaloProbe."),
    "guided": FieldOption(
        "Also caption the held-out scenes by HaloProbe-guided decoding and post-hoc removal."
    ),
    "num_beams": FieldOption("Guided decoding: beams of the hallucination-aware beam search."),
    "guidance_weight": FieldOption(
        "Guided decoding: weight of the mentions' evidence of being real (log-odds) beside the caption's "
        "log-likelihood (0: plain beam search)."
    ),
    "flag_threshold": FieldOption("Post-hoc removal drops mentions whose p(hallucinated) exceeds it."),
    "inslen_layers": FieldOption(
        "InsLen's layers and weight λ: reference (LLaVA-1.5's layers as fractions of the depth, "
        "λ 0.4) or probe (the best on the probe captions)."
    ),
    "max_new_tokens": FieldOption(),
    "seed": FieldOption(),
    "resume": OWN,
    "backend": OWN,
    "num_workers": OWN,
    "address": OWN,
    "worker_cpus": OWN,
    "worker_gpus": OWN,
}


def _table_line(name: str, measured: dict[str, Any]) -> str:
    return (
        f"{escape(name)}: AUROC {measured['auroc']:.3f}, AUPR {measured['aupr']:.3f}, "
        f"FPR@95 {measured['fpr95']:.3f}"
    )


@settings_command(eval_app, "hallucination", _hallucination_settings, EVAL_HALLUCINATION_OPTIONS)
def eval_hallucination(
    options: dict[str, Any],
    out: Annotated[
        Path, typer.Option("--out", help="Run directory (captions.jsonl, haloprobe.json, summary.json).")
    ],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """Caption held-out scenes whose objects are known, label every mention, and measure the
    detectors (real mentions positive) and CHAIR / POPE; with --guided, HaloProbe-guided decoding."""
    from embodia.core.runs import RunFolder
    from embodia.evals.hallucination import HallucinationEvalSettings, run_hallucination_eval

    with user_errors():
        RunFolder(out, "captions.jsonl")  # --out is checked before anything else
        settings = HallucinationEvalSettings(**options)
        where = backends.backend_from(backend, num_workers, address, worker_cpus, worker_gpus)
        with err_console.status(f"captioning {settings.probe_captions + settings.captions} scenes"):
            summary = run_hallucination_eval(settings, out, resume=resume, backend=where)
    for name, measured in summary["detection"].items():
        console.print(_table_line(name, measured), highlight=False)
    for kind in ("greedy", "guided", "removed"):
        if kind in summary:
            chair = summary[kind]
            console.print(
                f"{kind}: CHAIR_s {chair['chair_s']:.3f}, CHAIR_i {chair['chair_i']:.3f}, "
                f"recall {chair['recall']:.3f}, "
                f"POPE accuracy {chair['pope']['adversarial']['accuracy']:.3f} (adversarial)",
                highlight=False,
            )
    console.print(f"wrote {bold(out)}")
