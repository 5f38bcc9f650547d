"""The resume rule every run folder follows: a folder that holds a run is continued only when
asked (``--resume``) and only with the settings it was started with."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodia.errors import EmbodiaError


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
