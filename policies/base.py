"""The Policy contract: a chat-level ``complete`` every backend implements.

A message list follows the OpenAI chat shape (``{"role": ..., "content": str}``); images
travel separately as RGB arrays and are attached to the *last user message* in order, which
is how every backend (OpenAI-compatible ``image_url`` parts, a transformers processor, vLLM's
offline ``LLM.chat``) can express them. Env-level decisions (pick a waypoint, answer a
question) are built on ``complete`` by the agents, with parsing in :mod:`.parsing`.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    ) -> Completion: ...


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
    if temperature < 0:
        raise PolicyError(f"temperature must be >= 0, got {temperature}")
    if top_logprobs < 0:
        raise PolicyError(f"top_logprobs must be >= 0, got {top_logprobs}")
