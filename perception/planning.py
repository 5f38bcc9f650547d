"""Shortest paths on top-down grids (an agent's own BEV map), compiled with numba.

Dijkstra over 8-connected cells with no corner cutting (a diagonal move needs both
orthogonal neighbours traversable), so paths never squeeze between two blocked corners.
One search from the agent gives the path cost to every reachable cell, which is what
frontier selection needs (the cost of every frontier at once).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class DistanceField:
    """Path cost (metres) from a start cell to every cell; ``inf`` where unreachable."""

    cost: NDArray[np.float64]
    parent: NDArray[np.int64]
    """Flat index of each cell's predecessor on its shortest path (-1 at the start / unreached)."""
    start: tuple[int, int]

    def path_to(self, row: int, col: int) -> NDArray[np.int64]:
        """(N, 2) cells from the start to (row, col); empty if unreachable."""
        if not math.isfinite(self.cost[row, col]):
            return np.empty((0, 2), dtype=np.int64)
        width = self.cost.shape[1]
        flat = [row * width + col]
        while self.parent.flat[flat[-1]] >= 0:
            flat.append(int(self.parent.flat[flat[-1]]))
        cells = np.array(flat[::-1], dtype=np.int64)
        return np.stack([cells // width, cells % width], axis=1)


def distance_field(
    traversable: NDArray[np.bool_], start: tuple[int, int], resolution: float
) -> DistanceField:
    """Dijkstra from ``start`` over ``traversable`` cells (the start itself always counts)."""
    mask = np.ascontiguousarray(traversable, dtype=np.bool_)
    if mask.ndim != 2:
        raise ValueError(f"traversable must be a 2D grid, got shape {mask.shape}")
    r, c = int(start[0]), int(start[1])
    if not (0 <= r < mask.shape[0] and 0 <= c < mask.shape[1]):
        raise ValueError(f"start cell {start} is outside the {mask.shape} grid")
    cost, parent = _dijkstra(mask, r, c, float(resolution))
    return DistanceField(cost=cost, parent=parent, start=(r, c))


@njit(cache=True)
def _dijkstra(
    traversable: NDArray[np.bool_], start_row: int, start_col: int, res: float
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rows, cols = traversable.shape
    cost = np.full((rows, cols), np.inf)
    parent = np.full((rows, cols), -1, dtype=np.int64)
    done = np.zeros((rows, cols), dtype=np.bool_)
    cost[start_row, start_col] = 0.0
    heap = [(0.0, start_row * cols + start_col)]
    diagonal = res * _SQRT2
    while heap:
        d, flat = heapq.heappop(heap)
        r = flat // cols
        c = flat % cols
        if done[r, c]:
            continue
        done[r, c] = True
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                if dr == 0 and dc == 0:
                    continue
                nr = r + dr
                nc = c + dc
                if nr < 0 or nr >= rows or nc < 0 or nc >= cols or not traversable[nr, nc]:
                    continue
                if dr != 0 and dc != 0:
                    if not (traversable[r + dr, c] and traversable[r, c + dc]):
                        continue
                    step = diagonal
                else:
                    step = res
                nd = d + step
                if nd < cost[nr, nc]:
                    cost[nr, nc] = nd
                    parent[nr, nc] = flat
                    heapq.heappush(heap, (nd, nr * cols + nc))
    return cost, parent
