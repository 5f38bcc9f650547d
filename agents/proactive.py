"""The proactive live-stream agent: per 1-second chunk, decide whether to speak, then say a
bounded line (the mechanism of Proact-VL).

One LangGraph run per chunk: ``score`` fans out with ``Send`` to every agent (one for solo
commentary and guidance, several for co-commentary), ``select`` picks the highest-scoring
agent whose score clears its threshold (so at most one agent speaks in a second, as
Proact-VL's ``_select_speaker`` does), and ``speak`` generates its line under the token cap,
streaming the text as ``custom`` events. The chunk and the agents come in through the
graph's runtime context; the state is a few numbers.

Deciders (anything with ``name``, ``threshold`` and ``score(chunk, context) -> float``):
:class:`~embodia.policies.speak_gate.LearnedGate` (an MLP on a VLM hidden state at a flag
token), :class:`~embodia.agents.baselines.speaking.EventHeuristic` (frame differences and
HUD changes), and :class:`PromptDecider` (asks any chat VLM for SPEAK or SILENT).

Each agent keeps its conversation in a :class:`ContextBudget`: one user turn and one
assistant turn per second (``" ..."`` when silent, as Proact-VL's KV cache holds);
past the budget the oldest 20 % of turns are evicted with the system prompt kept, so a
stream can run for hours in flat memory. Only text is kept; frames are seen only in their
own second. The budget is counted in tokens with the speaking model's tokenizer when there
is one (see :mod:`embodia.evals.live_run`), else in whitespace words.

:func:`run_stream` drives ``embodia/LiveGaming-v0`` with these agents and accounts the
latency of every chunk: decide time, generation time, time to first token, real-time
factor and the backlog a slower-than-real-time agent accumulates.
"""

from __future__ import annotations

import math
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, TypedDict, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from embodia.agents.runtime import emit
from embodia.core.chat import Message, Policy, PolicyError
from embodia.envs.streams.core import SILENCE, Chunk, StreamError
from embodia.envs.streams.env import LiveGamingEnv, cap_tokens, history_text
from embodia.tools.streams import stream_tools

DEFAULT_BUDGET = 16_384
EVICT_FRACTION = 0.2


def word_tokens(text: str) -> int:
    """A backend-independent token count: whitespace words plus one per turn boundary."""
    return len(text.split()) + 1


class ContextBudget:
    """A rolling conversation under a token budget, oldest turns evicted first.

    The system prompt is never evicted (Proact-VL keeps it as the attention sink). When a
    new turn takes the total past ``max_tokens``, the oldest ``evict_fraction`` of the turns
    (at least enough to fit) are dropped at once, as Proact-VL evicts ~20 % of its KV
    cache, so eviction happens rarely rather than on every turn.

    ``count`` sizes each turn's text and the total is their sum (whitespace words by default:
    :attr:`unit` is then ``"words"``). ``measure``, when given, counts the whole conversation
    instead, with the model's tokenizer and chat template (generation prompt included), so
    :attr:`tokens` is exactly the prompt the model will read (:attr:`unit` ``"tokens"``).
    """

    def __init__(
        self,
        system: str = "",
        max_tokens: int = DEFAULT_BUDGET,
        evict_fraction: float = EVICT_FRACTION,
        count: Callable[[str], int] = word_tokens,
        measure: Callable[[Sequence[Message]], int] | None = None,
    ) -> None:
        if max_tokens < 1:
            raise StreamError(f"the context budget must be at least 1 token, got {max_tokens}")
        if not 0 < evict_fraction <= 1:
            raise StreamError(f"evict_fraction must be in (0, 1], got {evict_fraction}")
        self.system = system
        self.max_tokens = max_tokens
        self.evict_fraction = evict_fraction
        self.count = count
        self.measure = measure
        self.unit = "words" if measure is None else "tokens"
        self.turns: deque[tuple[Literal["user", "assistant"], str, int]] = deque()
        self.system_tokens = self._measured() if measure is not None else (count(system) if system else 0)
        if self.system_tokens >= max_tokens:
            raise StreamError(
                f"the context budget of {max_tokens} {self.unit} leaves nothing after the system prompt "
                f"({self.system_tokens} {self.unit})"
            )
        self.tokens = self.system_tokens
        self.evicted_turns = 0
        self.evictions = 0

    def _measured(self) -> int:
        assert self.measure is not None
        return int(self.measure(self.messages()))

    def add(self, role: Literal["user", "assistant"], content: str) -> None:
        size = self.count(content) if self.measure is None else 0
        self.turns.append((role, content, size))
        self.tokens = self.tokens + size if self.measure is None else self._measured()
        if self.tokens <= self.max_tokens:
            return
        drop = max(1, int(len(self.turns) * self.evict_fraction))
        self.evictions += 1
        while self.turns and (drop > 0 or self.tokens > self.max_tokens):
            _, _, freed = self.turns.popleft()
            self.evicted_turns += 1
            drop -= 1
            if self.measure is None:
                self.tokens -= freed
            elif drop <= 0 or not self.turns:  # measured once the fraction is gone, then per turn
                self.tokens = self._measured()

    def messages(self) -> list[Message]:
        out: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        out.extend(Message(role=role, content=content) for role, content, _ in self.turns)
        return out

    def turn_messages(self) -> list[dict[str, str]]:
        """The retained turns without the system prompt (what deciders read as context)."""
        return [{"role": role, "content": content} for role, content, _ in self.turns]


class Decider(Protocol):
    name: str
    threshold: float

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float: ...


@dataclass(frozen=True)
class LineRequest:
    """What a speaker is asked for once its agent decided to speak."""

    chunk: Chunk
    """This second of the stream (its frames, clock, query)."""
    context: Sequence[Message]
    """The retained conversation, this second's user turn last."""
    max_words: int
    """The line's cap (the agent's token cap)."""
    on_text: Callable[[str], None] | None = None
    """Gets the line's text as it is written (streaming), when given."""


class Speaker(Protocol):
    """Writes the line an agent says once it decided to speak."""

    name: str

    def line(self, request: LineRequest) -> str: ...


def user_turn(chunk: Chunk, heard: Sequence[str] = ()) -> str:
    """The text of a second's user turn: the clock, what was heard, the query."""
    parts = [f"t={chunk.second}"]
    lines = [*heard, history_text(chunk)]
    if any(lines):
        parts.append("\n".join(line for line in lines if line))
    if chunk.query:
        parts.append(f"Question: {chunk.query}")
    return "\n".join(parts)


class PolicySpeaker:
    """A line from any chat (V)LM: the retained conversation plus this second's frames."""

    def __init__(self, policy: Policy, temperature: float = 0.7) -> None:
        self.policy = policy
        self.name = policy.name
        self.temperature = temperature
        self.prompt_tokens: int | None = None
        """The prompt tokens of the last line, as the backend counted them."""

    def line(self, request: LineRequest) -> str:
        # The current user turn is already the last message of the context.
        completion = self.policy.complete(
            list(request.context),
            images=list(request.chunk.frames),
            max_tokens=request.max_words,
            temperature=self.temperature,
            stop=("\n",),
            on_text=request.on_text,
        )
        self.prompt_tokens = completion.prompt_tokens
        return cap_tokens(completion.text, request.max_words)


class HudSpeaker:
    """Wraps the HUD commentator (no model) as a speaker."""

    name = "hud"

    def __init__(self) -> None:
        from embodia.agents.baselines.speaking import HudCommentator

        self.commentator = HudCommentator()

    def line(self, request: LineRequest) -> str:
        text = cap_tokens(self.commentator.line(request.chunk, request.context), request.max_words)
        if request.on_text is not None:
            request.on_text(text)
        return text

    def observe(self, chunk: Chunk) -> None:
        self.commentator.observe(chunk)


def _recent_turns(system: str, chunk: Chunk, context: Sequence[Mapping[str, str]]) -> list[Message]:
    """A decision's prompt: ``system``, the last 6 turns of the conversation, and this
    second's user turn last."""
    recent = [m for m in context if m.get("role") in ("user", "assistant")][-6:]
    messages: list[Message] = [{"role": "system", "content": system}]
    messages.extend(
        Message(role="assistant" if m["role"] == "assistant" else "user", content=m["content"])
        for m in recent
    )
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": user_turn(chunk)})
    return messages


DECIDE_PROMPT = (
    "You are watching a live game stream one second at a time. Decide whether the commentator "
    "should speak now. Answer with exactly one word: SPEAK or SILENT."
)


class PromptDecider:
    """Asks a chat VLM whether to speak; the score is P(SPEAK) from its top logprobs when the
    backend reports them, else 1 or 0 from the reply's word. An unreadable reply is silence
    and is counted in ``unreadable``."""

    def __init__(self, policy: Policy, threshold: float = 0.5) -> None:
        self.policy = policy
        self.name = f"prompt:{policy.name}"
        self.threshold = threshold
        self.unreadable = 0

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        messages = _recent_turns(DECIDE_PROMPT, chunk, context)
        messages[-1] = {"role": "user", "content": messages[-1]["content"] + "\nSPEAK or SILENT?"}
        try:
            completion = self.policy.complete(
                messages, images=list(chunk.frames), max_tokens=3, logprobs=True, top_logprobs=5
            )
        except PolicyError as exc:
            if "logprob" not in str(exc).lower():
                raise
            completion = self.policy.complete(messages, images=list(chunk.frames), max_tokens=3)
        if completion.tokens and completion.tokens[0].top:
            speak = silent = 0.0
            for token, logprob in completion.tokens[0].top:
                word = token.strip().upper()
                if word and "SPEAK".startswith(word) and "SILENT".startswith(word):
                    continue  # "S" starts both words: it says nothing about which
                if word and "SPEAK".startswith(word):
                    speak += math.exp(logprob)
                elif word and "SILENT".startswith(word):
                    silent += math.exp(logprob)
            if speak + silent > 0:
                return speak / (speak + silent)
        word = completion.text.strip().upper()
        if word.startswith("SPEAK"):
            return 1.0
        if word.startswith("SILENT"):
            return 0.0
        self.unreadable += 1
        return 0.0


TOOL_PROMPT = (
    "You are watching a live game stream one second at a time. Each second, call speak with "
    "one short line when something is worth saying, else call stay_silent."
)


class ToolCommentator:
    """A tool-calling VLM that decides and speaks in one reply: each second it is offered
    ``speak(text)`` and ``stay_silent()`` (``tools/streams.py``) with a choice that forces one
    call. The score is 1 for a valid ``speak``, else 0; the line is the call's text. A call
    that cannot be read or breaks the schema is silence, counted in ``unreadable``; the
    second's calls, each with its result or error, are in ``last_calls``."""

    def __init__(self, policy: Policy, threshold: float = 0.5, reply_tokens: int = 160) -> None:
        self.policy = policy
        self.name = f"tools:{policy.name}"
        self.threshold = threshold
        self.reply_tokens = reply_tokens
        self.tools = stream_tools()
        self.unreadable = 0
        self.last_calls: list[dict[str, Any]] = []
        self._line = ""

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        messages = _recent_turns(TOOL_PROMPT, chunk, context)
        completion = self.policy.complete(
            messages,
            images=list(chunk.frames),
            max_tokens=self.reply_tokens,
            tools=self.tools.schemas(),
            tool_choice="required",
        )
        self._line, self.last_calls = "", []
        for call in completion.tool_calls[:1]:  # one decision a second
            result = self.tools.run(call)
            self.last_calls.append(result.call_record(call))
            if not result.ok:
                self.unreadable += 1
            elif result.tool == "speak":
                self._line = str(result.value["said"])
        return 1.0 if self._line else 0.0

    def line(self, request: LineRequest) -> str:
        text = cap_tokens(self._line, request.max_words)
        if request.on_text is not None:
            request.on_text(text)
        return text


@dataclass
class ProactiveAgent:
    """One commentator: a decider, a speaker and its own conversation."""

    name: str
    decider: Decider
    speaker: Speaker
    budget: ContextBudget
    token_cap: int = 12
    heard: list[str] = field(default_factory=list)
    """Lines of other agents spoken last second, heard as history this second."""
    last_spoke: int | None = None

    def begin_second(self, chunk: Chunk) -> None:
        self.budget.add("user", user_turn(chunk, self.heard))
        self.heard = []

    def end_second(self, chunk: Chunk, said: str) -> None:
        self.budget.add("assistant", said or SILENCE)
        observe = getattr(self.speaker, "observe", None)
        if observe is not None:
            observe(chunk)


class ChunkState(TypedDict, total=False):
    second: int
    agents: int
    scores: Annotated[list[dict[str, Any]], operator.add]
    speaker: int
    utterance: dict[str, Any] | None


class ScoreTask(TypedDict):
    second: int
    agent: int


@dataclass
class ChunkContext:
    """Run-scoped inputs of one chunk's graph run (never checkpointed)."""

    agents: Sequence[ProactiveAgent]
    chunk: Chunk
    lock: threading.Lock = field(default_factory=threading.Lock)
    """LangGraph runs the ``score`` fan-out in threads; agents may share one model (a gate,
    a policy), so scoring is serialised."""


def _fan_out(state: ChunkState) -> list[Send]:
    return [Send("score", {"second": state["second"], "agent": i}) for i in range(state["agents"])]


def score(task: ScoreTask, runtime: Runtime[ChunkContext]) -> dict[str, Any]:
    agent = runtime.context.agents[task["agent"]]
    with runtime.context.lock:
        started = time.perf_counter()
        probability = float(agent.decider.score(runtime.context.chunk, agent.budget.turn_messages()))
        decide_s = time.perf_counter() - started
        entry: dict[str, Any] = {"agent": task["agent"], "score": probability, "decide_s": decide_s}
        calls = getattr(agent.decider, "last_calls", None)  # a tool-calling decider's, this second
        if calls is not None:
            entry["calls"] = list(calls)
    return {"scores": [entry]}


def select(state: ChunkState, runtime: Runtime[ChunkContext]) -> Command[Literal["speak", "__end__"]]:
    agents = runtime.context.agents
    eligible = [s for s in state["scores"] if s["score"] > agents[s["agent"]].decider.threshold]
    if not eligible:
        return Command(update={"speaker": -1, "utterance": None}, goto="__end__")  # LangGraph's END

    # On a tie (agents sharing one gate score alike) the one silent longest takes the floor.
    def rank(s: dict[str, Any]) -> tuple[float, float, int]:
        last = agents[s["agent"]].last_spoke
        return (s["score"], -(last if last is not None else -math.inf), -s["agent"])

    best = max(eligible, key=rank)
    return Command(update={"speaker": best["agent"]}, goto="speak")


def speak(state: ChunkState, runtime: Runtime[ChunkContext]) -> dict[str, Any]:
    index = state["speaker"]
    agent = runtime.context.agents[index]
    chunk = runtime.context.chunk
    started = time.perf_counter()
    first: list[float] = []

    def on_text(piece: str) -> None:
        if not first:
            first.append(time.perf_counter())
        emit({"event": "token", "second": chunk.second, "speaker": agent.name, "text": piece})

    text = agent.speaker.line(LineRequest(chunk, agent.budget.messages(), agent.token_cap, on_text))
    ended = time.perf_counter()
    return {
        "utterance": {
            "speaker": agent.name,
            "agent": index,
            "text": text,
            "gen_s": ended - started,
            "first_token_at": first[0] if first else ended,
            "prompt_tokens": getattr(agent.speaker, "prompt_tokens", None),
        }
    }


ChunkGraph = CompiledStateGraph[ChunkState, ChunkContext, ChunkState, ChunkState]


def build_chunk_graph() -> ChunkGraph:
    builder = StateGraph(ChunkState, context_schema=ChunkContext)
    # Send delivers a ScoreTask, not the graph state, which the stubs cannot express.
    builder.add_node("score", cast(Any, score))
    builder.add_node("select", select)
    builder.add_node("speak", speak)
    builder.add_conditional_edges(START, _fan_out, ["score"])
    builder.add_edge("score", "select")
    builder.add_edge("speak", END)
    return builder.compile()


@dataclass
class Utterance:
    second: int
    speaker: str
    text: str


class ChunkEvent(TypedDict):
    """:func:`run_stream`'s progress event: the record of one second as it is decided (the
    keys below, and the rest of the record), sent to ``on_event``."""

    event: Literal["chunk"]
    second: int
    speaker: str | None
    """The agent that spoke this second, or None when none did."""
    text: str
    """What was said (empty when nobody spoke)."""


@dataclass
class StreamRun:
    """What a run produced: per-agent predictions and per-chunk records."""

    predictions: dict[str, dict[int, str]]
    records: list[dict[str, Any]]
    dropped: int
    skipped: int


def run_stream(
    env: LiveGamingEnv,
    agents: Sequence[ProactiveAgent],
    record: Callable[[dict[str, Any]], None] | None = None,
    replay: Sequence[Mapping[str, Any]] = (),
    on_event: Callable[[ChunkEvent], None] | None = None,
    graph: ChunkGraph | None = None,
    keep_records: bool = True,
) -> StreamRun:
    """Drive the env to the end of its clip with ``agents``; ``record`` gets one JSON-able
    record per chunk as it is decided.

    ``replay`` holds the records of an earlier, interrupted run of the same stream: those
    seconds are fed back (what was said is said again, without asking any model) so the
    agents' conversations and the deciders' running state are as they were, and the run
    continues after the last recorded second. ``keep_records=False`` keeps the returned
    records empty, for streams of hours whose records already went to ``record``.
    """
    if not agents:
        raise StreamError("a stream run needs at least one agent")
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise StreamError(f"agent names must be distinct, got {names}")
    graph = graph if graph is not None else build_chunk_graph()
    predictions: dict[str, dict[int, str]] = {a.name: {} for a in agents}
    records: list[dict[str, Any]] = []

    def keep(entry: dict[str, Any], fresh: bool) -> None:
        if keep_records:
            records.append(entry)
        if record is not None and fresh:
            record(entry)
        if on_event is not None:
            on_event(cast(ChunkEvent, {"event": "chunk", **entry}))

    # Recorded seconds go to the agents straight from the stream (the runner's, never the
    # agents'), so a real-time run does not wait through its past again; the env starts after.
    start = env.stream.begin
    for past in sorted(replay, key=lambda r: int(r["second"])):
        chunk = env.stream.chunk(int(past["second"]))
        for agent in agents:
            agent.begin_second(chunk)
        result = _replayed_result(past, agents, chunk)
        said = "" if past.get("late") else str(past.get("text") or "")
        _end_second(agents, chunk, result.get("utterance"), said)
        if past.get("text") and not past.get("late"):
            predictions[str(past["speaker"])][chunk.second] = str(past["text"])
        keep(dict(past), fresh=False)
        start = chunk.second + 1
    if start >= env.stream.end:
        return StreamRun(predictions, records, 0, 0)
    observation, info = env.reset(options={"start": start})
    chunk_seconds = env.time_scale if env.realtime else 1.0
    backlog = lag = 0.0
    while True:
        chunk = info["chunk"]
        arrived = time.perf_counter()
        for agent in agents:
            agent.begin_second(chunk)
        state: ChunkState = {"second": chunk.second, "agents": len(agents), "scores": [], "speaker": -1}
        result = graph.invoke(state, context=ChunkContext(agents, chunk))
        utterance = result.get("utterance")
        processing = time.perf_counter() - arrived
        observation, _reward, terminated, _truncated, info = env.step(utterance["text"] if utterance else "")
        # What the env took (capped, or nothing when late) is what was said: the speaker's
        # context and the others' ears get that, never a dropped line.
        said = info["said"]
        _end_second(agents, chunk, utterance, said)
        backlog = max(0.0, backlog + processing - chunk_seconds)
        entry = _chunk_record(chunk, result, processing, backlog, chunk_seconds, arrived, lag)
        entry["late"] = bool(info["late"])
        if env.realtime:
            entry["decision_s"] = round(float(info["decision_s"]), 6)
            lag = float(info.get("lag_s", 0.0))
        if entry["late"]:
            entry["dropped_text"], entry["text"], entry["speaker"] = entry["text"], "", None
        elif utterance and said:
            entry["text"] = said
            predictions[utterance["speaker"]][chunk.second] = said
        keep(entry, fresh=True)
        if terminated:
            break
    return StreamRun(predictions, records, env.dropped, env.skipped)


def _end_second(
    agents: Sequence[ProactiveAgent], chunk: Chunk, utterance: Mapping[str, Any] | None, said: str
) -> None:
    """Close the second in every agent's conversation: the speaker said ``said``, the others
    were silent and hear it next second as ``[NAME]: text``."""
    for i, agent in enumerate(agents):
        own = said if utterance and utterance["agent"] == i else ""
        agent.end_second(chunk, own)
        if own:
            agent.last_spoke = chunk.second
        elif said and utterance:
            agent.heard.append(f"[{utterance['speaker']}]: {said}")


def _replayed_result(
    past: Mapping[str, Any], agents: Sequence[ProactiveAgent], chunk: Chunk
) -> dict[str, Any]:
    """The graph result a recorded second stands for; stateful deciders see the chunk again."""
    for agent in agents:
        warm = getattr(agent.decider, "score", None)
        if warm is not None and getattr(agent.decider, "stateful", False):
            warm(chunk, agent.budget.turn_messages())
    text = past.get("text") or ""
    if not text or past.get("late"):
        return {"utterance": None}
    index = next((i for i, a in enumerate(agents) if a.name == past.get("speaker")), None)
    if index is None:
        raise StreamError(
            f"the run being resumed has a line by {past.get('speaker')!r}, who is not an agent now"
        )
    return {"utterance": {"speaker": past["speaker"], "agent": index, "text": text}}


def _chunk_record(
    chunk: Chunk,
    result: Mapping[str, Any],
    processing: float,
    backlog: float,
    chunk_seconds: float,
    arrived: float,
    lag: float = 0.0,
) -> dict[str, Any]:
    scores = result.get("scores", [])
    decide = max((s["decide_s"] for s in scores), default=0.0)
    utterance = result.get("utterance")
    entry: dict[str, Any] = {
        "second": chunk.second,
        "scores": {str(s["agent"]): round(s["score"], 6) for s in scores},
        "speaker": utterance["speaker"] if utterance else None,
        "text": utterance["text"] if utterance else "",
        "decide_ms": round(decide * 1000, 3),
        "gen_ms": round(utterance["gen_s"] * 1000, 3) if utterance else 0.0,
        # From the chunk being complete: in real time it may have waited ``lag`` to be handed out.
        "ttft_ms": round((utterance["first_token_at"] - arrived + lag) * 1000, 3) if utterance else None,
        "processing_ms": round(processing * 1000, 3),
        "rtf": round(processing / chunk_seconds, 6),
        "backlog_s": round(backlog, 6),
    }
    if utterance and utterance.get("prompt_tokens") is not None:
        entry["prompt_tokens"] = utterance["prompt_tokens"]  # the speaker's, as its backend counted
    calls = {str(s["agent"]): s["calls"] for s in scores if "calls" in s}
    if calls:
        entry["calls"] = calls
    if chunk.query:
        entry["query"] = chunk.query
    return entry
