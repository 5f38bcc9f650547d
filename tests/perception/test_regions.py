"""Regions: rooms split at doors, stable ids, frontiers and categories per region."""

from __future__ import annotations

import numpy as np
import pytest
from bev_maps import bev_from_cells
from scenes import CAT, box_room
from scipy import ndimage

from embodia.perception.bev import FREE, OCCUPIED, UNKNOWN, BEVMap
from embodia.perception.regions import RegionConfig, RegionTracker, segment_regions
from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.procedural import _room_plan
from embodia.sim.scene import CATEGORIES

PANO = (128, 256)
HOUSE_SEED, HOUSE_ROOMS = 2, 4
HOUSE = f"procedural:seed={HOUSE_SEED},rooms={HOUSE_ROOMS}"
# Two 3 x 3 m rooms (x in [0, 3] and [3.2, 6.2]) joined by a 0.8 m door at z in [1.1, 1.9];
# a bed in room A, a table in room B.
DOOR = (1.1, 1.9)
ROOM_A_CENTRE = np.array([1.5, 0.0, 1.5])
ROOM_B_CENTRE = np.array([4.7, 0.0, 1.5])
TWO_ROOMS = box_room(
    6.2,
    3.0,
    extra=[
        ((3.0, 0.0, 0.0), (3.2, 2.5, DOOR[0]), "wall"),
        ((3.0, 0.0, DOOR[1]), (3.2, 2.5, 3.0), "wall"),
        ((0.1, 0.0, 0.1), (1.5, 0.55, 1.0), "bed"),
        ((4.4, 0.0, 2.3), (5.4, 0.75, 2.9), "table"),
    ],
)


def observe(sim: EmbeddedSimulator, bev: BEVMap, scene: object, point: np.ndarray) -> None:
    """Stand at (the navigable point nearest) ``point`` and integrate a panorama."""
    sim.reset(scene, Pose.from_array(sim.nav.snap_point(point)))  # type: ignore[arg-type]
    bev.integrate(sim.panorama(*PANO))


def label_at(bev: BEVMap, labels: np.ndarray, point: np.ndarray) -> int:
    row, col = bev.to_grid(point)
    return int(labels[row, col])


@pytest.fixture(scope="module")
def two_room_sim() -> EmbeddedSimulator:
    sim = EmbeddedSimulator()
    sim.reset(TWO_ROOMS, Pose.from_array(ROOM_A_CENTRE))
    return sim


@pytest.fixture(scope="module")
def two_rooms(two_room_sim: EmbeddedSimulator) -> BEVMap:
    bev = BEVMap(two_room_sim.categories)
    for point in (ROOM_A_CENTRE, ROOM_B_CENTRE):
        observe(two_room_sim, bev, TWO_ROOMS, point)
    return bev


@pytest.fixture(scope="module")
def house() -> tuple[EmbeddedSimulator, BEVMap, list[tuple[float, float, float, float]]]:
    """The procedural house explored with a panorama in every room and the corridor;
    returns the rooms (and corridor) as world rectangles (x0, z0, x1, z1)."""
    rooms, corridor = _room_plan(np.random.default_rng(HOUSE_SEED), HOUSE_ROOMS)
    # The plan is laid out in (u, v) with world x = u, z = -v.
    rects = [(r.u0, -r.v1, r.u1, -r.v0) for r in rooms]
    rects.append((corridor[0], -corridor[3], corridor[2], -corridor[1]))
    sim = EmbeddedSimulator()
    sim.reset(HOUSE)
    bev = BEVMap(sim.categories)
    for x0, z0, x1, z1 in rects:
        observe(sim, bev, HOUSE, np.array([(x0 + x1) / 2, 0.0, (z0 + z1) / 2]))
    return sim, bev, rects


def grid_map(state: np.ndarray, row0: int = -7, col0: int = 11) -> BEVMap:
    """A BEVMap with the given UNKNOWN / FREE / OCCUPIED cells (5 cm): free cells seen as floor
    (3 votes), occupied ones as wall (5 votes)."""
    free = state == FREE
    return bev_from_cells(state, row0, col0, np.where(free, CAT["floor"], CAT["wall"]), np.where(free, 3, 5))


def rooms_with_door(door_cells: int) -> np.ndarray:
    """Two 60 x 60 cell (3 x 3 m) free rooms side by side, walls around, a door between."""
    state = np.full((70, 135), UNKNOWN, dtype=np.uint8)
    state[2:68, 2:133] = OCCUPIED
    state[5:65, 5:65] = FREE
    state[5:65, 70:130] = FREE
    top = 35 - door_cells // 2
    state[top : top + door_cells, 65:70] = FREE
    return state


# ---------------------------------------------------------------------- segmentation


def test_house_regions_separate_the_rooms(house) -> None:
    sim, bev, rects = house
    labels = segment_regions(bev)
    topdown = sim.topdown(bev.config.resolution)
    nav_points = topdown.from_grid(*np.nonzero(topdown.navigable))
    nav_rows, nav_cols = bev.to_grid(nav_points)
    explored = bev.explored[nav_rows, nav_cols]
    majority = []
    for x0, z0, x1, z1 in rects:
        inside = (
            (nav_points[:, 0] > x0 + 0.2)
            & (nav_points[:, 0] < x1 - 0.2)
            & (nav_points[:, 2] > z0 + 0.2)
            & (nav_points[:, 2] < z1 - 0.2)
        )
        assert explored[inside].mean() > 0.6, "every room's floor was mostly seen"
        room_labels = labels[nav_rows[inside], nav_cols[inside]]
        room_labels = room_labels[room_labels >= 0]
        top = np.bincount(room_labels).argmax()
        assert np.mean(room_labels == top) > 0.9, "a room is (almost) one region"
        majority.append(int(top))
    n_regions = int(labels.max()) + 1
    assert abs(n_regions - len(rects)) <= 1
    assert len(set(majority)) == len(rects), "no two rooms share a region"

    # Room centres (doors between them) are in different regions; two points of one room
    # are in the same one.
    centres = [sim.nav.snap_point([(x0 + x1) / 2, 0.0, (z0 + z1) / 2]) for x0, z0, x1, z1 in rects]
    centre_labels = [label_at(bev, labels, c) for c in centres]
    assert min(centre_labels) >= 0 and len(set(centre_labels)) == len(rects)
    x0, z0, x1, z1 = rects[0]
    near_corner = sim.nav.snap_point([x0 + 0.6, 0.0, z0 + 0.6])
    assert label_at(bev, labels, near_corner) == centre_labels[0]


def test_two_rooms_joined_by_a_door_are_two_regions(two_rooms: BEVMap) -> None:
    labels = segment_regions(two_rooms)
    assert labels.max() + 1 == 2
    a, b = label_at(two_rooms, labels, ROOM_A_CENTRE), label_at(two_rooms, labels, ROOM_B_CENTRE)
    assert {a, b} == {0, 1}
    # The border runs through the doorway (the narrowest place), within a cell or two.
    door_row, _ = two_rooms.to_grid(np.array([3.1, 0.0, sum(DOOR) / 2]))
    row_labels = labels[int(door_row)]
    cols = np.flatnonzero(row_labels >= 0)
    change = cols[np.flatnonzero(np.diff(row_labels[cols]))[0]]
    border_x = float(two_rooms.from_grid(door_row, change)[0])
    assert border_x == pytest.approx(3.1, abs=0.15)


def test_passage_width_decides_what_separates(two_rooms: BEVMap) -> None:
    # A 0.8 m door is narrower than 1.0 m (two regions) but not than 0.6 m (one region).
    assert segment_regions(two_rooms, RegionConfig(passage_width=0.6)).max() + 1 == 1
    synthetic = grid_map(rooms_with_door(door_cells=16))  # 0.8 m
    assert segment_regions(synthetic).max() + 1 == 2
    wide = grid_map(rooms_with_door(door_cells=30))  # 1.5 m: an opening, not a door
    assert segment_regions(wide).max() + 1 == 1


def test_small_pieces_merge_and_isolated_specks_are_dropped() -> None:
    state = np.full((100, 135), UNKNOWN, dtype=np.uint8)
    state[:70] = rooms_with_door(door_cells=16)
    state[68:98, 85:119] = OCCUPIED
    state[70:94, 90:114] = FREE  # a 1.2 x 1.2 m closet below room B ...
    state[65:70, 94:110] = FREE  # ... behind a 0.8 m door
    speck = (slice(0, 2), slice(0, 4))
    state[speck] = FREE  # 2 x 4 free cells outside the walls, connected to nothing
    bev = grid_map(state)
    default = segment_regions(bev)
    assert default.max() + 1 == 3, "the closet is a room of its own at min_area_m2 0.5"
    assert np.all(default[speck] == -1), "a speck below min_area_m2 with no neighbour is dropped"
    merged = segment_regions(bev, RegionConfig(min_area_m2=2.0))
    assert merged.max() + 1 == 2
    assert np.all(merged[70:94, 90:114] == merged[35, 100]), "the closet joins room B"
    assert merged[35, 30] != merged[35, 100]
    # Without a minimum area the speck is a region too.
    assert segment_regions(bev, RegionConfig(min_area_m2=0.0)).max() + 1 == 4


def test_unknown_specks_inside_a_room_do_not_split_it() -> None:
    state = rooms_with_door(door_cells=30)
    state[10:60:4, 10:125:4] = UNKNOWN  # a sieve of single unseen cells over both rooms
    assert segment_regions(grid_map(state)).max() + 1 == 1


def test_empty_map_and_bad_config() -> None:
    assert segment_regions(BEVMap(list(CATEGORIES))).shape == (0, 0)
    assert RegionTracker().update(BEVMap(list(CATEGORIES))) == []
    for bad in ({"passage_width": 0.0}, {"min_area_m2": -1.0}, {"match_iou": 0.0}, {"match_iou": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            RegionConfig(**bad)


# ---------------------------------------------------------------------- ids


def test_ids_survive_the_same_map_and_a_grown_grid(two_rooms: BEVMap) -> None:
    tracker = RegionTracker()
    first = tracker.update(two_rooms)
    second = tracker.update(two_rooms)
    assert [r.id for r in first] == [r.id for r in second] == [0, 1]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.cells, b.cells)

    grown = BEVMap(two_rooms.categories, two_rooms.config)
    for name in ("free_count", "occupied_count", "max_height", "semantic_count"):
        setattr(grown, name, getattr(two_rooms, name).copy())
    grown.row0, grown.col0 = two_rooms.row0, two_rooms.col0
    x0, z0 = grown.origin
    grown.ensure_covers((x0 - 4.0, x0), (z0 - 2.0, z0))  # shifts every cell index
    assert (grown.row0, grown.col0) != (two_rooms.row0, two_rooms.col0)
    third = tracker.update(grown)
    assert [r.id for r in third] == [0, 1]
    shift = np.array([two_rooms.row0 - grown.row0, two_rooms.col0 - grown.col0])
    for old, new in zip(first, third, strict=True):
        np.testing.assert_array_equal(old.cells + shift, new.cells)
        np.testing.assert_allclose(old.centroid, new.centroid)
    np.testing.assert_array_equal(
        tracker.label_image(grown)[shift[0] :, shift[1] :][: two_rooms.shape[0], : two_rooms.shape[1]],
        tracker.label_image(two_rooms),
    )


def test_new_panorama_in_room_b_keeps_room_a_id(two_room_sim: EmbeddedSimulator) -> None:
    bev = BEVMap(two_room_sim.categories)
    tracker = RegionTracker()
    observe(two_room_sim, bev, TWO_ROOMS, ROOM_A_CENTRE)
    before = tracker.update(bev)
    room_a = label_at(bev, tracker.label_image(bev), ROOM_A_CENTRE)
    assert room_a >= 0
    observe(two_room_sim, bev, TWO_ROOMS, ROOM_B_CENTRE)
    after = tracker.update(bev)
    labels = tracker.label_image(bev)
    assert label_at(bev, labels, ROOM_A_CENTRE) == room_a
    room_b = label_at(bev, labels, ROOM_B_CENTRE)
    assert room_b >= 0 and room_b != room_a
    assert room_b not in {r.id for r in before}, "a new region gets a fresh id"
    assert {r.id for r in after} == {room_a, room_b}


def test_a_region_that_changes_beyond_the_iou_gets_a_fresh_id() -> None:
    tracker = RegionTracker(RegionConfig(match_iou=0.9))
    state = rooms_with_door(door_cells=16)
    state[5:65, 70:130] = UNKNOWN  # only room A seen ...
    state[5:65, 35:65] = UNKNOWN  # ... and only half of it
    (half,) = tracker.update(grid_map(state))
    full = tracker.update(grid_map(rooms_with_door(door_cells=16)))
    assert half.id not in {r.id for r in full}  # IoU 0.5 < 0.9
    assert sorted(r.id for r in full) == [1, 2]


# ---------------------------------------------------------------------- contents


def test_regions_carry_their_frontiers_and_categories(two_room_sim: EmbeddedSimulator) -> None:
    bev = BEVMap(two_room_sim.categories)
    observe(two_room_sim, bev, TWO_ROOMS, ROOM_A_CENTRE)
    observe(two_room_sim, bev, TWO_ROOMS, ROOM_B_CENTRE + [0.5, 0.0, -0.7])
    segments = bev.frontiers()
    tracker = RegionTracker()
    regions = tracker.update(bev, frontiers=segments)
    labels = tracker.label_image(bev)
    by_id = {r.id: r for r in regions}
    a = by_id[label_at(bev, labels, ROOM_A_CENTRE)]
    b = by_id[label_at(bev, labels, ROOM_B_CENTRE)]

    handed_out = {s.id: r.id for r in regions for s in r.frontiers}
    assert sum(len(r.frontiers) for r in regions) == len(handed_out), "each segment goes to one region"
    eight = np.ones((3, 3), dtype=bool)
    touches = {r.id: ndimage.binary_dilation(labels == r.id, structure=eight) for r in regions}
    for segment in segments:
        rows, cols = segment.cells[:, 0], segment.cells[:, 1]
        votes = {rid: int(mask[rows, cols].sum()) for rid, mask in touches.items()}
        if max(votes.values()) == 0:
            assert segment.id not in handed_out
        else:
            assert votes[handed_out[segment.id]] == max(votes.values())
    assert len(handed_out) >= len(segments) // 2
    assert any(r.frontiers for r in regions)  # room A, seen whole from its centre, may have none

    assert a.categories[0][0] == "bed"
    assert "table" in dict(b.categories) and "bed" not in dict(b.categories)
    for region in regions:
        names = [name for name, _ in region.categories]
        shares = [share for _, share in region.categories]
        assert len(names) <= 3 and not set(names) & {"void", "floor", "wall", "ceiling", "door"}
        assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1 + 1e-9

    assert a.area_m2 == pytest.approx(len(a.cells) * bev.config.resolution**2)
    bed_footprint = 1.4 * 0.9
    assert a.area_m2 == pytest.approx(3.0 * 3.0 - bed_footprint, rel=0.15)
    np.testing.assert_allclose(a.centroid[[0, 2]], ROOM_A_CENTRE[[0, 2]], atol=0.3)
