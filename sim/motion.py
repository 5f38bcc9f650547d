"""What following a path costs in primitive actions (shared by every backend's ``goto``).

A path is walked segment by segment: first turn towards the segment (turns quantised to
``turn_angle_deg``: ``round(|dyaw| / turn)`` steps, ``dyaw`` wrapped to [-pi, pi)), then
forward moves of ``forward_step`` (``ceil(length / forward_step)`` steps, the last one possibly
short). The pose follows the path exactly; the step count is what a discrete agent would have
spent on it. Both the embedded and the habitat backend count steps with these functions, so a
step budget means the same thing on either.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.core.limits import check_positive_number
from embodia.sim.geometry import wrap_angle, yaw_of_direction

# Segments shorter than this (metres, horizontal) cost nothing and change no heading.
_MIN_SEGMENT = 1e-9


def _check_motion(forward_step: float, turn_angle_deg: float) -> None:
    check_positive_number("forward_step", forward_step)
    check_positive_number("turn_angle_deg", turn_angle_deg)


def _polyline(points: ArrayLike) -> NDArray[np.float64]:
    path = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(path) == 0:
        raise ValueError("a path needs at least one point")
    return path


def walk_budget(
    points: ArrayLike,
    start_yaw: float,
    forward_step: float,
    turn_angle_deg: float,
    max_steps: int | None = None,
) -> tuple[NDArray[np.float64], float, int, float, bool]:
    """Walk a polyline spending at most ``max_steps`` primitive steps.

    A segment's turns are paid before its forward steps; a turn that does not fit the budget
    is not started. When the budget runs out during a segment's forward steps the agent stops
    after its last whole forward step along it.

    Args:
        points: (N, 3) polyline; the walk starts at ``points[0]``.
        start_yaw: Heading at the start, radians.
        forward_step: Metres per forward step.
        turn_angle_deg: Degrees per turn step.
        max_steps: Step budget; None for no limit.

    Returns:
        ``(position, yaw, steps, distance, reached)``: where the walk stopped, the heading
        there, the steps spent, the metres travelled and whether the last point was reached.
    """
    _check_motion(forward_step, turn_angle_deg)
    path = _polyline(points)
    turn = math.radians(turn_angle_deg)
    budget = math.inf if max_steps is None else max(0, int(max_steps))
    position = path[0].copy()
    yaw = float(start_yaw)
    steps = 0
    distance = 0.0
    for target in path[1:]:
        delta = target - position
        length = float(math.hypot(delta[0], delta[2]))
        if length < _MIN_SEGMENT:
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


def primitive_step_count(
    points: ArrayLike, start_yaw: float, forward_step: float, turn_angle_deg: float
) -> tuple[int, float]:
    """Primitive steps a discrete agent spends following a whole polyline.

    Returns:
        ``(steps, final_yaw)``: per segment ``round(|wrapped dyaw| / turn)`` turns plus
        ``ceil(length / forward_step)`` forward steps, and the heading of the last segment
        (``start_yaw`` when the path never moves).
    """
    _, yaw, steps, _, _ = walk_budget(points, start_yaw, forward_step, turn_angle_deg, None)
    return steps, yaw
