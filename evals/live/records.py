"""Live-benchmark records: a clip's per-second texts (:class:`Clip`), their validation, the
JSONL files that hold them, and matching predictions to labels."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from embodia.core.runs import read_jsonl
from embodia.core.scores import ScoreInputError, parse_seconds
from embodia.envs.streams.core import whole_second

UNTAGGED = "untagged"
"""The tag of a record without ``tag`` or ``dataset_name``."""

Missing = Literal["skip", "empty", "error"]
Counting = Literal["embodia", "reference"]
COUNTINGS: tuple[Counting, ...] = ("embodia", "reference")
"""How clips are counted: ``embodia`` (silent seconds dropped, unmatched records refused) or
``reference``, as the reference's scripts count them (see :mod:`embodia.evals.live`)."""
ClipKey = tuple[str, int, int, str, int | str | None]
MATCH_KEY = ("video_id", "begin", "end", "dataset_name", "idx")
"""The record fields a prediction is matched to its label on (:attr:`Clip.key`)."""


class LiveEvalError(ScoreInputError):
    """A prediction or label file (or record) cannot be evaluated."""


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

    def identity(self) -> dict[str, Any]:
        """The matching fields and the tag, as a report row starts."""
        return {name: getattr(self, name) for name in (*MATCH_KEY, "tag")}

    def describe(self) -> str:
        return f"{self.video_id} [{self.begin}, {self.end}] dataset={self.dataset_name!r} idx={self.idx!r}"


def check_counting(counting: str) -> Counting:
    if counting not in COUNTINGS:
        raise LiveEvalError(f"counting must be 'embodia' or 'reference', got {counting!r}")
    return counting


def drops_silent(counting: Counting, drop_silent_seconds: bool | None) -> bool:
    """Whether silent seconds are dropped: as given, else as the counting does (embodia's
    drops them, the reference's keeps them)."""
    return counting == "embodia" if drop_silent_seconds is None else drop_silent_seconds


def as_stored(clip: Clip) -> str:
    """A per-second prediction as the reference's pairwise judge is shown a baseline: the
    record's ``pred`` object unflattened, as Python writes the JSON object it read (seconds in
    time order); a caption is its text."""
    if clip.caption is not None:
        return clip.caption
    return repr({str(second): text for second, text in clip.seconds.items()})


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


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (blank lines skipped); a missing file or a line that is
    not a JSON object raises :class:`LiveEvalError` naming the file and the line."""
    return [record for _, record in read_jsonl(path, strict=True, error=LiveEvalError)]


def read_clips(path: str | Path, field: Literal["pred", "label"]) -> list[Clip]:
    """The clips of a prediction (``field="pred"``) or label (``"label"``) JSONL file; every
    error names the file and the line."""
    file = Path(path).expanduser()
    return [
        parse_clip(record, field, f"{file} line {number}")
        for number, record in read_jsonl(file, strict=True, error=LiveEvalError)
    ]


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
