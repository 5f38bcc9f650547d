"""``embodia eval csmr``: CSMR look-on-demand reasoning (or an ablation) on puzzle items."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from embodia.cli import backend_options as backends
from embodia.cli.root import ITEMS_HELP, bold, console, err_console, eval_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command


def _csmr_settings() -> type[Any]:
    from embodia.evals.csmr import CSMRRunSettings

    return CSMRRunSettings


EVAL_CSMR_OPTIONS: OptionTable = {
    "out": OWN,
    "reasoner": FieldOption("Text LLM policy spec (openai:URL?model=M, hf:DIR)."),
    "perceiver": FieldOption(
        "oracle (exact, from ground truth), crop:SPEC or a VLM policy spec.", default="oracle"
    ),
    "task": FieldOption(
        "A puzzle task: clevr, clevr-describe (free text, ROUGE-L), embodied, maze, sudoku, ...",
        default="clevr",
    ),
    "ablation": FieldOption("none, static, always-k, no-stop or direct."),
    "difficulty": FieldOption("easy, medium or hard."),
    "items": FieldOption(ITEMS_HELP),
    "seed": FieldOption(),
    "k": FieldOption("Looks for always-k."),
    "max_queries": FieldOption(),
    "tool_choice": FieldOption(
        "auto (a JSON action in the reply counts too) or required (every reply a tool call)."
    ),
    "resume": OWN,
    "backend": OWN,
    "num_workers": OWN,
    "address": OWN,
    "worker_cpus": OWN,
    "worker_gpus": OWN,
}


@settings_command(eval_app, "csmr", _csmr_settings, EVAL_CSMR_OPTIONS, hidden=("max_tokens",))
def eval_csmr(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory (results.jsonl, report.json).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """CSMR look-on-demand reasoning (or an ablation) on puzzle items: accuracy, looks, tokens."""
    from embodia.evals.csmr import CSMRRunSettings, run_csmr

    with user_errors():
        settings = CSMRRunSettings(**options)
        where = backends.backend_from(backend, num_workers, address, worker_cpus, worker_gpus)
        with err_console.status(escape(f"CSMR {settings.ablation} on {settings.task}")):
            report = run_csmr(settings, out, resume=resume, backend=where)
    rate, rouge = report["hallucination_rate"], report.get("rouge_l")
    console.print(
        f"{escape(settings.task)} ({escape(settings.ablation)}): "
        f"accuracy {100 * report['accuracy']:.1f}% over {report['items']} items, "
        + ("" if rouge is None else f"ROUGE-L {rouge:.3f}, ")
        + f"{report['queries_per_item']:.2f} looks and {report['tokens_per_item']:.0f} tokens per item, "
        f"hallucination rate {'n/a' if rate is None else f'{100 * rate:.1f}%'}; wrote {bold(out)}",
        highlight=False,
    )
