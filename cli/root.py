"""The ``embodia`` command line.

Bad input (a missing file, an unknown format, a malformed pose, a mesh with no floor, an
option value out of range) ends with exit code 2 and one ``error:`` line on stderr, never a
traceback. Sizes are bounded by :mod:`embodia.core.limits`.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from embodia.core.limits import MAX_SET_SIZE, check_image_size, check_range, check_seed
from embodia.errors import EmbodiaError

console = Console()
err_console = Console(stderr=True)


def _print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _bold(value: object) -> str:
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


def _finite(value: float | None) -> float | None:
    """Every float option: NaN and infinities are refused where the option is parsed."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def _seed(value: int) -> int:
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

SceneOption = Annotated[
    str,
    typer.Option(
        "--scene",
        help="A mesh file (.glb .gltf .ply .obj) or procedural:seed=N[,rooms=K].",
    ),
]
UpOption = Annotated[
    str,
    typer.Option("--up", help="Up axis of a mesh file: auto (stage config, else detected), y or z."),
]


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


def _check_up(up: str) -> Any:
    if up not in ("auto", "y", "z"):
        raise EmbodiaError(f"invalid --up {up!r}: expected auto, y or z")
    return up


def _write_yaml(path: Path, data: dict[str, Any]) -> None:
    import yaml

    from embodia.core.runs import write_atomic

    write_atomic(path, yaml.safe_dump(data, sort_keys=False))


@sim_app.command("render")
def sim_render(
    scene: SceneOption,
    out: Annotated[Path, typer.Option("--out", help="Run directory to write into.")],
    pose: Annotated[
        str | None,
        typer.Option(
            "--pose",
            help="Agent floor point and heading: x,y,z,yaw_deg (default: most open point).",
        ),
    ] = None,
    height: Annotated[int, typer.Option(help="Panorama height in pixels (at most 4096).")] = 512,
    width: Annotated[int, typer.Option(help="Panorama width in pixels (at most 4096).")] = 1024,
    up: UpOption = "auto",
) -> None:
    """Render a panorama (RGB, depth, semantics), a pinhole view, a top-down map and the scene .glb."""
    import imageio.v3 as iio

    from embodia.core.runs import check_out_folder, write_atomic
    from embodia.sim import EmbeddedSimulator, Pose
    from embodia.sim.visualize import colorize_depth, colorize_semantic, topdown_image

    with user_errors():
        check_out_folder(out)
        check_image_size("the panorama", height, width)
        start = Pose.parse(pose) if pose is not None else None
        sim = EmbeddedSimulator(up=_check_up(up))
        with console.status(f"loading {escape(scene)}"):
            agent = sim.reset(scene, start)
        out.mkdir(parents=True, exist_ok=True)
        pano = sim.panorama(height, width)
        view = sim.pinhole(256, 256, 90.0)
        files = {
            "panorama_rgb.png": pano["rgb"],
            "panorama_depth.png": colorize_depth(pano["depth"]),
            "panorama_semantic.png": colorize_semantic(pano["semantic"], sim.categories),
            "pinhole_rgb.png": view["rgb"],
            "topdown.png": topdown_image(sim.renderer.raycaster, sim.nav, agent),
        }
        for name, image in files.items():
            iio.imwrite(out / name, image)
        sim.scene.export(out / "scene.glb")
        config = {
            "command": "sim render",
            "scene": scene,
            "pose": None if start is None else start.as_dict(),
            "panorama": {"height": height, "width": width},
            "up": up,
            "sim": {f: getattr(sim.config, f) for f in sim.config.__slots__},
        }
        _write_yaml(out / "config.yaml", config)
        summary = {
            **_scene_summary(sim),
            "agent_pose": agent.as_dict(),
            "files": sorted([*files, "scene.glb"]),
        }
        write_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    console.print(
        f"wrote {len(files) + 1} files to {_bold(out)} (navigable {summary['navigable_area_m2']:.1f} m2)"
    )


def _scene_summary(sim: Any) -> dict[str, Any]:
    scene = sim.scene
    lo, hi = scene.bounds
    return {
        "scene": scene.name,
        "source": scene.source,
        "mesh_sha256": scene.mesh_hash(),
        "triangles": int(len(scene.faces)),
        "bounds": {
            "min": [round(float(v), 4) for v in lo],
            "max": [round(float(v), 4) for v in hi],
        },
        "floor_height": round(sim.nav.floor_height, 4),
        "navigable_area_m2": round(sim.nav.navigable_area, 4),
        "categories": {k: round(v, 3) for k, v in sorted(scene.present_categories().items())},
    }


@sim_app.command("info")
def sim_info(
    scene: SceneOption,
    up: UpOption = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Print a scene's bounds, navigable area and categories."""
    from embodia.sim import EmbeddedSimulator

    with user_errors():
        sim = EmbeddedSimulator(up=_check_up(up))
        sim.reset(scene)
        summary = _scene_summary(sim)
    if as_json:
        console.print_json(json.dumps(summary))
        return
    table = Table(title=f"{escape(summary['scene'])} ({summary['triangles']} triangles)", show_header=False)
    table.add_row("bounds min (m)", ", ".join(f"{v:.2f}" for v in summary["bounds"]["min"]))
    table.add_row("bounds max (m)", ", ".join(f"{v:.2f}" for v in summary["bounds"]["max"]))
    table.add_row("floor height (m)", f"{summary['floor_height']:.3f}")
    table.add_row("navigable area (m2)", f"{summary['navigable_area_m2']:.2f}")
    console.print(table)
    cats = Table("category", "surface area (m2)", title="categories")
    for name, area in summary["categories"].items():
        cats.add_row(escape(name), f"{area:.2f}")
    console.print(cats)


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
    seed: Annotated[int, typer.Option("--seed", help="Episode seed.", callback=_seed)] = 0,
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
            callback=_finite,
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
            up=_check_up(up),
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
        f"AUC {100 * summary['coverage_auc']:.1f}%, {summary['steps']} steps; wrote {_bold(out)}"
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
                up=_check_up(up),
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
    console.print(f"wrote {_bold(target)}")


SuiteOption = Annotated[
    list[str] | None,
    typer.Option("--suite", help="main, spatial, realistic or code; repeatable (default: all four)."),
]


def _dsr_suites(suite: list[str] | None) -> tuple[str, ...]:
    from embodia.envs.dsr.suites import SUITES

    chosen = tuple(suite or SUITES)
    for name in chosen:
        if name not in SUITES:
            raise EmbodiaError(f"unknown DSR suite {name!r}: expected one of {', '.join(SUITES)}")
    return chosen


@dsr_app.command("generate")
def dsr_generate(
    out: Annotated[Path, typer.Option("--out", help="Directory for one SUITE.jsonl per suite.")],
    suite: SuiteOption = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Generation seed (0: the published set).", callback=_seed)
    ] = 0,
) -> None:
    """Generate the instances (seeded, reproducible) as JSONL with a schema version."""
    from embodia.core.runs import check_out_folder
    from embodia.envs.dsr import suites as dsr_suites

    with user_errors():
        check_out_folder(out)
        chosen = _dsr_suites(suite)
        total = 0
        for name in chosen:
            count = dsr_suites.write_jsonl(dsr_suites.generate((name,), seed=seed), out / f"{name}.jsonl")
            console.print(
                f"{name}: {count} instances -> {out / (name + '.jsonl')}", markup=False, highlight=False
            )
            total += count
    console.print(f"wrote {total} instances to {_bold(out)}")


@dsr_app.command("stats")
def dsr_stats(
    instances: Annotated[
        Path | None,
        typer.Option(
            "--instances", help="A directory or .jsonl written by `dsr generate` (default: generate)."
        ),
    ] = None,
    suite: SuiteOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as one JSON object.")] = False,
) -> None:
    """Instance counts by suite, category, structure, operation and length."""
    from embodia.envs.dsr import suites as dsr_suites

    with user_errors():
        chosen = _dsr_suites(suite)
        if instances is None:
            found = list(dsr_suites.generate(chosen))
        else:
            files = sorted(instances.glob("*.jsonl")) if instances.is_dir() else [instances]
            if not files:
                raise EmbodiaError(f"no .jsonl instance files in {instances}")
            found = [i for f in files for i in dsr_suites.read_jsonl(f) if i.suite in chosen]
        counts = dsr_suites.stats(found)
    if as_json:
        console.print_json(json.dumps(counts))
        return
    for key in ("suite", "category", "structure", "operation", "length"):
        table = Table(title=f"by {key}")
        table.add_column(key)
        table.add_column("instances", justify="right")
        for name, count in counts[key].items():
            table.add_row(escape(name), str(count))
        console.print(table)
    console.print(f"[bold]{counts['instances']}[/] instances")


@eval_app.command("dsr")
def eval_dsr(
    policy: Annotated[
        str, typer.Option("--policy", help="openai:URL?model=M, hf:DIR, vllm:DIR or scripted:FILE.")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Run directory (answers.jsonl, report.json, report.png).")
    ],
    suite: Annotated[str, typer.Option("--suite", help="main, spatial, realistic or code.")] = "main",
    length: Annotated[
        list[str] | None, typer.Option("--length", help="short, medium or long; repeatable (default: all).")
    ] = None,
    operation: Annotated[
        list[str] | None, typer.Option("--operation", help="e.g. queue.compound; repeatable (default: all).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", help="At most N instances, spread over operations.")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests in flight at once.")] = 1,
    mode: Annotated[
        str,
        typer.Option("--mode", help="stepwise, 0-CoT, CoT, k-shot, none, CodeOnly, CodeEnforce, CodeMaybe."),
    ] = "stepwise",
    description: Annotated[str, typer.Option("--description", help="full or name.")] = "full",
    tokens: Annotated[int, typer.Option("--tokens", help="Token budget per answer.")] = 1500,
    temperature: Annotated[float, typer.Option("--temperature", callback=_finite)] = 0.0,
    unsafe_no_sandbox: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-sandbox",
            help="Run model-written code (the code suite) without bubblewrap's isolation. Unsafe.",
        ),
    ] = False,
) -> None:
    """Evaluate a policy on DSR-Bench (resumes: answers already in --out are never asked again)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from embodia.core.runs import check_out_folder
    from embodia.evals.dsr import DSRSettings, run_dsr
    from embodia.policies import make_policy

    with user_errors():
        check_out_folder(out)
        settings = DSRSettings(
            policy=policy,
            suite=_dsr_suites([suite])[0],
            lengths=tuple(length or ("short", "medium", "long")),
            operations=tuple(operation) if operation else None,
            limit=limit,
            mode=mode,
            description=description,
            tokens=tokens,
            temperature=temperature,
        )
        chat = make_policy(policy, connect=True)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task(escape(f"DSR {suite}"), total=None)

            def advance(result: dict[str, Any], done: int, total: int) -> None:
                mark = "ok" if result["exact"] == 1.0 else (result["failure"] or "")
                progress.update(
                    task,
                    completed=done,
                    total=total,
                    description=escape(f"DSR {suite} {result['id']} {mark}"),
                )

            report = run_dsr(
                chat,
                settings,
                out,
                concurrency=concurrency,
                on_answer=advance,
                unsafe_no_sandbox=unsafe_no_sandbox,
            )
    table = Table(title=escape(f"DSR-Bench {suite}: {chat.name}"))  # the name says "random weights"
    table.add_column("category")
    table.add_column("n", justify="right")
    table.add_column("exact", justify="right")
    table.add_column("partial", justify="right")
    for name, row in report["by_category"].items():
        table.add_row(escape(name), str(row["n"]), f"{row['exact']:.3f}", f"{row['partial']:.3f}")
    overall = report["overall"]
    table.add_row("[bold]all[/]", str(overall["n"]), f"{overall['exact']:.3f}", f"{overall['partial']:.3f}")
    console.print(table)
    failures = ", ".join(f"{k} {v}" for k, v in overall["failures"].items())
    console.print(f"failures: {escape(failures)}; wrote {_bold(out)}", highlight=False)


@stream_app.command("run")
def stream_run(
    out: Annotated[Path, typer.Option("--out", help="Run directory, e.g. runs/NAME.")],
    source: Annotated[
        str,
        typer.Option(
            "--source", help="procedural:arena,seed=3[,duration=120] or video:FILE.mp4,labels=FILE.jsonl."
        ),
    ] = "procedural:arena,seed=0",
    scenario: Annotated[str, typer.Option("--scenario", help="solo, co-commentary or guidance.")] = "solo",
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="heuristic, gate:DIR (a trained gate) or a chat policy spec (hf:DIR, openai:URL)."
        ),
    ] = "heuristic",
    speaker: Annotated[
        str, typer.Option("--speaker", help="Policy spec that writes the lines (default: the agent's own).")
    ] = "",
    agents: Annotated[
        int, typer.Option("--agents", help="Co-commentary self-play: agents sharing the stream.")
    ] = 1,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Speak when the score exceeds this.", callback=_finite)
    ] = None,
    token_cap: Annotated[int, typer.Option("--token-cap", help="Words per spoken second.")] = 12,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            help="Each agent's conversation in the speaking model's tokens (words without a model; "
            "default: what its context leaves, else 16,384).",
        ),
    ] = None,
    realtime: Annotated[
        bool, typer.Option("--realtime", help="Chunks arrive on the wall clock; late decisions are dropped.")
    ] = False,
    time_scale: Annotated[
        float, typer.Option("--time-scale", help="Wall seconds per stream second.", callback=_finite)
    ] = 1.0,
    fps: Annotated[
        float,
        typer.Option(
            "--fps", help="Frames per 1-second chunk (the reference: 2; at most 60).", callback=_finite
        ),
    ] = 2.0,
    video: Annotated[bool, typer.Option("--video/--no-video", help="Write stream.mp4.")] = True,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a killed run in --out.")] = False,
) -> None:
    """Run proactive agents over a live stream; writes predictions, labels, summary, timeline and video."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from embodia.evals.live_run import LiveSettings, run_live

    with user_errors():
        settings = LiveSettings(
            source=source,
            scenario=scenario,
            agent=agent,
            speaker=speaker,
            agents=agents,
            threshold=threshold,
            token_cap=token_cap,
            budget=budget,
            realtime=realtime,
            time_scale=time_scale,
            fps=fps,
            video=video,
        )
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[line]}", markup=False),
        )
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task(f"{escape(scenario)} stream", total=None, line="")

            def show(event: dict[str, Any]) -> None:
                if event.get("event") == "chunk":
                    line = (
                        f"t={event['second']} {event['speaker']}: {event['text']}"
                        if event.get("text")
                        else ""
                    )
                    progress.update(task, advance=1, line=line[:70])

            summary = run_live(settings, out, resume=resume, on_event=show)
    console.print(
        f"{escape(summary['agent'])} on {escape(summary['source'])} ({escape(summary['scenario'])}): "
        f"spoke {summary['spoken_seconds']} "
        f"of {summary['seconds']} s (label {summary['label_seconds']}), F1 {_pct(summary['f1_micro'])}, "
        f"TimeDiff {_num(summary['timediff_mean'])} s, RTF {summary['latency']['rtf']:.3f}, "
        f"dropped {summary['dropped']}; wrote {_bold(out)}",
        highlight=False,
    )


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * float(value):.1f}%"


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def _seed_range(text: str) -> list[int]:
    first, dash, last = text.partition("-")
    try:
        low = int(first)
        high = int(last) if dash else low
    except ValueError:
        raise EmbodiaError(f"seeds must look like 0-5 or 3, got {text!r}") from None
    if high < low:
        raise EmbodiaError(f"the seed range {text!r} is empty")
    check_seed(f"the last seed of {text!r}", high)
    check_range(f"the number of seeds in {text!r}", high - low + 1, 1, MAX_SET_SIZE)
    return list(range(low, high + 1))


@stream_app.command("export")
def stream_export(
    out: Annotated[
        Path, typer.Option("--out", help="The video to write (.mp4); its annotations go beside it as .jsonl.")
    ],
    source: Annotated[
        str, typer.Option("--source", help="A procedural stream: procedural:arena,seed=3,duration=30.")
    ],
    scenario: Annotated[
        str,
        typer.Option("--scenario", help="Whose lines the record labels: solo, co-commentary or guidance."),
    ] = "solo",
    fps: Annotated[
        int, typer.Option("--fps", help="Frames a second in the video (a multiple of the run's).")
    ] = 10,
) -> None:
    """Write a procedural clip as a video file with its annotation JSONL: a sample of your own video."""
    from embodia.core.runs import check_out_file
    from embodia.envs.streams.export import export_procedural, labels_path

    with user_errors():
        check_out_file(out)
        check_out_file(labels_path(out), "the annotation file")
        with err_console.status(f"writing {escape(str(out))}"):
            written = export_procedural(source, out, scenario, fps)
    annotation = written.annotation
    height, width = written.size
    run_with = f"--source video:{written.video},labels={written.labels} --scenario {scenario}"
    console.print(
        f"wrote {_bold(written.video)} ({annotation.video_end} s, {written.fps} fps, {width}x{height}) and "
        f"{_bold(written.labels)} ({escape(annotation.tag)}: {len(annotation.own_lines())} lines by "
        f"{escape(annotation.speaker)}); stream it with {escape(run_with)}",
        highlight=False,
        soft_wrap=True,
    )


@stream_app.command("train-gate")
def stream_train_gate(
    model: Annotated[Path, typer.Option("--model", help="A local VLM directory (transformers).")],
    out: Annotated[
        Path, typer.Option("--out", help="Where to save the gate (gate.json + gate.safetensors).")
    ],
    games: Annotated[
        str, typer.Option("--games", help="Procedural games, comma-separated.")
    ] = "arena,dungeon",
    seeds: Annotated[str, typer.Option("--seeds", help="Training seeds, e.g. 0-5.")] = "0-5",
    held_out: Annotated[
        str, typer.Option("--held-out", help="Held-out seeds scored after training.")
    ] = "100-102",
    duration: Annotated[int, typer.Option("--duration", help="Seconds per training stream.")] = 90,
    scenario: Annotated[str, typer.Option("--scenario", help="solo, co-commentary or guidance.")] = "solo",
    epochs: Annotated[int, typer.Option("--epochs")] = 100,
    threshold: Annotated[
        float, typer.Option("--threshold", help="Speak above this score.", callback=_finite)
    ] = 0.3,
) -> None:
    """Train the learned speak gate (Proact-VL's head and loss) on procedural streams."""
    from embodia.core.runs import check_out_folder
    from embodia.envs.streams.sources import check_scenario
    from embodia.policies.speak_gate import fit_gate

    with user_errors():
        check_out_folder(out)
        check_scenario(scenario)
        if not model.is_dir():
            raise EmbodiaError(f"--model {model} is not a model directory")
        names = [g.strip() for g in games.split(",") if g.strip()]

        def specs(text: str) -> list[str]:
            return [f"procedural:{g},seed={s},duration={duration}" for g in names for s in _seed_range(text)]

        with err_console.status("computing features and training the gate"):
            report = fit_gate(
                model,
                out,
                specs(seeds),
                specs(held_out) if held_out else [],
                scenario=scenario,
                epochs=epochs,
                threshold=threshold,
            )
    console.print_json(json.dumps(report))


LIVE_REPORT = "live_report.json"
"""Where ``eval live`` writes its report without ``--out``: beside the predictions."""

_LIVE_HEADLINE: dict[str, tuple[str, str]] = {
    # summary key: (row name, format), in the order printed
    "f1_macro": ("F1, macro (mean over clips)", "pct"),
    "f1_micro": ("F1, micro (pooled seconds)", "pct"),
    "timediff_mean": ("TimeDiff, mean (s)", "num"),
    "pred_speaking_rate": ("speaking rate", "pct"),
    "label_speaking_rate": ("speaking rate of the labels", "pct"),
    "win_rate": ("win rate against the baseline", "pct"),
    "overlap_rate": ("overlap with the co-caster", "pct"),
    "answer_rate": ("queries answered in time", "pct"),
    "rtf": ("real-time factor", "ratio"),
}
_ALWAYS_SHOWN = {"f1_macro", "f1_micro", "timediff_mean", "pred_speaking_rate", "label_speaking_rate"}


def _live_value(value: Any, style: str) -> str:
    if value is None:
        return "n/a"
    return {"pct": _pct, "num": _num}.get(style, lambda v: f"{float(v):.3f}")(value)


def live_table(report: dict[str, Any], title: str) -> Table:
    """The headline numbers of an ``eval live`` report (its ``summary``), one row each: the
    metrics that always run, then those that ran for these clips (PAUC with a judge, the win
    rate with a baseline, overlap for co-commentary, answers for guidance, RTF with timings)."""
    counts, summary = report["counts"], report["summary"]
    table = Table(title=escape(title))
    table.add_column("metric")
    table.add_column("value", justify="right")
    clips = f"{counts['evaluated_clips']} of {counts['label_clips']}"
    table.add_row("clips evaluated (of labelled)", clips)
    for key, value in summary.items():
        if key.startswith("pauc_omega_"):
            table.add_row(f"PAUC, ω = {escape(key.removeprefix('pauc_omega_'))}", _live_value(value, "ratio"))
        elif key in _LIVE_HEADLINE and (value is not None or key in _ALWAYS_SHOWN):
            name, style = _LIVE_HEADLINE[key]
            if key == "answer_rate":
                name = f"queries answered within {report['guidance']['overall']['window']} s"
            table.add_row(name, _live_value(value, style))
    return table


@eval_app.command("live")
def eval_live(
    pred: Annotated[
        Path, typer.Option("--pred", help="Predictions JSONL ({video_id, pred: {sec: text}, ...}).")
    ],
    label: Annotated[
        Path, typer.Option("--label", help="Labels JSONL ({video_id, label: {sec: text}, ...}).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help=f"Write the full report (JSON) here; by default {LIVE_REPORT} beside --pred, "
            "which an earlier report there keeps from being replaced.",
        ),
    ] = None,
    judge: Annotated[
        str,
        typer.Option("--judge", help="PAUC judge: lexical (ROUGE-L, offline), none, or a chat policy spec."),
    ] = "lexical",
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="Baseline predictions JSONL for the pairwise win rate.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the full report as JSON instead of the summary table.")
    ] = False,
) -> None:
    """Live Gaming Benchmark metrics of a prediction file against its labels: a summary table,
    and the full report (per tag, per clip) written to a file."""
    from embodia.core.runs import check_out_file, write_atomic
    from embodia.evals import live

    with user_errors():
        report_path = out if out is not None else pred.parent / LIVE_REPORT
        if out is None and report_path.exists():
            # Not named by the user: an earlier report (perhaps from a costly judge) is kept.
            raise EmbodiaError(
                f"{report_path} holds an earlier report: pass --out {report_path} to replace it, "
                "or --out FILE to write this one elsewhere"
            )
        check_out_file(report_path, "--out" if out is not None else "the report")
        scorer: Any = None
        pairwise: Any = None
        if judge == "lexical":
            scorer, pairwise = live.LexicalJudge(), live.LexicalPairwiseJudge()
        elif judge != "none":
            from embodia.policies import make_policy

            policy = make_policy(judge, connect=True)
            scorer, pairwise = live.PolicyJudge(policy), live.PolicyPairwiseJudge(policy)
        options: dict[str, Any] = {}
        if baseline is not None:
            if pairwise is None:
                raise EmbodiaError(
                    "--baseline needs a judge for the win rate: pass --judge lexical or a policy"
                )
            options.update(baseline_path=baseline, pairwise_judge=pairwise)
        report = live.evaluate_files(pred, label, scorer, **options)
        text = json.dumps(report, indent=2, default=float)
        report_path.parent.mkdir(parents=True, exist_ok=True)  # checked writable before the evaluation
        write_atomic(report_path, text + "\n")
    if as_json:  # stdout holds only the JSON, for pipes
        console.print_json(text)
    else:
        console.print(live_table(report, f"Live Gaming Benchmark: {pred}"))
    (err_console if as_json else console).print(
        f"wrote the full report to {_bold(report_path)}", highlight=False, soft_wrap=True
    )


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
    seed: Annotated[int, typer.Option("--seed", callback=_seed)] = 0,
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
        f"hallucination rate {'n/a' if rate is None else f'{100 * rate:.1f}%'}; wrote {_bold(out)}",
        highlight=False,
    )


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
    seed: Annotated[int, typer.Option("--seed", callback=_seed)] = 0,
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
    console.print(f"wrote {_bold(out)}")


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
    seed: Annotated[int, typer.Option("--seed", callback=_seed)] = 0,
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
    console.print(f"wrote {items} records to {_bold(out)}", highlight=False)


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
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random weights.", callback=_seed)] = 0,
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
        line = f"built a {what} in {_bold(out)} ({details}; model card {tiny_models.MODEL_CARD})"
    else:
        line = f"{_bold(out)} already holds this {what} ({details}): nothing to do"
    use = f"--support nli:{out}" if kind == "nli" else f"--policy hf:{out}"
    for text in (
        line,
        f"{RANDOM_WEIGHTS}: its outputs are noise, for trying embodia offline only "
        f"(e.g. {escape(use)}; docs/models.md)",
    ):
        console.print(text, highlight=False, soft_wrap=True)


@app.command("view")
def view(
    runs: Annotated[
        Path, typer.Argument(help="The runs folder to look at (every run below it is listed).")
    ] = Path("runs"),
    host: Annotated[str, typer.Option("--host", help="Loopback address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port; 0 picks a free one.")] = 8765,
) -> None:
    """A local web page over run folders: panoramas, BEV, tree, prompts and answers, streams, curves."""
    from embodia.viewer.server import LOOPBACK, base_url, make_server

    with user_errors():
        if host.lower() not in LOOPBACK:
            raise EmbodiaError(
                f"--host {host} is not a loopback address: the viewer serves your runs to this machine only "
                "(127.0.0.1, ::1 or localhost)"
            )
        if not runs.is_dir():
            raise EmbodiaError(f"{runs} is not a folder of runs")
        if not 0 <= port <= 65535:
            raise EmbodiaError(f"--port must be 0-65535, got {port}")
        try:
            server = make_server(runs, host, port)
        except OSError as error:
            raise EmbodiaError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    address = base_url(host, server.server_address[1])
    console.print(
        f"viewing {_bold(runs)} at {escape(address)}/ (Ctrl-C stops)", highlight=False, soft_wrap=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main() -> None:
    app()

