"""Running a model's ``solution()`` isolated, for the code probe (CodeOnly answers).

The barrier is the operating system. Each run is a fresh ``python -I -S`` process started by
bubblewrap (``bwrap``) with:

- its own network, IPC, UTS, cgroup and pid namespaces (no network at all; when the run ends
  its pid namespace goes, and every process the code may have left with it);
- a filesystem of its own: read-only binds of ``/usr`` and the interpreter's installation
  only (no ``/etc``, ``/home``, ``/root``, ``/proc``, no project or run folders), a minimal
  ``/dev``, and a private, size-capped tmpfs as its working directory;
- an unprivileged uid/gid (65534) with no capabilities and ``no_new_privs``; when embodia runs
  as root, ``setpriv`` drops to that uid inside the namespaces, otherwise a user namespace
  maps it;
- ``--die-with-parent`` and a new session; the parent kills the whole process group when
  the run ends, times out or fails.

Inside, ``sandbox_child.py`` sets rlimits (CPU, address space, file size, open files, no new
processes), installs a seccomp filter that kills the process on system calls the probe never
needs, and keeps the import allowlist and audit hook as a second layer that names what was
tried. See docs/security.md for what this guarantees and what it does not.

Where bubblewrap is missing or cannot create namespaces, :func:`run_solution` raises
:class:`SandboxUnavailable` (the code suite refuses to run); ``isolated=False`` (the CLI's
``--unsafe-no-sandbox``) runs the child directly with only the in-process layers.

Only the code goes in (on stdin); the instance's truth never leaves this process. Whatever the
code does is a :class:`SandboxResult` with ``ok=False`` and the reason, never an exception.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)

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


class SandboxUnavailable(EmbodiaError):
    """The operating-system sandbox cannot run here (bubblewrap missing or not permitted)."""


SANDBOX_UID = 65534
"""The unprivileged uid/gid the code runs as (``nobody`` on Debian)."""
_WORKDIR = "/sandbox/work"
_CHILD_IN_SANDBOX = "/sandbox/child.py"
_SIGNAL_EXIT = 128  # bubblewrap reports a child killed by signal N as exit status 128 + N


def _interpreter() -> tuple[str, str]:
    """The real interpreter binary (not a venv's link to it) and the installation it reads."""
    executable = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return executable, os.path.realpath(sys.base_prefix)


def _root_links() -> list[str]:
    """bwrap arguments that recreate ``/bin``, ``/lib``... as on the host: links into
    ``/usr`` on merged-usr systems, read-only binds elsewhere."""
    args: list[str] = []
    for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def _limit_args(limits: Limits | None) -> list[str]:
    if limits is None:
        return []
    return [str(v) for v in (limits.cpu_s, limits.memory_mb, limits.file_kb, limits.open_files)]


def _tmpfs_bytes(limits: Limits | None) -> int:
    """The private tmpfs is memory: a few files of the file-size limit, at least 1 MiB."""
    file_kb = (limits or DEFAULT_LIMITS).file_kb
    return max(file_kb << 12, 1 << 20)


def bwrap_command(limits: Limits | None, child: Path = CHILD) -> list[str]:
    """The command line that runs ``child`` isolated (see the module docstring), passing it
    ``limits`` as arguments (none when ``limits`` is None: a probe script)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "the code probe runs model-written code only inside bubblewrap, and `bwrap` is not "
            "installed (Debian: apt-get install bubblewrap; `make system-libs` does it), "
            "or pass --unsafe-no-sandbox"
        )
    executable, prefix = _interpreter()
    command = [
        bwrap,
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONHASHSEED", "0", "--setenv", "HOME", _WORKDIR,
        "--ro-bind", "/usr", "/usr", *_root_links(),
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--dev", "/dev",
        "--perms", "1777", "--size", str(_tmpfs_bytes(limits)), "--tmpfs", _WORKDIR,
        "--perms", "0755", "--dir", os.path.dirname(_CHILD_IN_SANDBOX),
        "--ro-bind", str(child), _CHILD_IN_SANDBOX,
        "--chdir", _WORKDIR,
    ]  # fmt: skip
    for path in {prefix, os.path.dirname(executable)}:
        if not (path == "/usr" or path.startswith("/usr/")):
            command += ["--ro-bind", path, path]
    child_args = [executable, "-I", "-S", _CHILD_IN_SANDBOX] + _limit_args(limits)
    if os.geteuid() == 0:
        # Root: no user namespace (its uid 0 would still own root's files); setpriv drops to
        # a real unprivileged uid inside the other namespaces, with every capability gone.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable(
                "running as root, the code probe needs `setpriv` (util-linux) to drop to an "
                "unprivileged uid inside bubblewrap, and it is not installed, "
                "or pass --unsafe-no-sandbox"
            )
        command += ["--ro-bind", setpriv, setpriv, "--", setpriv]
        command += [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
        command += ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    else:
        command += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        command += ["--cap-drop", "ALL", "--"]
    return command + child_args


@functools.cache
def isolation_problem() -> str | None:
    """Why the operating-system sandbox cannot run here (None when it can). Tried once per
    process: it runs a child that must come back as the unprivileged uid, without network."""
    probe = (
        "import os, socket\n"
        "try:\n    socket.socket().connect(('127.0.0.1', 9))\n    net = 'reached'\n"
        "except OSError as e:\n    net = e.errno\n"
        "print(os.getuid(), os.getgid(), net, os.path.exists('/etc/passwd'))"
    )
    with tempfile.TemporaryDirectory(prefix="embodia-sandbox-probe-") as folder:
        script = Path(folder) / "probe.py"
        script.write_text(probe)
        try:
            command = bwrap_command(None, child=script)
        except SandboxUnavailable as error:
            return str(error)
        try:
            done = subprocess.run(command, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bubblewrap could not start a sandbox ({error})"
    if done.returncode != 0:
        detail = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap could not start a sandbox: {detail}"
    expected = f"{SANDBOX_UID} {SANDBOX_UID} "
    seen = done.stdout.decode("utf-8", "replace").strip()
    if not seen.startswith(expected) or "reached" in seen or seen.endswith("True"):
        return f"the sandbox did not isolate as it must (uid, gid, network, /etc: {seen!r})"
    return None


def require_isolation() -> None:
    """Raise :class:`SandboxUnavailable` unless model-written code can run isolated here."""
    problem = isolation_problem()
    if problem is not None:
        raise SandboxUnavailable(
            problem if "--unsafe-no-sandbox" in problem else f"{problem}; or pass --unsafe-no-sandbox"
        )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _exit_reason(returncode: int, limits: Limits, isolated: bool) -> str:
    sig = -returncode if returncode < 0 else 0
    if isolated and returncode > _SIGNAL_EXIT:
        sig = returncode - _SIGNAL_EXIT
    if sig == signal.SIGSYS:
        return "sandbox violation: a forbidden system call (the seccomp filter killed the process)"
    if sig in (signal.SIGXCPU, signal.SIGKILL):
        return f"CPU time limit ({limits.cpu_s} s) exceeded"
    if sig:
        return f"killed by signal {signal.Signals(sig).name}"
    return f"the interpreter exited with status {returncode}"


def _read_lines(out: bytes) -> tuple[list[str], dict[str, Any] | None]:
    """The violations the child reported as they happened, and its last result line."""
    violations: list[str] = []
    result: dict[str, Any] | None = None
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "violation" in record:
            violations.append(str(record["violation"]))
        elif "seccomp" in record:
            logger.warning("the code probe ran without its seccomp filter: %s", record["seccomp"])
        elif "ok" in record:
            result = record
    return violations, result


def run_solution(code: str, limits: Limits = DEFAULT_LIMITS, *, isolated: bool = True) -> SandboxResult:
    """Run ``code`` (which must define ``solution()``) and return what ``solution()`` returned.

    ``isolated=False`` skips the operating-system sandbox (namespaces, filesystem view,
    unprivileged uid); only the child's own rlimits, seccomp filter and audit hook remain.
    Raises :class:`SandboxUnavailable` when isolation is asked for and cannot be had.
    """
    if isolated:
        require_isolation()
        command = bwrap_command(limits)
    else:
        command = [sys.executable, "-I", "-S", str(CHILD), *_limit_args(limits)]
    # Isolated, the working directory is the sandbox's own tmpfs; bare, a fresh host folder.
    workspace = (
        contextlib.nullcontext(None) if isolated else tempfile.TemporaryDirectory(prefix="embodia-sandbox-")
    )
    with workspace as cwd:
        start = time.perf_counter()
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"},
            start_new_session=True,
            close_fds=True,
        )
        try:
            out, _ = process.communicate(code.encode("utf-8", "replace"), timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            out = b""
            timed_out = True
        else:
            timed_out = False
        finally:
            if process.poll() is None:
                _kill_group(process)
        # Anything the code left running in its session goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        wall = time.perf_counter() - start
    violations, result = _read_lines(out)
    if violations:
        return SandboxResult(
            False, reason=f"sandbox violation: {violations[0]}", violations=tuple(violations), wall_s=wall
        )
    if timed_out:
        return SandboxResult(False, reason=f"wall-clock limit ({limits.wall_s:g} s) exceeded", wall_s=wall)
    if result is None:
        return SandboxResult(False, reason=_exit_reason(process.returncode, limits, isolated), wall_s=wall)
    if not result.get("ok"):
        return SandboxResult(False, reason=str(result.get("error", "solution() failed")), wall_s=wall)
    return SandboxResult(True, value=result.get("value"), wall_s=wall)
