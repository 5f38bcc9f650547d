"""Exceptions the library raises for bad input.

Every error a user can cause (a missing file, a malformed pose, a mesh without a floor)
is an :class:`EmbodiaError` whose message names the problem in one line; the CLI turns
these into exit code 2 without a traceback. :func:`read_text_file` reads the text files users
give (records, instances, scripted replies) with such an error for bytes that are not text.
"""

from pathlib import Path


class EmbodiaError(Exception):
    """Base class of user-facing errors: the message is one self-contained line."""


class SceneError(EmbodiaError, ValueError):
    """A scene spec, file or mesh cannot be used (missing, unsupported, no floor, ...)."""


class PoseError(EmbodiaError, ValueError):
    """A pose is malformed (wrong number of fields, not finite, ...)."""


class BackendUnavailableError(EmbodiaError, ImportError):
    """An optional backend (e.g. habitat_sim) is not installed."""


def read_text_file(path: Path, error: type[EmbodiaError] = EmbodiaError) -> str:
    """The text of a file a user gave; ``error`` naming the file if it cannot be read or is not
    UTF-8 text (a binary file, a Latin-1 export), never a bare ``UnicodeDecodeError``."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
