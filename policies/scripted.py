"""A policy that replays scripted replies, for tests and for replaying recorded runs.

Each scripted output is either a reply string or a dict::

    {"text": "...", "finish_reason": "stop" | "length" | "error",
     "tokens": [{"token": "3", "logprob": -0.1, "top": [["3", -0.1], ["4", -2.5]]}, ...],
     "tool_calls": [{"name": "goto_waypoint", "arguments": {"index": 2}}, ...]}
    {"error": "server went away"}          # this call raises PolicyError(message)

``tool_calls`` play a server that parses calls itself (``arguments`` may be JSON text, as a
server sends it, malformed included); without them, a request that offers tools has its
reply text read for Hermes ``<tool_call>`` markup, as a local model's would be.

The policy keeps the backend contract where it is cheap to: ``stop`` strings cut the text
(finish reason ``stop``), a reply longer than ``max_tokens`` whitespace tokens is cut to it
(finish reason ``length``), token logprobs come back only when ``logprobs`` is asked, with at
most ``top_logprobs`` alternatives (as scripted, not cut with the text). Token counts are
whitespace-split words.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray

from embodia.core import chat
from embodia.core.chat import PolicyError
from embodia.core.tool_calls import ToolCall, ToolChoice, call_from_parts, call_id_prefix
from embodia.errors import read_text_file

_FINISH_REASONS: tuple[chat.FinishReason, ...] = ("stop", "length", "error")


@dataclass(frozen=True)
class ScriptedRequest:
    """One call the scripted policy received, kept so tests can check prompts and images."""

    messages: tuple[chat.Message, ...]
    images: tuple[NDArray[np.uint8], ...]
    max_tokens: int
    temperature: float
    logprobs: bool
    top_logprobs: int
    stop: tuple[str, ...]
    tools: chat.Tools = ()
    tool_choice: ToolChoice = "auto"


@dataclass(frozen=True)
class _Scripted:
    text: str
    finish_reason: chat.FinishReason
    tokens: tuple[chat.TokenLogprob, ...]
    error: str | None = None
    tool_calls: tuple[tuple[str, object], ...] = ()
    """(name, arguments) of each scripted call."""


def _parse_output(index: int, output: object) -> _Scripted:
    where = f"scripted output {index}"
    if isinstance(output, str):
        return _Scripted(output, "stop", ())
    if not isinstance(output, Mapping):
        raise PolicyError(f"{where} must be a string or an object, got {type(output).__name__}")
    unknown = set(output) - {"text", "finish_reason", "tokens", "error", "tool_calls"}
    if unknown:
        raise PolicyError(f"{where} has unknown fields {sorted(unknown)}")
    if "error" in output:
        if not isinstance(output["error"], str):
            raise PolicyError(f"{where}: 'error' must be a string message")
        return _Scripted("", "error", (), error=output["error"])
    text = output.get("text")
    if not isinstance(text, str):
        raise PolicyError(f"{where} needs a string 'text'")
    finish_reason = output.get("finish_reason", "stop")
    if finish_reason not in _FINISH_REASONS:
        raise PolicyError(
            f"{where}: finish_reason must be one of {', '.join(_FINISH_REASONS)}, got {finish_reason!r}"
        )
    tokens = tuple(_parse_token(f"{where} token {i}", t) for i, t in enumerate(output.get("tokens", ())))
    calls = output.get("tool_calls", [])
    if not isinstance(calls, list) or not all(
        isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in calls
    ):
        raise PolicyError(f'{where}: tool_calls must be a list of {{"name": ..., "arguments": ...}}')
    scripted_calls = tuple((str(c["name"]), c.get("arguments", {})) for c in calls)
    return _Scripted(text, cast(chat.FinishReason, finish_reason), tokens, tool_calls=scripted_calls)


def _parse_token(where: str, token: object) -> chat.TokenLogprob:
    if not isinstance(token, Mapping) or not isinstance(token.get("token"), str):
        raise PolicyError(f"{where} must be an object with a string 'token'")
    try:
        logprob = float(token["logprob"])
        top = tuple((str(alt), float(lp)) for alt, lp in token.get("top", ()))
    except (KeyError, TypeError, ValueError) as error:
        raise PolicyError(f"{where} needs a numeric 'logprob' and 'top' as [token, logprob] pairs") from error
    return chat.TokenLogprob(token["token"], logprob, top)


class ScriptedPolicy(chat.ChatPolicy):
    """Replays ``outputs`` in order, one per ``complete`` call (cycling when ``loop``)."""

    def __init__(
        self, outputs: Sequence[str | Mapping[str, object]], *, name: str = "scripted", loop: bool = False
    ):
        if isinstance(outputs, str):
            raise PolicyError("ScriptedPolicy takes a sequence of outputs, not a single string")
        self._outputs = [_parse_output(i, output) for i, output in enumerate(outputs)]
        if loop and not self._outputs:
            raise PolicyError("a looping scripted policy needs at least one output")
        self.name = name
        self.loop = loop
        self.requests: list[ScriptedRequest] = []
        """Every request received, in order (including those that raised)."""

    @classmethod
    def from_jsonl(cls, path: str | Path, *, name: str | None = None, loop: bool = False) -> ScriptedPolicy:
        """Outputs from a JSON-lines file: one JSON string or output object a line (blank lines skipped)."""
        file = Path(path).expanduser()
        if not file.is_file():
            raise PolicyError(f"scripted outputs file not found: {file}")
        outputs: list[str | Mapping[str, object]] = []
        for number, line in enumerate(read_text_file(file, PolicyError).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                raise PolicyError(f"{file}:{number}: not JSON ({error.msg})") from error
            if not isinstance(value, str | dict):
                raise PolicyError(
                    f"{file}:{number}: expected a JSON string or object, got {type(value).__name__}"
                )
            outputs.append(value)
        return cls(outputs, name=name or f"scripted:{file}", loop=loop)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _generate(self, request: chat.ChatRequest) -> chat.Completion:
        messages, images, params, on_text = request.messages, request.images, request.params, request.on_text
        started = time.perf_counter()
        self.requests.append(
            ScriptedRequest(
                tuple(messages),
                tuple(images),
                params.max_tokens,
                params.temperature,
                params.logprobs,
                params.top_logprobs,
                tuple(params.stop),
                request.tools,
                request.tool_choice,
            )
        )
        index = self.calls - 1
        if index >= len(self._outputs) and not self.loop:
            raise PolicyError(f"scripted policy ran out of outputs after {len(self._outputs)} calls")
        scripted = self._outputs[index % len(self._outputs)]
        if scripted.error is not None:
            raise PolicyError(scripted.error)
        text, finish_reason = scripted.text, scripted.finish_reason
        cuts = [text.find(s) for s in params.stop if s and s in text]
        if cuts:
            text, finish_reason = text[: min(cuts)], "stop"
        words = text.split()
        if len(words) > params.max_tokens:
            text, finish_reason = _first_words(text, params.max_tokens), "length"
            words = words[: params.max_tokens]
        tokens: tuple[chat.TokenLogprob, ...] = ()
        if params.wants_logprobs:
            top = params.top_logprobs
            tokens = tuple(chat.TokenLogprob(t.token, t.logprob, t.top[:top]) for t in scripted.tokens)
        if on_text is not None:  # word by word, each with the whitespace before it
            for piece in re.findall(r"\s*\S+|\s+\Z", text):
                on_text(piece)
        calls: tuple[ToolCall, ...] = ()
        if request.tools and request.tool_choice != "none":
            prefix = call_id_prefix(messages)
            calls = tuple(
                call_from_parts(f"{prefix}_{i}", name, arguments)
                for i, (name, arguments) in enumerate(scripted.tool_calls)
            )
        return chat.Completion(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=sum(len(m["content"].split()) for m in messages),
            completion_tokens=len(words),
            latency_s=time.perf_counter() - started,
            tokens=tokens,
            model=self.name,
            tool_calls=calls,
        )


def _first_words(text: str, n: int) -> str:
    """``text`` up to the end of its ``n``-th whitespace-separated word."""
    count = 0
    in_word = False
    for i, c in enumerate(text):
        if c.isspace():
            if in_word:
                count += 1
                if count == n:
                    return text[:i]
            in_word = False
        else:
            in_word = True
    return text
