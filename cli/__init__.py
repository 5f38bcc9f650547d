"""The ``embodia`` command line.

Bad input (a missing file, an unknown format, a malformed pose, a mesh with no floor, an
option value out of range) ends with exit code 2 and one ``error:`` line on stderr, never a
traceback. Sizes are bounded by :mod:`embodia.core.limits`.

:mod:`embodia.cli.root` holds the command tree and what every command shares; each module
beside it adds the commands of one group.
"""

# isort: off
# Each module adds its commands as it is imported, so this order is the order --help lists them in.
from embodia.cli import sim, explore, dsr, stream, csmr, sxs, hallucination, early_exit  # noqa: F401
from embodia.cli import diffusion, rewards, vocal, scireas, models, train, lift, view, mcp  # noqa: F401

# isort: on
from embodia.cli.root import app, main, user_errors

__all__ = ["app", "main", "user_errors"]
