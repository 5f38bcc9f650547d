"""CSMR, look on demand: a text reasoner that asks a perception module targeted visual
questions and decides when it has seen enough to answer.

The LangGraph graph is ``reason -> perceive -> reason -> ... -> END``. ``reason`` asks the
reasoner (any chat :class:`~embodia.core.chat.Policy`; it never sees the image) for one
JSON action: ``{"action": "query", "question": "...", "query": {...}}`` (``query`` is an
optional structured form an oracle module can answer exactly, and may name a ``region`` to
look closer) or ``{"action": "answer", "answer": "..."}``. ``perceive`` asks the perception
module through the item's :class:`~embodia.perception.scheduler.QueryGuard` and adds the
evidence to the reasoning state. The item, the modules and the guard come in through the
runtime context; the state holds text.

Ablations are options of the same graph:

- ``none``: the reasoner queries as it likes and stops when it likes (the method);
- ``static``: one caption of the image first, then no looks (image to text once);
- ``always-k``: exactly ``k`` looks: answering earlier or looking more is refused;
- ``no-stop``: no early termination: it looks until ``max_queries`` before it may answer;
- ``direct``: no reasoner: the perception VLM answers the question from the image.

A refused action is answered with a note saying why and counted; after ``max_refusals``
the item stops with that reason, and so do unreadable replies after ``max_rereads``.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from embodia.core.chat import Message, Policy
from embodia.core.parsing import ParseFailure, extract_json
from embodia.core.tool_calls import ToolChoice
from embodia.errors import EmbodiaError
from embodia.perception.scheduler import Evidence, Perceiver, QueryGuard
from embodia.tools.perception import csmr_tools

ABLATIONS = ("none", "static", "always-k", "no-stop", "direct")
CAPTION_QUESTION = (
    "Describe everything in the image in detail: every object, its colour, size, shape and position."
)

REASONER_PROMPT = """You answer a question about an image you cannot see. A perception module can see it and
answers one short visual question at a time. Think about what you still need to know.
Reply with exactly one JSON object and nothing else:
  {"action": "query", "question": "<one targeted visual question>", "query": <optional structured query>}
  {"action": "answer", "answer": "<your final answer>"}
Ask only what you need; answer as soon as the evidence is enough."""


class CSMRError(EmbodiaError, ValueError):
    """Bad CSMR settings."""


@dataclass(frozen=True)
class CSMRSettings:
    ablation: str = "none"
    k: int = 3
    """Looks for ``always-k``."""
    max_queries: int = 6
    max_tokens: int = 4096
    """Reasoner tokens (prompt + completion) per item."""
    reply_tokens: int = 256
    max_refusals: int = 2
    max_rereads: int = 2
    temperature: float = 0.0
    tool_choice: ToolChoice = "auto"
    """How the reasoner uses its tools (``ask_perception``, ``answer``): ``auto`` also takes a
    JSON action written in the reply, ``required`` makes every reply a call (decoded under
    the tools' schemas where the backend can)."""

    def __post_init__(self) -> None:
        if self.ablation not in ABLATIONS:
            raise CSMRError(f"unknown ablation {self.ablation!r}: expected one of {', '.join(ABLATIONS)}")
        if self.k < 1 or self.max_queries < 1:
            raise CSMRError("k and max_queries must be at least 1")
        if self.ablation == "always-k" and self.k > self.max_queries:
            raise CSMRError(f"always-k with k={self.k} needs max_queries >= k, got {self.max_queries}")
        if self.tool_choice not in ("auto", "required"):
            raise CSMRError(f"unknown tool choice {self.tool_choice!r}: expected auto or required")

    @property
    def required_looks(self) -> int:
        """Looks the reasoner must take before it may answer."""
        if self.ablation == "always-k":
            return self.k
        if self.ablation == "no-stop":
            return self.max_queries
        return 0

    @property
    def allowed_looks(self) -> int:
        if self.ablation == "always-k":
            return self.k
        if self.ablation == "static":
            return 0
        return self.max_queries


class CSMRState(TypedDict, total=False):
    evidence: Annotated[list[dict[str, Any]], operator.add]
    notes: Annotated[list[str], operator.add]
    """Why an action was refused, shown to the reasoner next turn."""
    pending: dict[str, Any] | None
    answer: str | None
    stop: str | None
    refusals: int
    rereads: int
    replies: Annotated[list[str], operator.add]
    calls: Annotated[list[dict[str, Any]], operator.add]
    """The reasoner's native tool calls, each with the action it stood for or its error."""


@dataclass
class CSMRContext:
    """Run-scoped inputs of one item's graph run (never checkpointed)."""

    item: object
    """The puzzle item: only the perceiver looks at it."""
    question: str
    reasoner: Policy | None
    perceiver: Perceiver
    settings: CSMRSettings
    guard: QueryGuard = field(default_factory=QueryGuard)


def _messages(state: CSMRState, context: CSMRContext) -> list[Message]:
    lines = [f"Question: {context.question}"]
    for i, e in enumerate(state.get("evidence", []), 1):
        lines.append(f"Evidence {i}: Q: {e['question']} A: {e['answer']}")
    guard, settings = context.guard, context.settings
    looks_left = settings.allowed_looks - guard.queries
    lines.append(f"Looks taken: {guard.queries}; looks left: {max(0, looks_left)}.")
    notes = state.get("notes", [])
    if notes:
        lines.append(f"Note: {notes[-1]}")
    return [{"role": "system", "content": REASONER_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def _action(text: str) -> dict[str, Any] | str:
    """The reply's action, or why it cannot be read."""
    data = extract_json(text)
    if isinstance(data, ParseFailure):
        return data.reason
    if not isinstance(data, dict):
        return "the reply must be one JSON object"
    action = data.get("action")
    if action == "answer":
        if data.get("answer") is None:
            return "an answer action needs an 'answer'"
        return {"action": "answer", "answer": str(data["answer"])}
    if action == "query":
        question = data.get("question")
        if not isinstance(question, str) or not question.strip():
            return "a query action needs a 'question' string"
        query = data.get("query")
        return {
            "action": "query",
            "question": question.strip(),
            "query": query if isinstance(query, dict) else None,
        }
    return f"unknown action {action!r}: use 'query' or 'answer'"


def reason(
    state: CSMRState, runtime: Runtime[CSMRContext]
) -> Command[Literal["perceive", "reason", "__end__"]]:
    context = runtime.context
    settings, guard = context.settings, context.guard
    assert context.reasoner is not None
    tools = csmr_tools()
    completion = context.reasoner.complete(
        _messages(state, context),
        max_tokens=settings.reply_tokens,
        temperature=settings.temperature,
        tools=tools.schemas(),
        tool_choice=settings.tool_choice,
    )
    update: dict[str, Any] = {"replies": [completion.text]}
    action: dict[str, Any] | str
    if completion.tool_calls:
        # one action a turn: the first call acts, as the JSON action of a reply does
        call = completion.tool_calls[0]
        result = tools.run(call)
        action = result.value if result.ok else f"bad {call.name or 'tool'} call: {result.error}"
        update["calls"] = [result.call_record(call, "action")]
    else:
        action = _action(completion.text)
    if not guard.spend_tokens(completion.prompt_tokens + completion.completion_tokens):
        return Command(update={**update, "stop": "max_tokens"}, goto="__end__")
    if isinstance(action, str):
        rereads = state.get("rereads", 0) + 1
        if rereads > settings.max_rereads:
            return Command(update={**update, "rereads": rereads, "stop": "unreadable"}, goto="__end__")
        return Command(
            update={**update, "rereads": rereads, "notes": [f"unreadable reply: {action}"]}, goto="reason"
        )
    refusal = None
    if action["action"] == "answer":
        if guard.queries < settings.required_looks and not guard.exhausted:
            refusal = f"take {settings.required_looks - guard.queries} more look(s) before answering"
        else:
            return Command(update={**update, "answer": action["answer"], "stop": "answered"}, goto="__end__")
    elif guard.queries >= settings.allowed_looks or guard.exhausted:
        refusal = "no looks left: answer now with the evidence you have"
        if settings.ablation == "none" and guard.queries >= settings.max_queries:
            guard.fired.append("max_queries")
    if refusal is not None:
        refusals = state.get("refusals", 0) + 1
        if refusals > settings.max_refusals:
            stop = "max_queries" if "looks left" in refusal else "refused"
            return Command(update={**update, "refusals": refusals, "stop": stop}, goto="__end__")
        return Command(update={**update, "refusals": refusals, "notes": [refusal]}, goto="reason")
    return Command(update={**update, "pending": action}, goto="perceive")


def perceive(state: CSMRState, runtime: Runtime[CSMRContext]) -> dict[str, Any]:
    context = runtime.context
    pending = state.get("pending") or {}
    question = str(pending.get("question", ""))
    earlier = context.guard.earlier(question)
    if earlier is not None:
        evidence = Evidence(question, earlier.answer, earlier.source, repeated=True)
        note = ["you asked that already: the answer is in the evidence"]
        if context.guard.exhausted:
            note = ["you keep asking the same question: answer now"]
        return {"evidence": [_plain(evidence)], "pending": None, "notes": note}
    evidence = context.perceiver.look(context.item, question, pending.get("query"))
    context.guard.record(evidence)
    return {"evidence": [_plain(evidence)], "pending": None}


def _plain(evidence: Evidence) -> dict[str, Any]:
    return {
        "question": evidence.question,
        "answer": evidence.answer,
        "source": evidence.source,
        "latency_s": evidence.latency_s,
        "repeated": evidence.repeated,
    }


CSMRGraph = CompiledStateGraph[CSMRState, CSMRContext, CSMRState, CSMRState]


def build_csmr_graph() -> CSMRGraph:
    builder = StateGraph(CSMRState, context_schema=CSMRContext)
    builder.add_node("reason", reason)
    builder.add_node("perceive", perceive)
    builder.add_edge(START, "reason")
    builder.add_edge("perceive", "reason")
    return builder.compile()


@dataclass
class CSMRResult:
    answer: str | None
    stop: str
    queries: int
    repeats: int
    tokens: int
    wall_s: float
    evidence: list[dict[str, Any]]
    replies: list[str]
    guards: list[str]
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The reasoner's native tool calls, each with its action or its error."""

    def to_record(self) -> dict[str, Any]:
        return dict(self.__dict__)


def solve(
    item: Any,
    question: str,
    perceiver: Perceiver,
    reasoner: Policy | None = None,
    settings: CSMRSettings | None = None,
    graph: CSMRGraph | None = None,
) -> CSMRResult:
    """One item through the CSMR graph (or its ablation)."""
    settings = settings or CSMRSettings()
    guard = QueryGuard(max_queries=settings.max_queries, max_tokens=settings.max_tokens)
    started = time.perf_counter()
    evidence: list[dict[str, Any]] = []
    if settings.ablation == "direct":
        look = perceiver.look(item, question)
        guard.record(look)
        return CSMRResult(
            look.answer, "answered", 1, 0, look.tokens, time.perf_counter() - started, [_plain(look)], [], []
        )
    if reasoner is None:
        raise CSMRError(f"the {settings.ablation!r} ablation needs a reasoner")
    if settings.ablation == "static":
        caption = perceiver.look(item, CAPTION_QUESTION)
        guard.record(caption)
        evidence.append(_plain(caption))
    graph = graph if graph is not None else build_csmr_graph()
    context = CSMRContext(item, question, reasoner, perceiver, settings, guard)
    final = graph.invoke(
        {"evidence": evidence, "notes": [], "replies": [], "calls": []},
        context=context,
        config={"recursion_limit": 200},
    )
    return CSMRResult(
        final.get("answer"),
        str(final.get("stop") or "unfinished"),
        guard.queries,
        guard.repeats,
        guard.tokens,
        time.perf_counter() - started,
        list(final.get("evidence", [])),
        list(final.get("replies", [])),
        list(guard.fired),
        list(final.get("calls", [])),
    )


def result_line(result: CSMRResult, extra: Mapping[str, Any]) -> str:
    return json.dumps({**extra, **result.to_record()})
