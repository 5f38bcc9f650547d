"""embodia policies and tools under LangGraph's prebuilt ReAct agent and ToolNode."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.prebuilt import create_react_agent
from tool_specs import ADD

from embodia.agents.langchain_chat import EmbodiaChatModel, langchain_tool
from embodia.policies.hf import HFPolicy
from embodia.policies.scripted import ScriptedPolicy
from embodia.tools.base import ToolBox


def _call(arguments: str) -> str:
    return '<tool_call>{"name": "add", "arguments": ' + arguments + "}</tool_call>"


def test_a_react_agent_runs_over_an_embodia_policy_and_tool() -> None:
    box = ToolBox([ADD])
    policy = ScriptedPolicy(
        [
            _call('{"a": 2, "b": 30}'),  # breaks the schema: the error is the tool's answer
            _call('{"a": 2, "b": 3}'),
            "The sum is 5.",
        ]
    )
    agent = create_react_agent(EmbodiaChatModel(policy=policy), [langchain_tool(ADD, box)])
    result = agent.invoke({"messages": [SystemMessage("You add."), HumanMessage("What is 2 + 3?")]})
    kinds = [type(m).__name__ for m in result["messages"]]
    assert kinds == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    first_tool, second_tool = (m for m in result["messages"] if isinstance(m, ToolMessage))
    assert first_tool.content == "error: invalid b: 30 is greater than the maximum of 10"
    assert second_tool.content == "5" and result["messages"][-1].content == "The sum is 5."
    assert (box.calls, box.errors) == (2, 1)
    # the policy saw the tools offered, and each call answered by its id, as the OpenAI format has it
    last = policy.requests[-1].messages
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert last[2]["tool_calls"][0]["id"] == last[3]["tool_call_id"] == "call_0_0"
    assert last[4]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}


def test_a_call_that_cannot_be_read_is_an_invalid_tool_call() -> None:
    model = EmbodiaChatModel(policy=ScriptedPolicy(['<tool_call>{"name": "add", "arguments": {"a": 2']))
    reply = model.bind_tools([langchain_tool(ADD)], tool_choice="any").invoke("add 2 and 3")
    assert isinstance(reply, AIMessage) and reply.tool_calls == []
    (invalid,) = reply.invalid_tool_calls
    assert (
        invalid["name"] == "add"
        and invalid["id"] == "call_0_0"
        and "not valid JSON" in (invalid["error"] or "")
    )


def test_tool_choices_map_to_embodia_and_reach_the_policy() -> None:
    policy = ScriptedPolicy(["ok"], loop=True)
    model = EmbodiaChatModel(policy=policy)
    tools = [langchain_tool(ADD)]
    model.bind_tools(tools, tool_choice="add").invoke("x")
    model.bind_tools(tools, tool_choice=True).invoke("x")
    model.bind_tools(tools).invoke("x")
    assert [r.messages[0]["content"] for r in policy.requests] == ["x", "x", "x"]
    with pytest.raises(Exception, match="not among the tools"):
        model.bind_tools(tools, tool_choice="multiply").invoke("x")


def test_the_react_agent_runs_over_the_tiny_transformers_model(tiny_chat_lm_dir: Path) -> None:
    # Random weights: whatever it writes, the agent must end with a well-formed conversation.
    agent = create_react_agent(
        EmbodiaChatModel(policy=HFPolicy(tiny_chat_lm_dir), max_tokens=12), [langchain_tool(ADD)]
    )
    result = agent.invoke({"messages": [HumanMessage("What is 2 + 3?")]}, {"recursion_limit": 6})
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and last.usage_metadata is not None
    assert last.usage_metadata["output_tokens"] <= 12
