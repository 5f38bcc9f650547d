"""Frontier exploration (Yamauchi 1997) on the agent's own 360-BEV, over primitive actions.

Every few steps the agent runs one Dijkstra search from its cell over the cells it knows
are free and clear of obstacles, scores every frontier segment by its path cost, picks one
(``nearest``: cheapest; ``utility``: most frontier cells per metre of path), and follows the
path with turn-then-forward moves. It replans on a bump (and remembers the blocked cell),
when it reaches the goal, when the goal stops being a frontier, and every ``replan_every``
steps so new observations are used.

In the waypoint env (observations carry ``candidate_mask``) the same goal is chosen at each
decision, and the agent picks the candidate pixel whose floor point is closest to it by
path cost on the map (one Dijkstra from the goal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from embodia.agents.baselines.base import MOVE_FORWARD, TURN_LEFT, TURN_RIGHT, EpisodeView
from embodia.perception.bev import FREE, UNKNOWN, BEVMap, FrontierSegment
from embodia.perception.planning import distance_field
from embodia.sim.geometry import wrap_angle, yaw_of_direction

Utility = Literal["nearest", "utility"]


@dataclass(frozen=True)
class FrontierConfig:
    utility: Utility = "nearest"
    """``nearest``: lowest path cost; ``utility``: segment size / path cost."""
    replan_every: int = 10
    """Steps between replans while a plan is being followed."""
    min_frontier_cells: int = 3
    """Smaller frontier segments are ignored (noise at the edge of sensing range)."""
    clearance_margin: float = 0.1
    """Metres kept from obstacles on top of the agent radius."""
    lookahead: float = 0.35
    """Metres ahead along the path the agent steers to."""
    goal_tolerance: float = 0.3
    """Metres from the goal at which it counts as reached."""


class FrontierAgent:
    """Frontier-based exploration; see the module docstring."""

    def __init__(self, config: FrontierConfig | None = None) -> None:
        self.config = config or FrontierConfig()
        if self.config.utility not in ("nearest", "utility"):
            raise ValueError(f"unknown frontier utility {self.config.utility!r}: nearest | utility")
        self.name = "frontier" if self.config.utility == "nearest" else "frontier-utility"
        self._episode: EpisodeView | None = None
        self._path: NDArray[np.float64] = np.empty((0, 3))
        self._goal: NDArray[np.float64] | None = None
        self._since_plan = 0
        self._collisions = 0
        self._blocked: set[tuple[int, int]] = set()  # world-lattice cells found blocked by bumps
        self._bumped: set[tuple[int, int, int]] = set()  # (cell, heading) where forward bumped
        self._detour: float | None = None  # heading committed to after a bump
        self._last_action = -1

    def reset(self, episode: EpisodeView, seed: int | None = None) -> None:
        self._episode = episode
        self._path = np.empty((0, 3))
        self._goal = None
        self._since_plan = 0
        self._collisions = 0
        self._blocked = set()
        self._bumped = set()
        self._detour = None
        self._last_action = -1

    # ------------------------------------------------------------------ acting

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        if self._episode is None:
            raise RuntimeError("FrontierAgent.act called before reset(episode)")
        pose = np.asarray(observation["pose"], dtype=np.float64)
        position, yaw = pose[:3], float(pose[3])
        if "candidate_mask" in observation:
            return self._choose_candidate(observation, position)
        collisions = int(info.get("collisions", 0))
        if collisions > self._collisions and self._last_action == MOVE_FORWARD:
            self._mark_blocked(position, yaw)
            self._bumped.add(self._heading_key(position, yaw))
            self._path = np.empty((0, 3))
        self._collisions = collisions
        self._since_plan += 1
        if self._needs_plan(position):
            self._plan(position)
        action = self._steer(position, yaw)
        self._last_action = action
        return action

    def _needs_plan(self, position: NDArray[np.float64]) -> bool:
        if len(self._path) == 0 or self._goal is None or self._since_plan >= self.config.replan_every:
            return True
        if _horizontal(self._goal - position) < self.config.goal_tolerance:
            return True
        bev = self._bev
        row, col = bev.to_grid(self._goal)
        if not bev.inside(row, col):
            return True
        state = bev.state
        r, c = int(row), int(col)
        window = state[max(r - 1, 0) : r + 2, max(c - 1, 0) : c + 2]
        return not (state[r, c] == FREE and (window == UNKNOWN).any())

    def _steer(self, position: NDArray[np.float64], yaw: float) -> int:
        if len(self._path) == 0:
            return TURN_LEFT  # nothing reachable to explore: look around (turns are free of risk)
        distances = np.hypot(self._path[:, 0] - position[0], self._path[:, 2] - position[2])
        nearest = int(np.argmin(distances))
        # Steer to the point ``lookahead`` metres further *along the path*, so the agent
        # follows the path around corners instead of cutting straight to a nearby goal.
        rest = self._path[nearest:]
        along = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(rest[:, [0, 2]], axis=0).T))])
        ahead = np.nonzero(along >= self.config.lookahead)[0]
        target = rest[int(ahead[0])] if len(ahead) else rest[-1]
        if _horizontal(target - position) < 1e-6:
            return MOVE_FORWARD
        turn = math.radians(self._episode_turn_deg)
        wanted = yaw_of_direction(target - position)
        if self._detour is not None:
            wanted = self._detour
        error = wrap_angle(wanted - yaw)
        if error > turn / 2.0:
            return TURN_LEFT
        if error < -turn / 2.0:
            return TURN_RIGHT
        if self._heading_key(position, yaw) in self._bumped:
            # Headings come in whole turns, so the one nearest the path may clip a corner
            # the path rounds: commit to the nearest heading not yet bumped from this cell.
            side = 1.0 if wrap_angle(yaw_of_direction(target - position) - yaw) >= 0 else -1.0
            for k in range(1, round(2 * math.pi / turn)):
                offset = side * ((k + 1) // 2) * turn * (1 if k % 2 else -1)
                candidate = wrap_angle(yaw + offset)
                if self._heading_key(position, candidate) not in self._bumped:
                    self._detour = candidate
                    return TURN_LEFT if offset > 0 else TURN_RIGHT
            return TURN_LEFT
        self._detour = None
        return MOVE_FORWARD

    def _heading_key(self, position: NDArray[np.float64], yaw: float) -> tuple[int, int, int]:
        bev = self._bev
        row, col = bev.to_grid(position)
        turn = math.radians(self._episode_turn_deg)
        return int(row) + bev.row0, int(col) + bev.col0, round(wrap_angle(yaw) / turn)

    # ------------------------------------------------------------------ planning

    @property
    def _bev(self) -> BEVMap:
        assert self._episode is not None
        return self._episode.bev

    @property
    def _episode_turn_deg(self) -> float:
        assert self._episode is not None
        return self._episode.sim_config.turn_angle_deg

    def _traversable(self, margin: float) -> NDArray[np.bool_]:
        bev = self._bev
        assert self._episode is not None
        traversable = bev.traversable(self._episode.sim_config.agent_radius + margin)
        for wr, wc in self._blocked:
            r, c = wr - bev.row0, wc - bev.col0
            if 0 <= r < traversable.shape[0] and 0 <= c < traversable.shape[1]:
                traversable[r, c] = False
        return traversable

    def _plan(self, position: NDArray[np.float64]) -> None:
        self._since_plan = 0
        self._path = np.empty((0, 3))
        self._goal = None
        bev = self._bev
        frontiers = bev.frontiers(self.config.min_frontier_cells)
        row, col = bev.to_grid(position)
        if not frontiers or not bev.inside(row, col):
            return
        start = (int(row), int(col))
        # Prefer paths that keep a margin from obstacles; near a wall (or in a narrow spot)
        # fall back to the bare agent radius so the agent is never stranded.
        for margin in (self.config.clearance_margin, 0.0):
            traversable = self._traversable(margin)
            traversable[start] = True
            self._free_around(traversable, start)
            field = distance_field(traversable, start, bev.config.resolution)
            goal = self._choose_goal(frontiers, field.cost, traversable)
            if goal is not None:
                cells = field.path_to(*goal)
                points = bev.from_grid(cells[:, 0], cells[:, 1])
                points[:, 1] = position[1]
                self._path = points
                self._goal = points[-1]
                return

    def _free_around(self, traversable: NDArray[np.bool_], start: tuple[int, int]) -> None:
        """Let the agent leave the spot it stands on: free cells within its radius of it count
        as traversable, though obstacles closer than the clearance margin (a table's edge, map
        noise) would otherwise wall it in where it stands."""
        bev = self._bev
        assert self._episode is not None
        reach = int(math.ceil(self._episode.sim_config.agent_radius / bev.config.resolution)) + 1
        r0, c0 = max(start[0] - reach, 0), max(start[1] - reach, 0)
        window = (slice(r0, start[0] + reach + 1), slice(c0, start[1] + reach + 1))
        traversable[window] |= bev.free[window]

    def _choose_goal(
        self,
        frontiers: list[FrontierSegment],
        cost: NDArray[np.float64],
        traversable: NDArray[np.bool_] | None = None,
    ) -> tuple[int, int] | None:
        """The cheapest cell of the best frontier segment, or None if none is reachable
        (``cost``: path costs from the agent over ``traversable``)."""
        best: tuple[float, int, int] | None = None
        for segment in frontiers:
            costs = cost[segment.cells[:, 0], segment.cells[:, 1]]
            k = int(np.argmin(costs))
            path_cost = float(costs[k])
            if not math.isfinite(path_cost):
                continue
            if self.config.utility == "nearest":
                score = path_cost
            else:
                score = -segment.size / max(path_cost, self._bev.config.resolution)
            if best is None or score < best[0]:
                best = (score, int(segment.cells[k, 0]), int(segment.cells[k, 1]))
        return None if best is None else (best[1], best[2])

    def _choose_candidate(self, observation: dict[str, Any], position: NDArray[np.float64]) -> int:
        from embodia.perception.waypoints import pixel_to_world
        from embodia.sim.protocol import Pose

        valid = np.flatnonzero(np.asarray(observation["candidate_mask"]) > 0)
        if len(valid) == 0:
            return 0  # rejected as "no_candidate" by the env: costs one step, nothing else
        pose = np.asarray(observation["pose"], dtype=np.float64)
        panorama = {
            "rgb": observation["rgb"],
            "depth": observation["depth"],
            "semantic": observation["semantic"],
            "pose": Pose.from_array(pose[:3], float(pose[3])),
        }
        assert self._episode is not None
        sensor_height = self._episode.sim_config.sensor_height
        points = []
        for index in valid:
            row, col = (int(v) for v in observation["candidates"][index])
            points.append(pixel_to_world(panorama, row, col, sensor_height))  # type: ignore[arg-type]
        self._plan(position)
        if self._goal is None:
            return int(valid[np.argmax([_horizontal(p - position) for p in points])])  # go far
        bev = self._bev
        goal_row, goal_col = bev.to_grid(self._goal)
        traversable = self._traversable(0.0)
        traversable[int(goal_row), int(goal_col)] = True
        field = distance_field(traversable, (int(goal_row), int(goal_col)), bev.config.resolution)
        costs = []
        for point in points:
            cell_row, cell_col = bev.to_grid(point)
            inside = bool(bev.inside(cell_row, cell_col))
            cost = float(field.cost[int(cell_row), int(cell_col)]) if inside else math.inf
            # Unreachable on the map: fall back to straight-line distance, ranked after.
            costs.append(cost if math.isfinite(cost) else 1e6 + _horizontal(point - self._goal))
        return int(valid[int(np.argmin(costs))])

    def _mark_blocked(self, position: NDArray[np.float64], yaw: float) -> None:
        """Remember the cells just ahead as blocked (the map may not show a thin obstacle)."""
        bev = self._bev
        assert self._episode is not None
        forward = np.array([-math.sin(yaw), 0.0, -math.cos(yaw)])
        reach = self._episode.sim_config.agent_radius + bev.config.resolution
        for d in np.arange(bev.config.resolution, reach + 1e-9, bev.config.resolution):
            row, col = bev.to_grid(position + d * forward)
            self._blocked.add((int(row) + bev.row0, int(col) + bev.col0))


def _horizontal(delta: NDArray[np.float64]) -> float:
    return float(math.hypot(delta[0], delta[2]))
