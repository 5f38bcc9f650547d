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


def test_an_upward_import_breaks_the_floors(tmp_path: Path) -> None:
    package = _source_copy(tmp_path)
    _append(package / "core" / "limits.py", "import embodia.evals.explore  # reaches up three floors")
    result = _lint(tmp_path)
    assert result.returncode == 1
    assert "embodia.core is not allowed to import embodia.evals" in result.stdout
    assert "embodia.core.limits -> embodia.evals.explore" in result.stdout


def test_a_lazy_upward_import_breaks_it_too(tmp_path: Path) -> None:
    package = _source_copy(tmp_path)
    _append(
        package / "sim" / "motion.py",
        "def _later() -> None:\n    from embodia.perception import bev  # noqa: F401",
    )
    result = _lint(tmp_path)
    assert result.returncode == 1
    assert "embodia.sim is not allowed to import embodia.perception" in result.stdout


def test_one_environment_may_not_import_another(tmp_path: Path) -> None:
    package = _source_copy(tmp_path)
    _append(package / "envs" / "puzzles" / "core.py", "import embodia.envs.dsr.suites")
    result = _lint(tmp_path)
    assert result.returncode == 1
    assert "embodia.envs.puzzles is not allowed to import embodia.envs.dsr" in result.stdout


def test_an_import_cycle_between_siblings_breaks_it(tmp_path: Path) -> None:
    package = _source_copy(tmp_path)
    # sim.loading imports sim.scene; the reverse closes a circle inside the sim floor.
    _append(package / "sim" / "scene.py", "import embodia.sim.loading")
    result = _lint(tmp_path)
    assert result.returncode == 1
    assert "No cycles are allowed in embodia.sim" in result.stdout


def test_the_architecture_page_lists_the_contract_floors() -> None:
    """docs/architecture.md's floor table, top to bottom, is the layers contract."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## Floors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`(\w+)/?(?:\.py)?`\s*\|", table, re.MULTILINE)
    assert rows == _floors()
    (independent,) = [c for c in _contracts() if c["type"] == "independence"]
    for module in independent["modules"]:  # type: ignore[union-attr]
        assert f"`{str(module).removeprefix('embodia.').replace('.', '/')}/`" in page
