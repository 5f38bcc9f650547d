"""``embodia eval csmr``: CSMR (or an ablation) over puzzle items, resumable, with a report.

``runs/NAME/results.jsonl`` gets one line per item as it is solved (the item's record, the
answer, the task's verdict, queries, tokens, wall time, the evidence and the reasoner's
replies); a rerun with the same settings skips the items already there. Each item is one
unit of a :class:`~embodia.core.scale_out.Backend` (``--backend ray`` solves them on Ray
workers, each with its own perceiver and reasoner); the lines come in the order items finish,
and a run started on one backend resumes on the other. ``report.json``, computed from the
records in item order (the same whichever backend solved them):
accuracy, mean score, queries per item, tokens per item, wall time per item, how items
stopped, which guards fired, the hallucination rate (the share of answered items whose answer
asserts objects or attributes the ground truth does not have, as the task's
``hallucinated_objects(text, facts)`` defines them; None where the task has none) and, for
free-text tasks (a task whose ``score_name`` is ``"rouge_l"``, e.g. ``clevr-describe``), the
mean ROUGE-L F1 as ``rouge_l`` (None for other tasks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from embodia.agents.csmr import CSMRSettings, solve
from embodia.core.chat import ContextOverflowError, Policy, check_output_budget, context_window
from embodia.core.limits import MAX_SET_SIZE, check_range
from embodia.core.runs import RecordCallback, RunFolder, runner
from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.core.tool_calls import ToolChoice
from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.core import PuzzleTask, SceneGraphTask
from embodia.errors import EmbodiaError
from embodia.perception.scheduler import CropPerceiver, OraclePerceiver, Perceiver, VLMPerceiver

RESULTS = "results.jsonl"


@dataclass(frozen=True)
class CSMRRunSettings:
    task: str
    reasoner: str
    perceiver: str
    ablation: str = "none"
    difficulty: str = "medium"
    items: int = 20
    seed: int = 0
    k: int = 3
    max_queries: int = 6
    max_tokens: int = 4096
    tool_choice: str = "auto"
    """How the reasoner uses ``ask_perception`` and ``answer``: ``auto`` (a JSON action in
    the reply also counts) or ``required`` (every reply a call, schema-constrained where the
    backend can)."""


def make_perceiver(spec: str, task: PuzzleTask) -> Perceiver:
    """``oracle`` (exact, from the task's ground truth), ``crop:SPEC`` (zoom + VLM) or a VLM
    policy spec."""
    from embodia.core.chat import require_images
    from embodia.policies import make_policy

    if spec == "oracle":
        graph = _oracle_task(task)
        return OraclePerceiver(
            lambda item, query: graph.oracle(item.facts, query),
            parse=lambda item, question: graph.parse_question(question, item.facts),
        )
    policy = make_policy(spec.removeprefix("crop:"), connect=True)
    require_images(policy, "the CSMR perceiver")
    return CropPerceiver(policy) if spec.startswith("crop:") else VLMPerceiver(policy)


def _oracle_task(task: PuzzleTask) -> SceneGraphTask:
    """``task``, if the oracle can perceive it (it holds a scene graph); an error otherwise."""
    if not isinstance(task, SceneGraphTask):
        raise EmbodiaError(f"the {task.name} task has no oracle perception: pass a VLM spec as --perceiver")
    return task


Loaded = tuple[PuzzleTask, Perceiver, Policy | None]
"""What solves a run's items: the task, the perceiver and the reasoner (None for ``direct``)."""


def _csmr_settings(settings: CSMRRunSettings) -> CSMRSettings:
    return CSMRSettings(
        ablation=settings.ablation,
        k=settings.k,
        max_queries=settings.max_queries,
        max_tokens=settings.max_tokens,
        tool_choice=cast(ToolChoice, settings.tool_choice),
    )


def _load(settings: CSMRRunSettings, task: PuzzleTask | None = None) -> Loaded:
    """The task (``task``, else made), the perceiver and the reasoner the settings name, the
    reasoner's reply budget checked against its context."""
    from embodia.policies import make_policy

    task = make_task(settings.task) if task is None else task
    perceiver = make_perceiver(settings.perceiver, task)
    reasoner = None if settings.ablation == "direct" else make_policy(settings.reasoner, connect=True)
    if reasoner is not None:
        check_output_budget(reasoner, _csmr_settings(settings).reply_tokens, None, what="--reasoner")
    return task, perceiver, reasoner


def _item_worker(settings: CSMRRunSettings, loaded: Loaded | None) -> Callable[[int, object], dict[str, Any]]:
    """A worker of the run: the task, perceiver and reasoner made once (``loaded``, or from the
    settings on a Ray worker), then :func:`_solve_item` per item index."""
    task, perceiver, reasoner = _load(settings) if loaded is None else loaded
    csmr = _csmr_settings(settings)

    def solve_item(index: int, _: object) -> dict[str, Any]:
        instance = task.generate(settings.seed + index, settings.difficulty)
        return _solve_item(task, instance, index, perceiver, reasoner, csmr)

    return solve_item


def item_key(index: int) -> str:
    """An item's unit key (``item-0007``)."""
    return f"item-{index:04d}"


@runner
def run_csmr(
    settings: CSMRRunSettings,
    out: Path,
    *,
    resume: bool = False,
    on_record: RecordCallback | None = None,
    backend: Backend = LOCAL,
) -> dict[str, Any]:
    """Solve the items without a record yet, one line each in ``results.jsonl``
    (``on_record`` gets each as it is written), then write the report.

    Each item is one unit of ``backend`` (:mod:`embodia.core.scale_out`): locally the
    perceiver and reasoner are made here, before anything is written, and the items are
    solved in order; on Ray every worker makes its own once and solves the items sent to it,
    and their records land in ``results.jsonl`` as they arrive. The report is computed from
    the records in item order, so it is the same whichever backend solved them."""
    folder = RunFolder(out, RESULTS)
    check_range("--items", settings.items, 1, MAX_SET_SIZE)
    task = make_task(settings.task)
    if settings.difficulty not in task.difficulties:
        raise EmbodiaError(
            f"unknown difficulty {settings.difficulty!r}: expected one of {', '.join(task.difficulties)}"
        )
    folder.begin(asdict(settings), resume)
    # a record without its item's index is made again
    done = [r for r in folder.kept_records() if isinstance(r.get("index"), int)]
    loaded: Loaded | None = None
    if backend.kind == "local":
        loaded = _load(settings, task)
    elif settings.perceiver == "oracle":  # the Ray workers load; this much is checked here
        _oracle_task(task)
    rows = {int(r["index"]): r for r in done}
    todo = [Unit(item_key(index), index) for index in range(settings.items) if index not in rows]
    with (
        folder.recording(done, {"settings": asdict(settings)}, default=str) as log,
        WorkerPool(partial(_item_worker, settings, loaded), backend) as pool,
    ):

        def record(_: str, row: dict[str, Any]) -> None:
            log.append(row)
            rows[int(row["index"])] = row
            if on_record is not None:
                on_record(row)

        pool.run(todo, record)
    report = summarise([rows[index] for index in range(settings.items)], settings)
    folder.finish("report.json", report)
    return report


def _solve_item(
    task: Any, instance: Any, index: int, perceiver: Perceiver, reasoner: Any, csmr: CSMRSettings
) -> dict[str, Any]:
    """Item ``index``'s record: the task's verdict on CSMR's answer and how it was reached."""
    try:
        result = solve(instance, instance.prompt, perceiver, reasoner, csmr)
    except ContextOverflowError as error:
        # the reasoner's prompt grows with each look's evidence; a perceiver's is one image
        by_reasoner = reasoner is not None and error.window == context_window(reasoner)
        raise error.naming(
            f"item {index} ({'--reasoner' if by_reasoner else '--perceiver'})",
            output_flag=None,
            prompt_advice="lower --max-queries" if by_reasoner else "pass another --perceiver",
        ) from error
    verdict = task.score(result.answer or "", instance)
    row: dict[str, Any] = {
        "index": index,
        "instance": instance.to_record(),
        "correct": verdict.correct,
        "score": verdict.score,
        "reason": verdict.reason,
        **result.to_record(),
    }
    if task.score_name == "rouge_l":
        row["rouge_l"] = verdict.score
    if isinstance(task, SceneGraphTask) and result.answer:
        row["hallucinations"] = task.hallucinated_objects(result.answer, instance.facts)
    return row


def summarise(rows: list[dict[str, Any]], settings: CSMRRunSettings) -> dict[str, Any]:
    n = len(rows)

    def mean(key: str) -> float:
        return sum(float(r[key]) for r in rows) / n if n else 0.0

    checked = [r for r in rows if "hallucinations" in r]
    free_text = [float(r["rouge_l"]) for r in rows if "rouge_l" in r]
    return {
        "settings": asdict(settings),
        "items": n,
        "accuracy": mean("correct"),
        "score": mean("score"),
        "queries_per_item": mean("queries"),
        "repeats_per_item": mean("repeats"),
        "tokens_per_item": mean("tokens"),
        "wall_s_per_item": mean("wall_s"),
        "stops": dict(Counter(str(r["stop"]) for r in rows)),
        "guards": dict(Counter(g for r in rows for g in r["guards"])),
        "hallucination_rate": (sum(1 for r in checked if r["hallucinations"]) / len(checked))
        if checked
        else None,
        "rouge_l": sum(free_text) / len(free_text) if free_text else None,
    }
