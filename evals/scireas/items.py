"""One record for a scientific question from any source, graded one way per answer type.

:class:`ScienceItem` is SciReas's common schema: the task it comes from, its id, the question,
the choices of a multiple-choice item (lettered A, B, ...; none when the question
writes them itself), the answer (a letter, a number with
its unit and tolerance, a short text, or a generative task's reference), and the knowledge
ingredients when they are known (the generated problems carry their true ones).

Grading (:meth:`ScienceItem.grade`): a choice item by the letter the reply commits to
(:func:`~embodia.evals.scireas.scoring.read_choice`); a numeric item by the reply's final
quantity within the tolerance (:func:`~embodia.evals.scireas.scoring.score_numeric`); an exact
item by the reply's final answer (after its last "answer:", else its last line), compared
case-, space- and punctuation-insensitively.

An ``f1`` item (SciRIFF's generative tasks, which SciReas scores by F1) has a score in [0, 1]
(:meth:`ScienceItem.score`) over the reply's answer, the text after its last "Answer:" (else
its last line), with SQuAD's normalisation (lower case, no punctuation, no articles):

- a text reference: the token F1 of the answer against it;
- a list reference (a list of strings, or a string holding a JSON list or object): the F1
  of the sets of normalised elements. The answer is read as JSON when it parses (a list's
  items; an object's ``key: value`` pairs; a nested list joined into one element), else split
  on commas and newlines; two empty sets score 1.

KRUX needs a right/wrong verdict per question, so ``grade`` calls an f1 item right when its
score reaches :data:`F1_PASS`.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from embodia.evals.scireas.problems import ScienceProblem
from embodia.evals.scireas.scoring import ScienceScoreError, read_choice, read_quantity, score_numeric, to_si

ANSWER_TYPES = ("choice", "numeric", "exact", "f1")
LETTERS = string.ascii_uppercase
F1_PASS = 0.5
"""The F1 at which an f1 item counts as right: embodia's choice (SciReas reports the mean F1;
KRUX needs a verdict per question)."""


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
        if self.answer_type == "f1":
            if isinstance(self.answer, list | tuple):
                # a tuple, so that an item read back from JSON (a list) compares equal
                object.__setattr__(self, "answer", tuple(self.answer))
            if not (
                (isinstance(self.answer, str) and self.answer.strip())
                or (
                    isinstance(self.answer, tuple)
                    and self.answer
                    and all(isinstance(a, str) for a in self.answer)
                )
            ):
                raise ScienceScoreError(
                    f"{self.key}: an f1 answer is a non-empty text or list of texts, got {self.answer!r}"
                )

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
        elif self.answer_type == "f1":
            parts.append("Reason step by step, then end with: Answer: <answer, in the format asked for>")
        else:
            parts.append("Reason step by step, then end with: Answer: <answer>")
        return "\n\n".join(parts)

    def read(self, reply: str) -> Any:
        """The answer ``reply`` gives, as this item's type reads it (None when it gives none):
        a letter, a number in SI units (to 4 significant figures), or the normalised text (an
        f1 item with a list reference: the sorted normalised elements)."""
        if self.answer_type == "f1":
            text = _f1_answer(reply)
            if not text:
                return None
            if _elements(self.answer) is not None:
                return sorted(_reply_elements(text))
            return _squad_normal(text) or None
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

    def score(self, reply: str) -> float:
        """The reply's score in [0, 1]: an f1 item's F1 (module docstring), else 1.0 when
        :meth:`grade` calls it right and 0.0 when not."""
        if self.answer_type != "f1":
            return 1.0 if self.grade(reply) else 0.0
        text = _f1_answer(reply)
        reference = _elements(self.answer)
        if reference is None:
            said, expected = _squad_normal(text).split(), _squad_normal(str(self.answer)).split()
            return _f1(sum((Counter(said) & Counter(expected)).values()), len(said), len(expected))
        found, wanted = set(_reply_elements(text)), {e for e in map(_squad_normal, reference) if e}
        return _f1(len(found & wanted), len(found), len(wanted))

    def grade(self, reply: str) -> bool:
        if self.answer_type == "f1":
            return self.score(reply) >= F1_PASS
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


_F1_CUE = re.compile(r"(?<![\w\"'])answer(?:\s+is)?\s*:", re.IGNORECASE)
"""An f1 reply's cue: "Answer:" itself, so that a JSON key ``"answer":`` inside the answer is
not taken for it."""
_FENCE = re.compile(r"^\s*```\w*\s*$", re.MULTILINE)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _f1_answer(reply: str) -> str:
    """An f1 reply's answer: all the text after its last "Answer:" (a list or a summary may
    run over several lines), else its last line; code fences dropped."""
    cues = list(_F1_CUE.finditer(reply))
    text = reply[cues[-1].end() :] if cues else final_answer(reply)
    return _FENCE.sub("", text).strip()


def _squad_normal(text: str) -> str:
    """SQuAD's answer normalisation: lower case, punctuation and articles removed, spaces
    collapsed."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def _flatten(value: Any) -> list[str]:
    """A JSON value as a list of texts: a list's items (a nested list joined into one), an
    object's ``key: value`` pairs, a scalar itself; null and empty lists give nothing."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [f"{key}: {element}" for key, inner in value.items() for element in _flatten(inner)]
    if isinstance(value, list):
        out = []
        for inner in value:
            if isinstance(inner, list):
                joined = " ".join(_flatten(inner))
                if joined:
                    out.append(joined)
            else:
                out.extend(_flatten(inner))
        return out
    return [str(value)]


def _elements(answer: Any) -> list[str] | None:
    """A list reference's elements; None for a text reference. A string holding a JSON list
    or object is a list reference (SciRIFF writes its structured outputs so)."""
    if isinstance(answer, list | tuple):
        return [str(a) for a in answer]
    try:
        value = json.loads(answer)
    except (TypeError, ValueError):
        return None
    return _flatten(value) if isinstance(value, list | dict) else None


def _reply_elements(text: str) -> list[str]:
    """The normalised elements of a reply's answer: its JSON (the whole text, else the first
    JSON list or object in it) when it parses, else its comma- and newline-separated parts."""
    value: Any = None
    try:
        value = json.loads(text)
    except ValueError:
        start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
        if start >= 0:
            try:
                value, _ = json.JSONDecoder().raw_decode(text[start:])
            except ValueError:
                value = None
    parts = _flatten(value) if value is not None else re.split(r"[,\n]", text)
    return sorted({e for e in map(_squad_normal, parts) if e})


def _f1(common: int, predicted: int, reference: int) -> float:
    """F1 from the overlap's size and the two sizes; two empty answers agree."""
    if not predicted or not reference:
        return float(predicted == reference)
    precision, recall = common / predicted, common / reference
    return 2 * precision * recall / (precision + recall) if common else 0.0


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
