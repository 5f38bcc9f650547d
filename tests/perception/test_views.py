"""Perspective views cut out of the panorama match what a pinhole camera turned that way
renders, pixel for pixel up to the panorama's resolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodia.perception.views import panorama_view
from embodia.sim import EmbeddedSimulator, Pose


@pytest.fixture(scope="module")
def house() -> EmbeddedSimulator:
    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=3")
    return sim


@pytest.mark.parametrize("direction_deg", [0.0, 90.0, -135.0, 200.0])
def test_a_view_is_what_a_camera_turned_clockwise_that_far_sees(
    house: EmbeddedSimulator, direction_deg: float
) -> None:
    panorama = house.panorama(512, 1024)
    view = panorama_view(
        panorama["rgb"], panorama["semantic"], direction_deg, hfov_deg=90.0, height=64, width=64
    )
    # turning clockwise from above is a smaller yaw (yaw counts counter-clockwise)
    turned = Pose(house.pose.position, house.pose.yaw - math.radians(direction_deg))
    camera = house.renderer.pinhole(
        turned.sensor_position(house.config.sensor_height), turned.yaw, 64, 64, 90.0
    )
    agree = np.mean(view.semantic == camera.semantic)
    assert agree > 0.95, agree
    assert view.rgb.shape == (64, 64, 3) and view.rgb.dtype == np.uint8
    assert np.mean(np.abs(view.rgb.astype(int) - camera.rgb.astype(int)) <= 8) > 0.9


def test_a_view_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="positive size"):
        panorama_view(np.zeros((8, 16, 3), np.uint8), np.zeros((8, 16), np.int32), 0.0, height=0)
