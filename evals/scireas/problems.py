"""Generated science problems with checkable answers and the knowledge each one needs.

Six families (:data:`FAMILIES`): kinematics, circuits, stoichiometry, gas laws, unit conversion
and probability; and two about invented elements, whose constants no model can know without
being taught or told (:mod:`embodia.evals.scireas.invented`). A problem is drawn from a seed
(the same seed, the same problem), and carries its numeric answer with its unit and tolerance,
and its **knowledge ingredients**: the formulas and constants a solver must know, written
answer-agnostically (no number of this problem's answer in them). Giving a solver the
ingredients separates what it knows from how it reasons (KRUX); the generated problems have the
true ingredients, an oracle no benchmark file has.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from embodia.evals.scireas.invented import EXACT, INVENTED
from embodia.evals.scireas.scoring import ScienceScoreError, score_numeric


@dataclass(frozen=True)
class ScienceProblem:
    family: str
    seed: int
    question: str
    answer: float
    unit: str
    """The answer's unit as written ("" for a pure number)."""
    ingredients: tuple[str, ...]
    tolerance: float = 0.02

    @property
    def key(self) -> str:
        return f"{self.family}/{self.seed}"

    def check(self, reply: str) -> bool:
        """Whether ``reply``'s final quantity is this answer within the tolerance."""
        return score_numeric(reply, self.answer, self.unit, self.tolerance)


GRAVITY = 9.81
GAS_CONSTANT = 8.314
MOLAR_MASS = {"H2": 2.016, "O2": 31.998, "H2O": 18.015, "CH4": 16.043, "CO2": 44.009, "C": 12.011}


def _kinematics(rng: random.Random, seed: int) -> ScienceProblem:
    a, t = rng.choice([1.5, 2.0, 2.5, 3.0, 4.0]), rng.randint(3, 12)
    if rng.random() < 0.5:
        return ScienceProblem(
            "kinematics",
            seed,
            f"A cart starts from rest and accelerates uniformly at {a} m/s^2 for {t} s. How far does it "
            "travel in that time, in metres?",
            0.5 * a * t * t,
            "m",
            ("Distance covered from rest under constant acceleration a in time t: d = (1/2) a t^2.",),
        )
    h = rng.choice([5, 10, 20, 45, 80])
    return ScienceProblem(
        "kinematics",
        seed,
        f"A stone is dropped from rest from a height of {h} m. Ignoring air resistance, how fast is it "
        "moving when it reaches the ground, in m/s?",
        math.sqrt(2 * GRAVITY * h),
        "m/s",
        (
            "Speed after falling from rest through height h: v = sqrt(2 g h).",
            f"Acceleration due to gravity near Earth's surface: g = {GRAVITY} m/s^2.",
        ),
    )


def _circuits(rng: random.Random, seed: int) -> ScienceProblem:
    r1, r2 = rng.choice([2, 4, 6, 10, 12, 20]), rng.choice([3, 5, 8, 15, 30])
    volts = rng.choice([6, 9, 12, 24])
    series = rng.random() < 0.5
    total = r1 + r2 if series else r1 * r2 / (r1 + r2)
    how = "in series" if series else "in parallel"
    return ScienceProblem(
        "circuits",
        seed,
        f"Two resistors of {r1} ohm and {r2} ohm are connected {how} across an ideal {volts} V battery. "
        "What current does the battery deliver, in amperes?",
        volts / total,
        "A",
        (
            "Ohm's law: V = I R.",
            "Resistors in series: R = R1 + R2." if series else "Resistors in parallel: 1/R = 1/R1 + 1/R2.",
        ),
    )


def _stoichiometry(rng: random.Random, seed: int) -> ScienceProblem:
    if rng.random() < 0.5:
        grams = rng.choice([2, 4, 5, 10, 16])
        return ScienceProblem(
            "stoichiometry",
            seed,
            f"{grams} g of hydrogen gas burns completely in oxygen. What mass of water forms, in grams?",
            grams / MOLAR_MASS["H2"] * MOLAR_MASS["H2O"],
            "g",
            (
                "Combustion of hydrogen: 2 H2 + O2 -> 2 H2O (one mole of water per mole of H2).",
                f"Molar masses: H2 {MOLAR_MASS['H2']} g/mol, H2O {MOLAR_MASS['H2O']} g/mol.",
                "Moles from mass: n = m / M.",
            ),
        )
    grams = rng.choice([8, 16, 32, 40])
    return ScienceProblem(
        "stoichiometry",
        seed,
        f"{grams} g of methane burns completely in oxygen. What mass of carbon dioxide forms, in grams?",
        grams / MOLAR_MASS["CH4"] * MOLAR_MASS["CO2"],
        "g",
        (
            "Combustion of methane: CH4 + 2 O2 -> CO2 + 2 H2O (one mole of CO2 per mole of CH4).",
            f"Molar masses: CH4 {MOLAR_MASS['CH4']} g/mol, CO2 {MOLAR_MASS['CO2']} g/mol.",
            "Moles from mass: n = m / M.",
        ),
    )


def _gas_laws(rng: random.Random, seed: int) -> ScienceProblem:
    moles, celsius, litres = (
        rng.choice([0.5, 1.0, 2.0, 3.0]),
        rng.choice([0, 25, 37, 100]),
        rng.choice([10, 22.4, 25, 50]),
    )
    kelvin = celsius + 273.15
    return ScienceProblem(
        "gas_laws",
        seed,
        f"{moles} mol of an ideal gas is held at {celsius} °C in a rigid {litres} L container. What is its "
        "pressure, in kPa?",
        moles * GAS_CONSTANT * kelvin / (litres / 1000) / 1000,
        "kPa",
        (
            "Ideal gas law: P V = n R T.",
            f"Gas constant: R = {GAS_CONSTANT} J/(mol K).",
            "Kelvin from Celsius: T(K) = T(°C) + 273.15.",
            "1 L = 0.001 m^3 and 1 kPa = 1000 Pa.",
        ),
    )


def _unit_conversion(rng: random.Random, seed: int) -> ScienceProblem:
    if rng.random() < 0.5:
        speed = rng.choice([36, 54, 72, 90, 108, 120])
        return ScienceProblem(
            "unit_conversion",
            seed,
            f"A train travels at {speed} km/h. What is its speed in m/s?",
            speed / 3.6,
            "m/s",
            ("1 km = 1000 m.", "1 h = 3600 s."),
        )
    kwh = rng.choice([0.5, 1.5, 2, 3, 7])
    return ScienceProblem(
        "unit_conversion",
        seed,
        f"A heater uses {kwh} kWh of electrical energy. How much energy is that in megajoules (MJ)?",
        kwh * 3.6,
        "MJ",
        ("1 kWh is 1 kW delivered for 1 h.", "1 W = 1 J/s and 1 h = 3600 s.", "1 MJ = 10^6 J."),
    )


def _probability(rng: random.Random, seed: int) -> ScienceProblem:
    if rng.random() < 0.5:
        total = rng.randint(3, 11)
        ways = sum(1 for a in range(1, 7) for b in range(1, 7) if a + b == total)
        return ScienceProblem(
            "probability",
            seed,
            f"Two fair six-sided dice are rolled. What is the probability that their sum is {total}? "
            "Give a decimal.",
            ways / 36,
            "",
            (
                "Two fair dice have 36 equally likely ordered outcomes.",
                "Probability of an event = favourable outcomes / all outcomes.",
            ),
        )
    red, blue = rng.randint(3, 7), rng.randint(3, 7)
    return ScienceProblem(
        "probability",
        seed,
        f"An urn holds {red} red and {blue} blue balls. Two are drawn without replacement. What is the "
        "probability that both are red? Give a decimal.",
        math.comb(red, 2) / math.comb(red + blue, 2),
        "",
        (
            "Ways to choose k of n items: C(n, k) = n! / (k! (n - k)!).",
            "Probability of an event = favourable outcomes / all outcomes.",
        ),
    )


FAMILIES: dict[str, Callable[[random.Random, int], ScienceProblem]] = {
    "kinematics": _kinematics,
    "circuits": _circuits,
    "stoichiometry": _stoichiometry,
    "gas_laws": _gas_laws,
    "unit_conversion": _unit_conversion,
    "probability": _probability,
}


ALL_FAMILIES = (*FAMILIES, *INVENTED)
"""Every generated family: the six above, then the invented-element ones
(:mod:`embodia.evals.scireas.invented`)."""


def invented_problem(
    family: str, seed: int, elements: Sequence[int] | None = None, rng: random.Random | None = None
) -> ScienceProblem:
    """Problem ``seed`` of an invented family, about one of ``elements`` (default: any); drawn
    from ``rng`` when given, else from the seed."""
    rng = rng or random.Random(f"science/{family}/{seed}")
    drawn = INVENTED[family](rng, elements)
    return ScienceProblem(family, seed, drawn.question, drawn.answer, drawn.unit, drawn.ingredients, EXACT)


def generate(family: str, seed: int) -> ScienceProblem:
    """Problem ``seed`` of ``family`` (the same seed, the same problem)."""
    if family in INVENTED:
        return invented_problem(family, seed)
    if family not in FAMILIES:
        raise ScienceScoreError(f"the science problems are {', '.join(ALL_FAMILIES)}; got {family!r}")
    return FAMILIES[family](random.Random(f"science/{family}/{seed}"), seed)


def problem_set(count: int, first_seed: int = 0, families: Sequence[str] = ()) -> list[ScienceProblem]:
    """``count`` problems, ``families`` in turn (default: the six of :data:`FAMILIES`)."""
    names = list(families) or list(FAMILIES)
    unknown = [f for f in names if f not in ALL_FAMILIES]
    if unknown:
        raise ScienceScoreError(f"the science problems are {', '.join(ALL_FAMILIES)}; got {unknown[0]!r}")
    return [generate(names[k % len(names)], first_seed + k // len(names)) for k in range(count)]
