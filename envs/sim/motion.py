"""What following a path costs in primitive actions (shared by every backend's ``goto``).

A path is walked segment by segment: first turn towards the segment (turns quantised to
``turn_angle_deg``: ``round(|dyaw| / turn)`` steps), then forward moves of ``forward_step``
(``ceil(length / forward_step)`` steps, the last one possibly short). The pose follows the
path exactly; the step count is what a discrete agent would have spent on it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.envs.sim.geometry import wrap_angle, yaw_of_direction


def walk_budget(
    points: ArrayLike,
    start_yaw: float,
    forward_step: float,
    turn_angle_deg: float,
    max_steps: int | None = None,
) -> tuple[NDArray[np.float64], float, int, float, bool]:
    """Walk a polyline spending at most ``max_steps`` primitive steps.

    Returns ``(position, yaw, steps, distance, reached)``. When the budget runs out during a
    segment the agent stops after its last whole forward step along it.
    """
    path = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    turn = math.radians(turn_angle_deg)
    budget = math.inf if max_steps is None else max(0, int(max_steps))
    position = path[0].copy()
    yaw = start_yaw
    steps = 0
    distance = 0.0
    for target in path[1:]:
        delta = target - position
        length = float(math.hypot(delta[0], delta[2]))
        if length < 1e-9:
            position = target.copy()
            continue
        heading = yaw_of_direction(delta)
        turns = round(abs(wrap_angle(heading - yaw)) / turn)
        if steps + turns > budget:
            return position, yaw, steps, distance, False
        steps += turns
        yaw = heading
        forwards = math.ceil(length / forward_step - 1e-9)
        if steps + forwards > budget:
            allowed = int(budget - steps)
            travelled = allowed * forward_step
            position = position + delta * (travelled / length)
            return position, yaw, steps + allowed, distance + travelled, False
        steps += forwards
        distance += length
        position = target.copy()
    return position, yaw, steps, distance, True
