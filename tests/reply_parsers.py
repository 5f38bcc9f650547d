"""Every parser of model replies, by name, each taking the reply alone: the entry points that
tests/core/test_parsing_adversarial.py checks on hostile replies and benchmarks/parsing.py times."""

from __future__ import annotations

from collections.abc import Callable

from embodia.agents.csmr import _action
from embodia.core.parsing import extract_json, parse_choice, parse_label, strip_thinking
from embodia.core.tool_calls import parse_tool_calls
from embodia.envs.dsr import suites
from embodia.envs.dsr.env import _state_from_reply
from embodia.envs.dsr.sandbox import extract_code
from embodia.envs.dsr.scoring import parse_reply, score_reply
from embodia.envs.puzzles import TASKS, find_answer, make_task


def reply_parsers() -> dict[str, Callable[[str], object]]:
    """Name -> parser; those that need more than the reply get a fixed DSR or puzzle instance."""
    dsr_instance = suites.make_instance(suites.groups("main")[0], "short", 0)
    parsers: dict[str, Callable[[str], object]] = {
        "strip_thinking": strip_thinking,
        "extract_json": extract_json,
        "parse_choice": lambda reply: parse_choice(reply, 6),
        "parse_label": lambda reply: parse_label(reply, ["SPEAK", "SILENT"]),
        "dsr.parse_reply": parse_reply,
        "dsr.score_reply": lambda reply: score_reply(reply, dsr_instance),
        "dsr.env_state": _state_from_reply,
        "csmr.action": _action,
        "tool_calls.parse_tool_calls": parse_tool_calls,
        "dsr.extract_code": extract_code,
        "puzzles.find_answer": lambda reply: find_answer(reply, ("answer", "path")),
    }
    for name in sorted(TASKS):
        task = make_task(name)
        instance = task.generate(0, "easy")
        parsers[f"puzzles.{name}"] = lambda reply, task=task, instance=instance: task.parse(reply, instance)
    return parsers
