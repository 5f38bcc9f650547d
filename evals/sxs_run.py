"""``embodia eval sxs``: content latency against accuracy, for SxS and its baselines, on items
with exact support (text puzzles, DSR-Bench traces).

Modes, all on the same items and the same policy, each streamed so that wall-clock latency is
measured from the backend's own token stream (``on_text``):

- ``think_then_answer``: reason inside ``<think>``, then the whole answer in one ``<speak>``.
- ``naive_early_streaming``: plain step-by-step reasoning, every word shown as it comes, in
  updates of ``k`` tokens (nothing is private).
- ``prompted_interleaving``: the interleaving prompt, no guard: speak spans are shown as written.
- ``sxs``: the SxS runtime (:mod:`embodia.agents.sxs`), whose disclosure guard releases a
  speak chunk only when the exact step checker finds it supported by the reasoning so far.
- ``sft_target``: no model: the interleaved trajectory the data builder makes from the item's
  ground-truth (reasoning, answer) pair, i.e. what SxS fine-tuning teaches. It is the point an
  SxS policy is trained towards, not a model's result.

Accuracy is the task's exact check of what the user saw (the visible text only). Per-stream
metrics are those of :mod:`embodia.evals.content_latency`; ``wait_to_content_tokens`` is TTFC,
or the whole stream when nothing was shown (the user waited to the end for nothing), so
modes that never speak are not flattered on the Pareto plots. Premature commitment uses the
item's exact contradiction test (a disclosed step absent from the final answer's solution).

``runs/NAME/results.jsonl`` gets one line per (item, mode) as it finishes; ``--resume`` skips
those already there. Each (item, mode) is one unit of a :class:`~embodia.core.scale_out.Backend`
(``--backend ray`` runs them on Ray workers, each loading the policy and the support checker
once); the lines come in the order units finish, and a run started on one backend resumes on
the other. ``report.json`` holds the means per mode, computed from the records in item order
(the same whichever backend ran them); ``pareto_ttfc.png`` and ``pareto_wait.png`` plot
accuracy against TTFC and against a random observer's expected wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from embodia.agents.sxs import run_sxs
from embodia.core.chat import ContextOverflowError, Message, Policy, check_output_budget
from embodia.core.interleaved import SXS_SYSTEM, Span, parse_deltas, parse_interleaved, timed_blocks
from embodia.core.limits import MAX_SET_SIZE, check_range
from embodia.core.runs import RecordCallback, RunFolder, runner
from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.errors import EmbodiaError
from embodia.evals.content_latency import (
    PROMPTED_INTERLEAVING_SYSTEM,
    aggregate,
    pareto_plot,
    stream_metrics,
    timed_completion,
)
from embodia.policies.recipes.sxs_data import (
    JudgeSupport,
    NLISupport,
    Support,
    SxSItem,
    build_trajectory,
    make_item,
    render,
    system_prompt,
)

MODES = ("think_then_answer", "naive_early_streaming", "prompted_interleaving", "sxs", "sft_target")
POLICY_MODES = MODES[:4]
RESULTS = "results.jsonl"

THINK_THEN_ANSWER_SYSTEM = (
    "Reason privately inside <think>...</think>. When you are done, give the whole answer once, "
    "inside <speak>...</speak>."
)
NAIVE_SYSTEM = "Think step by step, writing your reasoning out, then give the answer."
SYSTEMS = {
    "think_then_answer": THINK_THEN_ANSWER_SYSTEM,
    "naive_early_streaming": NAIVE_SYSTEM,
    "prompted_interleaving": PROMPTED_INTERLEAVING_SYSTEM,
    "sxs": SXS_SYSTEM,
}


@dataclass(frozen=True)
class SxSRunSettings:
    source: str
    """A text puzzle (maze, sudoku, frozenlake, tsp) or ``dsr:OPERATION`` (e.g. dsr:queue.compound)."""
    policy: str
    modes: str = ",".join(MODES)
    difficulty: str = "medium"
    """Puzzle difficulty, or the DSR length (short, medium, long)."""
    items: int = 10
    seed: int = 0
    max_tokens: int = 1024
    k: int = 16
    """Tokens per update of naive early streaming."""
    support: str = "exact"
    """The SxS guard's support check: ``exact`` (the item's step checker), ``judge:SPEC`` (a chat
    model asked yes/no) or ``nli:DIR`` (an NLI cross-encoder)."""


SupportFactory = Callable[[SxSItem], Support]


def make_support(spec: str) -> SupportFactory:
    """A per-item support checker from ``--support``; models are loaded once per run."""
    if spec == "exact":
        return lambda item: item.new_support()
    if spec.startswith("judge:"):
        from embodia.policies import make_policy

        judge = make_policy(spec.removeprefix("judge:"), connect=True)
        return lambda item: JudgeSupport(judge)
    if spec.startswith("nli:"):
        nli = NLISupport(spec.removeprefix("nli:"))
        return lambda item: nli
    raise EmbodiaError(f"unknown --support {spec!r}: expected exact, judge:SPEC or nli:DIR")


def parse_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise EmbodiaError(
            f"unknown SxS mode {', '.join(unknown) or text!r}: expected some of {', '.join(MODES)}"
        )
    return modes


def _messages(system: str, item: SxSItem) -> list[Message]:
    return [
        {"role": "system", "content": system_prompt(system, item)},
        {"role": "user", "content": item.question},
    ]


def run_mode(
    mode: str,
    item: SxSItem,
    policy: Policy | None,
    settings: SxSRunSettings,
    support: SupportFactory | None = None,
) -> dict[str, Any]:
    """One item under one mode: what the user saw, scored, with its content-latency metrics."""
    started = time.perf_counter()
    raw = ""
    extra: dict[str, Any] = {}
    spans: list[Span]
    if mode == "sft_target":
        raw = render(build_trajectory(item.reasoning, item.chunks, item.new_support()))
        spans = parse_interleaved(raw)
    elif policy is None:
        raise EmbodiaError(f"mode {mode} needs a --policy")
    elif mode == "sxs":
        check = item.new_support() if support is None else support(item)
        result = run_sxs(
            item.question,
            policy,
            check,
            system=system_prompt(SXS_SYSTEM, item),
            max_tokens=settings.max_tokens,
        )
        raw, spans = result.text, result.visible_spans()
        extra = {
            "withheld": result.withheld,
            "unsupported_released": sum(not d.supported for d in result.disclosures),
            **({"judge_verdicts": check.verdicts} if isinstance(check, JudgeSupport) else {}),
        }
    else:
        raw, deltas = timed_completion(policy, _messages(SYSTEMS[mode], item), settings.max_tokens)
        spans = timed_blocks(deltas, settings.k) if mode == "naive_early_streaming" else parse_deltas(deltas)
    visible = "\n".join(s.text for s in spans if s.channel == "speak")
    verdict = item.score(visible)
    metrics = stream_metrics(spans, final=visible, contradicts=item.contradicts).as_dict()
    ttfc = metrics["ttfc_tokens"]
    return {
        "mode": mode,
        "item": item.id,
        "correct": verdict.correct,
        "score": verdict.score,
        "reason": verdict.reason,
        "visible": visible,
        "raw": raw,
        "wait_to_content_tokens": metrics["n_tokens"] if ttfc is None else ttfc,
        **metrics,
        **extra,
        "wall_s": time.perf_counter() - started,
    }


Loaded = tuple[Policy | None, SupportFactory | None]
"""What a worker runs the modes with: the policy and the support checker (None where unused)."""


def _load(settings: SxSRunSettings, policy: bool, support: bool) -> Loaded:
    """The policy (only when ``policy``: a policy mode is asked; its reply budget checked) and
    the support checker (only when ``support``: the sxs mode is asked)."""
    from embodia.policies import make_policy

    chat = make_policy(settings.policy, connect=True) if policy else None
    if chat is not None:
        check_output_budget(chat, settings.max_tokens, "--max-tokens")
    return chat, make_support(settings.support) if support else None


def _mode_worker(
    settings: SxSRunSettings,
    needs: tuple[bool, bool],
    loaded: Loaded | None = None,
    items: Sequence[SxSItem] | None = None,
) -> Callable[[tuple[int, str], object], dict[str, Any]]:
    """A worker of the run: the policy and the support checker loaded once (``loaded``, else,
    on a Ray worker, as ``needs`` says: see :func:`_load`), then each (item index, mode)
    unit's record. Items are made once per worker (``items``: those made already)."""
    policy, support = _load(settings, *needs) if loaded is None else loaded
    made: dict[int, SxSItem] = dict(enumerate(items or ()))

    def run_unit(unit: tuple[int, str], _: object) -> dict[str, Any]:
        index, mode = unit
        if index not in made:
            made[index] = make_item(settings.source, index, settings.difficulty, settings.seed)
        try:
            return {"index": index, **run_mode(mode, made[index], policy, settings, support)}
        except ContextOverflowError as error:
            # the judge (--support judge:SPEC) asks with a budget of its own
            flag = "--max-tokens" if error.max_tokens == settings.max_tokens else None
            raise error.naming(
                f"item {index} ({mode})",
                output_flag=flag,
                prompt_advice="choose a lower --difficulty",
            ) from error

    return run_unit


def unit_key(index: int, mode: str) -> str:
    """An (item, mode) unit's key (``item-0003/sxs``)."""
    return f"item-{index:04d}/{mode}"


@runner
def run_sxs_eval(
    settings: SxSRunSettings,
    out: Path,
    *,
    resume: bool = False,
    on_record: RecordCallback | None = None,
    backend: Backend = LOCAL,
) -> dict[str, Any]:
    """Run every (item, mode) without a record yet, one line each in ``results.jsonl``
    (``on_record`` gets each as it is written), then write the report and its plots.

    Each (item, mode) is one unit of ``backend`` (:mod:`embodia.core.scale_out`): locally the
    policy (only if a policy mode is left to run) and the support checker are loaded here,
    before anything is written, and the units run item by item, the modes in their order; on
    Ray every worker loads its own once and runs the units sent to it, and their records land
    in ``results.jsonl`` as they arrive. The report is computed from the records in item order,
    so it is the same whichever backend ran them."""
    folder = RunFolder(out, RESULTS)
    modes = parse_modes(settings.modes)
    check_range("--items", settings.items, 1, MAX_SET_SIZE)
    if settings.k < 1:
        raise EmbodiaError(f"--k must be at least 1, got {settings.k}")
    items = [make_item(settings.source, i, settings.difficulty, settings.seed) for i in range(settings.items)]
    folder.begin(asdict(settings), resume)
    # a record without its item's index and its mode is made again
    done = [r for r in folder.kept_records() if isinstance(r.get("index"), int) and "mode" in r]
    rows = {(int(r["index"]), str(r["mode"])): r for r in done}
    order = [(i, m) for i in range(settings.items) for m in modes]
    todo = [Unit(unit_key(i, m), (i, m)) for i, m in order if (i, m) not in rows]
    needs = (any(u.payload[1] in POLICY_MODES for u in todo), "sxs" in modes)
    if backend.kind == "local":  # loaded here, before anything is written
        factory = partial(_mode_worker, settings, needs, _load(settings, *needs), items)
    else:  # each Ray worker loads its own
        factory = partial(_mode_worker, settings, needs)
    with (
        folder.recording(done, {"settings": asdict(settings)}, default=str) as log,
        WorkerPool(factory, backend) as pool,
    ):

        def record(_: str, row: dict[str, Any]) -> None:
            log.append(row)
            rows[int(row["index"]), str(row["mode"])] = row
            if on_record is not None:
                on_record(row)

        pool.run(todo, record)
    report = summarise([rows[unit] for unit in order], settings, out)
    folder.finish("report.json", report)
    return report


REPORTED = (
    "correct",
    "score",
    "ttfc_tokens",
    "ttfc_s",
    "wait_to_content_tokens",
    "mean_gap",
    "max_gap",
    "expected_wait",
    "expected_wait_s",
    "disclosure_rate",
    "early_disclosure",
    "premature_commitment",
    "n_tokens",
    "wall_s",
    "no_content",
    "n",
)


def summarise(rows: list[dict[str, Any]], settings: SxSRunSettings, out: Path) -> dict[str, Any]:
    """Means per mode (``accuracy`` = mean of ``correct``) and the two Pareto plots."""
    per_mode = {
        mode: {("accuracy" if k == "correct" else k): v for k, v in means.items() if k in REPORTED}
        for mode, means in aggregate(rows, by="mode").items()
    }
    points = [{"mode": mode, **means} for mode, means in per_mode.items()]
    plots = {}
    for name, x in (("pareto_ttfc.png", "wait_to_content_tokens"), ("pareto_wait.png", "expected_wait")):
        pareto_plot(
            points, out / name, x=x, y="accuracy", label="mode", title=f"{settings.source}: accuracy vs {x}"
        )
        plots[name.removesuffix(".png")] = name
    return {"settings": asdict(settings), "items": settings.items, "modes": per_mode, "plots": plots}
