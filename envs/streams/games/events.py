"""The records a game's simulation writes and its commentary is written from: the
:class:`GameEvent` log, the :class:`ScriptLine` ground truth, and :func:`label_second`, the
first second a line about an event may start in. Both the game base and the commentary
writer build on these, so they sit below both."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from embodia.envs.streams.core import Line


@dataclass(frozen=True)
class GameEvent:
    """One thing that happened in a game: the ground truth commentary is written from these."""

    time: float
    """Seconds from the start of the game."""
    kind: str
    actor: str
    details: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """Template fields and facts (JSON-friendly values)."""
    importance: float = 0.5
    """0..1: how much a caster would want to talk about it."""


def label_second(time: float) -> int:
    """The first whole second whose 2-fps chunk (frames at ``s`` and ``s + 0.5``) shows an
    event at ``time``: a line about it may start there, never earlier."""
    base = math.floor(time + 1e-9)
    return base if time - base <= 0.5 + 1e-9 else base + 1


@dataclass(frozen=True)
class ScriptLine:
    """One ground-truth line with what caused it (an event, a user query, or nothing)."""

    line: Line
    cause: GameEvent | None = None
    query: Line | None = None
    facts: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """What a guidance answer asserts (e.g. ``{"target": "key", "direction": "north"}``)."""
    purpose: str = "call"
    """``call`` (about its event, in the event's window), ``reaction`` (to the line before),
    ``query``, ``answer`` (a step of the answer to ``query``) or ``followup`` (a guide's)."""
