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
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.policies.rollouts import RolloutEngine, RolloutError, RolloutSettings, Trajectory
from embodia.policies.spec import make_trainable_policy
from embodia.policies.trainable import LoraSettings, TrainablePolicy


@dataclass(frozen=True)
class GroupUnit:
    """One group of a batch: ``size`` episodes from reset seed ``seed``."""

    group: int
    """The group's index in the batch."""
    seed: int
    size: int
    sampling_seed: int
    """Seeds the sampling generator for this group's episodes."""


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


def _collect_group(engine: RolloutEngine, policy: TrainablePolicy, unit: GroupUnit) -> list[Trajectory]:
    policy.manual_seed(unit.sampling_seed)
    trajectories = engine.collect(policy, [unit.seed], group_size=unit.size)
    return [dataclasses.replace(t, group=unit.group) for t in trajectories]


def _local_worker(engine: RolloutEngine, policy: TrainablePolicy) -> CollectGroup:
    return lambda unit, _: _collect_group(engine, policy, unit)


def _remote_worker(
    env_id: str, env_options: Mapping[str, Any], settings: RolloutSettings, source: PolicySource
) -> CollectGroup:
    """A Ray worker: the env and the policy made once; each batch's weights loaded once."""
    engine = RolloutEngine(env_id, env_options=env_options, settings=settings)
    policy = make_trainable_policy(source.spec, lora=source.lora, seed=source.seed)
    loaded: list[int] = []

    def collect(unit: GroupUnit, weights: Weights | None) -> list[Trajectory]:
        if weights is not None and loaded[-1:] != [weights.version]:
            with torch.no_grad():
                parameters = dict(policy.model.named_parameters())
                for name, tensor in weights.tensors.items():
                    parameters[name].copy_(tensor)
            loaded.append(weights.version)
        return _collect_group(engine, policy, unit)

    return collect


class RolloutWorkers(AbstractContextManager["RolloutWorkers"]):
    """Collects groups of episodes as units on ``backend`` (see the module docstring).

    Locally the groups are sampled by ``policy`` (the caller's, which a trainer updates); on
    Ray by workers that load ``source`` and are sent the policy's weights with each batch.
    """

    def __init__(
        self,
        env_id: str,
        *,
        env_options: Mapping[str, Any] | None = None,
        settings: RolloutSettings | None = None,
        source: PolicySource,
        backend: Backend = LOCAL,
    ) -> None:
        self.env_id = env_id
        self.env_options = dict(env_options or {})
        self.settings = settings or RolloutSettings()
        self.source = source
        self.backend = backend
        # one env per worker: a group's episodes run side by side in it
        self._worker_settings = dataclasses.replace(self.settings, num_envs=self.settings.group_size)
        self._engine: RolloutEngine | None = None
        self._pools: dict[int, WorkerPool[GroupUnit, list[Trajectory]]] = {}
        self._version = 0

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools = {}
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _pool(self, policy: TrainablePolicy) -> WorkerPool[GroupUnit, list[Trajectory]]:
        key = id(policy) if self.backend.kind == "local" else 0
        if key not in self._pools:
            if self.backend.kind == "local":
                if self._engine is None:
                    self._engine = RolloutEngine(
                        self.env_id, env_options=self.env_options, settings=self._worker_settings
                    )
                factory: Callable[[], CollectGroup] = partial(_local_worker, self._engine, policy)
            else:
                factory = partial(
                    _remote_worker, self.env_id, self.env_options, self._worker_settings, self.source
                )
            self._pools[key] = WorkerPool(factory, self.backend)
        return self._pools[key]

    def collect(
        self,
        policy: TrainablePolicy,
        seeds: Sequence[int],
        *,
        sampling_seed: int,
        group_size: int | None = None,
    ) -> list[Trajectory]:
        """``group_size`` (default: the settings') episodes per seed, ordered by seed then
        member, as :meth:`RolloutEngine.collect` returns them; group ``g`` is sampled from
        :func:`group_sampling_seed` ``(sampling_seed, seeds[g])``."""
        size = self.settings.group_size if group_size is None else group_size
        if size < 1:
            raise RolloutError(f"group_size must be at least 1, got {size}")
        units = [
            Unit(f"group-{g}", GroupUnit(g, int(seed), size, group_sampling_seed(sampling_seed, int(seed))))
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
