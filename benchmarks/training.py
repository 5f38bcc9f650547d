"""GRPO training: evidence that it learns (DSR text env, active-mapping waypoints) and its speed.

    python benchmarks/training.py [--quick] [--studies 0] [--text_seeds N] [--wp_train_seeds K] ...

Every study runs on the tiny random-weight Qwen2 chat LM (2 layers, hidden 128) built from its
config, on CPU, in this one process:

1. **Speed.** One GRPO optimisation step on one fixed batch (``--step-samples`` sampled DSR
   completions of 16 tokens at most and their prompts; the random-weight model scores 0
   everywhere, so a fixed ramp is added to the rewards to give non-zero advantages):
   embodia's (``grpo_trainer.optimise``: scoring, ``grpo_loss``, backward, gradient clip,
   AdamW) against TRL's ``GRPOTrainer`` (``_compute_loss``, backward, the same clip and AdamW)
   on a second copy of the same model, same loss type (dapo), the two timed alternately,
   medians. ``grpo_step_ratio_vs_trl`` = TRL
   time / embodia time (>= 1: embodia no slower). Rollout throughput on ``embodia/DSR-v0``
   with gymnasium's sync and async vector envs, and ``outside_model_share``: the share of the
   sync collection's wall time spent outside the policy's ``sample`` calls (env steps,
   prompt rendering, reply parsing, records).
2. **Text env gain** (``text_reward_gain``): SFT on the answer format alone (``Answer: D``
   with a random digit), then GRPO (``run_grpo``) on SayDigit (``tests/say_digit.py``: reward 1
   when the reply's first digit is the one asked for; chance and the best constant answer score
   about 1/10), with each advantage estimator from ``--text_seeds`` training seeds; the sampled
   reward on held-out seeds before and after. The task the issue names first, DSR
   ``array.access`` short, is run too (``dsr_text_*``): SFT on solved instances (the env's full
   prompt, plus as many with the question alone, a curriculum the tiny model needs to learn
   copying from the array at all; the model built with 4 attention heads and initial std 0.02,
   which leave the loss plateau where the default's 2 heads and 0.2 stay), then GRPO from that
   start with each advantage estimator and ``--dsr_seeds`` training seeds on a pool of 2,000
   fresh instances; the greedy reward on
   ``--dsr_eval_episodes`` held-out questions (another ``instance_seed``) of the untrained
   model, the SFT start and each trained run, and a trivial baseline scored by the env itself
   (answering the array's first element).
3. **The embodied job** (``waypoint_auc_gain_vs_random``): ``embodia/ActiveMappingWaypoint-v0``
   (index actions) with a tiny LM reading the text rendering of the candidates
   (``WaypointView`` with images off: number, bearing, range, estimated unseen area in whole
   m2, the list ordered by that area, largest first), a multi-turn episode per trajectory
   (``max_turns`` decisions, the primitive-step budget usually ends it first), trajectory
   reward = total coverage gain (m2). The LM is built for the study with 4 attention heads and
   initial std 0.02 (the default tiny LM, std 0.2, stays on the plateau of one answer). An SFT
   warm-up on uniformly random valid picks teaches the answer format only (no preference);
   that warmed-up model is the untrained start. Then
   the text env's recipe: one SFT from the start on generated solutions
   (``solutions.waypoint_solution_records``: the teacher that picks the largest unseen area the
   prompt shows, on seeds nothing else uses), then GRPO from that model, once per training
   seed (``--wp_credit``: episode credit by default, ``turn`` for each turn's reward-to-go).
   Held-out procedural seeds are scored by the env's own coverage AUC
   (``info["coverage_auc"]``, the measure ``embodia explore`` reports) for: the start, the
   teacher-SFT model and the model after GRPO of each training seed (greedy, with how often
   each repeats the teacher's held-out decisions), the teacher itself and a uniformly random
   candidate picker (both run with the env directly), and the depth-first explorer with its
   heuristic policy (``evals.explore.run_exploration``, the run ``embodia explore --agent dfs``
   makes). ``waypoint_auc_gain_grpo_vs_sft`` is GRPO's own share.

``--quick`` (under a minute) runs the speed section with fewer repeats and skips studies 2 and 3
(their keys are null, with a ``*_skipped`` reason); ``--studies 0`` skips them at full speed
sizes. Last line: one JSON object.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from _common import benchmark_args, import_from_tests, log
from _training_waypoints import WAYPOINT_STUDY_DEFAULTS, waypoint_study

import embodia.envs  # noqa: F401  (registers the env ids)
from embodia.core.chat import Message
from embodia.core.runs import read_run_records
from embodia.policies.recipes import grpo_trainer, solutions
from embodia.policies.recipes.advantages import ESTIMATORS
from embodia.policies.recipes.grpo_trainer import GRPOSettings, run_grpo
from embodia.policies.recipes.sft import SFTSettings, run_sft
from embodia.policies.rollouts import (
    ChatPrompt,
    RolloutEngine,
    RolloutSettings,
    Sample,
)
from embodia.policies.spec import make_trainable_policy
from embodia.policies.tiny_models import build_tiny_chat_lm
from embodia.policies.trainable import TrainablePolicy

DSR_OPTIONS = {
    "operation": solutions.DSR_OPERATION,
    "length": solutions.DSR_LENGTH,
    "mode": solutions.DSR_PROMPT_MODE,
    "description": solutions.DSR_DESCRIPTION,
}
# --------------------------------------------------------------------------- 1. speed


class TimedPolicy:
    """A sampling policy that adds up the wall time of the wrapped policy's ``sample`` calls."""

    def __init__(self, policy: TrainablePolicy) -> None:
        self.policy = policy
        self.seconds = 0.0

    def sample(self, prompts: Sequence[ChatPrompt], **sampling: Any) -> list[Sample]:
        start = time.perf_counter()
        try:
            return self.policy.sample(prompts, **sampling)
        finally:
            self.seconds += time.perf_counter() - start


def fixed_batch(policy: TrainablePolicy, samples: int, max_new_tokens: int) -> tuple[Any, GRPOSettings]:
    """One rollout batch of DSR prompts and sampled completions, as the trainer's ``TrainBatch``."""
    group = 4
    settings = GRPOSettings(
        policy="fixed",
        env=solutions.DSR_ENV_ID,
        group_size=group,
        max_new_tokens=max_new_tokens,
        learning_rate=1e-4,
        loss_type="dapo",
    )
    rollout = RolloutSettings(group_size=group, max_turns=1, max_new_tokens=max_new_tokens, num_envs=8)
    with RolloutEngine(solutions.DSR_ENV_ID, env_options=DSR_OPTIONS, settings=rollout) as engine:
        trajectories = engine.collect(policy, list(range(samples // group)))
    rewards = grpo_trainer._rewards(trajectories, samples // group, group)
    # A random-weight model scores 0 everywhere: spread the table so advantages are not all 0.
    rewards = rewards + torch.linspace(0, 1, samples).view_as(rewards)
    estimator = settings.estimator()
    per_turn, _ = grpo_trainer.turn_advantages(
        settings.credit, estimator, trajectories, estimator(rewards), None, samples // group, group
    )
    keep = torch.ones(samples // group, dtype=torch.bool)
    return grpo_trainer._batch(trajectories, per_turn, keep, group), settings


def trl_trainer(model_dir: Path, out: Path, batch_size: int, settings: GRPOSettings) -> Any:
    """TRL's GRPOTrainer on the same model, with the GRPO settings both sides share."""
    shared = ("loss_type", "beta", "epsilon", "learning_rate")
    return import_from_tests("trl_grpo").trl_grpo_trainer(
        model_dir,
        out,
        batch_size=batch_size,
        group_size=settings.group_size,
        max_completion_length=settings.max_new_tokens,
        **{name: getattr(settings, name) for name in shared},
    )


def trl_inputs(batch: Any, pad: int) -> dict[str, torch.Tensor]:
    """The batch as TRL holds it after generation: prompts left-padded, completions right-padded."""
    rows = len(batch.prompt_ids)
    prompt_len = max(len(p) for p in batch.prompt_ids)
    completion_len = max(len(c) for c in batch.completion_ids)
    prompt_ids = torch.full((rows, prompt_len), pad, dtype=torch.long)
    prompt_mask = torch.zeros((rows, prompt_len), dtype=torch.long)
    completion_ids = torch.full((rows, completion_len), pad, dtype=torch.long)
    completion_mask = torch.zeros((rows, completion_len), dtype=torch.long)
    for i, (prompt, completion) in enumerate(zip(batch.prompt_ids, batch.completion_ids, strict=True)):
        prompt_ids[i, prompt_len - len(prompt) :] = torch.tensor(prompt)
        prompt_mask[i, prompt_len - len(prompt) :] = 1
        completion_ids[i, : len(completion)] = torch.tensor(completion)
        completion_mask[i, : len(completion)] = 1
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": batch.advantages.clone(),
        "num_items_in_batch": completion_mask.sum(),
    }


def grpo_step_speed(model_dir: Path, tmp: Path, samples: int, repeats: int) -> dict[str, Any]:
    """embodia's GRPO optimisation step vs TRL's on the same model, batch and lengths."""
    max_new_tokens = 16
    policy = make_trainable_policy(f"hf:{model_dir}", seed=0)
    batch, settings = fixed_batch(policy, samples, max_new_tokens)
    ours = torch.optim.AdamW(policy.trainable_parameters(), lr=settings.learning_rate)
    trainer = trl_trainer(model_dir, tmp / "trl", samples, settings)
    theirs = torch.optim.AdamW(trainer.model.parameters(), lr=settings.learning_rate)
    inputs = trl_inputs(batch, trainer.processing_class.pad_token_id)

    def embodia_step() -> None:
        grpo_trainer.optimise(policy, None, ours, batch, settings)

    def trl_step() -> None:
        theirs.zero_grad(set_to_none=True)
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), settings.max_grad_norm)
        theirs.step()

    times: dict[str, list[float]] = {"embodia": [], "trl": []}
    embodia_step(), trl_step()  # warm-up: allocator, kernels, optimiser state
    for _ in range(repeats):
        for name, step in (("embodia", embodia_step), ("trl", trl_step)):
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    ours_s, trl_s = statistics.median(times["embodia"]), statistics.median(times["trl"])
    return {
        "grpo_step_ratio_vs_trl": round(trl_s / ours_s, 3),
        "grpo_step_embodia_ms": round(1000 * ours_s, 2),
        "grpo_step_trl_ms": round(1000 * trl_s, 2),
        "grpo_step_samples": samples,
        "grpo_step_prompt_tokens": max(len(p) for p in batch.prompt_ids),
        "grpo_step_completion_tokens": int(inputs["completion_mask"].sum()),
        "grpo_step_repeats": repeats,
    }


def rollout_speed(model_dir: Path, prompts: int, repeats: int) -> dict[str, Any]:
    """Episodes per second on DSR-v0 under sync and async vector envs (same policy, same seeds),
    and the share of each collection's time spent outside the policy's sampling. The two
    engines take turns on each batch of seeds, after one untimed pass over all of them, so a
    busy moment of a shared machine or a first-call cost does not land on one side only."""
    policy = make_trainable_policy(f"hf:{model_dir}", seed=0)
    modes = ("sync", "async")
    timed = {mode: TimedPolicy(policy) for mode in modes}
    wall = dict.fromkeys(modes, 0.0)
    episodes = dict.fromkeys(modes, 0)
    batches = [list(range(r * prompts, (r + 1) * prompts)) for r in range(repeats)]
    engines = {
        mode: RolloutEngine(
            solutions.DSR_ENV_ID,
            env_options=DSR_OPTIONS,
            settings=RolloutSettings(
                group_size=4, max_turns=1, max_new_tokens=16, num_envs=8, vectorization=mode
            ),
        )
        for mode in modes
    }
    try:
        for mode in modes:
            for seeds in batches:
                engines[mode].collect(policy, seeds)
        for seeds in batches:
            for mode in modes:
                start = time.perf_counter()
                episodes[mode] += len(engines[mode].collect(timed[mode], seeds))
                wall[mode] += time.perf_counter() - start
    finally:
        for engine in engines.values():
            engine.close()
    result: dict[str, Any] = {}
    for mode in modes:
        result[f"rollout_{mode}_episodes_per_s"] = round(episodes[mode] / wall[mode], 2)
        result[f"outside_model_share_{mode}"] = round(1 - timed[mode].seconds / wall[mode], 4)
    result["outside_model_share"] = result["outside_model_share_sync"]
    result["rollout_async_vs_sync"] = round(
        result["rollout_async_episodes_per_s"] / result["rollout_sync_episodes_per_s"], 3
    )
    result["rollout_episodes_per_collect"] = prompts * 4
    return result


# --------------------------------------------------------------------------- 2. text env gain


def say_digit_gain(model_dir: Path, tmp: Path, args: Any) -> dict[str, Any]:
    """SFT on the answer format, then GRPO on SayDigit (``tests/say_digit.py``) with each
    advantage estimator from several training seeds; sampled held-out reward before and after."""
    if args.text_seeds < 1 or args.text_steps < 1:
        raise SystemExit("error: --text_seeds and --text_steps must be at least 1")
    say_digit = import_from_tests("say_digit")
    start = time.perf_counter()
    formatted = say_digit.warm_up(model_dir, tmp / "say-digit-sft")
    result: dict[str, Any] = {}
    gains, befores = [], []
    for advantage in ESTIMATORS:
        afters = []
        for seed in range(args.text_seeds):
            settings = say_digit.grpo_settings(formatted, advantage, steps=args.text_steps, seed=seed)
            summary = run_grpo(settings, tmp / f"say-digit-{advantage}-{seed}")
            befores.append(summary["eval_reward_start"])
            afters.append(summary["eval_reward_end"])
            gains.append(summary["eval_reward_end"] - summary["eval_reward_start"])
            log(f"  say-digit {advantage} seed {seed}: {befores[-1]:.3f} -> {afters[-1]:.3f}")
        result[f"text_{advantage}_after_mean"] = round(statistics.mean(afters), 4)
        result[f"text_{advantage}_after_std"] = round(statistics.pstdev(afters), 4)
    return {
        "text_reward_gain": round(statistics.mean(gains), 4),
        "text_eval_reward_before": round(statistics.mean(befores), 4),
        "text_constant_baseline": round(say_digit.constant_baseline(32), 4),
        "text_seeds": args.text_seeds,
        "text_grpo_steps": args.text_steps,
        **result,
        "text_s": round(time.perf_counter() - start, 1),
    }


DSR_POOL_ENV = "embodia-bench/DSRPool-v0"
"""``embodia/DSR-v0`` over a fixed list of generated instances (its ``instances`` option), so GRPO
trains on thousands of fresh questions (the default pool holds 30 per instance seed, which a
run memorises) and the held-out score averages hundreds."""
DSR_HELD_OUT_ENV = "embodia-bench/DSRHeldOut-v0"
"""The held-out pool: instances of another ``instance_seed`` (7), never trained on."""
DSR_POOLS = {
    DSR_POOL_ENV: {"first": 50_000, "count": 2_000, "instance_seed": 0},
    DSR_HELD_OUT_ENV: {"first": 0, "count": 1_000, "instance_seed": 7},
}
DSR_FULL_RECORDS_FIRST = 0
DSR_QUESTION_RECORDS_FIRST = 20_000
"""The SFT records' instance numbers (seed family 0): the full prompts from 0, the question-only
ones from here, and the GRPO pool from 50,000: three disjoint sets."""


def register_dsr_pools() -> None:
    """Register the two instance pools of the DSR study (once per process)."""
    for env_id, pool in DSR_POOLS.items():
        if env_id not in gymnasium.registry:
            seeds = range(pool["first"], pool["first"] + pool["count"])
            instances = solutions.dsr_instances(seeds, instance_seed=pool["instance_seed"])
            gymnasium.register(
                env_id,
                entry_point=gymnasium.registry[solutions.DSR_ENV_ID].entry_point,
                kwargs=solutions.dsr_env_options(instances),
            )


def question_only(record: dict[str, list[Message]]) -> dict[str, list[Message]]:
    """The record with its prompt cut to the question (``Given an array [...]. Q: ...?``) and
    the trailing ``A:`` cue: the env's own words, without its fixed instructions around them."""
    *head, user, reply = record["messages"]
    lines = str(user["content"]).split("\n")
    kept = "\n".join(line for line in lines if line.startswith(("Given ", "A:")))
    if not kept.startswith("Given "):
        raise SystemExit(f"error: no question line in the DSR prompt {user['content']!r}")
    return {"messages": [*head, {"role": "user", "content": kept}, reply]}


def dsr_sft_records(count: int) -> list[dict[str, list[Message]]]:
    """``count`` solved instances with the env's full prompt and ``count`` other ones with the
    question alone, shuffled together. The short ones are a curriculum: on the ~230-token full
    prompt the tiny model stays on the loss plateau of a uniform guess (it never learns to
    copy from the array at this budget); the ~60-token question teaches the copying, which
    then carries over to the full prompt."""
    full = solutions.dsr_solution_records(range(DSR_FULL_RECORDS_FIRST, DSR_FULL_RECORDS_FIRST + count))
    short = solutions.dsr_solution_records(
        range(DSR_QUESTION_RECORDS_FIRST, DSR_QUESTION_RECORDS_FIRST + count)
    )
    records = full + [question_only(record) for record in short]
    random.Random(0).shuffle(records)
    return records


def dsr_held_out_reward(policy: str, episodes: int) -> float:
    """Greedy mean reward of ``policy`` over ``episodes`` held-out questions (reset seeds
    ``0..episodes-1`` of the held-out pool, each drawing one of its instances)."""
    settings = RolloutSettings(group_size=1, max_turns=1, max_new_tokens=14, temperature=0.0, num_envs=8)
    with RolloutEngine(DSR_HELD_OUT_ENV, settings=settings) as engine, torch.no_grad():
        trajectories = engine.collect(make_trainable_policy(policy, seed=0), list(range(episodes)))
    return float(np.mean([t.total_reward for t in trajectories]))


def first_element_baseline(episodes: int) -> float:
    """Mean reward of answering the array's first element on the same held-out episodes as
    :func:`dsr_held_out_reward`, scored by the env."""
    env = gymnasium.make(DSR_HELD_OUT_ENV)
    rewards = []
    try:
        for seed in range(episodes):
            env.reset(seed=seed)
            first = env.unwrapped.instance.data["array"][0]
            rewards.append(env.step(json.dumps({"final_answer": first}))[1])
    finally:
        env.close()
    return float(np.mean(rewards))


def dsr_text_gain(tmp: Path, args: Any) -> dict[str, Any]:
    """SFT on solved DSR ``array.access`` short instances (:func:`dsr_sft_records`), then GRPO
    from that start with each advantage estimator and ``--dsr_seeds`` training seeds; the greedy
    held-out reward of the untrained model, the SFT start and every trained run, next to
    answering the first element."""
    if args.dsr_seeds < 1 or args.dsr_grpo_steps < 1 or args.dsr_eval_episodes < 1:
        raise SystemExit("error: --dsr_seeds, --dsr_grpo_steps and --dsr_eval_episodes must be at least 1")
    register_dsr_pools()
    started = time.perf_counter()
    # The default tiny LM (2 heads, initial std 0.2) stays on the uniform-guess plateau through
    # this SFT; 4 heads and std 0.02 (same parameter count) learn to copy from the array.
    model_dir = build_tiny_chat_lm(tmp / "tiny-chat-lm-dsr", attention_heads=4, initializer_range=0.02)
    sft_settings = SFTSettings(
        model=f"hf:{model_dir}",
        data=tuple(dsr_sft_records(args.dsr_sft_records)),
        max_steps=args.dsr_sft_steps,
        batch_size=16,
        learning_rate=args.dsr_sft_lr,
        lr_scheduler="cosine",
        warmup_steps=args.dsr_sft_steps // 20,
        seed=0,
    )
    sft = run_sft(sft_settings, tmp / "dsr-sft")
    sft_s = time.perf_counter() - started
    episodes = args.dsr_eval_episodes
    untrained = dsr_held_out_reward(f"hf:{model_dir}", episodes)
    before = dsr_held_out_reward(sft["policy"], episodes)
    log(f"  dsr: untrained {untrained:.3f}, after SFT {before:.3f} (loss {sft.get('train_loss_last')})")
    result: dict[str, Any] = {}
    afters: list[float] = []
    curves: dict[str, list[list[float]]] = {}
    for advantage in ESTIMATORS:
        runs = []
        for seed in range(args.dsr_seeds):
            settings = GRPOSettings(
                policy=sft["policy"],
                env=DSR_POOL_ENV,
                advantage=advantage,
                steps=args.dsr_grpo_steps,
                prompts_per_step=8,
                group_size=8,
                max_new_tokens=14,
                learning_rate=args.dsr_lr,
                first_seed=seed * 10_000,
                seed=seed,
            )
            out = tmp / f"dsr-{advantage}-{seed}"
            summary = run_grpo(settings, out)
            runs.append(dsr_held_out_reward(summary["policy"], episodes))
            curve = [row["reward_mean"] for row in read_run_records(out / grpo_trainer.METRICS)]
            tenth = max(1, len(curve) // 10)
            curves.setdefault(advantage, []).append(
                [round(float(np.mean(curve[:tenth])), 4), round(float(np.mean(curve[-tenth:])), 4)]
            )
            log(f"  dsr {advantage} seed {seed}: held-out {before:.3f} -> {runs[-1]:.3f}")
        afters += runs
        result[f"dsr_text_{advantage}_after_mean"] = round(statistics.mean(runs), 4)
        result[f"dsr_text_{advantage}_after_std"] = round(statistics.pstdev(runs), 4)
    after = statistics.mean(afters)
    return {
        "dsr_text_reward_gain": round(after - before, 4),
        "dsr_text_eval_reward_before": round(before, 4),
        "dsr_text_eval_reward_after": round(after, 4),
        "dsr_text_untrained_reward": round(untrained, 4),
        "dsr_text_first_element_baseline": round(first_element_baseline(episodes), 4),
        **result,
        "dsr_text_train_reward_first_last_tenth": curves,
        "dsr_text_seeds": args.dsr_seeds,
        "dsr_text_eval_episodes": episodes,
        "dsr_text_sft_records": len(sft_settings.data),
        "dsr_text_sft_steps": args.dsr_sft_steps,
        "dsr_text_sft_loss_last": sft.get("train_loss_last"),
        "dsr_text_grpo_steps": args.dsr_grpo_steps,
        "dsr_text_sft_s": round(sft_s, 1),
        "dsr_text_s": round(time.perf_counter() - started, 1),
    }


# --------------------------------------------------------------------------- main


def main() -> None:
    args = benchmark_args(
        __doc__,
        "speed only, fewer repeats; the learning studies are skipped (under a minute)",
        {"studies": 0, "step_samples": 8, "step_repeats": 2, "rollout_prompts": 2, "rollout_repeats": 1},
        studies=1,
        step_samples=16,
        step_repeats=10,
        rollout_prompts=8,
        rollout_repeats=3,
        text_seeds=3,
        text_steps=120,
        dsr_sft_records=6000,
        dsr_sft_steps=1500,
        dsr_sft_lr=1e-3,
        dsr_grpo_steps=40,
        dsr_lr=2e-4,
        dsr_seeds=2,
        dsr_eval_episodes=256,
        **WAYPOINT_STUDY_DEFAULTS,
    )
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    result: dict[str, Any] = {"quick": bool(args.quick)}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        model_dir = build_tiny_chat_lm(tmp / "tiny-chat-lm")
        log("speed: embodia vs TRL GRPO step")
        result |= grpo_step_speed(model_dir, tmp, args.step_samples, args.step_repeats)
        log("speed: rollouts, sync vs async")
        result |= rollout_speed(model_dir, args.rollout_prompts, args.rollout_repeats)
        if not args.studies:
            skipped = "--quick or --studies 0: run without them for the learning studies (about 50 minutes)"
            result |= {"text_reward_gain": None, "text_reward_skipped": skipped}
            result |= {"dsr_text_reward_gain": None, "dsr_text_reward_skipped": skipped}
            result |= {"waypoint_auc_gain_vs_random": None, "waypoint_skipped": skipped}
        else:
            log("text env: SFT on the answer format, then GRPO on SayDigit")
            result |= say_digit_gain(model_dir, tmp, args)
            log("text env: SFT warm-up, then GRPO on DSR array.access short")
            result |= dsr_text_gain(tmp, args)
            log("embodied: GRPO over ActiveMappingWaypoint-v0")
            result |= waypoint_study(tmp, args)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
