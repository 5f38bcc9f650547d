"""Generated SFT data: solved instances and teacher episodes of embodia's own environments.

A small model has to learn the answer format before GRPO can reward it for anything: a policy
that never writes a readable answer scores 0 on every sample, so every group's advantages are
0 and nothing is learned. These records teach the format (and, where the model can, the
answer) from solutions that are correct by construction, or from a teacher's decisions.

Three envs have generated records: DSR-Bench's solved instances (:func:`dsr_solution_records`),
the waypoint env's teacher episodes (:func:`waypoint_solution_records`) and the puzzles that
have a text drawing (:func:`puzzle_solution_records`).

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

Waypoints (``embodia/ActiveMappingWaypoint-v0`` with ``action_type="index"``): each record is
one decision of an episode in which a teacher picks, every turn, the shown candidate with the
largest estimated unseen area (the observation's ``candidate_gain_m2``, the waypoint
proposer's own estimate, in whole square metres as the prompt shows it; ties go to the lowest
number) until the episode ends (the env's
primitive-step budget, or ``max_turns`` decisions). Its prompt is exactly the chat prompt
:class:`~embodia.policies.rollout_views.WaypointView` makes for that observation (the text
part: the candidates' numbers, bearings, ranges and unseen areas; a text-only model reads the
same messages GRPO shows it with ``images=False``), its reply ``Answer: K``, which the view
reads back as candidate K (checked as each record is made). Record seeds are reset seeds: the
same seeds and env options give the same records, and episodes of other seeds are other
procedural houses. The greedy-gain teacher is a heuristic, not an optimum: it is what a
tiny model can be taught to read from the prompt.

Puzzles (``embodia/Puzzle-v0`` with ``text=True``, so that the prompt carries the puzzle's
text drawing and a text-only model can answer it): each record is the instance of one reset
seed, its prompt the env's, its reply the reference answer under the task's first answer key
(``{"path": "RRDL"}`` for a maze), scored by the env as it is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import numpy as np

from embodia.core.chat import Message
from embodia.envs.dsr.core import DSRError, get_operation
from embodia.envs.dsr.suites import Group, Instance, make_instance
from embodia.policies.rollout_views import ChatView, InvalidReply, RolloutError, WaypointView, listing_order

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


# --------------------------------------------------------------------------- puzzles

PUZZLE_ENV_ID = "embodia/Puzzle-v0"


def puzzle_reply(task: Any, answer: Any) -> str:
    """``answer`` as the reply ``task`` reads: under its first answer key (``answer`` for a task
    that names none)."""
    return json.dumps({getattr(task, "answer_keys", ("answer",))[0]: answer})


def puzzle_solution_records(task: str, difficulty: str, seeds: Iterable[int]) -> list[SFTRecord]:
    """One chat record per reset seed: ``[user: the text prompt, assistant: the solution]``. A
    solution that scores below full marks raises :class:`RolloutError` (a generator bug)."""
    import gymnasium

    from embodia.envs.puzzles.env import PuzzleEnv

    env = gymnasium.make(PUZZLE_ENV_ID, task=task, difficulty=difficulty, text=True)
    records: list[SFTRecord] = []
    try:
        for seed in seeds:
            observation, _ = env.reset(options={"seed": seed})
            puzzle = cast(PuzzleEnv, env.unwrapped)
            assert puzzle.instance is not None  # reset made it
            reply = puzzle_reply(puzzle.task, puzzle.instance.answer)
            _, reward, _, _, info = env.step(reply)
            if reward != 1.0:
                raise RolloutError(
                    f"the solution of {task} seed {seed} scores {reward} ({info['reason']}): {reply}"
                )
            user: Message = {"role": "user", "content": str(observation["prompt"])}
            records.append({"messages": [user, {"role": "assistant", "content": reply}]})
    finally:
        env.close()
    return records


# --------------------------------------------------------------------------- waypoints

WAYPOINT_ENV_ID = "embodia/ActiveMappingWaypoint-v0"

Picker = Callable[[Mapping[str, Any]], int]
"""Chooses a shown candidate's number for one waypoint observation."""


def waypoint_teacher_choice(observation: Mapping[str, Any]) -> int | None:
    """The shown candidate with the largest unseen area as the view's text shows it (whole
    square metres, :func:`~embodia.policies.rollout_views.shown_gain_m2`; ties: the lowest
    number), or None when no candidate is shown: the first line of the view's list. Choosing on
    the shown value, not the exact one, makes every choice a function of the prompt: a model can
    learn it exactly."""
    order = listing_order(observation)
    return order[0] if order else None


def waypoint_reply(choice: int) -> str:
    """The reply that names candidate ``choice`` in the form the waypoint view parses."""
    return f"Answer: {choice}"


def waypoint_episode(
    env: Any, view: ChatView, seed: int, pick: Picker, *, max_turns: int | None = None
) -> tuple[list[SFTRecord], dict[str, Any]]:
    """One episode of the waypoint env from reset seed ``seed`` in which ``pick`` chooses every
    turn (until no candidate is shown, the env ends the episode or ``max_turns`` decisions):
    each decision as a chat record (the view's prompt, :func:`waypoint_reply`), and the env's
    last ``info`` (``coverage_auc`` scores the episode). A reply the view does not read back
    as the pick raises :class:`RolloutError`."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RolloutError(f"waypoint reset seeds are non-negative integers, got {seed!r}")
    if max_turns is not None and max_turns < 1:
        raise RolloutError(f"max_turns must be at least 1 (or None: until the episode ends), got {max_turns}")
    observation, info = env.reset(seed=seed)
    records: list[SFTRecord] = []
    while max_turns is None or len(records) < max_turns:
        if not np.any(observation["candidate_mask"]):
            break
        choice = pick(observation)
        reply = waypoint_reply(choice)
        read = view.action(reply, observation)
        if isinstance(read, InvalidReply) or read != choice:
            why = read.reason if isinstance(read, InvalidReply) else f"it reads as waypoint {read}"
            raise RolloutError(f"the reply {reply!r} does not read back as waypoint {choice}: {why}")
        records.append(
            {"messages": [*view.prompt(observation).messages, {"role": "assistant", "content": reply}]}
        )
        observation, _, terminated, truncated, info = env.step(choice)
        if terminated or truncated:
            break
    return records, info


def waypoint_teacher(observation: Mapping[str, Any]) -> int:
    """The greedy-gain teacher as a :data:`Picker` (:func:`waypoint_teacher_choice`)."""
    choice = waypoint_teacher_choice(observation)
    if choice is None:  # waypoint_episode stops before a turn without candidates
        raise RolloutError("the teacher was asked to pick among no candidates")
    return choice


def waypoint_solution_records(
    seeds: Iterable[int],
    *,
    env_options: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
) -> list[SFTRecord]:
    """The decisions of one teacher episode per reset seed (see the module docstring), in seed
    then turn order. ``env_options`` are ``gymnasium.make`` keyword arguments of the waypoint
    env (``action_type`` must stay ``index``: the reply is a candidate number)."""
    import gymnasium

    options = dict(env_options or {})
    try:
        env = gymnasium.make(WAYPOINT_ENV_ID, **options)
    except (TypeError, ValueError) as error:
        raise RolloutError(f"cannot make {WAYPOINT_ENV_ID} with options {options}: {error}") from error
    records: list[SFTRecord] = []
    try:
        view = WaypointView(WAYPOINT_ENV_ID, env.observation_space, env.action_space, images=False)
        for seed in seeds:
            records += waypoint_episode(env, view, seed, waypoint_teacher, max_turns=max_turns)[0]
    finally:
        env.close()
    return records
