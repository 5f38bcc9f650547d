"""The layered navigation grid on scenes with more than one level: two floors joined by
stairs, a ramp up to a platform, and open undulating terrain (which a one-level grid refused
with "no floor"). Numbers are checked against the scenes' own geometry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scenes import (
    CAT,
    STAIR_RISE,
    UPPER_FLOOR,
    box_room,
    ramp_room,
    terrain_height,
    terrain_patch,
    two_floor_house,
    wedge,
)

from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.scene import Scene, concatenate

R = 0.1
EAST = -math.pi / 2  # the yaw that faces +x


def concatenate_parts(scene: Scene, part: tuple[np.ndarray, np.ndarray]) -> Scene:
    """``scene`` with one more part (a wall-category solid)."""
    vertices, faces = part
    return concatenate(
        [
            (scene.vertices, scene.faces, 0, 1),
            (vertices, faces, CAT["wall"], 2),
        ],
        name=scene.name,
    )


@pytest.fixture(scope="module")
def house() -> EmbeddedSimulator:
    sim = EmbeddedSimulator()
    sim.reset(two_floor_house(), Pose((4.0, 0.0, 4.0), 0.0))
    return sim


def test_two_floors_are_found_with_their_areas(house: EmbeddedSimulator) -> None:
    nav = house.nav
    assert nav.floors == pytest.approx([0.0, UPPER_FLOOR], abs=0.01)
    ground, upper = nav.floor_areas()
    assert ground + upper == pytest.approx(nav.navigable_area)
    # A step belongs to the highest floor at or below it: steps 1-18 to the ground, 19-20 up.
    # Ground: 7.8 x 5.8 within the walls, less the flight's footprint from step 2 on with the
    # radius beside it (5.7 x 1.0), plus steps 1-18 walkable 0.8 wide (5.4 x 0.8).
    assert ground == pytest.approx(7.8 * 5.8 - 5.7 * 1.0 + 5.4 * 0.8, abs=1.0)
    # Upper: 7.8 x 4.5 beyond the opening (eroded by the radius at its edge), the landing at
    # the top (0.9 x 1.3), the nook at the other end (0.8 x 1.3) and steps 19-20 (0.6 x 0.8).
    assert upper == pytest.approx(7.8 * 4.5 + 0.9 * 1.3 + 0.8 * 1.3 + 0.6 * 0.8, abs=1.0)
    assert nav.floor_of([4.0, 0.0, 4.0]) == 0 and nav.floor_of([4.0, UPPER_FLOOR, 4.0]) == 1
    # a column under the upper floor holds both
    assert nav.floor_at([4.0, 0.2, 4.0]) == pytest.approx(0.0, abs=1e-3)
    assert nav.floor_at([4.0, 2.7, 4.0]) == pytest.approx(UPPER_FLOOR, abs=1e-3)
    assert house.topdown().floor_height == pytest.approx(0.0, abs=0.01)
    maps = [nav.floor_map(f) for f in range(2)]
    assert [m.explorable_area_m2 for m in maps] == pytest.approx([ground, upper])
    with pytest.raises(ValueError, match="floor 2 does not exist"):
        nav.floor_map(2)


def test_the_stairs_are_walkable_and_their_open_side_is_a_ledge(house: EmbeddedSimulator) -> None:
    for step in range(20):
        x = 1.15 + 0.3 * step
        height = STAIR_RISE * (step + 1)
        assert house.is_navigable([x, height, 0.5]), f"step {step + 1}"
        assert house.nav.floor_at([x, height, 0.5]) == pytest.approx(height, abs=1e-3)
    # beside the stairs (z in [1, 1.3]) the ground floor is far below: no step links to it
    assert not house.nav.segment_clear([4.0, 1.5, 0.5], [4.0, 0.0, 1.2])


def test_a_walk_off_the_upper_floor_stops_at_its_edge(house: EmbeddedSimulator) -> None:
    # From the upper floor across the stairwell: the ground floor in the gap beside the
    # flight (3 m down), the cells along the flight's side (no span: a ledge), the flight.
    # The walk ends on the upper floor, even though a later sample has no span at all.
    nav = house.nav
    start = np.array([4.0, UPPER_FLOOR, 1.5])
    fraction = nav.free_fraction(start, [4.0, UPPER_FLOOR, 0.5])
    end = start + fraction * np.array([0.0, 0.0, -1.0])
    assert end[2] > 1.3 and nav.floor_at(end) == pytest.approx(UPPER_FLOOR, abs=1e-3)


def test_a_path_between_floors_climbs_the_stairs(house: EmbeddedSimulator) -> None:
    start, goal = np.array([4.0, 0.0, 4.0]), np.array([4.0, UPPER_FLOOR, 4.0])
    path = house.shortest_path(start, goal)
    assert path.found
    assert path.points[0] == pytest.approx(start, abs=1e-4) and path.points[-1] == pytest.approx(
        goal, abs=1e-4
    )
    # it reaches the stairs' foot (x near 1) and leaves them at the top (x near 7)
    assert path.points[:, 0].min() < 1.3 and path.points[:, 0].max() > 6.8
    heights = path.points[:, 1]
    assert np.all(np.diff(heights) >= -1e-3), "the path never goes down"
    # no shorter than the straight legs to the foot, up the flight and back, no longer by 10%
    foot, top = np.array([1.0, 0.0, 0.9]), np.array([7.0, UPPER_FLOOR, 0.9])
    legs = np.linalg.norm(foot - start) + np.linalg.norm(top - foot) + np.linalg.norm(goal - top)
    assert 0.9 * legs <= path.geodesic_distance <= 1.1 * legs
    assert house.geodesic_distance(start, goal) == pytest.approx(path.geodesic_distance)


def test_goto_and_steps_take_the_agent_upstairs(house: EmbeddedSimulator) -> None:
    house.reset(two_floor_house(), Pose((4.0, 0.0, 4.0), 0.0))
    result = house.goto([4.0, UPPER_FLOOR, 4.0])
    assert result.reached
    assert result.pose.position[1] == pytest.approx(UPPER_FLOOR, abs=1e-3)
    assert house.nav.floor_of(result.pose.position) == 1
    # walking the flight with move_forward: 0.25 m a step, the agent's height follows the steps
    house.reset(two_floor_house(), Pose((0.5, 0.0, 0.5), EAST))
    heights = [house.step("move_forward").pose.position[1] for _ in range(30)]
    assert heights[-1] == pytest.approx(UPPER_FLOOR, abs=1e-3)
    assert np.all(np.diff(heights) <= STAIR_RISE * 2 + 1e-4) and np.all(np.diff(heights) >= -1e-4)


def test_a_ramp_links_the_floor_to_a_platform_whose_other_edges_are_drops() -> None:
    sim = EmbeddedSimulator()
    sim.reset(ramp_room(), Pose((1.0, 0.0, 2.0), EAST))
    assert sim.nav.floors == pytest.approx([0.0]), "a platform on the same island is not a floor of its own"
    start, goal = [1.0, 0.0, 2.0], [8.0, 1.0, 2.0]
    straight = 2.0 + math.hypot(3.0, 1.0) + 2.0  # along the floor, up the ramp, on the platform
    assert sim.geodesic_distance(start, goal) == pytest.approx(straight, rel=0.01)
    # up the ramp's slope, the agent's height is the ramp's
    assert sim.nav.floor_at([4.5, 0.5, 2.0]) == pytest.approx(0.5, abs=0.02)
    # from the floor beside the platform (z = 0.5) onto it: round by the ramp, not up the drop
    below, above = [5.8, 0.0, 0.5], [6.3, 1.0, 0.5]
    assert sim.geodesic_distance(below, above) > 2.5
    assert not sim.is_navigable([6.05, 1.0, 0.5])  # the platform's edge, eroded by the radius
    assert sim.is_navigable([6.2, 1.0, 0.5])


def test_terrain_is_one_floor_with_paths_over_its_hills() -> None:
    sim = EmbeddedSimulator()
    sim.reset(terrain_patch())
    nav = sim.nav
    assert len(nav.floors) == 1
    # all of it is walkable but a radius-wide band at its open edges (ledges)
    assert nav.navigable_area == pytest.approx((20 - 2 * R) ** 2, rel=0.01)
    x, z = 7.3, 12.1
    assert nav.floor_at([x, 0.0, z]) == pytest.approx(
        float(terrain_height(np.array(x), np.array(z))), abs=0.01
    )
    start = np.array([2.0, float(terrain_height(np.array(2.0), np.array(2.0))), 2.0])
    goal = np.array([18.0, float(terrain_height(np.array(18.0), np.array(18.0))), 18.0])
    path = sim.shortest_path(start, goal)
    assert path.found
    # the straight line in plan, over the hills: its 3D length is the path's
    samples = np.linspace(0, 1, 2001)[:, None] * (goal - start) + start
    samples[:, 1] = terrain_height(samples[:, 0], samples[:, 2])
    over_hills = float(np.linalg.norm(np.diff(samples, axis=0), axis=1).sum())
    assert np.linalg.norm(goal - start) <= path.geodesic_distance <= over_hills * 1.01
    for a, b in zip(path.points[:-1], path.points[1:], strict=True):
        assert nav.segment_clear(a, b)


@pytest.mark.parametrize(("sill", "crossed"), [(0.15, True), (0.3, False)])
def test_a_sill_is_crossed_only_within_max_climb(sill: float, crossed: bool) -> None:
    room = box_room(6.0, 4.0, extra=[((2.0, 0.0, 0.0), (2.3, sill, 4.0), "object")])
    sim = EmbeddedSimulator()
    sim.reset(room, Pose((1.0, 0.0, 2.0), EAST))
    far = [4.0, 0.0, 2.0]
    assert sim.is_navigable(far) == crossed
    if crossed:
        assert 3.0 <= sim.geodesic_distance([1.0, 0.0, 2.0], far) <= 3.0 + 2 * sill
    else:  # the far side is another island: a goal there snaps to this side of the sill
        assert sim.snap_point(far)[0] < 2.0


def test_a_slope_steeper_than_max_slope_is_not_walked() -> None:
    sim = EmbeddedSimulator()
    steep = concatenate_parts(box_room(6.0, 4.0), wedge(2.0, 2.5, 0.0, 4.0, 1.0))  # 63 deg
    sim.reset(steep, Pose((1.0, 0.0, 2.0), EAST))
    assert not sim.is_navigable([2.25, 0.5, 2.0])
    assert not sim.is_navigable([4.0, 0.0, 2.0]) and sim.snap_point([4.0, 0.0, 2.0])[0] < 2.0


def test_any_backends_map_draws_as_a_picture_with_the_agent(house: EmbeddedSimulator) -> None:
    from embodia.sim.visualize import navigable_image

    house.reset(two_floor_house(), Pose((4.0, 0.0, 4.0), 0.0))
    top = house.topdown()
    image = navigable_image(top, house.pose, scale=2)
    assert image.shape == (2 * top.navigable.shape[0], 2 * top.navigable.shape[1], 3)
    row, col = top.to_grid(house.pose.array)
    assert tuple(image[2 * int(row) + 1, 2 * int(col) + 1]) == (220, 30, 30)  # the agent, in red
    light = np.all(image == 235, axis=-1)
    assert light.sum() == pytest.approx(4 * top.navigable.sum(), rel=0.05)  # less the agent's disc
