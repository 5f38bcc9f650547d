"""``embodia dsr`` (generate and count DSR-Bench instances) and ``embodia eval dsr`` (a policy on them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from embodia.cli import backend_options as backends
from embodia.cli.root import bold, console, dsr_app, err_console, eval_app, user_errors, valid_seed
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command
from embodia.errors import EmbodiaError

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
        int, typer.Option("--seed", help="Generation seed (0: the published set).", callback=valid_seed)
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
    console.print(f"wrote {total} instances to {bold(out)}")


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


def _show_disagreements(disagreements: list[Any], shown: int) -> None:
    for found in disagreements[:shown]:
        console.print(
            f"  {found.id} ({found.source}): stored {json.dumps(found.stored)}, embodia "
            f"{json.dumps(found.replayed)}; data {json.dumps(found.data)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if len(disagreements) > shown:
        console.print(f"  ... and {len(disagreements) - shown} more", highlight=False)


ShownOption = Annotated[int, typer.Option("--show", help="Disagreements to print.", min=0)]


@dsr_app.command("import")
def dsr_import(
    folder: Annotated[
        Path, typer.Argument(help="The public benchmark's generation/ folder (or a copy of it).")
    ],
    out: Annotated[Path, typer.Option("--out", help="The instance file to write (.jsonl).")],
    operation: Annotated[
        list[str] | None, typer.Option("--operation", help="e.g. queue.compound; repeatable (default: all).")
    ] = None,
    show: ShownOption = 5,
) -> None:
    """Read the public DSR-Bench's released instance files into one embodia instance file,
    truths included; report every stored truth embodia's replay disagrees with."""
    from embodia.core.runs import check_out_file
    from embodia.envs.dsr import released
    from embodia.envs.dsr import suites as dsr_suites

    with user_errors():
        check_out_file(out)
        result = released.import_released(folder, operation)
        dsr_suites.write_jsonl(result.instances, out)
    for name, count in result.by_operation.items():
        console.print(f"{name}: {count}", markup=False, highlight=False)
    console.print(
        f"{len(result.instances)} instances from {result.files} files; {len(result.disagreements)} stored "
        "truths differ from embodia's replay (embodia's kept, the stored one in extra.released_truth)",
        highlight=False,
    )
    _show_disagreements(result.disagreements, show)
    console.print(f"wrote {bold(out)}")


@dsr_app.command("verify")
def dsr_verify(
    instances: Annotated[Path, typer.Argument(help="An instance file (.jsonl) to replay.")],
    show: ShownOption = 5,
) -> None:
    """Replay every instance on embodia's reference simulators and count, per operation, the
    stored truths the replay agrees with; show the first disagreements."""
    from embodia.envs.dsr import released
    from embodia.envs.dsr import suites as dsr_suites

    with user_errors():
        checked = released.verify(dsr_suites.read_jsonl(instances))
    for name, total in checked.total.items():
        console.print(f"{name}: {checked.agree[name]}/{total} agree", markup=False, highlight=False)
    agree, total = sum(checked.agree.values()), sum(checked.total.values())
    console.print(f"{agree}/{total} stored truths agree with embodia's replay", highlight=False)
    _show_disagreements(checked.disagreements, show)


def _dsr_settings() -> type[Any]:
    from embodia.evals.dsr import DSRSettings

    return DSRSettings


EVAL_DSR_OPTIONS: OptionTable = {
    "policy": FieldOption("openai:URL?model=M, hf:DIR, vllm:DIR or scripted:FILE."),
    "out": OWN,
    "suite": FieldOption("main, spatial, realistic or code."),
    "instances": FieldOption(
        "An instance file (JSONL from embodia dsr generate or import) to evaluate instead of --suite."
    ),
    "lengths": FieldOption("short, medium or long; repeatable (default: all).", "--length"),
    "operations": FieldOption("e.g. queue.compound; repeatable (default: all).", "--operation"),
    "limit": FieldOption("At most N instances, spread over operations."),
    "concurrency": OWN,
    "mode": FieldOption("stepwise, 0-CoT, CoT, k-shot, none, CodeOnly, CodeEnforce, CodeMaybe."),
    "description": FieldOption("full or name."),
    "tokens": FieldOption("Token budget per answer."),
    "temperature": FieldOption(),
    "unsafe_no_sandbox": OWN,
    "backend": OWN,
    "num_workers": OWN,
    "address": OWN,
    "worker_cpus": OWN,
    "worker_gpus": OWN,
}


@settings_command(eval_app, "dsr", _dsr_settings, EVAL_DSR_OPTIONS, hidden=("seed",))
def eval_dsr(
    options: dict[str, Any],
    out: Annotated[
        Path, typer.Option("--out", help="Run directory (answers.jsonl, report.json, report.png).")
    ],
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests in flight at once.")] = 1,
    unsafe_no_sandbox: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-sandbox",
            help="Run model-written code (the code suite) without bubblewrap's isolation. Unsafe.",
        ),
    ] = False,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """Evaluate a policy on DSR-Bench (resumes: answers already in --out are never asked again)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from embodia.core.runs import check_out_folder
    from embodia.evals.dsr import DSRSettings, run_dsr
    from embodia.policies import make_policy

    with user_errors():
        check_out_folder(out)
        _dsr_suites([options["suite"]])
        settings = DSRSettings(**options)
        where = backends.backend_from(
            backend, num_workers, address, worker_cpus, worker_gpus, concurrency=concurrency
        )
        # on Ray the workers load the policy; this process only drives them
        chat = make_policy(settings.policy, connect=True) if where.kind == "local" else None
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=err_console, transient=True) as progress:
            source = Path(settings.instances).name if settings.instances else settings.suite
            task = progress.add_task(escape(f"DSR {source}"), total=None)

            def advance(result: dict[str, Any], done: int, total: int) -> None:
                mark = "ok" if result["exact"] == 1.0 else (result["failure"] or "")
                progress.update(
                    task,
                    completed=done,
                    total=total,
                    description=escape(f"DSR {source} {result['id']} {mark}"),
                )

            report = run_dsr(
                settings,
                out,
                policy=chat,
                concurrency=concurrency,
                on_answer=advance,
                unsafe_no_sandbox=unsafe_no_sandbox,
                backend=where,
            )
    # the model's name says "random weights" for a tiny model (embodia models tiny)
    name = chat.name if chat is not None else ", ".join(report["models"]) or settings.policy
    table = Table(title=escape(f"DSR-Bench {settings.suite}: {name}"))
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
    console.print(f"failures: {escape(failures)}; wrote {bold(out)}", highlight=False)
