"""The tools of a live-stream commentator: say a line now, or stay silent this second. A
tool-calling VLM offered both, with a choice that forces one, decides and speaks in one
reply (``agents/proactive.py``, ``ToolCommentator``)."""

from __future__ import annotations

from typing import Any

from embodia.tools.base import Tool, ToolBox, object_schema

MAX_LINE_CHARS = 120
"""Longest line a ``speak`` call may carry: a commentator's line is a few words."""


def _speak(text: str) -> dict[str, Any]:
    if not text.strip():
        raise ValueError("the line is blank: call stay_silent to say nothing")
    return {"said": " ".join(text.split())}


def _stay_silent() -> dict[str, Any]:
    return {"said": ""}


def stream_tools() -> ToolBox:
    """``speak(text)`` and ``stay_silent()``; each call's value says what was said."""
    return ToolBox(
        [
            Tool(
                "speak",
                "Say one short line to the viewers now.",
                object_schema(
                    {"text": {"type": "string", "minLength": 1, "maxLength": MAX_LINE_CHARS}}, ["text"]
                ),
                _speak,
            ),
            Tool(
                "stay_silent",
                "Say nothing this second.",
                object_schema({}),
                _stay_silent,
            ),
        ]
    )
