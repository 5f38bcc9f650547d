"""The GRPO trainer: rollouts in a gymnasium env, advantages, the clipped loss, a run folder.

One step of :func:`run_grpo`:

1. **Rollouts.** ``prompts_per_step`` reset seeds (step ``s`` uses ``first_seed + s * P`` to
   ``first_seed + s * P + P - 1``), ``group_size`` episodes each, sampled by the trainable
   policy through :class:`~embodia.policies.rollouts.RolloutEngine`; the env's rewards are the
   verifiable rewards (DSR scores, puzzle checkers, coverage gain).
2. **Advantages.** The trajectories' total rewards as a (P, G) table go through the configured
   estimator (group, batch, none or Durian; Durian's difficulty features come from the prompts'
   image entropy and the group's token predictive entropy, both measured here). With
   ``dynamic_sampling`` the groups whose rewards are all equal are dropped first. With
   ``credit="turn"`` each turn index t has its own table instead: every trajectory's
   reward-to-go from turn t (NaN where it ended before t, which the estimators skip).
3. **Optimisation.** Every turn of a trajectory is one (prompt, completion) sample carrying its
   trajectory's advantage (``credit="turn"``: its turn's). ``num_iterations`` passes over the
   batch, each split into ``gradient_accumulation_steps`` micro-batches whose gradients sum
   into one AdamW step (the gradient norm clipped at ``max_grad_norm``). The old-policy
   logprobs are the policy's own scores of the samples before the first pass (with one pass,
   the current scores detached, as TRL does), so the ratio starts at exactly 1. With
   ``beta > 0`` the k3 KL is taken to a frozen copy of the starting model.

The run folder (``core.runs``) holds ``config.yaml``, ``metrics.jsonl`` (one line per step:
reward mean/std, held-out reward when evaluated, KL, clip fractions, entropy, tokens/s,
advantage magnitudes, time in rollouts and in optimisation), ``rollouts.jsonl`` (one record per
trajectory), ``checkpoint/`` (weights, optimiser and every random state after the last finished
step, replaced atomically), ``final/`` (the trained model: ``hf:OUT/final`` loads it),
``curves.png`` and ``summary.json``. A killed run resumed with ``resume=True`` continues after
its last checkpointed step and ends with the weights an uninterrupted run reaches.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import torch

from embodia.core.limits import check_seed, check_whole
from embodia.core.runs import RunFolder, runner
from embodia.core.scale_out import Backend
from embodia.errors import EmbodiaError
from embodia.policies.recipes.advantages import (
    AdvantageEstimator,
    Advantages,
    DifficultyFeatures,
    reasoning_uncertainty,
)
from embodia.policies.recipes.curves import plot_curves
from embodia.policies.recipes.grpo import GRPOConfig, filter_dynamic, grpo_loss
from embodia.policies.rollout_workers import PolicySource, RolloutWorkers
from embodia.policies.rollouts import RolloutEngine, RolloutSettings, Trajectory
from embodia.policies.spec import make_trainable_policy
from embodia.policies.trainable import LoraSettings, TrainablePolicy, model_card, quiet_progress_bars, tuning

METRICS = "metrics.jsonl"
ROLLOUTS = "rollouts.jsonl"
CHECKPOINT = "checkpoint"
FINAL = "final"
SUMMARY = "summary.json"
CURVES = "curves.png"
CURVE_KEYS = ("reward_mean", "eval_reward", "kl", "entropy", "advantage_abs_max", "clip_ratio/region_mean")

StepCallback = Callable[[dict[str, Any]], None]
Credit = Literal["episode", "turn"]
CREDITS: tuple[str, ...] = ("episode", "turn")


@dataclass(frozen=True, kw_only=True)
class GRPOSettings(GRPOConfig, RolloutSettings):
    """A GRPO run: the GRPO family's settings (:class:`GRPOConfig`), how rollouts are collected
    (:class:`RolloutSettings`: ``num_envs``, ``images``, ``vectorization``; its group size, reply
    length and temperature are GRPOConfig's), the policy, the env and the run's length."""

    policy: str
    """The model to train: ``hf:DIR`` (or a bare DIR), a transformers causal LM or VLM."""
    env: str
    """A registered gymnasium id whose observations a chat policy can read (``embodia/DSR-v0``)."""
    env_options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gymnasium.make(env, ...)``."""
    steps: int = 20
    """Optimiser steps (one rollout batch each)."""
    prompts_per_step: int = 4
    """P: reset seeds per rollout batch; the batch holds P x group_size episodes."""
    first_seed: int = 0
    """Reset seed of the first prompt; step s uses first_seed + s*P .. first_seed + s*P + P - 1."""
    eval_prompts: int = 0
    """Held-out reset seeds scored before training and after the last step; 0 skips evaluation."""
    eval_samples: int = 1
    """Episodes per held-out seed (their mean reward counts)."""
    eval_temperature: float = 0.0
    """Sampling temperature of the held-out episodes: 0 decodes greedily; the training
    ``temperature`` measures the sampling policy GRPO optimises."""
    eval_first_seed: int = 1_000_000
    """First held-out reset seed (far from the training seeds)."""
    eval_env_options: Mapping[str, Any] = field(default_factory=dict)
    """Env options that differ for the held-out evaluation, over ``env_options`` (e.g. another
    DSR ``instance_seed``, so held-out instances are not the training ones)."""
    eval_every: int = 0
    """Also evaluate after every this many steps (0: only at the start and the end)."""
    max_turns: int = 1
    """Turns after which an episode is cut (1: one reply per episode, the usual GRPO setting)."""
    credit: Credit = "episode"
    """How a multi-turn episode's rewards reach its replies: ``episode`` gives every turn the
    advantage of the episode's total reward; ``turn`` gives each turn the advantage of its
    reward-to-go (its own reward and the later ones) among the group's episodes that reached
    that turn, so no reply is credited with rewards that came before it. The same with one turn."""
    max_grad_norm: float = 1.0
    """Clip of the gradient's global norm before each optimiser step (0: no clipping)."""
    lora_r: int = 0
    """LoRA rank; 0 trains every weight."""
    lora_alpha: float = 16.0
    """LoRA's scale numerator (with ``lora_r``)."""

    def __post_init__(self) -> None:
        GRPOConfig.__post_init__(self)
        RolloutSettings.__post_init__(self)
        name = type(self).__name__
        check_whole(self, "steps", "prompts_per_step", "eval_samples")
        check_whole(self, "eval_prompts", "eval_every", "lora_r", minimum=0)
        if self.credit not in CREDITS:
            raise EmbodiaError(f"{name}.credit must be one of {', '.join(CREDITS)}, got {self.credit!r}")
        check_seed(f"{name}.first_seed", self.first_seed)
        check_seed(f"{name}.eval_first_seed", self.eval_first_seed)
        if not (math.isfinite(self.eval_temperature) and self.eval_temperature >= 0):
            raise EmbodiaError(
                f"{name}.eval_temperature must be a finite number >= 0, got {self.eval_temperature}"
            )
        if not (math.isfinite(self.max_grad_norm) and self.max_grad_norm >= 0):
            raise EmbodiaError(f"{name}.max_grad_norm must be a finite number >= 0, got {self.max_grad_norm}")
        for key in ("env_options", "eval_env_options"):
            if not isinstance(getattr(self, key), Mapping):
                raise EmbodiaError(f"{name}.{key} must be a mapping, got {getattr(self, key)!r}")

    def record(self) -> dict[str, Any]:
        """The settings as plain data (``config.yaml``)."""
        record = dataclasses.asdict(self)
        record["env_options"] = dict(self.env_options)
        record["eval_env_options"] = dict(self.eval_env_options)
        return record


@dataclass
class TrainBatch:
    """The training samples of one rollout batch: one per turn."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    images: list[list[Any]]
    advantages: torch.Tensor
    """(N,) the advantage of each sample (its trajectory's, or its turn's with turn credit)."""


def _load_policy(settings: GRPOSettings) -> TrainablePolicy:
    lora = LoraSettings(r=settings.lora_r, alpha=settings.lora_alpha) if settings.lora_r else None
    return make_trainable_policy(settings.policy, lora=lora, seed=settings.seed)


def _rewards(trajectories: Sequence[Trajectory], prompts: int, group: int) -> torch.Tensor:
    return torch.tensor([t.total_reward for t in trajectories], dtype=torch.float32).view(prompts, group)


def reward_to_go(rewards: Sequence[Sequence[float]], prompts: int, group: int) -> torch.Tensor:
    """``(T, prompts, group)``: entry t of each trajectory's turn rewards summed from turn t on,
    NaN where the trajectory has no turn t (T: the most turns). ``rewards`` lists the
    trajectories group by group, as the rollout engine returns them."""
    turns = max((len(r) for r in rewards), default=0)
    table = torch.full((turns, len(rewards)), math.nan, dtype=torch.float32)
    for index, turn_rewards in enumerate(rewards):
        if turn_rewards:
            summed = np.cumsum(np.asarray(turn_rewards, dtype=np.float64)[::-1])[::-1]
            table[: len(turn_rewards), index] = torch.from_numpy(summed.copy())
    return table.view(turns, prompts, group)


def turn_advantages(
    credit: str,
    estimator: AdvantageEstimator,
    trajectories: Sequence[Trajectory],
    episode: Advantages,
    features: DifficultyFeatures | None,
    prompts: int,
    group: int,
) -> tuple[list[list[float]], dict[str, float]]:
    """Each trajectory's advantage per turn under ``credit`` (``episode``: the episode's own,
    from ``episode``), and the advantage magnitudes over all turns (empty for ``episode``, whose
    magnitudes ``episode.stats`` already has)."""
    if credit == "episode":
        flat = episode.values.view(-1)
        return [[float(flat[i])] * len(t.turns) for i, t in enumerate(trajectories)], {}
    tables = reward_to_go([t.rewards for t in trajectories], prompts, group)
    per_turn = [estimator(table, features).values.view(-1) for table in tables]
    values = [[float(per_turn[k][i]) for k in range(len(t.turns))] for i, t in enumerate(trajectories)]
    magnitudes = [abs(v) for row in values for v in row] or [0.0]
    return values, {
        "advantage_abs_max": max(magnitudes),
        "advantage_abs_mean": float(np.mean(magnitudes)),
    }


def _features(
    settings: GRPOSettings, policy: TrainablePolicy, trajectories: Sequence[Trajectory]
) -> DifficultyFeatures | None:
    """Durian's per-prompt difficulty inputs: the group's reasoning uncertainty (from the first
    turn's scores) and the prompt's image entropy when it showed pictures; None for the other
    estimators, which need neither."""
    if settings.advantage != "durian":
        return None
    entropies, logps, mask = _first_turn_scores(policy, trajectories, settings.temperature)
    uncertainty = reasoning_uncertainty(
        settings.durian_uncertainty, mask, settings.group_size, token_entropies=entropies, logps=logps
    )
    visual = [trajectories[g * settings.group_size].image_entropy_bits for g in range(len(uncertainty))]
    return DifficultyFeatures(
        uncertainty=uncertainty,
        visual_entropy=None if any(v is None for v in visual) else torch.tensor(visual, dtype=torch.float32),
    )


def _first_turn_scores(
    policy: TrainablePolicy, trajectories: Sequence[Trajectory], temperature: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Entropies, logprobs and mask of every trajectory's first reply, without gradient."""
    with torch.no_grad():
        scores = policy.completion_logps(
            [t.turns[0].prompt_ids for t in trajectories],
            [t.turns[0].completion_ids for t in trajectories],
            images=[t.turns[0].images for t in trajectories],
            temperature=temperature,
        )
    return scores.entropies, scores.logps, scores.mask


def _batch(
    trajectories: Sequence[Trajectory], advantages: Sequence[Sequence[float]], keep: torch.Tensor, group: int
) -> TrainBatch:
    prompt_ids, completion_ids, images, values = [], [], [], []
    for index, trajectory in enumerate(trajectories):
        if not bool(keep[index // group]):
            continue
        for turn, advantage in zip(trajectory.turns, advantages[index], strict=True):
            if turn.completion_ids:
                prompt_ids.append(turn.prompt_ids)
                completion_ids.append(turn.completion_ids)
                images.append(turn.images)
                values.append(advantage)
    return TrainBatch(prompt_ids, completion_ids, images, torch.tensor(values, dtype=torch.float32))


def _micro_batches(size: int, parts: int) -> list[slice]:
    bounds = np.linspace(0, size, min(parts, size) + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def optimise(
    policy: TrainablePolicy,
    reference: TrainablePolicy | None,
    optimizer: torch.optim.Optimizer,
    batch: TrainBatch,
    settings: GRPOSettings,
) -> dict[str, float]:
    """``num_iterations`` optimiser steps over the batch; the stats of the last one. One GRPO
    step's optimisation, public so that a benchmark can time it alone."""
    parts = _micro_batches(len(batch.prompt_ids), settings.gradient_accumulation_steps)
    # dapo divides by the completion tokens of the whole accumulated batch, known before the loss
    batch_tokens = float(sum(len(completion) for completion in batch.completion_ids))

    def scores(model: TrainablePolicy, part: slice) -> Any:
        return model.completion_logps(
            batch.prompt_ids[part],
            batch.completion_ids[part],
            images=batch.images[part],
            temperature=settings.temperature,
        )

    old: list[torch.Tensor | None] = [None] * len(parts)
    refs: list[torch.Tensor | None] = [None] * len(parts)
    with torch.no_grad():
        for i, part in enumerate(parts):
            if settings.num_iterations > 1:
                old[i] = scores(policy, part).logps
            if reference is not None:
                refs[i] = scores(reference, part).logps
    stats: dict[str, float] = {}
    for _ in range(settings.num_iterations):
        optimizer.zero_grad(set_to_none=True)
        totals: dict[str, float] = {}
        active = 0.0
        for i, part in enumerate(parts):
            current = scores(policy, part)
            old_logps = old[i]
            loss, step_stats = grpo_loss(
                current.logps,
                current.logps.detach() if old_logps is None else old_logps,
                batch.advantages[part],
                current.mask,
                settings,
                ref_logps=refs[i],
                num_items_in_batch=batch_tokens,
            )
            loss.backward()
            tokens = float(current.mask.sum())
            active += tokens
            totals["loss"] = totals.get("loss", 0.0) + float(loss.detach())
            totals["entropy"] = totals.get("entropy", 0.0) + float((current.entropies * current.mask).sum())
            for key, value in step_stats.items():
                totals[key] = totals.get(key, 0.0) + float(value) * tokens
        if settings.max_grad_norm > 0:
            totals["grad_norm"] = float(
                torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), settings.max_grad_norm)
            )
        optimizer.step()
        # loss and grad_norm are the step's; the rest are means over its completion tokens
        stats = {k: v if k in ("loss", "grad_norm") else v / max(active, 1.0) for k, v in totals.items()}
    return stats


def _random_states(policy: TrainablePolicy) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "sampling": policy._generator.get_state(),
    }


def _set_random_states(policy: TrainablePolicy, states: Mapping[str, Any]) -> None:
    random.setstate(states["python"])
    torch.set_rng_state(states["torch"])
    policy._generator.set_state(states["sampling"])


def _save_checkpoint(out: Path, step: int, policy: TrainablePolicy, optimizer: torch.optim.Optimizer) -> None:
    """Weights, optimiser and random states after ``step``, swapped in atomically: a kill during
    the save leaves the previous checkpoint whole."""
    staging = out / f".{CHECKPOINT}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    torch.save(
        {
            "step": step,
            # What training changes: every weight, or only the adapters with LoRA (the frozen
            # base is the model directory itself, loaded again on resume)
            "model": {name: p.detach() for name, p in policy.model.named_parameters() if p.requires_grad},
            "optimizer": optimizer.state_dict(),
            "random": _random_states(policy),
        },
        staging / "state.pt",
    )
    (staging / "step.json").write_text(json.dumps({"step": step}) + "\n")
    final = out / CHECKPOINT
    retired = out / f".{CHECKPOINT}.old"
    shutil.rmtree(retired, ignore_errors=True)
    if final.exists():
        os.replace(final, retired)
    os.replace(staging, final)
    shutil.rmtree(retired, ignore_errors=True)


def _load_checkpoint(out: Path, policy: TrainablePolicy, optimizer: torch.optim.Optimizer) -> int:
    """The step a checkpoint in ``out`` was taken after (0 without one), its state restored."""
    path = out / CHECKPOINT / "state.pt"
    if not path.is_file():
        retired = out / f".{CHECKPOINT}.old" / "state.pt"  # killed between the two renames
        if not retired.is_file():
            return 0
        path = retired
    state = torch.load(path, weights_only=False)
    missing = policy.model.load_state_dict(state["model"], strict=False).unexpected_keys
    if missing:
        raise EmbodiaError(
            f"the checkpoint in {out} holds weights this model lacks: {', '.join(missing[:3])}"
        )
    optimizer.load_state_dict(state["optimizer"])
    _set_random_states(policy, state["random"])
    return int(state["step"])


def _engines(settings: GRPOSettings) -> tuple[RolloutEngine, RolloutEngine | None]:
    rollout = RolloutSettings(
        **{f.name: getattr(settings, f.name) for f in dataclasses.fields(RolloutSettings)}
    )
    train = RolloutEngine(settings.env, env_options=settings.env_options, settings=rollout)
    if not settings.eval_prompts:
        return train, None
    held_out = dataclasses.replace(
        rollout, group_size=settings.eval_samples, temperature=settings.eval_temperature, vectorization="sync"
    )
    options = {**settings.env_options, **settings.eval_env_options}
    return train, RolloutEngine(settings.env, env_options=options, settings=held_out)


@contextmanager
def _trajectory_log(out: Path, done: int) -> Iterator[IO[str]]:
    """``rollouts.jsonl`` open for appending, cut back to the records of steps up to ``done``
    (a resumed run writes the later ones again; a torn last line is dropped)."""
    path = out / ROLLOUTS
    kept: list[str] = []
    if done and path.is_file():
        for line in path.read_text().splitlines():
            try:
                if int(json.loads(line)["step"]) > done:
                    break
            except (ValueError, KeyError, TypeError):
                break
            kept.append(line + "\n")
    path.write_text("".join(kept))
    with path.open("a") as file:
        yield file


@dataclass
class _Run:
    """What one step of a run needs: the policy and its optimiser, the rollout engines."""

    settings: GRPOSettings
    policy: TrainablePolicy
    reference: TrainablePolicy | None
    optimizer: torch.optim.Optimizer
    train_engine: RolloutEngine
    eval_engine: RolloutEngine | None
    workers: RolloutWorkers | None = None
    """With a scale-out backend: the training and held-out groups as its units, with the engines' settings."""

    def _collect(self, held_out: bool, seeds: list[int], sampling_seed: int) -> list[Trajectory]:
        engine = self.eval_engine if held_out else self.train_engine
        assert engine is not None
        if self.workers is None:
            return engine.collect(self.policy, seeds)
        options = engine.env_options
        return self.workers.collect(
            self.policy, seeds, sampling_seed=sampling_seed, settings=engine.settings, env_options=options
        )

    def evaluate(self) -> float | None:
        """Mean reward over the held-out episodes (None without evaluation)."""
        if self.eval_engine is None:
            return None
        first = self.settings.eval_first_seed
        seeds = [first + i for i in range(self.settings.eval_prompts)]
        with torch.no_grad():
            trajectories = self._collect(True, seeds, sampling_seed=self.settings.seed)
        return float(np.mean([t.total_reward for t in trajectories]))

    def step(self, step: int, rollouts: IO[str]) -> dict[str, Any]:
        """Step ``step``'s rollouts (written to ``rollouts``), advantages and optimisation; its
        ``metrics.jsonl`` line."""
        settings, P, G = self.settings, self.settings.prompts_per_step, self.settings.group_size
        tick = time.perf_counter()
        seeds = [settings.first_seed + (step - 1) * P + i for i in range(P)]
        # on a backend, step s samples from seeds of its own: a resumed run samples as it would have
        trajectories = self._collect(False, seeds, sampling_seed=settings.seed * 1_000_003 + step)
        rollout_s = time.perf_counter() - tick
        for trajectory in trajectories:
            rollouts.write(json.dumps({"step": step, **trajectory.to_json()}) + "\n")
        rewards = _rewards(trajectories, P, G)
        estimator, features = settings.estimator(), _features(settings, self.policy, trajectories)
        advantages = estimator(rewards, features)
        per_turn, turn_stats = turn_advantages(
            settings.credit, estimator, trajectories, advantages, features, P, G
        )
        keep = filter_dynamic(rewards) if settings.dynamic_sampling else torch.ones(P, dtype=torch.bool)
        batch = _batch(trajectories, per_turn, keep, G)
        tick = time.perf_counter()
        stats = (
            optimise(self.policy, self.reference, self.optimizer, batch, settings) if batch.prompt_ids else {}
        )
        train_s = time.perf_counter() - tick
        tokens = sum(len(c) for c in batch.completion_ids)
        line: dict[str, Any] = {
            "step": step,
            **advantages.stats,
            **turn_stats,
            "groups_kept": int(keep.sum()),
            "samples": len(batch.prompt_ids),
            "completion_tokens": tokens,
            "tokens_per_s": tokens / max(rollout_s + train_s, 1e-9),
            "rollout_s": rollout_s,
            "train_s": train_s,
            **env_metrics(trajectories),
            **stats,
        }
        if step == settings.steps or (settings.eval_every and step % settings.eval_every == 0):
            evaluated = self.evaluate()
            if evaluated is not None:
                line["eval_reward"] = evaluated
        return line


def env_metrics(trajectories: Sequence[Any]) -> dict[str, float]:
    """``env/NAME``: the mean over the episodes of each number an env reports in its last
    step's ``info["metrics"]`` (SxS's content latency, for one), so a ``metrics.jsonl`` line
    shows how the episodes went besides their reward."""
    values: dict[str, list[float]] = {}
    for trajectory in trajectories:
        reported = trajectory.info.get("metrics")
        if isinstance(reported, Mapping):
            for name, value in reported.items():
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    values.setdefault(f"env/{name}", []).append(float(value))
    return {name: float(np.mean(numbers)) for name, numbers in values.items()}


@runner
def run_grpo(
    settings: GRPOSettings,
    out: Path,
    *,
    resume: bool = False,
    on_step: StepCallback | None = None,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Train ``settings.policy`` by GRPO in ``settings.env`` into the run folder ``out`` (see the
    module docstring); with ``resume``, continue the run there after its last checkpoint (a
    larger ``steps`` than the run was started with trains a finished run further).
    ``on_step`` gets each ``metrics.jsonl`` line as it is written. Returns the summary.

    Without ``backend`` the rollouts run here, batched over all episodes of a step
    (:meth:`RolloutEngine.collect`). With one (``--backend ray``), each group of a step is a
    unit of it (:mod:`embodia.policies.rollout_workers`): Ray workers load the model once and
    are sent the trained weights every step; the optimisation stays here."""
    folder = RunFolder(out, METRICS)
    record = settings.record()
    folder.begin(record, resume, may_grow=("steps",))
    finished = folder.finished(SUMMARY)
    if finished is not None and finished["steps"] == settings.steps:
        return finished
    out = folder.out
    torch.manual_seed(settings.seed)
    random.seed(settings.seed)
    train_engine, eval_engine = _engines(settings)  # first: a bad env fails before a model loads
    with quiet_progress_bars(), train_engine, eval_engine or nullcontext(), ExitStack() as stack:
        policy = _load_policy(settings)
        reference = None
        if settings.beta > 0:
            reference = make_trainable_policy(settings.policy, seed=settings.seed)
            reference.model.eval().requires_grad_(False)
        optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=settings.learning_rate)
        done = _load_checkpoint(out, policy, optimizer) if folder.resuming else 0
        kept = [r for r in folder.kept_records() if isinstance(r.get("step"), int) and r["step"] <= done]
        started = time.perf_counter()
        workers = None
        if backend is not None:
            lora = LoraSettings(r=settings.lora_r, alpha=settings.lora_alpha) if settings.lora_r else None
            source = PolicySource(settings.policy, lora=lora, seed=settings.seed)
            workers = stack.enter_context(RolloutWorkers(settings.env, source=source, backend=backend))
        run = _Run(settings, policy, reference, optimizer, train_engine, eval_engine, workers)
        with folder.recording(kept, {"settings": record}) as log, _trajectory_log(out, done) as rollouts:

            def note(line: dict[str, Any]) -> None:
                log.append(line)
                if on_step is not None:
                    on_step(line)

            if done == 0 and eval_engine is not None:
                note({"step": 0, "eval_reward": run.evaluate()})
            for step in range(done + 1, settings.steps + 1):
                line = run.step(step, rollouts)
                rollouts.flush()
                _save_checkpoint(out, step, policy, optimizer)  # before the line: a logged step is kept
                note(line)
        how = tuning(settings.lora_r)
        card = model_card(
            f"GRPO of {settings.policy}",
            f"Trained by embodia's GRPO recipe ({settings.advantage} advantages, {settings.loss_type} loss, "
            f"{how}) for {settings.steps} steps of {settings.prompts_per_step} x {settings.group_size} "
            f"rollouts in {settings.env}.",
            settings.policy,
        )
        final = policy.save(out / FINAL, trained_by="grpo", card=card)
    rows = folder.read_records()
    plot_curves(rows, out / CURVES, CURVE_KEYS, title=f"GRPO on {settings.env}")
    train_rows = [r for r in rows if "reward_mean" in r]
    evals = [r["eval_reward"] for r in rows if r.get("eval_reward") is not None]
    summary: dict[str, Any] = {
        "settings": record,
        "steps": settings.steps,
        "resumed_after_step": done or None,
        "reward_first": train_rows[0]["reward_mean"] if train_rows else None,
        "reward_last": train_rows[-1]["reward_mean"] if train_rows else None,
        "eval_reward_start": evals[0] if evals else None,
        "eval_reward_end": evals[-1] if evals else None,
        "eval_prompts": settings.eval_prompts,
        "wall_s": time.perf_counter() - started,
        "trainable_parameters": sum(p.numel() for p in policy.trainable_parameters()),
        "final": str(final),
        "policy": f"hf:{final}",
    }
    folder.finish(SUMMARY, summary)
    return summary
