"""The tools of a CSMR reasoner: ask the perception module one visual question (the
scheduler's guards apply to it, in the agent's perceive node), or give the final answer.

A call to either does not act here: it returns the action it stands for, which the CSMR
graph carries out (``agents/csmr.py``), so a native call and a JSON action written in the
reply take one path."""

from __future__ import annotations

from typing import Any

from embodia.tools.base import Tool, ToolBox, object_schema

REGION = {
    "type": "array",
    "description": "Look closer: [x0, y0, x1, y1] in 0-1 image coordinates.",
    "items": {"type": "number", "minimum": 0, "maximum": 1},
    "minItems": 4,
    "maxItems": 4,
}


def _ask(
    question: str, region: list[float] | None = None, query: dict[str, Any] | None = None
) -> dict[str, Any]:
    if not question.strip():
        raise ValueError("the question is blank")
    structured = dict(query or {})
    if region is not None:
        structured["region"] = region
    return {"action": "query", "question": question.strip(), "query": structured or None}


def _answer(answer: str) -> dict[str, Any]:
    return {"action": "answer", "answer": answer}


def csmr_tools() -> ToolBox:
    """``ask_perception(question, region?, query?)`` and ``answer(answer)``; each call's value
    is the CSMR action it stands for."""
    return ToolBox(
        [
            Tool(
                "ask_perception",
                "Ask the perception module, which sees the image, one short visual question.",
                object_schema(
                    {
                        "question": {"type": "string", "minLength": 1, "maxLength": 200},
                        "region": REGION,
                        "query": {
                            "type": "object",
                            "description": "Optional structured form an exact perception module reads.",
                        },
                    },
                    ["question"],
                ),
                _ask,
            ),
            Tool(
                "answer",
                "Give the final answer to the question, once the evidence is enough.",
                object_schema({"answer": {"type": "string", "minLength": 1, "maxLength": 100}}, ["answer"]),
                _answer,
            ),
        ]
    )
