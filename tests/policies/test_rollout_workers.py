"""Rollout groups as units: the same records locally and on Ray for the same seeds and weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from embodia.core.scale_out import Backend
from embodia.policies.rollout_workers import PolicySource, RolloutWorkers, group_sampling_seed
from embodia.policies.rollouts import RolloutSettings, Trajectory
from embodia.policies.spec import make_trainable_policy
from embodia.policies.trainable import LoraSettings, TrainablePolicy

DSR = {"length": "short", "structure": None, "operation": None}
SETTINGS = RolloutSettings(group_size=3, max_turns=1, max_new_tokens=6, temperature=1.0)


def _records(trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    """The records without their logprobs (compared by :func:`_same_logprobs`)."""
    records = []
    for t in trajectories:
        record = t.to_json()
        for turn in record["turns"]:
            del turn["logprobs"]
        records.append(record)
    return records


def _same_logprobs(a: list[Trajectory], b: list[Trajectory]) -> bool:
    """Equal up to float rounding: a worker's torch may sum in another order (its own thread count)."""
    first = [v for t in a for turn in t.turns for v in turn.logprobs]
    second = [v for t in b for turn in t.turns for v in turn.logprobs]
    return len(first) == len(second) and bool(np.allclose(first, second, rtol=0, atol=1e-4))


def _policy(source: PolicySource, shift: float = 0.0) -> TrainablePolicy:
    policy = make_trainable_policy(source.spec, lora=source.lora, seed=source.seed)
    if shift:  # trained weights: the workers must sample with these, not the directory's
        with torch.no_grad():
            for parameter in policy.trainable_parameters():
                parameter.add_(shift)  # LoRA's B starts at zero: a shift by sign would leave it
    return policy


def _collect(
    policy: TrainablePolicy, source: PolicySource, backend: Backend, seeds: list[int]
) -> list[Trajectory]:
    with RolloutWorkers("embodia/DSR-v0", source=source, backend=backend) as workers:
        return workers.collect(policy, seeds, sampling_seed=7, settings=SETTINGS, env_options=DSR)


def test_group_seeds_differ_by_batch_and_reset_seed() -> None:
    seeds = {group_sampling_seed(b, s) for b in (0, 1) for s in (0, 1, 2)}
    assert len(seeds) == 6 and group_sampling_seed(3, 4) == group_sampling_seed(3, 4)


def test_a_group_is_the_same_whatever_else_is_collected(tiny_chat_lm_dir: Path) -> None:
    source = PolicySource(f"hf:{tiny_chat_lm_dir}")
    policy = _policy(source)
    alone = _collect(policy, source, Backend(), [11])
    together = _collect(policy, source, Backend(), [4, 11, 5])
    assert [(t.group, t.member) for t in together] == [(g, m) for g in range(3) for m in range(3)]
    assert _records(alone) == [{**r, "group": 0} for r in _records(together)[3:6]]
    assert _same_logprobs(alone, together[3:6])


@pytest.mark.ray
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_ray_workers_return_the_local_records(
    tiny_chat_lm_dir: Path, ray_runtime: object, lora: bool
) -> None:
    source = PolicySource(f"hf:{tiny_chat_lm_dir}", lora=LoraSettings(r=4) if lora else None)
    seeds = [3, 8, 13, 21]
    trained, untrained = _policy(source, shift=0.05), _policy(source)
    local = _collect(trained, source, Backend(), seeds)
    remote = _collect(trained, source, Backend(kind="ray", num_workers=2), seeds)
    assert _records(remote) == _records(local)
    assert _same_logprobs(remote, local)
    # the weights are what the workers sample with: those of the untrained policy give other replies
    other = _collect(untrained, source, Backend(kind="ray", num_workers=2), seeds)
    assert _records(other) != _records(local)


@pytest.mark.ray
def test_grpo_on_ray_trains_as_the_local_group_units_do(
    tiny_chat_lm_dir: Path, tmp_path: Path, ray_runtime: object
) -> None:
    """Two GRPO steps with the rollouts on Ray workers: the workers sample with each step's
    weights, so the rollouts, rewards and final weights equal the in-process group units'."""
    from safetensors.torch import load_file

    from embodia.policies.recipes.grpo_trainer import GRPOSettings, run_grpo

    settings = GRPOSettings(
        policy=f"hf:{tiny_chat_lm_dir}",
        env="embodia/DSR-v0",
        env_options={"operation": "array.access", "length": "short"},
        steps=2,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=4,
        learning_rate=1e-2,
        eval_prompts=2,
        seed=3,
    )
    runs = {"local": Backend(), "ray": Backend(kind="ray", num_workers=2)}
    for name, backend in runs.items():
        run_grpo(settings, tmp_path / name, backend=backend)

    def rollouts(name: str) -> list[tuple[Any, ...]]:
        lines = (tmp_path / name / "rollouts.jsonl").read_text().splitlines()
        return [
            (r["step"], r["seed"], r["member"], r["rewards"], [t["completion_ids"] for t in r["turns"]])
            for r in map(json.loads, lines)
        ]

    def rewards(name: str) -> list[tuple[Any, ...]]:
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        return [(r["step"], r.get("reward_mean"), r.get("eval_reward")) for r in map(json.loads, lines)]

    assert rollouts("ray") == rollouts("local") and len(rollouts("local")) == 8
    assert rewards("ray") == rewards("local")
    local, remote = (load_file(tmp_path / n / "final" / "model.safetensors") for n in runs)
    assert all(torch.allclose(local[k], remote[k], atol=1e-5) for k in local)
