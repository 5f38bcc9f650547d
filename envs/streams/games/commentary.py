"""Ground-truth commentary from an event log: who says what, when.

Everything said is placed on a shared *floor*: a line holds ``[start, end]`` (integer seconds,
end = start + a speaking time from its length), and a new line may only start where nobody is
speaking (touching spans are fine). Lines are placed most important first, each within its
event's window (the second the event first shows in a 2-fps chunk, or the next), with a
template that fits the free room, so a goal always gets its call and a tackle in a busy
moment is simply not mentioned, as a caster would skip it. The floor makes the two
co-commentary voices alternate and keeps a guide from talking over the player's question.
"""

from __future__ import annotations

import bisect
import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from embodia.envs.streams.core import Line
from embodia.envs.streams.games.events import GameEvent, ScriptLine, label_second

MAX_WORDS = 12
"""The agent's token cap: no ground-truth line is longer."""
Templates = Mapping[str, Sequence[str]]
Composed = tuple[str, dict[str, Any]]
Composer = Callable[[int, int], Composed | None]
"""``(second, free seconds) -> (text, facts)``, or None when nothing fits."""


def words(text: str) -> int:
    return len(text.split())


def speech_seconds(text: str) -> int:
    """How long a line holds the floor: about 3 words a second (brisk play-by-play), 1 to 4 s."""
    return max(1, min(4, math.ceil(words(text) / 3.0)))


def fill(template: str, fields: Mapping[str, Any]) -> str:
    text = template.format_map(fields)
    return text[0].upper() + text[1:] if text else text


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def pick(
    templates: Sequence[str], fields: Mapping[str, Any], room: int, rng: np.random.Generator
) -> str | None:
    """A seeded choice among the templates whose line fits in ``room`` seconds."""
    for index in rng.permutation(len(templates)):
        text = fill(templates[int(index)], fields)
        if speech_seconds(text) <= room and words(text) <= MAX_WORDS:
            return text
    return None


class Floor:
    """The spans already spoken by everyone who shares the floor: disjoint (a line only
    goes where there is room), so kept sorted and searched by bisection."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def room(self, second: int) -> int:
        """Free seconds from ``second`` (up to 4); 0 when someone is speaking then."""
        index = bisect.bisect_right(self._starts, second) - 1
        if index >= 0 and (self._starts[index] == second or self._ends[index] > second):
            return 0
        if index + 1 < len(self._starts):
            return min(4, self._starts[index + 1] - second)
        return 4

    def take(self, start: int, end: int) -> None:
        index = bisect.bisect_right(self._starts, start)
        self._starts.insert(index, start)
        self._ends.insert(index, end)


@dataclass
class Candidate:
    """Something someone may say in ``[earliest, latest]``, if the floor has room."""

    earliest: int
    latest: int
    importance: float
    speaker: str
    role: Literal["assistant", "user"]
    compose: Composer
    cause: GameEvent | None = None
    query: Line | None = None
    then: Callable[[ScriptLine], list[Candidate]] | None = None
    """Candidates that follow this one once it is placed (a reaction, an answer's next step)."""
    fixed_end: int | None = None
    """Hold the floor until here instead of the line's speaking time (a user's query)."""
    purpose: str = "call"


@dataclass
class Planner:
    floor: Floor = field(default_factory=Floor)
    placed: list[ScriptLine] = field(default_factory=list)

    def place(self, candidate: Candidate) -> ScriptLine | None:
        for second in range(candidate.earliest, candidate.latest + 1):
            room = self.floor.room(second)
            if room < 1:
                continue
            composed = candidate.compose(second, room)
            recent = {p.line.text for p in self.placed[-3:] if p.line.speaker == candidate.speaker}
            for _ in range(2):  # a seeded re-draw, so a caster does not repeat his last line
                if composed is None or composed[0] not in recent:
                    break
                composed = candidate.compose(second, room)
            if composed is None:
                continue
            text, facts = composed
            end = candidate.fixed_end if candidate.fixed_end is not None else second + speech_seconds(text)
            self.floor.take(second, end)
            line = ScriptLine(
                Line(candidate.role, candidate.speaker, second, end, text),
                candidate.cause,
                candidate.query,
                facts,
                candidate.purpose,
            )
            self.placed.append(line)
            if candidate.then is not None:
                for follow in candidate.then(line):
                    self.place(follow)
            return line
        return None

    def place_all(self, candidates: Sequence[Candidate]) -> None:
        """Most important first; equal importance in time order."""
        for candidate in sorted(candidates, key=lambda c: (-c.importance, c.earliest)):
            self.place(candidate)


WAIT_IMPORTANCE = 0.7
"""Only events at least this important wait a second for the floor; the rest are called in
the second they first show (while their onset flash is on screen) or not at all, so a
labelled second nearly always looks unlike its silent neighbours."""


def event_window(event: GameEvent) -> tuple[int, int]:
    """A line about an event starts in the second it first shows, or (a big one) the next."""
    first = label_second(event.time)
    if event.importance < WAIT_IMPORTANCE:
        return first, first
    return first, max(first, math.floor(event.time + 1e-9) + 1)


def from_templates(templates: Sequence[str], fields: Mapping[str, Any], rng: np.random.Generator) -> Composer:
    def compose(second: int, room: int) -> Composed | None:
        text = pick(templates, fields, room, rng)
        return None if text is None else (text, {})

    return compose


FieldsOf = Callable[[GameEvent], dict[str, Any]]


def solo(
    events: Sequence[GameEvent], calls: Templates, fields_of: FieldsOf, rng: np.random.Generator, speaker: str
) -> list[ScriptLine]:
    """One caster calls the events the floor has room for, most important first."""
    planner = Planner()
    candidates = []
    for event in events:
        if event.kind in calls:
            first, last = event_window(event)
            compose = from_templates(calls[event.kind], fields_of(event), rng)
            candidates.append(Candidate(first, last, event.importance, speaker, "assistant", compose, event))
    planner.place_all(candidates)
    return planner.placed


def co_commentary(
    events: Sequence[GameEvent],
    calls: Templates,
    reactions: Templates,
    fields_of: FieldsOf,
    rng: np.random.Generator,
    main: str,
    co: str,
    co_share: Callable[[GameEvent], float],
    react: Callable[[GameEvent], float],
) -> list[ScriptLine]:
    """Two casters on one floor: each event is called by the main caster or, with
    ``co_share(event)``, by the co-caster; then, with ``react(event)``, the other one reacts
    right after the call ends. The co-caster's lines are role ``user`` (the reference's
    ``SPEAKER_k`` history lines)."""
    planner = Planner()
    candidates = []
    for event in events:
        if event.kind not in calls:
            continue
        first, last = event_window(event)
        fields = fields_of(event)
        caller = co if rng.random() < co_share(event) else main
        reacts = event.kind in reactions and rng.random() < react(event)

        def then(
            line: ScriptLine, event: GameEvent = event, fields: dict[str, Any] = fields, reacts: bool = reacts
        ) -> list[Candidate]:
            if not reacts:
                return []
            other = main if line.line.speaker == co else co
            compose = from_templates(reactions[event.kind], fields, rng)
            start = line.line.end
            role: Literal["assistant", "user"] = "assistant" if other == main else "user"
            return [
                Candidate(start, start + 1, event.importance, other, role, compose, event, purpose="reaction")
            ]

        role: Literal["assistant", "user"] = "assistant" if caller == main else "user"
        compose = from_templates(calls[event.kind], fields, rng)
        candidates.append(Candidate(first, last, event.importance, caller, role, compose, event, then=then))
    planner.place_all(candidates)
    return planner.placed


@dataclass(frozen=True)
class Question:
    """A player's question at ``second`` and how the guide answers it, step by step: each
    step composes its line from the game state at the second it is spoken."""

    second: int
    text: str
    steps: Sequence[Callable[[int], Composed | None]]


def _constant(text: str) -> Composer:
    return lambda second, room: (text, {})


def guidance(
    questions: Sequence[Question],
    followups: Sequence[Candidate],
    guide: str,
    user: str = "user",
    delay: int = 1,
) -> list[ScriptLine]:
    """Queries first (they hold the floor for their second), each answered from its end
    (``delay`` s after it starts) with the next step right after the previous; then the
    guide's own follow-ups where there is room."""
    planner = Planner()
    for question in questions:
        query = Line("user", user, question.second, question.second + 1, question.text)

        def answer(
            index: int, earliest: int, question: Question = question, query: Line = query
        ) -> Candidate:
            step = question.steps[index]

            def compose(second: int, room: int) -> Composed | None:
                composed = step(second)
                if composed is None or speech_seconds(composed[0]) > room or words(composed[0]) > MAX_WORDS:
                    return None
                return composed

            def then(line: ScriptLine) -> list[Candidate]:
                if index + 1 >= len(question.steps):
                    return []
                return [answer(index + 1, line.line.end)]

            return Candidate(
                earliest,
                earliest + 1,
                1.0,
                guide,
                "assistant",
                compose,
                query=query,
                then=then,
                purpose="answer",
            )

        def asked(line: ScriptLine, question: Question = question) -> list[Candidate]:
            return [answer(0, question.second + delay)] if question.steps else []

        ask = Candidate(
            question.second,
            question.second,
            1.0,
            user,
            "user",
            _constant(question.text),
            fixed_end=question.second + 1,
            then=asked,
            purpose="query",
        )
        planner.place(ask)
    planner.place_all(followups)
    return planner.placed
