"""What the benchmark scripts share: the command line (``--quick`` and numeric options) and
access to the test suite's helper modules.

The scripts run as ``python benchmarks/NAME.py``, which puts this folder on ``sys.path``:
they import it as ``from _common import benchmark_args``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1] / "tests"


def benchmark_args(
    doc: str, quick: str, quick_values: dict[str, float] | None = None, **defaults: float | str
) -> argparse.Namespace:
    """Parses ``sys.argv``: a ``--NAME`` option for each of ``defaults`` (typed like its default),
    then ``--quick``, whose help is ``quick``; with ``--quick``, ``quick_values`` replace the
    options' values. The help's description is the first line of ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    parser.add_argument("--quick", action="store_true", help=quick)
    args = parser.parse_args()
    if args.quick:
        vars(args).update(quick_values or {})
    return args


def import_from_tests(module: str) -> ModuleType:
    """The test suite's helper module ``tests/MODULE.py``: one home for what a benchmark measures
    and the tests check (the list of reply parsers, for one)."""
    if str(TESTS) not in sys.path:
        sys.path.append(str(TESTS))
    return importlib.import_module(module)


def log(message: str) -> None:
    """A progress line of a long benchmark, on stdout as it happens (its last line is the JSON)."""
    print(message, flush=True)
