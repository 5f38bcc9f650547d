"""Exploration runs: an agent drives ``embodia/ActiveMapping-v0`` and the run is recorded.

A run directory holds ``config.yaml`` (written once the run is validated, with the run id
that names its checkpoint thread), ``episodes.jsonl`` (one line per
decision, flushed as it goes: a primitive step, or in the waypoint env a candidate and the
primitive steps its path spent; ``steps`` in each line counts primitive steps), and at the
end ``summary.json``, ``bev.png``, ``coverage.png`` and ``episode.mp4`` (panorama and BEV
side by side). A killed run resumes:
the episode is replayed from its seed with the same agent, each replayed step is checked
against its record, and recording continues where it stopped. Evaluations over a set of
scenes are a run per scene plus a summary of means and standard deviations.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from embodia.agents.explorer_schema import ExplorerProgress
from embodia.core.limits import MAX_SET_SIZE, MAX_STEPS, check_image_size, check_range, check_seed
from embodia.core.runs import (
    RunFolder,
    read_config,
    runner,
    set_aside,
    write_config,
)
from embodia.core.scale_out import LOCAL, Backend, Unit, UnitFailed, WorkerPool
from embodia.errors import EmbodiaError
from embodia.evals.explore_media import VideoWriter, write_pictures, write_tree
from embodia.sim.backends import check_simulator_kind, simulator_factory
from embodia.sim.loading import UpAxis

logger = logging.getLogger(__name__)

MEASURES = ("coverage_m2", "coverage_ratio", "coverage_auc", "path_length", "collisions", "steps")
ENV_IDS = {"primitive": "embodia/ActiveMapping-v0", "waypoint": "embodia/ActiveMappingWaypoint-v0"}
EPISODES, CHECKPOINT = "episodes.jsonl", "checkpoint.sqlite"
_SEEDS = re.compile(r"^procedural:seeds=(\d{1,12})-(\d{1,12})((?:,[a-z_]+=[^,]+)*)$")


DEFAULT_MAX_FALLBACK_SHARE = 0.5
"""Default of ``--max-fallback-share``: past half, a run's numbers describe the fallback rule
more than the model. A working model falls back far less: a decision falls back only after
``max_retries + 1`` unusable replies in a row."""
FALLBACK_CHECK_AFTER = 10
"""Decisions asked of the policy before the share is checked during a run (a few early
fallbacks must not end it); the end of a run checks whatever the count."""


class FallbackShareError(EmbodiaError):
    """Too many of a run's policy decisions fell back to the best-gain waypoint."""


@dataclass
class FallbackLimit:
    """Ends a run whose policy decisions mostly fell back to the best-gain waypoint (a model
    whose replies cannot be used, a server that refuses the requests): such a run would
    finish with exit 0 and the numbers of the fallback rule under the model's name."""

    max_share: float = DEFAULT_MAX_FALLBACK_SHARE
    policy: str = "the policy"
    records: str = "episodes.jsonl"
    """Where the decisions go, named in the error."""
    check_after: int = FALLBACK_CHECK_AFTER
    decisions: int = 0
    """Decisions the policy was asked for."""
    reasons: Counter[str] = field(default_factory=Counter)
    """Fallbacks by the reason that ended them (the last failed attempt's), numbers masked so
    that "the prompt has 1139 tokens" and "... 1057 tokens" count as one reason."""
    examples: dict[str, str] = field(default_factory=dict)
    """The latest reason as written, for each masked one."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_share <= 1.0:
            raise EmbodiaError(f"--max-fallback-share is a share in [0, 1], got {self.max_share}")

    @property
    def fallbacks(self) -> int:
        return sum(self.reasons.values())

    def count(self, record: Mapping[str, Any]) -> None:
        """Count a decision record (as written to ``episodes.jsonl``) if the policy made it."""
        choice = record.get("choice") or {}
        if choice.get("by") != "vlm":
            return
        self.decisions += 1
        if choice.get("fallback"):
            failures = [str(a["failure"]) for a in record.get("attempts") or () if a.get("failure")]
            reason = " ".join(failures[-1].split()) if failures else "no usable reply"
            reason = reason if len(reason) <= 240 else reason[:237] + "..."
            key = re.sub(r"\d+", "#", reason)
            self.reasons[key] += 1
            self.examples[key] = reason

    def observe(self, record: Mapping[str, Any]) -> None:
        """Count a decision the run just made and check the share (the explorer's hook)."""
        self.count(record)
        self.check()

    def check(self, *, final: bool = False) -> None:
        """Raise :class:`FallbackShareError` when more than ``max_share`` of the decisions fell
        back: during a run once ``check_after`` decisions were made, at its end whatever the count."""
        fallbacks = self.fallbacks
        if not self.decisions or (not final and self.decisions < self.check_after):
            return
        if fallbacks <= self.max_share * self.decisions:
            return
        key, times = self.reasons.most_common(1)[0]
        raise FallbackShareError(
            f"{fallbacks} of {self.decisions} decisions of {self.policy} fell back to the best-gain "
            f"waypoint ({fallbacks / self.decisions:.0%}), more than --max-fallback-share "
            f"{self.max_share:g} allows; the most common reason ({times} of the {fallbacks}): "
            f"{self.examples[key]}. The decisions made are in {self.records}; to finish the run "
            "anyway, rerun it with --resume --max-fallback-share 1"
        )


@dataclass(frozen=True)
class ExploreSettings:
    """Everything that determines an exploration run (saved as ``config.yaml``)."""

    agent: str
    """``frontier``, ``frontier-utility``, ``tour`` or ``random`` (agents.baselines.AGENTS)."""
    env: str = ""
    """``primitive`` (ActiveMapping-v0) or ``waypoint`` (ActiveMappingWaypoint-v0); empty
    picks the agent's own (``waypoint`` for ``dfs``, else ``primitive``)."""
    policy: str = "heuristic"
    """``dfs`` only: ``heuristic`` or a chat-policy spec (``openai:...``, ``hf:...``)."""
    instruction: str = ""
    """``dfs`` only: a language instruction that steers the exploration."""
    tool_choice: Literal["required", "auto"] = "required"
    """``dfs`` with a chat policy: ``required`` makes every reply a tool call (decoded under the
    tools' schemas where the backend can); ``auto`` lets the model answer in text too."""
    scene: str | None = None
    """Scene spec; None draws a procedural house from ``seed``."""
    up: UpAxis = "auto"
    """Up axis of a mesh-file scene: ``auto`` (stage config, else detected), ``y`` or ``z``."""
    sim: str = "embedded"
    """Simulator backend: ``embedded`` (embodia's CPU simulator) or ``habitat`` (habitat-sim)."""
    steps: int = 500
    """Step budget in primitive actions (500 and 1000 are the literature's)."""
    seed: int = 0
    rooms: int = 4
    """Rooms of the drawn procedural house when ``scene`` is None."""
    panorama_height: int = 128
    panorama_width: int = 256
    video: bool = True

    def __post_init__(self) -> None:
        if not self.env:
            object.__setattr__(self, "env", "waypoint" if self.agent == "dfs" else "primitive")
        if self.agent == "dfs" and self.env != "waypoint":
            raise EmbodiaError("the dfs agent picks panorama waypoints: it runs in the waypoint env only")
        if self.env not in ENV_IDS:
            raise EmbodiaError(f"unknown env {self.env!r}: expected one of {', '.join(ENV_IDS)}")
        if self.tool_choice not in ("required", "auto"):
            raise EmbodiaError(f"unknown tool choice {self.tool_choice!r}: expected required or auto")
        check_simulator_kind(self.sim, self.up)
        check_range("the step budget", self.steps, 1, MAX_STEPS)
        check_seed("the episode seed", self.seed)
        if self.panorama_height < 8 or self.panorama_width < 16:
            raise EmbodiaError(
                f"panorama must be at least 8x16 pixels, got {self.panorama_height}x{self.panorama_width}"
            )
        check_image_size("the panorama", self.panorama_height, self.panorama_width)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExploreSettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def scene_set(spec: str) -> list[str]:
    """Expand ``procedural:seeds=A-B[,key=value...]`` into one spec per seed; else ``[spec]``."""
    match = _SEEDS.match(spec.strip())
    if match is None:
        if "seeds=" in spec:
            raise EmbodiaError(f"invalid scene set {spec!r}: expected procedural:seeds=A-B[,rooms=K]")
        return [spec]
    first, last, rest = int(match.group(1)), int(match.group(2)), match.group(3)
    if last < first:
        raise EmbodiaError(f"invalid scene set {spec!r}: seed range {first}-{last} is empty")
    check_seed(f"the last seed of {spec!r}", last)
    check_range(f"the number of seeds in {spec!r}", last - first + 1, 1, MAX_SET_SIZE)
    return [f"procedural:seed={s}{rest}" for s in range(first, last + 1)]


class _EnvView:
    """What an agent may read of the env (its own BEV and its body), see EpisodeView."""

    def __init__(self, env: Any) -> None:
        self._env = env

    @property
    def bev(self) -> Any:
        return self._env.bev

    @property
    def sim_config(self) -> Any:
        return self._env.simulator.config


def _make_env(settings: ExploreSettings) -> Any:
    import gymnasium

    import embodia.envs  # noqa: F401  (registers the ids)

    extra: dict[str, Any] = {"action_type": "pixel"} if settings.agent == "dfs" else {}
    return gymnasium.make(
        ENV_IDS[settings.env],
        **extra,
        simulator_factory=simulator_factory(settings.sim, settings.up),
        max_steps=settings.steps,
        rooms=settings.rooms,
        panorama_height=settings.panorama_height,
        panorama_width=settings.panorama_width,
    )


def _reset_env(settings: ExploreSettings) -> tuple[Any, tuple[Any, dict[str, Any]]]:
    """Make the env and reset it to the run's scene and seed: (env, (observation, info)).
    This loads the scene, so a bad scene spec is refused before the run folder is touched."""
    env = _make_env(settings)
    options = {"scene": settings.scene} if settings.scene else None
    try:
        return env, env.reset(seed=settings.seed, options=options)
    except BaseException:
        env.close()
        raise


StepCallback = Callable[[int, dict[str, Any]], None]
ProgressCallback = Callable[[ExplorerProgress], None]


@runner
def run_exploration(
    settings: ExploreSettings,
    out: Path,
    *,
    resume: bool = False,
    on_step: StepCallback | None = None,
    on_event: ProgressCallback | None = None,
    max_fallback_share: float = DEFAULT_MAX_FALLBACK_SHARE,
) -> dict[str, Any]:
    """Run (or resume) one recorded exploration episode; returns its summary.

    ``on_step(decision, record)`` follows the progress; ``on_event`` gets the dfs agent's
    custom stream events as they happen (``token``: a piece of a VLM reply, ``select``: the
    waypoint it chose, ``navigate``, ``observe``).

    With a chat policy (the dfs agent), the policy's model must take images (checked before
    the run starts), and the run fails with :class:`FallbackShareError` when more than
    ``max_fallback_share`` of its decisions fell back to the best-gain waypoint (checked from
    the tenth decision on and at the end; the records written so far stay, and ``--resume``
    continues). The share is not a setting of the run: a resume may change it.
    """
    out = Path(out)
    limit = FallbackLimit(max_fallback_share, policy=settings.policy, records=str(out / EPISODES))
    folder = RunFolder(out, EPISODES)
    # Before anything else, even for a finished run: new arguments are never silently ignored.
    folder.begin(asdict(settings), resume)
    summary = folder.finished()
    if summary is not None:
        return summary
    if settings.agent == "dfs":
        return _run_dfs(settings, folder, on_step=on_step, on_event=on_event, limit=limit)
    return _run_primitive(settings, folder, on_step)


def _run_primitive(
    settings: ExploreSettings, folder: RunFolder, on_step: StepCallback | None
) -> dict[str, Any]:
    """A baseline agent's episode, one record per decision: a primitive step, or in the
    waypoint env a waypoint and the steps it spent. A resume replays the episode from its
    seed, checking each replayed step against its record."""
    from embodia.agents.baselines import make_agent

    records = folder.kept_records("step", 1, "steps")
    agent = make_agent(settings.agent)
    started = time.perf_counter()
    env, (observation, info) = _reset_env(settings)
    try:
        config = {"command": "explore", "settings": asdict(settings)}
        with folder.recording(records, config) as log:
            base = env.unwrapped
            agent.reset(_EnvView(base), seed=settings.seed)
            video = VideoWriter(folder.out / "episode.mp4") if settings.video else None
            curve = [float(info["coverage_ratio"])]
            if video:
                video.add(observation["rgb"], base)
            for t in range(1, settings.steps + 1):
                action = agent.act(observation, info)
                observation, reward, terminated, truncated, info = env.step(action)
                record = _step_record(t, action, observation, float(reward), info)
                if t <= len(records):
                    _check_replay(records[t - 1], record, folder.out)
                else:
                    log.append(record)
                curve.append(float(info["coverage_ratio"]))
                if video:
                    video.add(observation["rgb"], base)
                if on_step is not None:
                    on_step(t, record)
                if terminated or truncated:
                    break
            if video:
                video.close()
        summary = _summarise(settings, base, info, curve, time.perf_counter() - started)
        write_pictures(folder.out, base, _step_curve(base), summary)
        _write_summary(folder, summary)
        return summary
    finally:
        env.close()


def _write_summary(folder: RunFolder, summary: dict[str, Any]) -> None:
    """``summary.json``, last and atomically: its presence marks the run finished."""
    summary["files"] = sorted(p.name for p in folder.out.iterdir() if p.is_file())
    folder.finish("summary.json", summary)


def _step_record(
    t: int, action: int, observation: dict[str, Any], reward: float, info: dict[str, Any]
) -> dict[str, Any]:
    from embodia.sim.protocol import ACTIONS

    chosen: dict[str, Any]
    if "candidate_mask" in observation:  # the waypoint env: the candidate and how it went
        chosen = {"candidate": int(action), "rejection": info.get("rejection")}
    else:
        chosen = {"action": ACTIONS[int(action)]}
    return {
        "step": t,
        **chosen,
        "pose": [round(float(v), 6) for v in observation["pose"]],
        "reward": round(reward, 6),
        **{k: _plain(info[k]) for k in MEASURES if k in info},
    }


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, float)):
        return round(float(value), 6)
    if isinstance(value, (np.integer, int)):
        return int(value)
    return value


def _check_replay(saved: dict[str, Any], replayed: dict[str, Any], out: Path) -> None:
    for key in ("action", "candidate", "pose", "reward"):
        if saved.get(key) != replayed.get(key):
            raise EmbodiaError(
                f"cannot resume {out}: step {replayed['step']} replays with {key}={replayed.get(key)!r} "
                f"but was recorded as {saved.get(key)!r} (the code or the scene changed since)"
            )


def _step_curve(env: Any) -> list[float]:
    """Coverage ratio after the reset observation and after every primitive step."""
    return [float(env.coverage.initial_ratio), *map(float, env.coverage.curve)]


def _run_dfs(
    settings: ExploreSettings,
    folder: RunFolder,
    *,
    on_step: StepCallback | None,
    on_event: ProgressCallback | None,
    limit: FallbackLimit,
) -> dict[str, Any]:
    """The depth-first explorer as a LangGraph run with a SQLite checkpoint per decision.

    A resume continues from the checkpoint, with the decision records the checkpoint holds.
    When the two disagree the records win, never silently: records lost after a gap (or a
    whole lost ``episodes.jsonl``) are made again from the checkpoint at the last record kept;
    an unreadable checkpoint is set aside (``checkpoint.sqlite.corrupt``) and, like a missing
    one, means starting over, with the old records set aside too. Each case is a warning
    that names the decisions to be made again.
    """
    from embodia.agents.explorer import ExplorerConfig, ExplorerContext, build_explorer_graph, replay
    from embodia.agents.runtime import RunRecorder, new_run_id, run_config, sqlite_checkpointer, stream_run
    from embodia.core.chat import ContextOverflowError

    out, checkpoint = folder.out, folder.out / CHECKPOINT
    policy = _dfs_policy(settings.policy)
    records = folder.kept_records("decision", 1, "decisions")
    run_id = _resumed_run_id(out) if folder.resuming else new_run_id()
    started = time.perf_counter()
    env, _ = _reset_env(settings)
    try:
        with folder.creating():
            restart = _unusable_checkpoint(checkpoint) if folder.resuming else None
            base = env.unwrapped
            video = VideoWriter(out / "episode.mp4") if settings.video else None
            frame = (lambda e: video.add(e._panorama_picture(), e)) if video else None
            with sqlite_checkpointer(checkpoint) as saver:
                graph = build_explorer_graph().compile(checkpointer=saver)
                config = run_config(run_id)
                saved: dict[str, Any] = {}
                if folder.resuming and restart is None:
                    run_id, config, saved, restart = _saved_state(
                        graph, run_id, checkpoint, len(records), folder.log
                    )
                if restart is not None:
                    records = _start_over(folder.log, records, restart)
                write_config(out, {"command": "explore", "run_id": run_id, "settings": asdict(settings)})
                done = int(saved.get("decision", 0))
                recorder = RunRecorder(folder.log, keep_decisions=done, records=records)
                for record in records:  # the decisions the resume keeps count towards the share
                    if int(record["decision"]) <= done:
                        limit.count(record)
                context = ExplorerContext(
                    env=base,
                    policy=policy,
                    instruction=settings.instruction,
                    config=ExplorerConfig(tool_choice=settings.tool_choice),
                    recorder=recorder,
                    on_frame=frame,
                    check_record=limit.observe,
                )
                if frame:
                    frame(base)
                if saved:
                    replay(context, saved.get("events", []))
                    logger.info("resuming %s at decision %d", out, done)
                try:
                    start = None if saved else {"decision": 0, "events": []}
                    state = stream_run(graph, start, config, context, _progress(on_step, on_event))
                except ContextOverflowError as error:
                    # the prompt is mostly the two images: the panorama's size sets its tokens
                    decision = max((int(r.get("decision", 0)) for r in folder.read_records()), default=0)
                    raise error.naming(
                        f"decision {decision + 1}",
                        output_flag=None,
                        prompt_advice="lower --height and --width",
                    ) from error
                finally:
                    recorder.close()
            if video:
                video.close()
            limit.check(final=True)  # a short run never reached the in-run check
        return _finish_dfs(settings, folder, base, state, policy is not None, time.perf_counter() - started)
    finally:
        env.close()


def _dfs_policy(spec: str) -> Any:
    """The dfs explorer's chat policy (None: the heuristic), connected and checked to take
    images and to leave room in its context for a reply."""
    from embodia.agents.explorer import ExplorerConfig
    from embodia.core.chat import check_output_budget, require_images
    from embodia.policies import make_policy

    if spec == "heuristic":
        return None
    policy = make_policy(spec, connect=True)
    require_images(policy, "the dfs explorer")
    check_output_budget(policy, ExplorerConfig().max_tokens, None, what="--policy")
    return policy


def _unusable_checkpoint(checkpoint: Path) -> str | None:
    """Why a resumed run cannot continue from ``checkpoint`` (None when it can): an unreadable
    one is set aside first."""
    from embodia.agents.runtime import checkpoint_problem

    problem = checkpoint_problem(checkpoint)
    if problem is not None:
        aside = _set_checkpoint_aside(checkpoint)
        return f"{checkpoint} is unreadable ({problem}); moved to {aside.name}"
    return None if checkpoint.exists() else f"{checkpoint} is missing"


def _saved_state(
    graph: Any, run_id: str, checkpoint: Path, recorded: int, log_path: Path
) -> tuple[str, dict[str, Any], dict[str, Any], str | None]:
    """Where a resumed run picks up: ``(run id, graph config, saved state, None)``, or with an
    empty state and why the run starts over instead (in a new checkpoint thread when the old
    one cannot serve: it is kept, untouched)."""
    from embodia.agents.runtime import new_run_id, run_config

    config = run_config(run_id)
    saved = dict(graph.get_state(config).values)
    if not saved:
        return run_id, config, {}, f"{checkpoint} holds no checkpoint of run {run_id}"
    if int(saved.get("decision", 0)) <= recorded:
        return run_id, config, saved, None
    config, saved, restart = _rewind(graph, config, saved, recorded, log_path)
    if restart is None:
        return run_id, config, saved, None
    run_id = new_run_id()
    return run_id, run_config(run_id), {}, restart


def _start_over(log_path: Path, records: list[dict[str, Any]], restart: str) -> list[dict[str, Any]]:
    """No records kept for a run that starts over (``restart`` says why): those recorded are
    set aside beside the log, and the warning names them."""
    if not records:
        logger.info("%s; nothing was recorded, so the run starts from the beginning", restart)
        return []
    kept = set_aside(log_path, "before-restart")
    logger.warning(
        "%s; decisions 1-%d recorded in %s will be made again (the old records are kept as %s)",
        restart,
        len(records),
        log_path.name,
        kept.name,
    )
    return []


def _progress(
    on_step: StepCallback | None, on_event: ProgressCallback | None
) -> Callable[[dict[str, Any]], None] | None:
    """The graph's stream listener: custom events to ``on_event``, and each navigation's
    decision, steps and coverage to ``on_step``; None when nobody listens."""
    if on_step is None and on_event is None:
        return None

    def progress(event: dict[str, Any]) -> None:
        if event["type"] != "custom":
            return
        data = cast(ExplorerProgress, event["data"])
        if on_event is not None:
            on_event(data)
        if on_step is not None and data["event"] == "navigate":
            on_step(int(data["decision"]), {"steps": data["steps"], "coverage_ratio": data["coverage_ratio"]})

    return progress


def _finish_dfs(
    settings: ExploreSettings, folder: RunFolder, env: Any, state: dict[str, Any], by_vlm: bool, wall_s: float
) -> dict[str, Any]:
    """The summary (with the VLM's counts when a chat policy decided), pictures and tree."""
    summary = _summarise(settings, env, env._info(), _step_curve(env), wall_s)
    summary["decisions"] = int(state.get("decision", 0))
    summary["policy"] = settings.policy
    summary["instruction"] = settings.instruction
    if by_vlm:
        summary["vlm"] = vlm_counts(folder.read_records())
    write_pictures(folder.out, env, _step_curve(env), summary)
    write_tree(folder.out, env, state)
    _write_summary(folder, summary)
    return summary


def _resumed_run_id(out: Path) -> str:
    """The checkpoint thread of the run in ``out``: its ``config.yaml``'s ``run_id``. A run
    started before run ids has none; its thread was named after its folder then, so the
    checkpoint's only thread is taken (the folder may have been renamed since), else the
    folder's name."""
    from embodia.agents.runtime import checkpoint_problem, checkpoint_threads

    run_id = read_config(out).get("run_id")
    if isinstance(run_id, str) and run_id:
        return run_id
    checkpoint = out / CHECKPOINT
    threads = checkpoint_threads(checkpoint) if checkpoint_problem(checkpoint) is None else []
    found = threads[0] if len(threads) == 1 else (out.name or "run")
    logger.warning(
        "%s has no run_id (the run was started by an older embodia); resuming checkpoint thread %r, "
        "which is saved as its run_id from now on",
        out / "config.yaml",
        found,
    )
    return found


def _set_checkpoint_aside(checkpoint: Path) -> Path:
    """Keep an unreadable checkpoint as ``checkpoint.sqlite.corrupt``, with its WAL files, so
    that a new database cannot pick them up."""
    aside = set_aside(checkpoint, "corrupt")
    for suffix in ("-wal", "-shm"):
        companion = checkpoint.with_name(checkpoint.name + suffix)
        if companion.exists():
            companion.replace(aside.with_name(aside.name + suffix))
    return aside


def _rewind(
    graph: Any, config: dict[str, Any], saved: dict[str, Any], recorded: int, log_path: Path
) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """The checkpoint holds more decisions than the records (records were lost): go back to
    its checkpoint after decision ``recorded``, so that the lost decisions are made again and
    recorded. Returns (config, state, None), or (config, {}, why) when there is no such
    checkpoint and the run must start over."""
    held = int(saved.get("decision", 0))
    for snapshot in graph.get_state_history(config):
        values = snapshot.values or {}
        if snapshot.next and int(values.get("decision", -1)) == recorded and "events" in values:
            logger.warning(
                "%s holds %s but the checkpoint is at decision %d: decisions %d-%d will be made again, "
                "from the checkpoint after decision %d",
                log_path,
                f"decisions 1-{recorded}" if recorded else "no decision",
                held,
                recorded + 1,
                held,
                recorded,
            )
            return snapshot.config, dict(values), None
    return config, {}, f"the checkpoint has no state after decision {recorded}, the last one recorded"


def vlm_counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How the VLM did over an episode's decision records: decisions it made, those that fell
    back to the best-gain waypoint, its replies and the ones that could not be used, its tool
    calls and the calls that failed validation."""
    asked = [r for r in records if r.get("choice", {}).get("by") == "vlm"]
    return {
        "decisions": len(asked),
        "fallbacks": sum(bool(r["choice"].get("fallback")) for r in asked),
        "replies": sum(len(r.get("attempts", [])) for r in asked),
        "failed_replies": sum(1 for r in asked for a in r.get("attempts", []) if a.get("failure")),
        "tool_calls": sum(int(r["choice"].get("tool_calls", 0)) for r in asked),
        "tool_errors": sum(int(r["choice"].get("tool_errors", 0)) for r in asked),
    }


def _summarise(
    settings: ExploreSettings, env: Any, info: dict[str, Any], curve: list[float], wall_s: float
) -> dict[str, Any]:
    scene = env.simulator.scene
    return {
        "agent": settings.agent,
        "env": settings.env,
        "scene": scene.source,
        "seed": settings.seed,
        "budget": settings.steps,
        "explorable_m2": _plain(info.get("explorable_m2")),
        **{k: _plain(info[k]) for k in MEASURES if k in info},
        "wall_s": round(wall_s, 2),
    }


# ---------------------------------------------------------------------- evaluation


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", spec).strip("-")[:80] or "scene"


EVAL_SCENES = "scenes.jsonl"
"""An evaluation's records: one line per scene run (its summary, or the error that failed it)."""


def evaluate_exploration(
    agent: str,
    scenes: Sequence[str],
    out: Path,
    *,
    steps: int = 500,
    up: UpAxis = "auto",
    sim: str = "embedded",
    panorama_height: int = 128,
    panorama_width: int = 256,
    on_scene: Callable[[dict[str, Any], int, int], None] | None = None,
    backend: Backend = LOCAL,
) -> dict[str, Any]:
    """One run per scene under ``out`` (``NNN-SCENE/``), and the means over them; it resumes:
    scenes already recorded are not run again, and a scene cut short locally continues.

    Each scene is one unit of ``backend`` (:mod:`embodia.core.scale_out`). Locally a scene's
    run folder is written in place as it goes; on Ray a worker runs the scene in a folder of
    its own and sends the files back, and they land in the same ``NNN-SCENE/``. Either way
    ``scenes.jsonl`` gets a line per scene as it finishes (``on_scene(record, done, total)``
    follows them): its summary, or, for a scene that cannot be run (a file that does not
    load), the error, which the final summary lists under ``failures``; a resume tries those
    again.
    """
    if not scenes:
        raise EmbodiaError("no scenes to evaluate")
    out = Path(out)
    folder = RunFolder(out, EVAL_SCENES)
    simulator_factory(sim, up)  # a backend that is not installed stops the run here
    runs = [  # every scene's settings checked before anything is written
        ExploreSettings(
            agent=agent,
            scene=spec,
            up=up,
            sim=sim,
            steps=steps,
            panorama_height=panorama_height,
            panorama_width=panorama_width,
            video=False,
        )
        for spec in scenes
    ]
    settings = {
        "agent": agent,
        "scenes": list(scenes),
        "steps": steps,
        "up": up,
        "sim": sim,
        "panorama_height": panorama_height,
        "panorama_width": panorama_width,
    }
    folder.begin(settings, resume=True)
    kept = folder.kept_records()
    latest = {int(r["index"]): r for r in kept if isinstance(r.get("index"), int)}  # a retry's line wins
    names = [f"{index:03d}-{_slug(spec)}" for index, spec in enumerate(scenes)]
    todo = [
        Unit(names[index], (index, run))
        for index, run in enumerate(runs)
        if "summary" not in latest.get(index, {})
    ]
    ship = backend.kind != "local"
    done = len(scenes) - len(todo)
    with folder.recording(kept, {"command": "eval explore", "settings": settings}) as log:

        def record(index: int, entry: dict[str, Any]) -> None:
            nonlocal done
            line = {"index": index, "scene": scenes[index], "run": names[index], **entry}
            log.append(line)
            latest[index] = line
            done += 1
            if on_scene is not None:
                on_scene(line, done, len(scenes))

        def finished(name: str, result: tuple[dict[str, Any], dict[str, bytes] | None]) -> None:
            summary, files = result
            if files is not None:
                _place_run(out / name, files)
            record(names.index(name), {"summary": summary})

        def failed(name: str, message: str) -> None:
            record(names.index(name), {"error": message})

        with WorkerPool(partial(_scene_worker, out, ship), backend) as pool:
            pool.run(todo, finished, failed)
    ordered = [latest[index] for index in range(len(scenes))]
    result = {
        "agent": agent,
        "budget": steps,
        "scenes": list(scenes),
        "measures": aggregate([r["summary"] for r in ordered if "summary" in r]),
        "failures": [{"scene": r["scene"], "error": r["error"]} for r in ordered if "error" in r],
    }
    folder.finish("summary.json", result)
    return result


SceneResult = tuple[dict[str, Any], dict[str, bytes] | None]


def _scene_worker(out: Path, ship: bool) -> Callable[[tuple[int, ExploreSettings], object], SceneResult]:
    """What runs one scene of an evaluation: its run folder written under ``out`` (local), or,
    with ``ship``, in a temporary folder on the worker whose files are sent back. A scene that
    cannot be run fails as a unit (:class:`UnitFailed`), not the evaluation."""

    def run_scene(unit: tuple[int, ExploreSettings], _: object) -> SceneResult:
        index, settings = unit
        name = f"{index:03d}-{_slug(settings.scene or '')}"
        try:
            if not ship:
                return run_exploration(settings, out / name, resume=True), None
            with tempfile.TemporaryDirectory(prefix="embodia-scene-") as work:
                summary = run_exploration(settings, Path(work) / name)
                files = {p.name: p.read_bytes() for p in (Path(work) / name).iterdir() if p.is_file()}
                return summary, files
        except EmbodiaError as error:
            raise UnitFailed(str(error)) from error

    return run_scene


def _place_run(run: Path, files: Mapping[str, bytes]) -> None:
    """A scene's run folder made of the files a worker sent back: written beside ``run``, then
    swapped in whole, so a kill leaves the old folder (a partial local run) or the new one."""
    fresh = run.with_name(f".{run.name}.incoming")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    for name, data in files.items():
        (fresh / name).write_bytes(data)
    if run.exists():
        old = run.with_name(f".{run.name}.replaced")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(run, old)
        os.replace(fresh, run)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(fresh, run)


def aggregate(summaries: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean and (population) standard deviation of each measure over runs."""
    table = {}
    for key in ("explorable_m2", *MEASURES):
        values = [float(s[key]) for s in summaries if s.get(key) is not None]
        if values:
            table[key] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values)}
    return table
