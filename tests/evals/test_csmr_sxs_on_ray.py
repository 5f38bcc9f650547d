"""``eval csmr`` and ``eval sxs`` on Ray workers (``--backend ray``): the same records (timings
aside) and the same report as a local run, a local run resumed on Ray with every unit recorded
once, and errors that end the run with the local run's message.

The configurations need no model: CSMR's ``direct`` ablation with the oracle perceiver (the
oracle answers the question) and SxS's ``sft_target`` mode (the reference trajectory). They
share the session's local Ray runtime (2 CPUs, the ``ray_runtime`` fixture)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.core.scale_out import Backend
from embodia.errors import EmbodiaError
from embodia.evals import csmr, sxs_run
from embodia.evals.csmr import CSMRRunSettings, run_csmr
from embodia.evals.sxs_run import SxSRunSettings, run_sxs_eval

pytestmark = pytest.mark.ray

runner = CliRunner()
RAY = Backend("ray", num_workers=2)
CSMR = CSMRRunSettings(
    task="clevr", reasoner="unused", perceiver="oracle", ablation="direct", difficulty="easy", items=6
)
SXS = SxSRunSettings(source="maze", policy="", modes="sft_target", difficulty="easy", items=6)


def _timing(key: str) -> bool:
    """A field that measures time (``wall_s``, ``ttfc_s``, ``latency_s``, ``wall_s_per_item``):
    it differs between any two runs."""
    return key.endswith("_s") or key.endswith("_s_per_item")


def untimed(value: Any) -> Any:
    """``value`` without its timing fields, at any depth."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not _timing(k)}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text().splitlines()


def records(out: Path) -> list[dict[str, Any]]:
    """The run's records in unit order (item, then mode), timings left out."""
    rows = [json.loads(line) for line in lines(out)]
    return untimed(sorted(rows, key=lambda r: (r["index"], r.get("mode", ""))))


def report(out: Path) -> dict[str, Any]:
    return dict(untimed(json.loads((out / "report.json").read_text())))


def no_loading_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process may not load what solves the units: on Ray only the workers do (in their
    own processes, where this patch does not reach), so a run that passes ran there."""

    def refuse(*_: object) -> None:
        raise AssertionError("the driver loaded the policy; the Ray workers should")

    monkeypatch.setattr(csmr, "_load", refuse)
    monkeypatch.setattr(sxs_run, "_load", refuse)


@pytest.fixture(scope="module")
def local_csmr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("csmr") / "local"
    run_csmr(CSMR, out)
    return out


@pytest.fixture(scope="module")
def local_sxs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sxs") / "local"
    run_sxs_eval(SXS, out)
    return out


def resume_half_on_ray(local: Path, out: Path, run: Any, settings: Any) -> list[str]:
    """``local`` copied to ``out`` with every other record deleted (and no report), resumed on
    Ray; returns the records kept."""
    shutil.copytree(local, out)
    kept = lines(local)[::2]
    (out / "results.jsonl").write_text("".join(f"{line}\n" for line in kept))
    (out / "report.json").unlink()
    run(settings, out, resume=True, backend=RAY)
    return kept


def test_eval_csmr_on_ray_gives_the_local_records_and_report(
    ray_runtime: object, local_csmr: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_loading_here(monkeypatch)
    out = tmp_path / "ray"
    args = ["eval", "csmr", "--task", "clevr", "--difficulty", "easy", "--items", "6"]
    args += ["--reasoner", "unused", "--perceiver", "oracle", "--ablation", "direct", "--out", str(out)]
    result = runner.invoke(app, [*args, "--backend", "ray", "--num-workers", "2"])
    assert result.exit_code == 0, result.output
    assert "accuracy 100.0% over 6 items" in result.output
    assert len(lines(out)) == 6
    assert records(out) == records(local_csmr)
    assert report(out) == report(local_csmr)
    # the comparison has something to compare: each record holds the oracle's evidence
    assert all(r["evidence"][0]["source"] == "oracle" for r in records(out))


def test_eval_csmr_started_locally_resumes_on_ray(
    ray_runtime: object, local_csmr: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_loading_here(monkeypatch)
    out = tmp_path / "resumed"
    kept = resume_half_on_ray(local_csmr, out, run_csmr, CSMR)
    # the kept lines stay as they were; each missing item is added once
    assert lines(out)[: len(kept)] == kept
    assert sorted(json.loads(line)["index"] for line in lines(out)) == list(range(6))
    assert records(out) == records(local_csmr)
    assert report(out) == report(local_csmr)


def test_eval_sxs_on_ray_gives_the_local_records_and_report(
    ray_runtime: object, local_sxs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_loading_here(monkeypatch)
    out = tmp_path / "ray"
    args = ["eval", "sxs", "--source", "maze", "--difficulty", "easy", "--items", "6"]
    args += ["--modes", "sft_target", "--out", str(out)]
    result = runner.invoke(app, [*args, "--backend", "ray", "--num-workers", "2"])
    assert result.exit_code == 0, result.output
    assert "sft_target: accuracy 100.0%" in result.output
    assert len(lines(out)) == 6
    assert records(out) == records(local_sxs)
    assert report(out) == report(local_sxs)
    assert all(r["raw"].startswith("<think>") for r in records(out))


def test_eval_sxs_started_locally_resumes_on_ray(
    ray_runtime: object, local_sxs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_loading_here(monkeypatch)
    out = tmp_path / "resumed"
    kept = resume_half_on_ray(local_sxs, out, run_sxs_eval, SXS)
    assert lines(out)[: len(kept)] == kept
    units = sorted((json.loads(line)["index"], json.loads(line)["mode"]) for line in lines(out))
    assert units == [(i, "sft_target") for i in range(6)]
    assert records(out) == records(local_sxs)
    assert report(out) == report(local_sxs)


def test_a_unit_error_ends_a_ray_run_with_the_local_message(ray_runtime: object, tmp_path: Path) -> None:
    """A reasoner that fails (here a scripted server error) ends the run on either backend,
    with the same message; nothing was recorded, so nothing is left."""
    script = tmp_path / "reasoner.jsonl"
    script.write_text('{"error": "the server went away"}\n')
    settings = CSMRRunSettings(
        task="clevr", reasoner=f"scripted:{script}", perceiver="oracle", difficulty="easy", items=2
    )
    messages = []
    for backend in (Backend(), RAY):
        out = tmp_path / backend.kind
        with pytest.raises(EmbodiaError) as raised:
            run_csmr(settings, out, backend=backend)
        messages.append(str(raised.value))
        assert not out.exists()
    assert messages[0] == messages[1] and "the server went away" in messages[0]


@pytest.mark.slow
def test_a_context_overflow_on_ray_names_the_item_as_locally(ray_runtime: object, tmp_path: Path) -> None:
    """The tiny chat model (its window cut short) as the reasoner, loaded by the Ray worker: a
    reply budget it cannot hold fails the worker's setup, a prompt that does not fit fails
    item 0; both end the run with the local run's message."""
    from context_models import set_context, tiny_chat

    model = tiny_chat(tmp_path / "chat", 256)
    settings = CSMRRunSettings(task="clevr", reasoner=f"hf:{model}", perceiver="oracle", items=2)
    one = Backend("ray", num_workers=1)  # one worker: item 0 fails first, as it does locally
    for context, start in (
        (256, "--reasoner: a reply of up to 256 tokens leaves no room"),
        (400, "item 0 (--reasoner): the prompt has "),  # room for a reply, not for the question
    ):
        set_context(model, context)
        messages = []
        for backend in (Backend(), one):
            with pytest.raises(EmbodiaError) as raised:
                run_csmr(settings, tmp_path / f"{backend.kind}-{context}", backend=backend)
            messages.append(str(raised.value))
        assert messages[0] == messages[1] and messages[0].startswith(start), messages
