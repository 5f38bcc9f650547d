"""One record for a scientific question from any source, graded one way per answer type.

:class:`ScienceItem` is SciReas's common schema: the task it comes from, its id, the question,
the choices of a multiple-choice item (lettered A, B, ...; none when the question
writes them itself), the answer (a letter, a number with
its unit and tolerance, or a short text), and the knowledge ingredients when they are known
(the generated problems carry their true ones).

Grading (:meth:`ScienceItem.grade`): a choice item by the letter the reply commits to
(:func:`~embodia.evals.scireas.scoring.read_choice`); a numeric item by the reply's final
quantity within the tolerance (:func:`~embodia.evals.scireas.scoring.score_numeric`); an exact
item by the reply's final answer (after its last "answer:", else its last line), compared
case-, space- and punctuation-insensitively.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any

from embodia.evals.scireas.problems import ScienceProblem
from embodia.evals.scireas.scoring import ScienceScoreError, read_choice, read_quantity, score_numeric, to_si

ANSWER_TYPES = ("choice", "numeric", "exact")
LETTERS = string.ascii_uppercase


@dataclass(frozen=True)
class ScienceItem:
    task: str
    doc_id: str
    question: str
    answer: Any
    answer_type: str
    choices: tuple[str, ...] = ()
    unit: str = ""
    tolerance: float = 0.02
    ingredients: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Source fields kept as they were (the Pro flags, a discipline, ...)."""

    def __post_init__(self) -> None:
        if self.answer_type not in ANSWER_TYPES:
            raise ScienceScoreError(
                f"{self.key}: answer_type is one of {', '.join(ANSWER_TYPES)}, got {self.answer_type!r}"
            )
        if self.answer_type == "choice" and str(self.answer) not in self.letters:
            raise ScienceScoreError(
                f"{self.key}: the answer {self.answer!r} is not one of the letters {self.letters}"
            )
        if len(self.choices) == 1 or len(self.choices) > len(LETTERS):
            raise ScienceScoreError(f"{self.key}: a choice item has 2 to 26 choices, got {len(self.choices)}")
        if self.answer_type == "numeric" and not isinstance(self.answer, int | float):
            raise ScienceScoreError(f"{self.key}: a numeric answer must be a number, got {self.answer!r}")

    @property
    def key(self) -> str:
        return f"{self.task}/{self.doc_id}"

    @property
    def letters(self) -> str:
        """The letters a reply may choose: one per choice, or A-J when the choices are written
        inside the question (as SciReas-Pro and SuperGPQA exports have them)."""
        return LETTERS[: len(self.choices)] if self.choices else LETTERS[:10]

    def prompt(self, ingredients: tuple[str, ...] | list[str] = ()) -> str:
        """The question as asked, with ``ingredients`` given before it when there are any."""
        parts = []
        if ingredients:
            parts.append("Knowledge that may help:\n" + "\n".join(f"- {i}" for i in ingredients))
        parts.append(self.question.strip())
        if self.answer_type == "choice":
            if self.choices:
                parts.append("\n".join(f"({LETTERS[k]}) {c}" for k, c in enumerate(self.choices)))
            parts.append("Reason step by step, then end with: Answer: <letter>")
        elif self.answer_type == "numeric":
            unit = f" in {self.unit}" if self.unit else ""
            parts.append(f"Reason step by step, then end with: Answer: <number>{unit}")
        else:
            parts.append("Reason step by step, then end with: Answer: <answer>")
        return "\n\n".join(parts)

    def read(self, reply: str) -> Any:
        """The answer ``reply`` gives, as this item's type reads it (None when it gives none):
        a letter, a number in SI units (to 4 significant figures), or the normalised text."""
        if self.answer_type == "choice":
            return read_choice(reply, self.letters)
        if self.answer_type == "numeric":
            quantity = read_quantity(reply)
            if quantity is None:
                return None
            try:
                value, _ = to_si(quantity.value, quantity.unit or self.unit)
            except ScienceScoreError:
                value, _ = to_si(quantity.value, self.unit)
            return float(f"{value:.4g}")
        return _normal(final_answer(reply)) or None

    def grade(self, reply: str) -> bool:
        if self.answer_type == "choice":
            return read_choice(reply, self.letters) == self.answer
        if self.answer_type == "numeric":
            return score_numeric(reply, float(self.answer), self.unit, self.tolerance)
        return _normal(final_answer(reply)) == _normal(str(self.answer))


_FINAL = re.compile(r"answer\s*(?:is)?\s*:?", re.IGNORECASE)


def final_answer(reply: str) -> str:
    """The text after the reply's last "answer:" (else its last non-empty line)."""
    cues = list(_FINAL.finditer(reply))
    if cues:
        return reply[cues[-1].end() :].strip().splitlines()[0] if reply[cues[-1].end() :].strip() else ""
    lines = [line for line in reply.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _normal(text: str) -> str:
    return re.sub(r"[\s\W_]+", " ", text.lower()).strip()


def from_problem(problem: ScienceProblem) -> ScienceItem:
    """A generated problem as an item, its true ingredients kept."""
    return ScienceItem(
        f"generated/{problem.family}",
        str(problem.seed),
        problem.question,
        problem.answer,
        "numeric",
        unit=problem.unit,
        tolerance=problem.tolerance,
        ingredients=problem.ingredients,
    )
