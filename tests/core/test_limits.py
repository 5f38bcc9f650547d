"""Range and positivity checks of settings: what passes and the exact messages."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pytest

from embodia.core.limits import check_positive, check_positive_number, check_whole
from embodia.errors import EmbodiaError


@dataclass(frozen=True)
class Spacing:
    step: float = 0.25
    width: float = 1.0


@pytest.mark.parametrize("value", [1e-12, 0.5, 3, 1e9])
def test_check_positive_number_accepts_finite_positive_values(value: float) -> None:
    check_positive_number("step", value)


@pytest.mark.parametrize("value", [0, 0.0, -1.0, math.inf, math.nan])
def test_check_positive_number_names_the_value(value: float) -> None:
    with pytest.raises(ValueError) as caught:
        check_positive_number("step", value)
    assert str(caught.value) == f"step must be a positive number, got {value}"


def test_check_positive_number_unit_and_error_type() -> None:
    with pytest.raises(EmbodiaError, match=r"^max_distance must be a positive number of metres, got -2.0$"):
        check_positive_number("max_distance", -2.0, unit="metres", error=EmbodiaError)


def test_check_positive_names_the_class_and_first_bad_field() -> None:
    check_positive(Spacing(), "step", "width")
    with pytest.raises(ValueError, match=r"^Spacing.width must be a positive number, got 0.0$"):
        check_positive(Spacing(width=0.0), "step", "width")
    with pytest.raises(ValueError, match=r"^Spacing.step must be a positive number, got -1.0$"):
        check_positive(Spacing(step=-1.0, width=0.0), "step", "width")
    # Fields not named are not checked.
    check_positive(Spacing(width=-5.0), "step")


@dataclass
class Counts:
    steps: object = 3
    retries: object = 0


@pytest.mark.parametrize("bad", [0, -2, 2.0, True, "3", None])
def test_check_whole_refuses_what_is_not_a_count_and_names_the_field(bad: object) -> None:
    with pytest.raises(
        EmbodiaError, match=rf"^Counts\.steps must be a whole number >= 1, got {re.escape(repr(bad))}$"
    ):
        check_whole(Counts(steps=bad), "steps", "retries")


def test_check_whole_takes_its_minimum_and_error_type() -> None:
    check_whole(Counts(), "steps")
    check_whole(Counts(), "retries", minimum=0)
    with pytest.raises(ValueError, match=r"Counts\.retries must be a whole number >= 1, got 0"):
        check_whole(Counts(), "steps", "retries", error=ValueError)
