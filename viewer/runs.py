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

A folder holding one of these marks but unreadable files is still listed, with an ``error``
naming the file and the problem, so the page can say what is wrong instead of going blank.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodia.errors import EmbodiaError

MARKERS: dict[str, tuple[str, ...]] = {
    "explore": ("episodes.jsonl",),
    "stream": ("predictions.jsonl", "labels.jsonl"),
    "training": ("metrics.jsonl",),
    "results": ("results.jsonl",),
}
MAX_DEPTH = 4
"""How deep below the runs folder run folders are looked for (evaluations nest runs)."""


class RunError(EmbodiaError):
    """A run folder whose files cannot be read as the run they claim to be."""


@dataclass
class Run:
    id: str
    """The folder relative to the runs root, with ``/`` separators (the page's handle)."""
    kind: str
    path: Path
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def listing(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "summary": self.summary, "error": self.error}


def kind_of(folder: Path) -> str | None:
    for kind, names in MARKERS.items():
        if all((folder / name).is_file() for name in names):
            if kind == "results":
                return _results_kind(folder)
            return kind
    return None


def _results_kind(folder: Path) -> str:
    try:
        settings = _yaml(folder / "config.yaml").get("settings", {})
    except RunError:
        settings = {}
    return "sxs" if "modes" in settings else "csmr"


def discover(root: Path) -> list[Run]:
    """Every run folder under ``root`` (``root`` itself included), sorted by id; folders are
    not followed through symlinks that leave ``root``."""
    root = root.resolve()
    runs = []
    for folder in _folders(root, 0):
        kind = kind_of(folder)
        if kind is None:
            continue
        rel = folder.relative_to(root).as_posix()
        run = Run(rel if rel != "." else "", kind, folder)
        try:
            run.summary = summary_of(run)
        except RunError as error:
            run.error = str(error)
        runs.append(run)
    return sorted(runs, key=lambda r: r.id)


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
    """The run with this id; a RunError naming it when there is none."""
    for run in discover(root):
        if run.id == run_id:
            return run
    raise RunError(f"no run {run_id!r} under {root}")


# --------------------------------------------------------------------------- reading files


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunError(f"{path.name} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunError(f"{path.name} is not valid JSON ({error})") from None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file; a torn last line (a run killed mid-write) is dropped, any
    other bad line is an error naming its line number."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise RunError(f"{path.name} is missing") from None
    except UnicodeDecodeError as error:
        raise RunError(f"{path.name} is not text ({error})") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines):
                break
            raise RunError(f"{path.name} line {number} is not valid JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise RunError(f"{path.name} line {number} is not a JSON object")
        out.append(value)
    return out


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        return {}
    try:
        value = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise RunError(f"{path.name} is not valid YAML ({error})") from None
    if not isinstance(value, dict):
        raise RunError(f"{path.name} is not a mapping")
    return value


def _optional_json(path: Path) -> Any:
    return _json(path) if path.is_file() else None


def _video(path: Path) -> dict[str, Any] | None:
    """The video's URL-relative name, frame rate and frame count (read from the file)."""
    if not path.is_file():
        return None
    import imageio.v2 as imageio

    try:
        reader = imageio.get_reader(path)
        meta = reader.get_meta_data()
        reader.close()
    except (OSError, RuntimeError, ValueError) as error:
        raise RunError(f"{path.name} cannot be read as a video ({error})") from None
    fps = float(meta.get("fps") or 0.0)
    duration = float(meta.get("duration") or 0.0)
    width, height = (int(v) for v in meta.get("size", (0, 0)))
    return {"file": path.name, "fps": fps, "frames": round(fps * duration), "width": width, "height": height}


# --------------------------------------------------------------------------- summaries

_KEYS = {
    "explore": ("scene", "agent", "policy", "coverage_ratio", "coverage_auc", "steps", "decisions"),
    "stream": ("source", "scenario", "agent", "seconds", "f1_macro", "timediff_mean", "pauc_omega_0.5"),
    "csmr": ("items", "accuracy", "rouge_l", "queries_per_item", "hallucination_rate"),
    "sxs": ("items",),
    "training": ("steps",),
}


def summary_of(run: Run) -> dict[str, Any]:
    """The few numbers the run list shows; a RunError when the run's files are unreadable."""
    folder = run.path
    if run.kind == "explore":
        records = _jsonl(folder / "episodes.jsonl")
        summary = _optional_json(folder / "summary.json") or {}
        if not isinstance(summary, dict):
            raise RunError("summary.json is not a JSON object")
        if not summary:  # a run still going, or killed: what its records say so far
            last = records[-1] if records else {}
            summary = {"decisions": len(records), **{k: last.get(k) for k in ("coverage_ratio", "steps")}}
            summary["finished"] = False
        return {k: summary[k] for k in (*_KEYS["explore"], "finished") if k in summary}
    if run.kind == "stream":
        _jsonl(folder / "predictions.jsonl")
        summary = _optional_json(folder / "summary.json") or {}
        return {k: summary[k] for k in _KEYS["stream"] if k in summary}
    if run.kind == "training":
        rows = _jsonl(folder / "metrics.jsonl")
        last = rows[-1] if rows else {}
        return {"steps": len(rows), **{k: v for k, v in last.items() if isinstance(v, int | float)}}
    report = _optional_json(folder / "report.json") or {}
    _jsonl(folder / "results.jsonl")
    if run.kind == "sxs":
        modes = report.get("modes", {})
        return {
            "items": report.get("items"),
            **{f"{m} accuracy": v.get("accuracy") for m, v in modes.items()},
        }
    return {k: report[k] for k in _KEYS["csmr"] if k in report}


# --------------------------------------------------------------------------- view models


def view_of(run: Run) -> dict[str, Any]:
    """Everything the run page draws, keyed by view; a RunError when files are unreadable."""
    if run.error:
        raise RunError(run.error)
    base = {"id": run.id, "kind": run.kind, "summary": run.summary, "config": _yaml(run.path / "config.yaml")}
    reader = {
        "explore": _explore_view,
        "stream": _stream_view,
        "training": _training_view,
        "csmr": _results_view,
        "sxs": _results_view,
    }[run.kind]
    return {**base, **reader(run.path)}


def _explore_view(folder: Path) -> dict[str, Any]:
    records = _jsonl(folder / "episodes.jsonl")
    tree = _optional_json(folder / "tree.json")
    steps = []
    for number, record in enumerate(records, start=1):
        choice = record.get("choice") or {}
        if not isinstance(choice, dict):
            raise RunError(f"episodes.jsonl line {number} has a choice that is not an object")
        steps.append(
            {
                "decision": record.get("decision", number),
                "choice": choice,
                "action": record.get("action"),
                "prompt": choice.get("prompt"),
                "attempts": record.get("attempts") or [],
                "rejection": record.get("rejection"),
                "pose": record.get("pose"),
                "coverage_ratio": record.get("coverage_ratio"),
                "steps": record.get("steps"),
                "region": record.get("region"),
                "reward": record.get("reward"),
            }
        )
    settings = _yaml(folder / "config.yaml").get("settings", {})
    return {
        # waypoint agents decide among candidates; primitive agents take one action a step
        "unit": "decision" if any(s["choice"] for s in steps) else "step",
        "steps": steps,
        "tree": tree,
        "video": _video(folder / "episode.mp4"),
        "panorama": {"height": settings.get("panorama_height"), "width": settings.get("panorama_width")},
        "images": [name for name in ("bev.png", "coverage.png", "tree.png") if (folder / name).is_file()],
    }


def _stream_view(folder: Path) -> dict[str, Any]:
    predictions = _jsonl(folder / "predictions.jsonl")
    labels = _jsonl(folder / "labels.jsonl")
    decisions = _jsonl(folder / "decisions.jsonl") if (folder / "decisions.jsonl").is_file() else []
    clips = []
    for prediction in predictions:
        label = next((lb for lb in labels if lb.get("video_id") == prediction.get("video_id")), {})
        clips.append(
            {
                "video_id": prediction.get("video_id"),
                "begin": prediction.get("begin", 0),
                "end": prediction.get("end", 0),
                "speaker": prediction.get("speaker"),
                "pred": prediction.get("pred") or {},
                "label": label.get("label") or {},
            }
        )
    seconds = max((int(c["end"]) for c in clips), default=len(decisions))
    return {
        "clips": clips,
        "seconds": seconds,
        "decisions": decisions,
        "video": _video(folder / "stream.mp4"),
        "images": [name for name in ("timeline.png",) if (folder / name).is_file()],
    }


def _training_view(folder: Path) -> dict[str, Any]:
    rows = _jsonl(folder / "metrics.jsonl")
    keys = sorted(
        {k for r in rows for k, v in r.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    )
    x = next((k for k in ("step", "epoch", "iteration") if k in keys), None)
    curves = {
        k: [[r.get(x, i) if x else i, r[k]] for i, r in enumerate(rows) if isinstance(r.get(k), int | float)]
        for k in keys
        if k != x
    }
    return {"x": x or "row", "curves": curves}


def _results_view(folder: Path) -> dict[str, Any]:
    rows = _jsonl(folder / "results.jsonl")
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
        "report": _optional_json(folder / "report.json"),
        "rows": [{k: r[k] for k in keep if k in r} for r in rows],
        "images": sorted(p.name for p in folder.glob("*.png")),
    }
