"""Prompts for DSR-Bench instances, in the public benchmark's layout.

``[description] + [task rules] + [exemplars] + Q + [mode suffix] + "Answer the question in
{tokens} tokens." + "A: "``. The description is the algorithmic spelling-out of the operation
(``full``) or just the structure's name (``name``). Exemplars (CoT, k-shot) are instances of
the same operation drawn from seeds no evaluated instance uses, worked out by the reference
implementation, so every operation has them without hand-written text that could drift from
the truth.
"""

from __future__ import annotations

import json
import random
from typing import Any, Literal

from embodia.core.chat import Message
from embodia.envs.dsr import realistic
from embodia.envs.dsr.core import DSRError, Operation, Problem, canonical, get_operation
from embodia.envs.dsr.suites import Instance

PROMPT_MODES = ("stepwise", "0-CoT", "CoT", "k-shot", "none", "CodeOnly", "CodeEnforce", "CodeMaybe")
CODE_PROMPT_MODES = ("CodeOnly", "CodeEnforce", "CodeMaybe")
Description = Literal["full", "name"]
DESCRIPTIONS = ("full", "name")
DEFAULT_TOKENS = 1500
EXEMPLAR_SIZE = 5
DEFAULT_SHOTS = 3


def check_mode(mode: str, description: str = "full") -> None:
    if mode not in PROMPT_MODES:
        raise DSRError(f"unknown prompt mode {mode!r}: expected one of {', '.join(PROMPT_MODES)}")
    if description not in DESCRIPTIONS:
        raise DSRError(f"unknown description {description!r}: expected full or name")


def instance_mode(instance: Instance, mode: str) -> str:
    """The code suite fixes its own mode per instance; every other suite uses the run's."""
    return str(instance.variant.get("mode", mode))


def final_answer_schema(instance: Instance) -> dict[str, Any]:
    """JSON schema of ``final_answer``: the operation's, or a narrative's (names instead of numbers)."""
    if instance.suite == "realistic":
        return realistic.NARRATIVE_SCHEMAS[instance.operation]
    return get_operation(instance.operation).answer_schema


def answer_schema(instance: Instance, mode: str) -> dict[str, Any]:
    """JSON schema of the whole reply object a mode asks for (usable for guided decoding)."""
    final = final_answer_schema(instance)
    properties: dict[str, Any] = {"final_answer": final}
    required = ["final_answer"]
    if mode == "stepwise":
        step = {
            "type": "object",
            "properties": {"explanation": {"type": "string"}, "output": {"type": "string"}},
            "required": ["explanation", "output"],
        }
        properties = {"steps": {"type": "array", "items": step}, **properties}
        required = ["steps", "final_answer"]
    elif mode == "CodeEnforce":
        properties = {"code": {"type": "string"}, **properties}
        required = ["code", "final_answer"]
    return {"type": "object", "properties": properties, "required": required}


def _format_instructions(instance: Instance, mode: str) -> str:
    schema = json.dumps(final_answer_schema(instance), separators=(",", ":"))
    if mode == "CodeOnly":
        return (
            "Write a Python function `solution()` that takes no arguments and returns the final answer "
            f"(a value matching the JSON schema {schema}). Reply with the code only, in one ```python block; "
            "it is run by an interpreter, with no imports other than the standard library's pure modules."
        )
    if mode == "stepwise":
        shape = '{"steps": [{"explanation": "...", "output": "<state after it>"}, ...], "final_answer": ...}'
        return f"Reply with one JSON object {shape}, where final_answer matches the JSON schema {schema}."
    if mode == "CodeEnforce":
        return (
            "Write Python code that computes the answer, then simulate its execution step by step yourself. "
            'End with one JSON object {"code": "<your code>", "final_answer": ...}, '
            f"where final_answer matches the JSON schema {schema}."
        )
    return (
        f'End your reply with one JSON object {{"final_answer": ...}}, where final_answer matches {schema}.'
    )


_SUFFIX = {
    "0-CoT": "Let's think step by step.",
    "CoT": "Let's think step by step, as in the examples.",
    "none": "No additional text needed.",
    "CodeMaybe": "You may write and simulate code if it helps, but it is not required.",
}


def _exemplar_problems(instance: Instance, count: int) -> list[Problem]:
    operation = get_operation(instance.operation)
    variant = {k: v for k, v in instance.variant.items() if k != "mode"}
    problems = []
    for index in range(count):
        rng = random.Random(f"exemplar:{instance.suite}:{operation.key}:{index}")
        if instance.suite == "realistic":
            problems.append(realistic.NARRATIVES[operation.key](rng, EXEMPLAR_SIZE, variant))
        else:
            problems.append(operation.generate(rng, EXEMPLAR_SIZE, variant))
    return problems


def _worked(problem: Problem) -> str:
    lines = [f"After {step.label}: {canonical(step.state)}" for step in problem.steps]
    if not lines:
        lines = ["Applying the rules above to the input gives the answer."]
    return "\n".join(lines)


def exemplars(instance: Instance, mode: str, shots: int = DEFAULT_SHOTS) -> str:
    if mode not in ("CoT", "k-shot"):
        return ""
    blocks = []
    for number, problem in enumerate(_exemplar_problems(instance, 1 if mode == "CoT" else shots), 1):
        answer = json.dumps({"final_answer": problem.truth}, separators=(", ", ": "))
        reasoning = f"{_worked(problem)}\n" if mode == "CoT" else ""
        blocks.append(f"Example {number}:\n{problem.question}\nA: {reasoning}{answer}")
    return "\n\n".join(blocks)


def _description(operation: Operation, description: str) -> str:
    if description == "name":
        return f"You are working with a {operation.display}."
    return operation.description


def render(
    instance: Instance,
    mode: str = "stepwise",
    *,
    description: str = "full",
    tokens: int = DEFAULT_TOKENS,
    shots: int = DEFAULT_SHOTS,
) -> str:
    """The prompt text for ``instance`` (the code suite's own mode wins over ``mode``)."""
    check_mode(mode, description)
    mode = instance_mode(instance, mode)
    operation = get_operation(instance.operation)
    parts = [_description(operation, description), operation.rules]
    if instance.rules:
        parts.append(instance.rules)
    examples = exemplars(instance, mode, shots)
    if examples:
        parts.append(examples)
    parts.append(instance.question)
    if mode in _SUFFIX:
        parts.append(_SUFFIX[mode])
    parts.append(_format_instructions(instance, mode))
    parts.append(f"Answer the question in {tokens} tokens.")
    return "\n".join(parts) + "\nA: "


def messages(instance: Instance, mode: str = "stepwise", **options: Any) -> list[Message]:
    return [{"role": "user", "content": render(instance, mode, **options)}]
