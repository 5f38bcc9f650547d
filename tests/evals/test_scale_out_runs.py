"""eval explore and eval dsr on Ray: the local run's records exactly (apart from timings), every
unit once when a worker is SIGKILLed mid-run, and a driver killed mid-run resumed on either
backend. Ray here is a local runtime with 2 CPUs (the ray_runtime fixture)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from embodia.core.runs import read_run_records
from embodia.core.scale_out import Backend
from embodia.evals.dsr import ANSWERS_FILE, REPORT_FILE, DSRSettings, run_dsr
from embodia.evals.explore import EVAL_SCENES, evaluate_exploration, scene_set

pytestmark = pytest.mark.ray
RAY = Backend(kind="ray", num_workers=2)
TIMINGS = ("latency_s", "wall_s")


def _without_timings(record: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_timings(v) if isinstance(v, dict) else v for k, v in record.items() if k not in TIMINGS
    }


def _dsr_settings(model: Path, limit: int) -> DSRSettings:
    return DSRSettings(
        policy=f"hf:{model}",
        suite="main",
        lengths=("short",),
        limit=limit,
        mode="none",
        description="name",
        tokens=8,
    )


def _answers(out: Path) -> dict[str, dict[str, Any]]:
    records = read_run_records(out / ANSWERS_FILE)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "an instance was answered twice"
    return {r["id"]: _without_timings(r) for r in records}


@pytest.fixture(scope="module")
def local_dsr(tiny_chat_lm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: 200 instances answered greedily by the tiny model, in this process."""
    out = tmp_path_factory.mktemp("dsr-local")
    run_dsr(_dsr_settings(tiny_chat_lm_dir, 200), out)
    return out


def _ray_processes() -> list[int]:
    """Process ids of the Ray workers running embodia's units (Ray titles them by actor class)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if command.startswith(b"ray::_RayWorker"):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_eval_dsr_on_ray_answers_as_the_local_run(
    tiny_chat_lm_dir: Path, local_dsr: Path, tmp_path: Path, ray_runtime: object
) -> None:
    report = run_dsr(_dsr_settings(tiny_chat_lm_dir, 200), tmp_path, backend=RAY)
    expected = _answers(local_dsr)
    assert len(expected) == 200 and len({r["reply"] for r in expected.values()}) > 20  # replies differ
    assert _answers(tmp_path) == expected
    local_report = json.loads((local_dsr / REPORT_FILE).read_text())
    assert (
        report["overall"] == local_report["overall"]
        and report["by_operation"] == local_report["by_operation"]
    )


@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_no_instance_and_repeats_none(
    tiny_chat_lm_dir: Path, local_dsr: Path, tmp_path: Path, ray_runtime: object
) -> None:
    killed: list[int] = []

    def kill_one(result: dict[str, Any], done: int, total: int) -> None:
        if done == 20 and not killed:
            victim = _ray_processes()[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    settings = _dsr_settings(tiny_chat_lm_dir, 120)
    run_dsr(settings, tmp_path, backend=RAY, on_answer=kill_one)
    assert killed and killed[0] not in _ray_processes()
    expected = _answers(local_dsr)
    answers = _answers(tmp_path)  # each instance once (checked inside)
    assert len(answers) == 120 and answers == {key: expected[key] for key in answers}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "embodia.cli", *args]


def _dsr_command(model: Path, out: Path, *backend: str) -> list[str]:
    return _cli(
        "eval", "dsr", "--policy", f"hf:{model}", "--suite", "main", "--length", "short", "--limit", "200",
        "--mode", "none", "--description", "name", "--tokens", "8", "--out", str(out), *backend,
    )  # fmt: skip


def _kill_after(command: list[str], records: Path, lines: int, timeout: float = 240) -> None:
    """Start ``command`` and SIGKILL it once ``records`` holds ``lines`` lines."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if records.is_file() and records.read_bytes().count(b"\n") >= lines:
                break
            assert process.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        else:
            raise AssertionError(f"{records} never reached {lines} lines")
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("first", ["local", "ray"])
def test_a_killed_driver_resumes_on_the_other_backend(
    first: str, tiny_chat_lm_dir: Path, local_dsr: Path, tmp_path: Path, ray_runtime: object
) -> None:
    out = tmp_path / "run"
    backend = ["--backend", "ray", "--num-workers", "2"] if first == "ray" else []
    _kill_after(_dsr_command(tiny_chat_lm_dir, out, *backend), out / ANSWERS_FILE, 30)
    before = len(read_run_records(out / ANSWERS_FILE))
    assert 30 <= before < 200 and not (out / REPORT_FILE).exists()
    # resumed on the other backend; the answers kept are not asked again
    run_dsr(_dsr_settings(tiny_chat_lm_dir, 200), out, backend=Backend() if first == "ray" else RAY)
    assert _answers(out) == _answers(local_dsr)
    assert (
        json.loads((out / REPORT_FILE).read_text())["overall"]
        == json.loads((local_dsr / REPORT_FILE).read_text())["overall"]
    )


def _scene_runs(out: Path) -> dict[int, tuple[dict[str, Any], str]]:
    records = read_run_records(out / EVAL_SCENES)
    assert len({r["index"] for r in records}) == len(records), "a scene was recorded twice"
    return {
        r["index"]: (_without_timings(r), (out / r["run"] / "episodes.jsonl").read_text()) for r in records
    }


def test_eval_explore_on_ray_records_the_local_runs(tmp_path: Path, ray_runtime: object) -> None:
    scenes = scene_set("procedural:seeds=0-3,rooms=3")
    options: dict[str, Any] = {"steps": 40, "panorama_height": 32, "panorama_width": 64}
    local = evaluate_exploration("frontier", scenes, tmp_path / "local", **options)
    seen: list[int] = []
    remote = evaluate_exploration(
        "frontier",
        scenes,
        tmp_path / "ray",
        backend=RAY,
        on_scene=lambda r, done, total: seen.append(done),
        **options,
    )
    assert seen == [1, 2, 3, 4]
    assert remote["measures"] == local["measures"] and remote["failures"] == []
    assert _scene_runs(tmp_path / "ray") == _scene_runs(tmp_path / "local")
    for run in (tmp_path / "ray").glob("0*"):  # the files a worker sent back, as a local run writes them
        assert sorted(p.name for p in run.iterdir()) == sorted(
            p.name for p in (tmp_path / "local" / run.name).iterdir()
        )


def test_a_scene_that_cannot_load_is_a_recorded_failure_on_either_backend(
    tmp_path: Path, ray_runtime: object
) -> None:
    bad = tmp_path / "broken.glb"
    bad.write_bytes(b"not a mesh")
    scenes = ["procedural:seed=0,rooms=2", str(bad), "procedural:seed=1,rooms=2"]
    options: dict[str, Any] = {"steps": 10, "panorama_height": 32, "panorama_width": 64}
    results = {
        name: evaluate_exploration("random", scenes, tmp_path / name, backend=backend, **options)
        for name, backend in (("local", Backend()), ("ray", RAY))
    }
    for result in results.values():
        assert result["measures"]["coverage_ratio"]["n"] == 2
        assert [f["scene"] for f in result["failures"]] == [str(bad)]
    assert results["ray"]["failures"] == results["local"]["failures"]
    records = read_run_records(tmp_path / "ray" / EVAL_SCENES)
    assert sum("error" in r for r in records) == 1 and len(records) == 3  # tried once, not retried
