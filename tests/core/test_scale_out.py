"""core.scale_out: the backend settings, the local pool's failure rules and clear errors for
Ray that is missing or cannot be reached."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from functools import partial
from typing import Any

import pytest

from embodia.core.scale_out import Backend, ScaleOutError, Unit, UnitFailed, WorkerPool, connect
from embodia.errors import EmbodiaError


def _double(log: list[int], payload: int, shared: Any) -> int:
    log.append(payload)
    if payload < 0:
        raise UnitFailed(f"negative input {payload}")
    if payload == 99:
        raise EmbodiaError("the server went away")
    return payload * 2 + (shared or 0)


def _pool(log: list[int], **backend: Any) -> WorkerPool[int, int]:
    made: list[int] = []

    def factory() -> Any:
        made.append(1)
        assert len(made) == 1, "a worker is made once"
        return partial(_double, log)

    return WorkerPool(factory, Backend(**backend))


@pytest.mark.parametrize("concurrency", [1, 3])
def test_local_units_report_results_and_failures_and_go_on(concurrency: int) -> None:
    log: list[int] = []
    results: dict[str, int] = {}
    failures: dict[str, str] = {}
    units = [Unit(f"u{i}", i) for i in (1, -2, 3, 4)]
    with _pool(log, concurrency=concurrency) as pool:
        pool.run(units, results.__setitem__, failures.__setitem__, shared=10)
        pool.run([Unit("again", 5)], results.__setitem__)  # the same worker, kept
    assert results == {"u1": 12, "u3": 16, "u4": 18, "again": 10}
    assert failures == {"u-2": "negative input -2"}
    assert sorted(log) == [-2, 1, 3, 4, 5]


def test_other_errors_end_the_run_and_a_failure_without_handler_too() -> None:
    log: list[int] = []
    results: dict[str, int] = {}
    with _pool(log) as pool:
        with pytest.raises(EmbodiaError, match="the server went away"):
            pool.run([Unit("a", 1), Unit("b", 99), Unit("c", 3)], results.__setitem__)
        assert results == {"a": 2} and log == [1, 99]  # c never asked
        with pytest.raises(UnitFailed, match="x: negative input -1"):
            pool.run([Unit("x", -1)], results.__setitem__)
    with pytest.raises(ValueError, match="unique"):
        WorkerPool(lambda: _double).run([Unit("a", 1), Unit("a", 2)], results.__setitem__)


def test_concurrent_local_units_run_at_once() -> None:
    inside, most = [0], [0]
    lock = threading.Lock()
    gate = threading.Barrier(3, timeout=10)

    def work(payload: int, _: Any) -> int:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        gate.wait()  # all three must be in flight together, or this times out
        with lock:
            inside[0] -= 1
        return payload

    done: list[str] = []
    WorkerPool(lambda: work, Backend(concurrency=3)).run(
        [Unit(str(i), i) for i in range(3)], lambda key, _: done.append(key)
    )
    assert most[0] == 3 and sorted(done) == ["0", "1", "2"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"kind": "spark"}, "unknown --backend 'spark': expected local or ray"),
        ({"num_workers": 0, "kind": "ray"}, "--num-workers must be at least 1, got 0"),
        ({"address": "auto"}, "--address is for --backend ray"),
        ({"num_workers": 4}, "--num-workers is for --backend ray"),
        ({"kind": "ray", "address": "http://x:1"}, "invalid --address 'http://x:1'"),
        ({"kind": "ray", "address": "ray://host"}, "invalid --address 'ray://host'"),
        ({"kind": "ray", "num_gpus": -1.0}, "cannot be negative"),
    ],
)
def test_bad_backend_settings_are_named(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ScaleOutError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Backend(**settings)


def test_an_unreachable_address_is_one_clear_error() -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(
        ScaleOutError, match=f"cannot reach a Ray cluster at --address ray://127.0.0.1:{port}"
    ):
        connect(Backend(kind="ray", address=f"ray://127.0.0.1:{port}"))


CLI_WITHOUT_RAY = """
import sys
sys.modules["ray"] = None  # as if the [ray] extra were not installed: `import ray` fails
from embodia.cli import main
sys.argv = ["embodia", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("command", ["explore", "dsr"])
def test_cli_backend_ray_without_ray_or_unreachable_is_one_error_line(command: str, tmp_path: Any) -> None:
    """Bad input: --backend ray without the extra installed, or an --address nothing answers at."""
    out = str(tmp_path / "run")
    args = {
        "explore": ["eval", "explore", "--agent", "random", "--scenes", "procedural:seeds=0-1", "--out", out],
        "dsr": ["eval", "dsr", "--policy", "scripted:none.jsonl", "--limit", "2", "--out", out],
    }[command]
    if command == "dsr":
        (tmp_path / "none.jsonl").write_text('"{}"\n')
        args[args.index("scripted:none.jsonl")] = f"scripted:{tmp_path / 'none.jsonl'}?loop"
    missing = subprocess.run(
        [sys.executable, "-c", CLI_WITHOUT_RAY, *args, "--backend", "ray"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2, missing.stderr
    lines = missing.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'embodia[ray]'" in lines[0] and lines[0].startswith("error:")
    unreachable = subprocess.run(
        [sys.executable, "-m", "embodia.cli", *args, "--backend", "ray", "--address", "ray://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unreachable.returncode == 2, unreachable.stderr
    lines = unreachable.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot reach a Ray cluster at --address ray://127.0.0.1:9"
    )
    assert not (tmp_path / "run").exists()  # nothing was begun


# ---------------------------------------------------------------------- on Ray

KILLER = 5
"""The unit that kills whichever worker runs it (a deterministic crash, e.g. a segfault)."""


def _timed_unit(payload: int, seconds: float) -> tuple[int, int, float, float]:
    import os
    import time

    if payload == KILLER:
        os._exit(1)  # the worker process dies mid-unit, as on SIGKILL
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the machine
    time.sleep(seconds)
    return payload, os.getpid(), start, time.monotonic()


def _timed_worker() -> Any:
    return _timed_unit


def _run_on_ray(
    units: list[int], queued: int, *, unit_s: float = 0.05, driver_s: float = 0.0
) -> tuple[dict[str, Any], dict[str, str], int]:
    import time

    results: dict[str, Any] = {}
    failures: dict[str, str] = {}

    def landed(key: str, result: Any) -> None:
        assert key not in results, f"{key} reported twice"
        results[key] = result
        time.sleep(driver_s)  # the driver busy with the result (files written, a record made)

    with WorkerPool(_timed_worker, Backend("ray", num_workers=2, queued=queued)) as pool:
        units_ = [Unit(str(u), u) for u in units]
        pool.run(units_, landed, lambda key, message: failures.setdefault(key, message), shared=unit_s)
        return results, failures, pool.deaths


def _gaps(results: dict[str, Any]) -> list[float]:
    """Idle time of each worker between the end of one unit and the start of its next."""
    by_worker: dict[int, list[tuple[float, float]]] = {}
    for _, pid, start, end in results.values():
        by_worker.setdefault(pid, []).append((start, end))
    gaps = []
    for spans in by_worker.values():
        spans.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    return gaps


@pytest.mark.ray
@pytest.mark.parametrize("queued", [0, 1, 2])
def test_a_unit_that_kills_its_worker_fails_after_max_attempts_and_no_other_unit_is_lost(
    queued: int, ray_runtime: object
) -> None:
    results, failures, deaths = _run_on_ray(list(range(12)), queued)
    # the units queued behind the killer on its worker never ran there: they are sent again
    # without counting an attempt, so only the killer fails
    assert failures == {str(KILLER): "its worker died 3 times while running it"}
    assert sorted(results) == sorted(str(u) for u in range(12) if u != KILLER)
    # 3 deaths running the killer; at most one more, when a unit that finished just before the
    # killer started lost its reply with the process (charged once, it runs again and succeeds:
    # after a death units run alone, so that cannot repeat)
    assert 3 <= deaths <= 4


@pytest.mark.ray
def test_queued_units_keep_a_worker_busy_while_the_driver_handles_a_result(ray_runtime: object) -> None:
    units, unit_s, driver_s = [u for u in range(14) if u != KILLER], 0.4, 0.15
    queued, _, _ = _run_on_ray(units, 1, unit_s=unit_s, driver_s=driver_s)
    waiting, _, _ = _run_on_ray(units, 0, unit_s=unit_s, driver_s=driver_s)
    # without a queue a worker waits for the driver after every unit; with one, the next unit
    # is already on the worker (the last units go only to idle workers, so some gaps remain)
    assert min(_gaps(waiting)) >= driver_s
    assert sorted(_gaps(queued))[len(_gaps(queued)) // 2] < driver_s / 3
