"""bev_image: colours per cell, agent and heading, trajectory, frontiers, crop, region ids."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bev_maps import bev_from_cells
from scenes import CAT

from embodia.perception.bev import FREE, OCCUPIED, UNKNOWN, BEVMap
from embodia.perception.bev_image import (
    AGENT_COLOUR,
    FREE_COLOUR,
    FRONTIER_COLOUR,
    OCCUPIED_COLOUR,
    REGION_BOUNDARY_COLOUR,
    TRAJECTORY_COLOUR,
    UNKNOWN_COLOUR,
    bev_image,
)
from embodia.perception.regions import RegionTracker
from embodia.sim import Pose
from embodia.sim.scene import CATEGORIES, category_albedo

RES = 0.05
ROW0, COL0 = -20, 30  # the grid's corner cell on the world lattice


def cell_centre(row: int, col: int) -> np.ndarray:
    """World point at the centre of grid cell (row, col) of the test map."""
    return np.array([(col + COL0 + 0.5) * RES, 0.0, (row + ROW0 + 0.5) * RES])


@pytest.fixture
def bev() -> BEVMap:
    """80 x 100 cells: unknown around, a walled free room at rows 10-49, cols 20-79, a bed
    (occupied, labelled bed) inside it and a 1 m opening at the bottom."""
    state = np.full((80, 100), UNKNOWN, dtype=np.uint8)
    state[8:52, 18:82] = OCCUPIED
    state[10:50, 20:80] = FREE
    state[50:52, 40:60] = FREE  # opening into the unknown
    bed = (slice(12, 20), slice(22, 40))
    semantic = np.full(state.shape, CAT["floor"])
    semantic[state == OCCUPIED] = CAT["wall"]
    state[bed] = OCCUPIED
    semantic[bed] = CAT["bed"]
    return bev_from_cells(state, ROW0, COL0, semantic, 4)


def pixel(image: np.ndarray, row: int, col: int, scale: int, r0: int = 0, c0: int = 0) -> tuple[int, ...]:
    """Colour at the centre of cell (row, col) in a picture cropped at (r0, c0)."""
    return tuple(int(v) for v in image[(row - r0) * scale + scale // 2, (col - c0) * scale + scale // 2])


@pytest.mark.parametrize("scale", [1, 3])
def test_shape_and_cell_colours(bev: BEVMap, scale: int) -> None:
    image = bev_image(bev, scale=scale, crop_to_explored=False)
    assert image.dtype == np.uint8 and image.shape == (80 * scale, 100 * scale, 3)
    assert pixel(image, 2, 2, scale) == UNKNOWN_COLOUR
    assert pixel(image, 30, 50, scale) == FREE_COLOUR
    assert pixel(image, 9, 50, scale) == OCCUPIED_COLOUR  # wall: structural, not tinted
    bed = np.array(pixel(image, 15, 30, scale))
    assert np.abs(bed - category_albedo("bed")).sum() < np.abs(bed - OCCUPIED_COLOUR).sum()
    plain = bev_image(bev, scale=scale, crop_to_explored=False, show_categories=False)
    assert pixel(plain, 15, 30, scale) == OCCUPIED_COLOUR
    # One cell is a scale x scale block of one colour.
    block = image[30 * scale : 31 * scale, 50 * scale : 51 * scale].reshape(-1, 3)
    assert np.all(block == FREE_COLOUR)


def test_crop_to_explored_keeps_the_explored_box_plus_margin(bev: BEVMap) -> None:
    scale, margin_m = 2, 0.25
    margin = math.ceil(margin_m / RES)
    image = bev_image(bev, scale=scale, margin_m=margin_m)
    rows, cols = 52 - 8 + 2 * margin, 82 - 18 + 2 * margin  # explored box rows 8-51, cols 18-81
    assert image.shape == (rows * scale, cols * scale, 3)
    r0, c0 = 8 - margin, 18 - margin
    assert pixel(image, 30, 50, scale, r0, c0) == FREE_COLOUR
    assert pixel(image, 8, 18, scale, r0, c0) == OCCUPIED_COLOUR  # the box's corner
    assert pixel(image, r0, c0, scale, r0, c0) == UNKNOWN_COLOUR  # margin
    # A trajectory outside the explored cells widens the crop to include it.
    away = Pose.from_array(cell_centre(70, 50))
    wider = bev_image(bev, scale=scale, margin_m=margin_m, trajectory=[away])
    assert wider.shape[0] == (70 + 1 + margin - r0) * scale


def test_agent_disc_and_heading(bev: BEVMap) -> None:
    scale = 4
    radius_cells = 0.15 / RES  # AGENT_RADIUS_M in cells
    for yaw, step in ((0.0, (-1, 0)), (math.pi / 2, (0, -1)), (math.pi, (1, 0))):
        agent = Pose.from_array(cell_centre(30, 50), yaw)
        image = bev_image(bev, scale=scale, crop_to_explored=False, agent=agent)
        assert pixel(image, 30, 50, scale) == AGENT_COLOUR
        # The heading line sticks out of the disc on the side the agent faces (yaw 0 = up).
        ahead = (30 + round(2 * radius_cells * step[0]), 50 + round(2 * radius_cells * step[1]))
        behind = (30 - round(2 * radius_cells * step[0]), 50 - round(2 * radius_cells * step[1]))
        assert pixel(image, *ahead, scale) == AGENT_COLOUR
        assert pixel(image, *behind, scale) == FREE_COLOUR


def test_trajectory_and_frontiers(bev: BEVMap) -> None:
    scale = 2
    path = [Pose.from_array(cell_centre(25, 25)), Pose.from_array(cell_centre(25, 75))]
    image = bev_image(bev, scale=scale, crop_to_explored=False, trajectory=path, frontiers=bev.frontiers())
    assert pixel(image, 25, 50, scale) == TRAJECTORY_COLOUR
    assert pixel(image, 35, 50, scale) == FREE_COLOUR
    (opening,) = bev.frontiers()  # the open side of the room
    for row, col in opening.cells:
        assert pixel(image, int(row), int(col), scale) == FRONTIER_COLOUR


def test_region_ids_and_boundaries_are_drawn(bev: BEVMap) -> None:
    scale = 2
    bev.free_count[10:50, 49:51] = 0  # a wall across the room with a 0.8 m door ...
    bev.occupied_count[10:50, 49:51] = 5
    bev.free_count[26:42, 49:51] = 3  # ... at rows 26-41
    bev.occupied_count[26:42, 49:51] = 0
    tracker = RegionTracker()
    regions = tracker.update(bev)
    assert len(regions) == 2
    labels = tracker.label_image(bev)
    plain = bev_image(bev, scale=scale, crop_to_explored=False)
    no_boundaries = np.full(bev.shape, -1, dtype=np.int32)
    numbered = bev_image(
        bev, scale=scale, crop_to_explored=False, regions=regions, region_labels=no_boundaries
    )
    changed = np.argwhere(np.any(numbered != plain, axis=-1))
    assert len(changed) > 20
    centroids = []
    for region in regions:
        row, col = bev.to_grid(region.centroid)
        centroids.append(((float(row) + 0.5) * scale, (float(col) + 0.5) * scale))
    # Every changed pixel belongs to a number drawn at a centroid.
    nearest = np.min([np.hypot(*(changed - c).T) for c in centroids], axis=0)
    assert nearest.max() < 20
    assert all(np.hypot(*(changed - c).T).min() < 4 for c in centroids)

    bounded = bev_image(bev, scale=scale, crop_to_explored=False, regions=regions, region_labels=labels)
    door_row = 33
    door_cols = np.flatnonzero(np.diff(labels[door_row]) != 0)
    border = [c for c in door_cols if labels[door_row, c] >= 0 and labels[door_row, c + 1] >= 0]
    assert len(border) == 1
    assert pixel(bounded, door_row, int(border[0]), scale) == REGION_BOUNDARY_COLOUR
    # The regions' own cells give the same boundaries when no label image is passed.
    np.testing.assert_array_equal(
        bev_image(bev, scale=scale, crop_to_explored=False, regions=regions), bounded
    )


def test_bad_input_is_named(bev: BEVMap) -> None:
    with pytest.raises(ValueError, match="scale"):
        bev_image(bev, scale=0)
    with pytest.raises(ValueError, match="margin_m"):
        bev_image(bev, margin_m=-1.0)
    with pytest.raises(ValueError, match="region_labels"):
        bev_image(bev, region_labels=np.zeros((3, 3), dtype=np.int32))
    with pytest.raises(ValueError, match="empty"):
        bev_image(BEVMap(list(CATEGORIES)))
