"""A real TRL ``GRPOTrainer`` on a local model, set up to call its loss directly.

Shared by ``tests/policies/recipes/test_grpo_trl_parity.py`` (loss and gradients equal ours) and
``benchmarks/training.py`` (an embodia GRPO step against TRL's). Nothing here runs TRL's
training loop: the constructor needs a dataset and a reward function, which are never used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer


def _unused_reward(completions: list[Any], **_: Any) -> list[float]:
    """The reward function the constructor requires; the direct loss calls never score."""
    return [0.0 for _ in completions]


def trl_grpo_trainer(
    model_dir: Path,
    out: Path,
    *,
    batch_size: int,
    group_size: int,
    max_completion_length: int,
    **options: Any,
) -> GRPOTrainer:
    """A ``GRPOTrainer`` on ``model_dir`` (float32, CPU) whose ``_compute_loss`` takes batches of
    ``batch_size`` completions in groups of ``group_size``; ``options`` are TRL ``GRPOConfig``
    fields (``loss_type``, ``beta``, ``epsilon``, ...)."""
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=batch_size,
        num_generations=group_size,
        max_completion_length=max_completion_length,
        use_cpu=True,
        bf16=False,
        report_to=[],
        **options,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        reward_funcs=_unused_reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["unused"] * batch_size}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    # The Trainer sets these in its training loop; _compute_loss reads them.
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = options.get("gradient_accumulation_steps", 1)
    return trainer
