"""DSR-Bench answers as tool calls: a client reports a structure's state as JSON arguments
rather than as JSON written in prose, so nothing is lost to a reply's formatting.

``report_state(state)`` answers one operation of ``embodia/DSRInteractive-v0`` (the state
right after it), ``final_answer(final_answer)`` an instance of ``embodia/DSR-v0``; each
steps the env with the reply the env's own reader takes, so a tool call and a written reply
are scored alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from embodia.tools.base import Tool, object_schema

ANY_JSON: dict[str, Any] = {}
"""A state may be any JSON value (a list of pages, a dict of key to value, a nested tree)."""


def dsr_answer_tool(interactive: bool, step: Callable[[str], Any]) -> Tool:
    """The answering tool of a DSR env; ``step(reply)`` steps the env with the reply text."""
    key = "state" if interactive else "final_answer"
    description = (
        "Report the structure's state right after the operation asked for."
        if interactive
        else "Give the final answer: the structure's state after every operation."
    )
    return Tool(
        "report_state" if interactive else "final_answer",
        description,
        object_schema({key: ANY_JSON}, [key]),
        lambda **answer: step(json.dumps({key: answer[key]})),
    )
