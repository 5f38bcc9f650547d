"""The root of the ``embodia`` command line and what its commands share.

The command tree (the root command and its groups, in the order ``--help`` lists them), the
consoles, one-line errors (:func:`user_errors`, usage errors) and the checks every option of
a kind gets (:func:`finite`, :func:`valid_seed`, :func:`check_up`). The modules beside this
one add the commands; runner imports stay inside the commands, so ``--help`` stays quick.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from embodia.core.limits import check_seed
from embodia.errors import EmbodiaError

console = Console()
err_console = Console(stderr=True)


def _print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def bold(value: object) -> str:
    """User or library text (a path, a spec) in bold. Rich prints through markup, so the text is
    escaped: a folder named ``[x]`` prints as written instead of being taken for a style."""
    return f"[bold]{escape(str(value))}[/]"


# click's UsageError (a missing option, an unknown one, a value an option refuses), found from
# the BadParameter that typer exports: typer vendors its own copy of click.
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


@contextmanager
def _usage_errors_in_one_line() -> Iterator[None]:
    try:
        yield
    except _UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments: the help is shown instead
            raise
        usage: Any = exc
        hint = f" (see {usage.ctx.command_path} --help)" if usage.ctx is not None else ""
        _print_error(usage.format_message() + hint)
        raise typer.Exit(usage.exit_code) from None


class _Commands(TyperGroup):
    """The root command group: a usage error (a missing option, a value the option refuses) is
    one ``error:`` line too, like every other bad input, instead of click's usage panel."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        with _usage_errors_in_one_line():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _usage_errors_in_one_line():
            return super().invoke(ctx)


def finite(value: float | None) -> float | None:
    """Every float option: NaN and infinities are refused where the option is parsed."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def valid_seed(value: int) -> int:
    """Every ``--seed`` option: an integer in 0..MAX_SEED (numpy's seed range)."""
    try:
        return check_seed("the seed", value)
    except EmbodiaError as exc:
        raise typer.BadParameter(str(exc)) from None


app = typer.Typer(
    cls=_Commands,
    help="embodia: embodied and multimodal agents (simulators, mapping, VLM policies).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
sim_app = typer.Typer(help="The embedded simulator: render and inspect scenes.", no_args_is_help=True)
app.add_typer(sim_app, name="sim")
eval_app = typer.Typer(
    help="Evaluate agents over sets of scenes, or policies on benchmarks.", no_args_is_help=True
)
app.add_typer(eval_app, name="eval")
dsr_app = typer.Typer(
    help="DSR-Bench: generate and inspect data-structure reasoning instances.", no_args_is_help=True
)
app.add_typer(dsr_app, name="dsr")
stream_app = typer.Typer(
    help="Live game streams (Proact-VL): run proactive commentators and guides.", no_args_is_help=True
)
app.add_typer(stream_app, name="stream")
sxs_app = typer.Typer(
    help="SxS think/speak interleaving: build SFT data from exact (reasoning, answer) pairs.",
    no_args_is_help=True,
)
app.add_typer(sxs_app, name="sxs")
models_app = typer.Typer(
    help="Models for trying embodia offline (docs/models.md): tiny ones with random weights.",
    no_args_is_help=True,
)
app.add_typer(models_app, name="models")
train_app = typer.Typer(
    help="Train a local transformers policy: SFT on records, GRPO in a gymnasium env (docs/training.md).",
    no_args_is_help=True,
)
app.add_typer(train_app, name="train")

UP_HELP = "Up axis of a mesh file: auto (stage config, else detected), y or z."
HEIGHT_HELP = "Panorama height in pixels (at most 4096)."
WIDTH_HELP = "Panorama width in pixels (at most 4096)."
ITEMS_HELP = "How many items (seeds seed..seed+N-1; at most 100,000)."
UpOption = Annotated[str, typer.Option("--up", help=UP_HELP)]
SIM_HELP = "Simulator: embedded (embodia's CPU simulator) or habitat (habitat-sim, installed with conda)."
SimOption = Annotated[str, typer.Option("--sim", help=SIM_HELP)]


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn library errors a user caused into one line and exit code 2."""
    try:
        yield
    except EmbodiaError as exc:
        _print_error(str(exc))
        raise typer.Exit(2) from None


@app.callback()
def _root(
    log_level: Annotated[str, typer.Option("--log-level", help="Python logging level.")] = "WARNING",
) -> None:
    from rich.logging import RichHandler

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        _print_error(f"unknown log level {log_level!r}")
        raise typer.Exit(2)
    logging.basicConfig(level=level, handlers=[RichHandler(console=err_console)], format="%(message)s")


def check_up(up: str) -> Any:
    """A mesh file's ``--up`` axis, checked before it reaches the simulator."""
    if up not in ("auto", "y", "z"):
        raise EmbodiaError(f"invalid --up {up!r}: expected auto, y or z")
    return up


def main() -> None:
    """The ``embodia`` console script (and ``python -m embodia.cli``)."""
    app()
