"""``embodia eval csmr``: CSMR (or an ablation) over puzzle items, resumable, with a report.

``runs/NAME/results.jsonl`` gets one line per item as it is solved (the item's record, the
answer, the task's verdict, queries, tokens, wall time, the evidence and the reasoner's
replies); a rerun with the same settings skips the items already there. ``report.json``:
accuracy, mean score, queries per item, tokens per item, wall time per item, how items
stopped, which guards fired, the hallucination rate (the share of answered items whose answer
asserts objects or attributes the ground truth does not have, as the task's
``hallucinated_objects(text, facts)`` defines them; None where the task has none) and, for
free-text tasks (a task whose ``score_name`` is ``"rouge_l"``, e.g. ``clevr-describe``), the
mean ROUGE-L F1 as ``rouge_l`` (None for other tasks).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from embodia.agents.csmr import CSMRSettings, solve
from embodia.core.chat import ContextOverflowError, check_output_budget, context_window
from embodia.core.limits import MAX_SET_SIZE, check_range
from embodia.core.runs import RecordCallback, RunFolder, runner
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


def make_perceiver(spec: str, task: PuzzleTask) -> Perceiver:
    """``oracle`` (exact, from the task's ground truth), ``crop:SPEC`` (zoom + VLM) or a VLM
    policy spec."""
    from embodia.core.chat import require_images
    from embodia.policies import make_policy

    if spec == "oracle":
        if not isinstance(task, SceneGraphTask):
            raise EmbodiaError(
                f"the {task.name} task has no oracle perception: pass a VLM spec as --perceiver"
            )
        return OraclePerceiver(
            lambda item, query: task.oracle(item.facts, query),
            parse=lambda item, question: task.parse_question(question, item.facts),
        )
    policy = make_policy(spec.removeprefix("crop:"), connect=True)
    require_images(policy, "the CSMR perceiver")
    return CropPerceiver(policy) if spec.startswith("crop:") else VLMPerceiver(policy)


@runner
def run_csmr(
    settings: CSMRRunSettings, out: Path, *, resume: bool = False, on_record: RecordCallback | None = None
) -> dict[str, Any]:
    """Solve the items without a record yet, one line each in ``results.jsonl``
    (``on_record`` gets each as it is written), then write the report."""
    from embodia.policies import make_policy

    folder = RunFolder(out, RESULTS)
    check_range("--items", settings.items, 1, MAX_SET_SIZE)
    task = make_task(settings.task)
    csmr = CSMRSettings(
        ablation=settings.ablation,
        k=settings.k,
        max_queries=settings.max_queries,
        max_tokens=settings.max_tokens,
    )
    if settings.difficulty not in task.difficulties:
        raise EmbodiaError(
            f"unknown difficulty {settings.difficulty!r}: expected one of {', '.join(task.difficulties)}"
        )
    folder.begin(asdict(settings), resume)
    # a record without its item's index is made again
    done = [r for r in folder.kept_records() if isinstance(r.get("index"), int)]
    perceiver = make_perceiver(settings.perceiver, task)
    reasoner = None if settings.ablation == "direct" else make_policy(settings.reasoner, connect=True)
    if reasoner is not None:
        check_output_budget(reasoner, csmr.reply_tokens, None, what="--reasoner")
    finished = {int(r["index"]) for r in done}
    rows = list(done)
    with folder.recording(done, {"settings": asdict(settings)}, default=str) as log:
        for index in range(settings.items):
            if index in finished:
                continue
            instance = task.generate(settings.seed + index, settings.difficulty)
            row = _solve_item(task, instance, index, perceiver, reasoner, csmr)
            log.append(row)
            rows.append(row)
            if on_record is not None:
                on_record(row)
    report = summarise(rows, settings)
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
