"""``embodia models tiny``: tiny models with random weights, for trying embodia offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from embodia.cli.root import bold, console, err_console, models_app, user_errors, valid_seed
from embodia.core.limits import check_range
from embodia.errors import EmbodiaError


@models_app.command("tiny")
def models_tiny(
    kind: Annotated[
        str,
        typer.Argument(
            metavar="chat|vlm|nli", help="chat (a Qwen2 chat LM), vlm (a LLaVA-style VLM) or nli."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="A new or empty folder for the model, e.g. models/tiny-chat.")
    ],
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random weights.", callback=valid_seed)] = 0,
    context: Annotated[
        int | None,
        typer.Option("--context", help="Context in tokens (default: 4096; nli: 128)."),
    ] = None,
) -> None:
    """Build a tiny model with RANDOM WEIGHTS in seconds, offline: it runs every path, says noise."""
    from embodia.core.random_weights import RANDOM_WEIGHTS, read_marker
    from embodia.core.runs import check_out_folder
    from embodia.policies import tiny_models

    with user_errors():
        if kind not in tiny_models.KINDS:
            raise EmbodiaError(f"unknown tiny model {kind!r}: expected one of {', '.join(tiny_models.KINDS)}")
        if context is not None:
            check_range("--context", context, tiny_models.MIN_CONTEXT, tiny_models.MAX_CONTEXT)
        check_out_folder(out)
        what = f"tiny {tiny_models.WHAT[kind]} with {RANDOM_WEIGHTS}"
        with err_console.status(escape(f"building a {what}")):
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # its shard bars would bury the lines below
            built = tiny_models.build_tiny(kind, out, seed=seed, context_tokens=context)
        marker = read_marker(out) or {}
    details = f"seed {marker.get('seed')}, {marker.get('context_tokens')}-token context"
    if built:
        line = f"built a {what} in {bold(out)} ({details}; model card {tiny_models.MODEL_CARD})"
    else:
        line = f"{bold(out)} already holds this {what} ({details}): nothing to do"
    use = f"--support nli:{out}" if kind == "nli" else f"--policy hf:{out}"
    for text in (
        line,
        f"{RANDOM_WEIGHTS}: its outputs are noise, for trying embodia offline only "
        f"(e.g. {escape(use)}; docs/models.md)",
    ):
        console.print(text, highlight=False, soft_wrap=True)
