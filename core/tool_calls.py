"""Native tool calls: the tools a request offers, how the model must use them, and the calls
a reply makes.

A request offers tools as OpenAI ``tools`` entries (``{"type": "function", "function":
{"name", "description", "parameters"}}``, what :meth:`embodia.tools.base.Tool.openai_schema`
makes) with a ``tool_choice``: ``"auto"`` (the model may call), ``"required"`` (it must call
one), ``"none"`` (it must not) or ``{"name": NAME}`` (it must call that one). A reply's
calls come back as :class:`ToolCall` objects beside its text, and the conversation goes on
with an assistant message carrying them (``tool_calls``) and one ``role: tool`` message per
call with its ``tool_call_id``, as in the OpenAI chat format.

Servers parse calls themselves (vLLM's ``--tool-call-parser``); a local model's reply is
read by :func:`parse_tool_calls`, which understands the Hermes markup that Qwen-family and
Hermes chat templates teach (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``)
and the ways small models get it wrong. A call that cannot be read is still returned, with
its :attr:`ToolCall.error`, so that the caller can tell the model and count it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from embodia.core.json_bounds import Unreadable, load_bounded
from embodia.errors import EmbodiaError

ToolChoice = Literal["auto", "required", "none"] | Mapping[str, str]
"""``"auto"``, ``"required"``, ``"none"``, or ``{"name": NAME}`` for one named tool."""


class ToolSpecError(EmbodiaError):
    """A request's tools or tool choice are malformed (a caller's mistake, not the model's)."""


@dataclass(frozen=True)
class ToolCall:
    """One call a reply makes."""

    id: str
    """Unique within the conversation; the ``tool_call_id`` its result message carries."""
    name: str
    arguments: Any
    """The arguments as parsed JSON (an object when well formed); None when unreadable."""
    arguments_text: str
    """The arguments as the model wrote them."""
    error: str | None = None
    """Why the call could not be read (truncated JSON, no name), None when it could."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def wire(self) -> dict[str, Any]:
        """The call as an assistant message's ``tool_calls`` entry (OpenAI shape)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_text},
        }

    def record(self) -> dict[str, Any]:
        """The call for a run record: its id, name, arguments, and error if any."""
        entry: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.error is not None:
            entry["error"] = self.error
            entry["arguments_text"] = self.arguments_text
        return entry


def tool_name(tool: Mapping[str, Any]) -> str:
    """The function name of an OpenAI ``tools`` entry."""
    return str(tool["function"]["name"])


def check_tools(tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice) -> ToolChoice:
    """Refuse malformed ``tools`` entries or a ``tool_choice`` they cannot meet; returns the
    choice in its plain form (``{"type": "function", "function": {"name": N}}`` becomes
    ``{"name": N}``)."""
    names: list[str] = []
    for i, tool in enumerate(tools):
        from jsonschema import Draft202012Validator  # here: a request without tools needs none
        from jsonschema.exceptions import SchemaError

        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type") != "function"
            or not isinstance(function, Mapping)
        ):
            raise ToolSpecError(f'tool {i} must be {{"type": "function", "function": {{...}}}}')
        name = function.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ToolSpecError(f"tool {i} needs a name of 1-64 letters, digits, _ or -, got {name!r}")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            raise ToolSpecError(f"tool {name}: the parameters schema must describe an object")
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as error:
            raise ToolSpecError(f"tool {name}: invalid parameters schema: {error.message}") from None
        names.append(name)
    if len(set(names)) != len(names):
        raise ToolSpecError(f"tool names must be unique, got {names}")
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        named = function.get("name") if isinstance(function, Mapping) else tool_choice.get("name")
        if not isinstance(named, str):
            raise ToolSpecError(f'a named tool_choice is {{"name": NAME}}, got {dict(tool_choice)!r}')
        if named not in names:
            raise ToolSpecError(f"tool_choice names {named!r}, which is not among the tools {names}")
        return {"name": named}
    if tool_choice not in ("auto", "required", "none"):
        raise ToolSpecError(
            f'tool_choice must be "auto", "required", "none" or {{"name": NAME}}, got {tool_choice!r}'
        )
    if tool_choice == "required" and not names:
        raise ToolSpecError('tool_choice "required" needs at least one tool')
    return tool_choice


def forced_call_schema(tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice) -> dict[str, Any] | None:
    """The JSON schema a reply must match when ``tool_choice`` forces a call (``"required"``
    or a named tool): one call object, ``{"name": N, "arguments": {...}}``, for any tool the
    choice allows, its arguments by that tool's schema; None when the choice forces none.
    Backends that decode under a grammar (:mod:`embodia.policies.constrained`) hold a reply
    to it, so that even a model with random weights returns a valid call."""
    if not forces_call(tool_choice):
        return None
    named = chosen_name(tool_choice)
    options = []
    for tool in tools:
        function = tool["function"]
        if named is not None and function["name"] != named:
            continue
        options.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": function["name"]},
                    "arguments": dict(function.get("parameters", {"type": "object"})),
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return options[0] if len(options) == 1 else {"anyOf": options}


def forces_call(tool_choice: ToolChoice) -> bool:
    """Whether the reply must be a call: ``"required"`` or a named tool."""
    return tool_choice == "required" or chosen_name(tool_choice) is not None


def chosen_name(tool_choice: ToolChoice) -> str | None:
    """The tool a named choice forces; None for the others."""
    return str(tool_choice["name"]) if isinstance(tool_choice, Mapping) else None


_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_tool_calls(text: str, *, id_prefix: str = "call") -> tuple[str, tuple[ToolCall, ...]]:
    """The reply's text without its tool calls, and the calls, in order.

    Reads the Hermes markup, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
    several per reply, a last one cut off by the token budget included (it comes back with
    an error, unless only its closing tag was cut). Calls drafted inside ``<think>`` blocks
    are reasoning, not calls. A reply that is nothing but one call object (no tags, perhaps
    in a code fence) counts as that call, as small models often answer so; ``"parameters"``
    is read as ``"arguments"``, a ``"tool"`` key as ``"name"``, and arguments written as a
    JSON string are decoded.
    """
    visible = _THINK.sub("", text)
    bodies = [m.group(1) for m in _CALL.finditer(visible)]
    if bodies:
        content = _CALL.sub("", visible).replace("</tool_call>", "").strip()
    else:
        bare = visible.strip()
        fenced = _FENCE.match(bare)
        body = fenced.group(1) if fenced else bare
        if not (body.startswith("{") and _looks_like_call(body)):
            return text, ()
        bodies, content = [body], ""
    calls = tuple(_read_call(_without_partial_end(body), f"{id_prefix}_{i}") for i, body in enumerate(bodies))
    return content, calls


_END = "</tool_call>"


def _without_partial_end(body: str) -> str:
    """``body`` without the start of a closing tag the token budget cut (``...}</tool``): the
    call itself is whole."""
    for size in range(len(_END) - 1, 0, -1):
        if body.endswith(_END[:size]):
            return body[:-size]
    return body


def _looks_like_call(body: str) -> bool:
    value = load_bounded(body, strict=False)
    return isinstance(value, dict) and isinstance(value.get("name", value.get("tool")), str)


def _read_call(body: str, call_id: str) -> ToolCall:
    raw = body.strip()
    value = load_bounded(raw, strict=False)
    if isinstance(value, Unreadable):
        name = re.search(r'"(?:name|tool)"\s*:\s*"([^"]*)"', raw)
        return ToolCall(call_id, name.group(1) if name else "", None, raw, error=_json_error(raw))
    if not isinstance(value, dict):
        return ToolCall(call_id, "", None, raw, error=f"a call is a JSON object, got {type(value).__name__}")
    name = value.get("name", value.get("tool"))
    if not isinstance(name, str) or not name:
        return ToolCall(call_id, "", None, raw, error='the call has no "name"')
    return call_from_parts(call_id, name, value.get("arguments", value.get("parameters", {})))


def _json_error(text: str) -> str:
    """Why ``text`` is not a readable call: where its JSON breaks, or that it nests too deep."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"the call is not valid JSON ({error.msg} at character {error.pos})"
    except (ValueError, RecursionError):
        pass
    return "the call is JSON nested too deep, or holds a number too long to read"


def call_from_parts(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A call from its name and arguments, these either parsed JSON or JSON text (as an
    OpenAI server sends them, or a template that double-encodes them)."""
    if isinstance(arguments, str):
        parsed = load_bounded(arguments, strict=False) if arguments.strip() else {}
        if isinstance(parsed, Unreadable):
            error = _json_error(arguments).replace("the call is", "the arguments are")
            return ToolCall(call_id, name, None, arguments, error=error)
        return ToolCall(call_id, name, parsed, arguments)
    return ToolCall(call_id, name, arguments, json.dumps(arguments, ensure_ascii=False))


def call_id_prefix(messages: Sequence[Mapping[str, Any]]) -> str:
    """``call_T`` for a reply that is the conversation's T-th assistant turn (from 0): ids
    ``call_T_0``, ``call_T_1``, ... are unique in the conversation and the same on a replay."""
    return f"call_{sum(m.get('role') == 'assistant' for m in messages)}"
