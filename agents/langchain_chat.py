"""embodia policies and tools in LangChain's shapes, for LangGraph's prebuilt agents.

:class:`EmbodiaChatModel` presents any embodia :class:`~embodia.core.chat.Policy` as a
LangChain chat model: ``bind_tools`` works, so ``langgraph.prebuilt.create_react_agent``
and ``ToolNode`` run over it. Messages go to the policy in the OpenAI chat shape embodia
uses (an ``AIMessage``'s calls as ``tool_calls``, a ``ToolMessage`` as ``role: tool``), and
the reply's calls come back as the ``AIMessage``'s ``tool_calls``, or its
``invalid_tool_calls`` where the model's call could not be read. :func:`langchain_tool`
turns an embodia :class:`~embodia.tools.base.Tool` into a LangChain tool whose calls go
through the tool's :class:`~embodia.tools.base.ToolBox`, so schema errors are counted and
reach the model as the tool's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from embodia.core.chat import Message, Policy, PolicyError
from embodia.core.tool_calls import ToolChoice
from embodia.tools.base import Tool, ToolBox


class EmbodiaChatModel(BaseChatModel):
    """A LangChain chat model backed by an embodia policy."""

    policy: Any
    """The embodia :class:`~embodia.core.chat.Policy` that answers."""
    max_tokens: int = 256
    temperature: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "embodia"

    def bind_tools(
        self,
        tools: Sequence[Mapping[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | bool | Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """This model with ``tools`` offered on every call (LangChain's tool choices:
        ``"auto"``, ``"any"`` or ``True`` for a required call, ``"none"``, or a tool's name)."""
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        bound: dict[str, Any] = {"tools": schemas, **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = _tool_choice(tool_choice)
        return self.bind(**bound)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        policy: Policy = self.policy
        completion = policy.complete(
            [_embodia_message(m) for m in messages],
            max_tokens=kwargs.get("max_tokens", self.max_tokens),
            temperature=kwargs.get("temperature", self.temperature),
            stop=stop or (),
            tools=kwargs.get("tools", ()),
            tool_choice=kwargs.get("tool_choice", "auto"),
        )
        good = [call for call in completion.tool_calls if call.ok and isinstance(call.arguments, dict)]
        bad = [call for call in completion.tool_calls if call not in good]
        message = AIMessage(
            content=completion.text,
            tool_calls=[tool_call(name=c.name, args=c.arguments, id=c.id) for c in good],
            invalid_tool_calls=[
                invalid_tool_call(
                    name=c.name,
                    args=c.arguments_text,
                    id=c.id,
                    error=c.error or f"arguments must be a JSON object, got {type(c.arguments).__name__}",
                )
                for c in bad
            ],
            response_metadata={"finish_reason": completion.finish_reason, "model": completion.model},
            usage_metadata={
                "input_tokens": completion.prompt_tokens,
                "output_tokens": completion.completion_tokens,
                "total_tokens": completion.prompt_tokens + completion.completion_tokens,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def _tool_choice(choice: str | bool | Mapping[str, Any]) -> ToolChoice:
    """LangChain's tool choice as embodia's."""
    if choice is True or choice in ("any", "required"):
        return "required"
    if choice in ("auto", "none"):
        return str(choice)  # type: ignore[return-value]
    if isinstance(choice, str):
        return {"name": choice}
    if isinstance(choice, Mapping):
        return dict(choice)
    raise PolicyError(f"unsupported tool_choice {choice!r}")


def _text(content: str | list[Any]) -> str:
    """A LangChain message's content as text (its text parts, in order)."""
    if isinstance(content, str):
        return content
    parts = [p if isinstance(p, str) else p.get("text", "") for p in content if isinstance(p, str | dict)]
    return "".join(parts)


def _embodia_message(message: BaseMessage) -> Message:
    """One LangChain message in embodia's (OpenAI) chat shape."""
    content = _text(message.content)
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": content, "tool_call_id": message.tool_call_id}
    if isinstance(message, AIMessage):
        result: Message = {"role": "assistant", "content": content}
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for c in message.tool_calls
        ] + [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
            for c in message.invalid_tool_calls
        ]
        if calls:
            result["tool_calls"] = calls
        return result
    raise PolicyError(f"cannot pass a {type(message).__name__} to an embodia policy")


def langchain_tool(tool: Tool, box: ToolBox | None = None) -> StructuredTool:
    """``tool`` as a LangChain tool. Calls run through ``box`` (default: a box of this tool
    alone): arguments are checked against the tool's schema, an error is counted in
    ``box.errors`` and becomes the tool's answer, as embodia's own agents tell the model."""
    calls = box if box is not None else ToolBox([tool])

    def run(**arguments: Any) -> str:
        result = calls.call(tool.name, arguments)
        return json.dumps(result.value, default=str) if result.ok else f"error: {result.error}"

    return StructuredTool.from_function(
        func=run, name=tool.name, description=tool.description, args_schema=dict(tool.parameters)
    )
