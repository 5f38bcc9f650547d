"""Native tool calls: reading the calls a model writes (the malformed ones real models produce
included), checking the tools a request offers, and the chat contract that carries both."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tool_specs import DESCRIBE, goto_waypoint

from embodia.core.chat import Completion, Message, PolicyError
from embodia.core.tool_calls import ToolSpecError, check_tools, parse_tool_calls
from embodia.policies.scripted import ScriptedPolicy

GOTO = goto_waypoint()


def _call(name: str, arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_well_formed_calls_are_read_in_order_and_the_prose_kept() -> None:
    text = "I will look first. " + _call("describe_map", {}) + _call("goto_waypoint", {"index": 2})
    content, calls = parse_tool_calls(text, id_prefix="call_3")
    assert content == "I will look first."
    assert [(c.id, c.name, c.arguments, c.ok) for c in calls] == [
        ("call_3_0", "describe_map", {}, True),
        ("call_3_1", "goto_waypoint", {"index": 2}, True),
    ]
    assert calls[1].wire() == {
        "id": "call_3_1",
        "type": "function",
        "function": {"name": "goto_waypoint", "arguments": '{"index": 2}'},
    }


@pytest.mark.parametrize(
    ("reply", "name", "arguments", "error"),
    [
        # cut off by the token budget: the name is still known, the arguments are not
        (
            '<tool_call>\n{"name": "goto_waypoint", "arguments": {"ind',
            "goto_waypoint",
            None,
            "not valid JSON",
        ),
        # arguments double-encoded as a JSON string, as some templates teach
        (_call("goto_waypoint", '{"index": 4}'), "goto_waypoint", {"index": 4}, None),
        (_call("goto_waypoint", "index=4"), "goto_waypoint", None, "arguments are not valid JSON"),
        # wrong types and extra keys are the schema's business, not the parser's
        (
            _call("goto_waypoint", {"index": "two", "why": "big"}),
            "goto_waypoint",
            {"index": "two", "why": "big"},
            None,
        ),
        (
            '<tool_call>{"name": "describe_map", "arguments": {}, "id": 7}</tool_call>',
            "describe_map",
            {},
            None,
        ),
        ('<tool_call>{"tool": "describe_map", "parameters": {}}</tool_call>', "describe_map", {}, None),
        ("<tool_call>[1, 2]</tool_call>", "", None, "a call is a JSON object, got list"),
        ('<tool_call>{"arguments": {"index": 1}}</tool_call>', "", None, 'no "name"'),
        ("<tool_call></tool_call>", "", None, "not valid JSON"),
        # small models answer with the bare object, or fence it
        ('{"name": "goto_waypoint", "arguments": {"index": 1}}', "goto_waypoint", {"index": 1}, None),
        (
            '```json\n{"name": "goto_waypoint", "arguments": {"index": 1}}\n```',
            "goto_waypoint",
            {"index": 1},
            None,
        ),
    ],
)
def test_malformed_calls_come_back_with_what_was_wrong(
    reply: str, name: str, arguments: object, error: str | None
) -> None:
    _, (call,) = parse_tool_calls(reply)
    assert call.name == name and call.arguments == arguments
    if error is None:
        assert call.ok
    else:
        assert call.error is not None and error in call.error and not call.ok
        assert call.record()["error"] == call.error  # what a run record keeps of it


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Answer: 3",
        '{"choice": 2}',  # JSON, but a choice, not a call
        "use {curly} braces and </tool_call> stray closers",
        "<think>maybe " + _call("goto_waypoint", {"index": 1}) + " no</think>I will not move.",
        "<think>" + _call("goto_waypoint", {"index": 1}),  # unterminated thinking: all of it is
    ],
)
def test_replies_without_calls(reply: str) -> None:
    _, calls = parse_tool_calls(reply)
    assert calls == ()


def test_calls_drafted_while_thinking_are_not_calls() -> None:
    reply = (
        "<think>" + _call("goto_waypoint", {"index": 1}) + "</think>" + _call("goto_waypoint", {"index": 5})
    )
    content, (call,) = parse_tool_calls(reply)
    assert call.arguments == {"index": 5} and content == ""


def test_several_calls_without_closing_tags() -> None:
    reply = (
        '<tool_call>{"name": "describe_map", "arguments": {}}'
        '<tool_call>{"name": "goto_waypoint", "arguments": {"index": 0}}'
    )
    _, calls = parse_tool_calls(reply)
    assert [(c.name, c.arguments) for c in calls] == [("describe_map", {}), ("goto_waypoint", {"index": 0})]


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "look", "arguments": ' + '{"a": ' * 3000 + "1" + "}" * 3001 + "</tool_call>",
        '<tool_call>{"name": "look", "arguments": "' + "[" * 3000 + '"}</tool_call>',
        '<tool_call>{"name": "look", "arguments": {"n": ' + "9" * 5000 + "}}</tool_call>",
    ],
)
def test_calls_nested_too_deep_or_too_long_are_errors_not_crashes(reply: str) -> None:
    """The JSON decoder raises RecursionError past ~1000 levels and ValueError on 4,300-digit
    numbers; a model repeating itself writes either."""
    _, (call,) = parse_tool_calls(reply)
    assert call.name == "look" and not call.ok and call.arguments is None


def test_control_characters_inside_strings_are_read() -> None:
    """xgrammar's JSON strings admit raw control characters, which strict JSON refuses."""
    _, (call,) = parse_tool_calls(
        '<tool_call>{"name": "answer", "arguments": {"answer": "a\x1fb\tc"}}</tool_call>'
    )
    assert call.ok and call.arguments == {"answer": "a\x1fb\tc"}


@pytest.mark.parametrize("cut", ["<", "</tool", "</tool_call"])
def test_a_call_whose_closing_tag_the_budget_cut_is_whole(cut: str) -> None:
    """vLLM under a schema writes JSON whitespace (``\\r``) a random model then fills the
    budget with, so a reply may end in the middle of ``</tool_call>``."""
    reply = '<tool_call>\n{"name": "goto_waypoint", "arguments": {"index"\r \r:\r 5}}\n' + cut
    content, (call,) = parse_tool_calls(reply)
    assert (call.arguments, call.ok, content) == ({"index": 5}, True, "")


@pytest.mark.parametrize(
    ("tools", "choice", "message"),
    [
        ([{"name": "x"}], "auto", 'must be {"type": "function"'),
        ([{"type": "function", "function": {"name": "bad name"}}], "auto", "needs a name"),
        (
            [{"type": "function", "function": {"name": "x", "parameters": {"type": "array"}}}],
            "auto",
            "object",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {"name": "x", "parameters": {"type": "object", "properties": 3}},
                }
            ],
            "auto",
            "invalid parameters schema",
        ),
        ([GOTO, GOTO], "auto", "unique"),
        ([GOTO], {"name": "describe_map"}, "not among the tools"),
        ([GOTO], "sometimes", "tool_choice must be"),
        ([], "required", "needs at least one tool"),
    ],
)
def test_bad_tools_are_refused_with_the_reason(tools: list, choice: object, message: str) -> None:
    with pytest.raises(ToolSpecError, match=message):
        check_tools(tools, choice)  # type: ignore[arg-type]


def test_a_named_choice_in_the_openai_shape_is_taken() -> None:
    named = {"type": "function", "function": {"name": "describe_map"}}
    assert check_tools([GOTO, DESCRIBE], named) == {"name": "describe_map"}
    assert check_tools([], "auto") == "auto"


def test_a_policy_returns_calls_beside_its_text_and_the_conversation_carries_results() -> None:
    reply = "Looking. " + _call("describe_map", {})
    policy = ScriptedPolicy([reply, _call("goto_waypoint", {"index": 1}), reply])
    messages: list[Message] = [{"role": "user", "content": "explore"}]
    first = policy.complete(messages, tools=[GOTO, DESCRIBE])
    assert first.text == "Looking." and [c.id for c in first.tool_calls] == ["call_0_0"]
    messages.append(first.assistant_message())
    messages.append({"role": "tool", "content": '{"coverage_percent": 12.5}', "tool_call_id": "call_0_0"})
    second = policy.complete(messages, tools=[GOTO, DESCRIBE], tool_choice="required")
    assert [(c.id, c.arguments) for c in second.tool_calls] == [("call_1_0", {"index": 1})]  # unique ids
    assert policy.requests[1].messages[2]["tool_call_id"] == "call_0_0"
    # told not to call, the markup stays text
    untouched = policy.complete([{"role": "user", "content": "hi"}], tools=[DESCRIBE], tool_choice="none")
    assert untouched.tool_calls == () and untouched.text == reply
    # without tools, nothing is read as a call
    assert ScriptedPolicy([reply]).complete([{"role": "user", "content": "hi"}]).tool_calls == ()


def test_a_server_side_parse_is_played_by_scripted_tool_calls() -> None:
    policy = ScriptedPolicy(
        [{"text": "", "tool_calls": [{"name": "goto_waypoint", "arguments": '{"index": 3'}]}]
    )
    (call,) = policy.complete([{"role": "user", "content": "go"}], tools=[GOTO]).tool_calls
    assert call.name == "goto_waypoint" and call.arguments is None and "not valid JSON" in (call.error or "")
    with pytest.raises(PolicyError, match="tool_calls must be a list"):
        ScriptedPolicy([{"text": "", "tool_calls": [{"arguments": {}}]}])


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [{"role": "tool", "content": "3", "tool_call_id": "call_0_0"}],
            "which no earlier assistant message called",
        ),
        ([{"role": "user", "content": "x", "tool_calls": []}], "only an assistant message"),
        ([{"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}], "a tool call is"),
    ],
)
def test_malformed_tool_conversations_are_refused(messages: list, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        ScriptedPolicy(["x"]).complete(messages)


def test_bad_tools_reach_the_caller_as_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="not among the tools"):
        ScriptedPolicy(["x"]).complete(
            [{"role": "user", "content": "x"}], tools=[GOTO], tool_choice={"name": "fly"}
        )


def test_a_completion_without_calls_is_a_plain_assistant_message() -> None:
    completion = Completion("hello", "stop", 1, 1, 0.0)
    assert completion.assistant_message() == {"role": "assistant", "content": "hello"}


def test_a_forced_call_missing_from_the_reply_is_an_unreadable_call() -> None:
    policy = ScriptedPolicy(
        ["I would rather describe the map.", '{"name": "goto_waypoint", "arguments": {"ind']
    )
    ask: list[Message] = [{"role": "user", "content": "go"}]
    (prose,) = policy.complete(ask, tools=[GOTO, DESCRIBE], tool_choice="required").tool_calls
    assert prose.name == "" and prose.arguments_text == "I would rather describe the map." and not prose.ok
    (cut,) = policy.complete(ask, tools=[GOTO, DESCRIBE], tool_choice={"name": "goto_waypoint"}).tool_calls
    assert cut.name == "goto_waypoint" and cut.error == "the reply holds no complete call"


# What small models write around and inside calls: tags opened and not closed, truncated
# objects, wrong types, extra keys, prose, reasoning blocks, fences.
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "```json\n",
    "```",
    '{"name": "goto_waypoint", "arguments": {"index": 2}}',
    '{"name": "goto_waypoint", "arguments": {"index": "two", "extra": [1, {"a": null}]}}',
    '{"name": "describe_map", "arguments": "{}"}',
    '{"tool": "look", "parameters": {"direction_deg": 90',
    '{"name": 7, "arguments": []}',
    '"arguments": {"index": ',
    "[[[[",
    "}}}",
    "I will go to waypoint 3.",
    "\n",
    '\\"',
    "9" * 40,
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=24))
def test_no_reply_makes_the_reader_raise_and_every_opened_call_is_counted(parts: list[str]) -> None:
    reply = "".join(parts)
    content, calls = parse_tool_calls(reply, id_prefix="call_1")
    visible = re.sub(r"<think>.*?(?:</think>|\Z)", "", reply, flags=re.DOTALL)
    if "<tool_call>" in visible:  # each opened call comes back, read or with its error
        assert len(calls) == visible.count("<tool_call>")
    for i, call in enumerate(calls):
        assert call.id == f"call_1_{i}"
        assert call.ok == (call.error is None)
        assert call.ok or call.arguments is None
        json.dumps(call.record())  # a record can always be written
    assert isinstance(content, str)
