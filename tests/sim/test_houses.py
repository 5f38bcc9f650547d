"""Procedural houses v2 (``procedural:seed=N,floors=F[,rooms=K]``): seeded, laid out by
recursive subdivision with corridors, branches and dead ends, open plans, L-shaped rooms,
doorways of varied width, clutter, and a staircase between two floors that the navigation
grid walks; the old spec keeps its houses."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.errors import SceneError
from embodia.sim import EmbeddedSimulator
from embodia.sim.houses import DOOR_WIDTHS, MIN_SIDE, STOREY, generate_house_v2, plan_house
from embodia.sim.loading import load_scene
from embodia.sim.procedural import ROOM_TYPES, parse_procedural_spec
from embodia.sim.scene import category_from_name

HELD_OUT = [1000, 1003, 1007, 1012]  # 1003 and 1007 have two floors, as every fourth one


def _floors(seed: int) -> int:
    return 2 if seed % 4 == 3 else 1


def test_a_spec_gives_the_same_house_and_seeds_differ() -> None:
    a = load_scene("procedural:seed=1003,floors=2")
    b = generate_house_v2(1003, floors=2)
    assert a.mesh_hash() == b.mesh_hash() and a.source == "procedural:seed=1003,floors=2"
    assert len({generate_house_v2(seed).mesh_hash() for seed in range(6)}) == 6
    # the first generation is another family: the same seed without floors= is not this house
    assert load_scene("procedural:seed=1003").mesh_hash() != generate_house_v2(1003).mesh_hash()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("procedural:seed=1,floors=3", "floors must be 1 or 2"),
        ("procedural:seed=1,floors=1,rooms=21", r"rooms must be in 6\.\.20"),
        ("procedural:seed=1,floors=2,rooms=5", r"rooms must be in 6\.\.20"),
        ("procedural:seed=1,rooms=12", r"rooms must be in 2\.\.8"),  # the first generation's range
        ("procedural:seed=1,storeys=2", "expected procedural:seed=N"),
    ],
)
def test_bad_specs_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(SceneError, match=message):
        load_scene(spec)
    assert parse_procedural_spec("procedural:seed=4,floors=2,rooms=12") == {
        "seed": 4,
        "floors": 2,
        "rooms": 12,
    }


@pytest.mark.parametrize("rooms", [6, 13, 20])
def test_plans_have_the_rooms_asked_for_none_too_narrow(rooms: int) -> None:
    for seed in range(3):
        house, _ = plan_house(seed, floors=1, rooms=rooms)
        made = house.rooms
        assert 0.75 * rooms <= len(made) <= rooms
        for room in made:
            assert not room.shape.buffer(-MIN_SIDE / 2 + 0.02).is_empty, "a room narrower than MIN_SIDE"


def test_plans_hold_what_real_floor_plans_do() -> None:
    l_shaped = open_plans = dead_ends = 0
    widths: list[float] = []
    for seed in range(1000, 1012):
        house, _ = plan_house(seed, floors=1)
        floor = house.floors[0]
        kinds = [room.kind for room in floor.rooms]
        assert kinds[0] == "living" and 10 * 0.75 <= len(kinds) <= 20
        l_shaped += sum(len(room.shape.exterior.coords) > 5 for room in floor.rooms)  # more than 4 corners
        open_plans += bool(floor.open_walls) and "kitchen" in kinds
        corridors = list(getattr(floor.corridors, "geoms", [floor.corridors]))
        # a branch that stops short of the outer wall is a dead end
        outline = house.outline.boundary
        dead_ends += (
            sum(1 for c in corridors for p in c.exterior.coords if outline.distance(_point(p)) > 1.0) > 0
        )
        widths += [max(d.bounds[2] - d.bounds[0], d.bounds[3] - d.bounds[1]) for d in floor.doors]
    assert l_shaped >= 5, "non-rectangular rooms"
    assert open_plans >= 10, "living rooms open onto their kitchen"
    assert dead_ends >= 10
    assert min(widths) >= 0.74 and max(widths) <= DOOR_WIDTHS[1] + 1e-6
    assert np.std(widths) > 0.1, "doorways of varied width"


def _point(coords: tuple[float, float]) -> object:
    from shapely.geometry import Point

    return Point(coords)


@pytest.mark.parametrize("seed", HELD_OUT)
def test_every_floor_is_reachable_and_two_floors_are_joined_by_stairs(seed: int) -> None:
    floors = _floors(seed)
    sim = EmbeddedSimulator()
    sim.reset(f"procedural:seed={seed},floors={floors}")
    nav = sim.nav
    assert nav.floors == pytest.approx([0.0, STOREY][:floors], abs=0.01)
    for height in nav.floors:
        on_floor = np.abs(nav.spans - height) < 0.05
        clear, reached = (nav.span_clear & on_floor).sum(), (nav.span_island & on_floor).sum()
        assert reached >= 0.95 * clear, (
            f"floor at {height}: {reached / clear:.2f} of its clear area reachable"
        )
    if floors == 2:
        ground = nav.cell_centre(*np.argwhere(nav.floor_map(0).navigable)[0])
        upper_cells = np.argwhere(nav.floor_map(1).navigable)
        upper = nav.cell_centre(*upper_cells[len(upper_cells) // 2], layers=None)
        upper[1] = STOREY
        path = sim.shortest_path(ground, upper)
        assert path.found and path.points[-1][1] == pytest.approx(STOREY, abs=0.05)
        assert np.ptp(path.points[:, 1]) == pytest.approx(STOREY, abs=0.05)


@pytest.mark.parametrize("seed", HELD_OUT)
def test_every_room_holds_what_says_what_it_is(seed: int) -> None:
    """A kitchen has its counter and refrigerator, a bedroom its bed, a living room its sofa
    and TV: in every room, on both floors (the first placement tried random spots and left
    58 of the 315 rooms of houses 1000-1019 without one, so a kitchen could not be told from
    a dining room)."""
    scene = generate_house_v2(seed, floors=_floors(seed))
    centres = scene.vertices[scene.faces].mean(axis=1)
    for region in scene.regions:
        above = (centres[:, 1] > region.floor_height + 0.01) & (centres[:, 1] < region.floor_height + 2.5)
        held = {scene.categories[c] for c in scene.face_category[region.contains(centres) & above]}
        # a wardrobe is a cabinet, which says nothing of the room; a small bedroom may lack one
        for name in set(ROOM_TYPES[region.kind][0]) - {"wardrobe"}:
            assert category_from_name(name) in held, f"the {region.kind} has no {name}"


def test_a_v2_house_knows_its_rooms_and_where_they_are() -> None:
    house, _ = plan_house(1003, floors=2)
    scene = generate_house_v2(1003, floors=2)
    assert len(scene.regions) == len(house.rooms)
    kinds = [region.kind for region in scene.regions]
    assert "living" in kinds and "kitchen" in kinds and "bedroom" in kinds
    assert sorted({region.floor_height for region in scene.regions}) == pytest.approx([0.0, STOREY])
    sim = EmbeddedSimulator()
    sim.reset(scene)
    for floor in range(2):
        top = sim.nav.floor_map(floor)
        cells = top.from_grid(*np.nonzero(top.navigable))
        here = [r for r in scene.regions if abs(r.floor_height - top.floor_height) < 0.01]
        inside = np.stack([r.contains(cells) for r in here])
        assert inside.sum(axis=0).max() == 1, "rooms of one floor do not overlap"
        for region, mask in zip(here, inside, strict=True):
            area = mask.sum() * top.resolution**2
            outline = np.asarray(region.outline)
            x, z = outline[:, 0], outline[:, 1]
            polygon = 0.5 * abs(np.dot(x[:-1], z[1:]) - np.dot(x[1:], z[:-1]))  # the shoelace formula
            # its navigable cells: most of the room, less walls, furniture and the radius
            assert 0.2 * polygon < area < polygon, region.kind
    assert load_scene("procedural:seed=3").regions == []  # the first generation knows none
