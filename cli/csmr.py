"""``embodia eval csmr``: CSMR look-on-demand reasoning (or an ablation) on puzzle items."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from embodia.cli.root import bold, console, err_console, eval_app, user_errors, valid_seed


@eval_app.command("csmr")
def eval_csmr(
    out: Annotated[Path, typer.Option("--out", help="Run directory (results.jsonl, report.json).")],
    reasoner: Annotated[
        str, typer.Option("--reasoner", help="Text LLM policy spec (openai:URL?model=M, hf:DIR).")
    ],
    perceiver: Annotated[
        str,
        typer.Option(
            "--perceiver", help="oracle (exact, from ground truth), crop:SPEC or a VLM policy spec."
        ),
    ] = "oracle",
    task: Annotated[
        str,
        typer.Option(
            "--task",
            help="A puzzle task: clevr, clevr-describe (free text, ROUGE-L), embodied, maze, sudoku, ...",
        ),
    ] = "clevr",
    ablation: Annotated[
        str, typer.Option("--ablation", help="none, static, always-k, no-stop or direct.")
    ] = "none",
    difficulty: Annotated[str, typer.Option("--difficulty", help="easy, medium or hard.")] = "medium",
    items: Annotated[
        int, typer.Option("--items", help="How many items (seeds seed..seed+N-1; at most 100,000).")
    ] = 20,
    seed: Annotated[int, typer.Option("--seed", callback=valid_seed)] = 0,
    k: Annotated[int, typer.Option("--k", help="Looks for always-k.")] = 3,
    max_queries: Annotated[int, typer.Option("--max-queries")] = 6,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out.")] = False,
) -> None:
    """CSMR look-on-demand reasoning (or an ablation) on puzzle items: accuracy, looks, tokens."""
    from embodia.evals.csmr import CSMRRunSettings, run_csmr

    with user_errors():
        settings = CSMRRunSettings(
            task=task,
            reasoner=reasoner,
            perceiver=perceiver,
            ablation=ablation,
            difficulty=difficulty,
            items=items,
            seed=seed,
            k=k,
            max_queries=max_queries,
        )
        with err_console.status(escape(f"CSMR {ablation} on {task}")):
            report = run_csmr(settings, out, resume=resume)
    rate, rouge = report["hallucination_rate"], report.get("rouge_l")
    console.print(
        f"{escape(task)} ({escape(ablation)}): "
        f"accuracy {100 * report['accuracy']:.1f}% over {report['items']} items, "
        + ("" if rouge is None else f"ROUGE-L {rouge:.3f}, ")
        + f"{report['queries_per_item']:.2f} looks and {report['tokens_per_item']:.0f} tokens per item, "
        f"hallucination rate {'n/a' if rate is None else f'{100 * rate:.1f}%'}; wrote {bold(out)}",
        highlight=False,
    )
