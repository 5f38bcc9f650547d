"""The interleaved think/speak reply format (SxS): one autoregressive output whose
``<think>...</think>`` spans are private and whose ``<speak>...</speak>`` spans are public.

:func:`parse_interleaved` splits it into
:class:`Span` objects with token offsets from a pluggable tokenizer (default: whitespace
tokens). Tags are not tokens. Text outside any tag is treated as **think** (hidden: a UI shows
only speak spans); an unclosed final span keeps its channel (``closed=False``); a stray close
tag is ignored; an opening tag inside an open span closes it. Whitespace-only spans are dropped.
Adjacent speak spans stay separate updates (gap 0 between them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

SXS_SYSTEM = (
    "Reason privately inside <think>...</think>. Whenever a part of the answer is settled, "
    "say it to the user inside <speak>...</speak>, then keep reasoning. Speak only what your "
    "reasoning so far supports."
)
"""The system prompt that asks for this format (the SxS runtime's, and its SFT data's)."""

Channel = Literal["think", "speak"]
Tokenizer = Callable[[str], list[str]]

_TAG = re.compile(r"<(/?)(think|speak)>")


def whitespace_tokenize(text: str) -> list[str]:
    """Default tokenizer: whitespace-separated tokens."""
    return text.split()


@dataclass(frozen=True)
class StreamEvent:
    """One generated token: position, arrival time (s since request) or None, channel, text."""

    token_index: int
    wall_time_s: float | None
    channel: Channel
    text: str


@dataclass(frozen=True)
class Span:
    """A maximal tagged span ``[start, end)`` in token positions; times are first/last token's."""

    channel: Channel
    start: int
    end: int
    text: str
    closed: bool = True
    start_time_s: float | None = None
    end_time_s: float | None = None

    @property
    def n_tokens(self) -> int:
        return self.end - self.start


def _raw_spans(text: str) -> list[tuple[Channel, int, int, bool]]:
    """(channel, char_start, char_end, closed) for each span, before token counting."""
    out: list[tuple[Channel, int, int, bool]] = []
    channel: Channel = "think"
    explicit = False  # inside an opened tag (vs. outside text)
    pos = 0
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2)
        if m.start() > pos:
            out.append((channel, pos, m.start(), True))
        pos = m.end()
        if closing:
            channel, explicit = "think", False
        else:
            channel, explicit = ("speak" if name == "speak" else "think"), True
    if pos < len(text):
        out.append((channel, pos, len(text), not explicit))
    return out


def parse_interleaved(
    text: str,
    tokenizer: Tokenizer = whitespace_tokenize,
    char_times: Sequence[float] | None = None,
) -> list[Span]:
    """Split one stream into think/speak spans with token offsets.

    ``char_times[i]`` (optional) is the arrival time of character ``i``; a span's times are
    those of its first and last non-space character.
    """
    spans: list[Span] = []
    n = 0
    for channel, a, b, closed in _raw_spans(text):
        chunk = text[a:b]
        k = len(tokenizer(chunk))
        if not chunk.strip() or k == 0:
            continue
        t0 = t1 = None
        if char_times is not None:
            lo = a + (len(chunk) - len(chunk.lstrip()))
            hi = b - (len(chunk) - len(chunk.rstrip())) - 1
            t0, t1 = float(char_times[lo]), float(char_times[hi])
        spans.append(Span(channel, n, n + k, chunk.strip(), closed, t0, t1))
        n += k
    return spans


def _joined(deltas: Iterable[tuple[float, str]]) -> tuple[str, list[float]]:
    """The streamed text and each character's arrival time (that of the delta carrying it)."""
    parts: list[str] = []
    times: list[float] = []
    for t, d in deltas:
        parts.append(d)
        times.extend([float(t)] * len(d))
    return "".join(parts), times


def parse_deltas(
    deltas: Iterable[tuple[float, str]], tokenizer: Tokenizer = whitespace_tokenize
) -> list[Span]:
    """Parse streamed ``(arrival_time_s, text_delta)`` pairs, e.g. from an OpenAI-compatible
    ``stream=True`` response; each character gets the time of the delta that carried it."""
    text, times = _joined(deltas)
    return parse_interleaved(text, tokenizer, times)


def timed_blocks(deltas: Iterable[tuple[float, str]], k: int) -> list[Span]:
    """A stream shown as it is written, tags and all (naive early streaming of a live reply):
    speak spans of ``k`` whitespace tokens each, timed by their first and last token's
    arrival (a token arrives with its last character)."""
    text, times = _joined(deltas)
    words = [(m.group(), times[m.end() - 1]) for m in re.finditer(r"\S+", text)]
    return [
        Span(
            "speak",
            i,
            min(i + k, len(words)),
            " ".join(w for w, _ in words[i : i + k]),
            True,
            words[i][1],
            words[min(i + k, len(words)) - 1][1],
        )
        for i in range(0, len(words), k)
    ]


def to_events(spans: Sequence[Span], tokenizer: Tokenizer = whitespace_tokenize) -> list[StreamEvent]:
    """One :class:`StreamEvent` per token; times are interpolated linearly inside a span."""
    events: list[StreamEvent] = []
    for s in spans:
        toks = tokenizer(s.text)
        for j, tok in enumerate(toks):
            t: float | None = None
            if s.start_time_s is not None and s.end_time_s is not None:
                frac = j / (len(toks) - 1) if len(toks) > 1 else 1.0
                t = s.start_time_s + frac * (s.end_time_s - s.start_time_s)
            events.append(StreamEvent(s.start + j, t, s.channel, tok))
    return events
