"""Tool calls from model output: validation errors go back to the model and are counted."""

from __future__ import annotations

import gymnasium
import pytest
from tool_specs import ADD

import embodia.envs  # noqa: F401
from embodia.core.parsing import ParseFailure
from embodia.policies.scripted import ScriptedPolicy
from embodia.tools.base import ToolBox
from embodia.tools.exploration import exploration_tools


def _box() -> ToolBox:
    return ToolBox([ADD])


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"tool": "add", "arguments": {"a": 1}}', "'b' is a required property"),
        ('{"tool": "add", "arguments": {"a": "one", "b": 2}}', "invalid a: 'one' is not of type 'integer'"),
        (
            '{"tool": "add", "arguments": {"a": 1, "b": 99}}',
            "invalid b: 99 is greater than the maximum of 10",
        ),
        ('{"tool": "add", "arguments": {"a": 1, "b": 2, "c": 3}}', "Additional properties are not allowed"),
        ('{"tool": "mul", "arguments": {}}', "unknown tool 'mul'"),
        ("I would add them.", "no tool call found"),
        ('{"tool": "add", "arguments": {"a": 1, "b": 2', "no tool call found"),
    ],
)
def test_bad_calls_become_counted_messages(text: str, error: str) -> None:
    box = _box()
    result = box.call_from_text(text)
    assert not result.ok and error in (result.error or "")
    assert box.errors == 1 and box.calls == 1
    assert "failed" in result.message()


def test_a_good_call_in_prose_and_fences_runs() -> None:
    box = _box()
    result = box.call_from_text(
        '<think>sum?</think> Sure:\n```json\n{"tool": "add", "arguments": {"a": 2, "b": 3}}\n```'
    )
    assert result.ok and result.value == 5 and box.errors == 0
    assert box.schemas()[0]["function"]["parameters"]["required"] == ["a", "b"]


def test_native_calls_run_and_answer_with_a_tool_message() -> None:
    box = _box()
    policy = ScriptedPolicy(
        [
            '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
            '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 30}}</tool_call>'
            '<tool_call>{"name": "add", "arguments": {"a": 2, "b"</tool_call>'
        ]
    )
    completion = policy.complete([{"role": "user", "content": "add"}], tools=box.schemas())
    results = [box.run(call) for call in completion.tool_calls]
    assert [r.ok for r in results] == [True, False, False] and results[0].value == 5
    assert box.calls == 3 and box.errors == 2  # a schema error and an unreadable call, counted
    good, bad, cut = (r.tool_message(c) for r, c in zip(results, completion.tool_calls, strict=True))
    assert good == {"role": "tool", "content": "5", "tool_call_id": "call_0_0"}
    assert bad["content"] == "error: invalid b: 30 is greater than the maximum of 10"
    assert cut["tool_call_id"] == "call_0_2" and "not valid JSON" in cut["content"]
    # the conversation goes on with the calls and their results
    follow = [{"role": "user", "content": "add"}, completion.assistant_message(), good, bad, cut]
    ScriptedPolicy(["done"]).complete(follow, tools=box.schemas())  # type: ignore[arg-type]


def test_the_prompt_lists_each_tool_with_its_arguments() -> None:
    box = _box()
    assert box.prompt() == "- add(a: integer, b: integer): Add two integers."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"tool": "add", "arguments": {"a": 1, "b": 2}}', ("add", {"a": 1, "b": 2})),
        ('<think>{"tool": "no"}</think> {"tool": "add"}', ("add", {})),  # thinking is not a call
        (
            '{"tool": "add", "arguments": "{\\"a\\": 1}"}',
            ("add", '{"a": 1}'),
        ),  # string arguments, as the API sends
        (
            '{"name": "add", "arguments": {}}',
            'a tool call is a JSON object {"tool": NAME, "arguments": {...}}',
        ),
        ("[1, 2]", 'a tool call is a JSON object {"tool": NAME, "arguments": {...}}'),
        ("add 1 and 2", "no tool call found"),
    ],
)
def test_parse_call(text: str, expected: object) -> None:
    parsed = ToolBox.parse_call(text)
    if isinstance(expected, tuple):
        assert parsed == expected
    else:
        assert isinstance(parsed, ParseFailure) and str(expected) in parsed.reason


def test_exploration_tools_drive_the_waypoint_env() -> None:
    env = gymnasium.make(
        "embodia/ActiveMappingWaypoint-v0", panorama_height=48, panorama_width=96, max_steps=100
    )
    env.reset(seed=0, options={"scene": "procedural:seed=1,rooms=3"})
    box = exploration_tools(env.unwrapped)
    before = box.call("describe_map", "{}")
    assert before.ok and before.value["steps_left"] == 100
    moved = box.call("goto_waypoint", {"index": 0})
    assert moved.ok and moved.value["steps_left"] < 100
    wrong = box.call("goto_waypoint", {"index": 99})
    assert not wrong.ok and "not on the image" in (wrong.error or "")
    assert box.errors == 1
    env.close()
