"""``embodia explore`` (one exploration run) and ``embodia eval explore`` (an agent over a set of scenes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from embodia.cli import backend_options as backends
from embodia.cli.root import (
    HEIGHT_HELP,
    SIM_HELP,
    UP_HELP,
    WIDTH_HELP,
    SimOption,
    UpOption,
    app,
    bold,
    check_up,
    console,
    err_console,
    eval_app,
    finite,
    user_errors,
)
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command
from embodia.errors import EmbodiaError

if TYPE_CHECKING:
    from embodia.agents.explorer_schema import ExplorerProgress

AGENT_HELP = "Exploration agent: dfs (the depth-first explorer), frontier, frontier-utility, tour or random."
STEPS_HELP = "Step budget in primitive actions (at most 100,000)."
AgentOption = Annotated[str, typer.Option("--agent", help=AGENT_HELP)]
StepsOption = Annotated[int, typer.Option("--steps", help=STEPS_HELP)]


def _check_agent(agent: str) -> None:
    from embodia.agents.baselines import AGENTS

    if agent != "dfs" and agent not in AGENTS:
        names = ", ".join(sorted([*AGENTS, "dfs"]))
        raise EmbodiaError(f"unknown agent {agent!r}: expected one of {names}")


def _explore_settings() -> type[Any]:
    from embodia.evals.explore import ExploreSettings

    return ExploreSettings


EXPLORE_OPTIONS: OptionTable = {
    "agent": FieldOption(AGENT_HELP),
    "out": OWN,
    "scene": FieldOption("A mesh file or procedural:seed=N[,rooms=K] (default: drawn from --seed)."),
    "up": FieldOption(UP_HELP),
    "sim": FieldOption(SIM_HELP),
    "steps": FieldOption(STEPS_HELP),
    "env": FieldOption("primitive (move/turn) or waypoint (pick a candidate); default per agent."),
    "policy": FieldOption("dfs: heuristic, or a VLM policy spec (openai:URL?model=M, hf:DIR)."),
    "instruction": FieldOption('dfs: e.g. "explore the bedroom first".'),
    "tool_choice": FieldOption(
        "dfs with a VLM policy: required (every reply a tool call, schema-constrained where the "
        "backend can) or auto (text answers too)."
    ),
    "show_graph": OWN,
    "seed": FieldOption("Episode seed."),
    "panorama_height": FieldOption(HEIGHT_HELP, "--height"),
    "panorama_width": FieldOption(WIDTH_HELP, "--width"),
    "video": FieldOption("Write episode.mp4.", "--video/--no-video"),
    "resume": OWN,
    "max_fallback_share": OWN,
}


class _ExplorationDisplay:
    """The explore command's progress bar: steps spent and coverage as the run goes, the VLM's
    reply as it streams in, and one line per decision above the bar."""

    def __init__(self, progress: Any, agent: str, steps: int) -> None:
        self.progress = progress
        self.task = progress.add_task(f"{escape(agent)} exploring", total=steps, coverage=0.0, reply="")
        self.reply: list[str] = []

    def on_step(self, decision: int, record: dict[str, Any]) -> None:
        spent = record.get("steps", decision)  # a waypoint spends many primitive steps
        self.progress.update(self.task, completed=spent, coverage=100 * record.get("coverage_ratio", 0.0))

    def on_event(self, event: ExplorerProgress) -> None:
        """The explorer's progress events, the one place the command line reads them: a
        ``token`` of the VLM's reply, then the ``select`` that ends a decision."""
        if event["event"] == "token":
            self.reply.append(event["text"])
            tail = " ".join("".join(self.reply).split())[-60:]
            self.progress.update(self.task, reply=f"vlm: {tail}")
        elif event["event"] == "select":
            self.reply.clear()
            replies = " | ".join(" ".join(r.split())[:80] for r in event["replies"])
            how = "fallback to best gain" if event["fallback"] else f"waypoint {event['index']}"
            self.progress.console.print(
                f"decision {event['decision']}: {how} <- {replies}", markup=False, highlight=False
            )
            self.progress.update(self.task, reply="")


def _exploration_progress() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("coverage {task.fields[coverage]:5.1f}%"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[reply]}", markup=False),
    )
    return Progress(*columns, console=err_console, transient=True)


def _print_graphs() -> None:
    from embodia.agents.explorer import build_decision_graph, build_explorer_graph
    from embodia.agents.runtime import graph_diagram

    console.print("%% the episode: one decision after another", markup=False, highlight=False)
    console.print(graph_diagram(build_explorer_graph().compile()), markup=False, highlight=False)
    console.print("%% one decision (the `decision` node)", markup=False, highlight=False)
    console.print(graph_diagram(build_decision_graph().compile()), markup=False, highlight=False)


@settings_command(app, "explore", _explore_settings, EXPLORE_OPTIONS, hidden=("rooms",))
def explore(
    options: dict[str, Any],
    out: Annotated[Path | None, typer.Option("--out", help="Run directory, e.g. runs/NAME.")] = None,
    show_graph: Annotated[
        bool, typer.Option("--show-graph", help="Print the dfs agent's LangGraph structure and exit.")
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a killed run in --out.")] = False,
    max_fallback_share: Annotated[
        float,
        typer.Option(
            "--max-fallback-share",
            help="dfs with a chat policy: fail the run when more than this share of its decisions fell "
            "back to the best-gain waypoint (checked from the 10th decision and at the end; 1 never fails).",
            callback=finite,
        ),
    ] = 0.5,
) -> None:
    """Explore a scene with a baseline agent; writes summary, step log, BEV, coverage plot, video."""
    from embodia.evals.explore import ExploreSettings, run_exploration

    if show_graph:
        _print_graphs()
        return
    with user_errors():
        if out is None:
            raise EmbodiaError("missing --out: the run directory to write into, e.g. --out runs/NAME")
        _check_agent(options["agent"])
        settings = ExploreSettings(**{**options, "up": check_up(options["up"])})
        with _exploration_progress() as progress:
            display = _ExplorationDisplay(progress, settings.agent, settings.steps)
            summary = run_exploration(
                settings,
                out,
                resume=resume,
                on_step=display.on_step,
                on_event=display.on_event,
                max_fallback_share=max_fallback_share,
            )
    console.print(
        f"{escape(summary['agent'])} on {escape(summary['scene'])}: "
        f"coverage {100 * summary['coverage_ratio']:.1f}% "
        f"({summary['coverage_m2']:.1f} of {summary['explorable_m2']:.1f} m2), "
        f"AUC {100 * summary['coverage_auc']:.1f}%, {summary['steps']} steps; wrote {bold(out)}"
    )
    if vlm := summary.get("vlm"):
        console.print(
            f"vlm: {vlm['decisions']} decisions ({vlm['fallbacks']} fell back), {vlm['replies']} replies "
            f"({vlm['failed_replies']} unusable), {vlm['tool_calls']} tool calls "
            f"({vlm['tool_errors']} invalid)",
            highlight=False,
        )


@eval_app.command("explore")
def eval_explore(
    agent: AgentOption,
    scenes: Annotated[
        list[str],
        typer.Option("--scenes", help="procedural:seeds=A-B[,rooms=K] or a scene spec; repeatable."),
    ],
    up: UpOption = "auto",
    sim: SimOption = "embedded",
    steps: StepsOption = 500,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for the per-scene runs (default runs/eval-AGENT).")
    ] = None,
    height: Annotated[int, typer.Option(help=HEIGHT_HELP)] = 128,
    width: Annotated[int, typer.Option(help=WIDTH_HELP)] = 256,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """Run an agent on a set of scenes and print mean +- std of each measure (resumes)."""
    from rich.progress import Progress

    from embodia.evals.explore import evaluate_exploration, scene_set

    with user_errors():
        _check_agent(agent)
        where = backends.backend_from(backend, num_workers, address, worker_cpus, worker_gpus)
        specs = [spec for entry in scenes for spec in scene_set(entry)]
        target = out or Path("runs") / f"eval-{agent}"
        with Progress(console=err_console, transient=True) as progress:
            task = progress.add_task(f"{escape(agent)} on {len(specs)} scenes", total=len(specs))
            result = evaluate_exploration(
                agent,
                specs,
                target,
                steps=steps,
                up=check_up(up),
                sim=sim,
                panorama_height=height,
                panorama_width=width,
                on_scene=lambda record, done, total: progress.update(task, completed=done),
                backend=where,
            )
    table = Table(title=f"{escape(agent)}, {len(specs)} scenes, {steps} steps")
    table.add_column("measure")
    table.add_column("mean +- std", justify="right")
    for key, stats in result["measures"].items():
        scale = 100.0 if key in ("coverage_ratio", "coverage_auc") else 1.0
        unit = " %" if scale == 100.0 else ""
        table.add_row(key, f"{scale * stats['mean']:.2f} +- {scale * stats['std']:.2f}{unit}")
    console.print(table)
    console.print(f"wrote {bold(target)}")
    failures = result["failures"]
    if failures:
        first = failures[0]
        with user_errors():
            raise EmbodiaError(
                f"{len(failures)} of {len(specs)} scenes failed and are left out of the means "
                f"(first: {first['scene']}: {first['error']}); fix them and rerun to resume"
            )
