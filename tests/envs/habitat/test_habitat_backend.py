"""habitat backend: its pure conversions here, its conformance suite where habitat_sim imports."""

from __future__ import annotations

import numpy as np
import pytest
from scenes import analytic_box_range, shared_scene

from embodia.envs.habitat import is_habitat_available
from embodia.envs.habitat.simulator import HabitatSimulator, cube_depth_to_radial_range, instance_to_category
from embodia.envs.sim.geometry import equirect_directions
from embodia.errors import BackendUnavailableError


def test_cube_face_depth_converts_to_radial_range() -> None:
    h, w, size = 64, 128, (6.0, 2.5, 4.0)
    camera = np.array([2.3, 1.5, 1.7])
    d = equirect_directions(h, w, dtype=np.float64).reshape(-1, 3)
    radial, _ = analytic_box_range(camera, d, size)
    planar = radial * np.abs(d).max(axis=1)  # what habitat's cubemap shader reports
    converted = cube_depth_to_radial_range(planar.reshape(h, w), h, w)
    assert np.abs(converted.reshape(-1) - radial).max() < 1e-4
    assert cube_depth_to_radial_range(np.zeros((h, w)), h, w).max() == 0


def test_instance_ids_map_to_categories() -> None:
    table = np.array([0, 5, 7], dtype=np.int32)
    assert instance_to_category(np.array([[0, 1], [2, 9]]), table).tolist() == [[0, 5], [7, 0]]


@pytest.mark.skipif(is_habitat_available(), reason="habitat_sim is installed here")
def test_missing_habitat_gives_the_install_hint() -> None:
    with pytest.raises(BackendUnavailableError, match="conda install habitat-sim"):
        HabitatSimulator()


@pytest.mark.habitat
def test_habitat_conformance() -> None:
    pytest.importorskip(
        "habitat_sim", reason="habitat_sim is not installed (conda only); this runs where it imports"
    )
    from embodia.envs.sim.conformance import check_simulator

    check_simulator(HabitatSimulator(), shared_scene("simple_room.glb"))
