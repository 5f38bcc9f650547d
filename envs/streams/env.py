"""``embodia/LiveGaming-v0``: a live game stream, one step per 1-second chunk.

Observation (a ``Dict``): ``frames`` — the chunk's frames, ``(fps, H, W, 3)`` uint8 sampled
in ``[t, t+1)``; ``second`` — ``t``; ``history`` — co-caster lines starting at ``t`` as
``[SPEAKER]: text`` lines; ``query`` — a user's guidance query starting at ``t`` (empty when
none). ``info["chunk"]`` is the same chunk as a :class:`~embodia.envs.streams.core.Chunk`
(with the HUD readout of procedural games), which is what embodia's agents consume.

Action: the text to say this second; ``""`` (or whitespace) is silence. Text past the token
cap (default 12, as the reference's ``max_new_tokens``) is cut off.

Reward per step (for RL; evaluation uses :mod:`embodia.evals.live`): +1 for speaking in a
second where the label speaks, ``-false_speak_cost`` (0.5) for speaking where it does not,
0 for silence. The episode ends with the clip; the last ``info`` carries ``pred`` (the
reference's ``{second: text}``) and ``label``.

Causality is by construction: the env holds the stream and hands out one chunk at a time
through a :class:`ChunkFeed`, which refuses any second after the clock.

``info`` after a step: ``said`` (the text the env took for the second just decided: capped,
or ``""`` when late), ``late`` (the decision just made came too late), ``dropped`` and
``skipped`` so far, ``waited_s`` (how long the env waited for the next chunk) and, in real-time
mode, ``agent_s`` (wall seconds from the chunk being handed out to the action),
``decision_s`` (wall seconds from the chunk being complete to the decision) and
``lag_s`` (how long the chunk handed out had been complete already).

Real-time mode (``realtime=True``): the stream does not wait. Chunk ``t`` becomes available
at the end of second ``t`` on the wall clock (``time_scale`` wall seconds per stream
second); a decision for chunk ``t`` that arrives after chunk ``t+1`` is available is late:
it is dropped (counted as silence) and the next observation is the newest chunk, the chunks
missed in between counted as ``skipped``.
"""

from __future__ import annotations

import string
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from embodia.envs import registry
from embodia.envs.streams.core import Chunk, Stream, StreamError
from embodia.envs.streams.sources import check_scenario, open_stream

TEXT_LIMIT = 4096
_CHARSET = frozenset(string.printable)
DEFAULT_TOKEN_CAP = 12


class CausalityError(StreamError):
    """Something asked for a chunk the stream's clock has not reached."""


class ChunkFeed:
    """Hands out a stream's chunks up to its clock; the future is unreachable through it."""

    def __init__(self, stream: Stream, start: int | None = None) -> None:
        self._stream = stream
        self.clock = stream.begin if start is None else start
        """The newest second whose chunk may be read."""

    def advance(self, second: int) -> None:
        self.clock = max(self.clock, min(second, self._stream.end - 1))

    def read(self, second: int) -> Chunk:
        if second > self.clock:
            raise CausalityError(f"second {second} is in the future: the stream is at second {self.clock}")
        if second < self._stream.begin:
            raise StreamError(f"second {second} is before the clip begins at {self._stream.begin}")
        chunk = self._stream.chunk(second)
        for frame in chunk.frames:
            frame.setflags(write=False)
        return chunk


def cap_tokens(text: str, cap: int) -> str:
    """At most ``cap`` whitespace tokens of ``text`` (the reference bounds each second's
    reply by tokens; words are the backend-independent unit)."""
    words = text.split()
    return " ".join(words[:cap])


def history_text(chunk: Chunk) -> str:
    return "\n".join(f"[{line.speaker}]: {line.text}" for line in chunk.history)


class LiveGamingEnv(gymnasium.Env[dict[str, Any], str]):
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        source: str = "procedural:arena,seed=0,duration=60",
        scenario: str = "solo",
        fps: float = 2.0,
        token_cap: int = DEFAULT_TOKEN_CAP,
        realtime: bool = False,
        time_scale: float = 1.0,
        false_speak_cost: float = 0.5,
        render_mode: str | None = None,
        stream: Stream | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if token_cap < 1:
            raise StreamError(f"token_cap must be at least 1, got {token_cap}")
        if not time_scale > 0:
            raise StreamError(f"time_scale must be positive, got {time_scale}")
        self.scenario = check_scenario(scenario)
        self.stream = stream if stream is not None else open_stream(source, self.scenario, fps)
        self.token_cap = token_cap
        self.realtime = realtime
        self.time_scale = time_scale
        self.false_speak_cost = false_speak_cost
        self.render_mode = render_mode
        self._clock = clock
        self._sleep = sleep
        height, width = self.stream.source.size
        n = len(self.stream.frame_times(self.stream.begin))
        text = spaces.Text(max_length=TEXT_LIMIT, min_length=0, charset=_CHARSET)
        self.observation_space = spaces.Dict(
            {
                "frames": spaces.Box(0, 255, (n, height, width, 3), np.uint8),
                "second": spaces.Box(0, np.iinfo(np.int64).max, (), np.int64),
                "history": text,
                "query": text,
            }
        )
        self.action_space = spaces.Text(max_length=TEXT_LIMIT, min_length=0, charset=_CHARSET)
        self._label = self.stream.label
        self._feed = ChunkFeed(self.stream)
        self._chunk: Chunk | None = None
        self._pred: dict[int, str] = {}
        self._started = 0.0
        self._handed_at = 0.0
        self._origin = self.stream.begin
        self.dropped = 0
        self.skipped = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        start = int((options or {}).get("start", self.stream.begin))
        if start not in self.stream.seconds:
            raise StreamError(
                f"start second {start} is outside the clip [{self.stream.begin}, {self.stream.end})"
            )
        self._feed = ChunkFeed(self.stream, start)
        self._pred = {}
        self._origin = start
        self.dropped = self.skipped = 0
        # Chunk ``start`` is complete at the end of its second: the wall clock starts there.
        self._started = self._clock() - self.time_scale if self.realtime else 0.0
        self._chunk = self._feed.read(start)
        self._handed_at = self._clock()
        return self._observation(self._chunk), self._info(self._chunk, late=False, waited_s=0.0)

    def available_until(self, second: int) -> float:
        """Wall time at which chunk ``second`` is complete (real-time mode)."""
        return self._started + (second - self._origin + 1) * self.time_scale

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self._chunk is None:
            raise StreamError("step() called before reset()")
        if not isinstance(action, str):
            raise StreamError(f"the action is the text to say (str), got {type(action).__name__}")
        second = self._chunk.second
        # Wall-clock readings only in real time: they would make the env's info nondeterministic.
        agent_s = self._clock() - self._handed_at if self.realtime else None
        late = False
        decision_s = None
        if self.realtime:
            now = self._clock()
            decision_s = now - self.available_until(second)
            late = now > self.available_until(second + 1)
        text = "" if late else cap_tokens(action, self.token_cap)
        if late:
            self.dropped += 1
        reward = 0.0
        if text:
            self._pred[second] = text
            reward = 1.0 if second in self._label else -self.false_speak_cost
        next_second = second + 1
        waited = 0.0
        if self.realtime:
            now = self._clock()
            newest = min(self._origin + int((now - self._started) / self.time_scale) - 1, self.stream.end - 1)
            if newest > next_second:
                self.skipped += newest - next_second
                next_second = newest
            elif newest < next_second and next_second < self.stream.end:
                waited = self.available_until(next_second) - now
                self._sleep(max(0.0, waited))
        terminated = next_second >= self.stream.end
        if terminated:
            info = self._info(self._chunk, late=late, waited_s=waited)
            info.update(
                pred=dict(self._pred),
                label=dict(self._label),
                final=True,
                decision_s=decision_s,
                agent_s=agent_s,
                said=text,
            )
            chunk = self._chunk
            self._chunk = None
            return self._observation(chunk), reward, True, False, info
        self._feed.advance(next_second)
        self._chunk = self._feed.read(next_second)
        info = self._info(self._chunk, late, waited)
        info.update(decision_s=decision_s, agent_s=agent_s, said=text)
        self._handed_at = self._clock()
        if self.realtime:  # how long the chunk handed out now has been complete
            info["lag_s"] = max(0.0, self._clock() - self.available_until(next_second))
        return self._observation(self._chunk), reward, False, False, info

    def _observation(self, chunk: Chunk) -> dict[str, Any]:
        return {
            "frames": np.stack(chunk.frames),
            "second": np.array(chunk.second, dtype=np.int64),
            "history": _printable(history_text(chunk)),
            "query": _printable(chunk.query or ""),
        }

    def _info(self, chunk: Chunk, late: bool, waited_s: float) -> dict[str, Any]:
        return {
            "chunk": chunk,
            "second": chunk.second,
            "scenario": self.scenario,
            "tag": self.stream.annotation.tag,
            "late": late,
            "dropped": self.dropped,
            "skipped": self.skipped,
            "waited_s": waited_s,
        }

    def render(self) -> Any:
        if self._chunk is None:
            return None
        return np.array(self._chunk.frames[-1])


def _printable(text: str) -> str:
    return "".join(c if c in _CHARSET else "?" for c in text)[:TEXT_LIMIT]


def register_envs() -> None:
    """Register this package's ids (``registry.entry_points("streams")``) with gymnasium; ids already
    registered are left alone. ``import embodia`` has done it already."""
    registry.register_envs(list(registry.entry_points("streams")))
