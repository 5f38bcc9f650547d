"""Run folders: a folder that holds a run is continued only when asked (``--resume``) and
only with the settings it was started with; what a run appended as it went is read back
without its torn last line."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)


def read_run_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a run appended as it went; a torn last line (a kill mid-write) is
    dropped, and so is anything after it."""
    records: list[dict[str, Any]] = []
    if not path.exists():
        return records
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("%s:%d is incomplete (the run was killed mid-write); dropping it", path, number)
            break
    return records


def begin_results(out: Path, settings: Mapping[str, Any], done: list[dict[str, Any]]) -> Path:
    """Start (or continue) a run that appends one JSON line per result: ``config.yaml`` with
    its settings, and ``results.jsonl`` holding the records kept from before (a torn last
    line is gone). Returns the results file, to be opened for appending."""
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"settings": dict(settings)}))
    results = out / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in done))
    return results


def check_resumable(out: Path, settings: Mapping[str, Any], resume: bool) -> bool:
    """Whether ``out`` holds an earlier run to continue; an error naming the problem when it
    holds one that may not be continued (no ``--resume``, unreadable or different settings)."""
    import yaml

    config_path = out / "config.yaml"
    if not config_path.exists():
        return False
    if not resume:
        raise EmbodiaError(f"{out} already holds a run: pass --resume to continue it, or pick another --out")
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise EmbodiaError(f"cannot resume {out}: config.yaml is not valid YAML ({exc})") from None
    saved = config.get("settings") if isinstance(config, dict) else None
    if not isinstance(saved, dict):
        raise EmbodiaError(f"cannot resume {out}: config.yaml has no settings mapping")
    for key, value in settings.items():
        if saved.get(key) != value:
            raise EmbodiaError(
                f"cannot resume {out}: it was run with {key}={saved.get(key)!r}, not {value!r}"
            )
    return True
