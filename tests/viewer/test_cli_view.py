"""``embodia view`` as a user starts it: it serves the folder and says where; bad input is one
line and exit code 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app


@pytest.mark.parametrize(("host", "shown"), [("127.0.0.1", r"127\.0\.0\.1"), ("::1", r"\[::1\]")])
def test_view_serves_the_runs_folder_and_prints_its_address(runs_root: Path, host: str, shown: str) -> None:
    command = [sys.executable, "-m", "embodia.cli", "view", str(runs_root), "--port", "0", "--host", host]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(rf"http://{shown}:(\d+)/", line)
        assert found, line
        with urllib.request.urlopen(found.group(0) + "api/runs", timeout=10) as response:
            runs = json.loads(response.read())["runs"]
        assert "house/long" in {r["id"] for r in runs}
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/folder"], "/no/such/folder is not a folder of runs"),
        (["{root}", "--port", "70000"], "--port must be 0-65535"),
        (["{root}", "--host", "0.0.0.0", "--port", "0"], "--host 0.0.0.0 is not a loopback address"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(runs_root: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["view", *(a.format(root=runs_root) for a in args)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
