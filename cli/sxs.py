"""SxS think/speak interleaving: ``embodia eval sxs`` (accuracy against latency) and ``embodia sxs data``
(SFT records)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from embodia.cli.root import bold, console, err_console, eval_app, sxs_app, user_errors, valid_seed
from embodia.core.limits import MAX_SET_SIZE, check_range
from embodia.errors import EmbodiaError

SXS_SOURCE_HELP = "maze, sudoku, frozenlake, tsp, or dsr:OPERATION (e.g. dsr:queue.compound)."


@eval_app.command("sxs")
def eval_sxs(
    out: Annotated[Path, typer.Option("--out", help="Run directory (results.jsonl, report.json, plots).")],
    policy: Annotated[
        str,
        typer.Option("--policy", help="Chat policy spec (openai:URL?model=M streams wall-clock latency)."),
    ] = "",
    source: Annotated[str, typer.Option("--source", help=SXS_SOURCE_HELP)] = "maze",
    modes: Annotated[
        str,
        typer.Option(
            "--modes",
            help="Comma-separated: think_then_answer, naive_early_streaming, prompted_interleaving, sxs, "
            "sft_target.",
        ),
    ] = "think_then_answer,naive_early_streaming,prompted_interleaving,sxs,sft_target",
    difficulty: Annotated[
        str, typer.Option("--difficulty", help="Puzzle difficulty, or DSR length (short, medium, long).")
    ] = "medium",
    items: Annotated[
        int, typer.Option("--items", help="How many items (seeds seed..seed+N-1; at most 100,000).")
    ] = 10,
    seed: Annotated[int, typer.Option("--seed", callback=valid_seed)] = 0,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 1024,
    k: Annotated[int, typer.Option("--k", help="Tokens per update of naive early streaming.")] = 16,
    support: Annotated[
        str,
        typer.Option(
            "--support", help="The SxS guard: exact (step checker), judge:SPEC (chat model) or nli:DIR."
        ),
    ] = "exact",
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """Accuracy against content latency for SxS and its baselines, with Pareto plots."""
    from embodia.evals.sxs_run import POLICY_MODES, SxSRunSettings, parse_modes, run_sxs_eval

    with user_errors():
        if not policy and any(m in POLICY_MODES for m in parse_modes(modes)):
            raise EmbodiaError("--policy is needed for every mode but sft_target")
        settings = SxSRunSettings(
            source=source,
            policy=policy,
            modes=modes,
            difficulty=difficulty,
            items=items,
            seed=seed,
            max_tokens=max_tokens,
            k=k,
            support=support,
        )
        with err_console.status(f"SxS on {escape(source)}"):
            report = run_sxs_eval(settings, out, resume=resume)
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
    difficulty: Annotated[
        str, typer.Option("--difficulty", help="Puzzle difficulty, or DSR length (short, medium, long).")
    ] = "medium",
    items: Annotated[
        int, typer.Option("--items", help="How many items (seeds seed..seed+N-1; at most 100,000).")
    ] = 100,
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
    from embodia.evals.sxs_run import make_item
    from embodia.policies.recipes.sxs_data import load_pretrained, sft_records, write_jsonl

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
