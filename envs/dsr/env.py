"""Gymnasium environments over DSR-Bench instances.

``embodia/DSR-v0``: one step per episode. Observation = the prompt text; action = the model's
reply text (JSON answer, or code in the CodeOnly mode, which runs in the sandbox); reward =
the score (exact match by default, partial credit with ``reward="partial"``); ``info`` holds
the diagnostics. ``reset(options=...)`` chooses suite / structure / operation / length /
index; otherwise the instance is drawn with the env's seeded generator.

``embodia/DSRInteractive-v0``: the agent applies one operation per step. Each observation
states the current state of the structure and the next operation; the action is the state
after it; the reward scores that state. With ``feedback="truth"`` (default) the next
observation shows the reference's state, so one mistake does not poison the rest of the
episode; with ``feedback="own"`` it shows the agent's own answer.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import gymnasium
from gymnasium import spaces

from embodia.core.parsing import NOT_JSON, ParseFailure, decode_bounded, extract_json
from embodia.envs import registry
from embodia.envs.dsr import prompts, scoring, suites
from embodia.envs.dsr.core import LENGTHS, DSRError, canonical, get_operation
from embodia.envs.dsr.sandbox import DEFAULT_LIMITS, Limits, extract_code, require_isolation, run_solution
from embodia.envs.dsr.suites import Instance

TEXT_LIMIT = 200_000
_CHARSET = frozenset(string.printable)
_FILTERS = ("suite", "structure", "operation", "length")


def text_space() -> spaces.Text:
    return spaces.Text(max_length=TEXT_LIMIT, min_length=0, charset=_CHARSET)


class _InstancePool:
    """The instances matching a filter, generated on first use and cached per filter."""

    def __init__(self, seed: int, instances: Sequence[Instance] | None = None) -> None:
        self.seed = seed
        self.given = list(instances) if instances is not None else None
        self._cache: dict[tuple[Any, ...], list[Instance]] = {}

    def select(
        self, suite: str, structure: str | None, operation: str | None, length: str | None
    ) -> list[Instance]:
        key = (suite, structure, operation, length)
        if key not in self._cache:
            if length is not None and length not in LENGTHS:
                raise DSRError(f"unknown length {length!r}: expected one of {', '.join(LENGTHS)}")
            if operation is not None:
                get_operation(operation)
            pool = self.given
            if pool is None:
                lengths = (length,) if length else tuple(LENGTHS)
                pool = list(suites.generate((suite,), seed=self.seed, lengths=lengths))
            found = [
                i
                for i in pool
                if i.suite == suite
                and (structure is None or i.structure == structure)
                and (operation is None or i.operation == operation)
                and (length is None or i.length == length)
            ]
            if not found:
                raise DSRError(
                    f"no DSR instances match suite={suite} structure={structure} operation={operation}"
                )
            self._cache[key] = found
        return self._cache[key]


class _DSRBase(gymnasium.Env[str, str]):
    metadata: dict[str, Any] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        suite: str = "main",
        structure: str | None = None,
        operation: str | None = None,
        length: str | None = None,
        *,
        instance_seed: int = suites.DEFAULT_SEED,
        instances: Sequence[Instance] | None = None,
        reward: str = "exact",
        render_mode: str | None = None,
    ) -> None:
        if reward not in ("exact", "partial"):
            raise DSRError(f"reward must be exact or partial, got {reward!r}")
        if suite not in suites.SUITES:
            raise DSRError(f"unknown DSR suite {suite!r}: expected one of {', '.join(suites.SUITES)}")
        self.defaults = {"suite": suite, "structure": structure, "operation": operation, "length": length}
        self.pool = _InstancePool(instance_seed, instances)
        self.reward_kind = reward
        self.render_mode = render_mode
        self.observation_space = text_space()
        self.action_space = text_space()
        self.instance: Instance | None = None
        self._last_observation = ""

    def _pick(self, options: dict[str, Any] | None) -> Instance:
        options = dict(options or {})
        unknown = set(options) - {*_FILTERS, "index", "id"}
        if unknown:
            raise DSRError(
                f"unknown reset options {sorted(unknown)}; known: {', '.join((*_FILTERS, 'index', 'id'))}"
            )
        chosen = {key: options.get(key, self.defaults[key]) for key in _FILTERS}
        pool = self.pool.select(
            str(chosen["suite"]), chosen["structure"], chosen["operation"], chosen["length"]
        )
        pool = self._eligible(pool)
        if "id" in options:
            for instance in pool:
                if instance.id == options["id"]:
                    return instance
            raise DSRError(f"no instance {options['id']!r} among the selected ones")
        if "index" in options:
            return pool[int(options["index"]) % len(pool)]
        return pool[int(self.np_random.integers(len(pool)))]

    def _eligible(self, pool: list[Instance]) -> list[Instance]:
        return pool

    def _reward(self, score: scoring.Score) -> float:
        return score.exact if self.reward_kind == "exact" else score.partial

    def render(self) -> str | None:
        return self._last_observation if self.render_mode == "ansi" else None


def _clean(text: str) -> str:
    """Observations stay inside the Text space's printable charset."""
    return "".join(c if c in _CHARSET else "?" for c in text)


class DSREnv(_DSRBase):
    """One DSR-Bench question per episode (see the module docstring)."""

    def __init__(
        self,
        suite: str = "main",
        *args: Any,
        mode: str = "stepwise",
        description: str = "full",
        tokens: int = prompts.DEFAULT_TOKENS,
        sandbox_limits: Limits = DEFAULT_LIMITS,
        unsafe_no_sandbox: bool = False,
        **kwargs: Any,
    ) -> None:
        prompts.check_mode(mode, description)
        if not unsafe_no_sandbox and (suite == "code" or mode == "CodeOnly"):
            require_isolation()  # refuse now rather than at the first answer to run
        super().__init__(suite, *args, **kwargs)
        self.mode, self.description, self.tokens = mode, description, tokens
        self.sandbox_limits = sandbox_limits
        self.isolated = not unsafe_no_sandbox

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.instance = self._pick(options)
        self._last_observation = _clean(
            prompts.render(self.instance, self.mode, description=self.description, tokens=self.tokens)
        )
        return self._last_observation, self._info(self.instance)

    def _info(self, instance: Instance) -> dict[str, Any]:
        return {**instance.identity(), "prompt_mode": prompts.instance_mode(instance, self.mode)}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.instance is None:
            raise DSRError("call reset() before step()")
        instance = self.instance
        mode = prompts.instance_mode(instance, self.mode)
        score = score_answer(str(action), instance, mode, self.sandbox_limits, isolated=self.isolated)
        info = {**self._info(instance), **score.to_json()}
        self.instance = None
        return "", self._reward(score), True, False, info


def score_answer(
    reply: str, instance: Instance, mode: str, limits: Limits = DEFAULT_LIMITS, *, isolated: bool = True
) -> scoring.Score:
    """Score a reply under a prompt mode: CodeOnly replies are run in the sandbox (isolated by
    the operating system unless ``isolated=False``; see :mod:`embodia.envs.dsr.sandbox`)."""
    if mode != "CodeOnly":
        return scoring.score_reply(reply, instance)
    code = extract_code(reply)
    if code is None:
        return scoring.parse_failure_score("the reply has no code defining solution()")
    result = run_solution(code, limits, isolated=isolated)
    if not result.ok:
        return scoring.Score(0.0, 0.0, "wrong_final", reason=result.reason)
    return scoring.score_value(result.value, instance)


def _state_from_reply(reply: str) -> Any:
    value: Any = decode_bounded(reply.strip())
    if value is NOT_JSON:
        value = extract_json(reply)
    if isinstance(value, dict):
        for key in ("state", "final_answer"):
            if key in value:
                return value[key]
    return value


class DSRInteractiveEnv(_DSRBase):
    """One operation per step, scored on the state after each (see the module docstring)."""

    def __init__(self, *args: Any, feedback: str = "truth", **kwargs: Any) -> None:
        if feedback not in ("truth", "own"):
            raise DSRError(f"feedback must be truth or own, got {feedback!r}")
        super().__init__(*args, **kwargs)
        self.feedback = feedback
        self.position = 0
        self._shown_state: Any = None

    def _eligible(self, pool: list[Instance]) -> list[Instance]:
        stepped = [i for i in pool if i.steps]
        if not stepped:
            raise DSRError(
                "none of the selected operations is a sequence of operations (nothing to step through)"
            )
        return stepped

    def _observation(self) -> str:
        assert self.instance is not None
        operation = get_operation(self.instance.operation)
        step = self.instance.steps[self.position]
        text = (
            f"{operation.description}\n{operation.rules}\n"
            f"Current state of the {operation.display}: {canonical(self._shown_state)}\n"
            f"Apply the operation {step.label} "
            f"(operation {self.position + 1} of {len(self.instance.steps)}).\n"
            'Reply with one JSON object {"state": ...} holding the state right after it, '
            "in the same form as the final answer."
        )
        return _clean(text)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.instance = self._pick(options)
        self.position = 0
        self._shown_state = self.instance.initial_state
        self._last_observation = self._observation()
        return self._last_observation, {
            "id": self.instance.id,
            "operation": self.instance.operation,
            "steps": len(self.instance.steps),
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.instance is None:
            raise DSRError("call reset() before step()")
        instance, step = self.instance, self.instance.steps[self.position]
        answer = _state_from_reply(str(action))
        operation = get_operation(instance.operation)
        if isinstance(answer, ParseFailure):
            score = scoring.parse_failure_score(answer.reason)
        else:
            exact, partial = scoring.compare(answer, step.state, operation.comparison, operation.prepare)
            score = scoring.Score(exact, partial, None if exact == 1.0 else "wrong_final", answer=answer)
        info = {
            "id": instance.id,
            "step": self.position,
            "operation_label": step.label,
            "truth": step.state,
            **score.to_json(),
        }
        own = not isinstance(answer, ParseFailure) and self.feedback == "own"
        self._shown_state = answer if own else step.state
        self.position += 1
        if self.position == len(instance.steps):
            self.instance = None
            self._last_observation = ""
            return "", self._reward(score), True, False, info
        self._last_observation = self._observation()
        return self._last_observation, self._reward(score), False, False, info


def register_envs() -> None:
    """Register this package's ids (``registry.entry_points("dsr")``) with gymnasium; ids already
    registered are left alone. ``import embodia`` has done it already."""
    registry.register_envs(list(registry.entry_points("dsr")))
