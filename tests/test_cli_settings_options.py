"""Command options derived from a settings dataclass (embodia.cli.settings_options), and a
command line that starts without importing the runners."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import typer
from typer.testing import CliRunner

from embodia.cli import app
from embodia.cli.settings_options import OWN, FieldOption, settings_command

runner = CliRunner()


@dataclass(frozen=True)
class Trip:
    place: str
    nights: int = 3
    rate: float = 1.5
    stops: tuple[str, ...] = ("harbour", "hill")
    note: str | None = None
    mode: Literal["car", "train"] = "car"
    budget: int = 700


def _trip_app(table: dict[str, FieldOption | None], hidden: tuple[str, ...] = ("budget",)) -> Any:
    """A group with one command over Trip; what the command received goes into `seen`."""
    group = typer.Typer()
    seen: dict[str, Any] = {"loads": 0}

    @group.callback()
    def _group() -> None:
        """Trips."""

    def load() -> type[Trip]:
        seen["loads"] += 1
        return Trip

    @settings_command(group, "plan", load, table, hidden=hidden)
    def plan(
        options: dict[str, Any],
        out: Annotated[Path, typer.Option("--out", help="Where to write.")],
        dry: Annotated[bool, typer.Option("--dry", help="Write nothing.")] = False,
    ) -> None:
        """Plan a trip."""
        seen["options"], seen["trip"], seen["out"], seen["dry"] = options, Trip(**options), out, dry

    return group, seen


TABLE: dict[str, FieldOption | None] = {
    "place": FieldOption("Where to."),
    "out": OWN,
    "nights": FieldOption("How long."),
    "rate": FieldOption(),
    "stops": FieldOption("A stop; repeatable.", "--stop"),
    "note": FieldOption("A note."),
    "mode": FieldOption("car or train.", default="train"),
}


def test_options_come_from_the_fields_with_their_defaults() -> None:
    group, seen = _trip_app(TABLE)
    result = runner.invoke(group, ["plan", "--place", "lake", "--out", "x", "--nights", "5"])
    assert result.exit_code == 0, result.output
    # Not given: a tuple field is left out (the dataclass keeps its default), the others take the
    # field's default or the table's own; a hidden field is no option at all.
    assert seen["options"] == {"place": "lake", "nights": 5, "rate": 1.5, "note": None, "mode": "train"}
    assert seen["trip"] == Trip("lake", nights=5, mode="train")
    assert (seen["out"], seen["dry"]) == (Path("x"), False)
    given = ["plan", "--place", "lake", "--out", "x", "--stop", "a", "--stop", "b", "--note", "n", "--dry"]
    assert runner.invoke(group, given).exit_code == 0
    assert seen["trip"].stops == ("a", "b") and seen["trip"].note == "n" and seen["dry"] is True
    assert runner.invoke(group, ["plan", "--place", "lake", "--out", "x", "--budget", "1"]).exit_code == 2


def test_required_field_float_check_and_help_in_table_order() -> None:
    group, _ = _trip_app(TABLE)
    missing = runner.invoke(group, ["plan", "--out", "x"])
    assert missing.exit_code == 2 and "--place" in missing.output
    wide = {"COLUMNS": "200"}
    nan = runner.invoke(group, ["plan", "--place", "lake", "--out", "x", "--rate", "nan"], env=wide)
    assert nan.exit_code == 2 and "not a finite number" in nan.output
    help_text = runner.invoke(group, ["plan", "--help"], env=wide).output
    flags = ["--place", "--out", "--nights", "--rate", "--stop", "--note", "--mode", "--dry", "--help"]
    positions = [help_text.index(flag + " ") for flag in flags]
    assert positions == sorted(positions), help_text
    assert "[default: train]" in help_text and "[default: 3]" in help_text and "--budget" not in help_text


def test_the_settings_load_when_the_command_runs_not_when_its_group_is_listed() -> None:
    group, seen = _trip_app(TABLE)
    listing = runner.invoke(group, ["--help"])
    assert listing.exit_code == 0 and "Plan a trip." in listing.output and seen["loads"] == 0
    plan = typer.main.get_command(group).commands["plan"]
    names = ["place", "out", "nights", "rate", "stops", "note", "mode", "dry"]
    assert [p.name for p in plan.params] == names  # looked over, it shows the real options
    runner.invoke(group, ["plan", "--help"])
    runner.invoke(group, ["plan", "--place", "lake", "--out", "x"])
    assert seen["loads"] == 1  # built once


@pytest.mark.parametrize(
    ("table", "hidden", "named"),
    [
        ({k: v for k, v in TABLE.items() if k != "note"}, ("budget",), "['note']"),  # a field forgotten
        ({**TABLE, "nigths": FieldOption("typo")}, ("budget",), "nigths"),  # a line naming no field
        ({**TABLE, "later": OWN}, ("budget",), "later"),  # an own option the command lacks
        (TABLE, ("budget", "bugdet"), "bugdet"),  # hidden, but no such field
    ],
)
def test_a_table_out_of_step_with_its_dataclass_fails_loudly(table, hidden, named: str) -> None:
    group, _ = _trip_app(table, hidden)
    result = runner.invoke(group, ["plan", "--help"])
    assert isinstance(result.exception, TypeError) and named in str(result.exception)


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (["explore"], ["--agent", "--scene", "--up", "--steps", "--env", "--height", "--width", "--video"]),
        (["eval", "dsr"], ["--policy", "--suite", "--length", "--operation", "--limit", "--tokens"]),
        (["stream", "run"], ["--source", "--scenario", "--token-cap", "--budget", "--realtime", "--fps"]),
        (["eval", "csmr"], ["--reasoner", "--perceiver", "--task", "--ablation", "--k", "--max-queries"]),
        (["eval", "sxs"], ["--policy", "--source", "--modes", "--max-tokens", "--k", "--support"]),
    ],
)
def test_every_settings_field_is_an_option_or_hidden(command: list[str], flags: list[str]) -> None:
    # Building the options checks each field of the runner's settings against the command's table:
    # a field added to a settings dataclass without its help line fails here.
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert all(f"{flag} " in result.output for flag in flags)


def test_the_command_line_starts_without_importing_a_runner() -> None:
    probe = (
        "import json, sys\n"
        "from embodia.cli import app\n"
        "from typer.testing import CliRunner\n"
        "def heavy():\n"
        "    return sorted(m for m in sys.modules if m.startswith(('embodia.evals', 'langgraph', 'torch')))\n"
        "at_import = heavy()\n"
        "CliRunner().invoke(app, ['eval', '--help'])\n"
        "listed = heavy()\n"
        "CliRunner().invoke(app, ['eval', 'dsr', '--help'])\n"
        "print(json.dumps([at_import, listed, heavy()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    at_import, listed, after_dsr_help = json.loads(done.stdout.splitlines()[-1])
    assert at_import == [] and listed == []
    assert "embodia.evals.dsr" in after_dsr_help  # its options come from DSRSettings
