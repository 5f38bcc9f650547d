"""Random walk: go straight until bumping into something, then turn a random amount.

Uniformly random actions mostly spin in place; the bump-and-turn walk is the random
baseline that actually travels (as in the exploration literature's "random" agents).
In the waypoint env it picks a uniformly random candidate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embodia.agents.baselines.base import MOVE_FORWARD, TURN_LEFT, TURN_RIGHT, EpisodeView


class RandomWalkAgent:
    name = "random"

    def __init__(self, turn_probability: float = 0.05, max_turns: int = 6) -> None:
        if not 0.0 <= turn_probability <= 1.0:
            raise ValueError(f"turn_probability must be in [0, 1], got {turn_probability}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.turn_probability = turn_probability
        self.max_turns = max_turns
        self._rng = np.random.default_rng()
        self._pending: list[int] = []
        self._collisions = 0

    def reset(self, episode: EpisodeView, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)
        self._pending = []
        self._collisions = 0

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        if "candidate_mask" in observation:  # waypoint env: a uniformly random valid candidate
            valid = np.flatnonzero(np.asarray(observation["candidate_mask"]) > 0)
            return int(self._rng.choice(valid)) if len(valid) else 0
        collisions = int(info.get("collisions", 0))
        bumped = collisions > self._collisions
        self._collisions = collisions
        if not self._pending and (bumped or self._rng.random() < self.turn_probability):
            turn = TURN_LEFT if self._rng.random() < 0.5 else TURN_RIGHT
            self._pending = [turn] * int(self._rng.integers(1, self.max_turns + 1))
        if self._pending:
            return self._pending.pop()
        return MOVE_FORWARD
