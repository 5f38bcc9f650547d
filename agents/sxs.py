"""SxS runtime: one autoregressive stream with private ``<think>`` and public ``<speak>``
spans, of which only what the disclosure guard releases reaches the user.

The policy's reply is read as it streams (:class:`SpanSplitter` cuts it at the tags, which
may arrive split across pieces). Think text stays private. A speak span, once closed, is a
chunk for the :class:`DisclosureGuard`: it is released when ``support(think_so_far, chunk)``
holds, else held back and checked again whenever more reasoning arrives; chunks are released
in order (a later chunk never overtakes a held one). When the stream ends, held chunks are
released flagged ``supported=False`` (``release_unsupported=True``, the default: the user
still gets the answer) or withheld.

The LangGraph graph has one node, ``generate``; releases reach the caller as ``custom``
stream events ``{"event": "speak", "text", "token_index", "wall_s", "supported"}``.
:meth:`SxSResult.visible_spans` places each released chunk at the token where it was
released, for :func:`embodia.evals.content_latency.stream_metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from embodia.agents.runtime import emit
from embodia.core.chat import Message, Policy
from embodia.core.interleaved import SXS_SYSTEM, Span, whitespace_tokenize

Channel = Literal["think", "speak"]
Support = Callable[[Sequence[str], str], bool]
TAGS = ("<think>", "</think>", "<speak>", "</speak>")


class SpanSplitter:
    """Cuts streamed text into (channel, text) pieces at ``<think>``/``<speak>`` tags.

    Text before any tag, or after a closing tag, is think (private by default: nothing is
    shown that was not marked to be spoken). A tag split across pieces is held until it is
    complete.
    """

    def __init__(self) -> None:
        self.channel: Channel = "think"
        self._held = ""

    def feed(self, piece: str) -> list[tuple[Channel, str, bool]]:
        """(channel, text, closes) triples; ``closes`` marks the end of a span."""
        text = self._held + piece
        self._held = ""
        out: list[tuple[Channel, str, bool]] = []
        while text:
            at = text.find("<")
            if at < 0:
                out.append((self.channel, text, False))
                break
            if at:
                out.append((self.channel, text[:at], False))
                text = text[at:]
            tag = next((t for t in TAGS if text.startswith(t)), None)
            if tag is None:
                if any(t.startswith(text) for t in TAGS):
                    self._held = text  # maybe the start of a tag: wait for the rest
                    break
                out.append((self.channel, "<", False))
                text = text[1:]
                continue
            text = text[len(tag) :]
            closes = tag.startswith("</") or tag.lstrip("<").rstrip(">") != self.channel
            if closes:
                out.append((self.channel, "", True))
            self.channel = "think" if tag.startswith("</") else tag[1:-1]  # type: ignore[assignment]
        return [(c, t, e) for c, t, e in out if t or e]

    def close(self) -> list[tuple[Channel, str, bool]]:
        rest, self._held = self._held, ""
        out: list[tuple[Channel, str, bool]] = [(self.channel, rest, False)] if rest else []
        return [*out, (self.channel, "", True)]


@dataclass
class Disclosure:
    text: str
    written_at: int
    """Token index where the chunk was generated (its span's start)."""
    released_at: int
    """Token index of the stream when it reached the user."""
    wall_s: float
    supported: bool


@dataclass
class DisclosureGuard:
    support: Support
    release_unsupported: bool = True
    held: list[tuple[str, int]] = field(default_factory=list)
    released: list[Disclosure] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)

    def offer(
        self, chunk: str, written_at: int, think: Sequence[str], now: int, wall_s: float
    ) -> list[Disclosure]:
        self.held.append((chunk, written_at))
        return self.recheck(think, now, wall_s)

    def recheck(self, think: Sequence[str], now: int, wall_s: float) -> list[Disclosure]:
        out = []
        while self.held and self.support(think, self.held[0][0]):
            chunk, written = self.held.pop(0)
            out.append(Disclosure(chunk, written, now, wall_s, True))
        self.released.extend(out)
        return out

    def finish(self, now: int, wall_s: float) -> list[Disclosure]:
        out = []
        for chunk, written in self.held:
            if self.release_unsupported:
                out.append(Disclosure(chunk, written, now, wall_s, False))
            else:
                self.withheld.append(chunk)
        self.held = []
        self.released.extend(out)
        return out


def always_supported(think: Sequence[str], chunk: str) -> bool:
    return True


@dataclass
class SxSResult:
    text: str
    think: list[str]
    disclosures: list[Disclosure]
    withheld: list[str]
    tokens: int
    wall_s: float
    token_times: list[float] = field(default_factory=list)
    """Arrival time (s since the request) of each generated token, for wall-clock latency."""

    def visible_spans(self) -> list[Span]:
        """The stream as the user saw it: think spans where they were generated, each
        released chunk as a speak span at the token where it was released. Spans carry
        arrival times when the token times are known (a released chunk: its release time)."""
        spans: list[Span] = []
        position = 0
        timed = len(self.token_times) == self.tokens and self.tokens > 0

        def think(a: int, b: int) -> Span:
            if not timed:
                return Span("think", a, b, "")
            last = len(self.token_times) - 1
            return Span(
                "think", a, b, "", True, self.token_times[min(a, last)], self.token_times[min(b - 1, last)]
            )

        for d in self.disclosures:
            if d.released_at > position:
                spans.append(think(position, d.released_at))
            size = max(1, len(whitespace_tokenize(d.text)))
            start = max(d.released_at, position)
            when = d.wall_s if timed else None
            spans.append(Span("speak", start, start + size, d.text, True, when, when))
            position = spans[-1].end
        end = max(self.tokens, position)
        if end > position:
            spans.append(think(position, end))
        return spans

    @property
    def answer(self) -> str:
        return " ".join(d.text for d in self.disclosures)


class SxSState(TypedDict, total=False):
    question: str
    text: str


@dataclass
class SxSContext:
    """Run-scoped inputs of one question's graph run; ``result`` is set when it ends."""

    policy: Policy
    support: Support = always_supported
    system: str = ""
    max_tokens: int = 1024
    temperature: float = 0.0
    release_unsupported: bool = True
    result: SxSResult | None = None


def generate(state: SxSState, runtime: Runtime[SxSContext]) -> dict[str, Any]:
    context = runtime.context
    splitter = SpanSplitter()
    guard = DisclosureGuard(context.support, context.release_unsupported)
    think: list[str] = []
    token_times: list[float] = []
    current = {"think": "", "speak": ""}
    position = 0
    speak_start = 0
    started = time.perf_counter()

    def release(items: list[Disclosure]) -> None:
        for d in items:
            emit(
                {
                    "event": "speak",
                    "text": d.text,
                    "token_index": d.released_at,
                    "wall_s": d.wall_s,
                    "supported": d.supported,
                }
            )

    def handle(parts: list[tuple[Channel, str, bool]]) -> None:
        nonlocal position, speak_start
        for channel, text, closes in parts:
            if text:
                if channel == "speak" and not current["speak"]:
                    speak_start = position
                # a word may arrive in several pieces: it is one token, counted when it starts
                count = len(whitespace_tokenize(text))
                if count and current[channel][-1:].strip() and text[0].strip():
                    count -= 1
                current[channel] += text
                position += count
                token_times.extend([time.perf_counter() - started] * count)
            if closes and current[channel].strip():
                now = time.perf_counter() - started
                if channel == "think":
                    think.append(current["think"].strip())
                    release(guard.recheck(think, position, now))
                else:
                    release(guard.offer(current["speak"].strip(), speak_start, think, position, now))
            if closes:
                current[channel] = ""

    messages: list[Message] = [
        {"role": "system", "content": context.system or SXS_SYSTEM},
        {"role": "user", "content": state["question"]},
    ]
    completion = context.policy.complete(
        messages,
        max_tokens=context.max_tokens,
        temperature=context.temperature,
        on_text=lambda piece: handle(splitter.feed(piece)),
    )
    handle(splitter.close())
    release(guard.finish(position, time.perf_counter() - started))
    context.result = SxSResult(
        completion.text,
        think,
        guard.released,
        guard.withheld,
        position,
        time.perf_counter() - started,
        token_times,
    )
    return {"text": completion.text}


def build_sxs_graph() -> CompiledStateGraph[SxSState, SxSContext, SxSState, SxSState]:
    builder = StateGraph(SxSState, context_schema=SxSContext)
    builder.add_node("generate", generate)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", END)
    return builder.compile()


def run_sxs(
    question: str,
    policy: Policy,
    support: Support = always_supported,
    on_speak: Callable[[dict[str, Any]], None] | None = None,
    **options: Any,
) -> SxSResult:
    """One question through the SxS runtime; ``on_speak`` gets every released chunk as it is
    released (the user's view)."""
    context = SxSContext(policy, support, **options)
    graph = build_sxs_graph()
    for part in graph.stream({"question": question}, context=context, stream_mode=["custom"], version="v2"):
        if on_speak is not None and part["type"] == "custom":
            on_speak(part["data"])
    assert context.result is not None
    return context.result
