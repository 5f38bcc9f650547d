"""Tools the tool-calling tests share: ``add`` as an embodia Tool, and the explorer's tools as
OpenAI ``tools`` entries."""

from __future__ import annotations

from typing import Any

from embodia.tools.base import Tool

ADD = Tool(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "maximum": 10}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    lambda a, b: a + b,
)

DESCRIBE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "describe_map",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}


def goto_waypoint(maximum: int | None = None) -> dict[str, Any]:
    """``goto_waypoint(index)`` as a ``tools`` entry. ``maximum`` bounds the index and closes
    the arguments to other keys: with random weights, an unbounded integer or an open object
    runs on until the token budget."""
    index: dict[str, Any] = {"type": "integer", "minimum": 0}
    parameters: dict[str, Any] = {"type": "object", "properties": {"index": index}, "required": ["index"]}
    if maximum is not None:
        index["maximum"] = maximum
        parameters["additionalProperties"] = False
    function = {"name": "goto_waypoint", "description": "Walk to a waypoint.", "parameters": parameters}
    return {"type": "function", "function": function}
