"""SxS think/speak interleaving: ``embodia eval sxs`` (accuracy against latency) and ``embodia sxs data``
(SFT records)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from embodia.cli import backend_options as backends
from embodia.cli.root import (
    ITEMS_HELP,
    bold,
    console,
    err_console,
    eval_app,
    sxs_app,
    user_errors,
    valid_seed,
)
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command
from embodia.core.limits import MAX_SET_SIZE, check_range
from embodia.errors import EmbodiaError

SXS_SOURCE_HELP = "maze, sudoku, frozenlake, tsp, or dsr:OPERATION (e.g. dsr:queue.compound)."
SXS_DIFFICULTY_HELP = "Puzzle difficulty, or DSR length (short, medium, long)."


def _sxs_settings() -> type[Any]:
    from embodia.evals.sxs_run import SxSRunSettings

    return SxSRunSettings


EVAL_SXS_OPTIONS: OptionTable = {
    "out": OWN,
    "policy": FieldOption("Chat policy spec (openai:URL?model=M streams wall-clock latency).", default=""),
    "source": FieldOption(SXS_SOURCE_HELP, default="maze"),
    "modes": FieldOption(
        "Comma-separated: think_then_answer, naive_early_streaming, prompted_interleaving, sxs, sft_target."
    ),
    "difficulty": FieldOption(SXS_DIFFICULTY_HELP),
    "items": FieldOption(ITEMS_HELP),
    "seed": FieldOption(),
    "max_tokens": FieldOption(),
    "k": FieldOption("Tokens per update of naive early streaming."),
    "support": FieldOption("The SxS guard: exact (step checker), judge:SPEC (chat model) or nli:DIR."),
    "resume": OWN,
    "backend": OWN,
    "num_workers": OWN,
    "address": OWN,
    "worker_cpus": OWN,
    "worker_gpus": OWN,
}


@settings_command(eval_app, "sxs", _sxs_settings, EVAL_SXS_OPTIONS)
def eval_sxs(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory (results.jsonl, report.json, plots).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """Accuracy against content latency for SxS and its baselines, with Pareto plots."""
    from embodia.evals.sxs_run import POLICY_MODES, SxSRunSettings, parse_modes, run_sxs_eval

    with user_errors():
        if not options["policy"] and any(m in POLICY_MODES for m in parse_modes(options["modes"])):
            raise EmbodiaError("--policy is needed for every mode but sft_target")
        settings = SxSRunSettings(**options)
        where = backends.backend_from(backend, num_workers, address, worker_cpus, worker_gpus)
        with err_console.status(f"SxS on {escape(settings.source)}"):
            report = run_sxs_eval(settings, out, resume=resume, backend=where)
    for mode, means in report["modes"].items():
        console.print(
            f"{escape(mode)}: accuracy {100 * means['accuracy']:.1f}%, wait to content "
            f"{means['wait_to_content_tokens']:.1f} tokens, observer wait {means['expected_wait']:.1f}",
            highlight=False,
        )
    console.print(f"wrote {bold(out)}")


@sxs_app.command("data")
def sxs_data(
    out: Annotated[Path, typer.Option("--out", help="SFT JSONL file to write.")],
    source: Annotated[str, typer.Option("--source", help=SXS_SOURCE_HELP)] = "maze",
    difficulty: Annotated[str, typer.Option("--difficulty", help=SXS_DIFFICULTY_HELP)] = "medium",
    items: Annotated[int, typer.Option("--items", help=ITEMS_HELP)] = 100,
    seed: Annotated[int, typer.Option("--seed", callback=valid_seed)] = 0,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer", help="A transformers model/tokenizer directory: adds chat-templated text."
        ),
    ] = None,
) -> None:
    """Interleaved think/speak SFT records from exact (reasoning, answer) pairs."""
    from embodia.core.runs import check_out_file
    from embodia.policies.recipes.sxs_data import load_pretrained, make_item, sft_records, write_jsonl

    with user_errors():
        check_out_file(out)
        check_range("--items", items, 1, MAX_SET_SIZE)
        loaded = None
        if tokenizer is not None:
            from transformers import AutoTokenizer

            loaded = load_pretrained(AutoTokenizer, tokenizer, "--tokenizer")
        chosen = (make_item(source, i, difficulty, seed) for i in range(items))
        write_jsonl(sft_records(chosen, loaded), out)
    console.print(f"wrote {items} records to {bold(out)}", highlight=False)
