"""The contract every visual puzzle task follows: instances, parse results, verdicts, tasks.

An instance carries exact ground truth (``answer``) and structured ``facts`` so that an oracle
perception module (CSMR) can answer targeted questions and an SxS disclosure guard can check
intermediate steps exactly. The image is rendered lazily from the facts, because generation
must stay cheap (>= 1,000 instances/s for maze and sudoku) while rendering is not.
"""

from __future__ import annotations

import json
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodia.core.parsing import TOO_DEEP, JsonScan, scan_json
from embodia.errors import EmbodiaError

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")


class PuzzleError(EmbodiaError, ValueError):
    """A puzzle request is invalid (unknown task or difficulty, malformed record, ...)."""


@dataclass(frozen=True)
class PuzzleInstance:
    """One generated puzzle; ``image`` is rendered from ``facts`` on first access and cached."""

    task: str
    difficulty: str
    seed: int
    prompt: str
    answer: Any
    facts: Mapping[str, Any]
    renderer: Callable[[PuzzleInstance], np.ndarray] | None = field(default=None, compare=False, repr=False)
    _cache: dict[str, np.ndarray] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def image(self) -> np.ndarray:
        """RGB uint8 array (H, W, 3), rendered once: generation stays fast when nobody looks."""
        if "image" not in self._cache:
            if self.renderer is None:
                raise PuzzleError(f"{self.task} instance seed={self.seed} has no renderer")
            img = np.ascontiguousarray(self.renderer(self), dtype=np.uint8)
            img.setflags(write=False)
            self._cache["image"] = img
        return self._cache["image"]

    def to_record(self) -> dict[str, Any]:
        """JSON-serialisable dict; the image is not stored (it is re-rendered from the facts)."""
        return {
            "task": self.task,
            "difficulty": self.difficulty,
            "seed": self.seed,
            "prompt": self.prompt,
            # a deep copy: a consumer editing the record must not change the live instance
            "answer": json.loads(json.dumps(self.answer)),
            "facts": json.loads(json.dumps(dict(self.facts))),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PuzzleInstance:
        """Inverse of :meth:`to_record`; the renderer comes from the task registry."""
        missing = [k for k in ("task", "difficulty", "seed", "prompt", "answer", "facts") if k not in record]
        if missing:
            raise PuzzleError(f"puzzle record lacks {', '.join(missing)}")
        from embodia.envs.puzzles import make_task

        task = make_task(str(record["task"]))
        rec = json.loads(json.dumps(dict(record)))  # deep copy, and proves it is JSON
        return cls(
            task=rec["task"],
            difficulty=rec["difficulty"],
            seed=int(rec["seed"]),
            prompt=rec["prompt"],
            answer=rec["answer"],
            facts=rec["facts"],
            renderer=task.render,
        )


@dataclass(frozen=True)
class Parsed:
    """A parsed answer, or why none could be read (``error`` is a one-line reason)."""

    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def fail(cls, reason: str) -> Parsed:
        return cls(None, reason)


@dataclass(frozen=True)
class Verdict:
    """Outcome of checking an answer: exact ``correct``, a partial ``score`` in [0, 1], and why."""

    correct: bool
    score: float
    reason: str


class PuzzleTask(ABC):
    """A seeded puzzle generator with its answer parser, checker and step checker."""

    name: str = ""
    difficulties: tuple[str, ...] = DIFFICULTIES
    score_name: str = "exact"
    """What ``Verdict.score`` measures: ``exact`` (or a partial credit of the exact check), or
    ``rouge_l`` for free-text answers, which reports then average as ROUGE-L."""

    @abstractmethod
    def generate(self, seed: int, difficulty: str = "medium") -> PuzzleInstance:
        """Deterministic in ``(seed, difficulty)``; computes the ground truth, not the image."""

    @abstractmethod
    def render(self, instance: PuzzleInstance) -> np.ndarray:
        """RGB uint8 image drawn from ``instance.facts`` only (so records re-render exactly)."""

    @abstractmethod
    def parse(self, reply: str, instance: PuzzleInstance) -> Parsed:
        """Read the answer out of raw model output (JSON, code fences, prose with a final line)."""

    @abstractmethod
    def check(self, value: Any, instance: PuzzleInstance) -> Verdict:
        """Exact check of a parsed value, with a partial score where one is natural."""

    def score(self, reply: str, instance: PuzzleInstance) -> Verdict:
        """Parse then check; a parse failure scores 0 and carries the parse reason."""
        parsed = self.parse(reply, instance)
        if not parsed.ok:
            return Verdict(False, 0.0, f"parse failure: {parsed.error}")
        return self.check(parsed.value, instance)

    def steps(self, instance: PuzzleInstance) -> list[Any]:
        """Verifiable intermediate steps of the true solution, in order (empty if none)."""
        return []

    def check_step(self, prefix: Sequence[Any], instance: PuzzleInstance) -> bool:
        """Whether a partial solution is consistent with some correct solution (SxS guard)."""
        steps = self.steps(instance)
        return list(prefix) == steps[: len(prefix)]

    def text(self, instance: PuzzleInstance) -> str | None:
        """The puzzle written out as text, for text-only reasoners (SxS runs); None when the
        puzzle exists only as a picture."""
        return None

    @property
    def drawn_as_text(self) -> bool:
        """Whether the puzzle has a text drawing (:meth:`text`) that text-only policies read."""
        return type(self).text is not PuzzleTask.text

    step_format: str = ""
    """How a reply states steps so that :meth:`claimed_steps` reads them (shown to models)."""

    def answer_steps(self, value: Any, instance: PuzzleInstance) -> list[Any]:
        """The steps a complete parsed answer amounts to (same form as :meth:`steps`)."""
        return list(value)

    def claimed_steps(self, text: str, instance: PuzzleInstance) -> list[Any]:
        """The steps a piece of free text asserts, in order: a complete answer object (``{"path":
        ...}``) counts as all its steps; otherwise every JSON value shaped like one step (a list
        of as many integers as a true step has, or an integer where steps are integers), found
        at any depth. Prose states no steps: only what can be checked exactly is a claim."""
        truth = self.steps(instance)
        if not truth:
            return []
        out: list[Any] = []
        for value in json_values(text):
            if isinstance(value, dict):
                parsed = self.parse(json.dumps(value), instance)
                if parsed.ok:
                    out.extend(self.answer_steps(parsed.value, instance))
                    continue
            out.extend(_step_shaped(value, truth[0]))
        return out

    # helpers for subclasses
    def _difficulty(self, difficulty: str) -> str:
        if difficulty not in self.difficulties:
            raise PuzzleError(
                f"unknown difficulty {difficulty!r} for {self.name}; known: {', '.join(self.difficulties)}"
            )
        return difficulty

    def _seed(self, seed: int) -> int:
        if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
            raise PuzzleError(f"{self.name} seed must be a non-negative integer, got {seed!r}")
        return int(seed)

    def _seeded(self, seed: int, difficulty: str) -> tuple[int, random.Random]:
        """The checked seed and the instance's random stream, named by task, difficulty and seed."""
        seed = self._seed(seed)
        self._difficulty(difficulty)
        return seed, random.Random(f"{self.name}/{difficulty}/{seed}")

    def _seeded_generator(self, seed: int, difficulty: str, salt: int) -> tuple[int, np.random.Generator]:
        """The checked seed and the instance's numpy generator, seeded by the seed, the difficulty's
        level and the task's own ``salt``."""
        difficulty = self._difficulty(difficulty)
        seed = self._seed(seed)
        return seed, np.random.default_rng([int(seed), self.difficulties.index(difficulty), salt])

    def _instance(
        self, seed: int, difficulty: str, prompt: str, answer: Any, facts: Mapping[str, Any]
    ) -> PuzzleInstance:
        return PuzzleInstance(self.name, difficulty, int(seed), prompt, answer, facts, renderer=self.render)


class SceneGraphTask(PuzzleTask):
    """A puzzle whose instances hold a scene graph (``facts``) that questions are asked about.

    Besides the puzzle contract it answers any query from the facts, reads a question into a
    query, and names the objects an answer mentions that the scene lacks; the CSMR evaluation
    uses these as exact perception and as its hallucination count.
    """

    @abstractmethod
    def oracle(self, facts: Mapping[str, Any], query: Mapping[str, Any]) -> Any:
        """The exact answer to ``query`` from the scene graph."""

    @abstractmethod
    def parse_question(self, text: str, facts: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The query a free-text question asks, or None when it cannot be read."""

    @abstractmethod
    def hallucinated_objects(self, text: str, facts: Mapping[str, Any]) -> list[str]:
        """Objects ``text`` names that the scene does not hold."""


def _step_shaped(value: Any, example: Any) -> list[Any]:
    """The parts of a JSON value shaped like ``example`` (one true step), depth first."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if isinstance(example, list):
        if isinstance(value, list) and len(value) == len(example) and all(is_int(v) for v in value):
            return [list(value)]
    elif isinstance(value, list) and all(is_int(v) for v in value):
        return list(value)  # integer steps count only inside a list ({"length": 57} is no step)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [step for v in items for step in _step_shaped(v, example)]


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\n?(.*?)```", re.S)
_ANSWER_TAG = re.compile(r"<(/?)answer>", re.I)
_BOXED = re.compile(r"\\boxed\{((?:[^{}]++|\{[^{}]*+\})*+)\}")
_EMPHASIS = re.compile(r"(\*\*|__|\*(?=\S)|(?<=\S)\*)")
_OBJECT_START = re.compile(r"\{\s*+[\"']")
_LITERAL_CHARS = 20_000
"""Longest bracketed text tried as a Python literal (``ast`` is slow and memory-hungry)."""


def _labelled_line(keys: Sequence[str]) -> re.Pattern[str]:
    """``Answer: X``, ``Final answer = X``, ``The answer is: X``, ``Path: X`` (any answer key as
    the label), anywhere in a line; the value runs to the end of the line (strip it: a lazy
    ``(.+?)\\s*$`` would cost quadratic time on long runs of spaces)."""
    labels = "|".join(re.escape(k) for k in ("answer", *keys))
    return re.compile(rf"(?:^|\W)(?:final\s+)?(?:{labels})\s*+(?:is\s*+)?[:=]\s*(.+)$", re.I | re.M)


def _is_phrase(keys: Sequence[str]) -> re.Pattern[str]:
    """The weaker ``... the answer is X.`` / ``... the shortest path is X.`` (no colon); the value
    runs to the end of the line (see :func:`_phrase_value`)."""
    labels = "|".join(re.escape(k) for k in ("answer", *keys))
    return re.compile(rf"\b(?:{labels})\s+is\s+(.+)$", re.I | re.M)


def _phrase_value(rest_of_line: str) -> str:
    """``rest_of_line`` without trailing spaces and one full stop (at least its first character)."""
    value = rest_of_line.rstrip()
    if value.endswith("."):
        value = value[:-1].rstrip()
    return value or rest_of_line[:1]


def _answer_tags(text: str) -> list[str]:
    """What each ``<answer>...</answer>`` holds: an opening tag ends at the first closing tag
    after it. One pass over the tags (a lazy regex would rescan from every unclosed opener)."""
    tags = list(_ANSWER_TAG.finditer(text))
    held: list[str] = []
    index = 0
    while index < len(tags):
        opening = tags[index]
        index += 1
        if opening.group(1):
            continue
        while index < len(tags) and not tags[index].group(1):
            index += 1
        if index == len(tags):
            break
        held.append(text[opening.end() : tags[index].start()])
        index += 1
    return held


# A dict literal's first key is never a dict or list (unhashable): "{{" and "{[" are no literal.
_LITERAL_START = re.compile(r"\[|\{\s*+[^\s{\[]")


def _json_or_literal(region: str) -> dict[str, Any] | list[Any] | None:
    """A bracketed region as JSON, else as a Python dict or list literal (single quotes, trailing
    commas), the way models often write them."""
    if not _LITERAL_START.match(region):  # JSON or a literal: neither starts like this
        return None
    try:
        value = json.loads(region)
    except ValueError:  # not JSON, or a number of more than 4,300 digits
        if len(region) > _LITERAL_CHARS:
            return None
        import ast
        import warnings

        try:
            with warnings.catch_warnings():  # odd escapes in model text are not our warnings
                warnings.simplefilter("ignore")
                value = ast.literal_eval(region)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, dict | list) else None


def _scan_values(text: str) -> JsonScan:
    return scan_json(text, _json_or_literal)


def json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array embedded in ``text``, in order of appearance. An
    object JSON cannot read is tried as a Python literal (single quotes, trailing commas), the
    way models often write them. Text nested deeper than ``MAX_JSON_DEPTH`` holds none. Time is
    linear in ``text``."""
    return [span.value for span in _scan_values(text).spans]


def _keyed(value: Any, keys: Sequence[str]) -> tuple[bool, Any]:
    """The value under one of ``keys`` in a dict, looking one level into nested answer objects
    (``{"answer": {"path": ...}}``)."""
    if not isinstance(value, dict):
        return False, None
    for key in keys:
        if key in value:
            inner = value[key]
            found, deeper = _keyed(inner, keys)
            return True, deeper if found else inner
    return False, None


def find_answer(reply: str, keys: Sequence[str]) -> Parsed:
    """The raw answer candidate in a model reply; tasks then validate and normalise it.

    Markdown emphasis is dropped and ``\\boxed{X}`` unwrapped first. Then, in order: the last
    JSON object holding one of ``keys`` (or ``answer``); an ``<answer>`` tag; the last line
    labelled with ``answer`` or a key (``Final answer: X``, ``Path: X``); the last one-key JSON
    object; the last bare JSON array; the last ``... answer is X`` phrase; else the last
    non-empty line (of the last code fence, if any). Text that opens a JSON object but never
    closes one is reported as truncated rather than guessed at. Lists in the reasoning never
    override a labelled answer.
    """
    if not isinstance(reply, str) or not reply.strip():
        return Parsed.fail("empty reply")
    keys = tuple(dict.fromkeys((*keys, "answer")))
    text = _BOXED.sub(lambda m: m.group(1), _EMPHASIS.sub("", reply.strip()))
    scan = _scan_values(text)
    if scan.too_deep:
        return Parsed.fail(TOO_DEEP.reason)
    values = [span.value for span in scan.spans]
    for value in reversed(values):
        found, inner = _keyed(value, keys)
        if found:
            return Parsed(inner)
    tags = _answer_tags(text)
    if tags:
        return Parsed(tags[-1].strip())
    lines = _labelled_line(keys).findall(text)
    if lines:
        return Parsed(lines[-1].strip().strip("`").strip())
    for value in reversed(values):
        if isinstance(value, dict) and len(value) == 1:
            return Parsed(next(iter(value.values())))
    for value in reversed(values):
        if isinstance(value, list):
            return Parsed(value)
    if _OBJECT_START.search(text) and not any(isinstance(v, dict) for v in values):
        return Parsed.fail("truncated or malformed JSON")
    phrases = _is_phrase(keys).findall(text)
    if phrases:
        return Parsed(_phrase_value(phrases[-1]).strip().strip("`").strip())
    fences = _FENCE.findall(text)
    body = fences[-1] if fences else text
    rest = [ln.strip().strip("`").strip() for ln in body.splitlines()]
    rest = [ln for ln in rest if ln]
    if not rest:
        return Parsed.fail("no answer found")
    return Parsed(rest[-1])


_INT_RUN = re.compile(r"\d+(?:(?:\s*(?:,|;|->|=>|→|–|—|-)\s*|\s+)\d+)*")


def as_int(value: Any) -> int | None:
    """An integer from an int, an integral float or a digit string; None for bools, fractions
    and the rest (``True`` is not tile 1, ``0.9`` is not point 0)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*+\d++\s*+", value):
        return digits_int(value.strip())
    return None


MAX_DIGITS = 18
"""Longest digit string read as a number: no puzzle has more than a few hundred tiles or points,
and Python refuses to convert strings of more than 4,300 digits (a runaway reply has those)."""


def digits_int(digits: str) -> int | None:
    """The integer a digit string spells, or None when it has more than :data:`MAX_DIGITS` digits."""
    return int(digits) if len(digits) <= MAX_DIGITS else None


def is_permutation(value: Any, n: int) -> bool:
    """Whether ``value`` is a list of the integers 0..n-1, each once, in any order."""
    return isinstance(value, list) and all(as_int(v) == v for v in value) and sorted(value) == list(range(n))


def int_sequence(value: Any, what: str) -> Parsed:
    """A list of integers from an answer value: a (possibly nested, row by row) JSON list, or
    text, where the longest run of separated integers is the answer ("the 3x3 grid, row by row:
    2 0 1 ..." reads the run, not the 3s; "0 → 3 → 1" reads 0, 3, 1)."""
    if isinstance(value, str):
        runs = list(_INT_RUN.finditer(value))
        if not runs:
            return Parsed.fail(f"no answer found: expected a list of {what} numbers")
        longest = max(len(re.findall(r"\d+", r.group())) for r in runs)
        best = [r for r in runs if len(re.findall(r"\d+", r.group())) == longest][-1]
        tokens = re.findall(r"\d+", best.group())
        too_long = next((t for t in tokens if digits_int(t) is None), None)
        if too_long is not None:
            return Parsed.fail(f"{too_long[:12]}... ({len(too_long)} digits) is not a {what} number")
        return Parsed([int(t) for t in tokens])
    if not isinstance(value, list) or not value:
        return Parsed.fail(f"no answer found: expected a list of {what} numbers")
    flat = [x for row in value for x in (row if isinstance(row, list) else [row])]
    numbers = [as_int(x) for x in flat]
    if any(n is None for n in numbers):
        bad = next(x for x, n in zip(flat, numbers, strict=True) if n is None)
        return Parsed.fail(f"{bad!r} is not a {what} number")
    return Parsed([n for n in numbers if n is not None])


def answer_format_note(example: str) -> str:
    """The answer-format instruction appended to every prompt, so parsers and prompts agree."""
    return f"Reply with a JSON object on the last line, for example {example}."
