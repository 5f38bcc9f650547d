"""The gym id table: ``import embodia`` makes every id known without loading any environment."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import gymnasium
import pytest

from embodia.envs import registry

EXPECTED_IDS = {
    "embodia/ActiveMapping-v0",
    "embodia/ActiveMappingWaypoint-v0",
    "embodia/DSR-v0",
    "embodia/DSRInteractive-v0",
    "embodia/LiveGaming-v0",
    "embodia/Puzzle-v0",
}


def _fresh(code: str) -> list:
    """Run ``code`` in a new interpreter; its last stdout line, read as JSON."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_embodia_loads_no_environment_and_no_heavy_library() -> None:
    loaded = _fresh("import json, sys, embodia, embodia.envs; print(json.dumps(sorted(sys.modules)))")
    assert sorted(m for m in loaded if m.startswith("embodia")) == [
        "embodia",
        "embodia.envs",
        "embodia.envs.registry",
        "embodia.errors",
    ]
    heavy = ("gymnasium", "numpy", "torch", "open3d", "PIL", "scipy", "numba", "transformers")
    assert [m for m in heavy if m in loaded] == []


@pytest.mark.parametrize("gymnasium_first", [False, True])
def test_every_id_is_in_the_registry_whichever_is_imported_first(gymnasium_first: bool) -> None:
    imports = "import gymnasium, embodia" if gymnasium_first else "import embodia, gymnasium"
    ids, finders = _fresh(
        f"import json, sys; {imports}; from embodia.envs import registry; "
        "print(json.dumps([sorted(i for i in gymnasium.registry if i.startswith('embodia/')), "
        "[type(f).__name__ for f in sys.meta_path]]))"
    )
    assert set(ids) == EXPECTED_IDS
    assert "_RegisterAfterGymnasium" not in finders  # one-shot: gone once gymnasium is imported


def test_a_failed_gymnasium_import_registers_on_the_next_that_succeeds(tmp_path: Path) -> None:
    broken = tmp_path / "gymnasium"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    ids = _fresh(
        f"import json, sys; sys.path.insert(0, {str(tmp_path)!r}); import embodia\n"
        "try:\n    import gymnasium\nexcept ImportError as error:\n    assert 'on purpose' in str(error)\n"
        "else:\n    raise SystemExit('the broken gymnasium imported')\n"
        "sys.path.pop(0)\nimport gymnasium\n"
        "print(json.dumps(sorted(i for i in gymnasium.registry if i.startswith('embodia/'))))"
    )
    assert set(ids) == EXPECTED_IDS


def test_the_table_holds_every_id_and_each_entry_point_is_a_gym_env() -> None:
    assert set(registry.ENTRY_POINTS) == EXPECTED_IDS
    for env_id, entry_point in registry.ENTRY_POINTS.items():
        module, _, name = entry_point.partition(":")
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, gymnasium.Env), env_id
        assert gymnasium.spec(env_id).entry_point == entry_point


def test_each_package_registers_its_own_ids() -> None:
    by_package = {
        package: set(registry.entry_points(package)) for package in ("dsr", "mapping", "puzzles", "streams")
    }
    assert by_package == {
        "dsr": {"embodia/DSR-v0", "embodia/DSRInteractive-v0"},
        "mapping": {"embodia/ActiveMapping-v0", "embodia/ActiveMappingWaypoint-v0"},
        "puzzles": {"embodia/Puzzle-v0"},
        "streams": {"embodia/LiveGaming-v0"},
    }
    for module in ("dsr.env", "mapping", "puzzles.env", "streams.env"):
        importlib.import_module(f"embodia.envs.{module}").register_envs()  # again: a no-op, no warning
    registry.register_envs()
    assert {i for i in gymnasium.registry if i.startswith("embodia/")} == EXPECTED_IDS


def test_subpackages_and_their_classes_load_on_first_use() -> None:
    loaded = _fresh(
        "import json, sys, embodia\n"
        "assert embodia.envs.dsr.OPERATIONS\n"
        "from embodia.envs.mapping import ActiveMappingEnv, ENTRY_POINTS\n"
        "assert ActiveMappingEnv.__name__ == 'ActiveMappingEnv' and len(ENTRY_POINTS) == 2\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    assert "embodia.envs.dsr.structures.linear" in loaded
    assert "embodia.envs.mapping.active_mapping" in loaded
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        importlib.import_module("embodia.envs").nothing  # noqa: B018
