"""Rollouts of a chat policy in registered gymnasium envs, kept as trajectory records for training.

**Chat views** (:mod:`embodia.policies.rollout_views`) bridge an env and a chat policy: a
view makes the chat request from an observation and turns the reply into the env's action.

**The engine.** :class:`RolloutEngine` runs ``G`` episodes per reset seed (a group: same
seed, so the same first observation) on gymnasium's ``SyncVectorEnv`` or ``AsyncVectorEnv``
(``vectorization``), multi-turn until each episode terminates, truncates or reaches
``max_turns``. Sampling happens in the calling process, one batched ``policy.sample`` call
per turn over the live episodes in env order, and only env steps run in the workers, so
records are the same under either vectorization for the same seeds and policy seed. The
policy needs only :class:`SamplingPolicy` (``sample``), which
:class:`~embodia.policies.trainable.TrainablePolicy` implements. Each trajectory is one
:class:`Trajectory` (JSON via ``to_json``): turns with prompt and completion token ids, the
sampling policy's per-token logprobs and the text, per-turn and total rewards from the env,
the env's last ``info`` made JSON-safe, and image statistics when the prompts held pictures
(count and mean entropy in bits of the 256-bin greyscale histogram, for difficulty-aware
advantages).

:func:`as_trl_rollout_func` adapts the engine to TRL ``GRPOTrainer``'s ``rollout_func``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import iterate
from numpy.typing import NDArray
from PIL import Image

from embodia.core.chat import FinishReason, Message
from embodia.core.limits import check_whole
from embodia.errors import EmbodiaError
from embodia.policies.rollout_views import (
    CHAT_VIEWS,
    ChatPrompt,
    ChatView,
    InvalidReply,
    LiveGamingView,
    RolloutError,
    Sample,
    SamplingPolicy,
    TextView,
    WaypointView,
    chat_view,
    registered_spec,
)

Vectorization = Literal["sync", "async"]
EndedBy = Literal["terminated", "truncated", "max_turns", "invalid_reply"]


__all__ = [
    "CHAT_VIEWS",
    "ChatPrompt",
    "ChatView",
    "EndedBy",
    "InvalidReply",
    "LiveGamingView",
    "RolloutEngine",
    "RolloutError",
    "RolloutSettings",
    "Sample",
    "SamplingPolicy",
    "TextView",
    "Trajectory",
    "Turn",
    "Vectorization",
    "WaypointView",
    "as_trl_rollout_func",
    "chat_view",
    "env_reward",
    "image_entropy_bits",
    "json_safe",
]


# --------------------------------------------------------------------------- records


def image_entropy_bits(image: NDArray[np.uint8]) -> float:
    """Shannon entropy (bits) of an RGB image's 256-bin greyscale histogram (ITU-R 601 luma,
    as PIL's ``convert("L")``): 0 for a flat image, 8 at most."""
    grey = np.asarray(Image.fromarray(np.ascontiguousarray(image)).convert("L"))
    counts = np.bincount(grey.ravel(), minlength=256).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum()) + 0.0  # + 0.0: -0.0 for a flat image reads as 0.0


def json_safe(value: Any, *, max_array: int = 64) -> Any:
    """``value`` as plain JSON: numpy scalars to numbers, small arrays to lists and larger ones to
    ``{"shape", "dtype"}``, mapping keys to strings, dataclasses to dicts, non-finite floats to
    None, anything else to ``{"type": NAME}``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.size <= max_array:
            return json_safe(value.tolist(), max_array=max_array)
        return {"shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, max_array=max_array) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, max_array=max_array) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: json_safe(getattr(value, f.name), max_array=max_array) for f in dataclasses.fields(value)
        }
    return {"type": type(value).__name__}


@dataclass
class Turn:
    """One prompt, its sampled reply and what the env made of it."""

    messages: list[Message]
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    """The sampling policy's logprob of each completion token."""
    text: str
    finish_reason: FinishReason
    reward: float
    """The env's reward for this turn (0 for an invalid reply, which is not stepped)."""
    action: Any
    """The action sent to the env (JSON-safe); None for an invalid reply."""
    invalid_reply: str | None = None
    """Why the reply named no action; None when it did."""
    image_entropy_bits: list[float] = field(default_factory=list)
    """Entropy of each image of the prompt (:func:`image_entropy_bits`)."""
    images: list[NDArray[np.uint8]] = field(default_factory=list, repr=False)
    """The prompt's pictures, kept in memory so a trainer can score the completion again (not
    written by :meth:`Trajectory.to_json`: the entropies stand for them there)."""


@dataclass
class Trajectory:
    """One episode of a chat policy in an env (see the module docstring)."""

    env_id: str
    seed: int
    """The reset seed (all members of a group share it)."""
    group: int
    """Index of the seed in the collected batch."""
    member: int
    """Index of the episode within its group, 0..G-1."""
    turns: list[Turn]
    ended_by: EndedBy
    reset_info: dict[str, Any]
    """The env's ``reset`` info, JSON-safe."""
    info: dict[str, Any]
    """The env's last ``step`` info, JSON-safe (the reset info when no step was taken)."""

    @property
    def rewards(self) -> list[float]:
        return [turn.reward for turn in self.turns]

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))

    @property
    def image_count(self) -> int:
        return sum(len(turn.image_entropy_bits) for turn in self.turns)

    @property
    def image_entropy_bits(self) -> float | None:
        """Mean entropy over every image the policy was shown; None without images."""
        values = [v for turn in self.turns for v in turn.image_entropy_bits]
        return float(np.mean(values)) if values else None

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON (``json.dumps`` takes it as is)."""
        record: dict[str, Any] = {
            "env_id": self.env_id,
            "seed": self.seed,
            "group": self.group,
            "member": self.member,
            "ended_by": self.ended_by,
            "total_reward": self.total_reward,
            "rewards": self.rewards,
            "turns": [
                json_safe({f.name: getattr(turn, f.name) for f in dataclasses.fields(turn) if f.repr})
                for turn in self.turns
            ],
            "reset_info": self.reset_info,
            "info": self.info,
        }
        if self.image_count:
            record["images"] = {"count": self.image_count, "entropy_bits": self.image_entropy_bits}
        return record


# --------------------------------------------------------------------------- the engine


_ENDED = "embodia_episode_end"
"""Info key under which :class:`_HoldAtEnd` reports how an episode ended."""
_INFO = "embodia_info"
"""The one info key a sub-env reports under: its whole info, as an :class:`_EnvInfo`."""


@dataclass(frozen=True)
class _EnvInfo:
    """A sub-env's info carried whole through the vector env. Gymnasium batches each info key
    into an array typed by the first value it meets, so one sub-env's None (or a string) where
    another gave an int breaks the step; one opaque object per sub-env cannot clash."""

    info: dict[str, Any]


def _held_env(env_id: str, options: Mapping[str, Any]) -> Any:
    """A sub-env for the vector env (module level, so async workers can unpickle it)."""
    return _HoldAtEnd(gymnasium.make(env_id, **options))


class _HoldAtEnd(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Keeps a finished episode still instead of letting the vector env reset it.

    The vector envs step every sub-env together; an episode that has ended (or that the engine
    ended, ``holding``) must not be stepped or reset before the next wave. So the end is
    reported in ``info[_ENDED]`` with terminated/truncated False, and later steps return the
    last observation, reward 0 and an empty info until the next ``reset``.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.holding = True
        self._last: Any = None

    def reset(self, **kwargs: Any) -> Any:
        observation, info = self.env.reset(**kwargs)
        self.holding, self._last = False, observation
        return observation, {_INFO: _EnvInfo(dict(info))}

    def step(self, action: Any) -> Any:
        if self.holding:
            return self._last, 0.0, False, False, {}
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._last = observation
        info = dict(info)
        if terminated or truncated:
            self.holding = True
            info[_ENDED] = "terminated" if terminated else "truncated"
        return observation, reward, False, False, {_INFO: _EnvInfo(info)}


def _info_of(infos: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Sub-env ``index``'s info out of a vector env's batched infos (empty when it gave none)."""
    given = infos.get(f"_{_INFO}")
    if given is None or not given[index]:
        return {}
    return dict(infos[_INFO][index].info)


def _held_action(space: Any) -> Any:
    """The action a held sub-env is sent: the vector env steps every sub-env together, and
    :class:`_HoldAtEnd` returns without passing it on, so any valid action of ``space`` does."""
    if isinstance(space, spaces.Discrete):
        return int(space.start)
    if isinstance(space, spaces.Text):
        return sorted(space.character_set)[0] * space.min_length
    return space.sample()


@dataclass(frozen=True)
class RolloutSettings:
    """How the engine collects trajectories."""

    group_size: int = 4
    """Episodes per reset seed (G): a group starts from one observation, so its rewards compare
    replies to the same prompt (what group-relative advantages need)."""
    max_turns: int = 8
    """Turns after which a live episode is cut (``ended_by="max_turns"``)."""
    max_new_tokens: int = 64
    """Longest reply per turn, in tokens."""
    temperature: float = 1.0
    """Sampling temperature (0 decodes greedily); the recorded logprobs are those of the
    distribution sampled from, at this temperature."""
    num_envs: int = 8
    """Sub-envs of the vector env (episodes run together); fewer when a batch needs fewer."""
    images: bool = True
    """Show the env's pictures; False gives the text-only view (the waypoint candidates as a
    list, a stream's speech), which a text-only model can play."""
    vectorization: Vectorization = "sync"
    """``sync`` (``SyncVectorEnv``, one process) or ``async`` (``AsyncVectorEnv``, env steps in workers)."""

    def __post_init__(self) -> None:
        check_whole(self, "group_size", "max_turns", "max_new_tokens", "num_envs", error=RolloutError)
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise RolloutError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if self.vectorization not in ("sync", "async"):
            raise RolloutError(f"vectorization must be sync or async, got {self.vectorization!r}")


@dataclass(frozen=True)
class _Job:
    group: int
    seed: int
    member: int


class RolloutEngine(AbstractContextManager["RolloutEngine"]):
    """Rollouts of chat policies in one env id (see the module docstring). Close it (or use it
    as a context manager) to stop async workers."""

    def __init__(
        self,
        env_id: str,
        *,
        env_options: Mapping[str, Any] | None = None,
        settings: RolloutSettings | None = None,
        view: ChatView | None = None,
    ) -> None:
        self.env_id = env_id
        self.env_options = dict(env_options or {})
        self.settings = settings or RolloutSettings()
        registered_spec(env_id)
        try:
            probe = gymnasium.make(env_id, **self.env_options)
        except (TypeError, ValueError, EmbodiaError) as error:
            raise RolloutError(f"cannot make {env_id} with options {self.env_options}: {error}") from error
        try:
            self.observation_space = probe.observation_space
            self.action_space = probe.action_space
        finally:
            probe.close()
        self.view = view or chat_view(
            env_id, self.observation_space, self.action_space, images=self.settings.images
        )
        self._vector: Any = None
        self._num_envs = 0
        self._fresh = True

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the vector env (and its worker processes)."""
        if self._vector is not None:
            self._vector.close()
            self._vector = None

    def _vector_env(self, jobs: int) -> Any:
        if self._vector is None:
            self._num_envs = min(self.settings.num_envs, jobs)
            fns = [functools.partial(_held_env, self.env_id, self.env_options)] * self._num_envs
            # DISABLED: the HoldAtEnd wrapper never reports an end, episodes are reset by the engine.
            if self.settings.vectorization == "async":
                # Pipes, not shared memory: gymnasium reads a Text observation back from shared
                # memory padded to the space's max_length.
                self._vector = AsyncVectorEnv(fns, shared_memory=False, autoreset_mode=AutoresetMode.DISABLED)
            else:
                self._vector = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
            self._fresh = True
        return self._vector

    def collect(
        self, policy: SamplingPolicy, seeds: Sequence[int], *, group_size: int | None = None
    ) -> list[Trajectory]:
        """``group_size`` (default: the settings') episodes per seed, as trajectories ordered by
        seed then member."""
        size = self.settings.group_size if group_size is None else group_size
        if size < 1:
            raise RolloutError(f"group_size must be at least 1, got {size}")
        if not seeds:
            return []
        if self.view.uses_images:
            check = getattr(policy, "check_accepts_images", None)
            if check is not None:
                check(f"rollouts in {self.env_id}")
        jobs = [_Job(g, int(seed), m) for g, seed in enumerate(seeds) for m in range(size)]
        vector = self._vector_env(len(jobs))
        trajectories: list[Trajectory] = []
        for start in range(0, len(jobs), self._num_envs):
            trajectories += self._wave(vector, policy, jobs[start : start + self._num_envs])
        return trajectories

    def _wave(self, vector: Any, policy: SamplingPolicy, jobs: Sequence[_Job]) -> list[Trajectory]:
        count, settings = self._num_envs, self.settings
        in_wave = np.arange(count) < len(jobs)
        seeds: list[int | None] = [job.seed for job in jobs] + [None] * (count - len(jobs))
        if self._fresh or in_wave.all():
            observations, infos = vector.reset(seed=seeds)
            self._fresh = False
        else:
            observations, infos = vector.reset(seed=seeds, options={"reset_mask": in_wave})
        holding = [not flag for flag in in_wave]
        vector.set_attr("holding", holding)
        turns: list[list[Turn]] = [[] for _ in jobs]
        reset_info = [json_safe(_info_of(infos, i)) for i in range(len(jobs))]
        last_info = list(reset_info)
        ended: list[EndedBy | None] = [None] * len(jobs)
        held = _held_action(self.action_space)
        for _ in range(settings.max_turns):
            live = [i for i in range(len(jobs)) if ended[i] is None]
            if not live:
                break
            per_env = list(iterate(vector.observation_space, observations))
            prompts = [self.view.prompt(per_env[i]) for i in live]
            samples = policy.sample(
                prompts, n=1, max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
            )
            actions = [held] * count
            for i, prompt, sample in zip(live, prompts, samples, strict=True):
                chosen = self.view.action(sample.text, per_env[i])
                invalid = chosen.reason if isinstance(chosen, InvalidReply) else None
                if invalid is None:
                    actions[i] = chosen
                else:
                    ended[i], holding[i] = "invalid_reply", True
                turns[i].append(
                    Turn(
                        messages=list(prompt.messages),
                        prompt_ids=list(sample.prompt_ids),
                        completion_ids=list(sample.completion_ids),
                        logprobs=list(sample.logprobs),
                        text=sample.text,
                        finish_reason=sample.finish_reason,
                        reward=0.0,
                        action=None if invalid is not None else json_safe(chosen),
                        invalid_reply=invalid,
                        image_entropy_bits=[image_entropy_bits(image) for image in prompt.images],
                        images=list(prompt.images),
                    )
                )
            if any(holding[i] and ended[i] == "invalid_reply" for i in live):
                vector.set_attr("holding", holding)
            batched = tuple(actions) if self._text_actions() else np.asarray(actions)
            observations, rewards, _, _, infos = vector.step(batched)
            for i in live:
                if ended[i] is not None:
                    continue
                info = _info_of(infos, i)
                end = info.pop(_ENDED, None)
                turns[i][-1].reward = float(rewards[i])
                last_info[i] = json_safe(info)
                if end is not None:
                    ended[i], holding[i] = end, True
        for i in range(len(jobs)):
            if ended[i] is None:
                ended[i], holding[i] = "max_turns", True
        vector.set_attr("holding", [True] * count)
        return [
            Trajectory(
                env_id=self.env_id,
                seed=job.seed,
                group=job.group,
                member=job.member,
                turns=turns[i],
                ended_by=ended[i] or "max_turns",
                reset_info=reset_info[i],
                info=last_info[i],
            )
            for i, job in enumerate(jobs)
        ]

    def _text_actions(self) -> bool:
        return isinstance(self.action_space, spaces.Text)


# --------------------------------------------------------------------------- TRL


def _prompt_seed(prompt: Any) -> int:
    if isinstance(prompt, Mapping) and "seed" in prompt:
        prompt = prompt["seed"]
    if isinstance(prompt, bool):
        raise RolloutError(f"a rollout prompt must be a reset seed (an int), got {prompt!r}")
    if isinstance(prompt, int | np.integer):
        return int(prompt)
    if isinstance(prompt, str) and prompt.strip().lstrip("-").isdigit():
        return int(prompt)
    raise RolloutError(
        f"a rollout prompt must be a reset seed (an int, its digits, or {{'seed': N}}), got {prompt!r}"
    )


def as_trl_rollout_func(
    engine: RolloutEngine, policy: SamplingPolicy
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A ``rollout_func`` for TRL's ``GRPOTrainer`` that collects episodes with ``engine``.

    TRL calls it with the process's prompts, each repeated ``num_generations`` times in a row,
    and the trainer. Here each dataset prompt is a reset seed (an int, its digits, or
    ``{"seed": N}``); each run of equal consecutive prompts becomes one group of that many
    episodes. Episodes must be single-turn (``max_turns=1`` cuts longer ones), because TRL
    takes one prompt and one completion per sample. It returns TRL's required
    ``prompt_ids``, ``completion_ids`` and ``logprobs`` (the sampling policy's, per token),
    and two fields TRL forwards to the reward functions: ``env_reward`` (the episode's total
    reward; :func:`env_reward` reads it) and ``trajectory`` (the record's JSON).

    ``policy`` must sample with the weights the trainer updates (a
    :class:`~embodia.policies.trainable.TrainablePolicy` whose ``model`` was given to it).
    """

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        seeds = [_prompt_seed(p) for p in prompts]
        runs: list[tuple[int, int]] = []
        for seed in seeds:
            if runs and runs[-1][0] == seed:
                runs[-1] = (seed, runs[-1][1] + 1)
            else:
                runs.append((seed, 1))
        sizes = {size for _, size in runs}
        if len(sizes) != 1:
            raise RolloutError(
                "rollout prompts must come in runs of equal length (num_generations), "
                f"got runs of {sorted(sizes)}"
            )
        trajectories = engine.collect(policy, [seed for seed, _ in runs], group_size=sizes.pop())
        for trajectory in trajectories:
            if len(trajectory.turns) != 1:
                raise RolloutError(
                    f"{engine.env_id}: an episode took {len(trajectory.turns)} turns, but TRL's rollout_func "
                    "takes one prompt and one completion per sample: use max_turns=1"
                )
        return {
            "prompt_ids": [t.turns[0].prompt_ids for t in trajectories],
            "completion_ids": [t.turns[0].completion_ids for t in trajectories],
            "logprobs": [t.turns[0].logprobs for t in trajectories],
            "env_reward": [t.total_reward for t in trajectories],
            "trajectory": [t.to_json() for t in trajectories],
        }

    return rollout


def env_reward(completions: Sequence[Any], env_reward: Sequence[float], **_: Any) -> list[float]:
    """A TRL reward function: the env's reward that :func:`as_trl_rollout_func` forwarded."""
    if len(env_reward) != len(completions):
        raise RolloutError(f"{len(env_reward)} env rewards for {len(completions)} completions")
    return [float(r) for r in env_reward]
