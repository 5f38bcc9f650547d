"""Run folders as the viewer sees them: which kind of run a folder holds, its summary, and
the per-step view model the page draws, read from the files runs already write.

Kinds, by the files that mark them:

- ``explore``: ``episodes.jsonl`` (one line per decision), with ``summary.json``,
  ``tree.json`` and ``episode.mp4`` (one frame per decision: the panorama with its numbered
  candidates and the BEV; frame ``k - 1`` is what decision ``k`` was made on).
- ``stream``: ``predictions.jsonl`` and ``labels.jsonl`` (Live Gaming Benchmark format), with
  ``decisions.jsonl`` (one line per second) and ``stream.mp4`` (subtitles burned in).
- ``training``: ``metrics.jsonl`` (one line per step or epoch, every numeric field a curve).
- ``csmr`` / ``sxs``: ``results.jsonl`` and ``report.json`` of ``embodia eval csmr|sxs``.
- ``dsr``: ``answers.jsonl`` and ``run.json`` (+ ``report.json``, ``report.png`` once it has
  finished) of ``embodia eval dsr``.
- ``scireas`` / ``scireas-pro``: ``items.jsonl`` / ``selection.jsonl`` and ``config.yaml`` (+
  ``summary.json``) of ``embodia eval scireas`` / ``scireas-pro``; ``embodia eval krux-study``
  writes the same files as a scireas run, its summary by element pool and family.
- ``vocal``: ``answers.jsonl`` and ``config.yaml`` (+ ``summary.json``, ``markers.png`` and
  ``reliability.png`` once it has finished) of ``embodia eval vocal``.

A folder holding one of these marks but unreadable files is still listed, with an ``error``
naming the file and the problem, so the page can say what is wrong instead of going blank.

Only regular files are read, and at most :data:`MAX_FILE_BYTES` of each: a FIFO, socket,
device or folder in a run file's place is an error on that run, never a read that waits
forever (see :func:`open_regular`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from embodia.core.runs import parse_jsonl
from embodia.errors import EmbodiaError

MARKERS: dict[str, tuple[str, ...]] = {
    "dsr": ("answers.jsonl", "run.json"),
    "vocal": ("answers.jsonl", "config.yaml"),  # after dsr: a DSR run has run.json
    "scireas": ("items.jsonl", "config.yaml"),
    "scireas-pro": ("selection.jsonl", "config.yaml"),
    "explore": ("episodes.jsonl",),
    "stream": ("predictions.jsonl", "labels.jsonl"),
    "training": ("metrics.jsonl",),
    "results": ("results.jsonl",),
}
MAX_DEPTH = 4
"""How deep below the runs folder run folders are looked for (evaluations nest runs)."""
MAX_FILE_BYTES = 64 << 20
"""The most a run file the viewer parses may hold (long runs write a few MB); a bigger one is
an error on its run instead of an unbounded read."""
MAX_NAME_BYTES = 255
"""The longest folder name file systems allow: a longer part of a run id names no run."""


TIME_UNITS = {"explore": "step", "stream": "second"}
"""What a run's slider steps through: an exploration's steps (decisions line up with primitive
steps), a stream's seconds; the other kinds have no time axis. Two runs are stepped through
together only when they share one (the page refuses other pairs)."""


class RunError(EmbodiaError):
    """A run folder whose files cannot be read as the run they claim to be."""


class NoSuchRun(RunError):
    """An id that names no run folder under the runs root."""


@dataclass
class Run:
    id: str
    """The folder relative to the runs root, with ``/`` separators (the page's handle)."""
    kind: str
    path: Path
    root: Path
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def time_unit(self) -> str | None:
        return TIME_UNITS.get(self.kind)

    def listing(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "time_unit": self.time_unit,
            "summary": self.summary,
            "error": self.error,
        }

    def file(self, name: str) -> Path:
        """The run's file ``name``; a RunError when it is a link that leads out of the root
        (nothing outside the runs folder is ever read, through a link or otherwise)."""
        path = self.path / name
        if path.is_symlink() or path.exists():
            resolved = path.resolve()
            if not resolved.is_relative_to(self.root):
                raise RunError(f"{name} links outside the runs folder")
            return resolved
        return path

    def has(self, name: str) -> bool:
        """Whether the run has a regular file ``name`` (inside the runs folder)."""
        return self.file(name).is_file()

    def read_json(self, name: str) -> Any:
        """The JSON value of the run's file ``name``; None when the run has no such file."""
        return _json(self.file(name), name)

    def read_jsonl(self, name: str, *, optional: bool = False) -> list[dict[str, Any]]:
        """The records of the run's JSONL file ``name`` (none when ``optional`` and absent)."""
        if optional and not os.path.lexists(self.path / name):
            return []
        return _jsonl(self.file(name), name)

    def read_yaml(self, name: str) -> dict[str, Any]:
        """The mapping in the run's YAML file ``name``; empty when the run has no such file."""
        return _yaml(self.file(name), name)


def kind_of(folder: Path) -> str | None:
    # anything by a marker's name marks the run, so a FIFO or a folder in its place is an
    # error shown on the run rather than a run that silently disappears from the list
    for kind, names in MARKERS.items():
        if all(os.path.lexists(folder / name) for name in names):
            if kind == "results":
                return "sxs" if _is_sxs(folder) else "csmr"
            return kind
    return None


def _is_sxs(folder: Path) -> bool:
    if (folder / "config.yaml").is_symlink():
        return False  # never read through a link just to tell the kind
    try:
        return "modes" in _yaml(folder / "config.yaml", "config.yaml").get("settings", {})
    except RunError:
        return False


def discover(root: Path) -> list[Run]:
    """Every run folder under ``root`` (``root`` itself included), sorted by id; folders are
    not followed through symlinks."""
    root = root.resolve()
    runs = [run for folder in _folders(root, 0) if (run := _open(root, folder)) is not None]
    return sorted(runs, key=lambda r: r.id)


def _open(root: Path, folder: Path) -> Run | None:
    kind = kind_of(folder)
    if kind is None:
        return None
    rel = folder.relative_to(root).as_posix()
    run = Run(rel if rel != "." else "", kind, folder, root)
    try:
        run.summary = summary_of(run)
    except RunError as error:
        run.error = str(error)
    except Exception as error:  # one run's files must never take the list down with them
        run.error = f"cannot read this run ({type(error).__name__}: {error})"
    return run


def _folders(folder: Path, depth: int) -> Iterator[Path]:
    yield folder
    if depth >= MAX_DEPTH:
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        if child.is_symlink():
            continue  # a link could lead out of the runs folder
        yield from _folders(child, depth + 1)


def find(root: Path, run_id: str) -> Run:
    """The run with this id, opened directly (not by listing every run); a RunError naming it
    when there is none. Only folders :func:`discover` would list can be named."""
    root = root.resolve()
    missing = NoSuchRun(f"no run {run_id[:80]!r}{'...' if len(run_id) > 80 else ''} under {root}")
    parts = run_id.split("/") if run_id else []
    if len(parts) > MAX_DEPTH or any(
        p in ("", ".", "..")
        or p.startswith(".")
        or "\\" in p
        or "\x00" in p
        or len(p.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
        for p in parts
    ):
        raise missing
    folder = root
    for part in parts:
        folder = folder / part
        try:
            if folder.is_symlink() or not folder.is_dir():
                raise missing
        except OSError:  # a name this file system cannot hold, and the like: no such run
            raise missing from None
    run = _open(root, folder)
    if run is None:
        raise missing
    return run


# --------------------------------------------------------------------------- reading files

_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a link"),
)


def _not_regular(mode: int) -> str | None:
    """What a file of this mode is (``"a FIFO (named pipe)"``) when it is not a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _FILE_KINDS if test(mode)), "not a regular file")


def open_regular(path: Path, name: str) -> BinaryIO:
    """``path`` open for reading when it is a regular file; a RunError naming ``name`` and
    what it is otherwise. The open never waits (``O_NONBLOCK``: a FIFO with no writer would
    block a plain open or read forever) and never follows a link (``O_NOFOLLOW``: the path is
    already resolved, so a link here was swapped in after the check that it stays inside)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise RunError(f"{name} is missing") from None
    except OSError as error:  # a socket (ENXIO), a link swapped in (ELOOP), no permission
        try:
            what = _not_regular(os.lstat(path).st_mode)
        except OSError:
            what = None
        if what:
            raise RunError(f"{name} is {what}, not a regular file") from None
        raise RunError(f"{name} cannot be opened ({error.strerror or error})") from None
    try:
        what = _not_regular(os.fstat(descriptor).st_mode)
        if what:
            raise RunError(f"{name} is {what}, not a regular file")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _bytes(path: Path, name: str) -> bytes | None:
    """The bytes of run file ``name`` at ``path``, None when there is none; a RunError when it
    is not a regular file or holds more than :data:`MAX_FILE_BYTES`."""
    if not os.path.lexists(path):
        return None
    with open_regular(path, name) as handle:
        data = handle.read(MAX_FILE_BYTES + 1)  # bounded even if the file grows meanwhile
    if len(data) > MAX_FILE_BYTES:
        raise RunError(f"{name} holds more than the {MAX_FILE_BYTES >> 20} MiB the viewer reads of a file")
    return data


def _decoded(data: bytes, name: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise RunError(f"{name} is not text ({error})") from None


def _text(path: Path, name: str) -> str | None:
    """The text of run file ``name`` at ``path``, None when there is none; a RunError when it
    is not a regular file, holds more than :data:`MAX_FILE_BYTES` or is not UTF-8."""
    data = _bytes(path, name)
    return None if data is None else _decoded(data, name)


def _json(path: Path, name: str) -> Any:
    """The JSON value of run file ``name``; None when there is no such file."""
    text = _text(path, name)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise RunError(f"{name} is not valid JSON ({error})") from None
    except RecursionError:
        raise RunError(f"{name} is nested too deeply to read") from None


_BAD_LINE = {
    "utf-8": "is not text",
    "json": "is not valid JSON ({detail})",
    "depth": "is nested too deeply to read",
    "type": "is not a JSON object",
}
"""How the page names what is wrong with a line (:attr:`embodia.core.runs.BadLine.kind`)."""


def _jsonl(path: Path, name: str) -> list[dict[str, Any]]:
    """The records of a JSONL file, read by embodia's one JSONL parser: a torn last line is a
    run still writing it and is left out, any other unreadable line is an error naming its
    line number (the page shows a broken run as broken, not as a shorter one)."""
    data = _bytes(path, name)
    if data is None:
        raise RunError(f"{name} is missing")
    _decoded(data, name)
    records, bad = parse_jsonl(data)
    broken = next((line for line in bad if not line.torn), None)
    if broken is not None:
        problem = _BAD_LINE[broken.kind].format(detail=broken.detail)
        raise RunError(f"{name} line {broken.number} {problem}")
    return [record for _, record in records]


def _yaml(path: Path, name: str) -> dict[str, Any]:
    """The mapping in run file ``name``; empty when there is no such file."""
    import yaml

    text = _text(path, name)
    if text is None:
        return {}
    try:
        value = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise RunError(f"{name} is not valid YAML ({error})") from None
    except RecursionError:
        raise RunError(f"{name} is nested too deeply to read") from None
    if not isinstance(value, dict):
        raise RunError(f"{name} is not a mapping")
    if not isinstance(value.get("settings", {}), dict):
        raise RunError(f"{name}: settings is not a mapping")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    """``value`` when it is a JSON object (absent reads as empty); a RunError naming it else."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RunError(f"{what} is not a JSON object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RunError(f"{what} is not a list")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _video(run: Run, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(video, error)``: the video's name, frame rate, frame count and size read from the
    file, or why it cannot be played (a run still going has no finished MP4 yet), in one line."""
    path = run.file(name)
    if not os.path.lexists(path):
        return None, None
    try:  # ffmpeg would wait forever on a FIFO, and a folder is no video either
        open_regular(path, name).close()
    except RunError as error:
        return None, str(error)
    import imageio.v2 as imageio

    try:
        reader = imageio.get_reader(path)
        meta = reader.get_meta_data()
        reader.close()
    except Exception:  # imageio/ffmpeg raise many kinds; the reason is always the same to a user
        return None, f"{name} cannot be played yet: it is unfinished or damaged (the run may still be going)"
    fps = float(meta.get("fps") or 0.0)
    duration = float(meta.get("duration") or 0.0)
    width, height = (int(v) for v in meta.get("size", (0, 0)))
    frames = round(fps * duration)
    return {"file": name, "fps": fps, "frames": frames, "width": width, "height": height}, None


# --------------------------------------------------------------------------- summaries

_KEYS = {
    "explore": ("scene", "agent", "policy", "coverage_ratio", "coverage_auc", "steps", "decisions"),
    "stream": ("source", "scenario", "agent", "seconds", "f1_macro", "timediff_mean", "pauc_omega_0.5"),
    "csmr": ("items", "accuracy", "rouge_l", "queries_per_item", "hallucination_rate"),
}


def summary_of(run: Run) -> dict[str, Any]:
    """The few numbers the run list shows, first ``model: random weights`` when the run used a
    model of random weights (its config says so); a RunError when its files are unreadable."""
    return {**_random_weights(run), **_numbers(run)}


def _random_weights(run: Run) -> dict[str, Any]:
    config = (
        _object(run.read_json("run.json"), "run.json") if run.kind == "dsr" else run.read_yaml("config.yaml")
    )
    return {"model": "random weights"} if config.get("random_weights") else {}


def _numbers(run: Run) -> dict[str, Any]:
    if run.kind == "explore":
        records = run.read_jsonl("episodes.jsonl")
        summary = _object(run.read_json("summary.json"), "summary.json")
        if not summary:  # a run still going, or killed: what its records say so far
            last = records[-1] if records else {}
            summary = {"decisions": len(records), **{k: last.get(k) for k in ("coverage_ratio", "steps")}}
            summary["finished"] = False
            settings = run.read_yaml("config.yaml").get("settings", {})
            if "scene" in settings:
                summary["scene"] = settings["scene"]
        return {k: summary[k] for k in (*_KEYS["explore"], "finished") if k in summary}
    if run.kind == "stream":
        run.read_jsonl("predictions.jsonl")
        summary = _object(run.read_json("summary.json"), "summary.json")
        return {k: summary[k] for k in _KEYS["stream"] if k in summary}
    if run.kind == "dsr":
        return _dsr_summary(run)
    if run.kind == "vocal":
        return _vocal_summary(run)
    if run.kind in ("scireas", "scireas-pro"):
        return _scireas_summary(run)
    if run.kind == "training":
        rows = run.read_jsonl("metrics.jsonl")
        last = rows[-1] if rows else {}
        return {"steps": len(rows), **{k: v for k, v in last.items() if _number(v)}}
    report = _object(run.read_json("report.json"), "report.json")
    run.read_jsonl("results.jsonl")
    if run.kind == "sxs":
        modes = _object(report.get("modes"), "report.json modes")
        return {
            "items": report.get("items"),
            **{
                f"{m} accuracy": _object(v, f"report.json mode {m}").get("accuracy") for m, v in modes.items()
            },
        }
    return {k: report[k] for k in _KEYS["csmr"] if k in report}


def _scireas_summary(run: Run) -> dict[str, Any]:
    records = run.read_jsonl("items.jsonl" if run.kind == "scireas" else "selection.jsonl")
    summary = _object(run.read_json("summary.json"), "summary.json")
    settings = run.read_yaml("config.yaml").get("settings", {})
    named: dict[str, Any] = {
        k: settings[k] for k in ("policy", "low", "high", "judge", "source") if settings.get(k) is not None
    }
    if not summary:  # still going, or killed: how many questions so far (not the judgements)
        asked = [r for r in records if not str(r.get("key", "")).startswith("judge/")]
        return {**named, "items": len(asked), "finished": False}
    if run.kind == "scireas-pro":
        keys = ("items", "low_accuracy", "high_accuracy", "effort_items", "pro_items")
        return {**named, **{k: summary[k] for k in keys if k in summary}}
    if isinstance(summary.get("over_seeds"), dict):  # embodia eval krux-study: the trained model's groups
        study: dict[str, Any] = {}
        for group, found in summary["over_seeds"].items():
            if group.startswith("trained/") and isinstance(found, dict):
                name = group.removeprefix("trained/")
                study[f"{name} plain"] = _object(found.get("plain_accuracy"), group).get("mean")
                study[f"{name} with ingredients"] = _object(found.get("oracle_accuracy"), group).get("mean")
        return {"seeds": settings.get("seeds"), **study}
    numbers: dict[str, Any] = {k: summary[k] for k in ("items", "plain_accuracy") if k in summary}
    for source in ("oracle", "extracted"):
        part = summary.get(source)
        if isinstance(part, dict):
            numbers[f"{source} accuracy"] = part.get("accuracy")
            numbers[f"{source} gain"] = part.get("gain")
    return {**named, **numbers}


def _vocal_summary(run: Run) -> dict[str, Any]:
    answers = run.read_jsonl("answers.jsonl")
    summary = _object(run.read_json("summary.json"), "summary.json")
    settings = run.read_yaml("config.yaml").get("settings", {})
    named: dict[str, Any] = {k: settings[k] for k in ("policy", "task") if k in settings}
    if not summary:  # still going, or killed: what the answers say so far
        right = [a["correct"] for a in answers if isinstance(a.get("correct"), bool)]
        return {
            **named,
            "answered": len(answers),
            "accuracy": round(sum(right) / len(right), 4) if right else None,
            "finished": False,
        }
    calibration = _object(summary.get("calibration"), "summary.json calibration")
    numbers: dict[str, Any] = {k: summary[k] for k in ("answered", "accuracy", "marker_rate") if k in summary}
    for name in ("human", "learned"):
        report = calibration.get(name)
        if isinstance(report, dict) and _number(report.get("ece")):
            numbers[f"{name} ECE"] = report["ece"]
    comparison = _object(summary.get("comparison"), "summary.json comparison")
    if _number(comparison.get("overconfidence")):
        numbers["overconfidence"] = comparison["overconfidence"]
    return {**named, **numbers}


def _dsr_summary(run: Run) -> dict[str, Any]:
    settings = _object(run.read_json("run.json"), "run.json")
    answers = run.read_jsonl("answers.jsonl")
    overall = _object(
        _object(run.read_json("report.json"), "report.json").get("overall"), "report.json overall"
    )
    if not overall:  # still going, or killed before its report: what the answers say so far
        scored = [a for a in answers if _number(a.get("exact"))]
        overall = {
            "n": len(scored),
            "exact": round(sum(a["exact"] for a in scored) / len(scored), 4) if scored else None,
        }
        overall["finished"] = False
    named: dict[str, Any] = {k: settings[k] for k in ("suite", "mode", "policy") if k in settings}
    return {**named, **{k: overall[k] for k in ("n", "exact", "partial", "finished") if k in overall}}


# --------------------------------------------------------------------------- view models

MAX_POINTS = 2000
"""Curves longer than this are thinned (evenly, keeping the last point) before they are sent."""


def view_of(run: Run) -> dict[str, Any]:
    """Everything the run page draws, keyed by view; a RunError when files are unreadable."""
    if run.error:
        raise RunError(run.error)
    config = run.read_json("run.json") if run.kind == "dsr" else run.read_yaml("config.yaml")
    base = {"id": run.id, "kind": run.kind, "summary": run.summary, "config": config}
    reader = {
        "dsr": _dsr_view,
        "explore": _explore_view,
        "stream": _stream_view,
        "training": _training_view,
        "csmr": _results_view,
        "sxs": _results_view,
        "vocal": _vocal_view,
        "scireas": _scireas_view,
        "scireas-pro": _scireas_view,
    }[run.kind]
    return {**base, "time_unit": run.time_unit, **reader(run)}


def _pose(value: Any) -> list[float] | None:
    return (
        [float(v) for v in value]
        if isinstance(value, list) and len(value) >= 3 and all(map(_number, value))
        else None
    )


def _explore_view(run: Run) -> dict[str, Any]:
    records = run.read_jsonl("episodes.jsonl")
    tree = _tree(run.read_json("tree.json"))
    steps = []
    for number, record in enumerate(records, start=1):
        where = f"episodes.jsonl line {number}"
        choice = _object(record.get("choice"), f"{where}: choice")
        attempts = [
            _object(a, f"{where}: an attempt") for a in _list(record.get("attempts"), f"{where}: attempts")
        ]
        steps.append(
            {
                "decision": record.get("decision", number),
                "choice": choice,
                "action": record.get("action"),
                "prompt": choice.get("prompt"),
                "attempts": attempts,
                "rejection": record.get("rejection"),
                "pose": _pose(record.get("pose")),
                "coverage_ratio": record.get("coverage_ratio")
                if _number(record.get("coverage_ratio"))
                else None,
                "steps": record.get("steps") if _number(record.get("steps")) else number,
                "region": record.get("region"),
                "reward": record.get("reward"),
            }
        )
    settings = run.read_yaml("config.yaml").get("settings", {})
    video, video_error = _video(run, "episode.mp4")
    return {
        # waypoint agents decide among candidates; primitive agents take one action a step
        "unit": "decision" if any(s["choice"] for s in steps) else "step",
        "steps": steps,
        "tree": tree,
        "video": video,
        "video_error": video_error,
        "panorama": {"height": settings.get("panorama_height"), "width": settings.get("panorama_width")},
        "images": [name for name in ("bev.png", "coverage.png", "tree.png") if run.has(name)],
    }


def _tree(value: Any) -> dict[str, Any] | None:
    """A node-link tree with string ids, object nodes and edges between known nodes."""
    if value is None:
        return None
    tree = _object(value, "tree.json")
    nodes = [_object(n, "tree.json: a node") for n in _list(tree.get("nodes"), "tree.json nodes")]
    edges = [
        _object(e, "tree.json: an edge")
        for e in _list(tree.get("edges", tree.get("links")), "tree.json edges")
    ]
    for node in nodes:
        node["id"] = str(node.get("id"))
    known = {n["id"] for n in nodes}
    kept = [{"source": str(e.get("source")), "target": str(e.get("target"))} for e in edges]
    return {"nodes": nodes, "edges": [e for e in kept if e["source"] in known and e["target"] in known]}


def _stream_view(run: Run) -> dict[str, Any]:
    predictions = run.read_jsonl("predictions.jsonl")
    labels = run.read_jsonl("labels.jsonl")
    decisions = run.read_jsonl("decisions.jsonl", optional=True)
    clips: list[dict[str, Any]] = []
    ends: list[int] = []
    for number, prediction in enumerate(predictions, start=1):
        where = f"predictions.jsonl line {number}"
        label = next((lb for lb in labels if lb.get("video_id") == prediction.get("video_id")), {})
        begin, end = prediction.get("begin", 0), prediction.get("end", 0)
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= 86_400):
            raise RunError(f"{where}: begin and end must be whole seconds with 0 <= begin <= end <= a day")
        ends.append(end)
        clips.append(
            {
                "video_id": prediction.get("video_id"),
                "begin": begin,
                "end": end,
                "speaker": prediction.get("speaker"),
                "pred": _object(prediction.get("pred"), f"{where}: pred"),
                "label": _object(label.get("label"), "labels.jsonl: label"),
            }
        )
    seconds = max(ends, default=len(decisions))
    video, video_error = _video(run, "stream.mp4")
    by_second = {int(d["second"]): d for d in decisions if isinstance(d.get("second"), int)}
    return {
        "clips": clips,
        "lanes": _speaker_lanes(predictions, labels),
        "seconds": seconds,
        "decisions": [by_second.get(t) for t in range(seconds)],
        "video": video,
        "video_error": video_error,
        "images": [name for name in ("timeline.png",) if run.has(name)],
    }


AGENT = "agent"
"""The lane name of a prediction that names no speaker."""
CO_CASTERS = "co-casters"
"""The lane of co-caster lines whose speakers the label does not name (runs before it did)."""


def _speaker_lanes(predictions: list[dict[str, Any]], labels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One lane per speaker of the run's first clip: ``{"speaker", "pred", "label"}``, what the
    agent playing that speaker said and what that speaker truly said (``None`` where the run
    has no such side). The active speaker comes first (the first prediction record's, whose
    truth is the label's ``label``), then the co-casters the label names (``other_speakers``;
    its ``other`` as one lane when it names none), then any other predicted agent."""
    if not predictions:
        return []
    first = predictions[0]
    label = next((lb for lb in labels if lb.get("video_id") == first.get("video_id")), {})
    lanes: dict[str, dict[str, Any]] = {}

    def lane(name: Any) -> dict[str, Any]:
        key = str(name) if name else AGENT
        return lanes.setdefault(key, {"speaker": key, "pred": None, "label": None})

    active = lane(label.get("speaker") or first.get("speaker"))
    active["label"] = _object(label.get("label"), "labels.jsonl: label")
    others = _object(label.get("other_speakers"), "labels.jsonl: other_speakers")
    for name, said in others.items():
        lane(name)["label"] = _object(said, f"labels.jsonl: other_speakers {name}")
    if not others and label.get("other") is not None:
        lane(CO_CASTERS)["label"] = _object(label.get("other"), "labels.jsonl: other")
    active["pred"] = _object(first.get("pred"), "predictions.jsonl line 1: pred")
    for number, prediction in enumerate(predictions[1:], start=2):
        if prediction.get("video_id") == first.get("video_id"):
            said = _object(prediction.get("pred"), f"predictions.jsonl line {number}: pred")
            lane(prediction.get("speaker") or f"{AGENT} {number}")["pred"] = said
    return list(lanes.values())


def _thin(points: list[list[float]]) -> list[list[float]]:
    if len(points) <= MAX_POINTS:
        return points
    stride = len(points) / (MAX_POINTS - 1)
    return [points[int(i * stride)] for i in range(MAX_POINTS - 1)] + [points[-1]]


def _training_view(run: Run) -> dict[str, Any]:
    rows = run.read_jsonl("metrics.jsonl")
    keys = sorted({k for r in rows for k, v in r.items() if _number(v)})
    x = next((k for k in ("step", "epoch", "iteration") if k in keys), None)
    curves = {
        k: _thin([[r.get(x, i) if x else i, r[k]] for i, r in enumerate(rows) if _number(r.get(k))])
        for k in keys
        if k != x
    }
    return {"x": x or "row", "curves": curves, "rows": len(rows)}


def _dsr_view(run: Run) -> dict[str, Any]:
    """One row per answered instance (the reply itself stays in answers.jsonl: it can be long)."""
    keep = ("id", "category", "operation", "length", "prompt_mode", "exact", "partial", "failure", "reason")
    return {
        "report": run.read_json("report.json"),
        "rows": [{k: r[k] for k in keep if k in r} for r in run.read_jsonl("answers.jsonl")],
        "images": sorted(p.name for p in run.path.glob("*.png") if run.has(p.name)),
    }


def _scireas_view(run: Run) -> dict[str, Any]:
    """One row per question: its verdicts plain and per ingredient source (right orders of
    all), or low and high; the summary as the report."""
    rows = []
    for record in run.read_jsonl("items.jsonl" if run.kind == "scireas" else "selection.jsonl"):
        row: dict[str, Any] = {
            k: record[k] for k in ("key", "seed", "policy", "task", "plain", "low", "high") if k in record
        }
        for source in ("oracle", "extracted"):
            part = record.get(source)
            if isinstance(part, dict) and isinstance(part.get("verdicts"), list):
                row[source] = f"{sum(map(bool, part['verdicts']))}/{len(part['verdicts'])}"
        rows.append(row)
    return {"report": run.read_json("summary.json"), "rows": rows, "images": []}


def _vocal_view(run: Run) -> dict[str, Any]:
    """One row per question (the reply itself stays in answers.jsonl), the summary as the
    report, and the marker and reliability plots."""
    keep = ("key", "correct", "marker", "marker_text", "human_level", "consistency", "token_probability")
    return {
        "report": run.read_json("summary.json"),
        "rows": [{k: r[k] for k in keep if k in r} for r in run.read_jsonl("answers.jsonl")],
        "images": sorted(p.name for p in run.path.glob("*.png") if run.has(p.name)),
    }


def _results_view(run: Run) -> dict[str, Any]:
    rows = run.read_jsonl("results.jsonl")
    keep = (
        "index",
        "mode",
        "item",
        "correct",
        "score",
        "reason",
        "answer",
        "visible",
        "queries",
        "stop",
        "rouge_l",
    )
    return {
        "report": run.read_json("report.json"),
        "rows": [{k: r[k] for k in keep if k in r} for r in rows],
        "images": sorted(p.name for p in run.path.glob("*.png") if run.has(p.name)),
    }
