"""Navigable area, shortest paths and collision safety against analytic answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenes import box_room, l_corridor

from embodia.sim import EmbeddedSimulator, Pose

R = 0.1


@pytest.mark.parametrize(("width", "depth"), [(5.0, 4.0), (3.3, 7.1)])
def test_empty_room_navigable_area(width: float, depth: float) -> None:
    sim = EmbeddedSimulator()
    sim.reset(box_room(width, depth))
    expected = (width - 2 * R) * (depth - 2 * R)
    assert sim.nav.navigable_area == pytest.approx(expected, rel=0.02)
    assert sim.topdown(0.05).explorable_area_m2 == pytest.approx(expected, rel=0.02)
    assert sim.topdown(0.1).explorable_area_m2 == pytest.approx(expected, rel=0.05)


def test_furniture_blocks_its_footprint_plus_radius() -> None:
    table = ((2.0, 0.0, 1.5), (3.0, 0.75, 2.5), "table")  # 1 x 1 m, top inside the agent's band
    low = ((0.5, 0.0, 0.5), (1.0, 0.15, 1.0), "object")  # 15 cm step: below max_climb
    sim = EmbeddedSimulator()
    sim.reset(box_room(5.0, 4.0, extra=[table, low]))
    blocked = (1 + 2 * R) ** 2 - (4 - math.pi) * R**2  # Minkowski sum of a square and a disc
    assert sim.nav.navigable_area == pytest.approx(4.8 * 3.8 - blocked, rel=0.02)
    assert not sim.is_navigable([2.5, 0.0, 2.0])
    assert sim.is_navigable([0.75, 0.15, 0.75])  # climbable


def _around_corner(a: np.ndarray, b: np.ndarray, corner: np.ndarray, r: float) -> float:
    """Length of the shortest path from a to b that wraps a disc of radius r at corner."""
    da, db = np.linalg.norm(a - corner), np.linalg.norm(b - corner)
    va, vb = (a - corner) / da, (b - corner) / db
    between = 2 * math.pi - math.acos(float(va @ vb))  # around the free side of the corner
    arc = between - math.acos(r / da) - math.acos(r / db)
    return math.sqrt(da**2 - r**2) + math.sqrt(db**2 - r**2) + r * arc


def test_l_corridor_shortest_path_matches_analytic_length() -> None:
    sim = EmbeddedSimulator()
    sim.reset(l_corridor(arm=5.0, width=1.0))
    a, b = np.array([4.5, 0.0, 0.5]), np.array([0.5, 0.0, 4.5])
    path = sim.shortest_path(a, b)
    expected = _around_corner(a[[0, 2]], b[[0, 2]], np.array([1.0, 1.0]), R)
    assert path.geodesic_distance == pytest.approx(expected, rel=0.03)
    assert path.geodesic_distance >= expected - 0.02  # never shorter than the true geodesic
    assert all(sim.nav.segment_clear(p, q) for p, q in zip(path.points, path.points[1:], strict=False))
    assert sim.geodesic_distance(a, a + [0.0, 0.0, 0.2]) == pytest.approx(0.2, abs=1e-6)


def test_unreachable_goal_has_infinite_geodesic() -> None:
    sim = EmbeddedSimulator()
    sim.reset(
        box_room(4.0, 4.0, extra=[((1.9, 0.0, 0.0), (2.1, 2.5, 4.0), "wall")]),
        Pose((1.0, 0.0, 2.0)),
    )
    assert sim.is_navigable([1.0, 0.0, 2.0]) and not sim.is_navigable([3.0, 0.0, 2.0])
    snapped = sim.snap_point([3.0, 0.0, 2.0])  # the other half is another island
    assert snapped[0] < 1.9


def test_move_forward_stops_at_walls_without_passing() -> None:
    sim = EmbeddedSimulator()
    sim.reset(box_room(3.0, 3.0), Pose((1.5, 0.0, 1.5), 0.0))  # facing -z towards z = 0
    collided = [sim.step("move_forward").collided for _ in range(10)]
    assert collided[:5] == [False] * 5 and collided[-1]
    assert sim.pose.position[2] == pytest.approx(R, abs=0.05)


_HOUSE = EmbeddedSimulator()
_HOUSE.reset("procedural:seed=1,rooms=4")
_CELLS = np.argwhere(_HOUSE.nav.island)


@settings(max_examples=25, deadline=None)
@given(
    cell=st.integers(0, len(_CELLS) - 1),
    yaw=st.floats(-math.pi, math.pi),
    actions=st.lists(
        st.sampled_from(["move_forward", "move_forward", "turn_left", "turn_right"]), max_size=40
    ),
)
def test_no_action_sequence_enters_geometry_or_leaves_the_island(
    cell: int, yaw: float, actions: list[str]
) -> None:
    sim = _HOUSE
    start = sim.nav.cell_centre(*_CELLS[cell])
    sim.reset("procedural:seed=1,rooms=4", Pose.from_array(start, yaw))
    heights = np.linspace(sim.config.max_climb + 0.05, sim.config.agent_height, 12)
    for action in actions:
        pose = sim.step(action).pose  # type: ignore[arg-type]
        assert sim.is_navigable(pose.position)
        axis = np.array([[pose.position[0], pose.position[1] + h, pose.position[2]] for h in heights])
        clearance = float(sim.renderer.raycaster.distance(axis).min())
        assert clearance > R - sim.config.nav_resolution, f"agent cylinder enters geometry at {pose}"
