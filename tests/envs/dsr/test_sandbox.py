"""The code probe's sandbox against the attacks a model's code can make: each is contained and scored 0."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from embodia.envs.dsr.sandbox import Limits, extract_code, run_solution

LIMITS = Limits(cpu_s=1, wall_s=4.0, memory_mb=256)
# Reaches the os module without importing it, the way sandbox escapes usually start.
ESCAPE = """
def _os():
    for cls in ().__class__.__mro__[1].__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__
"""


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
    result = run_solution("def solution():\n    while True:\n        pass", LIMITS)
    assert not result.ok and "CPU time limit" in result.reason
    assert time.perf_counter() - start < LIMITS.wall_s


def test_blocking_without_cpu_hits_the_wall_clock_limit() -> None:
    blocked = ESCAPE + "def solution():\n    r, w = _os()['pipe']()\n    _os()['read'](r, 1)\n    return 1"
    start = time.perf_counter()
    result = run_solution(blocked, Limits(cpu_s=10, wall_s=1.0))
    assert not result.ok and "wall-clock limit" in result.reason
    assert time.perf_counter() - start < 4


def test_huge_allocation_is_contained() -> None:
    result = run_solution(
        "def solution():\n    block = bytearray(8 * 1024 ** 3)\n    return len(block)", LIMITS
    )
    assert not result.ok and "memory limit" in result.reason


@pytest.mark.parametrize(
    "module", ["os", "subprocess", "socket", "sys", "shutil", "ctypes", "importlib", "pathlib"]
)
def test_forbidden_imports_score_zero(module: str) -> None:
    result = run_solution(f"import {module}\ndef solution():\n    return 1", LIMITS)
    assert not result.ok and f"import of '{module}'" in result.reason


def test_a_caught_forbidden_import_still_fails() -> None:
    code = (
        "def solution():\n    try:\n        import os\n    except ImportError:\n        pass\n    return [1]"
    )
    result = run_solution(code, LIMITS)
    assert not result.ok and result.violations == ("import of 'os'",)


def test_fork_bomb_is_refused() -> None:
    code = ESCAPE + "def solution():\n    while True:\n        _os()['fork']()"
    result = run_solution(code, LIMITS)
    assert not result.ok and "os.fork" in result.reason


@pytest.mark.parametrize(
    ("call", "event"),
    [
        ("_os()['system']('echo hacked')", "os.system"),
        ("_os()['posix_spawn']('/bin/ls', ['ls'], {})", "os.posix_spawn"),
        ("_os()['execv']('/bin/ls', ['ls'])", "os.exec"),
        ("_os()['__builtins__']['__import__']('socket')", "import of 'socket'"),
    ],
)
def test_processes_and_sockets_through_an_escape_are_refused(call: str, event: str) -> None:
    result = run_solution(ESCAPE + f"def solution():\n    return {call}", LIMITS)
    assert not result.ok and event in result.reason


def test_file_writes_outside_its_directory_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    for opener in (
        f"_os()['__builtins__']['open']({str(target)!r}, 'w').write('x')",
        f"_os()['open']({str(target)!r}, _os()['O_WRONLY'] | _os()['O_CREAT'])",
        "_os()['__builtins__']['open']('../escaped.txt', 'w').write('x')",
    ):
        result = run_solution(ESCAPE + f"def solution():\n    return {opener}", LIMITS)
        assert not result.ok and "outside the working directory" in result.reason
    assert not target.exists()


def test_reading_outside_its_directory_is_refused() -> None:
    result = run_solution(
        ESCAPE + "def solution():\n    return _os()['__builtins__']['open']('/etc/passwd').read()", LIMITS
    )
    assert not result.ok and "outside the working directory" in result.reason


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
    result = run_solution(huge, LIMITS)
    assert not result.ok and "File too large" in result.reason


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
    result = run_solution(code, LIMITS)
    assert not result.ok and reason in result.reason


def test_extract_code_from_replies() -> None:
    assert (
        extract_code("Here:\n```python\ndef solution():\n    return 1\n```\nDone.")
        == "def solution():\n    return 1\n"
    )
    two = "```python\nx = 1\n```\n```py\ndef solution():\n    return 2\n```"
    assert extract_code(two) == "def solution():\n    return 2\n"
    assert extract_code("def solution():\n    return 3") == "def solution():\n    return 3"
    assert extract_code("The answer is [1, 2].") is None
