"""Agent tools: a function with a JSON-schema argument contract, called from model output.

A model asks for a tool natively: a request's ``tools``, the reply's
:attr:`~embodia.core.chat.Completion.tool_calls` (read by the backend from a server's calls
or from the model's ``<tool_call>`` markup, ``core/tool_calls.py``), run by
:meth:`ToolBox.run`, or a reply's calls all at once by :meth:`ToolBox.answer`.
:meth:`ToolBox.call` validates the arguments against the tool's schema before running it;
anything wrong (unparseable JSON, an unknown tool, a missing or mistyped argument, a tool
that raises) comes back as a :class:`ToolResult` with a one-line error to show the model,
and is counted, never raised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from embodia.core.chat import Message
from embodia.core.parsing import CallsAnswer, ParseFailure
from embodia.core.tool_calls import ToolCall
from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)

T = TypeVar("T")


def object_schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON schema of a closed arguments object: these ``properties``, ``required`` ones
    among them, no others (a constrained decoder then cannot wander into extra keys)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""
    function: Callable[..., Any]

    def __post_init__(self) -> None:
        from jsonschema import Draft202012Validator

        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: the parameters schema must describe an object")
        Draft202012Validator.check_schema(self.parameters)

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI / vLLM ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class ToolImage:
    """What a tool returns to show the model a picture (a view in some direction): the image
    goes with the next request, the caption is the tool's answer."""

    image: NDArray[np.uint8]
    caption: str


@dataclass(frozen=True)
class ToolResult:
    tool: str
    ok: bool
    value: Any = None
    error: str | None = None

    def message(self) -> str:
        """What to tell the model."""
        return f"{self.tool}: {self.value}" if self.ok else f"{self.tool} failed: {self.error}"

    def call_record(self, call: ToolCall, key: str = "result") -> dict[str, Any]:
        """``call`` for a run record, with this result's value under ``key`` or its ``error``."""
        return {**call.record(), key: self.value} if self.ok else {**call.record(), "error": self.error}

    def tool_message(self, call: ToolCall) -> Message:
        """The result as the ``role: tool`` message answering ``call``: the value as JSON,
        or the error."""
        content = json.dumps(self.value, default=str) if self.ok else f"error: {self.error}"
        return {"role": "tool", "content": content, "tool_call_id": call.id}


class ToolBox:
    """Tools by name, with validation and a count of the calls that went wrong."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = {tool.name: tool for tool in tools}
        if len(self.tools) != len(tools):
            raise ValueError("tool names must be unique")
        self.calls = 0
        self.errors = 0

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self.tools.values()]

    def _fail(self, tool: str, error: str) -> ToolResult:
        self.errors += 1
        logger.info("tool call rejected (%s): %s", tool, error)
        return ToolResult(tool=tool, ok=False, error=error)

    def call(self, name: str, arguments: object) -> ToolResult:
        """Validate ``arguments`` (a JSON object or its text) and run tool ``name``.

        ``arguments`` comes straight from model output, so any JSON value may arrive here.
        """
        from jsonschema import Draft202012Validator

        self.calls += 1
        tool = self.tools.get(name)
        if tool is None:
            return self._fail(name, f"unknown tool {name!r}: available are {', '.join(sorted(self.tools))}")
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):
            from embodia.core.parsing import extract_json

            parsed = extract_json(arguments) if arguments.strip() else {}
            if isinstance(parsed, ParseFailure):
                return self._fail(name, f"arguments are not JSON: {parsed.reason}")
            arguments = parsed
        if not isinstance(arguments, dict):
            return self._fail(name, f"arguments must be a JSON object, got {type(arguments).__name__}")
        problems = sorted(
            Draft202012Validator(tool.parameters).iter_errors(arguments), key=lambda e: list(e.path)
        )
        if problems:
            first = problems[0]
            where = "/".join(str(p) for p in first.path) or "arguments"
            return self._fail(name, f"invalid {where}: {first.message}")
        try:
            value = tool.function(**arguments)
        except EmbodiaError as exc:
            return self._fail(name, str(exc))
        except (TypeError, ValueError) as exc:  # a tool that rejects what its schema allowed
            return self._fail(name, f"{type(exc).__name__}: {exc}")
        return ToolResult(tool=name, ok=True, value=value)

    def run(self, call: ToolCall) -> ToolResult:
        """Run a native call (:attr:`Completion.tool_calls`); one that could not be read
        (truncated JSON, no name) fails with the reason, counted like a bad argument."""
        if call.error is not None:
            self.calls += 1
            return self._fail(call.name or "?", call.error)
        return self.call(call.name, call.arguments)

    def answer(self, calls: Sequence[ToolCall], settles: Callable[[ToolResult], T | None]) -> CallsAnswer[T]:
        """Run a reply's calls in order (:func:`~embodia.core.parsing.ask`'s ``on_calls``).

        ``settles`` turns a result into the decision's value, or None when the call only
        informs (``describe_map``); the first call that settles ends the reply, and the calls
        after it are not run. A :class:`ToolImage` result goes to the model as an image. A call
        that fails makes the reply a failed attempt, its error in its tool message."""
        messages: list[Message] = []
        records: list[dict[str, Any]] = []
        images: list[NDArray[np.uint8]] = []
        failure: str | None = None
        for call in calls:
            result = self.run(call)
            value = result.value
            if isinstance(value, ToolImage):
                images.append(value.image)
                result = ToolResult(result.tool, True, value.caption)
            messages.append(result.tool_message(call))
            records.append(result.call_record(call))
            if not result.ok:
                failure = failure or result.message()
                continue
            settled = settles(result)
            if settled is not None:
                return CallsAnswer(tuple(messages), tuple(records), settled, None, tuple(images))
        return CallsAnswer(tuple(messages), tuple(records), None, failure, tuple(images))
