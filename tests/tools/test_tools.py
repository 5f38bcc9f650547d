"""Tool calls from model output: validation errors go back to the model and are counted."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from tool_specs import ADD

import embodia.envs  # noqa: F401
from embodia.core.tool_calls import parse_tool_calls
from embodia.policies.scripted import ScriptedPolicy
from embodia.tools.base import Tool, ToolBox, ToolImage
from embodia.tools.exploration import exploration_tools

PIXEL = np.zeros((1, 1, 3), dtype=np.uint8)


def _box() -> ToolBox:
    return ToolBox([ADD])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"a": 1}, "'b' is a required property"),
        ({"a": "one", "b": 2}, "invalid a: 'one' is not of type 'integer'"),
        ({"a": 1, "b": 99}, "invalid b: 99 is greater than the maximum of 10"),
        ({"a": 1, "b": 2, "c": 3}, "Additional properties are not allowed"),
        ([1, 2], "arguments must be a JSON object, got list"),
        ('{"a": 1, "b": 2', "arguments are not JSON"),
    ],
)
def test_bad_calls_become_counted_messages(arguments: object, error: str) -> None:
    box = _box()
    result = box.call("add", arguments)
    assert not result.ok and error in (result.error or "")
    assert box.errors == 1 and box.calls == 1
    assert "failed" in result.message()


def test_an_unknown_tool_is_named_with_those_there_are() -> None:
    box = _box()
    result = box.call("mul", {})
    assert not result.ok and result.error == "unknown tool 'mul': available are add"


def test_a_replys_calls_are_answered_until_one_settles_the_decision() -> None:
    """``answer`` runs the calls in order; the first that settles ends the reply (later calls
    are not run), a failing one is answered with its error, an image goes to the model."""
    box = ToolBox(
        [ADD, Tool("show", "Show a picture.", {"type": "object"}, lambda: ToolImage(PIXEL, "a dot"))]
    )
    _, calls = parse_tool_calls(
        '<tool_call>{"name": "show", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 20}}</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"a": 5, "b": 5}}</tool_call>'
    )
    answer = box.answer(calls, lambda result: result.value if result.tool == "add" else None)
    assert answer.value == 3 and answer.failure is None  # settled: the bad call is the model's past
    assert [m["tool_call_id"] for m in answer.messages] == ["call_0", "call_1", "call_2"]
    assert answer.messages[0]["content"] == '"a dot"' and len(answer.images) == 1
    assert [r.get("result") for r in answer.records] == ["a dot", None, 3]
    assert "maximum of 10" in answer.records[1]["error"] and (box.calls, box.errors) == (3, 1)
    unsettled = box.answer(calls[:2], lambda result: None)
    assert unsettled.value is None and unsettled.failure is not None and "maximum" in unsettled.failure


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
    # the schema bounds the index by the waypoints drawn when the tools were made
    last = box.tools["goto_waypoint"].parameters["properties"]["index"]["maximum"]
    assert last == len(env.unwrapped.candidates) - 1 or moved.value["done"]
    wrong = box.call("goto_waypoint", {"index": 99})
    assert not wrong.ok and f"greater than the maximum of {last}" in (wrong.error or "")
    looked = box.call("look", {"direction_deg": -90})
    assert looked.ok and isinstance(looked.value, ToolImage) and looked.value.image.shape == (128, 128, 3)
    assert (
        looked.value.caption.startswith("the next image is the view -90 degrees clockwise")
        and "wall" in looked.value.caption
    )
    assert not box.call("look", {"direction_deg": 270}).ok
    assert box.call("recall", {"category": "bed"}).value == {
        "category": "bed",
        "regions": [],
    }  # no regions given
    assert "is not one of" in (box.call("recall", {"category": "dragon"}).error or "")
    assert box.errors == 3
    env.close()
