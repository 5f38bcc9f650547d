"""The `embodia` CLI: outputs written, and bad input answered with one line and exit 2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from embodia.cli import app

runner = CliRunner()


def test_sim_render_writes_run_record(tmp_path) -> None:
    import imageio.v3 as iio

    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "sim",
            "render",
            "--scene",
            "procedural:seed=2,rooms=3",
            "--out",
            str(out),
            "--height",
            "64",
            "--width",
            "128",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["navigable_area_m2"] > 10
        and "bed" in summary["categories"]
        or "sofa" in summary["categories"]
    )
    assert iio.imread(out / "panorama_rgb.png").shape == (64, 128, 3)
    assert iio.imread(out / "topdown.png").ndim == 3
    assert (out / "scene.glb").stat().st_size > 1000 and (out / "config.yaml").is_file()


def test_sim_info_json() -> None:
    result = runner.invoke(app, ["sim", "info", "--scene", "procedural:seed=2,rooms=3", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["navigable_area_m2"] > 10 and np.isfinite(info["floor_height"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sim", "info", "--scene", "nope.glb"], "scene file not found"),
        (["sim", "info", "--scene", "room.fbx"], "unsupported scene format"),
        (["sim", "render", "--scene", "procedural:seed=1", "--out", "x", "--pose", "1,2"], "invalid pose"),
        (["sim", "info", "--scene", "procedural:seed=1", "--up", "w"], "invalid --up"),
        (["sim", "info", "--scene", "procedural:seed=1", "--sim", "unity"], "unknown simulator 'unity'"),
        (
            ["sim", "info", "--scene", "x", "--sim", "habitat", "--up", "z"],
            "--up is for the embedded simulator",
        ),
        (["explore", "--agent", "frontier", "--sim", "gazebo", "--out", "x"], "unknown simulator 'gazebo'"),
        (
            ["eval", "explore", "--agent", "frontier", "--scenes", "procedural:seed=1", "--sim", "mujoco"],
            "unknown simulator",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args: list[str], message: str) -> None:
    (tmp_path / "room.fbx").write_text("x")
    args = [str(tmp_path / a) if a in ("room.fbx", "x") else a for a in args]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["sim", "info"],
        ["sim", "render", "--out", "run"],
        ["explore", "--agent", "frontier", "--out", "run"],
        ["eval", "explore", "--agent", "frontier"],
    ],
)
def test_sim_habitat_without_habitat_sim_says_how_to_install_it(tmp_path, command: list[str]) -> None:
    if importlib.util.find_spec("habitat_sim") is not None:
        pytest.skip("habitat_sim is installed here")
    scene = "--scenes" if command[:2] == ["eval", "explore"] else "--scene"
    args = [str(tmp_path / a) if a == "run" else a for a in command]
    result = runner.invoke(app, [*args, scene, "procedural:seed=1", "--sim", "habitat"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "conda install habitat-sim" in lines[0], result.stderr
    assert not (tmp_path / "run").exists()


def test_vllm_extra_named_intact_in_the_error_line(tmp_path) -> None:
    # The main environment has no vllm: `--policy vllm:DIR` ends in the import error, which names
    # the `[vllm]` extra. Rich markup would take `[vllm]` for a style and drop it.
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here, so the policy does not fail on its import")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    args = ["explore", "--agent", "dfs", "--policy", f"vllm:{model}", "--steps", "5"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "install the [vllm] extra" in lines[0]


def test_paths_and_specs_with_markup_print_as_written(tmp_path, monkeypatch) -> None:
    # Folders named like Rich styles: the table title (the policy spec) and the `wrote` line (the
    # run folder) show them as typed instead of styling the text after them.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "[bold]in").mkdir()
    replies = Path("[bold]in") / "replies.jsonl"
    replies.write_text(json.dumps('{"final_answer": []}') + "\n")
    args = ["eval", "dsr", "--policy", f"scripted:{replies}", "--suite", "main", "--length", "short"]
    result = runner.invoke(app, [*args, "--limit", "1", "--mode", "none", "--out", "[red]run"])
    assert result.exit_code == 0, result.output
    printed = " ".join(result.stdout.split())  # Rich wraps lines at 80 columns here
    assert "DSR-Bench main: scripted:[bold]in/replies.jsonl" in printed
    assert "wrote [red]run" in printed
    assert (tmp_path / "[red]run" / "report.json").is_file()
