"""Non-learned speak/silent baselines for live streams, and a HUD-reading line writer.

:class:`EventHeuristic` speaks when something happens: a HUD reading changed (a score, HP,
items, a banner appeared), a user asked something, or the picture changed much more than it
usually does (a robust z-score of the frame difference against the stream's own recent
history, so a busy game and a calm one are judged on their own scales). It reads only the
chunk in hand and what it kept from earlier chunks, so it is causal.

:class:`HudCommentator` writes the words for it: the changed HUD fields as a short line. It
is a baseline, not a commentator; a VLM speaker is what a real run uses.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.core import SILENCE, Chunk

# HUD fields that change every second by themselves, so their change is no event.
TICKING_FIELDS = frozenset({"clock", "time", "t", "frame", "tick", "elapsed"})
_THUMB = 32


def _thumb(frame: NDArray[np.uint8]) -> NDArray[np.float32]:
    """A small grey version of a frame: frame differences at this size ignore codec noise."""
    h, w = frame.shape[:2]
    ys = (np.arange(_THUMB) * h) // _THUMB
    xs = (np.arange(_THUMB) * w) // _THUMB
    # Sample first, then average the channels: the same values for a fraction of the work.
    return frame[np.ix_(ys, xs)].astype(np.float32).mean(axis=2)


def hud_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """The HUD fields whose reading changed (ticking clocks excepted), with their new values."""
    if not after or before is None:
        return {}  # the first reading of a stream is no change
    return {
        key: value
        for key, value in after.items()
        if key not in TICKING_FIELDS
        and before.get(key) != value
        and not (key in before and value in (None, ""))
    }


class EventHeuristic:
    """Speak when the HUD changes, a query arrives, or the frames change unusually much."""

    name = "heuristic"
    stateful = True
    """It keeps the last frame, HUD and recent differences: a resumed run shows it the
    replayed chunks again."""

    def __init__(self, threshold: float = 0.5, z_offset: float = 2.5, window: int = 30) -> None:
        self.threshold = threshold
        self.z_offset = z_offset
        self._diffs: deque[float] = deque(maxlen=window)
        self._last_thumb: NDArray[np.float32] | None = None
        self._last_hud: dict[str, Any] | None = None

    def reset(self) -> None:
        self._diffs.clear()
        self._last_thumb = None
        self._last_hud = None

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        thumbs = [_thumb(f) for f in chunk.frames]
        previous = [self._last_thumb] if self._last_thumb is not None else []
        pairs = list(zip(previous + thumbs[:-1], thumbs, strict=False))
        diff = max((float(np.abs(b - a).mean()) for a, b in pairs), default=0.0)
        frame_score = 0.0
        if len(self._diffs) >= 3:
            history = np.asarray(self._diffs)
            median = float(np.median(history))
            spread = 1.4826 * float(np.median(np.abs(history - median))) + 0.5
            frame_score = 1.0 / (1.0 + math.exp(-((diff - median) / spread - self.z_offset)))
        self._diffs.append(diff)
        self._last_thumb = thumbs[-1]
        changed = hud_changes(self._last_hud, chunk.hud)
        self._last_hud = dict(chunk.hud) if chunk.hud else None
        if chunk.query:
            return 1.0
        score = max(frame_score, 0.95 if changed else 0.0)
        spoke_last = next(
            (m["content"] != SILENCE for m in reversed(context) if m["role"] == "assistant"), False
        )
        if spoke_last and not changed:
            score *= 0.5  # one event, one line: do not keep talking about the same flash
        return score

    def decide(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> bool:
        return self.score(chunk, context) > self.threshold


class HudCommentator:
    """Says what changed on the HUD (a baseline line writer, no model)."""

    name = "hud"

    def __init__(self) -> None:
        self._last_hud: dict[str, Any] | None = None

    def reset(self) -> None:
        self._last_hud = None

    def observe(self, chunk: Chunk) -> None:
        """Keep the HUD of every chunk, spoken or not, so a change is judged against the last
        second rather than the last time this agent spoke."""
        self._last_hud = dict(chunk.hud) if chunk.hud else None

    def line(self, chunk: Chunk, context: Sequence[Mapping[str, Any]] = ()) -> str:
        changed = hud_changes(self._last_hud, chunk.hud)
        if chunk.query:
            return f"On {chunk.query.rstrip('?')}: look at the map."
        for key in ("banner", "event", "feed"):
            if changed.get(key):
                return str(changed[key])
        if changed:
            return "; ".join(f"{key} now {_spoken(value)}" for key, value in list(changed.items())[:2]) + "."
        return "Big moment here."


def _spoken(value: Any) -> str:
    if isinstance(value, list | tuple):
        return (
            "-".join(str(v) for v in value)
            if all(isinstance(v, int) for v in value)
            else ", ".join(map(str, value))
        )
    return str(value)
