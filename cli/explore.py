"""``embodia explore`` (one exploration run) and ``embodia eval explore`` (an agent over a set of scenes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from embodia.cli.root import (
    UpOption,
    app,
    bold,
    check_up,
    console,
    err_console,
    eval_app,
    finite,
    user_errors,
    valid_seed,
)
from embodia.errors import EmbodiaError

AgentOption = Annotated[
    str,
    typer.Option(
        "--agent",
        help="Exploration agent: dfs (the depth-first explorer), frontier, frontier-utility or random.",
    ),
]
StepsOption = Annotated[
    int, typer.Option("--steps", help="Step budget in primitive actions (at most 100,000).")
]


def _check_agent(agent: str) -> None:
    from embodia.agents.baselines import AGENTS

    if agent != "dfs" and agent not in AGENTS:
        names = ", ".join(sorted([*AGENTS, "dfs"]))
        raise EmbodiaError(f"unknown agent {agent!r}: expected one of {names}")


@app.command("explore")
def explore(
    agent: AgentOption,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory, e.g. runs/NAME.")] = None,
    scene: Annotated[
        str | None,
        typer.Option(
            "--scene", help="A mesh file or procedural:seed=N[,rooms=K] (default: drawn from --seed)."
        ),
    ] = None,
    up: UpOption = "auto",
    steps: StepsOption = 500,
    env: Annotated[
        str,
        typer.Option(
            "--env", help="primitive (move/turn) or waypoint (pick a candidate); default per agent."
        ),
    ] = "",
    policy: Annotated[
        str,
        typer.Option("--policy", help="dfs: heuristic, or a VLM policy spec (openai:URL?model=M, hf:DIR)."),
    ] = "heuristic",
    instruction: Annotated[
        str, typer.Option("--instruction", help='dfs: e.g. "explore the bedroom first".')
    ] = "",
    show_graph: Annotated[
        bool, typer.Option("--show-graph", help="Print the dfs agent's LangGraph structure and exit.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Episode seed.", callback=valid_seed)] = 0,
    height: Annotated[int, typer.Option(help="Panorama height in pixels (at most 4096).")] = 128,
    width: Annotated[int, typer.Option(help="Panorama width in pixels (at most 4096).")] = 256,
    video: Annotated[bool, typer.Option("--video/--no-video", help="Write episode.mp4.")] = True,
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from embodia.evals.explore import ExploreSettings, run_exploration

    if show_graph:
        from embodia.agents.explorer import build_decision_graph, build_explorer_graph
        from embodia.agents.runtime import graph_diagram

        console.print("%% the episode: one decision after another", markup=False, highlight=False)
        console.print(graph_diagram(build_explorer_graph().compile()), markup=False, highlight=False)
        console.print("%% one decision (the `decision` node)", markup=False, highlight=False)
        console.print(graph_diagram(build_decision_graph().compile()), markup=False, highlight=False)
        return
    with user_errors():
        if out is None:
            raise EmbodiaError("missing --out: the run directory to write into, e.g. --out runs/NAME")
        _check_agent(agent)
        settings = ExploreSettings(
            agent=agent,
            env=env,
            policy=policy,
            instruction=instruction,
            scene=scene,
            up=check_up(up),
            steps=steps,
            seed=seed,
            panorama_height=height,
            panorama_width=width,
            video=video,
        )
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("coverage {task.fields[coverage]:5.1f}%"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[reply]}", markup=False),
        )
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task(f"{escape(agent)} exploring", total=steps, coverage=0.0, reply="")
            reply: list[str] = []

            def advance(decision: int, record: dict[str, Any]) -> None:
                spent = record.get("steps", decision)  # a waypoint spends many primitive steps
                progress.update(task, completed=spent, coverage=100 * record.get("coverage_ratio", 0.0))

            def show(event: dict[str, Any]) -> None:
                # The VLM's reply as it streams in, then one line per decision above the bar.
                if event.get("event") == "token":
                    reply.append(str(event["text"]))
                    tail = " ".join("".join(reply).split())[-60:]
                    progress.update(task, reply=f"vlm: {tail}")
                elif event.get("event") == "select":
                    reply.clear()
                    replies = " | ".join(" ".join(str(r).split())[:80] for r in event["replies"])
                    how = "fallback to best gain" if event["fallback"] else f"waypoint {event['index']}"
                    progress.console.print(
                        f"decision {event['decision']}: {how} <- {replies}", markup=False, highlight=False
                    )
                    progress.update(task, reply="")

            summary = run_exploration(
                settings,
                out,
                resume=resume,
                on_step=advance,
                on_event=show,
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
    steps: StepsOption = 500,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for the per-scene runs (default runs/eval-AGENT).")
    ] = None,
    height: Annotated[int, typer.Option(help="Panorama height in pixels (at most 4096).")] = 128,
    width: Annotated[int, typer.Option(help="Panorama width in pixels (at most 4096).")] = 256,
) -> None:
    """Run an agent on a set of scenes and print mean +- std of each measure (resumes)."""
    from rich.progress import Progress

    from embodia.evals.explore import evaluate_exploration, scene_set

    with user_errors():
        _check_agent(agent)
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
                panorama_height=height,
                panorama_width=width,
                on_scene=lambda i, s: progress.update(task, completed=i + 1),
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
