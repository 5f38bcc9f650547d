"""The CI-sized evidence that GRPO teaches a language model: SFT on the answer format, then GRPO.

Shared by ``tests/policies/recipes/test_grpo_learns.py`` (each advantage estimator, asserted)
and ``benchmarks/training.py`` (``text_reward_gain``).

The task is a third-party text env, registered here as ``embodia-tests/SayDigit-v0`` the way
any package registers its own: the observation asks for one digit ("Say the digit 7."), the
action is the reply, and the reward is 1 when the reply's first digit is the one asked for.
Verifiable, one turn, chance 1/10; a constant answer scores 1/10 too.

The recipe is embodia's: :func:`run_sft` on replies in the format ``Answer: D`` with a *random*
digit D, so the tiny random-weight model learns the format but not the task (its held-out
reward stays near chance), then :func:`run_grpo` on the env, whose rewards alone must teach it
to copy the asked digit. The DSR ``array.access`` task the issue names first is too hard for
the tiny model at this budget (see docs/benchmarks.md); this one is the smallest real task
where what is learned can only come from the rewards.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

ENV_ID = "embodia-tests/SayDigit-v0"
EVAL_FIRST_SEED = 1_000_000


class SayDigit(gymnasium.Env[str, str]):
    """Asks for one digit; reward 1 when the reply's first digit is that digit."""

    def __init__(self) -> None:
        charset = frozenset(string.printable)
        self.observation_space = spaces.Text(64, charset=charset)
        self.action_space = spaces.Text(64, min_length=0, charset=charset)
        self.target = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(10))
        return f"Say the digit {self.target}.", {"target": self.target}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        digits = [c for c in str(action) if c.isdigit()]
        said = int(digits[0]) if digits else None
        return "", float(said == self.target), True, False, {"said": said}


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=SayDigit)


def format_records(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """SFT records in the answer format with a random digit: the format, not the task."""
    rng = random.Random(seed)
    return [
        {
            "messages": [
                {"role": "user", "content": f"Say the digit {rng.randrange(10)}."},
                {"role": "assistant", "content": f"Answer: {rng.randrange(10)}"},
            ]
        }
        for _ in range(count)
    ]


def constant_baseline(prompts: int, first_seed: int = EVAL_FIRST_SEED) -> float:
    """The held-out reward of the best constant answer (the trivial baseline)."""
    env = SayDigit()
    targets = [env.reset(seed=first_seed + i)[1]["target"] for i in range(prompts)]
    return max(Counter(targets).values()) / prompts


def warm_up(model: Path, out: Path) -> Path:
    """SFT of ``model`` on the answer format into ``out``; the trained model's directory."""
    from embodia.policies.recipes.sft import SFTSettings, run_sft

    settings = SFTSettings(
        model=f"hf:{model}", data=tuple(format_records(64)), max_steps=12, batch_size=8, learning_rate=3e-3
    )
    return Path(run_sft(settings, out)["final"])


def grpo_settings(policy: Path, advantage: str, *, steps: int = 120, seed: int = 0) -> Any:
    """The GRPO run the evidence uses: 8 prompts x 8 samples a step, 32 x 4 sampled held-out
    episodes before and after."""
    from embodia.policies.recipes.grpo_trainer import GRPOSettings

    return GRPOSettings(
        policy=f"hf:{policy}",
        env=ENV_ID,
        advantage=advantage,
        steps=steps,
        prompts_per_step=8,
        group_size=8,
        max_new_tokens=6,
        learning_rate=3e-4,
        seed=seed,
        eval_prompts=32,
        eval_samples=4,
        eval_temperature=1.0,
        eval_first_seed=EVAL_FIRST_SEED,
    )
