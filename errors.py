"""Exceptions the library raises for bad input.

Every error a user can cause (a missing file, a malformed pose, a mesh without a floor)
is an :class:`EmbodiaError` whose message names the problem in one line; the CLI turns
these into exit code 2 without a traceback. :func:`read_text_file` reads the text files users
give (records, instances, scripted replies) with such an error for bytes that are not text;
:func:`read_format_record` the versioned JSON record a saved model keeps beside its weights.
"""

import json
from pathlib import Path
from typing import Any


class EmbodiaError(Exception):
    """Base class of user-facing errors: the message is one self-contained line."""


class SceneError(EmbodiaError, ValueError):
    """A scene spec, file or mesh cannot be used (missing, unsupported, no floor, ...)."""


class PoseError(EmbodiaError, ValueError):
    """A pose is malformed (wrong number of fields, not finite, ...)."""


class BackendUnavailableError(EmbodiaError, ImportError):
    """An optional backend (e.g. habitat_sim) is not installed."""


def read_format_record(
    path: Path, format_version: int, what: str, error: type[EmbodiaError] = EmbodiaError
) -> dict[str, Any]:
    """The JSON object a saved artefact keeps beside its weights (``{"format": N, ...}``);
    ``error`` naming the file when it cannot be read, is not JSON, or is not a format-N
    ``what`` record."""
    try:
        record = json.loads(read_text_file(path, error))
    except json.JSONDecodeError as exc:
        raise error(f"{path} is not JSON: {exc.msg}") from None
    if not isinstance(record, dict) or record.get("format") != format_version:
        raise error(f"{path} is not a format-{format_version} {what} record")
    return record


def read_text_file(path: Path, error: type[EmbodiaError] = EmbodiaError) -> str:
    """The text of a file a user gave; ``error`` naming the file if it cannot be read or is not
    UTF-8 text (a binary file, a Latin-1 export), never a bare ``UnicodeDecodeError``."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
