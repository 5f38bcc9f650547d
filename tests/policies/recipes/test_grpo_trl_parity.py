"""embodia's GRPO loss and gradients equal TRL's ``GRPOTrainer._compute_loss`` on the same batch.

A real ``GRPOTrainer`` is built on the tiny random-weight Qwen2 causal LM for each loss type
both libraries have (and for Clip-Higher, a k3 KL with beta > 0, and gradient accumulation).
Both sides score the same completions with the same model; the old and reference logprobs are
the model's own, shifted by noise so that ratios leave the clip range in both directions.

Tolerance: both sides compute in float32 from the same weights, but TRL scores tokens with its
own chunked log-softmax kernel (a fused LM head) while embodia takes ``log_softmax`` of the full
logits, so per-token logprobs differ by float32 rounding. Measured on this batch: losses within
1e-7 and every gradient within 2.5e-6 of its tensor's largest entry. rtol 1e-5 / atol 1e-6 sits
just above that and still catches any real formula difference (a wrong clip bound, normaliser,
accumulation scale or KL term moves the loss by 1e-3 or more and the gradients by far more).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="TRL is in the optional 'train' extra: pip install 'embodia[train]'")

import torch
from trl import GRPOTrainer
from trl_grpo import trl_grpo_trainer

from embodia.policies.recipes.advantages import advantage_estimator
from embodia.policies.recipes.grpo import GRPOConfig, completion_logps, grpo_loss

GROUP = 4
PROMPTS = 2
MAX_COMPLETION = 7

CASES = {
    "grpo": {"loss_type": "grpo"},
    "bnpo": {"loss_type": "bnpo"},
    "dr_grpo": {"loss_type": "dr_grpo"},
    "dapo": {"loss_type": "dapo"},
    "dapo-clip-higher": {"loss_type": "dapo", "epsilon_high": 0.28},
    "grpo-kl": {"loss_type": "grpo", "beta": 0.04},
    "bnpo-kl-clip-higher": {"loss_type": "bnpo", "beta": 0.1, "epsilon_high": 0.28},
    "dapo-kl-importance-weighted": {"loss_type": "dapo", "beta": 0.1, "kl_importance_weight": True},
    "dr_grpo-accumulated": {"loss_type": "dr_grpo", "gradient_accumulation_steps": 2},
    "dapo-accumulated": {"loss_type": "dapo", "gradient_accumulation_steps": 2, "epsilon_high": 0.28},
}


def _batch(vocab: int, pad: int) -> dict[str, torch.Tensor]:
    """A left-padded prompt and right-padded completion batch with uneven lengths."""
    gen = torch.Generator().manual_seed(0)
    rows = PROMPTS * GROUP
    prompt_ids = torch.randint(0, vocab, (rows, 5), generator=gen)
    prompt_mask = torch.ones_like(prompt_ids)
    prompt_mask[:GROUP, :2] = 0  # the first prompt is 3 tokens, left-padded
    prompt_ids[prompt_mask == 0] = pad
    completion_ids = torch.randint(0, vocab, (rows, 6), generator=gen)
    lengths = torch.tensor([6, 2, 5, 1, 6, 3, 4, 6])
    completion_mask = (torch.arange(6).unsqueeze(0) < lengths.unsqueeze(1)).long()
    completion_ids[completion_mask == 0] = pad
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.5]])
    advantages = advantage_estimator("group")(rewards).values.reshape(-1)
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
    }


@pytest.fixture(scope="module")
def model_dir(tiny_chat_lm_dir: Path) -> Path:
    return tiny_chat_lm_dir


def _trainer(model_dir: Path, tmp_path: Path, options: dict[str, Any]) -> GRPOTrainer:
    trl_options = {k: v for k, v in options.items() if k != "kl_importance_weight"}
    return trl_grpo_trainer(
        model_dir,
        tmp_path / "trl",
        batch_size=PROMPTS * GROUP,
        group_size=GROUP,
        max_completion_length=MAX_COMPLETION,
        use_bias_correction_kl=options.get("kl_importance_weight", False),
        **trl_options,
    )


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


@pytest.mark.parametrize("case", list(CASES))
def test_loss_and_gradients_equal_trl(case: str, model_dir: Path, tmp_path: Path) -> None:
    options = CASES[case]
    trainer = _trainer(model_dir, tmp_path, options)
    model = trainer.model
    batch = _batch(vocab=model.config.vocab_size, pad=trainer.processing_class.pad_token_id)
    mask = batch["completion_mask"]

    with torch.no_grad():
        logps, _ = completion_logps(
            model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask
        )
    gen = torch.Generator().manual_seed(1)
    old_logps = (logps + 0.3 * torch.randn(logps.shape, generator=gen)) * mask
    ref_logps = (logps + 0.5 * torch.randn(logps.shape, generator=gen)) * mask
    # dapo: the accumulated window holds this micro-batch and one more with 7 active tokens
    accumulation = options.get("gradient_accumulation_steps", 1)
    num_items = mask.sum() + 7 * (accumulation - 1)

    inputs = {
        **batch,
        "old_per_token_logps": old_logps,
        "num_items_in_batch": num_items,
    }
    if options.get("beta"):
        inputs["ref_per_token_logps"] = ref_logps
    model.zero_grad(set_to_none=True)
    trl_loss = trainer._compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = _grads(model)
    trl_metrics = {key: values[-1] for key, values in trainer._metrics["train"].items()}

    config = GRPOConfig(
        group_size=GROUP,
        max_new_tokens=MAX_COMPLETION,
        **{k: v for k, v in options.items() if k != "loss_type"},
        loss_type=options["loss_type"],
    )
    ours_logps, _ = completion_logps(
        model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask
    )
    loss, stats = grpo_loss(
        ours_logps,
        old_logps,
        batch["advantages"],
        mask,
        config,
        ref_logps=ref_logps if options.get("beta") else None,
        num_items_in_batch=num_items,
    )
    loss.backward()
    our_grads = _grads(model)

    torch.testing.assert_close(loss.detach(), trl_loss.detach(), rtol=1e-5, atol=1e-6)
    assert our_grads.keys() == trl_grads.keys() and len(our_grads) == len(list(model.parameters()))
    for name, grad in trl_grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=1e-5, atol=1e-6, msg=f"gradient of {name}")
    # the batch exercises both clip bounds, so the clip metrics are compared on non-trivial values
    assert stats["clip_ratio/region_mean"] > 0
    for key in (
        "clip_ratio/low_mean",
        "clip_ratio/high_mean",
        "clip_ratio/region_mean",
        "clip_ratio/high_max",
    ):
        assert stats[key] == pytest.approx(trl_metrics[key], abs=1e-6), key
    if options.get("beta"):
        assert stats["kl"] == pytest.approx(trl_metrics["kl"], rel=1e-5)
    assert abs(float(loss.detach())) > 1e-3  # a real signal, not two zeros agreeing
