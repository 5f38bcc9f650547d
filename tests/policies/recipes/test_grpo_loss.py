"""The GRPO loss on hand-made numbers, its config checks, dynamic sampling and completion logprobs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from embodia.errors import EmbodiaError
from embodia.policies.recipes.advantages import Durian
from embodia.policies.recipes.grpo import GRPOConfig, completion_logps, filter_dynamic, grpo_loss

MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])


def _config(**options: Any) -> GRPOConfig:
    return GRPOConfig(group_size=2, max_new_tokens=4, **options)


def _on_policy(advantages: list[float]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logps = torch.log(torch.full((2, 4), 0.5)).requires_grad_()
    return logps, logps.detach().clone(), torch.tensor(advantages)


@pytest.mark.parametrize(
    ("loss_type", "expected"),
    [
        # per-token loss on policy is -A: row 0 has 3 tokens of -1, row 1 one token of +2
        ("grpo", ((-1.0 * 3) / 3 + 2.0 / 1) / 2),
        ("bnpo", (-3.0 + 2.0) / 4),
        ("dr_grpo", (-3.0 + 2.0) / (2 * 4)),
        ("dapo", (-3.0 + 2.0) / 4),
    ],
)
def test_aggregations(loss_type: str, expected: float) -> None:
    logps, old, advantages = _on_policy([1.0, -2.0])
    loss, stats = grpo_loss(logps, old, advantages, MASK, _config(loss_type=loss_type))
    assert loss.item() == pytest.approx(expected)
    assert stats["policy_loss"] == pytest.approx(expected)
    loss.backward()
    assert logps.grad is not None
    assert torch.equal(logps.grad[MASK == 0], torch.zeros(4))  # padding never moves anything


def test_dr_grpo_uses_max_completion_length() -> None:
    logps, old, advantages = _on_policy([1.0, -2.0])
    loss, _ = grpo_loss(logps, old, advantages, MASK, _config(loss_type="dr_grpo", max_completion_length=10))
    assert loss.item() == pytest.approx(-1.0 / 20)


def test_gradient_accumulation_scaling() -> None:
    logps, old, advantages = _on_policy([1.0, -2.0])
    for loss_type in ("grpo", "bnpo", "dr_grpo"):
        one, _ = grpo_loss(logps, old, advantages, MASK, _config(loss_type=loss_type))
        two, stats = grpo_loss(
            logps, old, advantages, MASK, _config(loss_type=loss_type, gradient_accumulation_steps=2)
        )
        assert two.item() == pytest.approx(one.item() / 2)
        assert stats["policy_loss"] == pytest.approx(one.item())
    # dapo divides by the accumulated batch's tokens: given, or this micro-batch's times the steps
    dapo, _ = grpo_loss(logps, old, advantages, MASK, _config(gradient_accumulation_steps=2))
    assert dapo.item() == pytest.approx(-1.0 / 8)
    given, _ = grpo_loss(logps, old, advantages, MASK, _config(), num_items_in_batch=torch.tensor(10))
    assert given.item() == pytest.approx(-1.0 / 10)


def _off_policy(
    ratios: list[float], advantage: float, **options: Any
) -> tuple[torch.Tensor, dict[str, float]]:
    """One sequence whose tokens have the given ratios; returns d loss / d logp per token and stats."""
    old = torch.zeros(1, len(ratios))
    logps = torch.log(torch.tensor([ratios])).requires_grad_()
    mask = torch.ones(1, len(ratios))
    loss, stats = grpo_loss(logps, old, torch.tensor([advantage]), mask, _config(loss_type="bnpo", **options))
    loss.backward()
    assert logps.grad is not None
    return logps.grad[0], stats


def test_clipping_stops_the_gradient_only_where_it_bounds_the_objective() -> None:
    # A > 0: ratios above 1 + eps are clipped (no gradient), ratios below 1 - eps still pull up
    grad, stats = _off_policy([1.0, 1.3, 0.7, 1.1], advantage=1.0)
    n = 4
    torch.testing.assert_close(grad, torch.tensor([-1.0, 0.0, -0.7, -1.1]) / n)
    assert stats["clip_ratio/high_mean"] == pytest.approx(1 / 4)
    assert stats["clip_ratio/low_mean"] == 0.0
    assert stats["clip_ratio/region_mean"] == pytest.approx(1 / 4)
    assert stats["ratio_max"] == pytest.approx(1.3) and stats["ratio_min"] == pytest.approx(0.7)
    # A < 0: ratios below 1 - eps are clipped, ratios above 1 + eps are not
    grad, stats = _off_policy([1.0, 1.3, 0.7, 1.1], advantage=-1.0)
    torch.testing.assert_close(grad, torch.tensor([1.0, 1.3, 0.0, 1.1]) / n)
    assert stats["clip_ratio/low_mean"] == pytest.approx(1 / 4)
    assert stats["clip_ratio/high_mean"] == 0.0


def test_clip_higher() -> None:
    grad, _ = _off_policy([1.25], advantage=1.0)
    assert float(grad[0]) == 0.0  # 1.25 > 1 + 0.2
    grad, stats = _off_policy([1.25], advantage=1.0, epsilon_high=0.28)
    assert float(grad[0]) == pytest.approx(-1.25)  # inside 1 + 0.28
    assert stats["clip_ratio/high_mean"] == 0.0
    assert _config(epsilon_high=0.28).clip_high == 0.28 and _config().clip_high == 0.2


def test_k3_kl() -> None:
    logps = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    ref = torch.log(torch.tensor([[0.5, 0.5]]))
    mask = torch.ones(1, 2)
    config = _config(loss_type="bnpo", beta=0.1)
    loss, stats = grpo_loss(logps, logps.detach(), torch.tensor([0.0]), mask, config, ref_logps=ref)
    k3 = torch.tensor([0.0, 2.0 - math.log(2.0) - 1.0])  # exp(d) - d - 1 with d = ref - logp
    assert stats["kl"] == pytest.approx(float(k3.mean()))
    assert loss.item() == pytest.approx(0.1 * float(k3.mean()))
    # weighted by the ratio (DeepSeek-V3.2): same value on policy, a different gradient
    weighted, stats_w = grpo_loss(
        logps,
        logps.detach(),
        torch.tensor([0.0]),
        mask,
        _config(loss_type="bnpo", beta=0.1, kl_importance_weight=True),
        ref_logps=ref,
    )
    assert weighted.item() == pytest.approx(loss.item()) and stats_w["kl"] == pytest.approx(stats["kl"])
    (grad_plain,) = torch.autograd.grad(loss, logps)
    (grad_weighted,) = torch.autograd.grad(weighted, logps)
    torch.testing.assert_close(grad_plain, 0.1 * (1 - torch.exp(ref - logps.detach())) / 2)
    assert not torch.allclose(grad_plain, grad_weighted)
    with pytest.raises(EmbodiaError, match="beta > 0 needs ref_logps"):
        grpo_loss(logps, logps.detach(), torch.tensor([0.0]), mask, config)


def test_per_token_advantages_and_shape_errors() -> None:
    logps, old, _ = _on_policy([0.0, 0.0])
    per_token = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    loss, _ = grpo_loss(logps, old, per_token, MASK, _config(loss_type="bnpo"))
    assert loss.item() == pytest.approx(-(1 + 2 + 3 + 5) / 4)
    with pytest.raises(EmbodiaError, match="advantages must be"):
        grpo_loss(logps, old, torch.zeros(3), MASK, _config())
    with pytest.raises(EmbodiaError, match="share one"):
        grpo_loss(logps, old[:, :2], torch.zeros(2), MASK, _config())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"group_size": 1}, "group_size must be at least 2"),
        ({"group_size": 2.5}, "group_size must be a whole number"),
        ({"epsilon": 0.0}, "epsilon must be a number in"),
        ({"epsilon": 1.0}, "epsilon must be a number in"),
        ({"epsilon_high": -0.1}, "epsilon_high"),
        ({"beta": -1.0}, "beta"),
        ({"loss_type": "ppo"}, "loss_type must be one of grpo, bnpo, dr_grpo, dapo, got 'ppo'"),
        ({"advantage": "std"}, "advantage must be one of group, batch, none, durian"),
        ({"durian_uncertainty": "logit"}, "durian_uncertainty"),
        ({"durian_levels": 0}, "durian_levels"),
        ({"durian_alpha": 2.0}, "durian_alpha"),
        ({"num_iterations": 0}, "num_iterations"),
        ({"gradient_accumulation_steps": True}, "gradient_accumulation_steps"),
        ({"max_completion_length": 0}, "max_completion_length"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"temperature": -1.0}, "temperature"),
        ({"dynamic_sampling": "yes"}, "dynamic_sampling must be true or false"),
        ({"seed": -1}, "seed"),
    ],
)
def test_config_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(EmbodiaError, match=f"GRPOConfig.{message}"):
        GRPOConfig(**options)


def test_config_defaults_and_estimator() -> None:
    config = GRPOConfig()
    assert (config.loss_type, config.beta, config.epsilon, config.group_size) == ("dapo", 0.0, 0.2, 8)
    assert config.completion_length_norm == config.max_new_tokens
    assert config.estimator().name == "group"
    durian = GRPOConfig(advantage="durian", durian_levels=3, durian_alpha=0.25).estimator()
    assert isinstance(durian, Durian) and (durian.num_levels, durian.alpha) == (3, 0.25)


def test_filter_dynamic() -> None:
    rewards = torch.tensor(
        [[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [math.nan, 1.0, math.nan], [0.0, 0.0, 0.0], [0.5, math.nan, 0.2]]
    )
    assert filter_dynamic(rewards).tolist() == [False, True, False, False, True]
    with pytest.raises(EmbodiaError, match="num_prompts, G"):
        filter_dynamic(torch.zeros(3))


def test_completion_logps_match_the_models_distribution(tiny_chat_lm_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_chat_lm_dir, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(0, 1000, (2, 4), generator=gen)
    prompt_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    completion_ids = torch.randint(0, 1000, (2, 3), generator=gen)
    completion_mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    logps, entropies = completion_logps(
        model, prompt_ids, prompt_mask, completion_ids, completion_mask, temperature=2.0
    )
    assert logps.requires_grad and not entropies.requires_grad

    with torch.no_grad():
        logits = model(
            input_ids=torch.cat([prompt_ids, completion_ids], 1),
            attention_mask=torch.cat([prompt_mask, completion_mask], 1),
        ).logits
    dist = torch.log_softmax(logits[:, 3:6] / 2.0, dim=-1)  # positions 3..5 predict tokens 4..6
    expected = dist.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1) * completion_mask
    torch.testing.assert_close(logps.detach(), expected, rtol=1e-5, atol=1e-6)
    expected_entropy = -(dist.exp() * dist).sum(-1) * completion_mask
    torch.testing.assert_close(entropies, expected_entropy, rtol=1e-5, atol=1e-6)
    assert logps[0, 2] == 0 and entropies[0, 2] == 0
    assert bool((entropies[completion_mask.bool()] > 0).all())
    assert bool((entropies <= math.log(model.config.vocab_size) + 1e-4).all())
    with pytest.raises(EmbodiaError, match="2 prompts but 1 completions"):
        completion_logps(model, prompt_ids, prompt_mask, completion_ids[:1], completion_mask[:1])
