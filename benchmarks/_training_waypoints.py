"""Study 3 of ``benchmarks/training.py``: GRPO over ``embodia/ActiveMappingWaypoint-v0``, the
embodied job, against its untrained start, a random picker, the teacher it learns from and the
heuristic explorer (the recipe and what is reported: ``benchmarks/training.py``'s docstring).

A module of that benchmark, not one of its own (hence the underscore): run it through
``python benchmarks/training.py``, whose ``--quick`` skips it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from _common import log

from embodia.core.chat import Message
from embodia.core.runs import read_run_records
from embodia.evals.explore import ExploreSettings, run_exploration
from embodia.policies.recipes import grpo_trainer, solutions
from embodia.policies.recipes.grpo_trainer import GRPOSettings, run_grpo
from embodia.policies.recipes.sft import SFTSettings, run_sft
from embodia.policies.rollouts import ChatPrompt, RolloutEngine, RolloutSettings, WaypointView
from embodia.policies.spec import make_trainable_policy
from embodia.policies.tiny_models import build_tiny_chat_lm
from embodia.policies.trainable import TrainablePolicy

WAYPOINT_ENV = "embodia/ActiveMappingWaypoint-v0"
WAYPOINT_SEED_STRIDE = 1000
"""Training reset seeds of training seed k start at k * this; held-out seeds start at 100_000."""
WAYPOINT_HELD_OUT = 100_000
WAYPOINT_TEACHER_SEEDS = 60_000
"""Reset seeds of the teacher episodes SFT learns from (the format warm-up's start at 50_000)."""


WAYPOINT_STUDY_DEFAULTS: dict[str, Any] = {
    "wp_budget": 40,
    "wp_rooms": 3,
    "wp_height": 64,
    "wp_width": 128,
    "wp_turns": 10,
    "wp_sft_episodes": 40,
    "wp_sft_steps": 60,
    "wp_teacher_episodes": 300,
    "wp_teacher_budget": 40,
    "wp_teacher_turns": 10,
    "wp_teacher_steps": 1500,
    "wp_teacher_lr": 1e-3,
    "wp_steps": 12,
    "wp_prompts": 4,
    "wp_group": 4,
    "wp_lr": 1e-4,
    "wp_beta": 0.0,
    "wp_credit": "episode",
    "wp_train_seeds": 3,
    "wp_eval_seeds": 12,
    "wp_random_repeats": 3,
}
"""The study's options (``--wp_*`` of ``benchmarks/training.py``) and their defaults."""


def warm_up(
    model_dir: Path,
    records: Sequence[Any],
    steps: int,
    out: Path,
    *,
    learning_rate: float = 3e-3,
    batch_size: int = 8,
    seed: int = 0,
) -> dict[str, Any]:
    """The waypoint study's SFT warm-ups: its summary."""
    settings = SFTSettings(
        model=f"hf:{model_dir}",
        data=tuple(records),
        max_steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
    )
    return run_sft(settings, out)


def waypoint_options(args: Any) -> dict[str, Any]:
    return {
        "action_type": "index",
        "max_steps": args.wp_budget,
        "rooms": args.wp_rooms,
        "panorama_height": args.wp_height,
        "panorama_width": args.wp_width,
    }


def text_waypoint_view(options: dict[str, Any]) -> WaypointView:
    """The waypoint env's chat view with the panorama left out: the candidates as text only."""
    env = gymnasium.make(WAYPOINT_ENV, **options)
    try:
        return WaypointView(WAYPOINT_ENV, env.observation_space, env.action_space, images=False)
    finally:
        env.close()


def random_picker(rng: np.random.Generator) -> solutions.Picker:
    """Picks a uniformly random shown candidate each turn."""
    return lambda observation: int(rng.choice(np.flatnonzero(observation["candidate_mask"])))


def format_records(
    view: WaypointView, options: dict[str, Any], seeds: Sequence[int], max_turns: int
) -> list[dict[str, list[Message]]]:
    """SFT records that teach the reply format only: each decision of random-pick episodes, the
    view's prompt for it and a uniformly random shown candidate as the answer."""
    env = gymnasium.make(WAYPOINT_ENV, **options)
    pick = random_picker(np.random.default_rng(0))
    try:
        return [
            r
            for seed in seeds
            for r in solutions.waypoint_episode(env, view, seed, pick, max_turns=max_turns)[0]
        ]
    finally:
        env.close()


def picker_aucs(
    view: WaypointView, options: dict[str, Any], seeds: Sequence[int], max_turns: int, pick: solutions.Picker
) -> tuple[list[float], list[dict[str, list[Message]]]]:
    """Episodes of a picker on the given scenes, run with the env directly: each one's coverage AUC,
    and every decision as a chat record."""
    env = gymnasium.make(WAYPOINT_ENV, **options)
    aucs, records = [], []
    try:
        for seed in seeds:
            made, info = solutions.waypoint_episode(env, view, seed, pick, max_turns=max_turns)
            aucs.append(float(info["coverage_auc"]))
            records += made
    finally:
        env.close()
    return aucs, records


def lm_aucs(
    engine: RolloutEngine, policy: TrainablePolicy, seeds: Sequence[int]
) -> tuple[list[float], Counter[str]]:
    """Greedy held-out episodes of a policy: each one's coverage AUC and how the episodes ended."""
    with torch.no_grad():
        trajectories = engine.collect(policy, seeds, group_size=1)
    return [t.info["coverage_auc"] for t in trajectories], Counter(t.ended_by for t in trajectories)


def grpo_waypoints(
    start: str, options: dict[str, Any], train_seed: int, args: Any, out: Path
) -> tuple[TrainablePolicy, list[float], Counter[int]]:
    """``run_grpo`` from ``start`` over the waypoint env with its text-only view (``images=False``):
    the trained policy, the mean trajectory reward of each step and the numbers it chose last."""
    settings = GRPOSettings(
        policy=start,
        env=WAYPOINT_ENV,
        env_options=options,
        images=False,
        steps=args.wp_steps,
        prompts_per_step=args.wp_prompts,
        group_size=args.wp_group,
        max_turns=args.wp_turns,
        max_new_tokens=6,
        learning_rate=args.wp_lr,
        beta=args.wp_beta,
        credit=args.wp_credit,
        first_seed=train_seed * WAYPOINT_SEED_STRIDE,
        seed=train_seed,
    )
    summary = run_grpo(
        settings,
        out,
        on_step=lambda line: log(
            f"  waypoint grpo seed {train_seed} step {line['step']}: gain {line['reward_mean']:.2f} m2"
        ),
    )
    curve = [row["reward_mean"] for row in read_run_records(out / grpo_trainer.METRICS)]
    last = [r for r in read_run_records(out / grpo_trainer.ROLLOUTS) if r["step"] == settings.steps]
    chosen = Counter(turn["action"] for r in last for turn in r["turns"] if turn["action"] is not None)
    return make_trainable_policy(summary["policy"], seed=0), curve, chosen


def heuristic_aucs(seeds: Sequence[int], args: Any, tmp: Path) -> list[float]:
    """The depth-first explorer with its heuristic policy (``embodia explore --agent dfs``) on the
    same scenes, budget and panorama size: each run's coverage AUC."""
    aucs = []
    for seed in seeds:
        settings = ExploreSettings(
            agent="dfs",
            env="waypoint",
            policy="heuristic",
            steps=args.wp_budget,
            seed=seed,
            rooms=args.wp_rooms,
            panorama_height=args.wp_height,
            panorama_width=args.wp_width,
            video=False,
        )
        aucs.append(float(run_exploration(settings, tmp / f"dfs-{seed}")["coverage_auc"]))
    return aucs


def teacher_agreement(policy: TrainablePolicy, records: Sequence[dict[str, list[Message]]]) -> float:
    """Share of the teacher's held-out decisions whose reply the policy repeats greedily."""
    prompts = [ChatPrompt(tuple(r["messages"][:-1])) for r in records]
    with torch.no_grad():
        replies = policy.sample(prompts, max_new_tokens=6, temperature=0.0)
    return float(
        np.mean(
            [s.text.strip() == r["messages"][-1]["content"] for s, r in zip(replies, records, strict=True)]
        )
    )


def waypoint_study(tmp: Path, args: Any) -> dict[str, Any]:
    options = waypoint_options(args)
    view = text_waypoint_view(options)
    held_out = list(range(WAYPOINT_HELD_OUT, WAYPOINT_HELD_OUT + args.wp_eval_seeds))
    started = time.perf_counter()
    # A small initial std: the default tiny LM (std 0.2) stays on the plateau of one answer.
    model_dir = build_tiny_chat_lm(tmp / "tiny-chat-lm-waypoint", attention_heads=4, initializer_range=0.02)

    # Format warm-up on random picks from seeds no training run or evaluation uses.
    records = format_records(view, options, range(50_000, 50_000 + args.wp_sft_episodes), args.wp_turns)
    sft = warm_up(model_dir, records, args.wp_sft_steps, tmp / "waypoint-sft")
    start = sft["policy"]
    # The teacher's decisions on other unused seeds, with a longer budget (more decisions per
    # house, later ones in explored rooms): the generated solutions SFT learns from.
    teacher_records = solutions.waypoint_solution_records(
        range(WAYPOINT_TEACHER_SEEDS, WAYPOINT_TEACHER_SEEDS + args.wp_teacher_episodes),
        env_options={**options, "max_steps": args.wp_teacher_budget},
        max_turns=args.wp_teacher_turns,
    )
    teacher_aucs, held_out_decisions = picker_aucs(
        view, options, held_out, args.wp_turns, solutions.waypoint_teacher
    )
    log(f"  waypoint teacher: {len(teacher_records)} records, held-out AUC {np.mean(teacher_aucs):.4f}")
    taught = warm_up(
        Path(start.removeprefix("hf:")),
        teacher_records,
        args.wp_teacher_steps,
        tmp / "teacher-sft",
        learning_rate=args.wp_teacher_lr,
        batch_size=16,
    )
    greedy = RolloutSettings(
        group_size=1, max_turns=args.wp_turns, max_new_tokens=6, temperature=0.0, num_envs=8
    )
    with RolloutEngine(WAYPOINT_ENV, env_options=options, settings=greedy, view=view) as engine:
        start_aucs, start_ends = lm_aucs(engine, make_trainable_policy(start, seed=0), held_out)
        log(f"  waypoint start (format SFT only): AUC {np.mean(start_aucs):.4f} {dict(start_ends)}")
        taught_policy = make_trainable_policy(taught["policy"], seed=0)
        sft_aucs, sft_ends = lm_aucs(engine, taught_policy, held_out)
        sft_agreement = teacher_agreement(taught_policy, held_out_decisions)
        sft_auc = float(np.mean(sft_aucs))
        log(
            f"  waypoint teacher SFT: AUC {sft_auc:.4f} {dict(sft_ends)}, "
            f"agrees with the teacher on {sft_agreement:.0%} of its held-out decisions"
        )
        trained: list[dict[str, Any]] = []
        for train_seed in range(args.wp_train_seeds):
            policy, curve, chosen = grpo_waypoints(
                taught["policy"], options, train_seed, args, tmp / f"grpo-{train_seed}"
            )
            aucs, ends = lm_aucs(engine, policy, held_out)
            agreement = teacher_agreement(policy, held_out_decisions)
            log(
                f"  waypoint trained seed {train_seed}: AUC {np.mean(aucs):.4f} {dict(ends)}, "
                f"agrees with the teacher on {agreement:.0%}"
            )
            trained.append(
                {
                    "seed": train_seed,
                    "auc": float(np.mean(aucs)),
                    "teacher_agreement": agreement,
                    "train_gain_first3": float(np.mean(curve[:3])),
                    "train_gain_last3": float(np.mean(curve[-3:])),
                    "ended_by": dict(ends),
                    "last_step_choices": {str(k): v for k, v in sorted(chosen.items())},
                }
            )

    random_aucs = []
    for repeat in range(args.wp_random_repeats):
        pick = random_picker(np.random.default_rng(repeat))
        random_aucs += picker_aucs(view, options, held_out, args.wp_turns, pick)[0]
    dfs_aucs = heuristic_aucs(held_out, args, tmp)

    trained_auc = float(np.mean([t["auc"] for t in trained]))
    start_auc, random_auc = float(np.mean(start_aucs)), float(np.mean(random_aucs))
    return {
        "waypoint_auc_gain_vs_random": round(trained_auc - random_auc, 4),
        "waypoint_auc_gain_vs_start": round(trained_auc - start_auc, 4),
        "waypoint_auc_gain_grpo_vs_sft": round(trained_auc - sft_auc, 4),
        "waypoint_auc_trained": round(trained_auc, 4),
        "waypoint_auc_trained_per_seed": [round(t["auc"], 4) for t in trained],
        "waypoint_trained_beats_random_seeds": sum(t["auc"] > random_auc for t in trained),
        "waypoint_trained_beats_start_seeds": sum(t["auc"] > start_auc for t in trained),
        "waypoint_trained_beats_sft_teacher_seeds": sum(t["auc"] > sft_auc for t in trained),
        "waypoint_auc_sft_teacher": round(sft_auc, 4),
        "waypoint_teacher_agreement_sft": round(sft_agreement, 4),
        "waypoint_sft_teacher_ended_by": dict(sft_ends),
        "waypoint_sft_teacher_loss_last": taught.get("train_loss_last"),
        "waypoint_auc_start": round(start_auc, 4),
        "waypoint_auc_random": round(random_auc, 4),
        "waypoint_auc_teacher": round(float(np.mean(teacher_aucs)), 4),
        "waypoint_auc_heuristic_dfs": round(float(np.mean(dfs_aucs)), 4),
        "waypoint_runs": trained,
        "waypoint_start_ended_by": dict(start_ends),
        "waypoint_held_out_seeds": len(held_out),
        "waypoint_held_out_teacher_decisions": len(held_out_decisions),
        "waypoint_env_options": options,
        "waypoint_max_turns": args.wp_turns,
        "waypoint_sft_records": len(records),
        "waypoint_teacher_records": len(teacher_records),
        "waypoint_teacher_sft_steps": args.wp_teacher_steps,
        "waypoint_teacher_budget": args.wp_teacher_budget,
        "waypoint_grpo": {
            "steps": args.wp_steps,
            "prompts_per_step": args.wp_prompts,
            "group_size": args.wp_group,
            "learning_rate": args.wp_lr,
            "beta": args.wp_beta,
            "credit": args.wp_credit,
        },
        "waypoint_s": round(time.perf_counter() - started, 1),
    }
