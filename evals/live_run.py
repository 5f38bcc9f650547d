"""``embodia stream run``: one live stream, one or more proactive agents, a run folder.

``runs/NAME/`` gets ``config.yaml``; ``decisions.jsonl`` (one record per chunk, appended as
it is decided: scores, speaker, text, decide/gen/TTFT ms, real-time factor, backlog, late);
``predictions.jsonl`` and ``labels.jsonl`` in the reference's record format
(``{"video_id", "begin", "end", "pred" | "label": {sec: text}, "tag", ...}``, one
prediction record per agent, with its ``speaker``); ``summary.json`` (the Live Gaming
metrics of :mod:`embodia.evals.live` plus latency); ``stream.mp4`` (the stream with the
agents' lines burned in as subtitles) and ``timeline.png`` (predicted vs true speaking
seconds). A killed run resumes with ``--resume``: the recorded seconds are replayed, never
decided again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodia.agents.proactive import (
    DEFAULT_BUDGET,
    ChunkEvent,
    ContextBudget,
    HudSpeaker,
    PolicySpeaker,
    ProactiveAgent,
    PromptDecider,
    Speaker,
    ToolCommentator,
    run_stream,
)
from embodia.core.chat import (
    ContextOverflowError,
    Message,
    Policy,
    PolicyError,
    check_output_budget,
    count_prompt_tokens,
)
from embodia.core.limits import MAX_STREAM_AGENTS, check_range
from embodia.core.runs import RunFolder, jsonl_text, runner, write_atomic
from embodia.envs.streams.core import Stream, StreamError
from embodia.envs.streams.env import DEFAULT_TOKEN_CAP, LiveGamingEnv
from embodia.envs.streams.sources import check_scenario, open_stream

logger = logging.getLogger(__name__)

DECISIONS = "decisions.jsonl"

PERSONA = {
    "solo": (
        "You are {name}, a professional live game commentator. Speak in short lines about what just happened."
    ),
    "co-commentary": (
        "You are {name}, one of two live game commentators. Take turns with your co-caster; "
        "do not talk over them. Speak in short lines."
    ),
    "guidance": "You are {name}, a game guide. Answer the player's questions step by step, in short lines.",
}


@dataclass(frozen=True)
class LiveSettings:
    source: str
    scenario: str = "solo"
    agent: str = "heuristic"
    speaker: str = ""
    """Policy spec of the line writer; default: the agent's own VLM, or the HUD commentator."""
    agents: int = 1
    """Co-commentary self-play: this many agents share the stream (the co-caster's true lines
    are then not played)."""
    threshold: float | None = None
    token_cap: int = DEFAULT_TOKEN_CAP
    budget: int | None = None
    """Each agent's conversation, in the speaking model's tokens (words without a model);
    None: what the model's context leaves (see :func:`plan_context`), else 16,384."""
    fps: float = 2.0
    realtime: bool = False
    time_scale: float = 1.0
    video: bool = True

    def __post_init__(self) -> None:
        check_scenario(self.scenario)
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise StreamError(f"--threshold is a probability in [0, 1], got {self.threshold}")
        check_range("--agents", self.agents, 1, MAX_STREAM_AGENTS, StreamError)
        if self.budget is not None and self.budget < 1:
            raise StreamError(f"--budget must be at least 1, got {self.budget}")
        if self.agents > 1 and self.scenario != "co-commentary":
            raise StreamError("several agents share a stream only in the co-commentary scenario")


def make_speaker(spec: str, fallback: Any = None) -> Speaker:
    if spec:
        from embodia.core.chat import require_images
        from embodia.policies.spec import make_policy

        policy = make_policy(spec, connect=True)
        require_images(policy, "a stream speaker")
        return PolicySpeaker(policy)
    if fallback is not None:
        return PolicySpeaker(fallback)
    return HudSpeaker()


FRAME_TOKENS_GUESS = 256
"""Tokens a frame is taken to cost when the backend cannot count an image's tokens (vLLM
offline); more than a small VLM's image (Qwen2-VL: 4 per 28x28 pixels) at the stream sizes."""


@dataclass(frozen=True)
class ContextPlan:
    """How an agent's conversation is counted and bounded (see :func:`plan_context`)."""

    budget: int
    unit: str
    """``tokens`` (the speaking model's tokenizer) or ``words`` (no tokenizer to count with)."""
    measure: Callable[[Sequence[Message]], int] | None = None
    context: int | None = None
    """The speaking model's context window, when known."""
    frame_tokens: int = 0
    """Tokens the frames of one second add to the speaker's prompt."""

    def as_dict(self) -> dict[str, Any]:
        """The plan's numbers (the measure is a function: left out)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "measure"}


def plan_context(
    policy: Policy | None, settings: LiveSettings, system: str, frames: Sequence[Any] = ()
) -> ContextPlan:
    """The conversation budget of an agent whose lines ``policy`` writes (None: the HUD
    commentator, no model).

    With a model whose tokenizer the backend can use, the conversation is counted in its
    tokens, and the budget defaults to the context minus the reply (``--token-cap``) and the
    second's ``frames``; an explicit ``--budget`` that does not fit is refused. Without one
    (the HUD, a scripted policy, a server without ``/tokenize``) words are counted; a known
    context is then taken as two tokens a word.
    """
    if policy is None:
        return ContextPlan(settings.budget or DEFAULT_BUDGET, "words")
    window = check_output_budget(policy, settings.token_cap, "--token-cap")
    probe: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": "t=0"}]
    counted = count_prompt_tokens(policy, probe)
    unit = "words" if counted is None else "tokens"
    if window is None:
        if counted is None:
            logger.info("%s says no context length: counting words, budget %s", policy.name, DEFAULT_BUDGET)
        return ContextPlan(settings.budget or DEFAULT_BUDGET, unit, _measure(policy) if counted else None)
    frame_tokens = _frame_tokens(policy, frames) if frames else 0
    room = window.tokens - settings.token_cap - frame_tokens
    if counted is None:
        room //= 2
        logger.warning(
            "%s cannot count tokens here (no tokenizer, or a server without /tokenize): the context "
            "budget is counted in words, %d of them for %s",
            policy.name,
            room,
            window.describe(),
        )
    if settings.budget is not None and settings.budget > room:
        frames_part = f" and {frame_tokens} for the frames of a second" if frame_tokens else ""
        raise StreamError(
            f"--budget {settings.budget} does not fit {window.describe()}: with {settings.token_cap} "
            f"tokens for each line (--token-cap){frames_part}, at most {room} {unit} are left for the "
            f"conversation: lower --budget, or leave it out to use what the context leaves"
        )
    if room < 1:
        raise StreamError(
            f"{window.describe()} leaves no room for a conversation after {settings.token_cap} tokens for "
            f"each line (--token-cap) and {frame_tokens} for the frames of a second: {window.remedy}"
        )
    measure = _measure(policy) if counted is not None else None
    return ContextPlan(settings.budget or room, unit, measure, window.tokens, frame_tokens)


def _measure(policy: Policy) -> Callable[[Sequence[Message]], int]:
    def measure(messages: Sequence[Message]) -> int:
        counted = count_prompt_tokens(policy, messages)
        if counted is None:
            raise PolicyError(f"{policy.name} stopped counting tokens in the middle of a stream")
        return counted

    return measure


def _frame_tokens(policy: Policy, frames: Sequence[Any]) -> int:
    """Tokens one second's frames add to a prompt: counted by the backend, else guessed."""
    bare: list[Message] = [{"role": "user", "content": "t=0"}]
    try:
        with_frames = count_prompt_tokens(policy, bare, frames)
        without = count_prompt_tokens(policy, bare)
    except PolicyError as error:  # e.g. a server that does not take images in /tokenize
        logger.info("%s cannot count image tokens (%s)", policy.name, error)
        with_frames = without = None
    if with_frames is None or without is None:
        guess = FRAME_TOKENS_GUESS * len(frames)
        logger.warning(
            "%s cannot count image tokens: %d tokens are kept free for the %d frames of a second",
            policy.name,
            guess,
            len(frames),
        )
        return guess
    return with_frames - without


def make_agents(
    settings: LiveSettings, names: Sequence[str], frames: Sequence[Any] = ()
) -> list[ProactiveAgent]:
    """``heuristic``, ``gate:DIR`` (a trained gate; lines from its VLM, continuing the flag turn
    when the VLM was fine-tuned with the gate) or a chat policy spec
    (prompted SPEAK/SILENT; lines from the same policy). Each agent's conversation budget is
    planned for the model that writes its lines (:func:`plan_context`), which is shown the
    second's ``frames``."""
    agents = []
    shared_policy: Any = None
    gate: Any = None
    plan: ContextPlan | None = None
    for name in names:
        spec = settings.agent
        if spec == "heuristic":
            from embodia.agents.baselines.speaking import EventHeuristic

            decider: Any = EventHeuristic()
            speaker = make_speaker(settings.speaker)
        elif spec.startswith("gate:"):
            from embodia.policies.speak_gate import LearnedGate

            # Stateless, so the agents of a self-play run share one gate (and one VLM).
            gate = gate or LearnedGate.from_dir(spec.removeprefix("gate:"))
            decider = gate
            if gate.speaks and not settings.speaker:
                from embodia.policies.speak_gate import ProactSpeaker

                # fine-tuned with its gate: the same model continues the flag turn
                speaker = ProactSpeaker(gate)
            else:
                if shared_policy is None and not settings.speaker:
                    from embodia.policies.spec import make_policy

                    shared_policy = make_policy(f"hf:{decider.features.model_dir}")
                speaker = make_speaker(settings.speaker, shared_policy)
        else:
            from embodia.core.chat import require_images
            from embodia.policies.spec import make_policy

            tool_calling = spec.startswith("tools:")
            if shared_policy is None:
                shared_policy = make_policy(spec.removeprefix("tools:"), connect=True)
                require_images(shared_policy, "a stream agent")
            if tool_calling:  # one call a second decides and carries the line
                decider = speaker = ToolCommentator(shared_policy)
            else:
                decider = PromptDecider(shared_policy)
                speaker = make_speaker(settings.speaker, shared_policy)
        if settings.threshold is not None:
            decider.threshold = settings.threshold
        persona = PERSONA[settings.scenario].format(name=name)
        if plan is None:  # one speaking model for every agent
            writer = speaker.policy if isinstance(speaker, PolicySpeaker | ToolCommentator) else None
            plan = plan_context(writer, settings, persona, frames)
            logger.info("context budget: %s", plan.as_dict())
        budget = ContextBudget(persona, plan.budget, measure=plan.measure)
        agents.append(ProactiveAgent(name, decider, speaker, budget, settings.token_cap))
    return agents


def agent_names(stream: Stream, count: int) -> list[str]:
    """The active speaker first, then the co-casters of the annotation, then numbered ones."""
    names = [stream.annotation.speaker or "CASTER"]
    for line in stream.annotation.other_lines():
        if line.speaker not in names:
            names.append(line.speaker)
    names += [f"SPEAKER_{i}" for i in range(len(names), count + 1) if f"SPEAKER_{i}" not in names]
    return names[:count]


class _SelfPlayStream(Stream):
    """A co-commentary stream whose co-caster is played by agents: their true lines are not
    heard (the agents hear each other instead)."""

    def chunk(self, second: int) -> Any:
        return dataclasses.replace(super().chunk(second), history=())


@runner
def run_live(
    settings: LiveSettings,
    out: Path,
    *,
    resume: bool = False,
    on_event: Callable[[ChunkEvent], None] | None = None,
) -> dict[str, Any]:
    """Run the stream into ``out`` and return the summary (also written to summary.json);
    ``on_event`` gets each second's decision as it is made (a :class:`ChunkEvent`)."""
    folder = RunFolder(out, DECISIONS)
    folder.begin(asdict(settings), resume)
    stream = open_stream(settings.source, settings.scenario, settings.fps)
    if settings.agents > 1:
        stream = _SelfPlayStream(stream.source, stream.annotation, stream.fps)
    names = agent_names(stream, settings.agents)
    agents = make_agents(settings, names, stream.chunk(stream.begin).frames)
    # The agents' conversations run second by second: a lost second cannot be skipped over.
    replay = folder.kept_records("second", stream.begin, "seconds")
    env = LiveGamingEnv(  # built before the folder is: a setting it refuses leaves nothing behind
        stream=stream,
        scenario=settings.scenario,
        token_cap=settings.token_cap,
        realtime=settings.realtime,
        time_scale=settings.time_scale,
    )
    budget = agents[0].budget
    config = {
        "settings": asdict(settings),
        "agents": names,
        "context": {"budget": budget.max_tokens, "unit": budget.unit},
    }
    with folder.recording(replay, config) as log:
        try:
            run = run_stream(
                env, agents, record=log.append, replay=replay, on_event=on_event, keep_records=False
            )
        except ContextOverflowError as error:
            second = stream.begin if log.last is None else int(log.last["second"]) + 1
            raise error.naming(
                f"second {second}", output_flag=None, prompt_advice="lower --budget"
            ) from error
    played = Played(stream, settings, names, run.predictions, folder.read_records())
    return write_outputs(folder, played, [_decider_summary(agent) for agent in agents])


def _decider_summary(agent: ProactiveAgent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "agent": agent.name,
        "decider": agent.decider.name,
        "threshold": agent.decider.threshold,
    }
    if hasattr(agent.decider, "unreadable"):  # a prompted decider's replies that said neither word
        out["unreadable"] = int(agent.decider.unreadable)
    out["context_tokens"] = agent.budget.tokens
    out["context_unit"] = agent.budget.unit
    out["context_budget"] = agent.budget.max_tokens
    out["evicted_turns"] = agent.budget.evicted_turns
    return out


@dataclass(frozen=True)
class Played:
    """A stream played to its end: what a run's outputs are made of."""

    stream: Stream
    settings: LiveSettings
    names: Sequence[str]
    """The agents, the first one's lines the prediction that is scored."""
    predictions: dict[str, dict[int, str]]
    """Each agent's lines by second."""
    records: Sequence[dict[str, Any]]
    """The decision records, one per second."""


def write_outputs(
    folder: RunFolder, played: Played, deciders: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """Predictions and labels (the reference's record format), the pictures, and last the
    summary, which marks the run finished."""
    from embodia.evals import live

    settings, names, records = played.settings, played.names, played.records
    label_record = played.stream.annotation.label_record()
    base = {k: label_record[k] for k in ("video_id", "begin", "end", "tag", "dataset_name", "idx")}
    pred_records = [
        {**base, "pred": {str(k): v for k, v in sorted(played.predictions[name].items())}, "speaker": name}
        for name in names
    ]
    if len(names) > 1:
        # The other agents of a self-play run (the record's own ``pred`` is the first agent's).
        pred_records[0]["agents"] = {name: pred_records[i]["pred"] for i, name in enumerate(names) if i}
    chunk_seconds = settings.time_scale if settings.realtime else 1.0
    pred_records[0]["timing"] = [
        {"processing_s": float(r.get("processing_ms", 0.0)) / 1000, "stream_s": chunk_seconds}
        for r in records
    ]
    write_atomic(folder.out / "predictions.jsonl", jsonl_text(pred_records))
    write_atomic(folder.out / "labels.jsonl", jsonl_text([label_record]))
    report = live.evaluate([pred_records[0]], [label_record], judge=live.LexicalJudge())
    report.pop("clips", None)
    summary = {
        "source": settings.source,
        "scenario": settings.scenario,
        "agent": settings.agent,
        "agents": list(names),
        "seconds": len(played.stream),
        "spoken_seconds": len(played.predictions[names[0]]),
        "label_seconds": len(played.stream.label),
        **report["summary"],
        "metrics": report,
        "latency": latency_summary(records, chunk_seconds),
        "dropped": sum(1 for r in records if r.get("late")),
        "deciders": list(deciders),
    }
    _write_media(folder.out, played)
    folder.finish("summary.json", summary, default=float)  # last: a summary marks a finished run
    return summary


def latency_summary(records: Sequence[dict[str, Any]], chunk_seconds: float = 1.0) -> dict[str, Any]:
    """Per-chunk latency statistics; ``rtf`` is processing time over the stream time of the
    chunks decided (``chunk_seconds`` wall seconds each: ``time_scale`` in real time)."""

    def stats(key: str) -> dict[str, float]:
        values = np.asarray([r[key] for r in records if r.get(key) is not None], dtype=float)
        if values.size == 0:
            return {}
        return {
            "mean": float(values.mean()),
            "p50": float(np.percentile(values, 50)),
            "p90": float(np.percentile(values, 90)),
            "max": float(values.max()),
        }

    processing = sum(float(r.get("processing_ms", 0.0)) for r in records) / 1000
    return {
        "decide_ms": stats("decide_ms"),
        "gen_ms": stats("gen_ms"),
        "ttft_ms": stats("ttft_ms"),
        "rtf": processing / (max(1, len(records)) * chunk_seconds),
        "decision_s": stats("decision_s"),
        "max_backlog_s": max((float(r.get("backlog_s", 0.0)) for r in records), default=0.0),
    }


def _write_media(out: Path, played: Played) -> None:
    """``timeline.png`` (predicted vs true speaking seconds) and, with ``video``, ``stream.mp4``."""
    from embodia.envs.streams import media

    stream, settings, names, predictions = played.stream, played.settings, played.names, played.predictions
    main = predictions[names[0]]
    rows: dict[str, set[int]] = {}
    if settings.scenario == "co-commentary":
        rows["co-caster (true)"] = {line.start for line in stream.annotation.other_lines()}
        for name in names[1:]:
            rows[f"{name} (pred)"] = set(predictions[name])
    if settings.scenario == "guidance":
        rows["queries"] = {q.start for q in stream.annotation.queries()}
    late = {int(r["second"]) for r in played.records if r.get("late")}
    if late:
        rows["dropped (late)"] = late
    media.timeline_png(
        set(main),
        set(stream.label),
        out / "timeline.png",
        duration=len(stream),
        begin=stream.begin,
        title=f"{settings.scenario}: {settings.agent} on {settings.source}",
        extra_rows=rows or None,
    )
    if settings.video:
        utterances = [
            media.Utterance(second, name, text)
            for name in names
            for second, text in sorted(predictions[name].items())
        ]
        media.write_subtitled_video(stream, utterances, out / "stream.mp4", labels=stream.label)
