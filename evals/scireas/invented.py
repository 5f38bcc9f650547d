"""Science problems about invented elements: a world no model has read about.

Each invented element (:func:`invented_element`) has a name, an atomic number and an integer
molar mass, drawn from its index. Nothing outside this module knows them, so a solver can only
know an element's constants from training on them or from the knowledge ingredients in front of
it. That makes the two families here a control for KRUX: without ingredients, a question about
an element the solver was never taught is a pure knowledge failure; with them, what is left is
reasoning.

- ``invented_ions`` (one fact, one subtraction): how many electrons an ion of charge 1+ to 3+
  has. Ingredients: the element's atomic number, and the rule that an ion of charge q+ has q
  electrons fewer than protons.
- ``invented_moles`` (one fact, one multiplication): the mass of 2 to 9 mol of the element.
  Ingredients: its molar mass, and m = n M.

A problem's seed picks the element among the first :data:`ELEMENTS` (``elements`` narrows it
to a subset, e.g. the ones a study never trains on), then the question's numbers. Answers are
whole numbers and graded exactly (a tolerance far below 1).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from embodia.evals.scireas.scoring import ScienceScoreError

ELEMENTS = 1000
"""How many invented elements there are (indices 0 to ELEMENTS - 1)."""

_SYLLABLES = [onset + vowel for onset in "bdfgklmnprstvz" for vowel in "aeiou"]  # 70
EXACT = 1e-6
"""The relative tolerance of an invented problem's answer: exact for whole numbers."""


@dataclass(frozen=True)
class InventedElement:
    index: int
    name: str
    atomic_number: int
    molar_mass: int
    """In g/mol."""


def invented_element(index: int) -> InventedElement:
    """Element ``index``: the same index, the same element; different indices, different names."""
    if not (isinstance(index, int) and 0 <= index < ELEMENTS):
        raise ScienceScoreError(f"an invented element's index is 0 to {ELEMENTS - 1}, got {index!r}")
    # a fixed permutation of the syllable pairs, so neighbouring indices do not share a prefix
    code = (index * 7_919 + 13) % (len(_SYLLABLES) ** 2)
    first, second = divmod(code, len(_SYLLABLES))
    rng = random.Random(f"invented-element/{index}")
    name = (_SYLLABLES[first] + _SYLLABLES[second]).capitalize() + "ium"
    return InventedElement(index, name, rng.randint(10, 89), rng.randint(11, 99))


def _element(rng: random.Random, elements: Sequence[int] | None) -> InventedElement:
    return invented_element(rng.choice(elements) if elements else rng.randrange(ELEMENTS))


@dataclass(frozen=True)
class InventedQuestion:
    """What an invented problem is before it becomes a
    :class:`~embodia.evals.scireas.problems.ScienceProblem`."""

    question: str
    answer: int
    unit: str
    ingredients: tuple[str, ...]
    element: InventedElement


def ion_question(rng: random.Random, elements: Sequence[int] | None = None) -> InventedQuestion:
    element = _element(rng, elements)
    charge = rng.randint(1, 3)
    return InventedQuestion(
        f"An ion of the element {element.name} carries a charge of {charge}+. How many electrons "
        "does it have?",
        element.atomic_number - charge,
        "",
        (
            f"A {element.name} atom has {element.atomic_number} protons in its nucleus.",
            "A neutral atom has as many electrons as protons; an ion of charge q+ has q electrons fewer.",
        ),
        element,
    )


def moles_question(rng: random.Random, elements: Sequence[int] | None = None) -> InventedQuestion:
    element = _element(rng, elements)
    moles = rng.randint(2, 9)
    return InventedQuestion(
        f"What is the mass of {moles} mol of the element {element.name}, in grams?",
        moles * element.molar_mass,
        "g",
        (
            f"The molar mass of {element.name} is {element.molar_mass} g/mol.",
            "Mass from moles: m = n M.",
        ),
        element,
    )


INVENTED = {"invented_ions": ion_question, "invented_moles": moles_question}
