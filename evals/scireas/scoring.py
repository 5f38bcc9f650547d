"""Scoring scientific answers: multiple-choice letters, and numbers with units within a tolerance.

**Multiple choice** (:func:`read_choice`): the letter a reply commits to: the last of "answer
is (B)", "Answer: B", "**B**" or a lone "(B)"; a reply naming two letters in its final
statement ("A or C") commits to none.

**Numbers with units** (:func:`read_quantity`, :func:`score_numeric`): the first number after
the reply's last "answer" (else the reply's last number), in plain, decimal, fraction
(``5/36``), scientific (``1.2e3``, ``1.2 x 10^3``, ``1.2×10⁻³``) or thousands-separated form,
with the unit written after it. The unit is converted to the expected one (SI prefixes on the
base units, and the usual others: km/h, atm, L, degrees Celsius, ...); a unit of another
dimension is wrong, and a missing unit is read as the expected one. Right within a relative
tolerance (default 2%).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from embodia.errors import EmbodiaError


class ScienceScoreError(EmbodiaError, ValueError):
    """An expected answer or unit the scorer cannot use; the message names it."""


# dimension exponents over (m, kg, s, A, K, mol), and the factor to SI
_D = tuple[int, int, int, int, int, int]
LENGTH: _D = (1, 0, 0, 0, 0, 0)
MASS: _D = (0, 1, 0, 0, 0, 0)
TIME: _D = (0, 0, 1, 0, 0, 0)
SPEED: _D = (1, 0, -1, 0, 0, 0)
ACCELERATION: _D = (1, 0, -2, 0, 0, 0)
FORCE: _D = (1, 1, -2, 0, 0, 0)
ENERGY: _D = (2, 1, -2, 0, 0, 0)
POWER: _D = (2, 1, -3, 0, 0, 0)
CURRENT: _D = (0, 0, 0, 1, 0, 0)
VOLTAGE: _D = (2, 1, -3, -1, 0, 0)
RESISTANCE: _D = (2, 1, -3, -2, 0, 0)
CHARGE: _D = (0, 0, 1, 1, 0, 0)
TEMPERATURE: _D = (0, 0, 0, 0, 1, 0)
AMOUNT: _D = (0, 0, 0, 0, 0, 1)
VOLUME: _D = (3, 0, 0, 0, 0, 0)
PRESSURE: _D = (-1, 1, -2, 0, 0, 0)
NONE: _D = (0, 0, 0, 0, 0, 0)


@dataclass(frozen=True)
class Unit:
    dimension: _D
    factor: float
    """Multiply by this to get SI."""
    offset: float = 0.0
    """Add this after the factor (degrees Celsius to kelvin)."""


_BASE: dict[str, Unit] = {
    "m": Unit(LENGTH, 1.0),
    "g": Unit(MASS, 1e-3),
    "s": Unit(TIME, 1.0),
    "a": Unit(CURRENT, 1.0),
    "v": Unit(VOLTAGE, 1.0),
    "ω": Unit(RESISTANCE, 1.0),
    "ohm": Unit(RESISTANCE, 1.0),
    "ohms": Unit(RESISTANCE, 1.0),
    "j": Unit(ENERGY, 1.0),
    "w": Unit(POWER, 1.0),
    "n": Unit(FORCE, 1.0),
    "c": Unit(CHARGE, 1.0),
    "pa": Unit(PRESSURE, 1.0),
    "mol": Unit(AMOUNT, 1.0),
    "l": Unit(VOLUME, 1e-3),
    "k": Unit(TEMPERATURE, 1.0),
}
_PREFIXES = {"k": 1e3, "m": 1e-3, "c": 1e-2, "µ": 1e-6, "u": 1e-6, "n": 1e-9, "M": 1e6, "G": 1e9}
_OTHERS: dict[str, Unit] = {
    "m/s": Unit(SPEED, 1.0),
    "km/h": Unit(SPEED, 1 / 3.6),
    "kph": Unit(SPEED, 1 / 3.6),
    "m/s^2": Unit(ACCELERATION, 1.0),
    "m/s2": Unit(ACCELERATION, 1.0),
    "m/s²": Unit(ACCELERATION, 1.0),
    "h": Unit(TIME, 3600.0),
    "min": Unit(TIME, 60.0),
    "atm": Unit(PRESSURE, 101_325.0),
    "bar": Unit(PRESSURE, 1e5),
    "°c": Unit(TEMPERATURE, 1.0, 273.15),
    "degc": Unit(TEMPERATURE, 1.0, 273.15),
    "c°": Unit(TEMPERATURE, 1.0, 273.15),
    "°k": Unit(TEMPERATURE, 1.0),
    "%": Unit(NONE, 0.01),
    "": Unit(NONE, 1.0),
}


def unit(name: str) -> Unit:
    """The unit called ``name`` (case matters only for the prefixes M, G and m)."""
    text = name.strip().replace(" ", "")
    lowered = text.lower()
    if lowered in _OTHERS:
        return _OTHERS[lowered]
    if lowered in _BASE and not (len(text) == 1 and text in "M"):
        return _BASE[lowered]
    if len(text) > 1 and text[0] in _PREFIXES and text[1:].lower() in _BASE:
        base = _BASE[text[1:].lower()]
        if base.dimension != TEMPERATURE:
            return Unit(base.dimension, base.factor * _PREFIXES[text[0]])
    raise ScienceScoreError(f"unknown unit {name!r}")


def to_si(value: float, name: str) -> tuple[float, _D]:
    u = unit(name)
    return value * u.factor + u.offset, u.dimension


_NUMBER = re.compile(
    r"(?<![\w.])([-−+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-−+]?\.\d+)(?:\s*/\s*(\d+)(?![\d.]))?"
    r"(?:\s*(?:[eE]\s*([-−+]?\d+)|(?:x|×|\*)\s*10\s*(?:\^|\*\*)?\s*([-−+⁻]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)))?"
    r"\s*([°%a-zA-ZΩµ][\w/^°²µΩ]*(?:\s*/\s*[a-zA-Z]+\^?\d*)?)?"
)
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_ANSWER = re.compile(r"answer", re.IGNORECASE)


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str


def read_quantity(reply: str) -> Quantity | None:
    """The reply's final number and its unit (module docstring); None without a number."""
    cues = list(_ANSWER.finditer(reply))
    tail = reply[cues[-1].end() :] if cues else reply
    found = list(_NUMBER.finditer(tail)) or (list(_NUMBER.finditer(reply)) if cues else [])
    if not found:
        return None
    match = found[-1] if not cues else found[0]
    mantissa = float(match.group(1).replace(",", "").replace("−", "-"))
    if match.group(2):
        if int(match.group(2)) == 0:
            return None
        mantissa /= int(match.group(2))  # a fraction, 5/36
    exponent = match.group(3) or match.group(4)
    if exponent:
        mantissa *= 10.0 ** int(exponent.translate(_SUPERSCRIPTS).replace("−", "-"))
    written = (match.group(5) or "").strip().rstrip(".")
    return Quantity(mantissa, written)


def score_numeric(reply: str, expected: float, expected_unit: str, tolerance: float = 0.02) -> bool:
    """Whether the reply's final quantity equals ``expected`` (in ``expected_unit``) within the
    relative ``tolerance`` (module docstring)."""
    if tolerance < 0:
        raise ScienceScoreError(f"the tolerance must be >= 0, got {tolerance}")
    target, dimension = to_si(expected, expected_unit)
    quantity = read_quantity(reply)
    if quantity is None:
        return False
    try:
        value, found = to_si(quantity.value, quantity.unit or expected_unit)
    except ScienceScoreError:
        # a word after the number that is no unit ("12 apples", "3 because"): read it bare
        value, found = to_si(quantity.value, expected_unit)
    if found != dimension:
        return False
    return math.isclose(value, target, rel_tol=tolerance, abs_tol=1e-12)


_CHOICE_PATTERNS = (
    re.compile(r"answer\s*(?:is|:)?\s*\(?\*{0,2}([A-J])\b\)?(?!\s*(?:or|and)\s*\(?[A-J]\b)", re.IGNORECASE),
    re.compile(r"\*\*\(?([A-J])\)?\*\*"),
    re.compile(r"(?:^|\s)\(([A-J])\)(?:\s|[.,;]|$)"),
)


def read_choice(reply: str, letters: str = "ABCD") -> str | None:
    """The letter the reply commits to (module docstring), among ``letters``."""
    for pattern in _CHOICE_PATTERNS:
        found = [m.group(1).upper() for m in pattern.finditer(reply)]
        found = [f for f in found if f in letters]
        if found:
            return found[-1]
    stripped = reply.strip().strip(".*() ")
    return stripped.upper() if len(stripped) == 1 and stripped.upper() in letters else None
