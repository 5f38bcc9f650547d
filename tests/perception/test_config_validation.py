"""Settings of the simulator and of perception reject non-positive sizes with one exact line."""

from __future__ import annotations

import math

import pytest

from embodia.perception.bev import BEVConfig
from embodia.perception.regions import RegionConfig
from embodia.perception.waypoints import WaypointConfig
from embodia.sim.protocol import SimConfig

POSITIVE_FIELDS = {
    SimConfig: "forward_step turn_angle_deg agent_height agent_radius nav_resolution",
    BEVConfig: "resolution max_range floor_band grow_margin",
    RegionConfig: "passage_width category_reach",
    WaypointConfig: "sensor_height max_distance sensing_radius floor_band obstacle_top max_snap_distance",
}
CASES = [(config, name) for config, names in POSITIVE_FIELDS.items() for name in names.split()]


@pytest.mark.parametrize(("config", "name"), CASES, ids=[f"{c.__name__}.{n}" for c, n in CASES])
@pytest.mark.parametrize("bad", [0.0, -0.5, math.inf, math.nan])
def test_each_positive_field_is_checked_with_its_name(config: type, name: str, bad: float) -> None:
    config()  # the defaults are valid
    with pytest.raises(ValueError) as caught:
        config(**{name: bad})
    assert str(caught.value) == f"{config.__name__}.{name} must be a positive number, got {bad}"
