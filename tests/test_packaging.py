"""pyproject.toml lists every package: the repository root is the package, so setuptools is
given the list by hand, and a folder missing from it would be missing from a wheel."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_folder_with_an_init_is_a_listed_package() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "*__init__.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    folders = {
        ".".join(("embodia", *Path(name).parent.parts))
        for name in tracked
        if Path(name).parts[0] not in {"tests", "benchmarks", "docs"}
    }
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert folders - listed == set(), "add these to [tool.setuptools] packages"
    assert {p for p in listed - folders if p != "embodia.viewer.static"} == set(), "listed but gone"
