"""SxS training: SFT on interleaved think/speak trajectories, then GRPO on the answers' accuracy
with an optional content-latency term.

SxS (When to Think, When to Speak) trains a model to speak each part of its answer as soon as
its reasoning supports it. The data builder (:mod:`embodia.policies.recipes.sxs_data`) turns
an item's exact ``(reasoning, answer)`` pair into such a trajectory. This recipe:

1. **SFT** (:func:`~embodia.policies.recipes.sft.run_sft`) on ``sft_items`` reference
   trajectories of ``source`` (a puzzle, or ``dsr:OPERATION``), with the prompt the SxS
   runtime asks with.
2. **GRPO** (:func:`~embodia.policies.recipes.grpo_trainer.run_grpo`) from that model in the
   env ``embodia-recipes/SxS-v0`` (:class:`SxSEnv`, registered here when this module is
   imported: it stands on the SxS data builder, a floor above embodia's own envs, so it
   registers itself as a third-party env does, under its own namespace). An episode is one item of the
   same source, on seeds after the SFT items'. The reply is read as an interleaved stream; only
   its spoken part is scored, exactly, by the item's own scorer. The reward is the accuracy
   (1 for a correct answer, else 0) plus, with ``latency_weight`` > 0, a content-latency term:
   ``latency_weight * accuracy * (1 - first_speak_fraction)``, where
   ``first_speak_fraction`` is the share of the reply's tokens before the first spoken span.
   Only correct answers are paid for speaking early, so speaking before the reasoning
   supports it earns nothing. Each step's ``metrics.jsonl`` line carries the content-latency
   metrics of its episodes as ``env/...`` (``accuracy``, ``first_speak_fraction``,
   ``speak_tokens``, ``think_tokens``, ``speaks``).

:func:`run_sxs_train` writes ``sft/`` and ``grpo/`` (the two runs' folders) and
``summary.json`` under ``out``; ``resume=True`` continues whichever run was cut.
"""

from __future__ import annotations

import math
import string
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

from embodia.core.chat import Message
from embodia.core.interleaved import SXS_SYSTEM, parse_interleaved
from embodia.core.limits import check_range, check_seed
from embodia.core.runs import RunFolder, runner
from embodia.errors import EmbodiaError
from embodia.policies.recipes.sxs_data import SxSItem, make_item, sft_records, system_prompt
from embodia.policies.rollout_views import CHAT_VIEWS, ChatPrompt, ChatView
from embodia.policies.spec import parse_policy_spec

SXS_ENV = "embodia-recipes/SxS-v0"
SFT = "sft"
GRPO = "grpo"
SUMMARY = "summary.json"
TEXT_LIMIT = 100_000


class SxSTrainError(EmbodiaError, ValueError):
    """SxS training settings that cannot be used; the message names them."""


def reply_metrics(reply: str, item: SxSItem) -> dict[str, float]:
    """The content-latency numbers of one reply (module docstring), its tokens whitespace ones."""
    spans = parse_interleaved(reply)
    spoken = [s for s in spans if s.channel == "speak"]
    total = max((s.end for s in spans), default=0)
    speak_tokens = sum(s.n_tokens for s in spoken)
    verdict = item.score(" ".join(s.text for s in spoken))
    return {
        "accuracy": 1.0 if verdict.correct else 0.0,
        "first_speak_fraction": spoken[0].start / total if spoken and total else 1.0,
        "speak_tokens": float(speak_tokens),
        "think_tokens": float(sum(s.n_tokens for s in spans) - speak_tokens),
        "speaks": float(len(spoken)),
    }


def sxs_reward(metrics: dict[str, float], latency_weight: float) -> float:
    return metrics["accuracy"] + latency_weight * metrics["accuracy"] * (
        1.0 - metrics["first_speak_fraction"]
    )


class SxSEnv(gymnasium.Env[dict[str, Any], str]):
    """``embodia-recipes/SxS-v0``: one SxS item per episode (module docstring). Observation: the SxS
    system prompt for the item and its question; action: the reply."""

    def __init__(
        self, source: str = "dsr:queue.compound", difficulty: str = "short", latency_weight: float = 0.0
    ):
        if not (
            isinstance(latency_weight, int | float) and math.isfinite(latency_weight) and latency_weight >= 0
        ):
            raise SxSTrainError(f"latency_weight must be a finite number >= 0, got {latency_weight!r}")
        make_item(source, 0, difficulty, 0)  # a bad source or difficulty fails here, not at reset
        self.source, self.difficulty, self.latency_weight = source, difficulty, float(latency_weight)
        text = spaces.Text(max_length=TEXT_LIMIT, charset=frozenset(string.printable))
        self.observation_space = spaces.Dict({"system": text, "prompt": text})
        self.action_space = spaces.Text(max_length=TEXT_LIMIT, charset=frozenset(string.printable))
        self.item: SxSItem | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        index = int(seed) if seed is not None else int(self.np_random.integers(1 << 30))
        self.item = make_item(self.source, index, self.difficulty, 0)
        observation = {"system": system_prompt(SXS_SYSTEM, self.item), "prompt": self.item.question}
        return observation, {"item": self.item.id}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        if self.item is None:
            raise SxSTrainError("step before reset")
        metrics = reply_metrics(str(action), self.item)
        observation = {"system": system_prompt(SXS_SYSTEM, self.item), "prompt": self.item.question}
        return (
            observation,
            sxs_reward(metrics, self.latency_weight),
            True,
            False,
            {"item": self.item.id, "metrics": metrics},
        )


class SxSView(ChatView):
    """The item's SxS system prompt and its question, as the SFT records put them."""

    uses_images = False

    def __init__(
        self, env_id: str, observation_space: Any, action_space: Any, *, images: bool = True
    ) -> None:
        del env_id, observation_space, action_space, images

    def prompt(self, observation: Any) -> ChatPrompt:
        messages: tuple[Message, ...] = (
            {"role": "system", "content": str(observation["system"])},
            {"role": "user", "content": str(observation["prompt"])},
        )
        return ChatPrompt(messages, ())

    def action(self, reply: str, observation: Any) -> Any:
        return reply


if SXS_ENV not in gymnasium.registry:
    gymnasium.register(SXS_ENV, entry_point=f"{__name__}:SxSEnv")
CHAT_VIEWS.setdefault(SXS_ENV, SxSView)


@dataclass(frozen=True)
class SxSTrainSettings:
    """An SxS training run (module docstring)."""

    model: str
    """The model to train: ``hf:DIR``."""
    source: str = "dsr:queue.compound"
    """Items: a puzzle (maze, sudoku, frozenlake, tsp) or ``dsr:OPERATION``."""
    difficulty: str = "short"
    """The puzzle's size, or the DSR length."""
    sft_items: int = 64
    """Reference trajectories to fine-tune on (items 0..sft_items-1)."""
    sft_epochs: float = 3.0
    sft_learning_rate: float = 1e-3
    sft_batch_size: int = 8
    grpo_steps: int = 10
    grpo_prompts_per_step: int = 4
    grpo_group_size: int = 4
    grpo_learning_rate: float = 1e-5
    max_new_tokens: int = 256
    latency_weight: float = 0.0
    """Weight of the content-latency term of the reward (0: accuracy alone)."""
    eval_prompts: int = 8
    """Held-out items scored by GRPO at its start and end."""
    lora_r: int = 0
    lora_alpha: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if parse_policy_spec(self.model)[0] != "hf":
            raise SxSTrainError(f"SxS training needs a local transformers model: hf:DIR, got {self.model!r}")
        check_range("sft_items", self.sft_items, 1, 100_000, SxSTrainError)
        check_range("grpo_steps", self.grpo_steps, 0, 100_000, SxSTrainError)
        check_range("eval_prompts", self.eval_prompts, 0, 100_000, SxSTrainError)
        if not (math.isfinite(self.latency_weight) and self.latency_weight >= 0):
            raise SxSTrainError(f"latency_weight must be >= 0, got {self.latency_weight!r}")
        check_seed("seed", self.seed, SxSTrainError)
        make_item(self.source, 0, self.difficulty, 0)
        # the two stages' own checks, now rather than after the first stage has run
        self.sft_settings(())
        if self.grpo_steps:
            self.grpo_settings(self.model)

    def sft_settings(self, records: tuple[Any, ...]) -> Any:
        from embodia.policies.recipes.sft import SFTSettings

        return SFTSettings(
            model=self.model,
            data=records,
            epochs=self.sft_epochs,
            learning_rate=self.sft_learning_rate,
            batch_size=self.sft_batch_size,
            max_length=2048,
            lora_r=self.lora_r,
            lora_alpha=self.lora_alpha,
            logging_steps=1,
            seed=self.seed,
        )

    def grpo_settings(self, policy: str) -> Any:
        from embodia.policies.recipes.grpo_trainer import GRPOSettings

        return GRPOSettings(
            policy=policy,
            env=SXS_ENV,
            env_options={
                "source": self.source,
                "difficulty": self.difficulty,
                "latency_weight": self.latency_weight,
            },
            steps=self.grpo_steps,
            prompts_per_step=self.grpo_prompts_per_step,
            group_size=self.grpo_group_size,
            learning_rate=self.grpo_learning_rate,
            max_new_tokens=self.max_new_tokens,
            first_seed=self.sft_items,  # GRPO's items come after the SFT ones
            eval_prompts=self.eval_prompts,
            eval_first_seed=self.sft_items + 100_000,
            lora_r=self.lora_r,
            lora_alpha=self.lora_alpha,
            seed=self.seed,
        )


@runner
def run_sxs_train(settings: SxSTrainSettings, out: Path, *, resume: bool = False) -> dict[str, Any]:
    """SFT then GRPO (module docstring) into the run folder ``out``; ``stages.jsonl`` says
    which stage started and ended (written before a stage runs, so that a run cut in its
    first stage keeps its folder)."""
    from transformers import AutoTokenizer

    from embodia.policies.recipes.grpo_trainer import run_grpo
    from embodia.policies.recipes.sft import run_sft

    folder = RunFolder(out, "stages.jsonl")
    config = asdict(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    kept = folder.kept_records()
    marked = {(r.get("stage"), r.get("status")) for r in kept}
    grpo: dict[str, Any] | None = None
    with folder.recording(kept, {"settings": config}) as log:

        def mark(stage: str, status: str, **extra: Any) -> None:
            if (stage, status) not in marked:
                log.append({"stage": stage, "status": status, **extra})

        mark(SFT, "started")
        tokenizer = AutoTokenizer.from_pretrained(parse_policy_spec(settings.model)[1])
        items = [make_item(settings.source, i, settings.difficulty, 0) for i in range(settings.sft_items)]
        records = tuple(sft_records(items, tokenizer))
        sft = run_sft(settings.sft_settings(records), folder.out / SFT, resume=(folder.out / SFT).exists())
        mark(SFT, "done", policy=sft["policy"])
        if settings.grpo_steps:
            mark(GRPO, "started")
            grpo = run_grpo(
                settings.grpo_settings(sft["policy"]), folder.out / GRPO, resume=(folder.out / GRPO).exists()
            )
            mark(GRPO, "done", policy=grpo["policy"])
    rows = RunFolder(folder.out / GRPO, "metrics.jsonl").read_records() if grpo is not None else []
    latency = [r for r in rows if "env/accuracy" in r]
    grpo_keys = ("steps", "reward_first", "reward_last", "eval_reward_start", "eval_reward_end", "policy")
    summary = {
        "settings": config,
        "sft": {k: sft[k] for k in ("steps", "train_loss_first", "train_loss_last", "policy")},
        "grpo": None if grpo is None else {k: grpo.get(k) for k in grpo_keys},
        "content_latency_first": {k: v for k, v in latency[0].items() if k.startswith("env/")}
        if latency
        else {},
        "content_latency_last": {k: v for k, v in latency[-1].items() if k.startswith("env/")}
        if latency
        else {},
        "policy": sft["policy"] if grpo is None else grpo["policy"],
    }
    folder.finish(SUMMARY, summary)
    return summary
