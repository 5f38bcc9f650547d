"""Asking a policy for a decision: re-asks that name what was wrong with a reply, then a default."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from embodia.core.chat import ContextOverflowError, Message, Policy, PolicyError, Tools
from embodia.core.parsing.failure import ParseFailure
from embodia.core.tool_calls import ToolCall, ToolChoice

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class AskRecord:
    """One attempt of :func:`ask`: what was sent (size), what came back, what it parsed to."""

    attempt: int
    prompt_chars: int
    """Characters of message content sent in this attempt (images not counted)."""
    reply: str
    parsed: object | None
    failure: str | None
    """Why the reply could not be used (a parse failure or a backend error), None if it could."""
    latency_s: float
    follow_up: str | None = None
    """What was sent back when the reply was a step towards an answer (a tool's result)."""
    reply_chars: int | None = None
    """The reply's length as the model gave it, when that was over ``max_reply_chars`` and it was
    cut (``reply`` holds what was kept and parsed); None when the reply was kept whole."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """The reply's native tool calls, each with its arguments and its result or error."""


@dataclass(frozen=True)
class FollowUp:
    """A reply that is not the answer yet but asks for something (a tool call whose result the
    model needs): ``message`` goes back to it and it is asked again, without using a re-ask."""

    message: str


@dataclass(frozen=True)
class CallsAnswer(Generic[T]):
    """What a reply's native tool calls came to (``ask``'s ``on_calls`` makes it).

    ``messages`` answer the calls (``role: tool``, one per call run); ``images`` are what the
    calls showed (a look in some direction), seen with the next attempt; ``records`` are the
    calls for the run record, each with its result or error. ``value`` is the decision when a
    call settled it; otherwise ``failure`` says what was wrong when a call was (counted as a
    failed attempt), and with neither the calls were questions whose answers go back free."""

    messages: tuple[Message, ...]
    records: tuple[dict[str, Any], ...]
    value: T | None = None
    failure: str | None = None
    images: tuple[NDArray[np.uint8], ...] = ()


@dataclass(frozen=True)
class Decision(Generic[T]):
    """The value a decision settled on, whether it is the declared default, and every attempt."""

    value: T
    fallback: bool
    attempts: tuple[AskRecord, ...]


MAX_REPLY_CHARS = 65_536
"""Default of :func:`ask`'s ``max_reply_chars``: far above any answer asked for (a few hundred
tokens), far below what a model repeating itself up to a large token limit writes."""


def _parse_safely(
    parse: Callable[[str], T | ParseFailure | FollowUp], reply: str, policy_name: str, attempt: int
) -> T | ParseFailure | FollowUp:
    """``parse(reply)``, with any exception it raises turned into a :class:`ParseFailure`: a bug in a
    parser costs one attempt, never the run (which would hit the same reply again on resume)."""
    try:
        return parse(reply)
    except Exception as error:  # whatever a parser raises, the run goes on
        logger.exception("%s reply %d: the parser raised %s", policy_name, attempt, type(error).__name__)
        message = str(error)
        message = message if len(message) <= 200 else f"{message[:197]}..."
        return ParseFailure(f"the reply could not be parsed ({type(error).__name__}: {message})")


def ask(
    policy: Policy,
    messages: Sequence[Message],
    images: Sequence[NDArray[np.uint8]] = (),
    parse: Callable[[str], T | ParseFailure | FollowUp] | None = None,
    *,
    default: T,
    max_retries: int = 2,
    max_follow_ups: int = 3,
    on_text: Callable[[int, str], None] | None = None,
    max_tokens: int = 256,
    temperature: float = 0.0,
    format_hint: str = "the answer in the format asked for above",
    max_reply_chars: int = MAX_REPLY_CHARS,
    tools: Tools = (),
    tool_choice: ToolChoice = "auto",
    on_calls: Callable[[tuple[ToolCall, ...]], CallsAnswer[T]] | None = None,
) -> Decision[T]:
    """Ask ``policy`` and parse its reply, re-asking up to ``max_retries`` times, then ``default``.

    A reply that does not parse is answered with the model's reply as an assistant message and
    a user message naming the problem ("Your reply could not be used: <reason>. Reply with
    <format_hint> only."). A backend :class:`PolicyError` (server down, malformed response)
    counts as a failed attempt and the same conversation is sent again; it never propagates,
    except a :class:`ContextOverflowError` on the first attempt: the conversation as given does
    not fit the model's context. A re-ask that outgrows the context (the model's own replies and
    the re-ask messages added up) ends the asking with the default, as no later one can fit.
    Images go with every attempt (attached, as always, to the last user message).

    ``parse`` may also return a :class:`FollowUp` (the model called an information tool): its
    message goes back as a user message and the model is asked again; up to ``max_follow_ups``
    of these are free, further ones count as failed attempts.

    ``on_text(attempt, piece)`` streams each reply as the backend generates it.

    With ``tools`` (OpenAI ``tools`` entries, offered with ``tool_choice``), a reply's native
    calls go to ``on_calls``, and its :class:`CallsAnswer` says what they came to: the
    assistant's calls and the tool messages answering them join the conversation, the images
    the calls showed join the request's, and the answer's value ends the asking. Calls that
    settle nothing are questions (free, up to ``max_follow_ups``, like a :class:`FollowUp`);
    a bad call is a failed attempt, its error told in its tool message. A reply without calls
    is read by ``parse`` as before.

    A reply longer than ``max_reply_chars`` is cut to that length before it is parsed, kept or
    sent back (degenerate repetition up to the token limit); the record keeps its full length
    in ``reply_chars``. An exception raised by ``parse`` (a parser bug) is logged and counts as a
    failed attempt with its reason; it never propagates.
    """
    if parse is None:
        raise TypeError("ask() needs a parse function: parse(text) -> value | ParseFailure")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    if max_follow_ups < 0:
        raise ValueError(f"max_follow_ups must be >= 0, got {max_follow_ups}")
    if max_reply_chars < 1:
        raise ValueError(f"max_reply_chars must be >= 1, got {max_reply_chars}")
    if tools and on_calls is None:
        raise TypeError("ask() with tools needs on_calls: what the reply's tool calls come to")
    conversation: list[Message] = list(messages)
    images = list(images)
    attempts: list[AskRecord] = []
    failures = follow_ups = 0
    while failures <= max_retries:
        attempt = len(attempts)
        prompt_chars = sum(len(m["content"]) for m in conversation)
        started = time.perf_counter()
        try:
            request = functools.partial(
                policy.complete,
                conversation,
                images,
                max_tokens=max_tokens,
                temperature=temperature,
                on_text=None if on_text is None else functools.partial(on_text, attempt),
            )
            # tools only when offered: a policy of the protocol need not take them otherwise
            completion = request(tools=tools, tool_choice=tool_choice) if tools else request()
        except PolicyError as error:
            if isinstance(error, ContextOverflowError) and not attempts:
                raise  # the conversation as given does not fit: so would every other decision's
            latency = time.perf_counter() - started
            attempts.append(AskRecord(attempt, prompt_chars, "", None, f"policy error: {error}", latency))
            logger.warning("%s attempt %d failed: %s", policy.name, attempt, error)
            failures += 1
            if isinstance(error, ContextOverflowError):
                break  # the re-asks grew past the context; further ones would only grow more
            continue
        reply, reply_chars = completion.text, None
        if len(reply) > max_reply_chars:
            reply_chars, reply = len(reply), reply[:max_reply_chars]
            logger.warning(
                "%s reply %d has %d characters; parsing the first %d",
                policy.name,
                attempt,
                reply_chars,
                max_reply_chars,
            )
        record = functools.partial(
            AskRecord, attempt, prompt_chars, reply, latency_s=completion.latency_s, reply_chars=reply_chars
        )
        if completion.tool_calls and on_calls is not None:
            answer = on_calls(completion.tool_calls)
            conversation += [completion.assistant_message(), *answer.messages]
            images += answer.images
            calls = functools.partial(record, tool_calls=answer.records)
            if answer.value is not None:
                attempts.append(calls(answer.value, None))
                return Decision(answer.value, False, tuple(attempts))
            if answer.failure is None and follow_ups < max_follow_ups:
                follow_ups += 1
                attempts.append(calls(None, None, follow_up="\n".join(m["content"] for m in answer.messages)))
                continue
            failures += 1
            reason = (
                answer.failure or f"{max_follow_ups} tool results were given already; an answer is needed"
            )
            attempts.append(calls(None, reason))
            logger.info("%s reply %d: %s", policy.name, attempt, reason)
            if answer.failure is None:
                conversation.append({"role": "user", "content": f"{reason}. Reply with {format_hint}."})
            continue
        result = _parse_safely(parse, reply, policy.name, attempt)
        if isinstance(result, FollowUp) and follow_ups < max_follow_ups:
            follow_ups += 1
            attempts.append(record(None, None, follow_up=result.message))
            conversation += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": f"{result.message}\nNow reply with {format_hint}."},
            ]
            continue
        if isinstance(result, FollowUp):
            result = ParseFailure(f"{max_follow_ups} tool results were given already; an answer is needed")
        if isinstance(result, ParseFailure):
            failures += 1
            attempts.append(record(None, result.reason))
            logger.info("%s reply %d unusable: %s", policy.name, attempt, result.reason)
            conversation += [
                {"role": "assistant", "content": reply},
                {
                    "role": "user",
                    "content": f"Your reply could not be used: {result.reason}. "
                    f"Reply with {format_hint} only.",
                },
            ]
            continue
        attempts.append(record(result, None))
        return Decision(result, False, tuple(attempts))
    logger.warning(
        "%s gave no usable reply in %d attempts (last: %s); using the default %r",
        policy.name,
        len(attempts),
        attempts[-1].failure,
        default,
    )
    return Decision(default, True, tuple(attempts))
