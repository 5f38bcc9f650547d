"""Native tool calls against real vLLM (CPU build) serving the tiny random-weight chat LM:
the server started with ``--enable-auto-tool-choice --tool-call-parser hermes`` and the
offline engine. Under ``tool_choice="required"`` or a named tool, vLLM's structured outputs
hold the reply to the call's schema, so even random weights return calls that the tools'
own validation accepts; that is what these tests check, reply after reply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tool_specs import DESCRIBE, goto_waypoint
from vllm_suite.checks import prompt_ids
from vllm_suite.server import VLLMServer, skip_reason

from embodia.agents.csmr import CSMRSettings, solve
from embodia.core.chat import ChatPolicy, ContextOverflowError, Message
from embodia.core.tool_calls import ToolChoice
from embodia.perception.scheduler import Evidence
from embodia.policies.openai_compat import OpenAICompatPolicy
from embodia.policies.vllm_offline import VLLMOfflinePolicy
from embodia.tools.base import Tool, ToolBox

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

SERVED_NAME = "tiny-chat-tools"
CONTEXT = 2048
"""Two tools' listing takes about 530 of the tiny tokenizer's tokens, past the 512 the other
server modules use."""
WAYPOINTS = 6
REPLY_TOKENS = 200
"""Random weights fill the JSON whitespace a schema allows: a call needs room to close."""
SAMPLES = 8


def chat(sample: int = 0) -> list[Message]:
    """A decision's prompt; each ``sample`` differs, so a seeded engine samples anew."""
    return [
        {"role": "system", "content": "You explore a house. Call a tool."},
        {"role": "user", "content": f"Waypoints 0-5 are in view, {sample} of them new. Where next?"},
    ]


CHAT = chat()


def explorer_box() -> ToolBox:
    """The two tools' schemas, with functions that answer as the explorer's do."""
    goto = goto_waypoint(WAYPOINTS - 1)["function"]
    describe = DESCRIBE["function"]
    return ToolBox(
        [
            Tool(goto["name"], goto["description"], goto["parameters"], lambda index: {"reached": index}),
            Tool(describe["name"], "Describe the map.", describe["parameters"], lambda: "a corridor"),
        ]
    )


@pytest.fixture(scope="module")
def server(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    log = tmp_path_factory.mktemp("vllm-tools") / "server.log"
    vllm_server = VLLMServer(tiny_chat_model, log, served_model_name=SERVED_NAME, max_model_len=CONTEXT)
    vllm_server.start()
    yield vllm_server
    vllm_server.stop()


@pytest.fixture(scope="module")
def offline(tiny_chat_model: Path) -> Iterator[VLLMOfflinePolicy]:
    policy = VLLMOfflinePolicy(tiny_chat_model, seed=7, max_model_len=CONTEXT)
    yield policy
    policy.close()


def served(server: VLLMServer, seed: int) -> OpenAICompatPolicy:
    return OpenAICompatPolicy(
        server.base_url, SERVED_NAME, timeout_s=120.0, max_retries=1, extra_body={"seed": seed}
    )


def check_forced_calls(policies: list[ChatPolicy], choice: ToolChoice, names: set[str]) -> None:
    """Each policy's reply under ``choice`` (the i-th to the i-th prompt) is one call, to one
    of ``names``, that the tool's own schema check accepts."""
    box = explorer_box()
    for sample, policy in enumerate(policies):
        reply = policy.complete(
            chat(sample), tools=box.schemas(), tool_choice=choice, max_tokens=REPLY_TOKENS, temperature=1.0
        )
        assert len(reply.tool_calls) == 1, reply.text
        (call,) = reply.tool_calls
        assert call.name in names and box.run(call).ok, (call, reply.text)
    assert (box.calls, box.errors) == (len(policies), 0)


def test_required_choice_gets_schema_valid_calls_from_the_server(server: VLLMServer) -> None:
    check_forced_calls(
        [served(server, seed) for seed in range(SAMPLES)], "required", {"goto_waypoint", "describe_map"}
    )


def test_a_named_choice_gets_that_tool_called_validly_by_the_server(server: VLLMServer) -> None:
    check_forced_calls(
        [served(server, seed) for seed in range(SAMPLES)], {"name": "goto_waypoint"}, {"goto_waypoint"}
    )


def test_the_offline_engine_decodes_forced_calls_under_their_schema(offline: VLLMOfflinePolicy) -> None:
    check_forced_calls([offline] * SAMPLES, "required", {"goto_waypoint", "describe_map"})
    check_forced_calls([offline] * (SAMPLES // 2), {"name": "describe_map"}, {"describe_map"})


def test_a_tool_result_goes_back_and_the_conversation_goes_on(server: VLLMServer) -> None:
    box = explorer_box()
    policy = served(server, 3)
    messages: list[Message] = list(CHAT)
    for _ in range(2):
        reply = policy.complete(
            messages, tools=box.schemas(), tool_choice="required", max_tokens=REPLY_TOKENS
        )
        (call,) = reply.tool_calls
        messages.append(reply.assistant_message())
        messages.append(box.run(call).tool_message(call))
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool", "assistant", "tool"]
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]
    assert box.errors == 0


def test_none_and_auto_choices_are_served(server: VLLMServer) -> None:
    box = explorer_box()
    policy = served(server, 5)
    silent = policy.complete(CHAT, tools=box.schemas(), tool_choice="none", max_tokens=16)
    assert silent.tool_calls == () and silent.completion_tokens == 16
    free = policy.complete(CHAT, tools=box.schemas(), tool_choice="auto", max_tokens=16)
    assert all(call.name in box.tools or not call.ok for call in free.tool_calls)


@pytest.mark.parametrize("backend", ["server", "offline"])
def test_prompts_are_counted_with_their_tools(
    backend: str, server: VLLMServer, offline: VLLMOfflinePolicy, tokenizer: Any
) -> None:
    """The tools' listing is most of such a prompt: counts and overflow errors include it."""
    tools = explorer_box().schemas()
    policy = served(server, 0) if backend == "server" else offline
    with_tools = policy.count_tokens(CHAT, tools=tools)
    assert with_tools == len(prompt_ids(tokenizer, CHAT, tools)) > 2 * (policy.count_tokens(CHAT) or 0)
    assert policy.complete(CHAT, tools=tools, max_tokens=8).prompt_tokens == with_tools
    # a listing past the context: the error gives the prompt's size with its tools
    many = [goto_waypoint(WAYPOINTS - 1) for _ in range(12)]
    for i, tool in enumerate(many):
        tool["function"]["name"] = f"goto_waypoint_{i}"
    too_long = policy.count_tokens(CHAT, tools=many)
    assert too_long is not None and too_long > CONTEXT
    with pytest.raises(ContextOverflowError) as caught:
        policy.complete(CHAT, tools=many, max_tokens=8)
    assert caught.value.prompt_tokens == too_long
    # a forced call lists its tools as strict (the server backend): the count follows
    with pytest.raises(ContextOverflowError) as forced:
        policy.complete(CHAT, tools=many, tool_choice="required", max_tokens=8)
    assert forced.value.prompt_tokens is not None and forced.value.prompt_tokens >= too_long


class CountingPerceiver:
    """Answers every visual question with the same words, noting each question."""

    name = "counting"

    def __init__(self) -> None:
        self.questions: list[str] = []

    def look(self, item: Any, question: str, query: Any = None) -> Evidence:
        self.questions.append(question)
        return Evidence(question, "two red cubes", self.name)


def test_a_csmr_reasoner_served_by_vllm_acts_through_schema_valid_calls(server: VLLMServer) -> None:
    """CSMR's reasoner is a text model: served by vLLM under ``tool_choice=required``, every
    turn is a valid ``ask_perception`` or ``answer`` call, and the guards bound the looks."""
    perceiver = CountingPerceiver()
    settings = CSMRSettings(tool_choice="required", reply_tokens=320, max_queries=3, max_tokens=30_000)
    result = solve(object(), "How many red objects are there?", perceiver, served(server, 11), settings)
    assert result.calls and all("error" not in c for c in result.calls), result.calls
    assert {c["name"] for c in result.calls} <= {"ask_perception", "answer"}
    assert perceiver.questions == [e["question"] for e in result.evidence if not e["repeated"]]
    assert result.queries <= settings.max_queries
    assert result.stop in ("answered", "max_queries", "refused")
