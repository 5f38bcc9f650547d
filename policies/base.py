"""The Policy contract: a chat-level ``complete`` every backend implements.

A message list follows the OpenAI chat shape (``{"role": ..., "content": str}``); images
travel separately as RGB arrays and are attached to the *last user message* in order, which
is how every backend (OpenAI-compatible ``image_url`` parts, a transformers processor, vLLM's
offline ``LLM.chat``) can express them. Env-level decisions (pick a waypoint, answer a
question) are built on ``complete`` by the agents, with parsing in :mod:`.parsing`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypedDict, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from embodia.errors import EmbodiaError

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "length", "error"]


class Message(TypedDict):
    role: Role
    content: str


class PolicyError(EmbodiaError):
    """A policy backend failed in a way the caller should report (server down, bad reply)."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    """(token, logprob) of the most likely tokens at this position, best first."""


@dataclass(frozen=True)
class Completion:
    """What one ``complete`` call returned."""

    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    """Wall time of the call, seconds."""
    tokens: tuple[TokenLogprob, ...] = ()
    """Per-token logprobs; empty unless ``logprobs`` was asked for."""
    model: str = ""
    extra: dict[str, object] = field(default_factory=dict)
    """Backend-specific details (e.g. vLLM's ``reasoning``), never needed to use the result."""


@runtime_checkable
class Policy(Protocol):
    """A chat model (text or vision-language) behind one call."""

    name: str
    """A short identifier for records (the spec it was made from)."""

    def complete(
        self,
        messages: Sequence[Message],
        images: Sequence[NDArray[np.uint8]] = (),
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        logprobs: bool = False,
        top_logprobs: int = 0,
        stop: Sequence[str] = (),
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One chat completion. ``on_text``, when given, is called with each new piece of the
        reply as it is generated (never past a stop string); the pieces join to ``text``."""
        ...


class TextStream:
    """Hands a reply to ``on_text`` piece by piece as it grows, never past a stop string.

    Text that could be the start of a stop string is held back until it is known not to be
    one, so the pieces sent always join to the reply with its stop cut off.
    """

    def __init__(self, on_text: Callable[[str], None], stops: Sequence[str] = ()) -> None:
        self.on_text = on_text
        self.stops = [s for s in stops if s]
        self.text = ""
        self.sent = 0
        self.stopped = False

    def feed(self, piece: str) -> None:
        if self.stopped or not piece:
            return
        self.text += piece
        longest = max((len(s) for s in self.stops), default=0)
        window = max(0, self.sent - longest)
        cuts = [i for i in (self.text.find(s, window) for s in self.stops) if i >= 0]
        if cuts:
            self._send(min(cuts))
            self.stopped = True
            return
        hold = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(self.text)), hold, -1):
                if self.text.endswith(stop[:size]):
                    hold = size
                    break
        self._send(len(self.text) - hold)

    def close(self) -> None:
        """The reply ended without a stop string: send what was held back."""
        if not self.stopped:
            self._send(len(self.text))
        self.stopped = True

    def _send(self, end: int) -> None:
        if end > self.sent:
            self.on_text(self.text[self.sent : end])
            self.sent = end


VLM_HINT = "a vision-language model (a Qwen2-VL or LLaVA-style one; see docs/models.md)"


def text_only_model(name: str, evidence: str, needed_by: str) -> PolicyError:
    """The one-line error for a model that cannot take the images ``needed_by`` sends it."""
    return PolicyError(
        f"{name} does not take images ({evidence}), but {needed_by} works from pictures: use {VLM_HINT}"
    )


def require_images(policy: Policy, needed_by: str) -> None:
    """Raise :class:`PolicyError` unless ``policy``'s model takes images, before a run sends it any.

    A text-only model otherwise fails every request that carries a picture, and a caller that
    falls back on failure (the explorer) would finish a run the model never took part in.
    Backends that can tell have a ``check_accepts_images(needed_by)`` method (a transformers
    directory without an image processor, a vLLM model config without a multimodal part, a
    server that refuses a one-image request); other policies (scripted ones, a caller's own)
    are taken at their word.
    """
    check = getattr(policy, "check_accepts_images", None)
    if check is not None:
        check(needed_by)


def check_temperature(temperature: float) -> None:
    """A sampling temperature is a finite number >= 0 (NaN would be written to records as
    invalid JSON, and no server samples at an infinite one)."""
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise PolicyError(f"temperature must be a finite number >= 0, got {temperature}")


def check_request(
    messages: Sequence[Message],
    images: Sequence[NDArray[np.uint8]],
    max_tokens: int,
    temperature: float,
    top_logprobs: int,
) -> None:
    """Reject malformed requests with one clear line before any backend sees them."""
    if not messages:
        raise PolicyError("a completion needs at least one message")
    for i, message in enumerate(messages):
        if message.get("role") not in ("system", "user", "assistant"):
            raise PolicyError(f"message {i} has an invalid role {message.get('role')!r}")
        if not isinstance(message.get("content"), str):
            raise PolicyError(f"message {i} content must be a string")
    if images and not any(m["role"] == "user" for m in messages):
        raise PolicyError("images are attached to the last user message, but there is none")
    for i, image in enumerate(images):
        a = np.asarray(image)
        if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
            raise PolicyError(f"image {i} must be an (H, W, 3) uint8 RGB array, got {a.shape} {a.dtype}")
    if max_tokens < 1:
        raise PolicyError(f"max_tokens must be at least 1, got {max_tokens}")
    check_temperature(temperature)
    if top_logprobs < 0:
        raise PolicyError(f"top_logprobs must be >= 0, got {top_logprobs}")
