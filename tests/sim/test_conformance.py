"""The embedded backend passes the protocol's conformance suite on three kinds of scene."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenes import box_room, shared_scene

from embodia.sim import EmbeddedSimulator, SimConfig, Simulator
from embodia.sim.conformance import WORLDS, check_multilevel, check_simulator


def test_embedded_simulator_is_a_simulator() -> None:
    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=0,rooms=2")
    assert isinstance(sim, Simulator)


@pytest.mark.parametrize("scene", ["procedural:seed=0,rooms=5", "procedural:seed=5,rooms=2"])
def test_conformance_procedural(scene: str) -> None:
    check_simulator(EmbeddedSimulator(), scene)


def test_conformance_box_room_with_other_turn_angle() -> None:
    check_simulator(EmbeddedSimulator(SimConfig(turn_angle_deg=10.0)), box_room(6.0, 5.0))


def test_conformance_habitat_stage() -> None:
    check_simulator(EmbeddedSimulator(), shared_scene("simple_room.glb"))


def test_conformance_across_levels() -> None:
    check_multilevel(EmbeddedSimulator())


def test_conformance_across_levels_from_exported_files(tmp_path: Path) -> None:
    files = {name: world().export(tmp_path / f"{name}.glb") for name, world in WORLDS.items()}
    check_multilevel(EmbeddedSimulator(), {name: str(path) for name, path in files.items()})
