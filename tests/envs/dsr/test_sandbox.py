"""The code probe's sandbox against the attacks a model's code can make: each is contained and scored 0.

The operating-system layer (bubblewrap) is the barrier, so these tests need it: they skip with
the reason where it cannot run, and fail instead when EMBODIA_REQUIRE_SANDBOX=1 (CI sets it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from sandbox_attacks import ESCAPE, LIMITS

from embodia.envs.dsr.sandbox import (
    SANDBOX_UID,
    Limits,
    bwrap_command,
    extract_code,
    isolation_problem,
    run_solution,
)


def failure_reason(code: str, limits: Limits = LIMITS) -> str:
    """Run ``code``, which must fail: the reason it gives."""
    result = run_solution(code, limits)
    assert not result.ok
    return result.reason


@pytest.fixture(autouse=True)
def _needs_isolation() -> None:
    problem = isolation_problem()
    if problem is not None:
        if os.environ.get("EMBODIA_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"EMBODIA_REQUIRE_SANDBOX=1 but the sandbox cannot run: {problem}")
        pytest.skip(f"the operating-system sandbox cannot run here: {problem}")


def test_a_correct_solution_returns_its_value() -> None:
    code = "import heapq\nfrom collections import deque\n"
    code += "def solution():\n    h = [5, 3, 4]\n    heapq.heapify(h)\n    return h"
    result = run_solution(code, LIMITS)
    assert result.ok and result.value == [3, 5, 4]


def test_prints_do_not_disturb_the_result_and_tuples_become_lists() -> None:
    result = run_solution("def solution():\n    print('[1, 2]')\n    return {'a': (1, 2), 'b': {3}}", LIMITS)
    assert result.ok and result.value == {"a": [1, 2], "b": [3]}


def test_infinite_loop_hits_the_cpu_limit() -> None:
    start = time.perf_counter()
    assert "CPU time limit" in failure_reason("def solution():\n    while True:\n        pass")
    assert time.perf_counter() - start < LIMITS.wall_s


def test_blocking_without_cpu_hits_the_wall_clock_limit() -> None:
    blocked = ESCAPE + "def solution():\n    r, w = _os()['pipe']()\n    _os()['read'](r, 1)\n    return 1"
    start = time.perf_counter()
    assert "wall-clock limit" in failure_reason(blocked, Limits(cpu_s=10, wall_s=1.0))
    assert time.perf_counter() - start < 4


def test_huge_allocation_is_contained() -> None:
    code = "def solution():\n    block = bytearray(8 * 1024 ** 3)\n    return len(block)"
    assert "memory limit" in failure_reason(code)


@pytest.mark.parametrize(
    "module", ["os", "subprocess", "socket", "sys", "shutil", "ctypes", "importlib", "pathlib"]
)
def test_forbidden_imports_score_zero(module: str) -> None:
    assert f"import of '{module}'" in failure_reason(f"import {module}\ndef solution():\n    return 1")


def test_a_caught_forbidden_import_still_fails() -> None:
    code = (
        "def solution():\n    try:\n        import os\n    except ImportError:\n        pass\n    return [1]"
    )
    result = run_solution(code, LIMITS)
    assert not result.ok and result.violations == ("import of 'os'",)


def test_fork_bomb_is_refused() -> None:
    code = ESCAPE + "def solution():\n    while True:\n        _os()['fork']()"
    assert "os.fork" in failure_reason(code)


@pytest.mark.parametrize(
    ("call", "refusal"),
    [
        # processes and sockets
        ("_os()['system']('echo hacked')", "os.system"),
        ("_os()['posix_spawn']('/bin/ls', ['ls'], {})", "os.posix_spawn"),
        ("_os()['execv']('/bin/ls', ['ls'])", "os.exec"),
        ("_os()['__builtins__']['__import__']('socket')", "import of 'socket'"),
        # special files, links and times
        ("_os()['mkfifo']('fifo')", "forbidden system call"),
        ("_os()['mknod']('node')", "forbidden system call"),
        ("_os()['utime']('.', (0, 0))", "os.utime"),
        ("_os()['link']('a', 'b')", "os.link"),
    ],
)
def test_calls_through_an_escape_are_refused(call: str, refusal: str) -> None:
    assert refusal in failure_reason(ESCAPE + f"def solution():\n    return {call}")


def test_file_writes_outside_its_directory_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    for opener in (
        f"_os()['__builtins__']['open']({str(target)!r}, 'w').write('x')",
        f"_os()['open']({str(target)!r}, _os()['O_WRONLY'] | _os()['O_CREAT'])",
        "_os()['__builtins__']['open']('../escaped.txt', 'w').write('x')",
    ):
        code = ESCAPE + f"def solution():\n    return {opener}"
        assert "outside the working directory" in failure_reason(code)
    assert not target.exists()


def test_reading_outside_its_directory_is_refused() -> None:
    code = ESCAPE + "def solution():\n    return _os()['__builtins__']['open']('/etc/passwd').read()"
    assert "outside the working directory" in failure_reason(code)


def test_files_inside_its_own_directory_work_but_are_size_limited() -> None:
    inside = ESCAPE + (
        "def solution():\n    o = _os()['__builtins__']['open']\n    o('notes.txt', 'w').write('ok')\n"
        "    return o('notes.txt').read()"
    )
    assert run_solution(inside, LIMITS).value == "ok"
    huge = (
        ESCAPE
        + "def solution():\n    _os()['__builtins__']['open']('big.bin', 'wb').write(b'x' * (64 << 20))"
    )
    assert "File too large" in failure_reason(huge)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("x = 1", "no solution() function"),
        ("def solution(:\n", "SyntaxError"),
        ("def solution():\n    def f(n):\n        return f(n + 1)\n    return f(0)", "recursion too deep"),
        ("def solution():\n    raise SystemExit(3)", "SystemExit"),
        ("def solution():\n    return object()", "not JSON-serialisable"),
    ],
)
def test_broken_code_fails_with_the_reason(code: str, reason: str) -> None:
    assert reason in failure_reason(code)


def test_extract_code_from_replies() -> None:
    assert (
        extract_code("Here:\n```python\ndef solution():\n    return 1\n```\nDone.")
        == "def solution():\n    return 1\n"
    )
    two = "```python\nx = 1\n```\n```py\ndef solution():\n    return 2\n```"
    assert extract_code(two) == "def solution():\n    return 2\n"
    assert extract_code("def solution():\n    return 3") == "def solution():\n    return 3"
    assert extract_code("The answer is [1, 2].") is None


# ---------------------------------------------------------------------------------------------
# The escapes an independent probe found in the audit-hook-only sandbox: each is contained now.

# Takes the in-process layer apart as far as Python lets it: the import allowlist's closure
# cells are emptied or widened, then modules are imported through it.
TAMPER = (
    ESCAPE
    + """
def _tamper():
    guarded = __import__  # the code's own builtins: the sandbox's guarded import
    for cell in guarded.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, frozenset):
            cell.cell_contents = frozenset(value | {'os', 'socket', 'ctypes', 'subprocess', 'sys'})
        elif isinstance(value, list):
            value.clear()
    return __import__
"""
)


@pytest.mark.parametrize(
    ("attack", "stopped"),
    [
        ("return _os()['__builtins__']['open']('/etc/passwd').read()", "outside the working directory"),
        ("return _os()['open']('/etc/passwd', 0)", "outside the working directory"),
        ("return _tamper()('socket').create_connection(('127.0.0.1', 22))", "import of 'socket'"),
        ("return _tamper()('ctypes').CDLL(None).getpid()", "import of 'ctypes'"),
        ("return _tamper()('subprocess').run(['id'], capture_output=True).stdout", "import of 'subprocess'"),
        ("return _tamper() and _os()['system']('id > /tmp/id.txt')", "os.system"),
        ("return _tamper() and _os()['__builtins__']['open']('/etc/passwd').read()", "outside the working"),
    ],
)
def test_escapes_are_contained_and_score_zero_with_the_reason(attack: str, stopped: str) -> None:
    reason = failure_reason(TAMPER + f"def solution():\n    {attack}")
    assert stopped in reason and reason.startswith("sandbox violation")


def test_a_rename_out_of_the_working_directory_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    code = ESCAPE + (
        "def solution():\n    _os()['__builtins__']['open']('inside.txt', 'w').write('x')\n"
        f"    _os()['rename']('inside.txt', {str(target)!r})\n    return 1"
    )
    reason = failure_reason(code)
    assert "os.rename" in reason and "outside" in reason
    assert not target.exists()


def test_nothing_outside_is_even_visible(tmp_path: Path) -> None:
    """stat and readlink leaked what exists outside; the sandbox's filesystem has none of it."""
    (tmp_path / "secret.txt").write_text("x")
    probes = ["/etc/shadow", "/etc/passwd", "/root/.bashrc", "/home", "/proc/self/exe", str(Path.cwd())]
    probes.append(str(tmp_path / "secret.txt"))
    code = ESCAPE + f"def solution():\n    return [_os()['path'].lexists(p) for p in {probes!r}]"
    result = run_solution(code, LIMITS)
    assert result.ok and result.value == [False] * len(probes)


def test_the_seccomp_filter_holds_when_python_is_bypassed() -> None:
    """A system call made without any audit event (mkfifo) is still stopped, by the kernel."""
    assert "seccomp" in failure_reason(ESCAPE + "def solution():\n    _os()['mkfifo']('f')\n    return 1")


def _run_plain_script(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run as a plain script under the same bubblewrap command as the probe, with no
    in-process layer at all: what holds here is what the operating system guarantees."""
    script = tmp_path / "attack.py"
    script.write_text(code)
    return subprocess.run(
        bwrap_command(None, child=script), capture_output=True, text=True, timeout=30, check=False
    )


def test_the_operating_system_layer_alone_contains_a_fully_subverted_process(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    outside = tmp_path / "pwned.txt"
    code = f"""
import os, socket
print("uid", os.getuid(), os.getgid())
for path in ("/etc/passwd", "/etc/shadow", {str(outside)!r}, "/pwned", "/usr/pwned"):
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as error:
        print("refused", path, error.errno)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("network reached")
except OSError:
    print("no network")
print("etc", os.path.exists("/etc/passwd"), os.path.exists({str(tmp_path)!r}))
"""
    try:
        done = _run_plain_script(tmp_path, code)
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    assert f"uid {SANDBOX_UID} {SANDBOX_UID}" in done.stdout
    assert "wrote" not in done.stdout and "network reached" not in done.stdout
    assert "no network" in done.stdout and "etc False False" in done.stdout
    assert not outside.exists()


def _processes_named(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_new_session_child_does_not_outlive_the_sandbox(tmp_path: Path) -> None:
    marker = f"embodia-sandbox-survivor-{os.getpid()}"
    code = f"""
import subprocess
subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(60)", {marker!r}],
                 start_new_session=True)
print("spawned")
"""
    done = _run_plain_script(tmp_path, code)
    assert "spawned" in done.stdout, done.stderr
    deadline = time.monotonic() + 5
    while _processes_named(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_named(marker) == []


def test_through_the_probe_processes_are_killed_by_the_kernel_filter() -> None:
    """Even the audit hook aside, forking dies in seccomp (RLIMIT_NPROC is 0 behind it)."""
    code = ESCAPE + "def solution():\n    return _os()['posix_spawn']('/bin/true', ['true'], {})"
    assert "posix_spawn" in failure_reason(code)
