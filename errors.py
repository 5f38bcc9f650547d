"""Exceptions the library raises for bad input.

Every error a user can cause (a missing file, a malformed pose, a mesh without a floor)
is an :class:`EmbodiaError` whose message names the problem in one line; the CLI turns
these into exit code 2 without a traceback.
"""


class EmbodiaError(Exception):
    """Base class of user-facing errors: the message is one self-contained line."""


class SceneError(EmbodiaError, ValueError):
    """A scene spec, file or mesh cannot be used (missing, unsupported, no floor, ...)."""


class PoseError(EmbodiaError, ValueError):
    """A pose is malformed (wrong number of fields, not finite, ...)."""


class BackendUnavailableError(EmbodiaError, ImportError):
    """An optional backend (e.g. habitat_sim) is not installed."""
