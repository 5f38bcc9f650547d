"""The code probe where the operating-system sandbox cannot run: it refuses, unless the user
explicitly asks for the unsafe mode, which keeps the in-process layers."""

from __future__ import annotations

import pytest
from sandbox_attacks import ESCAPE, LIMITS

from embodia.envs.dsr import sandbox
from embodia.envs.dsr.sandbox import SandboxUnavailable, isolation_problem, run_solution


def test_without_bubblewrap_the_probe_refuses_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    isolation_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="bubblewrap.*--unsafe-no-sandbox"):
            run_solution("def solution():\n    return 1", LIMITS)
    finally:
        isolation_problem.cache_clear()


def test_the_explicit_unsafe_mode_still_has_the_in_process_layers() -> None:
    assert run_solution("def solution():\n    return [1]", LIMITS, isolated=False).value == [1]
    code = ESCAPE + "def solution():\n    return _os()['system']('id')"
    escaped = run_solution(code, LIMITS, isolated=False)
    assert not escaped.ok and "os.system" in escaped.reason
    # the child's seccomp filter needs no privileges, so it holds here too
    fifo = run_solution(ESCAPE + "def solution():\n    _os()['mkfifo']('f')", LIMITS, isolated=False)
    assert not fifo.ok and "seccomp" in fifo.reason
