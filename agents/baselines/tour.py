"""A frontier tour planner in the spirit of TARE (Cao et al., "TARE: A Hierarchical Framework
for Efficiently Exploring Complex 3D Environments", RSS 2021), on the agent's own 360-BEV.

Nearest-frontier exploration goes to whatever is closest now and pays for it later: it leaves
half-seen rooms behind and walks back across the house for them. TARE plans the whole visit
instead, at two levels, and replans as the map grows:

- **Globally**, frontier segments are grouped into clusters (segments whose reachable cells lie
  within ``cluster_radius`` of a cluster's anchor join it), and the agent plans a tour that
  visits every cluster: an open path from the agent, on path costs over the map's traversable
  cells (one Dijkstra per cluster). TARE's tour is a travelling-salesman path (shortest total
  length); here the measure is coverage over time (AUC), so the tour minimises the weighted
  latency instead, each cluster weighted by its frontier size (the area it opens onto): the
  travelling-repairman form of the same problem. It is built greedily (most frontier per metre
  next) and improved by 2-opt and or-opt moves.
- **Locally**, the agent goes to the first cluster of the tour, to its cheapest frontier cell,
  and follows the path there with the frontier agent's turn-then-forward moves, bump memory and
  replanning (:mod:`embodia.agents.baselines.frontier`).

Only the nearest ``max_clusters`` clusters (by path cost) enter a tour, which bounds the
Dijkstra searches per replan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodia.agents.baselines.frontier import FrontierAgent, FrontierConfig
from embodia.perception.bev import FrontierSegment
from embodia.perception.planning import distance_field


@dataclass(frozen=True)
class TourConfig(FrontierConfig):
    cluster_radius: float = 1.5
    """Metres within which frontier segments join one cluster (one stop of the tour)."""
    max_clusters: int = 12
    """Clusters a tour visits at most: the nearest by path cost."""
    two_opt_rounds: int = 20
    """Passes of local improvement (2-opt, or-opt) over the greedy tour."""
    min_cluster_cells: int = 12
    """Clusters with fewer frontier cells (slivers at the edge of sensing range) are left out
    of a tour while larger ones remain."""


@dataclass
class Cluster:
    """One stop of a tour: frontier segments near each other, entered at ``anchor``."""

    anchor: tuple[int, int]
    """The cheapest reachable frontier cell of the cluster's segments."""
    cost: float
    """Path cost from the agent to the anchor, metres."""
    size: int
    """Frontier cells in the cluster."""


class TourAgent(FrontierAgent):
    """Frontier exploration that visits frontier clusters in a planned tour; see the module
    docstring."""

    def __init__(self, config: TourConfig | None = None) -> None:
        self.tour_config = config or TourConfig()
        super().__init__(self.tour_config)
        self.name = "tour"
        self.last_tour: list[Cluster] = []
        """The tour of the last plan, in visiting order (for inspection and tests)."""

    def _choose_goal(
        self,
        frontiers: list[FrontierSegment],
        cost: NDArray[np.float64],
        traversable: NDArray[np.bool_] | None = None,
    ) -> tuple[int, int] | None:
        clusters = cluster_frontiers(
            frontiers, cost, self.tour_config.cluster_radius / self._bev.config.resolution
        )
        large = [c for c in clusters if c.size >= self.tour_config.min_cluster_cells]
        clusters = sorted(large or clusters, key=lambda c: c.cost)[: self.tour_config.max_clusters]
        if not clusters:
            self.last_tour = []
            return None
        if len(clusters) == 1 or traversable is None:
            self.last_tour = clusters[:1]
            return clusters[0].anchor
        costs = tour_costs(clusters, traversable, self._bev.config.resolution)
        sizes = np.array([c.size for c in clusters], dtype=np.float64)
        order = plan_tour(costs, sizes, self.tour_config.two_opt_rounds)
        self.last_tour = [clusters[i] for i in order]
        return self.last_tour[0].anchor


def cluster_frontiers(
    frontiers: list[FrontierSegment], cost: NDArray[np.float64], radius_cells: float
) -> list[Cluster]:
    """Reachable frontier segments grouped greedily, largest first: a segment whose cheapest
    cell lies within ``radius_cells`` of a cluster's anchor joins that cluster."""
    entries = []
    for segment in frontiers:
        costs = cost[segment.cells[:, 0], segment.cells[:, 1]]
        k = int(np.argmin(costs))
        if math.isfinite(float(costs[k])):
            entries.append(
                (segment.size, (int(segment.cells[k, 0]), int(segment.cells[k, 1])), float(costs[k]))
            )
    clusters: list[Cluster] = []
    for size, cell, path_cost in sorted(entries, key=lambda e: -e[0]):
        for cluster in clusters:
            if math.dist(cell, cluster.anchor) <= radius_cells:
                cluster.size += size
                if path_cost < cluster.cost:
                    cluster.anchor, cluster.cost = cell, path_cost
                break
        else:
            clusters.append(Cluster(cell, path_cost, size))
    return clusters


def tour_costs(
    clusters: list[Cluster], traversable: NDArray[np.bool_], resolution: float
) -> NDArray[np.float64]:
    """Path costs (metres) between the agent (index 0) and the clusters' anchors (1..K):
    row 0 from the agent, one Dijkstra from each anchor for the rest; unreachable pairs get a
    large finite cost so that a tour still orders them."""
    count = len(clusters)
    costs = np.zeros((count + 1, count + 1))
    costs[0, 1:] = [c.cost for c in clusters]
    for i, cluster in enumerate(clusters, start=1):
        grid = traversable.copy()
        grid[cluster.anchor] = True
        field = distance_field(grid, cluster.anchor, resolution)
        costs[i, 1:] = [field.cost[c.anchor] for c in clusters]
    costs[1:, 0] = costs[0, 1:]
    finite = costs[np.isfinite(costs)]
    costs[~np.isfinite(costs)] = 10.0 * (finite.max() if len(finite) else 1.0) + 100.0
    return (costs + costs.T) / 2.0  # the grid's paths are symmetric up to rounding


def tour_latency(costs: NDArray[np.float64], sizes: NDArray[np.float64], order: list[int]) -> float:
    """The tour's weighted latency: each cluster's frontier cells times the path cost at which
    the tour reaches it (cluster numbers 0..K-1 in ``order``; rows 1..K of ``costs``).
    Coverage AUC rewards seeing area early, and a cluster's frontier size stands for the area
    behind it, so this is what a tour should make small."""
    stops = [0, *(i + 1 for i in order)]
    arrival = np.cumsum([costs[a, b] for a, b in zip(stops[:-1], stops[1:], strict=True)])
    return float(np.dot(sizes[order], arrival))


def plan_tour(costs: NDArray[np.float64], sizes: NDArray[np.float64], rounds: int = 20) -> list[int]:
    """An open tour from the agent through every cluster with a small weighted latency
    (:func:`tour_latency`): built greedily (next, the cluster with the most frontier per metre
    from here), then improved by local moves (:func:`_neighbours`) until none helps."""
    count = costs.shape[0] - 1
    left = set(range(count))
    order: list[int] = []
    here = 0
    while left:
        best_next = max(left, key=lambda i: sizes[i] / max(costs[here, i + 1], 1e-6))
        order.append(best_next)
        left.discard(best_next)
        here = best_next + 1
    best = tour_latency(costs, sizes, order)
    for _ in range(rounds):
        improved = False
        for candidate in _neighbours(order):
            latency = tour_latency(costs, sizes, candidate)
            if latency < best - 1e-9:
                order, best, improved = candidate, latency, True
        if not improved:
            break
    return order


def _neighbours(order: list[int]) -> list[list[int]]:
    """The tours one local move away: a stretch reversed (2-opt) or one stop moved elsewhere
    (or-opt, which latency objectives need: moving a big cluster earlier is not a reversal)."""
    count = len(order)
    moves = [
        order[:i] + order[i : j + 1][::-1] + order[j + 1 :]
        for i in range(count - 1)
        for j in range(i + 1, count)
    ]
    for i in range(count):
        rest = order[:i] + order[i + 1 :]
        moves += [rest[:j] + [order[i]] + rest[j:] for j in range(count) if j != i]
    return moves
