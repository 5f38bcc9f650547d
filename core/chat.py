"""The Policy contract: a chat-level ``complete`` every backend implements.

:class:`Policy` is the contract any object meets by having ``complete``; embodia's own
backends subclass :class:`ChatPolicy`, whose ``complete`` checks the request once
(:func:`check_messages`, :class:`SamplingParams`) and passes it to the backend's
``_generate``.

A message list follows the OpenAI chat shape (``{"role": ..., "content": str}``, with
``tool_calls`` on an assistant message and ``tool_call_id`` on a ``tool`` one when a request
offers tools: :mod:`.tool_calls`); images
travel separately as RGB arrays and are attached to the *last user message* in order, which
is how every backend (OpenAI-compatible ``image_url`` parts, a transformers processor, vLLM's
offline ``LLM.chat``) can express them. Env-level decisions (pick a waypoint, answer a
question) are built on ``complete`` by the agents, with parsing in :mod:`.parsing`.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NotRequired, Protocol, TypedDict, Unpack, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from embodia.core.random_weights import random_weights_label
from embodia.core.tool_calls import (
    ToolCall,
    ToolChoice,
    call_id_prefix,
    check_tools,
    chosen_name,
    parse_tool_calls,
)
from embodia.errors import EmbodiaError

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "error"]
Tools = Sequence[Mapping[str, Any]]
"""OpenAI ``tools`` entries (:meth:`embodia.tools.base.Tool.openai_schema`)."""


def template_tools(tools: Tools) -> dict[str, Any]:
    """Keywords for a chat template's ``apply_chat_template``: ``tools`` when there are any,
    so that a prompt without tools renders as it always did."""
    return {"tools": [dict(tool) for tool in tools]} if tools else {}


class Message(TypedDict):
    role: Role
    content: str
    tool_calls: NotRequired[list[dict[str, Any]]]
    """An assistant message's calls, as :meth:`ToolCall.wire` writes them."""
    tool_call_id: NotRequired[str]
    """A ``tool`` message's answer to that call."""


Images = Sequence[NDArray[np.uint8]]
"""A request's pictures: (H, W, 3) uint8 RGB arrays, attached to its last user message."""
OnText = Callable[[str], None]
"""Called with each new piece of a reply as it is generated (see :meth:`Policy.complete`)."""


class PolicyError(EmbodiaError):
    """A policy backend failed in a way the caller should report (server down, bad reply)."""


@dataclass(frozen=True)
class ContextWindow:
    """How many tokens a model attends to (prompt and reply together), and where it is."""

    tokens: int
    model: str
    """The model as errors name it: ``tiny-chat`` (served), ``models/tiny-chat`` (a directory)."""
    at: str = ""
    """Where it runs, for servers: ``http://127.0.0.1:8000/v1``."""
    remedy: str = "use a model with a longer context"
    """How to get a longer context with this backend."""

    def describe(self) -> str:
        """``tiny-chat's context of 512 tokens at http://127.0.0.1:8000/v1``."""
        return f"{self.model}'s context of {self.tokens} tokens" + (f" at {self.at}" if self.at else "")


class ContextOverflowError(PolicyError):
    """A request does not fit the model's context window: its prompt alone fills it, or its
    reply budget (``max_tokens``) leaves the prompt no room.

    The backends raise it with what they know; a runner names the option to change with
    :meth:`naming`, since only it knows which of its options made the prompt or the budget.
    """

    def __init__(
        self,
        window: ContextWindow,
        *,
        prompt_tokens: int | None,
        max_tokens: int,
        message: str | None = None,
    ) -> None:
        self.window = window
        self.prompt_tokens = prompt_tokens
        """Tokens of the prompt; None when the backend did not say (the budget alone was too much)."""
        self.max_tokens = max_tokens
        super().__init__(message or self._plain_message())

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole (its keyword arguments too), so a Ray worker's overflow reaches the
        driver as this type, with its window and counts."""
        return (_rebuild_overflow, (self.window, self.prompt_tokens, self.max_tokens, str(self)))

    @property
    def prompt_fills_context(self) -> bool:
        return self.prompt_tokens is not None and self.prompt_tokens >= self.window.tokens

    def _plain_message(self, budget: str = "") -> str:
        """What did not fit; ``budget`` names the reply budget (default: "a reply of up to N tokens")."""
        where = self.window.describe()
        if self.prompt_fills_context:
            return f"the prompt has {self.prompt_tokens} tokens, which fills {where}"
        budget = budget or f"a reply of up to {self.max_tokens} tokens"
        if self.prompt_tokens is None:
            return f"{budget} leaves no room in {where}"
        return f"a prompt of {self.prompt_tokens} tokens and {budget} do not fit {where}"

    def naming(self, what: str, *, output_flag: str | None, prompt_advice: str) -> ContextOverflowError:
        """The same overflow, its message naming the option to change.

        ``what`` says where it happened (``item 3``, ``second 40``); ``output_flag`` is the
        option that set ``max_tokens`` (None when the command fixes it); ``prompt_advice``
        says how to make the prompt shorter (``lower --budget``).
        """
        if self.prompt_fills_context or output_flag is None:
            text = f"{self._plain_message()}: {prompt_advice} or {self.window.remedy}"
        else:
            text = (
                f"{self._plain_message(f'{output_flag} {self.max_tokens}')}: "
                f"lower {output_flag} or {self.window.remedy}"
            )
        return ContextOverflowError(
            self.window,
            prompt_tokens=self.prompt_tokens,
            max_tokens=self.max_tokens,
            message=f"{what}: {text}" if what else text,
        )


def _rebuild_overflow(
    window: ContextWindow, prompt_tokens: int | None, max_tokens: int, message: str
) -> ContextOverflowError:
    return ContextOverflowError(window, prompt_tokens=prompt_tokens, max_tokens=max_tokens, message=message)


def context_window(policy: object) -> ContextWindow | None:
    """The policy's context window, or None when its backend cannot say (a scripted policy, a
    server that does not report it)."""
    method = getattr(policy, "context_window", None)
    return method() if callable(method) else None


def count_prompt_tokens(
    policy: object, messages: Sequence[Message], images: Sequence[NDArray[np.uint8]] = (), tools: Tools = ()
) -> int | None:
    """Tokens of the prompt ``messages`` (with ``images`` and the ``tools`` offered) make for
    this policy's model, chat template and generation prompt included; None when its backend
    cannot count them."""
    method = getattr(policy, "count_tokens", None)
    if not callable(method):
        return None
    return method(messages, images, tools) if tools else method(messages, images)


def check_output_budget(
    policy: object, max_tokens: int, flag: str | None, *, what: str = ""
) -> ContextWindow | None:
    """Refuse, before a run starts, a reply budget that leaves a prompt no room in the model's
    context. ``flag`` names the option that set it (None: the command fixes it); ``what``
    prefixes the message (the option that chose the model, e.g. ``--reasoner``). Returns the
    window, when known."""
    window = context_window(policy)
    if window is not None and max_tokens >= window.tokens:
        overflow = ContextOverflowError(window, prompt_tokens=None, max_tokens=max_tokens)
        if flag is None:
            text = f"{overflow}: {window.remedy}"
            message = f"{what}: {text}" if what else text
            raise ContextOverflowError(window, prompt_tokens=None, max_tokens=max_tokens, message=message)
        raise overflow.naming(what, output_flag=flag, prompt_advice="")
    return window


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
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls the reply makes, when the request offered tools; ``text`` is then what it
    says besides them."""

    def assistant_message(self) -> Message:
        """The reply as the next assistant message of the conversation, its calls included."""
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [call.wire() for call in self.tool_calls]
        return message


@runtime_checkable
class Policy(Protocol):
    """A chat model (text or vision-language) behind one call.

    The backends also say what their model's context holds, which this protocol leaves
    optional so that any object with ``complete`` stays a policy: ``context_window() ->
    ContextWindow | None`` and ``count_tokens(messages, images, tools) -> int | None`` (the
    prompt's tokens with the model's tokenizer and chat template). Use :func:`context_window` and
    :func:`count_prompt_tokens`, which answer None for a policy without them.
    """

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
        tools: Tools = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        """One chat completion. ``on_text``, when given, is called with each new piece of the
        reply as it is generated (never past a stop string); the pieces join to ``text``.
        ``tools`` and ``tool_choice`` offer tools (:mod:`.tool_calls`); the reply's calls
        come back in ``tool_calls``."""
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


def check_messages(messages: Sequence[Message], images: Sequence[NDArray[np.uint8]] = ()) -> None:
    """Reject a malformed conversation (or images it cannot carry) with one clear line before
    any backend sees it."""
    if not messages:
        raise PolicyError("a completion needs at least one message")
    call_ids: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise PolicyError(f"message {i} has an invalid role {role!r}")
        if not isinstance(message.get("content"), str):
            raise PolicyError(f"message {i} content must be a string")
        calls = message.get("tool_calls")
        if calls is not None:
            if role != "assistant" or not isinstance(calls, list):
                raise PolicyError(f"message {i}: only an assistant message carries tool_calls, as a list")
            for call in calls:
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping) or not isinstance(call.get("id"), str):
                    raise PolicyError(f"message {i}: a tool call is {{'id', 'type', 'function': {{...}}}}")
                call_ids.add(call["id"])
        if role == "tool" and message.get("tool_call_id") not in call_ids:
            raise PolicyError(
                f"message {i} is a tool result for {message.get('tool_call_id')!r}, "
                "which no earlier assistant message called"
            )
    if images and not any(m["role"] == "user" for m in messages):
        raise PolicyError("images are attached to the last user message, but there is none")
    for i, image in enumerate(images):
        a = np.asarray(image)
        if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
            raise PolicyError(f"image {i} must be an (H, W, 3) uint8 RGB array, got {a.shape} {a.dtype}")


class SamplingKeywords(TypedDict, total=False):
    """The keywords of ``complete`` that make its :class:`SamplingParams` (defaults there)."""

    max_tokens: int
    temperature: float
    logprobs: bool
    top_logprobs: int
    stop: Sequence[str]


@dataclass(frozen=True)
class SamplingParams:
    """How one reply is generated: the request's settings besides its messages and images.

    Made valid or not at all: a bad value is a :class:`PolicyError` naming it.
    """

    max_tokens: int = 256
    """Longest reply, in tokens."""
    temperature: float = 0.0
    """0 decodes greedily."""
    logprobs: bool = False
    """Return each generated token's logprob."""
    top_logprobs: int = 0
    """Alternatives returned per position, best first."""
    stop: Sequence[str] = ()
    """Strings that end the reply (cut off, finish reason ``stop``); kept as a tuple."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))  # frozen: a caller's list cannot change it
        if self.max_tokens < 1:
            raise PolicyError(f"max_tokens must be at least 1, got {self.max_tokens}")
        check_temperature(self.temperature)
        if self.top_logprobs < 0:
            raise PolicyError(f"top_logprobs must be >= 0, got {self.top_logprobs}")

    @property
    def wants_logprobs(self) -> bool:
        """Logprobs come back when asked for, or implied by ``top_logprobs > 0``."""
        return self.logprobs or self.top_logprobs > 0


@dataclass(frozen=True)
class ChatRequest:
    """A checked completion request, as :meth:`ChatPolicy.complete` hands it to a backend: one
    object, so that what a request can carry grows without changing every backend's signature."""

    messages: Sequence[Message]
    """The conversation, checked by :func:`check_messages`."""
    images: Images
    """Pictures for the last user message."""
    params: SamplingParams
    """How to sample the reply."""
    on_text: OnText | None = None
    """Called with each new piece of the reply as it is generated, when given."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """Tools offered, checked by :func:`~embodia.core.tool_calls.check_tools`."""
    tool_choice: ToolChoice = "auto"
    """How the reply must use them, in its plain form."""


class ChatPolicy(ABC):
    """The base of embodia's backends: :meth:`complete` checks a request once and hands it
    to the backend's :meth:`_generate` as one :class:`ChatRequest`.

    A subclass implements ``_generate`` (and sets ``name``); it overrides
    :meth:`context_window` and :meth:`count_tokens` when its model can say. Any object with
    ``complete`` is a :class:`Policy` too: this class is how the backends share the checks,
    not a requirement of the contract.
    """

    name: str
    """A short identifier for records (the spec it was made from)."""
    random_weights: str | None = None
    """Why this model's outputs mean nothing (its weights are random), or None for a trained model."""

    def _mark_random_weights(self, note: str | None) -> None:
        """Keep ``note`` (:func:`~embodia.core.random_weights.random_weights_note`'s line) as
        :attr:`random_weights`, warn with it, and label :attr:`name` so every record of this
        policy's replies says so; a None note (a trained model) changes nothing."""
        if note is None:
            return
        self.random_weights = note
        logging.getLogger(type(self).__module__).warning("%s", note)  # the backend's own logger
        self.name = random_weights_label(self.name)

    def complete(
        self,
        messages: Sequence[Message],
        images: Images = (),
        *,
        on_text: OnText | None = None,
        tools: Tools = (),
        tool_choice: ToolChoice = "auto",
        **sampling: Unpack[SamplingKeywords],
    ) -> Completion:
        """One chat completion, as :meth:`Policy.complete` describes it; the keywords besides
        ``on_text``, ``tools`` and ``tool_choice`` are :class:`SamplingParams`'.

        A backend whose server parses calls returns them; otherwise the reply's text is read
        for them (:func:`~embodia.core.tool_calls.parse_tool_calls`), unless the choice is
        ``"none"``. Call ids are numbered by the conversation's turn, so they are unique in
        it and the same when a run is replayed.
        """
        check_messages(messages, images)
        try:
            choice = check_tools(tools, tool_choice)
        except EmbodiaError as error:
            raise PolicyError(str(error)) from None
        request = ChatRequest(messages, images, SamplingParams(**sampling), on_text, tuple(tools), choice)
        completion = self._generate(request)
        if request.tools and choice != "none" and not completion.tool_calls:
            prefix = call_id_prefix(messages)
            text, calls = parse_tool_calls(completion.text, id_prefix=prefix)
            if not calls and choice != "auto":
                # the choice forced a call and the reply holds none (cut off, or prose): it
                # is the forced call, unreadable, so that it is counted and answered
                forced = chosen_name(choice) or ""
                calls = (
                    ToolCall(f"{prefix}_0", forced, None, text, error="the reply holds no complete call"),
                )
            if calls:
                completion = replace(completion, text=text, tool_calls=calls)
        return completion

    @abstractmethod
    def _generate(self, request: ChatRequest) -> Completion:
        """The backend's completion of a checked request."""

    def context_window(self) -> ContextWindow | None:
        """The model's context window; None when the backend cannot say."""
        return None

    def count_tokens(
        self, messages: Sequence[Message], images: Sequence[NDArray[np.uint8]] = (), tools: Tools = ()
    ) -> int | None:
        """Tokens of the prompt ``messages``, ``images`` and the ``tools`` offered make (the
        template lists the tools in the prompt); None without a tokenizer. The request is
        checked as :meth:`complete` checks it, then counted by :meth:`_count_tokens`."""
        check_messages(messages, images)
        try:
            check_tools(tools, "auto")
        except EmbodiaError as error:
            raise PolicyError(str(error)) from None
        return self._count_tokens(messages, images, tuple(tools))

    def _count_tokens(self, messages: Sequence[Message], images: Images, tools: Tools) -> int | None:
        """The backend's count of a checked prompt; None when it has no tokenizer."""
        return None
