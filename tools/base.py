"""Agent tools: a function with a JSON-schema argument contract, called from model output.

A model asks for a tool natively (a request's ``tools``, the reply's
:attr:`~embodia.core.chat.Completion.tool_calls`, run by :meth:`ToolBox.run`), or as JSON
written in its reply (``{"tool": "goto_waypoint", "arguments": {"index": 2}}``, possibly
inside prose or code fences), for models prompted with :meth:`ToolBox.prompt`.
:meth:`ToolBox.call` parses and validates the arguments against the tool's schema before
running it; anything wrong (unparseable JSON, an unknown tool, a missing or mistyped
argument, a tool that raises) comes back as a :class:`ToolResult` with a one-line error to
show the model, and is counted, never raised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from embodia.core.chat import Message
from embodia.core.parsing import ParseFailure
from embodia.core.tool_calls import ToolCall
from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)


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
class ToolResult:
    tool: str
    ok: bool
    value: Any = None
    error: str | None = None

    def message(self) -> str:
        """What to tell the model."""
        return f"{self.tool}: {self.value}" if self.ok else f"{self.tool} failed: {self.error}"

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

    def prompt(self) -> str:
        """The tools as text, for a model prompted to write calls as JSON in its reply."""
        lines = []
        for tool in self.tools.values():
            properties = tool.parameters.get("properties", {})
            args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in properties.items())
            lines.append(f"- {tool.name}({args}): {tool.description}")
        return "\n".join(lines)

    @staticmethod
    def parse_call(text: str) -> tuple[str, object] | ParseFailure:
        """The ``{"tool": NAME, "arguments": {...}}`` a model wrote somewhere in ``text``."""
        from embodia.core.parsing import extract_json, strip_thinking

        request = extract_json(strip_thinking(text))
        if isinstance(request, ParseFailure):
            return ParseFailure(f"no tool call found: {request.reason}")
        if not isinstance(request, dict) or not isinstance(name := request.get("tool"), str):
            return ParseFailure('a tool call is a JSON object {"tool": NAME, "arguments": {...}}')
        return name, request.get("arguments", {})

    def run(self, call: ToolCall) -> ToolResult:
        """Run a native call (:attr:`Completion.tool_calls`); one that could not be read
        (truncated JSON, no name) fails with the reason, counted like a bad argument."""
        if call.error is not None:
            self.calls += 1
            return self._fail(call.name or "?", call.error)
        return self.call(call.name, call.arguments)

    def call_from_text(self, text: str) -> ToolResult:
        """Parse the call a model wrote in ``text`` and run it."""
        request = self.parse_call(text)
        if isinstance(request, ParseFailure):
            self.calls += 1
            return self._fail("?", request.reason)
        return self.call(*request)
