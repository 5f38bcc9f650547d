"""Rollout collection spread over workers (:mod:`embodia.core.scale_out`): a group is one unit.

:meth:`RolloutEngine.collect <embodia.policies.rollouts.RolloutEngine.collect>` runs every
episode of a batch in this process, sampling all live episodes in one batched call. Here each
group (``G`` episodes from one reset seed) is one unit of a :class:`~embodia.core.scale_out.WorkerPool`:

- The unit is pure. Its episodes are collected alone, from a sampling generator seeded by
  the batch's ``sampling_seed`` and the group's reset seed (:func:`group_sampling_seed`), so
  the records do not depend on which worker ran the group or which groups ran beside it:
  locally and on Ray, the same seeds and the same weights give the same records.
- On Ray, each worker makes the env and loads the policy once (from its :class:`PolicySource`:
  the model directory, LoRA, seed), and each :meth:`RolloutWorkers.collect` sends the current
  weights along (the trainable parameters only: every weight, or the LoRA adapters), which a
  worker loads once per batch. Locally the caller's policy samples directly.
- A worker that dies mid-group has the group run again on another worker; the group's
  trajectories come back once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.policies.rollouts import RolloutEngine, RolloutSettings, Trajectory
from embodia.policies.spec import make_trainable_policy
from embodia.policies.trainable import LoraSettings, TrainablePolicy


@dataclass(frozen=True)
class GroupUnit:
    """One group of a batch: ``settings.group_size`` episodes from reset seed ``seed``."""

    group: int
    """The group's index in the batch."""
    seed: int
    sampling_seed: int
    """Seeds the sampling generator for this group's episodes."""
    env_options: Mapping[str, Any]
    """The env's options: a worker keeps one engine per options and settings."""
    settings: RolloutSettings
    """How the group is collected (its group size, turns, temperature, ...)."""


@dataclass(frozen=True)
class PolicySource:
    """How a worker loads the sampling policy: as :func:`~embodia.policies.spec.make_trainable_policy`
    does from ``spec`` (``hf:DIR``), with ``lora`` adapters when the trainer has them."""

    spec: str
    lora: LoraSettings | None = None
    seed: int = 0


@dataclass(frozen=True)
class Weights:
    """The sampling policy's trainable parameters at one point of training."""

    version: int
    tensors: Mapping[str, torch.Tensor]


def trainable_weights(policy: TrainablePolicy, version: int) -> Weights:
    """What training changes in ``policy`` (every weight, or only the LoRA adapters), copied."""
    tensors = {
        name: parameter.detach().to("cpu", copy=True)
        for name, parameter in policy.model.named_parameters()
        if parameter.requires_grad
    }
    return Weights(version, tensors)


def group_sampling_seed(sampling_seed: int, reset_seed: int) -> int:
    """The sampling seed of the group from ``reset_seed`` in a batch seeded ``sampling_seed``."""
    return int(np.random.SeedSequence([sampling_seed, reset_seed]).generate_state(1)[0])


CollectGroup = Callable[[GroupUnit, Weights | None], list[Trajectory]]


class _Engines:
    """A worker's rollout engines, one per (env options, settings) it was asked for: a trainer's
    training and held-out groups differ in both, and go to the same workers."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self._engines: dict[tuple[Any, ...], RolloutEngine] = {}

    def collect(self, policy: TrainablePolicy, unit: GroupUnit) -> list[Trajectory]:
        key = (json.dumps(unit.env_options, sort_keys=True, default=str), unit.settings)
        if key not in self._engines:
            # one sub-env per episode of the group: its episodes run side by side
            settings = dataclasses.replace(unit.settings, num_envs=unit.settings.group_size)
            self._engines[key] = RolloutEngine(self.env_id, env_options=unit.env_options, settings=settings)
        policy.manual_seed(unit.sampling_seed)
        trajectories = self._engines[key].collect(policy, [unit.seed])
        return [dataclasses.replace(t, group=unit.group) for t in trajectories]

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines = {}


def _local_worker(engines: _Engines, policy: TrainablePolicy) -> CollectGroup:
    return lambda unit, _: engines.collect(policy, unit)


def _remote_worker(env_id: str, source: PolicySource) -> CollectGroup:
    """A Ray worker: the policy loaded once, each batch's weights loaded once, engines made as asked."""
    engines = _Engines(env_id)
    policy = make_trainable_policy(source.spec, lora=source.lora, seed=source.seed)
    loaded: list[int] = []

    def collect(unit: GroupUnit, weights: Weights | None) -> list[Trajectory]:
        if weights is not None and loaded[-1:] != [weights.version]:
            with torch.no_grad():
                parameters = dict(policy.model.named_parameters())
                for name, tensor in weights.tensors.items():
                    parameters[name].copy_(tensor)
            loaded.append(weights.version)
        return engines.collect(policy, unit)

    return collect


class RolloutWorkers(AbstractContextManager["RolloutWorkers"]):
    """Collects groups of episodes of ``env_id`` as units on ``backend`` (see the module docstring).

    Locally the groups are sampled by the caller's policy (which a trainer updates); on Ray by
    workers that load ``source`` and are sent the policy's weights with each batch. One set of
    workers serves every :meth:`collect`, whatever its env options and rollout settings.
    """

    def __init__(self, env_id: str, *, source: PolicySource, backend: Backend = LOCAL) -> None:
        self.env_id = env_id
        self.source = source
        self.backend = backend
        self._engines = _Engines(env_id)
        self._pools: dict[int, WorkerPool[GroupUnit, list[Trajectory]]] = {}
        self._version = 0

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools = {}
        self._engines.close()

    def _pool(self, policy: TrainablePolicy) -> WorkerPool[GroupUnit, list[Trajectory]]:
        key = id(policy) if self.backend.kind == "local" else 0
        if key not in self._pools:
            factory: Callable[[], CollectGroup]
            if self.backend.kind == "local":
                factory = partial(_local_worker, self._engines, policy)
            else:
                factory = partial(_remote_worker, self.env_id, self.source)
            self._pools[key] = WorkerPool(factory, self.backend)
        return self._pools[key]

    def collect(
        self,
        policy: TrainablePolicy,
        seeds: Sequence[int],
        *,
        sampling_seed: int,
        settings: RolloutSettings,
        env_options: Mapping[str, Any] | None = None,
    ) -> list[Trajectory]:
        """``settings.group_size`` episodes per seed, ordered by seed then member, as
        :meth:`RolloutEngine.collect` returns them; group ``g`` is sampled from
        :func:`group_sampling_seed` ``(sampling_seed, seeds[g])``."""
        options = dict(env_options or {})
        units = [
            Unit(
                f"group-{g}",
                GroupUnit(g, int(seed), group_sampling_seed(sampling_seed, int(seed)), options, settings),
            )
            for g, seed in enumerate(seeds)
        ]
        weights = None
        if self.backend.kind != "local":
            self._version += 1
            weights = trainable_weights(policy, self._version)
        groups: dict[int, list[Trajectory]] = {}

        def arrived(_: str, trajectories: list[Trajectory]) -> None:
            groups[trajectories[0].group] = trajectories

        self._pool(policy).run(units, arrived, shared=weights)
        return [t for g in range(len(seeds)) for t in groups[g]]
