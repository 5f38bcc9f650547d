"""Live Gaming Benchmark metrics (Proact-VL, ICML 2026) over per-second prediction records.

A record is one clip: ``{"video_id", "begin", "end", "pred": {"<sec>": "<text>"}, "tag",
"dataset_name", "idx"}``; a label record has ``label`` where a prediction has ``pred``.
Seconds are integers on the *video's* clock (absolute, not relative to ``begin``), written as
strings in JSON; a second that is not a key is silence. Records are matched on
``(video_id, begin, end, dataset_name, idx)``, the key the reference's F1/TimeDiff script and
its pairwise judge use.

Metrics (the reference's definitions unless marked *ours*):

- **F1** (:func:`f1`, :func:`f1_report`): sets of speaking seconds ``P = keys(pred)``,
  ``L = keys(label)``; precision ``|P∩L|/|P|``, recall ``|P∩L|/|L|``, harmonic F1; clips with
  an empty label are skipped. Macro = mean over clips, micro = pooled seconds; overall and
  per tag.
- **TimeDiff** (:func:`time_diff`): ``first, last`` = first/last label second; the response
  is the first predicted second ``>= first``; ``base = response - first``, or
  ``last - first`` when the agent never responds; plus ``alpha`` for each predicted second with
  non-empty text outside ``[first - k, last + k]``. Defaults ``k=2, alpha=0.2`` (the
  reference's README run; its script default is 0.5).
- **PAUC** (:func:`pauc`): predictions inside ``[begin, end]`` sorted, runs of adjacent
  seconds merged into one reply (a trailing ``...`` of the earlier piece dropped) stamped at
  the run's first second; after each new (not previously seen) reply a judge scores the
  cumulative prediction against the clip's reference text on 1..3, giving ``y = score - 1``;
  the step function starting at ``start_score`` from ``x = 0`` (``x = second - begin``, scaled
  by ``1 - omega``) and held to ``end - begin`` is integrated and divided by
  ``(end - begin) * 2``. A clip with no scored reply (no prediction, every answer unparseable,
  or no reference text) gets ``start_score / 2``, as the reference counts it.
- **Win rate** (:func:`win_rate`): a pairwise judge compares the flattened commentaries of A
  and B against the reference, once in each order; win rate = A's wins over ``2N`` judgments
  x 100. Flattening joins the per-second texts in time order after cutting one trailing
  ``" ..."``, skipping empty ones. *Ours*: ties and unparseable answers are counted
  separately (the reference lumps both into "tie"); both are non-wins, as there.
- *Ours*, co-commentary: :func:`overlap_rate` ``= |P ∩ O| / |P|`` with ``O`` the other
  casters' speaking seconds, :func:`max_consecutive_overlap`, and
  :func:`concurrent_speech` for self-play (seconds where two or more agents speak).
- *Ours*, guidance: :func:`query_response_delay` (first predicted second ``>=`` the query's
  second, minus it; ``None`` when never) and :func:`answer_rate` (share of queries answered
  with a delay ``<= window``: the window is *inclusive*, so ``window=5`` accepts an answer in
  seconds ``q .. q+5``).
- *Ours*, quantity and speed: :func:`speaking_rate` (``|P| / (end - begin)``, set beside the
  label's) and :func:`real_time_factor` (processing seconds / stream seconds, with the backlog
  a real-time player would accumulate).

Where we differ from or extend the reference:

- Silence. The reference's generator writes only the seconds the model chose to speak, so
  silence is a missing key; ``" ..."`` is only the in-context filler of a silent turn. Our
  agents may write ``" ..."`` or ``""`` for silent seconds, so :func:`evaluate` drops seconds
  whose text is empty or only an ellipsis (``drop_silent_seconds=True``, counted in the
  report); ``drop_silent_seconds=False`` keeps every key, exactly as the reference reads them.
- Judges are pluggable (:class:`Judge`, :class:`PairwiseJudge`) with lexical (ROUGE-L)
  judges for offline runs and Policy-backed ones that keep every prompt and raw answer. The
  Policy judges parse more leniently than the reference (which reads only the first character
  of a score reply, or tests ``"Commentary A" in reply``): the first integer of the reply for
  a score, a lone letter or "Commentary X" for a preference. There is no ``seed`` in our
  Policy contract; the judges run at temperature 0.
- Malformed files raise :class:`LiveEvalError` naming the line and the problem, where the
  reference skips bad lines and keys silently. A label without a prediction is skipped by
  default, as in the reference (``missing="empty"`` scores it as silence, ``"error"`` refuses).
- A ``pred`` that is one string (an offline captioner's output, as the reference's baseline
  files may hold) is read as the reference reads it: speaking over every second of
  ``[begin, end]`` for F1 (and our rate/overlap metrics), said at ``begin`` for TimeDiff, and
  taken whole by the pairwise judge; for PAUC (undefined there) it is one reply at ``begin``.
- Optional record fields (*ours*): label records may carry ``"other"`` (co-casters'
  ``{sec: text}``) and ``"queries"`` (guidance ``{sec: query}``); prediction records may carry
  ``"agents"`` (``{name: {sec: text}}``, the other self-play agents on the same clip) and
  ``"timing"`` (per-chunk processing seconds, numbers or ``{"processing_s", "stream_s"}``).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import numpy as np

from embodia.core.chat import Message, Policy
from embodia.core.scores import (
    F1Clip,
    ScoreInputError,
    as_seconds,
    drop_silent,
    f1,
    f1_from,
    parse_seconds,
    rouge_l,
)
from embodia.envs.streams.core import whole_second
from embodia.errors import read_text_file

UNTAGGED = "untagged"
"""The tag of a record without ``tag`` or ``dataset_name``."""
MAX_Y = 2
"""The top of the PAUC y-axis: judge scores 1..3 become 0..2."""
DEFAULT_OMEGAS: tuple[float, ...] = (0.0, 0.5, 1.0)

Winner = Literal["A", "B", "tie"]
Missing = Literal["skip", "empty", "error"]
ClipKey = tuple[str, int, int, str, int | str | None]


class LiveEvalError(ScoreInputError):
    """A prediction or label file (or record) cannot be evaluated."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Clip:
    """One parsed record: a clip's per-second texts (prediction or label) and its identity."""

    video_id: str
    begin: int
    end: int
    seconds: dict[int, str]
    tag: str = UNTAGGED
    dataset_name: str = ""
    idx: int | str | None = None
    other: dict[int, str] | None = None
    """Label records: the other casters' ``{sec: text}`` (co-commentary)."""
    queries: dict[int, str] | None = None
    """Label records: the user's ``{sec: query}`` (guidance)."""
    agents: dict[str, dict[int, str]] | None = None
    """Prediction records: the other self-play agents' ``{sec: text}`` on this clip."""
    timing: tuple[tuple[float, float], ...] | None = None
    """Prediction records: ``(processing_s, stream_s)`` per chunk."""
    caption: str | None = None
    """Prediction records whose ``pred`` is one string for the whole clip (offline captioners)."""
    where: str = "record"

    @property
    def key(self) -> ClipKey:
        return (self.video_id, self.begin, self.end, self.dataset_name, self.idx)

    @property
    def duration(self) -> int:
        return self.end - self.begin

    def describe(self) -> str:
        return f"{self.video_id} [{self.begin}, {self.end}] dataset={self.dataset_name!r} idx={self.idx!r}"


def _int_field(record: Mapping[str, Any], name: str, where: str) -> int:
    return whole_second(record[name], f"{where}: {name!r}", LiveEvalError)


def _timing(value: object, where: str) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list):
        raise LiveEvalError(f"{where}: 'timing' must be a list, got {type(value).__name__}")
    out: list[tuple[float, float]] = []
    for i, item in enumerate(value):
        raw = item if isinstance(item, Mapping) else {"processing_s": item}
        numbers: list[float] = []
        for name, default in (("processing_s", None), ("stream_s", 1.0)):
            number = raw.get(name, default)
            if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
                raise LiveEvalError(f"{where}: timing entry {i} needs a finite number {name}, got {number!r}")
            if number < 0 or (name == "stream_s" and number == 0):
                raise LiveEvalError(f"{where}: timing entry {i} has {name}={number}, which must be positive")
            numbers.append(float(number))
        out.append((numbers[0], numbers[1]))
    return tuple(out)


def parse_clip(record: Mapping[str, Any], field: Literal["pred", "label"], where: str = "record") -> Clip:
    """Validate one record (a prediction when ``field="pred"``, a label when ``"label"``)."""
    if not isinstance(record, Mapping):
        raise LiveEvalError(f"{where}: a record must be a JSON object, got {type(record).__name__}")
    for name in ("video_id", "begin", "end", field):
        if name not in record:
            raise LiveEvalError(f"{where}: missing key {name!r}")
    video_id = record["video_id"]
    if not isinstance(video_id, str) or not video_id:
        raise LiveEvalError(f"{where}: 'video_id' must be a non-empty string, got {video_id!r}")
    begin, end = _int_field(record, "begin", where), _int_field(record, "end", where)
    if end <= begin:
        raise LiveEvalError(f"{where}: clip ends at {end}, not after its begin {begin}")
    dataset = record.get("dataset_name") or ""
    if not isinstance(dataset, str):
        raise LiveEvalError(f"{where}: 'dataset_name' must be a string, got {dataset!r}")
    tag = record.get("tag") or dataset or UNTAGGED
    if not isinstance(tag, str):
        raise LiveEvalError(f"{where}: 'tag' must be a string, got {tag!r}")
    idx = record.get("idx")
    if isinstance(idx, bool) or not (idx is None or isinstance(idx, int | str)):
        raise LiveEvalError(f"{where}: 'idx' must be an integer or a string, got {idx!r}")
    caption = record[field] if field == "pred" and isinstance(record[field], str) else None
    seconds = {} if caption is not None else parse_seconds(record[field], f"{where} {field!r}", LiveEvalError)
    other = queries = agents = timing = None
    if field == "label":
        if record.get("other") is not None:
            other = parse_seconds(record["other"], f"{where} 'other'", LiveEvalError)
        if record.get("queries") is not None:
            queries = parse_seconds(record["queries"], f"{where} 'queries'", LiveEvalError)
    else:
        if record.get("agents") is not None:
            raw = record["agents"]
            if not isinstance(raw, Mapping):
                raise LiveEvalError(f"{where}: 'agents' must be an object of {{name: {{second: text}}}}")
            agents = {str(n): parse_seconds(s, f"{where} agent {n!r}", LiveEvalError) for n, s in raw.items()}
        if record.get("timing") is not None:
            timing = _timing(record["timing"], where)
    return Clip(
        video_id,
        begin,
        end,
        seconds,
        tag=tag,
        dataset_name=dataset,
        idx=idx,
        other=other,
        queries=queries,
        agents=agents,
        timing=timing,
        caption=caption,
        where=where,
    )


def _read_jsonl(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise LiveEvalError(f"records file not found: {file}")
    out: list[tuple[str, dict[str, Any]]] = []
    for number, line in enumerate(read_text_file(file, LiveEvalError).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{file} line {number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise LiveEvalError(f"{where}: bad JSON ({error.msg})") from error
        if not isinstance(value, dict):
            raise LiveEvalError(f"{where}: expected a JSON object, got {type(value).__name__}")
        out.append((where, value))
    return out


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (blank lines skipped); a bad line names its number."""
    return [record for _, record in _read_jsonl(path)]


def _clips(
    records: Sequence[Clip | Mapping[str, Any]], field: Literal["pred", "label"], name: str
) -> list[Clip]:
    return [
        r if isinstance(r, Clip) else parse_clip(r, field, f"{name} record {i}")
        for i, r in enumerate(records)
    ]


def _index(clips: Sequence[Clip], name: str) -> dict[ClipKey, Clip]:
    out: dict[ClipKey, Clip] = {}
    for clip in clips:
        if clip.key in out:
            raise LiveEvalError(
                f"{clip.where}: {name} for clip {clip.describe()} appears twice "
                f"(first at {out[clip.key].where})"
            )
        out[clip.key] = clip
    return out


def _no_match(clip: Clip, index: Mapping[ClipKey, Clip], what: str) -> LiveEvalError:
    near = [c for c in index.values() if c.video_id == clip.video_id]
    hint = ""
    if near:
        c = near[0]
        hint = (
            f"; {what} has this video_id with begin={c.begin} end={c.end} "
            f"dataset={c.dataset_name!r} idx={c.idx!r}"
        )
    return LiveEvalError(
        f"{clip.where}: no {what} for clip {clip.describe()} (matched on video_id, begin, end, "
        f"dataset_name, idx){hint}"
    )


# --------------------------------------------------------------------------- F1 and TimeDiff


def _f1_summary(results: Sequence[F1Clip]) -> dict[str, Any]:
    n = len(results)
    tp = sum(r["tp"] for r in results)
    pred_count = sum(r["pred_count"] for r in results)
    label_count = sum(r["label_count"] for r in results)
    micro_p = tp / pred_count if pred_count else 0.0
    micro_r = tp / label_count if label_count else 0.0
    return {
        "macro": {
            "clips": n,
            "precision": sum(r["precision"] for r in results) / n if n else 0.0,
            "recall": sum(r["recall"] for r in results) / n if n else 0.0,
            "f1": sum(r["f1"] for r in results) / n if n else 0.0,
        },
        "micro": {
            "clips": n,
            "tp": tp,
            "pred_count": pred_count,
            "label_count": label_count,
            "precision": micro_p,
            "recall": micro_r,
            "f1": f1_from(micro_p, micro_r),
        },
    }


def _tags(n: int, tags: Sequence[str] | None) -> list[str]:
    if tags is None:
        return [UNTAGGED] * n
    if len(tags) != n:
        raise LiveEvalError(f"got {len(tags)} tags for {n} clips")
    return list(tags)


def f1_report(
    pairs: Sequence[tuple[Mapping[Any, str], Mapping[Any, str]]], tags: Sequence[str] | None = None
) -> dict[str, Any]:
    """Macro and micro F1 over ``(pred, label)`` pairs, overall and per tag."""
    by_tag: dict[str, list[F1Clip]] = defaultdict(list)
    results: list[F1Clip] = []
    skipped = 0
    for (pred, label), tag in zip(pairs, _tags(len(pairs), tags), strict=True):
        result = f1(pred, label)
        if result is None:
            skipped += 1
            continue
        results.append(result)
        by_tag[tag].append(result)
    return {
        "overall": _f1_summary(results),
        "by_tag": {tag: _f1_summary(by_tag[tag]) for tag in sorted(by_tag)},
        "skipped_empty_label": skipped,
    }


class TimeDiffClip(TypedDict):
    first: int
    last: int
    response: int | None
    base: float
    out_of_range: int
    penalty: float
    timediff: float


def time_diff(
    pred: Mapping[Any, str], label: Mapping[Any, str] | Iterable[Any], k: int = 2, alpha: float = 0.2
) -> TimeDiffClip | None:
    """Response delay of one clip with the out-of-range penalty; ``None`` when the label is empty.

    The response is the first predicted second at or after the first label second, whatever
    its text; only seconds with non-empty text count towards the penalty (as the reference).
    """
    if k < 0 or alpha < 0:
        raise LiveEvalError(f"time_diff needs k >= 0 and alpha >= 0, got k={k} alpha={alpha}")
    p, gt = as_seconds(pred, "pred", LiveEvalError), as_seconds(label, "label", LiveEvalError)
    if not gt:
        return None
    first, last = min(gt), max(gt)
    later = [t for t in p if t >= first]
    response = min(later) if later else None
    base = float((response if response is not None else last) - first)
    out = sum(1 for t, text in p.items() if text and (t < first - k or t > last + k))
    penalty = alpha * out
    return TimeDiffClip(
        first=first,
        last=last,
        response=response,
        base=base,
        out_of_range=out,
        penalty=penalty,
        timediff=base + penalty,
    )


def _mean_summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "mean": float(np.mean(values)) if values else None,
        "min": float(min(values)) if values else None,
        "max": float(max(values)) if values else None,
    }


def time_diff_report(
    pairs: Sequence[tuple[Mapping[Any, str], Mapping[Any, str]]],
    tags: Sequence[str] | None = None,
    k: int = 2,
    alpha: float = 0.2,
) -> dict[str, Any]:
    """Mean TimeDiff (seconds) over ``(pred, label)`` pairs, overall and per tag."""
    results: list[TimeDiffClip] = []
    by_tag: dict[str, list[float]] = defaultdict(list)
    skipped = 0
    for (pred, label), tag in zip(pairs, _tags(len(pairs), tags), strict=True):
        result = time_diff(pred, label, k, alpha)
        if result is None:
            skipped += 1
            continue
        results.append(result)
        by_tag[tag].append(result["timediff"])
    overall = _mean_summary([r["timediff"] for r in results])
    overall["total_penalty"] = sum(r["penalty"] for r in results)
    overall["total_out_of_range"] = sum(r["out_of_range"] for r in results)
    overall["never_responded"] = sum(1 for r in results if r["response"] is None)
    return {
        "overall": overall,
        "by_tag": {tag: _mean_summary(by_tag[tag]) for tag in sorted(by_tag)},
        "skipped_empty_label": skipped,
        "k": k,
        "alpha": alpha,
    }


# --------------------------------------------------------------------------- judges


@dataclass(frozen=True)
class Judgment:
    """A judge's verdict on one prediction: ``score`` in 1..3 (``None`` when unparseable)."""

    score: int | None
    raw: str


@dataclass(frozen=True)
class PairJudgment:
    """A pairwise verdict: ``"A"``, ``"B"``, ``"tie"``, or ``None`` when unparseable."""

    winner: Winner | None
    raw: str


@runtime_checkable
class Judge(Protocol):
    """Scores a (cumulative) prediction against the reference text on 1..3, for PAUC."""

    name: str

    def score(self, prediction: str, reference: str) -> Judgment: ...


@runtime_checkable
class PairwiseJudge(Protocol):
    """Says which of two commentaries is closer to the reference."""

    name: str

    def compare(self, a: str, b: str, reference: str) -> PairJudgment: ...


@dataclass
class LexicalJudge:
    """Offline PAUC judge: ROUGE-L F1 ``>= high`` scores 3, ``>= low`` scores 2, else 1."""

    low: float = 0.2
    high: float = 0.5
    name: str = "lexical-rougeL"

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high <= 1:
            raise LiveEvalError(f"LexicalJudge needs 0 <= low <= high <= 1, got {self.low}, {self.high}")

    def score(self, prediction: str, reference: str) -> Judgment:
        f = rouge_l(prediction, reference)
        return Judgment(3 if f >= self.high else 2 if f >= self.low else 1, f"rougeL_f={f:.4f}")


@dataclass
class LexicalPairwiseJudge:
    """Offline pairwise judge: the side with the higher ROUGE-L F1 wins; equal is a tie."""

    name: str = "lexical-rougeL"

    def compare(self, a: str, b: str, reference: str) -> PairJudgment:
        fa, fb = rouge_l(a, reference), rouge_l(b, reference)
        winner: Winner = "tie" if math.isclose(fa, fb, abs_tol=1e-12) else "A" if fa > fb else "B"
        return PairJudgment(winner, f"rougeL_f A={fa:.4f} B={fb:.4f}")


SCORE_INSTRUCTIONS = (
    "You grade a live game commentary system. Compare the Predicted Answer with the Ground Truth "
    "Answer and rate how much of the ground truth's key content the prediction conveys.\n"
    "3 = nearly all key points are conveyed; small inaccuracies or rewording are fine.\n"
    "2 = some key points are right, but important ones are missing or wrong.\n"
    "1 = little or none of the key content is conveyed, or the prediction is of very poor quality.\n"
    "The prediction is the running transcript so far: when it repeats itself, lower the score.\n"
    "Reply with one digit (1, 2 or 3) and nothing else."
)

PAIRWISE_TEMPLATE = (
    "You are judging live video commentary. Read two candidate commentaries, A and B, and the "
    "commentary a human caster gave for the same clip, then decide which candidate is closer to "
    "the human commentary. Judge first by meaning: the same events, details and key points. Only "
    "when that does not separate them, judge by style: similar tone, wording and structure.\n\n"
    "[Commentary A]\n{a}\n\n[Commentary B]\n{b}\n\n[Human commentary]\n{reference}\n\n"
    "Answer with one letter, A or B."
)


def parse_score(text: str, low: int = 1, high: int = 3) -> int | None:
    """The first integer in a judge's reply when it lies in ``[low, high]``, else ``None``."""
    match = re.search(r"\d+", text)
    if match is None:
        return None
    value = int(match.group())
    return value if low <= value <= high else None


def parse_preference(text: str) -> Winner | None:
    """``"A"``/``"B"`` from a lone letter or "Commentary X [is better]", ``"tie"`` when the reply
    says so, ``None`` when it cannot be read."""
    lone = re.fullmatch(r"[\W_]*([AB])[\W_]*", text.strip())
    if lone:
        return "A" if lone.group(1) == "A" else "B"
    named = {m.upper() for m in re.findall(r"(?i)\bcommentary\s+([ab])\b", text)}
    if len(named) == 2:
        named = {m.upper() for m in re.findall(r"(?i)\bcommentary\s+([ab])\s+is\s+(?:better|closer)", text)}
    if len(named) == 1:
        return "A" if named == {"A"} else "B"
    if re.search(r"(?i)\b(tie|equal(ly)?|neither|same)\b", text):
        return "tie"
    return None


@dataclass
class PolicyJudge:
    """PAUC judge backed by any chat :class:`Policy`; keeps every prompt and raw answer."""

    policy: Policy
    max_tokens: int = 8
    temperature: float = 0.0
    instructions: str = SCORE_INSTRUCTIONS
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.policy.name

    def score(self, prediction: str, reference: str) -> Judgment:
        messages: list[Message] = [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": f"Ground Truth Answer: {reference}\nPredicted Answer: {prediction}"},
        ]
        completion = self.policy.complete(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        score = parse_score(completion.text)
        self.records.append(
            {"judge": self.name, "messages": messages, "raw": completion.text, "score": score}
        )
        return Judgment(score, completion.text)


@dataclass
class PolicyPairwiseJudge:
    """Pairwise judge backed by any chat :class:`Policy` (temperature 0 by default)."""

    policy: Policy
    max_tokens: int = 16
    temperature: float = 0.0
    template: str = PAIRWISE_TEMPLATE
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.policy.name

    def compare(self, a: str, b: str, reference: str) -> PairJudgment:
        prompt = self.template.format(a=a, b=b, reference=reference)
        messages: list[Message] = [{"role": "user", "content": prompt}]
        completion = self.policy.complete(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        winner = parse_preference(completion.text)
        self.records.append({"judge": self.name, "prompt": prompt, "raw": completion.text, "winner": winner})
        return PairJudgment(winner, completion.text)


# --------------------------------------------------------------------------- PAUC


def reference_text(label: Mapping[Any, str]) -> str:
    """The label's texts in time order, each stripped, empty ones skipped, joined by spaces."""
    parts = [text.strip() for _, text in sorted(as_seconds(label, "label", LiveEvalError).items())]
    return " ".join(p for p in parts if p)


def _strip_ellipsis(text: str) -> str:
    text = text.rstrip()
    if text.endswith("..."):
        return text[:-3].rstrip()
    if text.endswith("…"):
        return text[:-1].rstrip()
    return text


def merge_adjacent(items: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """Runs of consecutive seconds as one reply at the run's first second; the earlier piece's
    trailing ellipsis is dropped before the next is appended (``items`` sorted by second)."""
    merged: list[tuple[int, str]] = []
    last: int | None = None
    for t, text in items:
        if merged and last is not None and t - last == 1:
            start, buf = merged[-1]
            buf = _strip_ellipsis(buf)
            merged[-1] = (start, f"{buf} {text}" if buf and text else buf + text)
        else:
            merged.append((t, text))
        last = t
    return merged


def area_under_steps(
    points: Sequence[tuple[float, float]],
    max_x: float,
    max_y: float = MAX_Y,
    omega: float = 0.5,
    start_score: float = 0.0,
) -> float:
    """Normalised area under the step function through ``points`` (each ``y`` holds from its ``x``
    to the next point; ``start_score`` before the first), ``x`` scaled by ``1 - omega``, held to
    ``max_x``; 0 when there are no points."""
    if not points:
        return 0.0
    if max_x <= 0 or max_y <= 0:
        raise LiveEvalError(f"PAUC needs a positive span and y-range, got {max_x} and {max_y}")
    steps = sorted(((x * (1 - omega), y) for x, y in points), key=lambda p: p[0])
    steps.append((max_x, steps[-1][1]))
    area, prev_x, prev_y = 0.0, 0.0, start_score
    for x, y in steps:
        area += (x - prev_x) * prev_y
        prev_x, prev_y = x, y
    return area / (max_x * max_y)


def _omega_key(omega: float) -> str:
    return f"{omega:g}"


def _check_omegas(omegas: Sequence[float]) -> None:
    if not omegas:
        raise LiveEvalError("PAUC needs at least one omega")
    for omega in omegas:
        if not 0 <= omega <= 1:
            raise LiveEvalError(f"omega must lie in [0, 1], got {omega}")


def pauc(
    pred: Mapping[Any, str],
    label: Mapping[Any, str],
    judge: Judge,
    omegas: Sequence[float] = DEFAULT_OMEGAS,
    start_score: float = 0.0,
    *,
    begin: int,
    end: int,
) -> dict[str, Any]:
    """PAUC of one clip ``[begin, end]`` for each omega, with the judge's raw answers.

    Returns ``{"auc": {"0": ..., "0.5": ..., "1": ...}, "points": [[second, y], ...],
    "judgments": [...], "reference_empty", "unparseable"}``.
    """
    _check_omegas(omegas)
    if end <= begin:
        raise LiveEvalError(f"PAUC needs end > begin, got [{begin}, {end}]")
    gold = reference_text(label)
    points: list[tuple[int, int]] = []
    judgments: list[dict[str, Any]] = []
    unparseable = 0
    if gold:
        spoken = sorted(
            (t, text.strip())
            for t, text in as_seconds(pred, "pred", LiveEvalError).items()
            if begin <= t <= end and text.strip()
        )
        said: list[str] = []
        for t, reply in merge_adjacent(spoken):
            if reply in said:
                continue
            said.append(reply)
            cumulative = " ".join(said)
            verdict = judge.score(cumulative, gold)
            score = verdict.score
            if score is not None and not 1 <= score <= MAX_Y + 1:
                score = None
            judgments.append({"second": t, "prediction": cumulative, "raw": verdict.raw, "score": score})
            if score is None:
                unparseable += 1
            else:
                points.append((t, score - 1))
    auc: dict[str, float] = {}
    for omega in omegas:
        if points:
            xy = [(float(t - begin), float(y)) for t, y in points]
            auc[_omega_key(omega)] = area_under_steps(xy, end - begin, MAX_Y, omega, start_score)
        else:
            auc[_omega_key(omega)] = start_score / MAX_Y
    return {
        "auc": auc,
        "points": [[t, y] for t, y in points],
        "judgments": judgments,
        "reference_empty": not gold,
        "unparseable": unparseable,
    }


def _pauc_summary(results: Sequence[dict[str, Any]], omegas: Sequence[float]) -> dict[str, Any]:
    return {
        "clips": len(results),
        "mean_auc": {
            _omega_key(o): float(np.mean([r["auc"][_omega_key(o)] for r in results])) if results else None
            for o in omegas
        },
    }


# --------------------------------------------------------------------------- win rate


def flatten_commentary(seconds: Mapping[Any, str]) -> str:
    """Per-second texts in time order, one trailing ``" ..."`` cut, empty ones skipped, joined."""
    parts = []
    for _, text in sorted(as_seconds(seconds, "commentary", LiveEvalError).items()):
        if text.endswith(" ..."):
            text = text[:-4]
        if text.strip():
            parts.append(text)
    return " ".join(parts)


def _commentary(clip: Clip, drop_silent_seconds: bool) -> str:
    if clip.caption is not None:
        return clip.caption
    return flatten_commentary(drop_silent(clip.seconds) if drop_silent_seconds else clip.seconds)


def _win_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    counts = {"wins": 0, "losses": 0, "ties": 0, "invalid": 0}
    for row in rows:
        for order, mine in (("ab", "A"), ("ba", "B")):
            winner = row[order]
            if winner is None:
                counts["invalid"] += 1
            elif winner == "tie":
                counts["ties"] += 1
            elif winner == mine:
                counts["wins"] += 1
            else:
                counts["losses"] += 1
    judgments = 2 * len(rows)
    return {
        "clips": len(rows),
        "judgments": judgments,
        **counts,
        "win_rate": 100.0 * counts["wins"] / judgments if judgments else None,
    }


def win_rate(
    a_records: Sequence[Clip | Mapping[str, Any]],
    b_records: Sequence[Clip | Mapping[str, Any]],
    labels: Sequence[Clip | Mapping[str, Any]],
    judge: PairwiseJudge,
    *,
    drop_silent_seconds: bool = True,
) -> dict[str, Any]:
    """A's win rate against B (percent of ``2N`` judgments, both orders), overall, per tag and
    per dataset, with every judgment's raw answer."""
    a_clips, b_clips = _clips(a_records, "pred", "A"), _clips(b_records, "pred", "B")
    b_index, label_index = _index(b_clips, "B prediction"), _index(_clips(labels, "label", "label"), "label")
    _index(a_clips, "A prediction")
    rows: list[dict[str, Any]] = []
    for clip in a_clips:
        if clip.key not in b_index:
            raise _no_match(clip, b_index, "B prediction")
        if clip.key not in label_index:
            raise _no_match(clip, label_index, "label")
        a_text = _commentary(clip, drop_silent_seconds)
        b_text = _commentary(b_index[clip.key], drop_silent_seconds)
        gold = flatten_commentary(label_index[clip.key].seconds)
        ab, ba = judge.compare(a_text, b_text, gold), judge.compare(b_text, a_text, gold)
        rows.append(
            {
                "video_id": clip.video_id,
                "begin": clip.begin,
                "end": clip.end,
                "idx": clip.idx,
                "tag": clip.tag,
                "dataset_name": clip.dataset_name,
                "ab": ab.winner,
                "ba": ba.winner,
                "ab_raw": ab.raw,
                "ba_raw": ba.raw,
            }
        )
    by_tag: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_tag[row["tag"]].append(row)
        by_dataset[row["dataset_name"]].append(row)
    return {
        "judge": judge.name,
        "overall": _win_summary(rows),
        "by_tag": {t: _win_summary(by_tag[t]) for t in sorted(by_tag)},
        "by_dataset": {d: _win_summary(by_dataset[d]) for d in sorted(by_dataset)},
        "judgments": rows,
    }


# --------------------------------------------------------------------------- co-commentary, guidance


def overlap_rate(
    pred: Mapping[Any, str] | Iterable[Any], other_label: Mapping[Any, str] | Iterable[Any]
) -> float | None:
    """Share of the agent's speaking seconds on which another caster also speaks; ``None`` when
    the agent never speaks."""
    p, o = set(as_seconds(pred, "pred", LiveEvalError)), set(as_seconds(other_label, "other", LiveEvalError))
    return len(p & o) / len(p) if p else None


def _longest_run(seconds: Iterable[int]) -> int:
    best = run = 0
    last: int | None = None
    for t in sorted(set(seconds)):
        run = run + 1 if last is not None and t == last + 1 else 1
        best, last = max(best, run), t
    return best


def _runs(seconds: Iterable[int]) -> list[int]:
    lengths: list[int] = []
    last: int | None = None
    for t in sorted(set(seconds)):
        if last is not None and t == last + 1:
            lengths[-1] += 1
        else:
            lengths.append(1)
        last = t
    return lengths


def max_consecutive_overlap(
    pred: Mapping[Any, str] | Iterable[Any], other_label: Mapping[Any, str] | Iterable[Any]
) -> int:
    """The longest run of consecutive seconds on which the agent and another caster both speak."""
    return _longest_run(
        set(as_seconds(pred, "pred", LiveEvalError)) & set(as_seconds(other_label, "other", LiveEvalError))
    )


def concurrent_speech(preds: Mapping[str, Mapping[Any, str] | Iterable[Any]]) -> dict[str, Any]:
    """Seconds on which two or more agents speak, for self-play over one clip."""
    speakers: dict[int, list[str]] = defaultdict(list)
    for name, seconds in preds.items():
        for t in as_seconds(seconds, f"agent {name!r}", LiveEvalError):
            speakers[t].append(name)
    clash = sorted(t for t, names in speakers.items() if len(names) >= 2)
    return {
        "seconds": clash,
        "count": len(clash),
        "max_speakers": max((len(v) for v in speakers.values()), default=0),
        "longest_run": _longest_run(clash),
    }


def query_response_delay(
    pred: Mapping[Any, str] | Iterable[Any], query_seconds: Iterable[int]
) -> list[int | None]:
    """Per query: first predicted second at or after the query's second, minus it (``None`` when
    the agent never speaks again)."""
    spoken = sorted(as_seconds(pred, "pred", LiveEvalError))
    out: list[int | None] = []
    for q in query_seconds:
        after = [t for t in spoken if t >= q]
        out.append(after[0] - q if after else None)
    return out


def answer_rate(
    pred: Mapping[Any, str] | Iterable[Any], query_seconds: Iterable[int], window: int = 5
) -> float | None:
    """Share of queries answered with a delay ``<= window`` seconds (inclusive); ``None`` with no
    queries."""
    if window < 0:
        raise LiveEvalError(f"answer window must be >= 0, got {window}")
    delays = query_response_delay(pred, query_seconds)
    if not delays:
        return None
    return sum(1 for d in delays if d is not None and d <= window) / len(delays)


def speaking_rate(seconds: Mapping[Any, str] | Iterable[Any], duration: int) -> float:
    """Spoken seconds per second of clip."""
    if duration <= 0:
        raise LiveEvalError(f"speaking rate needs a positive duration, got {duration}")
    return len(as_seconds(seconds, "seconds", LiveEvalError)) / duration


def real_time_factor(
    processing_s: Sequence[float], stream_s: float | Sequence[float] = 1.0
) -> dict[str, Any]:
    """Processing time over stream time for a run of chunks, and the backlog a real-time player
    would build (each chunk's work queued behind the previous ones' excess)."""
    proc = [float(p) for p in processing_s]
    stream = (
        [float(stream_s)] * len(proc) if isinstance(stream_s, int | float) else [float(s) for s in stream_s]
    )
    if len(stream) != len(proc):
        raise LiveEvalError(f"got {len(stream)} stream durations for {len(proc)} chunks")
    if any(not math.isfinite(p) or p < 0 for p in proc) or any(
        not math.isfinite(s) or s <= 0 for s in stream
    ):
        raise LiveEvalError("chunk timings must be finite, processing >= 0 and stream > 0")
    backlog = max_backlog = 0.0
    for p, s in zip(proc, stream, strict=True):
        backlog = max(0.0, backlog + p - s)
        max_backlog = max(max_backlog, backlog)
    total_p, total_s = sum(proc), sum(stream)
    return {
        "chunks": len(proc),
        "processing_s": total_p,
        "stream_s": total_s,
        "rtf": total_p / total_s if proc else None,
        "max_chunk_rtf": max((p / s for p, s in zip(proc, stream, strict=True)), default=None),
        "late_chunks": sum(1 for p, s in zip(proc, stream, strict=True) if p > s),
        "final_backlog_s": backlog,
        "max_backlog_s": max_backlog,
    }


# --------------------------------------------------------------------------- the whole report


def _mean_or_none(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def evaluate(
    pred_records: Sequence[Clip | Mapping[str, Any]],
    label_records: Sequence[Clip | Mapping[str, Any]],
    judge: Judge | None = None,
    *,
    pairwise_judge: PairwiseJudge | None = None,
    baseline_records: Sequence[Clip | Mapping[str, Any]] | None = None,
    k: int = 2,
    alpha: float = 0.2,
    omegas: Sequence[float] = DEFAULT_OMEGAS,
    start_score: float = 0.0,
    answer_window: int = 5,
    drop_silent_seconds: bool = True,
    missing: Missing = "skip",
) -> dict[str, Any]:
    """Every metric over matched prediction/label clips, as one JSON-serialisable report.

    PAUC runs when ``judge`` is given, the win rate when ``pairwise_judge`` and
    ``baseline_records`` are. ``missing`` says what a label without a prediction does: ``"skip"``
    (the reference), ``"empty"`` (scored as an agent that said nothing) or ``"error"``.
    """
    if missing not in ("skip", "empty", "error"):
        raise LiveEvalError(f"missing must be 'skip', 'empty' or 'error', got {missing!r}")
    if (pairwise_judge is None) != (baseline_records is None):
        raise LiveEvalError("the win rate needs both a pairwise judge and baseline records")
    _check_omegas(omegas)
    preds = _clips(pred_records, "pred", "prediction")
    labels = _clips(label_records, "label", "label")
    pred_index, label_index = _index(preds, "prediction"), _index(labels, "label")
    for clip in preds:
        if clip.key not in label_index:
            raise _no_match(clip, label_index, "label")
    unmatched = [c for c in labels if c.key not in pred_index]
    if unmatched and missing == "error":
        raise LiveEvalError(
            f"{unmatched[0].where}: no prediction for clip {unmatched[0].describe()} "
            f"({len(unmatched)} labels have none)"
        )
    if missing == "empty":
        preds = preds + [
            Clip(c.video_id, c.begin, c.end, {}, c.tag, c.dataset_name, c.idx, where=c.where)
            for c in unmatched
        ]

    dropped = 0
    # Per clip: the speaking seconds, the seconds replies start at (TimeDiff, PAUC) and the label.
    # They differ only for a caption, which speaks over the whole clip but is said at its begin.
    pairs: list[tuple[Clip, dict[int, str], dict[int, str], dict[int, str]]] = []
    for clip in preds:
        gt = label_index[clip.key].seconds
        if drop_silent_seconds:
            gt = drop_silent(gt)
        if clip.caption is not None:
            said = bool(clip.caption.strip())
            p = {t: clip.caption for t in range(clip.begin, clip.end + 1)} if said else {}
            starts = {clip.begin: clip.caption} if said else {}
        else:
            p = drop_silent(clip.seconds) if drop_silent_seconds else clip.seconds
            dropped += len(clip.seconds) - len(p)
            starts = p
        pairs.append((clip, p, starts, gt))
    tags = [clip.tag for clip, _, _, _ in pairs]

    details: list[dict[str, Any]] = []
    pauc_results: list[dict[str, Any]] = []
    pauc_by_tag: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rates_by_tag: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    co_rows: list[dict[str, Any]] = []
    guide_delays: list[int | None] = []
    guide_by_tag: dict[str, list[int | None]] = defaultdict(list)
    multi_rows: list[dict[str, Any]] = []
    timings: list[tuple[float, float]] = []
    for clip, p, starts, gt in pairs:
        label = label_index[clip.key]
        row: dict[str, Any] = {
            "video_id": clip.video_id,
            "begin": clip.begin,
            "end": clip.end,
            "dataset_name": clip.dataset_name,
            "idx": clip.idx,
            "tag": clip.tag,
            "f1": f1(p, gt),
            "timediff": time_diff(starts, gt, k, alpha),
            "speaking_rate": len(p) / clip.duration,
            "label_speaking_rate": len(gt) / clip.duration,
        }
        rates_by_tag[clip.tag].append((len(p), len(gt), clip.duration))
        if judge is not None:
            result = pauc(starts, gt, judge, omegas, start_score, begin=clip.begin, end=clip.end)
            pauc_results.append(result)
            pauc_by_tag[clip.tag].append(result)
            row["pauc"] = result
        if label.other is not None:
            other = drop_silent(label.other) if drop_silent_seconds else label.other
            both = set(p) & set(other)
            co = {
                "overlap_rate": overlap_rate(p, other),
                "overlap_seconds": len(both),
                "max_consecutive_overlap": _longest_run(both),
                "sustained_overlaps": sum(1 for n in _runs(both) if n >= 2),
                "pred_seconds": len(p),
            }
            co_rows.append(co)
            row["co_commentary"] = co
        if label.queries:
            delays = query_response_delay(p, sorted(label.queries))
            guide_delays.extend(delays)
            guide_by_tag[clip.tag].extend(delays)
            row["guidance"] = {"query_seconds": sorted(label.queries), "delays": delays}
        if clip.agents:
            everyone = {"pred": p, **clip.agents}
            if drop_silent_seconds:
                everyone = {n: drop_silent(s) for n, s in everyone.items()}
            multi = concurrent_speech(everyone)
            multi_rows.append(multi)
            row["multi_agent"] = multi
        if clip.timing:
            timings.extend(clip.timing)
            row["rtf"] = real_time_factor([t[0] for t in clip.timing], [t[1] for t in clip.timing])["rtf"]
        details.append(row)

    def rate_summary(rows: Sequence[tuple[int, int, int]]) -> dict[str, Any]:
        spoken, gold, duration = (sum(r[i] for r in rows) for i in range(3))
        return {
            "clips": len(rows),
            "mean_pred_rate": _mean_or_none([r[0] / r[2] for r in rows]),
            "mean_label_rate": _mean_or_none([r[1] / r[2] for r in rows]),
            "pooled_pred_rate": spoken / duration if duration else None,
            "pooled_label_rate": gold / duration if duration else None,
            "pred_to_label_ratio": spoken / gold if gold else None,
        }

    def guide_summary(delays: Sequence[int | None]) -> dict[str, Any]:
        answered = [d for d in delays if d is not None]
        return {
            "queries": len(delays),
            "never_answered": len(delays) - len(answered),
            "mean_delay": _mean_or_none(answered),
            "median_delay": float(np.median(answered)) if answered else None,
            "answer_rate": (sum(1 for d in answered if d <= answer_window) / len(delays) if delays else None),
            "window": answer_window,
            "window_inclusive": True,
        }

    report: dict[str, Any] = {
        "settings": {
            "k": k,
            "alpha": alpha,
            "omegas": list(omegas),
            "start_score": start_score,
            "answer_window": answer_window,
            "drop_silent": drop_silent_seconds,
            "missing": missing,
            "match_key": ["video_id", "begin", "end", "dataset_name", "idx"],
        },
        "counts": {
            "pred_clips": len(pred_index),
            "label_clips": len(labels),
            "evaluated_clips": len(pairs),
            "labels_without_pred": len(unmatched),
            "empty_label_clips": sum(1 for *_, gt in pairs if not gt),
            "silent_seconds_dropped": dropped,
        },
        "f1": f1_report([(p, gt) for _, p, _, gt in pairs], tags),
        "timediff": time_diff_report([(starts, gt) for _, _, starts, gt in pairs], tags, k, alpha),
        "speaking_rate": {
            "overall": rate_summary([r for rows in rates_by_tag.values() for r in rows]),
            "by_tag": {t: rate_summary(rates_by_tag[t]) for t in sorted(rates_by_tag)},
        },
        "pauc": None,
        "win_rate": None,
        "co_commentary": None,
        "guidance": None,
        "multi_agent": None,
        "rtf": None,
    }
    if judge is not None:
        report["pauc"] = {
            "judge": judge.name,
            "start_score": start_score,
            "overall": _pauc_summary(pauc_results, omegas),
            "by_tag": {t: _pauc_summary(pauc_by_tag[t], omegas) for t in sorted(pauc_by_tag)},
            "judge_calls": sum(len(r["judgments"]) for r in pauc_results),
            "unparseable": sum(r["unparseable"] for r in pauc_results),
            "clips_without_reference_text": sum(1 for r in pauc_results if r["reference_empty"]),
        }
    if pairwise_judge is not None and baseline_records is not None:
        report["win_rate"] = win_rate(
            [c for c, *_ in pairs],
            baseline_records,
            labels,
            pairwise_judge,
            drop_silent_seconds=drop_silent_seconds,
        )
    if co_rows:
        spoken = sum(r["pred_seconds"] for r in co_rows)
        overlapping = sum(r["overlap_seconds"] for r in co_rows)
        report["co_commentary"] = {
            "clips": len(co_rows),
            "mean_overlap_rate": _mean_or_none(
                [r["overlap_rate"] for r in co_rows if r["overlap_rate"] is not None]
            ),
            "pooled_overlap_rate": overlapping / spoken if spoken else None,
            "silent_clips": sum(1 for r in co_rows if r["overlap_rate"] is None),
            "max_consecutive_overlap": max(r["max_consecutive_overlap"] for r in co_rows),
            "sustained_overlaps": sum(r["sustained_overlaps"] for r in co_rows),
        }
    if guide_delays:
        report["guidance"] = {
            "overall": guide_summary(guide_delays),
            "by_tag": {t: guide_summary(guide_by_tag[t]) for t in sorted(guide_by_tag)},
        }
    if multi_rows:
        report["multi_agent"] = {
            "clips": len(multi_rows),
            "concurrent_seconds": sum(r["count"] for r in multi_rows),
            "clips_with_concurrent_speech": sum(1 for r in multi_rows if r["count"]),
            "max_speakers": max(r["max_speakers"] for r in multi_rows),
        }
    if timings:
        report["rtf"] = real_time_factor([t[0] for t in timings], [t[1] for t in timings])
    report["summary"] = _headline(report)
    report["clips"] = details
    return report


def _headline(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's headline numbers, flat (``None`` where a metric did not run)."""
    f1s, td = report["f1"]["overall"], report["timediff"]["overall"]
    out: dict[str, Any] = {
        "clips": report["counts"]["evaluated_clips"],
        "f1_macro": f1s["macro"]["f1"],
        "f1_micro": f1s["micro"]["f1"],
        "timediff_mean": td["mean"],
        "pred_speaking_rate": report["speaking_rate"]["overall"]["pooled_pred_rate"],
        "label_speaking_rate": report["speaking_rate"]["overall"]["pooled_label_rate"],
    }
    pauc_report = report["pauc"]
    for omega, value in (pauc_report["overall"]["mean_auc"] if pauc_report else {}).items():
        out[f"pauc_omega_{omega}"] = value
    out["win_rate"] = report["win_rate"]["overall"]["win_rate"] if report["win_rate"] else None
    out["overlap_rate"] = report["co_commentary"]["pooled_overlap_rate"] if report["co_commentary"] else None
    out["answer_rate"] = report["guidance"]["overall"]["answer_rate"] if report["guidance"] else None
    out["rtf"] = report["rtf"]["rtf"] if report["rtf"] else None
    return out


def evaluate_files(
    pred_path: str | Path, label_path: str | Path, judge: Judge | None = None, **options: Any
) -> dict[str, Any]:
    """:func:`evaluate` over a prediction JSONL and a label JSONL (errors name file and line)."""
    preds = [parse_clip(r, "pred", where) for where, r in _read_jsonl(pred_path)]
    labels = [parse_clip(r, "label", where) for where, r in _read_jsonl(label_path)]
    baseline = options.pop("baseline_path", None)
    if baseline is not None:
        options["baseline_records"] = [parse_clip(r, "pred", where) for where, r in _read_jsonl(baseline)]
    return evaluate(preds, labels, judge, **options)
