"""``embodia eval live`` as a run of units: each clip is one unit, scored (its judges asked) in
this process or on Ray workers (:mod:`embodia.core.scale_out`), its row appended to a records
file as it arrives, and the report built from those records.

Files, for a report ``NAME.json``:

- ``NAME.clips.jsonl``, the records: a first line with the settings a clip's row depends on
  (``{"eval": "live", "settings": {...}}``), then one line per clip as it is scored,
  ``{"key": [video_id, begin, end, dataset_name, idx], "inputs": DIGEST, "row": {...}}``
  (:func:`~embodia.evals.live.report.score_clip`'s row; ``inputs`` is a digest of the
  clip's prediction, label and baseline), and ``{"finished": N}`` once the report is written.
- ``NAME.json``, the report: built from the records in the clips' order in the prediction
  file, so it is the same whichever backend scored which clip, in whatever order, and the
  report :func:`~embodia.evals.live.report.evaluate` gives for the same inputs.

Resuming (``resume=True``, ``--resume``): the clips already recorded are not scored again, on
either backend; a resume with other settings is refused, each difference named, and so is a
clip whose prediction, label or baseline changed since it was scored. Without ``resume`` the
records of an evaluation that did not finish are refused (their judgments cost calls); those
of a finished one are replaced with its report. The records follow embodia's run files
(:mod:`embodia.core.runs`): appended a flushed line at a time, a torn last line dropped on
reading, rewritten only atomically.

Each worker builds its judges once from the judge's spec (``lexical``, ``none`` or a chat
policy spec): on Ray no judge model leaves the worker that loads it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from embodia.core.runs import (
    RecordLog,
    check_out_file,
    read_run_records,
    runner,
    settings_differences,
    write_atomic,
)
from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.evals.live.judges import (
    Judge,
    LexicalJudge,
    LexicalPairwiseJudge,
    PairwiseJudge,
    PolicyJudge,
    PolicyPairwiseJudge,
)
from embodia.evals.live.pauc import DEFAULT_OMEGAS
from embodia.evals.live.records import (
    Clip,
    Counting,
    LiveEvalError,
    Missing,
    check_counting,
    drops_silent,
    read_clips,
)
from embodia.evals.live.report import ClipOptions, ClipUnit, plan_clips, report_from_rows, score_clip

CLIPS_SUFFIX = ".clips.jsonl"
NO_JUDGE, LEXICAL = "none", "lexical"


def clips_path(report: Path | str) -> Path:
    """The records file of a report: ``live_report.json`` -> ``live_report.clips.jsonl``."""
    report = Path(report)
    stem = report.name.removesuffix(".json")
    return report.with_name(stem + CLIPS_SUFFIX)


@dataclass(frozen=True)
class LiveEvalSettings:
    """What an ``eval live`` run evaluates: the files, the judge's spec and the metrics' settings."""

    pred: Path
    label: Path
    judge: str = LEXICAL
    """``lexical`` (ROUGE-L, offline), ``none`` (no PAUC) or a chat policy spec."""
    baseline: Path | None = None
    """Baseline predictions for the win rate (needs a judge)."""
    k: int = 2
    alpha: float = 0.2
    omegas: tuple[float, ...] = DEFAULT_OMEGAS
    start_score: float = 0.0
    answer_window: int = 5
    drop_silent_seconds: bool | None = None
    """Drop silent seconds (``""``, ``" ..."``); by default yes, unless counting as the reference."""
    missing: Missing = "skip"
    counting: Counting = "embodia"

    def __post_init__(self) -> None:
        check_counting(self.counting)
        # frozen: set through object
        object.__setattr__(self, "drop_silent_seconds", drops_silent(self.counting, self.drop_silent_seconds))
        if self.missing not in ("skip", "empty", "error"):
            raise LiveEvalError(f"missing must be 'skip', 'empty' or 'error', got {self.missing!r}")
        if self.baseline is not None and self.judge == NO_JUDGE:
            raise LiveEvalError("--baseline needs a judge for the win rate: pass --judge lexical or a policy")
        if self.judge not in (LEXICAL, NO_JUDGE):
            from embodia.policies import parse_policy_spec

            parse_policy_spec(self.judge)  # the syntax only: the workers load the policy
        self.clip_options()  # checks the omegas

    def clip_options(self) -> ClipOptions:
        return ClipOptions(
            self.k,
            self.alpha,
            tuple(self.omegas),
            self.start_score,
            bool(self.drop_silent_seconds),
            self.counting,
        )

    def clip_settings(self) -> dict[str, Any]:
        """The settings a clip's row depends on, which a resume must keep (the files are not
        among them: each clip's record holds a digest of its own inputs)."""
        return {
            "judge": self.judge,
            "win_rate": self.baseline is not None,
            "k": self.k,
            "alpha": self.alpha,
            "omegas": list(self.omegas),
            "start_score": self.start_score,
            "drop_silent": self.drop_silent_seconds,
            "counting": self.counting,
        }


def make_judges(spec: str, pairwise: bool) -> tuple[Judge | None, PairwiseJudge | None]:
    """The PAUC judge and (with ``pairwise``) the win rate's judge a spec names: ``lexical``,
    ``none`` (neither), or a chat policy spec (loaded here, both judges asking it)."""
    if spec == NO_JUDGE:
        return None, None
    if spec == LEXICAL:
        return LexicalJudge(), LexicalPairwiseJudge() if pairwise else None
    from embodia.policies import make_policy

    policy = make_policy(spec, connect=True)
    # Any: the policy judges name themselves by a read-only property, which mypy does not take
    # for the protocols' ``name`` attribute.
    judge: Any = PolicyJudge(policy)
    pairwise_judge: Any = PolicyPairwiseJudge(policy) if pairwise else None
    return judge, pairwise_judge


ClipWork = Callable[[ClipUnit, object], dict[str, Any]]


def _clip_worker(spec: str, pairwise: bool, options: ClipOptions) -> ClipWork:
    """A worker of the run: its judges built once from ``spec``, then one row per clip."""
    judge, pairwise_judge = make_judges(spec, pairwise)
    return lambda unit, _: score_clip(unit, options, judge, pairwise_judge)


def unit_key(clip: Clip) -> str:
    """A clip's unit key: its match key as JSON (the ``key`` of its record)."""
    return json.dumps(list(clip.key))


def inputs_digest(unit: ClipUnit) -> str:
    """A digest of what a clip's row is computed from: its prediction, label and baseline
    (where each was read from left out)."""

    def content(clip: Clip | None) -> dict[str, Any] | None:
        if clip is None:
            return None
        return {f.name: getattr(clip, f.name) for f in fields(clip) if f.name != "where"}

    text = json.dumps([content(unit.clip), content(unit.label), content(unit.baseline)], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _kept_records(
    path: Path, header: Mapping[str, Any], resume: bool
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The lines of ``path`` a run keeps (its first line the header) and the clip records among
    them by unit key (a later line wins); an error when it holds records it may not continue."""
    lines = read_run_records(path)
    clips = [line for line in lines if "key" in line]
    finished = bool(lines) and "finished" in lines[-1]
    if not clips or (finished and not resume):
        return [dict(header)], {}  # nothing scored yet, or a finished evaluation replaced
    if not resume:
        raise LiveEvalError(
            f"{path} holds an evaluation that did not finish ({len(clips)} clips scored): "
            "pass --resume to continue it, or pick another --out"
        )
    saved = lines[0].get("settings") if lines[0].get("eval") == "live" else None
    if not isinstance(saved, dict):
        raise LiveEvalError(f"cannot resume {path}: its first line holds no eval live settings")
    differences = settings_differences(saved, header["settings"])
    if differences:
        raise LiveEvalError(
            f"cannot resume {path}: it was started with other settings ({'; '.join(differences)}); "
            "resume it with the settings it was started with, or pick another --out"
        )
    return lines, {json.dumps(line["key"]): line for line in clips}


@runner
def run_eval_live(
    settings: LiveEvalSettings,
    out: Path,
    *,
    resume: bool = False,
    backend: Backend = LOCAL,
    on_clip: Callable[[dict[str, Any], int, int], None] | None = None,
) -> dict[str, Any]:
    """Score every clip without a record yet in ``out``'s records file (:func:`clips_path`),
    each one a unit of ``backend``, then write the report to ``out`` and return it (see the
    module docstring). ``on_clip(row, done, total)`` follows the clips as they are recorded."""
    out = Path(out)
    records = clips_path(out)
    check_out_file(out, "--out")
    check_out_file(records, "the clips file")
    preds, labels = read_clips(settings.pred, "pred"), read_clips(settings.label, "label")
    baseline = read_clips(settings.baseline, "pred") if settings.baseline is not None else None
    plan = plan_clips(preds, labels, baseline, settings.missing, settings.counting)
    header = {"eval": "live", "settings": settings.clip_settings()}
    kept, scored = _kept_records(records, header, resume)
    digests = {unit_key(u.clip): inputs_digest(u) for u in plan.units}
    todo: list[Unit[ClipUnit]] = []
    for unit in plan.units:
        key = unit_key(unit.clip)
        record = scored.get(key)
        if record is None:
            todo.append(Unit(key, unit))
        elif record.get("inputs") != digests[key]:
            raise LiveEvalError(
                f"cannot resume {records}: clip {unit.clip.describe()} is not the one scored there "
                "(its prediction, label or baseline changed); pick another --out"
            )
    done = len(plan.units) - len(todo)
    log: RecordLog | None = None  # opened with the first record: a run that fails before leaves none

    def opened() -> RecordLog:
        nonlocal log
        if log is None:
            log = RecordLog(records, kept, default=float)
        return log

    def arrived(key: str, row: dict[str, Any]) -> None:
        nonlocal done
        line = {"key": json.loads(key), "inputs": digests[key], "row": row}
        opened().append(line)
        scored[key] = json.loads(json.dumps(line, default=float))  # the record as read back
        done += 1
        if on_clip is not None:
            on_clip(row, done, len(plan.units))

    factory = partial(_clip_worker, settings.judge, settings.baseline is not None, settings.clip_options())
    try:
        with WorkerPool(factory, backend) as pool:
            pool.run(todo, arrived)
        rows = [scored[unit_key(u.clip)]["row"] for u in plan.units]
        report = report_from_rows(
            rows,
            plan,
            settings.clip_options(),
            answer_window=settings.answer_window,
            missing=settings.missing,
            **_judge_names(settings, rows),
        )
        _write_report(out, report)
        if todo or not (kept and "finished" in kept[-1]):
            opened().append({"finished": len(rows)})  # after the report: a kill before keeps it resumable
    finally:
        if log is not None:
            log.close()
    return report


def _judge_names(settings: LiveEvalSettings, rows: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
    """The judges' names in the report: as the rows give them (a policy judge is named by its
    policy, loaded only on the workers), else as the spec does."""
    if settings.judge == NO_JUDGE:
        return {"judge": None, "pairwise_judge": None}
    names = rows[0]["judges"] if rows else {}
    fallback = LexicalJudge().name if settings.judge == LEXICAL else settings.judge.strip()
    pairwise = settings.baseline is not None
    return {
        "judge": names.get("pauc") or fallback,
        "pairwise_judge": (names.get("pairwise") or fallback) if pairwise else None,
    }


def _write_report(out: Path, report: Mapping[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(report, indent=2, default=float) + "\n")
