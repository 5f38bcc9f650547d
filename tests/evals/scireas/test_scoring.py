"""Scientific answers as models write them: numbers in every notation with units converted,
wrong dimensions refused, and multiple-choice letters committed to or not."""

from __future__ import annotations

import pytest

from embodia.evals.scireas.scoring import ScienceScoreError, read_choice, read_quantity, score_numeric, unit


@pytest.mark.parametrize(
    ("reply", "value", "written"),
    [
        ("Answer: 12.5 m/s", 12.5, "m/s"),
        ("The answer is 2 x 10^3 J.", 2000.0, "J"),
        ("so d = 1.2×10⁻³ km", 0.0012, "km"),
        ("It is 1,250 kPa", 1250.0, "kPa"),
        ("Final answer: 25 °C", 25.0, "°C"),
        ("x = 3 and y = 4. Answer: 5/36", 5 / 36, ""),
        ("We get 3.0e-2 A in the end", 0.03, "A"),
        # the first number after the last "answer", not the last number of the reply
        ("Answer: 9.8 m/s^2 (from 2 steps)", 9.8, "m/s^2"),
    ],
)
def test_numbers_in_every_notation(reply: str, value: float, written: str) -> None:
    quantity = read_quantity(reply)
    assert quantity is not None
    assert quantity.value == pytest.approx(value) and quantity.unit == written


def test_units_convert_and_dimensions_must_agree() -> None:
    assert score_numeric("Answer: 45 km/h", 12.5, "m/s")
    assert score_numeric("Answer: 1.25 kJ", 1250, "J")
    assert score_numeric("answer: 298.15 K", 25, "°C")
    assert score_numeric("Answer: 250 mA", 0.25, "A")
    assert score_numeric("Answer: 101.3 kPa", 1, "atm")
    assert not score_numeric("Answer: 12.5 kg", 12.5, "m/s")  # right number, wrong dimension
    assert score_numeric("The current is 0.5", 0.5, "A")  # no unit: read as the expected one
    assert score_numeric("It is 0.51 A", 0.5, "A") and not score_numeric("It is 0.52 A", 0.5, "A")  # 2%
    assert not score_numeric("I cannot tell.", 0.5, "A")
    with pytest.raises(ScienceScoreError, match="unknown unit 'furlong'"):
        unit("furlong")


def test_multiple_choice_letters() -> None:
    assert read_choice("The answer is (B).") == "B"
    assert read_choice("**C**") == "C"
    assert read_choice("D") == "D"
    assert read_choice("I lean to (A) at first, but the answer is B") == "B"
    assert read_choice("Answer: A or C") is None  # two letters: no commitment
    assert read_choice("The answer is E", letters="ABCD") is None
    assert read_choice("no letter here") is None
