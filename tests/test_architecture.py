"""The floors of docs/architecture.md hold: the import-linter contracts pass on the tree, fail on
an upward import, a cycle or one environment importing another, and the page lists the same
floors as the contract."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists(), reason="import-linter is not installed (it comes with the [lint] extra)"
)


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def _floors() -> list[str]:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    return [str(layer) for layer in layers["layers"]]  # type: ignore[union-attr]


def _source_copy(tmp_path: Path) -> Path:
    """The package's tracked modules (no tests, docs or benchmarks) laid out as ``embodia/``."""
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    package = tmp_path / "embodia"
    for name in files:
        if name.split("/", 1)[0] in {"tests", "benchmarks", "docs"}:
            continue
        target = package / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, target)
    shutil.copyfile(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return package


def _lint(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # The copy comes first on the path, ahead of the installed (editable) package.
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", "pyproject.toml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _append(module: Path, line: str) -> None:
    module.write_text(module.read_text() + f"\n{line}\n")


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    _source_copy(tmp_path)
    result = _lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "messages"),
    [
        pytest.param(
            "core/limits.py",
            "import embodia.evals.explore  # reaches up three floors",
            [
                "embodia.core is not allowed to import embodia.evals",
                "embodia.core.limits -> embodia.evals.explore",
            ],
            id="an upward import breaks the floors",
        ),
        pytest.param(
            "sim/motion.py",
            "def _later() -> None:\n    from embodia.perception import bev  # noqa: F401",
            ["embodia.sim is not allowed to import embodia.perception"],
            id="a lazy upward import breaks it too",
        ),
        pytest.param(
            "envs/puzzles/core.py",
            "import embodia.envs.dsr.suites",
            ["embodia.envs.puzzles is not allowed to import embodia.envs.dsr"],
            id="one environment may not import another",
        ),
        pytest.param(
            # sim.loading imports sim.scene; the reverse closes a circle inside the sim floor.
            "sim/scene.py",
            "import embodia.sim.loading",
            ["No cycles are allowed in embodia.sim"],
            id="an import cycle between siblings breaks it",
        ),
    ],
)
def test_a_broken_contract_fails_the_lint(
    tmp_path: Path, module: str, line: str, messages: list[str]
) -> None:
    package = _source_copy(tmp_path)
    _append(package / module, line)
    result = _lint(tmp_path)
    assert result.returncode == 1
    for message in messages:
        assert message in result.stdout


def test_the_architecture_page_lists_the_contract_floors() -> None:
    """docs/architecture.md's floor table, top to bottom, is the layers contract."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## Floors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`(\w+)/?(?:\.py)?`\s*\|", table, re.MULTILINE)
    assert rows == _floors()
    (independent,) = [c for c in _contracts() if c["type"] == "independence"]
    for module in independent["modules"]:  # type: ignore[union-attr]
        assert f"`{str(module).removeprefix('embodia.').replace('.', '/')}/`" in page
