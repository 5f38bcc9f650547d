"""The ``embodia`` command line.

Bad input (a missing file, an unknown format, a malformed pose, a mesh with no floor, an
option value out of range) ends with exit code 2 and one ``error:`` line on stderr, never a
traceback. Sizes are bounded by :mod:`embodia.core.limits`.
"""

from embodia.cli.root import app, main, user_errors

__all__ = ["app", "main", "user_errors"]
