"""BEV maps built directly from a grid of UNKNOWN / FREE / OCCUPIED cells (5 cm), for tests that
need a map of a known shape without running a simulator."""

from __future__ import annotations

import numpy as np

from embodia.perception.bev import FREE, OCCUPIED, UNKNOWN, BEVMap
from embodia.sim.scene import CATEGORIES


def bev_from_cells(
    state: np.ndarray, row0: int, col0: int, semantic: np.ndarray, votes: int | np.ndarray
) -> BEVMap:
    """A map whose cell (r, c) has ``state[r, c]`` (3 free or 5 occupied votes) and, where known,
    ``votes`` for the category ``semantic[r, c]``; its corner cell is (row0, col0) on the lattice."""
    bev = BEVMap(list(CATEGORIES))
    bev.row0, bev.col0 = row0, col0
    bev.free_count = (state == FREE).astype(np.float32) * 3
    bev.occupied_count = (state == OCCUPIED).astype(np.float32) * 5
    bev.max_height = np.zeros(state.shape, dtype=np.float32)
    bev.semantic_count = np.zeros((*state.shape, len(CATEGORIES)), dtype=np.uint16)
    rows, cols = np.nonzero(state != UNKNOWN)
    bev.semantic_count[rows, cols, semantic[rows, cols]] = np.broadcast_to(votes, state.shape)[rows, cols]
    bev.obstacle_semantic_count = np.where((state == OCCUPIED)[..., None], bev.semantic_count, 0).astype(
        np.uint16
    )
    return bev
