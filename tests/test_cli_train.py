"""`embodia train sft|grpo`: env options, bad input, and SFT then GRPO end to end on the tiny
chat model, through run folder, resume and the viewer's run discovery."""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from embodia.cli import app
from embodia.cli.train import GRPO_COLUMNS, MetricsTable, parse_env_options, with_dsr_prompt
from embodia.errors import EmbodiaError

runner = CliRunner()
DSR = ["--env", "embodia/DSR-v0", "--env-option", "operation=array.access", "--env-option", "length=short"]


def test_env_options_are_json_where_they_parse_and_strings_elsewhere() -> None:
    given = ["operation=array.access", "instance_seed=7", "flag=true", "none=null", "text=a=b", "empty="]
    assert parse_env_options(given) == {
        "operation": "array.access",
        "instance_seed": 7,
        "flag": True,
        "none": None,
        "text": "a=b",
        "empty": "",
    }
    assert parse_env_options(None) == {}
    for bad in (["length"], ["=3"], ["two words=1"]):
        with pytest.raises(EmbodiaError, match="malformed --env-option"):
            parse_env_options(bad)
    with pytest.raises(EmbodiaError, match="--eval-env-option length is given twice"):
        parse_env_options(["length=short", "length=long"], "--eval-env-option")


def test_dsr_gets_the_prompt_of_the_generated_solutions_unless_told_otherwise() -> None:
    assert with_dsr_prompt("embodia/DSR-v0", {"length": "short"}) == {
        "mode": "none",
        "description": "name",
        "length": "short",
    }
    assert with_dsr_prompt("embodia/DSR-v0", {"mode": "CoT"})["mode"] == "CoT"
    assert with_dsr_prompt("embodia/Puzzle-v0", {"length": "short"}) == {"length": "short"}


@pytest.mark.parametrize("terminal", [True, False])
def test_metrics_table_ends_with_every_row(terminal: bool) -> None:
    screen = Console(file=io.StringIO(), force_terminal=terminal, width=140, height=12, color_system=None)
    lines = [{"step": s, "reward_mean": s / 10, "clip_ratio/region_mean": 0.125} for s in range(1, 9)]
    with MetricsTable("GRPO", GRPO_COLUMNS, screen) as table:
        for line in lines:
            table.add(line)
    written = screen.file.getvalue()
    final = written[written.rindex("GRPO") :]  # the whole table, printed once the run ends
    rows = [row for row in final.splitlines() if row.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == [str(s) for s in range(1, 9)]
    assert "0.8" in rows[-1] and "0.125" in rows[-1] and "|A| max" in final
    # on a terminal the rows were shown live as they came, only the latest that fit the screen
    assert ("0.3" in written[: written.rindex("GRPO")]) is terminal


@pytest.fixture(scope="module")
def no_tokenizer_dir(tiny_chat_lm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny chat model's weights and config without any tokenizer file."""
    folder = tmp_path_factory.mktemp("no-tokenizer")
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(tiny_chat_lm_dir / name, folder / name)
    return folder


CASES = {  # {model}: the tiny chat model, {bare}: it without a tokenizer, {dsr}: DSR's array.access
    "grpo-unregistered-env": ("grpo --policy hf:{model} --env x/Nope-v0", "'x/Nope-v0' is not registered"),
    "grpo-unreadable-env": ("grpo --policy hf:{model} --env CartPole-v1", "cannot read its observations"),
    "grpo-no-tokenizer": ("grpo --policy hf:{bare} {dsr}", "has no tokenizer"),
    "grpo-zero-steps": ("grpo --policy hf:{model} {dsr} --steps 0", "--steps must be at least 1"),
    "grpo-bad-env-option": ("grpo --policy hf:{model} {dsr} --env-option x", "malformed --env-option 'x'"),
    "grpo-env-refuses": ("grpo --policy hf:{model} {dsr} --env-option a=1", "cannot make embodia/DSR-v0"),
    "sft-no-solutions": (
        "sft --policy hf:{model} --env CartPole-v1",
        "records of embodia/DSR-v0 and embodia/ActiveMappingWaypoint-v0 only, not CartPole",
    ),
    "sft-waypoint-pixels": (
        "sft --policy hf:{model} --env embodia/ActiveMappingWaypoint-v0 --env-option action_type=pixel",
        "make it with action_type='index'",
    ),
    "sft-no-tokenizer": ("sft --policy hf:{bare} {dsr} --records 4", "has no tokenizer"),
    "sft-zero-steps": ("sft --policy hf:{model} {dsr} --steps 0", "--steps must be at least 1"),
    "sft-bad-env-option": ("sft --policy hf:{model} {dsr} --env-option =a", "malformed --env-option '=a'"),
    "sft-other-prompt": ("sft --policy hf:{model} {dsr} --env-option mode=CoT", "mode=none, not 'CoT'"),
    "sft-no-records": ("sft --policy hf:{model}", "give the records as --data FILE.jsonl or"),
}


@pytest.mark.parametrize(("command", "message"), CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_error_line_and_leaves_no_run(
    tiny_chat_lm_dir: Path, no_tokenizer_dir: Path, tmp_path: Path, command: str, message: str
) -> None:
    out = tmp_path / "runs" / "bad"
    args = command.format(model=tiny_chat_lm_dir, bare=no_tokenizer_dir, dsr=" ".join(DSR)).split()
    result = runner.invoke(app, ["train", *args, "--out", str(out)])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0] and "Traceback" not in result.output
    assert not out.exists()


def test_train_help_imports_no_trainer_and_lists_the_derived_options() -> None:
    probe = (
        "import json, sys\n"
        "from embodia.cli import app\n"
        "from typer.testing import CliRunner\n"
        "listed = CliRunner().invoke(app, ['train', '--help'])\n"
        "heavy = ('torch', 'transformers', 'trl', 'gymnasium')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print(json.dumps([listed.exit_code, heavy]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == [0, []]
    for command, flags in {
        "grpo": [
            "--env-option",
            "--eval-env-option",
            "--advantage",
            "--group-size",
            "--loss-type",
            "--resume",
        ],
        "sft": ["--policy", "--data", "--env-option", "--records", "--steps", "--full-loss", "--lora-target"],
    }.items():
        result = runner.invoke(app, ["train", command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert all(f"{flag} " in result.output for flag in flags), result.output


def test_sft_on_waypoint_teacher_episodes_from_the_command_line(
    tiny_chat_lm_dir: Path, tmp_path: Path
) -> None:
    """``--records N`` generates the teacher episodes of reset seeds 0..N-1, one record a decision."""
    from embodia.policies.recipes.solutions import waypoint_solution_records

    small = {"max_steps": 10, "rooms": 2, "panorama_height": 32, "panorama_width": 64}
    flags = [f for key, value in small.items() for f in ("--env-option", f"{key}={value}")]
    out = tmp_path / "sft-waypoint"
    command = [
        "train",
        "sft",
        "--policy",
        f"hf:{tiny_chat_lm_dir}",
        "--env",
        "embodia/ActiveMappingWaypoint-v0",
    ]
    result = runner.invoke(app, [*command, *flags, "--records", "2", "--steps", "1", "--out", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((out / "summary.json").read_text())
    records = waypoint_solution_records(range(2), env_options=small)
    assert summary["steps"] == 1 and summary["train_records"] == len(records) >= 2
    assert [r["step"] for r in _rows(out)] == [1] and (out / "final" / "config.json").is_file()


def _rows(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_sft_then_grpo_from_the_command_line(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    from embodia.policies.recipes.solutions import dsr_solution_records
    from embodia.viewer.runs import discover, kind_of, view_of

    runs = tmp_path / "runs"
    sft_out, grpo_out = runs / "sft", runs / "grpo"
    sft = ["train", "sft", "--policy", f"hf:{tiny_chat_lm_dir}", *DSR, "--records", "16", "--steps", "2"]
    result = runner.invoke(app, [*sft, "--out", str(sft_out)])
    assert result.exit_code == 0, (result.output, result.exception)
    rows = _rows(sft_out)
    assert [r["step"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    summary = json.loads((sft_out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["train_records"] == 16
    assert (sft_out / "final" / "config.json").is_file() and (sft_out / "curves.png").stat().st_size > 0
    assert "SFT done: 2 steps" in result.stdout and f"--policy hf:{sft_out / 'final'}" in result.stdout
    assert "tokens/s" in result.stdout  # the table's heading, printed whole at the end

    grpo = [
        "train",
        "grpo",
        "--policy",
        f"hf:{sft_out / 'final'}",
        *DSR,
        "--advantage",
        "durian",
        "--steps",
        "1",
        "--group-size",
        "2",
        "--prompts-per-step",
        "2",
        "--max-new-tokens",
        "8",
        "--eval-prompts",
        "2",
        "--out",
        str(grpo_out),
    ]
    result = runner.invoke(app, grpo)
    assert result.exit_code == 0, (result.output, result.exception)
    rows = _rows(grpo_out)
    assert [r["step"] for r in rows] == [0, 1] and "eval_reward" in rows[0] and "eval_reward" in rows[1]
    assert rows[1]["samples"] == 4 and 0 <= rows[1]["reward_mean"] <= 1 and rows[1]["advantage_abs_max"] >= 0
    config = yaml.safe_load((grpo_out / "config.yaml").read_text())["settings"]
    assert config["advantage"] == "durian" and config["env_options"] == {
        "mode": "none",
        "description": "name",
        "operation": "array.access",
        "length": "short",
    }
    # GRPO is shown the prompts SFT taught: every rollout's user message is one of the solved
    # instances' (the env draws from the same 30 instances of array.access at length short)
    taught = {r["messages"][-2]["content"] for r in dsr_solution_records(range(30))}
    trajectories = [json.loads(line) for line in (grpo_out / "rollouts.jsonl").read_text().splitlines()]
    assert len(trajectories) == 4
    assert all(t["turns"][0]["messages"][-1]["content"] in taught for t in trajectories)
    summary = json.loads((grpo_out / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["policy"] == f"hf:{grpo_out / 'final'}"
    assert (grpo_out / "final" / "config.json").is_file() and (grpo_out / "curves.png").stat().st_size > 0
    assert f"--policy hf:{grpo_out / 'final'}" in result.stdout and "|A| max" in result.stdout

    # resuming a finished run trains nothing and answers with its summary
    again = runner.invoke(app, [*grpo, "--resume"])
    assert again.exit_code == 0, (again.output, again.exception)
    assert "GRPO done: 1 steps" in again.stdout and _rows(grpo_out) == rows
    assert json.loads((grpo_out / "summary.json").read_text()) == summary

    # `embodia view` lists both as training runs with curves
    assert kind_of(sft_out) == kind_of(grpo_out) == "training"
    found = {run.id: run for run in discover(runs)}
    assert set(found) == {"sft", "grpo"} and all(run.error is None for run in found.values())
    assert found["grpo"].summary["steps"] == 2  # metrics lines: the start's evaluation and step 1
    assert "reward_mean" in view_of(found["grpo"])["curves"] and "loss" in view_of(found["sft"])["curves"]
