"""Live streams: a clock plus sources, in the Live Gaming Benchmark's record format.

A :class:`Stream` is one clip of a game: a :class:`FrameSource` (a video file, or a
procedural game embodia renders itself) and its :class:`Annotation`, the reference's record
(``video_path``, ``video_begin``/``video_end``, ``active_speaker``, ``annotations`` with
role/speaker/start/end/text|query, ``metadata.tag``). Seconds are integers on the video's
own clock, as in the reference's labels and predictions.

The clock ticks once per second. :meth:`Stream.chunk` gives what the agent may see at tick
``t``: the frames sampled uniformly in ``[t, t + 1)`` (2 fps by default, as the reference),
the co-caster lines and user queries that *start* at ``t``, and, for procedural games, the
HUD readout of the last frame. Nothing after ``t + 1`` is reachable from a chunk: the
ground truth (:attr:`Stream.label`) lives on the stream, which the env never hands to the
agent.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from embodia.core.limits import MAX_FPS
from embodia.core.runs import jsonl_text, parse_jsonl, write_atomic
from embodia.errors import EmbodiaError, read_text_file

Scenario = Literal["solo", "co-commentary", "guidance"]
SCENARIOS: tuple[Scenario, ...] = ("solo", "co-commentary", "guidance")
# The reference's metadata.tag per scenario (proactvl/utils/conversations.py).
TAGS: dict[Scenario, str] = {
    "solo": "Solo commentators",
    "co-commentary": "Multiple commentators",
    "guidance": "Guidance",
}
SCENARIO_OF_TAG = {tag: scenario for scenario, tag in TAGS.items()}
SILENCE = " ..."
"""The reference's streaming-continuation text: an assistant turn that says nothing."""
DEFAULT_FPS = 2.0
USER = "user"
"""The speaker name of a guidance query."""


class StreamError(EmbodiaError, ValueError):
    """A stream spec, annotation record or video cannot be used."""


@dataclass(frozen=True)
class Line:
    """One annotation entry: the agent's own line, a co-caster's line, or a user query."""

    role: Literal["assistant", "user"]
    speaker: str
    start: int
    end: int
    text: str
    """The spoken text, or the query for a guidance query."""

    @property
    def is_query(self) -> bool:
        return self.role == "user" and self.speaker == USER

    def to_record(self) -> dict[str, Any]:
        key = "query" if self.is_query else "text"
        return {
            "role": self.role,
            "speaker": self.speaker,
            "start": self.start,
            "end": self.end,
            key: self.text,
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any], where: str = "annotation") -> Line:
        if not isinstance(data, Mapping):
            raise StreamError(f"{where} must be an object, got {_json_type(data)}")
        role = data.get("role")
        if role not in ("assistant", "user"):
            raise StreamError(f"{where} has role {role!r}: expected 'assistant' or 'user'")
        speaker = data.get("speaker")
        if not isinstance(speaker, str) or not speaker:
            raise StreamError(f"{where} needs a speaker name (a non-empty string), got {speaker!r}")
        for key in ("start", "end"):
            if key not in data:
                raise StreamError(f"{where} has no {key!r} (an integer second on the video's clock)")
        start, end = (whole_second(data[key], f"{where} {key}") for key in ("start", "end"))
        if end < start:
            raise StreamError(f"{where} ends at {end} before it starts at {start}")
        is_query = role == "user" and speaker == USER
        wanted, other = ("query", "text") if is_query else ("text", "query")
        text = data.get(wanted)
        if wanted in data and not isinstance(text, str):
            raise StreamError(f"{where}: {wanted!r} must be a string, got {_json_type(text)}")
        if wanted not in data and other in data:
            why = (
                f"a user's query (role 'user', speaker {USER!r}) carries its words in 'query'"
                if is_query
                else f"a 'query' is a user's (role 'user', speaker {USER!r}); a spoken line has 'text'"
            )
            raise StreamError(f"{where} has {other!r} but needs {wanted!r}: {why}")
        if wanted not in data:
            raise StreamError(f"{where} has no {wanted!r} (the words {'asked' if is_query else 'said'})")
        assert isinstance(text, str)
        return cls(role, speaker, start, end, text)


def whole_second(value: Any, where: str, error: type[EmbodiaError] = StreamError) -> int:
    """A record's second on the video's clock: a finite whole number >= 0 (``12`` or ``12.0``);
    else ``error`` naming ``where``. NaN and infinities are refused
    before any conversion, as JSON readers accept them."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or int(value) != value
    ):
        raise error(f"{where} must be an integer second from 0, got {value!r}")
    return int(value)


@dataclass
class Annotation:
    """One clip's ground truth, field for field the reference's record."""

    video_path: str
    video_begin: int
    video_end: int
    video_duration: int
    active_speaker: dict[str, Any]
    """``{"name": ..., "persona": [...]}``: whose lines the agent is to produce."""
    annotations: list[Line]
    metadata: dict[str, Any] = field(default_factory=dict)
    history: str = ""

    @property
    def speaker(self) -> str:
        return str(self.active_speaker.get("name", ""))

    @property
    def tag(self) -> str:
        return str(self.metadata.get("tag", ""))

    @property
    def scenario(self) -> Scenario:
        return scenario_of_tag(self.metadata.get("tag"), f"the annotation of {self.video_path}")

    @property
    def video_id(self) -> str:
        return f"{Path(self.video_path).stem}:{self.video_begin}-{self.video_end}"

    def clip_lines(self) -> list[Line]:
        """The lines that start inside the clip ``[video_begin, video_end)``: a record cut from a
        longer video may list lines around it, which are neither heard nor scored."""
        return [a for a in self.annotations if self.video_begin <= a.start < self.video_end]

    def own_lines(self) -> list[Line]:
        """The active speaker's lines: what the agent should say, and when."""
        return [a for a in self.clip_lines() if a.role == "assistant" and a.speaker == self.speaker]

    def label(self) -> dict[int, str]:
        """``{second: text}`` of the active speaker, each line at its start second (as the
        reference places a line in the turn of its start second)."""
        return _at_start(self.own_lines())

    def other_lines(self) -> list[Line]:
        """Co-caster lines (everyone but the active speaker and the user)."""
        return [a for a in self.clip_lines() if not a.is_query and a.speaker != self.speaker]

    def queries(self) -> list[Line]:
        return [a for a in self.clip_lines() if a.is_query]

    def to_record(self) -> dict[str, Any]:
        return {
            "video_path": self.video_path,
            "video_begin": self.video_begin,
            "video_end": self.video_end,
            "video_duration": self.video_duration,
            "history": self.history,
            "active_speaker": self.active_speaker,
            "metadata": self.metadata,
            "annotations": [a.to_record() for a in self.annotations],
        }

    def label_record(self, idx: int = 0) -> dict[str, Any]:
        """The reference's label record (the prediction record's shape, with ``label``), plus
        ``speaker`` (the active speaker's name), and ``other`` (co-casters' ``{second: text}``),
        ``other_speakers`` (the same lines by speaker, ``{name: {second: text}}``) and
        ``queries`` (``{second: query}``) when the clip has them: the co-commentary and
        guidance metrics read ``other`` and ``queries``, the run viewer draws a lane per speaker."""
        record: dict[str, Any] = {
            "video_id": self.video_id,
            "begin": self.video_begin,
            "end": self.video_end,
            "label": {str(k): v for k, v in self.label().items()},
            "tag": self.tag,
            "dataset_name": str(self.metadata.get("dataset_name", "")),
            "idx": idx,
        }
        if self.speaker:
            record["speaker"] = self.speaker
        others = self.other_lines()
        for key, lines in (("other", others), ("queries", self.queries())):
            if lines:
                record[key] = {str(k): v for k, v in _at_start(lines).items()}
        if others:
            record["other_speakers"] = {
                name: {str(k): v for k, v in _at_start([a for a in others if a.speaker == name]).items()}
                for name in sorted({a.speaker for a in others})
            }
        return record

    @classmethod
    def from_record(cls, data: Mapping[str, Any], where: str = "record") -> Annotation:
        """A record checked field by field; every problem is a :class:`StreamError` that
        names ``where`` (the file and line) and the field."""
        if not isinstance(data, Mapping):
            raise StreamError(f"{where}: a record must be a JSON object, got {_json_type(data)}")
        for key in RECORD_FIELDS:
            if key not in data:
                hint = " (the tag goes inside metadata)" if key == "metadata" and "tag" in data else ""
                raise StreamError(
                    f"{where}: missing field {key!r}{hint}; a record needs {', '.join(RECORD_FIELDS)}"
                )
        video_path = data["video_path"]
        if not isinstance(video_path, str) or not video_path:
            raise StreamError(f"{where}: video_path must be the video's file name, got {video_path!r}")
        begin = whole_second(data["video_begin"], f"{where}: video_begin")
        end = whole_second(data["video_end"], f"{where}: video_end")
        if end <= begin:
            raise StreamError(
                f"{where}: video_end {end} must be after video_begin {begin} (the clip is [begin, end))"
            )
        duration = whole_second(data.get("video_duration", end), f"{where}: video_duration")
        if duration < end:
            raise StreamError(
                f"{where}: video_duration {duration} is shorter than the clip's video_end {end}"
            )
        history = data.get("history", "")
        if not isinstance(history, str):
            raise StreamError(
                f"{where}: history must be a string (earlier lines as text), got {_json_type(history)}"
            )
        speaker = _active_speaker(data["active_speaker"], where)
        metadata = data["metadata"]
        if not isinstance(metadata, Mapping):
            raise StreamError(f"{where}: metadata must be an object with a 'tag', got {_json_type(metadata)}")
        if "tag" not in metadata:
            raise StreamError(f"{where}: metadata has no 'tag': it must be one of {_tag_choices()}")
        scenario_of_tag(metadata["tag"], where)
        dataset = metadata.get("dataset_name", "")
        if not isinstance(dataset, str):
            raise StreamError(f"{where}: metadata.dataset_name must be a string, got {_json_type(dataset)}")
        if not isinstance(data["annotations"], list):
            raise StreamError(
                f"{where}: annotations must be a list of lines, got {_json_type(data['annotations'])}"
            )
        lines = [Line.from_record(a, f"{where}: annotations[{i}]") for i, a in enumerate(data["annotations"])]
        return cls(
            video_path=video_path,
            video_begin=begin,
            video_end=end,
            video_duration=duration,
            active_speaker=speaker,
            annotations=lines,
            metadata=dict(metadata),
            history=history,
        )


RECORD_FIELDS = ("video_path", "video_begin", "video_end", "active_speaker", "metadata", "annotations")
"""What every annotation record holds (``video_duration`` and ``history`` are optional)."""


def _json_type(value: Any) -> str:
    """How a user would name a value's JSON type in a message (``a string ('x')``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value!r})" if len(value) <= 40 else "a string"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _active_speaker(value: Any, where: str) -> dict[str, Any]:
    """``{"name": str, "persona": [str, ...]}``: the speaker whose lines the agent produces."""
    example = '{"name": "SPEAKER_0", "persona": ["play-by-play caster"]}'
    if not isinstance(value, Mapping):
        raise StreamError(
            f"{where}: active_speaker must be an object like {example}, got {_json_type(value)}"
        )
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise StreamError(
            f"{where}: active_speaker.name must be the speaker's name as the annotations write it "
            f"(a non-empty string), got {'nothing' if 'name' not in value else _json_type(name)}"
        )
    persona = value.get("persona", [])
    if not isinstance(persona, list) or not all(isinstance(p, str) for p in persona):
        raise StreamError(
            f"{where}: active_speaker.persona must be a list of strings, got {_json_type(persona)}"
        )
    return dict(value)


def _tag_choices() -> str:
    return ", ".join(f"{tag!r} (--scenario {scenario})" for scenario, tag in TAGS.items())


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("-", " ").replace("_", " ").split())


def scenario_of_tag(tag: Any, where: str) -> Scenario:
    """The scenario a record's ``metadata.tag`` names; else an error listing the three exact
    tags with their scenarios (and the likely one, for a scenario name or a near miss)."""
    if isinstance(tag, str) and tag in SCENARIO_OF_TAG:
        return SCENARIO_OF_TAG[tag]
    if not isinstance(tag, str):
        raise StreamError(
            f"{where}: metadata.tag must be a string, one of {_tag_choices()}; got {_json_type(tag)}"
        )
    candidates = {_normal(t): t for t in TAGS.values()} | {_normal(s): t for s, t in TAGS.items()}
    close = difflib.get_close_matches(_normal(tag), list(candidates), n=1, cutoff=0.75)
    hint = f" (did you mean {candidates[close[0]]!r}?)" if close else ""
    raise StreamError(
        f"{where}: unknown metadata.tag {tag!r}{hint}; the tag must be one of the exact strings "
        + _tag_choices()
    )


def read_annotations(path: Path | str) -> list[Annotation]:
    """Annotation records from a JSONL file (one record a line); a bad line is reported
    with its number."""
    path = Path(path)
    if not path.is_file():
        raise StreamError(f"annotation file {path} does not exist")
    text = read_text_file(path, StreamError)
    records, bad = parse_jsonl(text.encode("utf-8"))
    if bad:
        line = bad[0]
        if line.kind == "type":  # JSON, but not a record: no hint about spread-out documents
            article = "an" if line.detail[:1] in "aeiou" else "a"
            raise StreamError(
                f"{path} line {line.number}: a record must be a JSON object, got {article} {line.detail}"
            )
        problem = f" is not JSON ({line.detail})" if line.kind == "json" else f": {line.problem}"
        raise StreamError(f"{path} line {line.number}{problem}{_jsonl_hint(text)}")
    out = [Annotation.from_record(data, f"{path} line {number}") for number, data in records]
    if not out:
        raise StreamError(f"{path} holds no annotation records")
    return out


def _jsonl_hint(text: str) -> str:
    """Why a line is not JSON when the whole file is: a pretty-printed record or a list."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return ""
    kind = "a list of records" if isinstance(whole, list) else "one JSON document"
    return f"; the file is {kind} spread over lines, but annotations are JSONL: one record object per line"


def write_annotations(path: Path | str, annotations: Sequence[Annotation]) -> None:
    """Records as JSONL, one a line (what :func:`read_annotations` reads); the old file is
    replaced only once the new one is complete."""
    write_atomic(Path(path), jsonl_text(a.to_record() for a in annotations))


@runtime_checkable
class FrameSource(Protocol):
    """Where a stream's pictures come from (a video file, a procedural game)."""

    name: str
    size: tuple[int, int]
    """(height, width) of every frame."""
    duration: float
    """Seconds of footage available from time 0."""

    def frames_at(self, times: Sequence[float]) -> list[NDArray[np.uint8]]:
        """RGB frames at these times (seconds, increasing)."""
        ...

    def hud_at(self, time: float) -> dict[str, Any] | None:
        """What the game's HUD shows at this time, as data, or None when there is no HUD
        readout (video files). It is part of the picture, so seeing it is not peeking."""
        ...


@dataclass(frozen=True, eq=False)
class Chunk:
    """What the agent may see at tick ``second``: only things at or before ``second + 1``."""

    second: int
    frames: tuple[NDArray[np.uint8], ...]
    frame_times: tuple[float, ...]
    history: tuple[Line, ...] = ()
    """Co-caster lines that start at this second, heard as ``[SPEAKER]: text``."""
    query: str | None = None
    """A user's guidance query that starts at this second."""
    hud: dict[str, Any] | None = None

    def __eq__(self, other: object) -> bool:
        # Frames are arrays: equal chunks hold equal pixels (a dataclass would compare arrays
        # with ``==`` and fail on their truth value).
        if not isinstance(other, Chunk):
            return NotImplemented
        return (
            (self.second, self.frame_times, self.history, self.query, self.hud)
            == (other.second, other.frame_times, other.history, other.query, other.hud)
            and len(self.frames) == len(other.frames)
            and all(np.array_equal(a, b) for a, b in zip(self.frames, other.frames, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass
class Stream:
    """One clip: a frame source, its annotation, and the chunking clock."""

    source: FrameSource
    annotation: Annotation
    fps: float = DEFAULT_FPS

    def __post_init__(self) -> None:
        if not 0 < self.fps <= MAX_FPS:  # a chunk renders fps frames at once
            raise StreamError(f"fps must be above 0 and at most {MAX_FPS}, got {self.fps}")
        frames_per_chunk = self.fps
        if abs(frames_per_chunk - round(frames_per_chunk)) > 1e-9:
            raise StreamError(f"fps must give a whole number of frames per 1-second chunk, got {self.fps}")
        if self.annotation.video_end > self.source.duration + 1e-6:
            raise StreamError(
                f"the clip ends at {self.annotation.video_end} s but {self.source.name} has only "
                f"{self.source.duration:.1f} s of footage"
            )
        self._history = _by_start(self.annotation.other_lines())
        self._queries = _by_start(self.annotation.queries())

    @property
    def begin(self) -> int:
        return self.annotation.video_begin

    @property
    def end(self) -> int:
        return self.annotation.video_end

    @property
    def seconds(self) -> range:
        return range(self.begin, self.end)

    def __len__(self) -> int:
        return self.end - self.begin

    @property
    def label(self) -> dict[int, str]:
        return self.annotation.label()

    def frame_times(self, second: int) -> tuple[float, ...]:
        n = int(round(self.fps))
        return tuple(second + i / n for i in range(n))

    def chunk(self, second: int) -> Chunk:
        if second not in self.seconds:
            raise StreamError(f"second {second} is outside the clip [{self.begin}, {self.end})")
        times = self.frame_times(second)
        queries = self._queries.get(second, ())
        return Chunk(
            second=second,
            frames=tuple(self.source.frames_at(times)),
            frame_times=times,
            history=tuple(self._history.get(second, ())),
            query=" ".join(q.text for q in queries) if queries else None,
            hud=self.source.hud_at(times[-1]),
        )

    def chunks(self, start: int | None = None) -> Iterator[Chunk]:
        for second in range(self.begin if start is None else start, self.end):
            yield self.chunk(second)


def _at_start(lines: Sequence[Line]) -> dict[int, str]:
    """``{start second: text}``, lines starting in the same second joined."""
    out: dict[int, str] = {}
    for line in sorted(lines, key=lambda a: a.start):
        out[line.start] = f"{out[line.start]} {line.text}" if line.start in out else line.text
    return out


def _by_start(lines: Sequence[Line]) -> dict[int, list[Line]]:
    out: dict[int, list[Line]] = {}
    for line in sorted(lines, key=lambda a: (a.start, a.speaker)):
        out.setdefault(line.start, []).append(line)
    return out
