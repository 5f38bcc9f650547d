"""Range and positivity checks of settings: what passes and the exact messages."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from embodia.core.limits import check_positive, check_positive_number
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
