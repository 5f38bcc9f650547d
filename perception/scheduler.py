"""Perception on demand (CSMR): modules that answer one targeted visual question, and the
guards that decide whether a question may be asked at all.

A reasoner never sees the image; it asks. Every module answers ``look(item, question,
query)`` with an :class:`Evidence`:

- :class:`VLMPerceiver`: any chat :class:`~embodia.core.chat.Policy` with images, shown
  the item's image and the question.
- :class:`CropPerceiver`: the same, on a crop of the image (``query["region"]`` =
  ``[x0, y0, x1, y1]`` in 0-1 image coordinates) scaled back up, to look closer.
- :class:`OraclePerceiver`: exact answers from the item's ground truth (``item.facts``) for
  structured queries, through the task's ``oracle``, and for free questions the task's
  ``parse_question`` can read into one; it separates reasoning errors from perception
  errors.

:class:`QueryGuard` holds the budget of one item: at most ``max_queries`` questions, at most
``max_tokens`` reasoner tokens, and no question asked twice (after normalising case, spaces
and punctuation): a repeat gets the earlier evidence back without a new look.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from embodia.core.chat import Message, Policy
from embodia.errors import EmbodiaError

PERCEIVE_PROMPT = (
    "You are a visual perception module. Answer the question about the image briefly and "
    "factually, in one short sentence. Say 'not visible' when the image does not show it."
)


class PerceptionError(EmbodiaError, ValueError):
    """A perception query cannot be answered as asked (a bad region, no oracle)."""


@dataclass(frozen=True)
class Evidence:
    question: str
    answer: str
    source: str
    """The module that answered (its name)."""
    latency_s: float = 0.0
    tokens: int = 0
    repeated: bool = False
    """True when the guard answered from an earlier look instead of asking again."""


class Perceiver(Protocol):
    name: str

    def look(self, item: Any, question: str, query: Mapping[str, Any] | None = None) -> Evidence: ...


class VLMPerceiver:
    """A chat VLM shown the item's image and the question."""

    def __init__(self, policy: Policy, max_tokens: int = 48) -> None:
        self.policy = policy
        self.name = f"vlm:{policy.name}"
        self.max_tokens = max_tokens

    def _ask(self, image: NDArray[np.uint8], question: str) -> Evidence:
        messages: list[Message] = [
            {"role": "system", "content": PERCEIVE_PROMPT},
            {"role": "user", "content": question},
        ]
        started = time.perf_counter()
        completion = self.policy.complete(messages, images=[image], max_tokens=self.max_tokens)
        return Evidence(
            question,
            completion.text.strip(),
            self.name,
            time.perf_counter() - started,
            completion.prompt_tokens + completion.completion_tokens,
        )

    def look(self, item: Any, question: str, query: Mapping[str, Any] | None = None) -> Evidence:
        return self._ask(np.asarray(item.image), question)


def crop(image: NDArray[np.uint8], region: Any, min_side: int = 224) -> NDArray[np.uint8]:
    """The ``[x0, y0, x1, y1]`` (0-1) part of ``image``, scaled up so its short side is at
    least ``min_side`` pixels (a closer look, not a smaller one)."""
    try:
        x0, y0, x1, y1 = (float(v) for v in region)
    except (TypeError, ValueError):
        raise PerceptionError(
            f"a region is [x0, y0, x1, y1] in 0-1 image coordinates, got {region!r}"
        ) from None
    if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
        raise PerceptionError(f"region {[x0, y0, x1, y1]} is empty or outside the image (0-1 coordinates)")
    height, width = image.shape[:2]
    left, top = int(x0 * width), int(y0 * height)
    right, bottom = max(left + 1, int(np.ceil(x1 * width))), max(top + 1, int(np.ceil(y1 * height)))
    part = Image.fromarray(image).crop((left, top, right, bottom))
    scale = max(1.0, min_side / min(part.size))
    if scale > 1:
        part = part.resize(
            (round(part.size[0] * scale), round(part.size[1] * scale)), Image.Resampling.BICUBIC
        )
    return np.asarray(part.convert("RGB"))


class CropPerceiver(VLMPerceiver):
    """A VLM on a zoomed crop when the query names a region, else on the whole image."""

    def __init__(self, policy: Policy, max_tokens: int = 48) -> None:
        super().__init__(policy, max_tokens)
        self.name = f"crop:{policy.name}"

    def look(self, item: Any, question: str, query: Mapping[str, Any] | None = None) -> Evidence:
        image = np.asarray(item.image)
        if query and query.get("region") is not None:
            image = crop(image, query["region"])
        return self._ask(image, question)


Oracle = Callable[[Any, Mapping[str, Any]], str]
QuestionParser = Callable[[Any, str], Mapping[str, Any] | None]
"""``parse(item, question) -> query | None``: the structured query a free question asks."""

NEEDS_QUERY = "unanswerable: the oracle needs a structured query"
UNREAD_QUESTION = (
    "unanswerable: the oracle could not read the question as a count, exists, attribute, compare "
    "or relation question about what this scene holds; rephrase it or give a structured query"
)


class OraclePerceiver:
    """Exact answers from the item's ground truth, for structured queries.

    ``oracle(item, query) -> str`` is the task's (``task.oracle`` by default). A question
    without a structured query is read into one by ``parse`` (the task's ``parse_question``)
    when given; one that cannot be read, or any free question without ``parse``, cannot be
    answered exactly and gets ``"unanswerable: ..."`` back saying why, which the reasoner sees
    like any other evidence.
    """

    name = "oracle"

    def __init__(self, oracle: Oracle, parse: QuestionParser | None = None) -> None:
        self.oracle = oracle
        self.parse = parse
        self.calls = 0

    def look(self, item: Any, question: str, query: Mapping[str, Any] | None = None) -> Evidence:
        self.calls += 1
        # the oracle knows the whole scene: a region to look closer at asks nothing of it
        query = {key: value for key, value in (query or {}).items() if key != "region"}
        if not query:
            if self.parse is None:
                return Evidence(question, NEEDS_QUERY, self.name)
            query = self.parse(item, question)
            if not query:
                return Evidence(question, UNREAD_QUESTION, self.name)
        started = time.perf_counter()
        try:
            answer = self.oracle(item, query)
        except (KeyError, ValueError, TypeError) as exc:
            answer = f"unanswerable: {exc}"
        return Evidence(question, str(answer), self.name, time.perf_counter() - started)


def normalise_question(question: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", "", " ".join(question.lower().split())).strip()


@dataclass
class QueryGuard:
    """The per-item budget: queries, reasoner tokens, repeated questions."""

    max_queries: int = 6
    max_tokens: int = 4096
    max_repeats: int = 2
    """Repeated questions tolerated before the guard stops the item."""
    queries: int = 0
    tokens: int = 0
    repeats: int = 0
    asked: dict[str, Evidence] = field(default_factory=dict)
    fired: list[str] = field(default_factory=list)
    """Every guard that fired, in order (``max_queries``, ``max_tokens``, ``repeated``)."""

    def __post_init__(self) -> None:
        if self.max_queries < 0 or self.max_tokens < 1 or self.max_repeats < 0:
            raise PerceptionError("guards need max_queries >= 0, max_tokens >= 1 and max_repeats >= 0")

    def spend_tokens(self, tokens: int) -> bool:
        """Count reasoner tokens; False (and the guard fires) once past the budget."""
        self.tokens += tokens
        if self.tokens > self.max_tokens:
            self.fired.append("max_tokens")
            return False
        return True

    def earlier(self, question: str) -> Evidence | None:
        """The evidence of an earlier identical question (a repeat, counted), or None."""
        found = self.asked.get(normalise_question(question))
        if found is not None:
            self.repeats += 1
            self.fired.append("repeated")
        return found

    @property
    def exhausted(self) -> bool:
        return self.queries >= self.max_queries or self.repeats > self.max_repeats

    def record(self, evidence: Evidence) -> None:
        self.queries += 1
        self.asked[normalise_question(evidence.question)] = evidence
        if self.queries >= self.max_queries:
            self.fired.append("max_queries")
