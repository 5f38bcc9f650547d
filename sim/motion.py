"""What following a path costs in primitive actions (shared by every backend's ``goto``).

A path is walked leg by leg (consecutive segments on one heading in plan, such as a path's
points over a ramp, are one leg): first turn towards the leg (turns quantised to
``turn_angle_deg``: ``round(|dyaw| / turn)`` steps, ``dyaw`` wrapped to [-pi, pi)), then
forward moves of ``forward_step`` (``ceil(length / forward_step)`` steps, the last one possibly
short), over the leg's length in plan. The pose follows the path exactly; the step count is
what a discrete agent would have spent on it. Both the embedded and the habitat backend
count steps with these functions, so a step budget means the same thing on either.
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

    A leg's turns are paid before its forward steps; a turn that does not fit the budget
    is not started. When the budget runs out during a leg's forward steps the agent stops
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
    for leg in _legs(path):
        target = leg[-1]
        plan = np.hypot(*np.diff(np.vstack([position, leg]), axis=0)[:, [0, 2]].T)
        length = float(plan.sum())
        if length < _MIN_SEGMENT:
            position = target.copy()
            continue
        heading = yaw_of_direction(target - position)
        turns = round(abs(wrap_angle(heading - yaw)) / turn)
        if steps + turns > budget:
            return position, yaw, steps, distance, False
        steps += turns
        yaw = heading
        forwards = math.ceil(length / forward_step - 1e-9)
        if steps + forwards > budget:
            allowed = int(budget - steps)
            travelled = allowed * forward_step
            position = _along(np.vstack([position, leg]), plan, travelled)
            return position, yaw, steps + allowed, distance + travelled, False
        steps += forwards
        distance += length
        position = target.copy()
    return position, yaw, steps, distance, True


def _legs(path: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """The points after the first, grouped into legs walked on one heading: points where
    only the height changes (a path over a ramp or stairs) do not start a new leg."""
    legs: list[list[NDArray[np.float64]]] = []
    previous, heading = path[0], None
    for point in path[1:]:
        delta = point - previous
        if math.hypot(delta[0], delta[2]) < _MIN_SEGMENT:
            if legs:
                legs[-1].append(point)
            else:
                legs.append([point])
            previous = point
            continue
        here = yaw_of_direction(delta)
        if legs and heading is not None and abs(wrap_angle(here - heading)) < 1e-6:
            legs[-1].append(point)
        else:
            legs.append([point])
        previous, heading = point, here
    return [np.asarray(leg) for leg in legs]


def _along(points: NDArray[np.float64], plan: NDArray[np.float64], travelled: float) -> NDArray[np.float64]:
    """The point ``travelled`` metres (in plan) along the polyline ``points``, whose segments
    measure ``plan`` in plan."""
    ends = np.cumsum(plan)
    index = int(np.searchsorted(ends, travelled, side="left"))
    if index >= len(plan):
        return points[-1].copy()
    before = ends[index] - plan[index]
    fraction = 0.0 if plan[index] <= 0 else (travelled - before) / plan[index]
    result: NDArray[np.float64] = points[index] + fraction * (points[index + 1] - points[index])
    return result


def primitive_step_count(
    points: ArrayLike, start_yaw: float, forward_step: float, turn_angle_deg: float
) -> tuple[int, float]:
    """Primitive steps a discrete agent spends following a whole polyline.

    Returns:
        ``(steps, final_yaw)``: per leg ``round(|wrapped dyaw| / turn)`` turns plus
        ``ceil(length in plan / forward_step)`` forward steps, and the heading of the last leg
        (``start_yaw`` when the path never moves).
    """
    _, yaw, steps, _, _ = walk_budget(points, start_yaw, forward_step, turn_angle_deg, None)
    return steps, yaw
