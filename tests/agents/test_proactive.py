"""The proactive agent graph: who speaks, what they hear, budgets, resume, prompted decider."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from streams import flash_stream

from embodia.agents.baselines.speaking import EventHeuristic
from embodia.agents.proactive import (
    ContextBudget,
    HudSpeaker,
    LineRequest,
    PolicySpeaker,
    ProactiveAgent,
    PromptDecider,
    ToolCommentator,
    run_stream,
)
from embodia.core.chat import Message
from embodia.envs.streams.core import SILENCE, Chunk, StreamError
from embodia.envs.streams.env import LiveGamingEnv
from embodia.policies.scripted import ScriptedPolicy


class FixedDecider:
    """Scores from a table (second -> score), counting its calls."""

    stateful = False

    def __init__(
        self, name: str, table: Mapping[int, float], default: float = 0.0, threshold: float = 0.5
    ) -> None:
        self.name = name
        self.table = dict(table)
        self.default = default
        self.threshold = threshold
        self.calls: list[int] = []
        self.contexts: list[list[Mapping[str, str]]] = []

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        self.calls.append(chunk.second)
        self.contexts.append(list(context))
        return self.table.get(chunk.second, self.default)


class EchoSpeaker:
    name = "echo"

    def __init__(self, word: str) -> None:
        self.word = word

    def line(self, request: LineRequest) -> str:
        text = " ".join([self.word] * 20)
        words = text.split()[: request.max_words]
        if request.on_text is not None:
            request.on_text(" ".join(words))
        return " ".join(words)


def agent(name: str, decider: object, word: str = "hi", budget: int = 10_000) -> ProactiveAgent:
    return ProactiveAgent(name, decider, EchoSpeaker(word), ContextBudget(f"you are {name}", budget))  # type: ignore[arg-type]


def test_solo_agent_speaks_when_its_score_clears_the_threshold() -> None:
    decider = FixedDecider("d", {3: 0.9, 4: 0.5, 5: 0.51})
    run = run_stream(LiveGamingEnv(stream=flash_stream(10)), [agent("CASTER", decider)])
    assert sorted(run.predictions["CASTER"]) == [3, 5]  # 0.5 does not exceed 0.5
    assert run.predictions["CASTER"][3] == " ".join(["hi"] * 12)  # the token cap
    assert decider.calls == list(range(10))
    record = run.records[3]
    assert record["speaker"] == "CASTER" and record["ttft_ms"] >= 0 and record["rtf"] > 0
    assert set(record) >= {"decide_ms", "gen_ms", "processing_ms", "backlog_s", "scores"}


def test_co_commentary_one_voice_per_second_and_the_others_hear_it() -> None:
    a = FixedDecider("a", {s: 0.9 for s in range(0, 20, 2)}, default=0.6)
    b = FixedDecider("b", {s: 0.95 for s in range(0, 20, 3)}, default=0.7)
    run = run_stream(
        LiveGamingEnv(stream=flash_stream(20, scenario="co-commentary"), scenario="co-commentary"),
        [agent("CASTER", a, "alpha"), agent("SPEAKER_1", b, "beta")],
    )
    spoken_a, spoken_b = set(run.predictions["CASTER"]), set(run.predictions["SPEAKER_1"])
    assert not spoken_a & spoken_b and spoken_a | spoken_b == set(range(20))
    # Each second the highest score wins: b at multiples of 3 and where a has only 0.6.
    assert spoken_b == {s for s in range(20) if s % 3 == 0 or s % 2 == 1}
    # a hears b's line of second 3 at the start of second 4 (and says " ..." while b speaks).
    context_at_4 = a.contexts[4]
    assert context_at_4[-1]["role"] == "user" and "[SPEAKER_1]: beta" in context_at_4[-1]["content"]
    assert {"role": "assistant", "content": SILENCE} in context_at_4


def test_co_caster_true_lines_are_heard_in_single_agent_co_commentary() -> None:
    decider = FixedDecider("d", {})
    run_stream(
        LiveGamingEnv(stream=flash_stream(10, scenario="co-commentary"), scenario="co-commentary"),
        [agent("CASTER", decider)],
    )
    assert "[SPEAKER_1]: indeed" in decider.contexts[5][-1]["content"]  # a line starting at 5


def test_context_budget_evicts_oldest_turns_and_keeps_the_system_prompt() -> None:
    budget = ContextBudget("system prompt here", max_tokens=500)
    for i in range(200):
        budget.add("user", f"t={i} a b c")
        budget.add("assistant", SILENCE)
        assert budget.tokens <= 500
    messages = budget.messages()
    assert messages[0] == {"role": "system", "content": "system prompt here"}
    assert messages[-1]["content"] == SILENCE and messages[-2]["content"] == "t=199 a b c"
    assert budget.evicted_turns == 400 - len(budget.turns)
    # Evictions come in blocks of ~20 % of the ~120 turns held, not one per new turn.
    assert 0 < budget.evictions <= budget.evicted_turns / 15
    with pytest.raises(StreamError):
        ContextBudget(max_tokens=0)


def test_a_measured_budget_holds_the_whole_prompt_in_model_tokens(tmp_path: Path) -> None:
    from embodia.policies.tiny_models import train_tokenizer

    tokenizer = train_tokenizer(tmp_path)

    def measure(messages: Sequence[Message]) -> int:
        text = tokenizer.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, tokenize=False
        )
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    budget = ContextBudget("You are CASTER, a live game commentator.", max_tokens=300, measure=measure)
    assert budget.unit == "tokens" and budget.tokens == budget.system_tokens == measure(budget.messages())
    for i in range(200):
        budget.add("user", f"t={i}\nThe red sofa is in the kitchen, {i} meters left.")
        budget.add("assistant", "Go to the kitchen and look for the table." if i % 3 == 0 else SILENCE)
        assert budget.tokens == measure(budget.messages()) <= 300
    assert budget.messages()[0] == {"role": "system", "content": "You are CASTER, a live game commentator."}
    assert budget.messages()[-2]["content"].startswith("t=199\n")
    assert budget.evicted_turns == 400 - len(budget.turns)
    assert 0 < budget.evictions <= budget.evicted_turns / 3  # in blocks, not one turn at a time
    # a word count of the same conversation is far below the tokens the model reads
    assert sum(len(m["content"].split()) + 1 for m in budget.messages()) < 0.6 * budget.tokens
    with pytest.raises(StreamError, match="leaves nothing after the system prompt"):
        ContextBudget("You are CASTER. " * 20, max_tokens=40, measure=measure)


def test_a_long_stream_stays_within_the_budget() -> None:
    decider = FixedDecider("d", {}, default=0.9)
    caster = agent("CASTER", decider, budget=300)
    run_stream(LiveGamingEnv(stream=flash_stream(400)), [caster])
    assert caster.budget.tokens <= 300 and caster.budget.evicted_turns > 0
    assert len(caster.budget.turns) < 100


def test_resume_replays_recorded_seconds_without_asking_again() -> None:
    def fresh() -> tuple[FixedDecider, ProactiveAgent]:
        d = FixedDecider("d", {2: 0.9, 9: 0.8, 13: 0.7})
        return d, agent("CASTER", d)

    _, whole_agent = fresh()
    whole = run_stream(LiveGamingEnv(stream=flash_stream(16)), [whole_agent])
    kept = [r for r in whole.records if r["second"] < 10]
    decider, resumed_agent = fresh()
    resumed = run_stream(LiveGamingEnv(stream=flash_stream(16)), [resumed_agent], replay=kept)
    assert resumed.predictions == whole.predictions
    assert decider.calls == list(range(10, 16))  # recorded seconds are never decided again
    assert [m["content"] for m in resumed_agent.budget.messages()] == [
        m["content"] for m in whole_agent.budget.messages()
    ]


def test_event_heuristic_fires_on_flashes_and_hud_changes() -> None:
    caster = ProactiveAgent("CASTER", EventHeuristic(), HudSpeaker(), ContextBudget("s"))
    run = run_stream(LiveGamingEnv(stream=flash_stream(40)), [caster])
    spoken = set(run.predictions["CASTER"])
    flashes = set(range(3, 40, 7))
    score_steps = set(range(7, 40, 7))
    assert flashes - {3} <= spoken  # the first flash comes before the frame statistics are ready
    assert score_steps <= spoken
    assert spoken <= flashes | score_steps | {s + 1 for s in flashes}
    assert run.predictions["CASTER"][14] == "score now 2."


def test_prompt_decider_reads_logprobs_words_and_counts_unreadable_replies() -> None:
    top = {"tokens": [{"token": "SPEAK", "logprob": -0.2, "top": [["SPEAK", -0.2], ["SIL", -1.8]]}]}
    policy = ScriptedPolicy([{"text": "SPEAK", **top}, "SILENT", "Speak!", "maybe later", "silent."])
    decider = PromptDecider(policy)
    stream = flash_stream(10)
    scores = [decider.score(stream.chunk(s)) for s in range(5)]
    assert scores[0] == pytest.approx(0.8187 / (0.8187 + 0.1653), abs=1e-3)
    assert scores[1:] == [0.0, 1.0, 0.0, 0.0]
    assert decider.unreadable == 1
    request = policy.requests[0]
    assert len(request.images) == 2 and request.messages[-1]["content"].endswith("SPEAK or SILENT?")


def test_policy_speaker_sends_the_conversation_and_the_frames() -> None:
    policy = ScriptedPolicy(["Goal for the reds what a strike from distance that was truly amazing"])
    caster = ProactiveAgent(
        "CASTER",
        FixedDecider("d", {3: 1.0}),
        PolicySpeaker(policy, temperature=0.0),
        ContextBudget("persona"),
    )
    run = run_stream(LiveGamingEnv(stream=flash_stream(5)), [caster])
    assert run.predictions["CASTER"] == {3: "Goal for the reds what a strike from distance that was truly"}
    request = policy.requests[0]
    assert request.messages[0] == {"role": "system", "content": "persona"}
    assert request.messages[-1]["content"].startswith("t=3") and len(request.images) == 2
    assert request.max_tokens == 12


def test_agents_must_be_distinct() -> None:
    env = LiveGamingEnv(stream=flash_stream(5))
    with pytest.raises(StreamError, match="distinct"):
        run_stream(env, [agent("A", FixedDecider("d", {})), agent("A", FixedDecider("d", {}))])


class SlowDecider(FixedDecider):
    """Advances a fake wall clock while it thinks."""

    def __init__(self, clock: object, slow: Mapping[int, float], **kwargs: object) -> None:
        super().__init__("slow", {}, default=0.9)
        self.clock = clock
        self.slow = dict(slow)

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        self.clock.now += self.slow.get(chunk.second, 0.05)  # type: ignore[attr-defined]
        return super().score(chunk, context)


def realtime_env(clock: object, duration: int = 12, scenario: str = "solo") -> LiveGamingEnv:
    return LiveGamingEnv(
        stream=flash_stream(duration, scenario=scenario),
        scenario=scenario,
        realtime=True,
        clock=clock,  # type: ignore[arg-type]
        sleep=clock.sleep,  # type: ignore[attr-defined]
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def test_a_dropped_line_is_neither_in_the_speakers_context_nor_heard() -> None:
    clock = FakeClock()
    slow = SlowDecider(clock, {4: 1.5})
    listener = FixedDecider("l", {})
    speaker, other = agent("CASTER", slow, "late"), agent("SPEAKER_1", listener)
    run = run_stream(realtime_env(clock, scenario="co-commentary"), [speaker, other])
    record = next(r for r in run.records if r["second"] == 4)
    assert record["late"] and record["text"] == "" and record["dropped_text"].startswith("late")
    assert 4 not in run.predictions["CASTER"] and run.dropped == 1
    turns = [m["content"] for m in speaker.budget.messages()]
    assert turns[turns.index(next(t for t in turns if t.startswith("t=4"))) + 1] == SILENCE
    heard_at_5 = next(m["content"] for m in other.budget.messages() if m["content"].startswith("t=5"))
    assert "[CASTER]" not in heard_at_5
    heard_at_4 = next(m["content"] for m in other.budget.messages() if m["content"].startswith("t=4"))
    assert "[CASTER]: late" in heard_at_4  # the line of second 3, which was on time
    assert all(r["decision_s"] >= 0.05 - 1e-9 for r in run.records)


def test_resuming_a_realtime_run_does_not_wait_through_its_past() -> None:
    clock = FakeClock()
    whole = run_stream(realtime_env(clock, duration=30), [agent("CASTER", SlowDecider(clock, {}))])
    kept = [r for r in whole.records if r["second"] < 20]
    clock = FakeClock()
    decider = SlowDecider(clock, {})
    resumed = run_stream(realtime_env(clock, duration=30), [agent("CASTER", decider)], replay=kept)
    assert decider.calls == list(range(20, 30))
    assert clock.slept < 11  # ten live seconds, not thirty
    assert sorted(resumed.predictions["CASTER"]) == sorted(whole.predictions["CASTER"])


def test_agents_that_tie_take_turns() -> None:
    shared = FixedDecider("shared", {}, default=0.8)
    run = run_stream(
        LiveGamingEnv(stream=flash_stream(8, scenario="co-commentary"), scenario="co-commentary"),
        [agent("CASTER", shared), agent("SPEAKER_1", shared)],
    )
    assert sorted(run.predictions["CASTER"]) == [0, 2, 4, 6]
    assert sorted(run.predictions["SPEAKER_1"]) == [1, 3, 5, 7]


def test_a_token_that_starts_both_words_says_nothing() -> None:
    top = {"tokens": [{"token": "S", "logprob": -0.1, "top": [["S", -0.1], ["SIL", -2.0], ["SPE", -3.0]]}]}
    decider = PromptDecider(ScriptedPolicy([{"text": "S", **top}]))
    p_sil, p_spe = 2.718281828**-2.0, 2.718281828**-3.0
    assert decider.score(flash_stream(5).chunk(0)) == pytest.approx(p_spe / (p_sil + p_spe), abs=1e-6)


def reachable_kinds(*roots: object) -> set[str]:
    """Names of the stream-side classes (Stream, Annotation, the env) reachable from roots."""
    import gc
    import types

    from embodia.envs.streams.core import Annotation, Stream

    found: set[str] = set()
    seen: set[int] = set()
    todo: list[object] = list(roots)
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(item))
        if isinstance(item, Stream | Annotation | LiveGamingEnv):
            found.add(type(item).__name__)
        todo.extend(gc.get_referents(item))
    return found


class PeekingDecider(FixedDecider):
    """Walks everything reachable from what it is given, looking for the stream or its truth."""

    def __init__(self) -> None:
        super().__init__("peek", {})
        self.found: set[str] = set()

    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        self.found |= reachable_kinds(chunk, context)
        return super().score(chunk, context)


def test_nothing_an_agent_is_given_leads_to_the_stream_or_its_labels() -> None:
    env = LiveGamingEnv(stream=flash_stream(6, scenario="guidance"), scenario="guidance")
    assert reachable_kinds(env) >= {"Stream", "Annotation"}  # the walk does find them where they are
    peeker = PeekingDecider()
    run_stream(env, [agent("CASTER", peeker)])
    assert peeker.calls == list(range(6)) and not peeker.found


def _call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_a_tool_calling_vlm_decides_and_speaks_in_one_call_each_second() -> None:
    """``speak`` says its line (capped), ``stay_silent`` and bad calls are silence; each
    second's call is in the chunk's record with its result or error."""
    policy = ScriptedPolicy(
        [
            _call("stay_silent"),
            _call("speak", text="What a   goal " + "from the reds " * 6),
            _call("speak", text="   "),  # blank: refused by the tool, silence
            "SPEAK",  # no call under a forced choice: an unreadable call, silence
            _call("speak", text="Corner."),
        ]
    )
    commentator = ToolCommentator(policy)
    caster = ProactiveAgent("CASTER", commentator, commentator, ContextBudget("persona"))
    run = run_stream(LiveGamingEnv(stream=flash_stream(5)), [caster])
    assert run.predictions["CASTER"] == {1: "What a goal " + " ".join(["from the reds"] * 3), 4: "Corner."}
    assert commentator.unreadable == 2
    calls = [run.records[s]["calls"]["0"][0] for s in range(5)]
    assert [c["name"] for c in calls] == ["stay_silent", "speak", "speak", "", "speak"]
    assert calls[0]["result"] == {"said": ""} and "blank" in calls[2]["error"]
    assert calls[3]["error"] == "the reply holds no complete call"
    request = policy.requests[1]
    assert request.tool_choice == "required" and len(request.images) == 2
    assert {t["function"]["name"] for t in request.tools} == {"speak", "stay_silent"}
    assert request.messages[-1]["content"].startswith("t=1")


def test_a_tiny_random_vlm_drives_the_stream_with_schema_valid_calls(tmp_path: Path) -> None:
    """Constrained decoding under the forced choice: every second's call is valid."""
    from embodia.policies.hf import HFPolicy
    from embodia.policies.tiny_models import build_tiny_vlm

    commentator = ToolCommentator(HFPolicy(build_tiny_vlm(tmp_path / "vlm")))
    caster = ProactiveAgent("CASTER", commentator, commentator, ContextBudget("persona"))
    run = run_stream(LiveGamingEnv(stream=flash_stream(4)), [caster])
    calls = [run.records[s]["calls"]["0"][0] for s in range(4)]
    assert all("error" not in c for c in calls), calls
    assert commentator.unreadable == 0
    spoken = {s for s, c in enumerate(calls) if c["name"] == "speak"}
    assert set(run.predictions["CASTER"]) == spoken
