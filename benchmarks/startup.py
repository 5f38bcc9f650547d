"""Start-up cost: how long ``import embodia`` and ``embodia --help`` take in a fresh process.

    python benchmarks/startup.py [--quick] [--repeats N]

Every measure runs in a new interpreter (the one running this script, so the venv's and
``PYTHONPATH``'s embodia) and keeps the best of the repeats, because on a shared machine the
slow runs measure the neighbours, not the code:

- ``python_ms``: the bare interpreter, ``python -c pass`` (wall time of the process);
- ``import_embodia_ms``: ``import embodia`` timed inside the process with ``time.perf_counter``
  (no interpreter start-up), and ``import_embodia_importtime_ms``: the same import's cumulative
  time as ``python -X importtime`` reports it;
- ``import_gymnasium_ms``: ``import gymnasium`` alone, the same way (what registering the gym
  ids would cost if ``import embodia`` had to import gymnasium);
- ``embodia_help_s``: wall time of the whole ``embodia --help`` process, run as the console
  script runs it (``from embodia.cli import main; sys.exit(main())``);
- ``help_heaviest_imports_ms``: what ``embodia --help`` imports (the modules it imports
  directly, and theirs), by cumulative ``-X importtime`` in milliseconds (each module's best over
  the repeats; nested: a module's time includes what it imports first), heaviest first: what to
  make lazy next. ``site`` is the interpreter's own start-up (with an editable install, its
  finder); ``typer.rich_utils`` is imported by typer when it formats the help.

Targets (issue #19): ``import_embodia_ms`` under 60 and ``embodia_help_s`` within 0.2 on a
2-core machine. Last line: one JSON object with the keys above and ``repeats``.
``--quick`` runs 3 repeats (about 10 s); the default is 10.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

IMPORT_TIMER = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
HELP = "import sys; from embodia.cli import main; sys.argv[0] = 'embodia'; sys.exit(main())"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True)


def process_seconds(args: list[str], repeats: int) -> float:
    """The best wall time of ``python ARGS`` over the repeats."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        _run(args)
        best = min(best, time.perf_counter() - start)
    return best


def import_ms(module: str, repeats: int) -> float:
    """The best in-process time of ``import MODULE`` over the repeats, in milliseconds."""
    return 1000 * min(float(_run(["-c", IMPORT_TIMER.format(module=module)]).stdout) for _ in range(repeats))


def importtime_table(args: list[str]) -> list[tuple[int, str, float]]:
    """``python -X importtime ARGS`` as (nesting depth, module, cumulative ms), in report order."""
    rows = []
    for line in _run(["-X", "importtime", *args]).stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2  # one space, then two per level
        rows.append((depth, name.strip(), int(cumulative) / 1000))
    return rows


def importtime_ms(module: str, repeats: int) -> float:
    """The best cumulative ``-X importtime`` of ``import MODULE``, in milliseconds."""
    runs = (importtime_table(["-c", f"import {module}"]) for _ in range(repeats))
    return min(next(ms for depth, name, ms in rows if depth == 0 and name == module) for rows in runs)


def heaviest_imports(args: list[str], repeats: int, top: int = 12) -> dict[str, float]:
    """What ``python ARGS`` imports at the first two levels (the modules the command imports, and
    theirs), by cumulative import time in ms (each module's best over the repeats), heaviest first."""
    best: dict[str, float] = {}
    for _ in range(repeats):
        for depth, name, ms in importtime_table(args):
            if depth <= 1:
                best[name] = min(ms, best.get(name, ms))
    ranked = sorted(best.items(), key=lambda item: -item[1])[:top]
    return {name: round(ms, 1) for name, ms in ranked}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 10 (a few seconds)")
    parser.add_argument("--repeats", type=int, help="repeats per measure (best kept)")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 10)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    help_args = ["-c", HELP, "--help"]
    result = {
        "python_ms": round(1000 * process_seconds(["-c", "pass"], repeats), 1),
        "import_embodia_ms": round(import_ms("embodia", repeats), 1),
        "import_embodia_importtime_ms": round(importtime_ms("embodia", repeats), 1),
        "import_gymnasium_ms": round(import_ms("gymnasium", repeats), 1),
        "embodia_help_s": round(process_seconds(help_args, repeats), 3),
        "help_heaviest_imports_ms": heaviest_imports(help_args, repeats),
        "repeats": repeats,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
