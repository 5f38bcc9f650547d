"""Evaluating a policy on DSR-Bench: resumable, concurrent, with a report and diagnostics.

A run directory holds ``run.json`` (the settings), ``answers.jsonl`` (one line per answered
instance, appended and flushed as each answer arrives: reply text, tokens, latency, score),
``report.json`` and ``report.png`` (per-category radar and bars). Running again over the same
directory with the same settings asks only for the instances that have no answer yet, so a
crash or a kill loses at most the requests in flight.

A ``--tokens`` that leaves no room in the model's context is refused before anything is
asked; a prompt that does not fit ends the run with an error naming the instance and the
option to change, the answers so far kept.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from embodia.core.chat import ContextOverflowError, Policy, check_output_budget, check_temperature
from embodia.core.limits import MAX_CONCURRENCY, check_range
from embodia.core.runs import RecordLog, RunFolder, runner, settings_differences, write_json
from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.envs.dsr import prompts, suites
from embodia.envs.dsr.core import CATEGORIES, DSRError
from embodia.envs.dsr.env import score_answer
from embodia.envs.dsr.sandbox import DEFAULT_LIMITS, Limits, require_isolation
from embodia.envs.dsr.suites import Instance

logger = logging.getLogger(__name__)

RUN_FILE, ANSWERS_FILE, REPORT_FILE, CHART_FILE = "run.json", "answers.jsonl", "report.json", "report.png"
GROUP_KEYS = ("category", "structure", "operation", "length", "prompt_mode", "suite")
INSTANCE_KEYS = ("id", "suite", "category", "structure", "operation", "length")
"""What an answer record says of its instance (then its ``prompt_mode``, the reply, the score)."""


@dataclass(frozen=True)
class DSRSettings:
    policy: str
    suite: str = "main"
    lengths: tuple[str, ...] = ("short", "medium", "long")
    operations: tuple[str, ...] | None = None
    limit: int | None = None
    mode: str = "stepwise"
    description: str = "full"
    tokens: int = prompts.DEFAULT_TOKENS
    temperature: float = 0.0
    seed: int = suites.DEFAULT_SEED
    instances: str | None = None
    """An instance file (JSONL, as ``embodia dsr generate`` or ``embodia dsr import`` write it)
    to evaluate instead of the generated suite; ``lengths``, ``operations`` and ``limit`` still
    select among its instances."""

    def __post_init__(self) -> None:
        prompts.check_mode(self.mode, self.description)
        if self.instances is not None and not Path(self.instances).is_file():
            raise DSRError(f"--instances {self.instances}: no such file")
        if self.limit is not None and self.limit <= 0:
            raise DSRError(f"--limit must be positive, got {self.limit}")
        if self.tokens <= 0:
            raise DSRError(f"--tokens must be positive, got {self.tokens}")
        check_temperature(self.temperature)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["lengths"] = list(self.lengths)
        data["operations"] = None if self.operations is None else list(self.operations)
        return data


def select_instances(settings: DSRSettings) -> list[Instance]:
    """The run's instances: ``limit`` taken round-robin over the groups so every operation is sampled."""
    if settings.instances is None:
        found = list(
            suites.generate(
                (settings.suite,),
                seed=settings.seed,
                lengths=settings.lengths,
                operations=settings.operations,
            )
        )
    else:
        found = [
            i
            for i in suites.read_jsonl(Path(settings.instances))
            if i.length in settings.lengths
            and (settings.operations is None or i.operation in settings.operations)
        ]
        if not found:
            raise DSRError(
                f"--instances {settings.instances}: no instance of the lengths and operations asked for"
            )
    if settings.limit is None or settings.limit >= len(found):
        return found
    by_group: dict[tuple[str, str], list[Instance]] = defaultdict(list)
    for instance in found:
        by_group[(instance.operation, instance.length)].append(instance)
    queues = list(by_group.values())
    chosen: list[Instance] = []
    depth = 0
    while len(chosen) < settings.limit:
        for queue in queues:
            if depth < len(queue) and len(chosen) < settings.limit:
                chosen.append(queue[depth])
        depth += 1
    return chosen


def _check_run(out: Path, settings: DSRSettings) -> bool:
    """Whether ``out`` holds this DSR run already (it is then continued); an error naming every
    setting that differs when it holds another."""
    run_file = out / RUN_FILE
    if not run_file.is_file():
        return False
    try:
        saved = json.loads(run_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DSRError(f"cannot continue {out}: {RUN_FILE} is not valid JSON ({exc})") from None
    if not isinstance(saved, dict):
        raise DSRError(f"cannot continue {out}: {RUN_FILE} is not a JSON object")
    differences = settings_differences(saved, settings.to_json())
    if differences:
        raise DSRError(
            f"{out} holds a DSR run with other settings ({'; '.join(differences)}); use another --out"
        )
    return True


def _run_record(settings: DSRSettings) -> dict[str, Any]:
    """``run.json``: the settings, and ``random_weights`` when the policy is a model of random
    weights (``embodia models tiny``); continuing a run compares the settings only."""
    from embodia.core.random_weights import random_weights_in

    record = settings.to_json()
    notes = random_weights_in(record)
    return {**record, "random_weights": notes} if notes else record


def answer_one(
    policy: Policy,
    instance: Instance,
    settings: DSRSettings,
    limits: Limits = DEFAULT_LIMITS,
    *,
    isolated: bool = True,
) -> dict[str, Any]:
    mode = prompts.instance_mode(instance, settings.mode)
    chat = prompts.messages(instance, settings.mode, description=settings.description, tokens=settings.tokens)
    try:
        completion = policy.complete(chat, max_tokens=settings.tokens, temperature=settings.temperature)
    except ContextOverflowError as error:
        raise error.naming(
            instance.id, output_flag="--tokens", prompt_advice="choose shorter instances (--length short)"
        ) from error
    score = score_answer(completion.text, instance, mode, limits, isolated=isolated)
    return {
        **{key: getattr(instance, key) for key in INSTANCE_KEYS},
        "prompt_mode": mode,
        "reply": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": round(completion.latency_s, 4),
        "model": completion.model or policy.name,
        **score.to_json(),
    }


@runner
def run_dsr(
    settings: DSRSettings,
    out: Path,
    *,
    resume: bool = True,
    policy: Policy | None = None,
    concurrency: int = 1,
    on_answer: Callable[[dict[str, Any], int, int], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    unsafe_no_sandbox: bool = False,
    backend: Backend = LOCAL,
) -> dict[str, Any]:
    """Ask the policy (``policy``, else the one ``settings.policy`` names) every selected
    instance without an answer yet, then write the report.

    A folder that holds this run (same settings) is continued, as ``embodia eval dsr`` always
    does; ``resume=False`` refuses it instead. Answers that are code run isolated by the
    operating system; where that cannot be had the run is refused before anything is asked,
    unless ``unsafe_no_sandbox``.

    Each instance is one unit of ``backend`` (:mod:`embodia.core.scale_out`): on Ray every
    worker loads the policy once (``policy`` when given, pickled to it, else
    ``settings.policy``) and answers the instances sent to it; ``concurrency`` requests are in
    flight per worker. The answers land in ``answers.jsonl`` as they arrive, whichever backend
    asked, so a run resumes on either.
    """
    check_range("--concurrency", concurrency, 1, MAX_CONCURRENCY, DSRError)
    backend = replace(backend, concurrency=concurrency)
    if policy is None and backend.kind == "local":
        from embodia.policies import make_policy

        policy = make_policy(settings.policy, connect=True)
    folder = RunFolder(out, ANSWERS_FILE, settings_file=RUN_FILE)
    if policy is not None:
        # --tokens at or over the model's context gets every request refused (vLLM: HTTP 400)
        check_output_budget(policy, settings.tokens, "--tokens")
    instances = select_instances(settings)
    runs_code = any(prompts.instance_mode(i, settings.mode) == "CodeOnly" for i in instances)
    if runs_code and not unsafe_no_sandbox:
        require_isolation()
    elif runs_code:
        logger.warning("--unsafe-no-sandbox: model-written code runs without operating-system isolation")
    isolated = not unsafe_no_sandbox
    folder.resuming = _check_run(out, settings)
    if folder.resuming and not resume:
        raise DSRError(f"{out} holds a DSR run already; continue it (resume) or use another --out")
    recorded = folder.kept_records()
    answers = {record["id"]: record for record in recorded if "id" in record}
    wanted = {i.id for i in instances}
    todo = [Unit(i.id, i) for i in instances if i.id not in answers]
    done = sum(1 for key in answers if key in wanted)
    factory = partial(_answer_worker, policy, settings, limits, isolated, runs_code)
    with folder.creating():
        write_json(out / RUN_FILE, _run_record(settings), indent=1)
        # A torn last line goes before appending, or the next answer would be glued to it.
        with RecordLog(folder.log, recorded) as log, WorkerPool(factory, backend) as pool:

            def record(_: str, result: dict[str, Any]) -> None:
                nonlocal done
                log.append(result)
                answers[result["id"]] = result
                done += 1
                if on_answer is not None:
                    on_answer(result, done, len(instances))

            pool.run(todo, record)
    report = build_report([answers[i.id] for i in instances], settings)
    folder.finish(REPORT_FILE, report, indent=1)
    write_chart(report, out / CHART_FILE)
    return report


def _answer_worker(
    policy: Policy | None, settings: DSRSettings, limits: Limits, isolated: bool, runs_code: bool
) -> Callable[[Instance, object], dict[str, Any]]:
    """A worker of the run: the policy loaded (and checked) once, then :func:`answer_one` per
    instance. On a Ray worker the code sandbox is checked there too: it runs the code."""
    if policy is None:
        from embodia.policies import make_policy

        policy = make_policy(settings.policy, connect=True)
        check_output_budget(policy, settings.tokens, "--tokens")
        if runs_code and isolated:
            require_isolation()
    chosen = policy
    return lambda instance, _: answer_one(chosen, instance, settings, limits, isolated=isolated)


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else 0.0


def _summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    failures = Counter(r["failure"] for r in records if r.get("failure"))
    return {
        "n": len(records),
        "exact": _mean(r["exact"] for r in records),
        "partial": _mean(r["partial"] for r in records),
        "failures": {kind: failures.get(kind, 0) for kind in ("parse", "wrong_type", "wrong_final")},
    }


def build_report(records: Sequence[Mapping[str, Any]], settings: DSRSettings | None = None) -> dict[str, Any]:
    """Overall and per-group scores, the failure taxonomy and where stepwise answers first go wrong."""
    report: dict[str, Any] = {
        "settings": settings.to_json() if settings else None,
        "overall": _summary(records),
    }
    for key in GROUP_KEYS:
        groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in records:
            groups[str(r[key])].append(r)
        report[f"by_{key}"] = {name: _summary(rs) for name, rs in sorted(groups.items())}
    stepwise = [r for r in records if r.get("steps_given")]
    wrong_at = Counter(r["first_wrong_step"] for r in stepwise if r.get("first_wrong_step") is not None)
    report["steps"] = {
        "answers_with_steps": len(stepwise),
        "all_steps_right": sum(1 for r in stepwise if r.get("first_wrong_step") is None),
        "first_wrong_step": {str(k): v for k, v in sorted(wrong_at.items())},
    }
    report["parse_failure_reasons"] = dict(
        Counter(r["reason"] for r in records if r.get("failure") == "parse").most_common(10)
    )
    report["models"] = sorted({str(r.get("model", "")) for r in records})
    return report


def write_chart(report: Mapping[str, Any], path: Path) -> None:
    """A radar of exact-match score per category beside bars of exact and partial per category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_category = report["by_category"]
    names = [c for c in CATEGORIES if c in by_category] or list(by_category)
    exact = [by_category[c]["exact"] for c in names] if names else []
    partial = [by_category[c]["partial"] for c in names] if names else []
    figure = plt.figure(figsize=(10, 4.5))
    radar = figure.add_subplot(1, 2, 1, projection="polar")
    if len(names) >= 3:
        angles = [2 * math.pi * i / len(names) for i in range(len(names))]
        radar.plot([*angles, angles[0]], [*exact, exact[0]], color="tab:blue")
        radar.fill([*angles, angles[0]], [*exact, exact[0]], color="tab:blue", alpha=0.25)
        radar.set_xticks(angles, names)
    else:
        radar.set_xticks([])
        radar.set_title("radar needs 3+ categories", fontsize=9)
    radar.set_ylim(0, 1)
    bars = figure.add_subplot(1, 2, 2)
    positions = range(len(names))
    bars.bar([p - 0.2 for p in positions], exact, width=0.4, label="exact match")
    bars.bar([p + 0.2 for p in positions], partial, width=0.4, label="partial credit")
    bars.set_xticks(list(positions), names, rotation=30, ha="right")
    bars.set_ylim(0, 1)
    bars.legend(fontsize=8)
    overall = report["overall"]
    models = ", ".join(report.get("models", [])) or "?"
    figure.suptitle(
        f"DSR-Bench {models}: exact {overall['exact']:.3f}, "
        f"partial {overall['partial']:.3f} (n={overall['n']})"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
