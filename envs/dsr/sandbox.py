"""Running a model's ``solution()`` safely, for the code probe (CodeOnly answers).

Each run is a fresh ``python -I -S`` process (no site packages, no environment, no script
directory on the path, so embodia itself is out of reach) in a new empty temporary
directory, in its own session so the whole process group can be killed, with:

- ``RLIMIT_CPU`` (CPU seconds) and a wall-clock timeout (the group is killed when it expires);
- ``RLIMIT_AS`` (address space) so a huge allocation fails instead of swapping the machine;
- ``RLIMIT_FSIZE`` and ``RLIMIT_NOFILE`` so it cannot fill the disk or hoard descriptors;
- inside, the import allowlist and the audit hook of ``sandbox_child.py`` (no ``os``,
  ``subprocess`` or ``socket``; no processes, forks, sockets or files outside its directory).

Only the code goes in (on stdin); the instance's truth never leaves this process. Whatever
goes wrong is a :class:`SandboxResult` with ``ok=False`` and the reason, never an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("sandbox_child.py")
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.S | re.I)


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 2
    wall_s: float = 5.0
    memory_mb: int = 512
    file_kb: int = 1024
    open_files: int = 64


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    value: Any = None
    reason: str = ""
    violations: tuple[str, ...] = field(default_factory=tuple)
    wall_s: float = 0.0


def extract_code(reply: str) -> str | None:
    """The Python code of a reply: the fenced block that defines ``solution``, else the whole reply."""
    blocks = _FENCE.findall(reply)
    for block in reversed(blocks):
        if "def solution" in block:
            return str(block)
    if "def solution" in reply and not blocks:
        return reply
    return None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _exit_reason(returncode: int, limits: Limits) -> str:
    if returncode < 0:
        sig = -returncode
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return f"CPU time limit ({limits.cpu_s} s) exceeded"
        return f"killed by signal {signal.Signals(sig).name}"
    return f"the interpreter exited with status {returncode}"


def run_solution(code: str, limits: Limits = DEFAULT_LIMITS) -> SandboxResult:
    """Run ``code`` (which must define ``solution()``) and return what ``solution()`` returned."""
    with tempfile.TemporaryDirectory(prefix="embodia-sandbox-") as workdir:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(CHILD)]
            + [str(v) for v in (limits.cpu_s, limits.memory_mb, limits.file_kb, limits.open_files)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"},
            start_new_session=True,
            close_fds=True,
        )
        try:
            out, _ = process.communicate(code.encode("utf-8", "replace"), timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return SandboxResult(False, reason=f"wall-clock limit ({limits.wall_s:g} s) exceeded")
        finally:
            if process.poll() is None:
                _kill_group(process)
        # Anything the code left running in its session goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        wall = time.perf_counter() - start
    lines = out.decode("utf-8", "replace").strip().splitlines()
    if not lines:
        return SandboxResult(False, reason=_exit_reason(process.returncode, limits), wall_s=wall)
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError:
        return SandboxResult(False, reason="the sandbox returned no result line", wall_s=wall)
    violations = tuple(str(v) for v in result.get("violations", ()))
    if violations:
        return SandboxResult(
            False, reason=f"sandbox violation: {violations[0]}", violations=violations, wall_s=wall
        )
    if not result.get("ok"):
        return SandboxResult(False, reason=str(result.get("error", "solution() failed")), wall_s=wall)
    return SandboxResult(True, value=result.get("value"), wall_s=wall)
