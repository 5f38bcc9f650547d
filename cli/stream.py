"""``embodia stream`` (run agents over live streams, export clips, train the speak gate) and
``embodia eval live`` (the Live Gaming Benchmark's metrics of a prediction file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from embodia.cli import backend_options as backends
from embodia.cli.root import bold, console, err_console, eval_app, finite, stream_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command
from embodia.core.limits import MAX_SET_SIZE, check_range, check_seed
from embodia.errors import EmbodiaError

if TYPE_CHECKING:
    from embodia.agents.proactive import ChunkEvent


def _live_settings() -> type[Any]:
    from embodia.evals.live_run import LiveSettings

    return LiveSettings


STREAM_RUN_OPTIONS: OptionTable = {
    "out": OWN,
    "source": FieldOption(
        "procedural:arena,seed=3[,duration=120] or video:FILE.mp4,labels=FILE.jsonl.",
        default="procedural:arena,seed=0",
    ),
    "scenario": FieldOption("solo, co-commentary or guidance."),
    "agent": FieldOption(
        "heuristic, gate:DIR (a trained gate), a chat policy spec (hf:DIR, openai:URL) asked SPEAK or "
        "SILENT, or tools:SPEC (a tool-calling VLM that calls speak or stay_silent each second)."
    ),
    "speaker": FieldOption("Policy spec that writes the lines (default: the agent's own)."),
    "agents": FieldOption("Co-commentary self-play: agents sharing the stream."),
    "threshold": FieldOption("Speak when the score exceeds this."),
    "token_cap": FieldOption("Words per spoken second."),
    "budget": FieldOption(
        "Each agent's conversation in the speaking model's tokens (words without a model; "
        "default: what its context leaves, else 16,384)."
    ),
    "realtime": FieldOption("Chunks arrive on the wall clock; late decisions are dropped."),
    "time_scale": FieldOption("Wall seconds per stream second."),
    "fps": FieldOption("Frames per 1-second chunk (the reference: 2; at most 60)."),
    "video": FieldOption("Write stream.mp4.", "--video/--no-video"),
    "resume": OWN,
}


@settings_command(stream_app, "run", _live_settings, STREAM_RUN_OPTIONS)
def stream_run(
    options: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", help="Run directory, e.g. runs/NAME.")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a killed run in --out.")] = False,
) -> None:
    """Run proactive agents over a live stream; writes predictions, labels, summary, timeline and video."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from embodia.evals.live_run import LiveSettings, run_live

    with user_errors():
        settings = LiveSettings(**options)
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[line]}", markup=False),
        )
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task(f"{escape(settings.scenario)} stream", total=None, line="")

            def show(event: ChunkEvent) -> None:
                line = f"t={event['second']} {event['speaker']}: {event['text']}" if event["text"] else ""
                progress.update(task, advance=1, line=line[:70])

            summary = run_live(settings, out, resume=resume, on_event=show)
    console.print(
        f"{escape(summary['agent'])} on {escape(summary['source'])} ({escape(summary['scenario'])}): "
        f"spoke {summary['spoken_seconds']} "
        f"of {summary['seconds']} s (label {summary['label_seconds']}), F1 {_pct(summary['f1_micro'])}, "
        f"TimeDiff {_num(summary['timediff_mean'])} s, RTF {summary['latency']['rtf']:.3f}, "
        f"dropped {summary['dropped']}; wrote {bold(out)}",
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
        f"wrote {bold(written.video)} ({annotation.video_end} s, {written.fps} fps, {width}x{height}) and "
        f"{bold(written.labels)} ({escape(annotation.tag)}: {len(annotation.own_lines())} lines by "
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
        float, typer.Option("--threshold", help="Speak above this score.", callback=finite)
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
    "win_rate": ("win rate against the baseline", "percent"),  # the reference's: already x 100
    "overlap_rate": ("overlap with the co-caster", "pct"),
    "answer_rate": ("queries answered in time", "pct"),
    "rtf": ("real-time factor", "ratio"),
}
_ALWAYS_SHOWN = {"f1_macro", "f1_micro", "timediff_mean", "pred_speaking_rate", "label_speaking_rate"}


def _live_value(value: Any, style: str) -> str:
    if value is None:
        return "n/a"
    if style == "percent":
        return f"{float(value):.1f}%"
    return {"pct": _pct, "num": _num}.get(style, lambda v: f"{float(v):.3f}")(value)


def _counting(settings: dict[str, Any]) -> tuple[str, str]:
    """How a report counted: the counting and its filler seconds; k, alpha and the start score."""
    fillers = "dropped" if settings["drop_silent"] else "kept"
    knobs = f"{settings['k']}, {settings['alpha']:g}, {settings['start_score']:g}"
    return f"{settings.get('counting', 'embodia')}, fillers {fillers}", knobs


def live_table(report: dict[str, Any], title: str) -> Table:
    """The headline numbers of an ``eval live`` report (its ``summary``), one row each: the
    metrics that always run, then those that ran for these clips (PAUC with a judge, the win
    rate with a baseline, overlap for co-commentary, answers for guidance, RTF with timings)."""
    counts, summary = report["counts"], report["summary"]
    table = Table(title=escape(title))
    table.add_column("metric")
    table.add_column("value", justify="right")
    clips = f"{counts['evaluated_clips']} of {counts['label_clips']}"
    counting, knobs = _counting(report["settings"])
    table.add_row("counting", counting)
    table.add_row("k, alpha, start score", knobs)
    table.add_row("clips evaluated (of labelled)", clips)
    if counts.get("preds_without_label"):
        table.add_row("predictions without a label (left out)", str(counts["preds_without_label"]))
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
            help="Write the full report (JSON) here, and its clips as they are scored to NAME.clips.jsonl "
            f"beside it; by default {LIVE_REPORT} beside --pred, which an earlier report there keeps from "
            "being replaced.",
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
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue an evaluation that did not finish: scored clips are not judged again."
        ),
    ] = False,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference",
            help="Count as the Proact-VL reference scripts do, for numbers that compare with the paper: "
            "filler seconds kept, predictions without a label left out (PAUC counts them as unjudged "
            "clips), a per-second baseline shown to the judge unflattened; with their README's "
            "k=2, alpha=0.2, start score 0 unless given.",
        ),
    ] = False,
    keep_fillers: Annotated[
        bool,
        typer.Option(
            "--keep-fillers",
            help='Keep silent seconds ("" and " ...") as speaking seconds, as the reference reads '
            "them (always with --reference).",
        ),
    ] = False,
    k: Annotated[
        int,
        typer.Option(
            "--k",
            help="TimeDiff tolerance (s): each predicted second more than k outside the label's span "
            "costs alpha.",
        ),
    ] = 2,
    alpha: Annotated[
        float, typer.Option("--alpha", help="TimeDiff penalty per predicted second outside the widened span.")
    ] = 0.2,
    start_score: Annotated[
        float,
        typer.Option("--start-score", help="PAUC's score (0..2) before the first judged reply."),
    ] = 0.0,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """Live Gaming Benchmark metrics of a prediction file against its labels: a summary table,
    and the full report (per tag, per clip) written to a file (resumes with --resume).
    embodia counts by default; --reference counts as the reference scripts do."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from embodia.core.runs import check_out_file
    from embodia.evals.live.units import LiveEvalSettings, clips_path, run_eval_live

    with user_errors():
        report_path = out if out is not None else pred.parent / LIVE_REPORT
        records = clips_path(report_path)
        if out is None and report_path.exists() and not resume:
            # Not named by the user: an earlier report (perhaps from a costly judge) is kept.
            continuing = ", --resume to continue its evaluation" if records.exists() else ""
            raise EmbodiaError(
                f"{report_path} holds an earlier report: pass --out {report_path} to replace it{continuing}, "
                "or --out FILE to write this one elsewhere"
            )
        check_out_file(report_path, "--out" if out is not None else "the report")
        check_out_file(records, "the clips file")
        where = backends.backend_from(backend, num_workers, address, worker_cpus, worker_gpus)
        settings = LiveEvalSettings(
            pred=pred,
            label=label,
            judge=judge,
            baseline=baseline,
            k=k,
            alpha=alpha,
            start_score=start_score,
            drop_silent_seconds=not (keep_fillers or reference),
            counting="reference" if reference else "embodia",
        )
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task("clips", total=None)

            def advance(row: dict[str, Any], done: int, total: int) -> None:
                clip = row["clip"]
                progress.update(
                    task, completed=done, total=total, description=escape(f"clip {clip['video_id']}")
                )

            report = run_eval_live(settings, report_path, resume=resume, backend=where, on_clip=advance)
        text = json.dumps(report, indent=2, default=float)
    if as_json:  # stdout holds only the JSON, for pipes
        console.print_json(text)
    else:
        console.print(live_table(report, f"Live Gaming Benchmark: {pred}"))
    (err_console if as_json else console).print(
        f"wrote the full report to {bold(report_path)}", highlight=False, soft_wrap=True
    )
