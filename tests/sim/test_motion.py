"""Primitive-step accounting of goto."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scenes import box_room

from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.motion import walk_budget

PATH = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, -1.0]])  # ahead 1 m, then right 1 m


def test_walk_budget_counts_turns_and_forward_steps() -> None:
    pos, yaw, steps, dist, reached = walk_budget(PATH, 0.0, 0.25, 30.0)
    assert reached and steps == 4 + 3 + 4  # 4 forward, 90 deg right = 3 turns, 4 forward
    assert np.allclose(pos, PATH[-1]) and dist == pytest.approx(2.0)
    assert yaw == pytest.approx(-math.pi / 2)


def test_walk_budget_stops_after_last_whole_step() -> None:
    pos, yaw, steps, dist, reached = walk_budget(PATH, 0.0, 0.25, 30.0, max_steps=9)
    assert not reached and steps == 9  # 4 + 3 turns + 2 forward
    assert np.allclose(pos, [0.5, 0.0, -1.0]) and dist == pytest.approx(1.5)
    pos, _, steps, _, reached = walk_budget(PATH, 0.0, 0.25, 30.0, max_steps=5)
    assert steps == 4 and np.allclose(pos, PATH[1]) and not reached  # a 3-turn bend does not fit


def test_goto_uses_the_budget() -> None:
    sim = EmbeddedSimulator()
    sim.reset(box_room(6.0, 3.0), Pose((0.5, 0.0, 1.5), math.pi / 2))  # facing -x
    full = sim.goto([5.5, 0.0, 1.5])
    assert full.reached and full.steps == 6 + 20  # turn 180 deg, then 5 m
    sim.reset(box_room(6.0, 3.0), Pose((0.5, 0.0, 1.5), math.pi / 2))
    part = sim.goto([5.5, 0.0, 1.5], max_steps=10)
    assert not part.reached and part.steps == 10
    assert sim.pose.position[0] == pytest.approx(1.5)


def test_non_positive_step_sizes_name_the_argument() -> None:
    with pytest.raises(ValueError, match=r"^forward_step must be a positive number, got 0.0$"):
        walk_budget(PATH, 0.0, 0.0, 30.0)
    with pytest.raises(ValueError, match=r"^turn_angle_deg must be a positive number, got -30.0$"):
        walk_budget(PATH, 0.0, 0.25, -30.0)
