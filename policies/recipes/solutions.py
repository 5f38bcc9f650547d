"""Generated SFT data: solved instances of embodia's own verifiable environments.

A small model has to learn the answer format before GRPO can reward it for anything: a policy
that never writes a readable answer scores 0 on every sample, so every group's advantages are
0 and nothing is learned. These records teach the format (and, where the model can, the
answer) from solutions that are correct by construction.

DSR-Bench (``embodia/DSR-v0``): each record is one instance of a DSR operation (default
``array.access`` at the ``short`` length: "what is the value at index i of this 5-10 item
array?"), its prompt exactly the observation the env shows for it (prompt mode ``none``, the
structure described by ``name``: the shortest prompts), and its reply the reference
implementation's truth as the one JSON object ``{"final_answer": ...}`` the env's scorer reads.
Every reply is scored by the env itself as it is made (``step``), and one that scores below
full marks is an error, never a record.

Seeds: record ``s`` is the instance with index ``s`` of its (operation, length) group, drawn
from its own ``random.Random`` (as DSR-Bench draws every instance), so a seed range gives the
same records on every machine, and disjoint ranges give disjoint instances: train on
``range(0, 1000)`` and hold out ``range(10_000, 10_200)``. :func:`dsr_env_options` gives the
env the same instances, so a GRPO run over ``embodia/DSR-v0`` sees these prompts.

Puzzles (``embodia/Puzzle-v0``) are not generated here: their questions are about an image, so
a text-only model cannot answer them from the prompt alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from embodia.core.chat import Message
from embodia.envs.dsr.core import DSRError, get_operation
from embodia.envs.dsr.suites import Group, Instance, make_instance

DSR_ENV_ID = "embodia/DSR-v0"
DSR_OPERATION = "array.access"
DSR_LENGTH = "short"
DSR_PROMPT_MODE = "none"
"""The prompt mode whose reply is only ``{"final_answer": ...}`` (no steps to write)."""
DSR_DESCRIPTION = "name"
"""The structure named, not spelled out: the shortest prompt a tiny model has to read."""

SFTRecord = dict[str, list[Message]]
"""One chat record: ``{"messages": [system?, user, assistant]}``."""


def dsr_instances(
    seeds: Iterable[int],
    *,
    operation: str = DSR_OPERATION,
    length: str = DSR_LENGTH,
    instance_seed: int = 0,
) -> list[Instance]:
    """The DSR instances of ``operation`` at ``length`` numbered ``seeds`` (see the module
    docstring); ``instance_seed`` picks another family of instances for the same numbers."""
    op = get_operation(operation)
    if op.category == "spatial":
        raise DSRError(f"{operation} belongs to the spatial suite; pick an operation of the main suite")
    group = Group("main", op.key)
    found = []
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise DSRError(f"instance seeds are non-negative integers, got {seed!r}")
        found.append(make_instance(group, length, seed, instance_seed))
    return found


def dsr_env_options(instances: Iterable[Instance]) -> dict[str, Any]:
    """Keyword arguments for ``gymnasium.make(DSR_ENV_ID, **options)``: an env that draws from
    ``instances`` and shows each with the prompt the records of :func:`dsr_solution_records`
    hold, and whose reward is the exact-match score."""
    return {
        "suite": "main",
        "instances": list(instances),
        "mode": DSR_PROMPT_MODE,
        "description": DSR_DESCRIPTION,
        "reward": "exact",
    }


def dsr_reply(instance: Instance) -> str:
    """The reply that scores full marks on ``instance``: its truth as ``{"final_answer": ...}``."""
    return json.dumps({"final_answer": instance.truth})


def dsr_solution_records(
    seeds: Iterable[int],
    *,
    operation: str = DSR_OPERATION,
    length: str = DSR_LENGTH,
    instance_seed: int = 0,
    system: str | None = None,
) -> list[SFTRecord]:
    """One chat record per seed: ``[system?, user: the env's observation, assistant: the
    solution]``. Each solution is scored by the env as the record is made; anything below
    full marks raises :class:`DSRError` (a generator bug, never silently kept)."""
    import gymnasium

    instances = dsr_instances(seeds, operation=operation, length=length, instance_seed=instance_seed)
    if not instances:
        return []
    env = gymnasium.make(DSR_ENV_ID, **dsr_env_options(instances))
    records: list[SFTRecord] = []
    try:
        for index, instance in enumerate(instances):
            observation, _ = env.reset(options={"index": index})
            reply = dsr_reply(instance)
            _, reward, _, _, info = env.step(reply)
            if reward != 1.0:
                raise DSRError(
                    f"the solution of {instance.id} scores {reward}, not 1 ({info.get('failure')}): {reply}"
                )
            messages: list[Message] = [] if system is None else [{"role": "system", "content": system}]
            messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": reply}]
            records.append({"messages": messages})
    finally:
        env.close()
    return records
