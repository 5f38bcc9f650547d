"""The GRPO family's configuration and loss: clipped ratios, k3 KL, four loss aggregations.

One optimisation step of GRPO sees a rollout batch: for each prompt G sampled completions with
their rewards, the per-token logprobs of the policy that sampled them (``old_logps``) and
advantages (:mod:`embodia.policies.recipes.advantages`). With ρ = exp(logp - old_logp) per
completion token, the per-token loss is

    l = -min(ρ·A, clamp(ρ, 1 - ε_low, 1 + ε_high)·A)  [+ β·k3],   k3 = exp(ref - logp) - (ref - logp) - 1

(ε_high > ε_low is DAPO's Clip-Higher; k3 is Schulman's KL estimator to a reference policy,
off by default as in TRL and DAPO, optionally weighted by ρ as DeepSeek-V3.2 does), and
:func:`grpo_loss` aggregates it over the completion tokens as TRL's ``GRPOTrainer`` does:

=========  ===========================================================  =========================
loss_type  aggregation                                                  from
=========  ===========================================================  =========================
grpo       mean over sequences of each sequence's token mean             DeepSeekMath (length bias)
bnpo       Σ l·m / Σ m over the micro-batch                              TRL
dr_grpo    Σ l·m / (B · max_completion_length)                           Dr. GRPO (a constant)
dapo       Σ l·m / active tokens of the whole accumulated batch          DAPO (TRL's default)
=========  ===========================================================  =========================

The returned loss is the one to call ``backward()`` on for one micro-batch: grpo, bnpo and
dr_grpo are divided by ``gradient_accumulation_steps`` (as TRL does), dapo is already
normalised by the accumulated batch's token count, so summing the micro-batches' gradients
gives one optimiser step's gradient in every mode. ``tests/policies/recipes/test_grpo_trl_parity.py``
checks loss and gradients against TRL's own ``GRPOTrainer._compute_loss``.

:func:`completion_logps` gives the per-token logprobs (and predictive entropies) of completions
under a causal LM, and :func:`filter_dynamic` is DAPO's dynamic sampling (drop the groups whose
rewards are all equal: they carry no gradient). The trainer loop that ties rollouts, these and
a run folder together lives elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from embodia.core.limits import check_seed, check_whole
from embodia.errors import EmbodiaError
from embodia.policies.recipes.advantages import (
    ESTIMATORS,
    UNCERTAINTY_KINDS,
    AdvantageEstimator,
    advantage_estimator,
)

if TYPE_CHECKING:
    import torch

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


@dataclass(frozen=True)
class GRPOConfig:
    """Settings of a GRPO-family run; defaults follow TRL's ``GRPOConfig`` where it has one."""

    group_size: int = 8
    """G: completions sampled per prompt (TRL's ``num_generations``); at least 2, since a group
    of one has no spread to learn from."""
    epsilon: float = 0.2
    """ε_low: the ratio is clipped below at 1 - epsilon."""
    epsilon_high: float | None = None
    """ε_high: the ratio is clipped above at 1 + epsilon_high; None means ``epsilon`` (symmetric
    PPO clip). DAPO's Clip-Higher uses 0.28."""
    beta: float = 0.0
    """Weight of the k3 KL to the reference policy; 0 (TRL's and DAPO's default) needs no
    reference model. DeepSeek-R1 used 0.001."""
    kl_importance_weight: bool = False
    """Multiply the per-token KL by the ratio ρ (DeepSeek-V3.2), which makes it an unbiased
    estimate of KL(π_θ || π_ref) from samples of the old policy; off gives the GRPO paper's plain
    k3. TRL 1.16 has it on by default (``use_bias_correction_kl``)."""
    loss_type: str = "dapo"
    """Aggregation of the per-token loss: grpo, bnpo, dr_grpo or dapo (see the module docstring)."""
    max_new_tokens: int = 256
    """Most tokens sampled per completion."""
    max_completion_length: int | None = None
    """dr_grpo's constant denominator per sequence; None means ``max_new_tokens``."""
    advantage: str = "group"
    """Advantage estimator: group, batch, none or durian (``advantages.ESTIMATORS``)."""
    durian_levels: int = 4
    """Durian's K: difficulty levels the prompts of a batch are bucketed into by quantile."""
    durian_alpha: float = 0.5
    """Durian's weight of perceptual complexity (image entropy) against reasoning uncertainty."""
    durian_uncertainty: str = "entropy"
    """Durian's reasoning uncertainty: ``entropy`` (mean token predictive entropy over the group)
    or ``probability`` (1 - mean length-normalised sequence probability)."""
    dynamic_sampling: bool = False
    """Drop the groups whose rewards are all equal before the loss (DAPO's dynamic sampling)."""
    num_iterations: int = 1
    """μ: optimisation passes over each rollout batch, all against the sampling policy's logprobs."""
    gradient_accumulation_steps: int = 1
    """Micro-batches whose gradients are summed into one optimiser step."""
    learning_rate: float = 1e-6
    """AdamW's learning rate (TRL's default; tiny models need far more)."""
    temperature: float = 1.0
    """Sampling temperature; logprobs for the loss are taken at the same temperature."""
    seed: int = 0
    """Seed of sampling and initialisation."""

    def __post_init__(self) -> None:
        name = type(self).__name__
        check_whole(self, "group_size", "max_new_tokens", "num_iterations", "gradient_accumulation_steps")
        if self.group_size < 2:
            raise EmbodiaError(
                f"{name}.group_size must be at least 2 (a group of one has no advantage), got 1"
            )
        if self.max_completion_length is not None and (
            isinstance(self.max_completion_length, bool)
            or not isinstance(self.max_completion_length, int)
            or self.max_completion_length < 1
        ):
            raise EmbodiaError(
                f"{name}.max_completion_length must be a whole number >= 1 or None, "
                f"got {self.max_completion_length!r}"
            )
        _check_number(f"{name}.epsilon", self.epsilon, 0.0, 1.0, low_open=True, high_open=True)
        if self.epsilon_high is not None:
            _check_number(f"{name}.epsilon_high", self.epsilon_high, 0.0, float("inf"), low_open=True)
        _check_number(f"{name}.beta", self.beta, 0.0, float("inf"))
        _check_number(f"{name}.learning_rate", self.learning_rate, 0.0, float("inf"), low_open=True)
        _check_number(f"{name}.temperature", self.temperature, 0.0, float("inf"), low_open=True)
        _check_number(f"{name}.durian_alpha", self.durian_alpha, 0.0, 1.0)
        if self.loss_type not in LOSS_TYPES:
            raise EmbodiaError(
                f"{name}.loss_type must be one of {', '.join(LOSS_TYPES)}, got {self.loss_type!r}"
            )
        if self.advantage not in ESTIMATORS:
            raise EmbodiaError(
                f"{name}.advantage must be one of {', '.join(ESTIMATORS)}, got {self.advantage!r}"
            )
        if self.durian_uncertainty not in UNCERTAINTY_KINDS:
            raise EmbodiaError(
                f"{name}.durian_uncertainty must be one of {', '.join(UNCERTAINTY_KINDS)}, "
                f"got {self.durian_uncertainty!r}"
            )
        if (
            isinstance(self.durian_levels, bool)
            or not isinstance(self.durian_levels, int)
            or self.durian_levels < 1
        ):
            raise EmbodiaError(
                f"{name}.durian_levels must be a whole number >= 1, got {self.durian_levels!r}"
            )
        for flag in ("dynamic_sampling", "kl_importance_weight"):
            if not isinstance(getattr(self, flag), bool):
                raise EmbodiaError(f"{name}.{flag} must be true or false, got {getattr(self, flag)!r}")
        check_seed(f"{name}.seed", self.seed)

    @property
    def clip_high(self) -> float:
        """ε_high as used: ``epsilon_high``, or ``epsilon`` when that is None."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    @property
    def completion_length_norm(self) -> int:
        """dr_grpo's per-sequence denominator: ``max_completion_length`` or ``max_new_tokens``."""
        return self.max_new_tokens if self.max_completion_length is None else self.max_completion_length

    def estimator(self) -> AdvantageEstimator:
        """The configured advantage estimator."""
        if self.advantage == "durian":
            return advantage_estimator("durian", levels=self.durian_levels, alpha=self.durian_alpha)
        return advantage_estimator(self.advantage)


def _check_number(
    what: str, value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        bounds = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise EmbodiaError(f"{what} must be a number in {bounds}, got {value!r}")


def grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: GRPOConfig,
    ref_logps: torch.Tensor | None = None,
    num_items_in_batch: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO-family loss of one micro-batch of B completions padded to T tokens.

    ``logps`` (B, T) are the current policy's per-token logprobs (with grad), ``old_logps``
    (B, T) the sampling policy's, ``advantages`` (B,) one per completion (or (B, T) per token),
    ``mask`` (B, T) 1 on the completion tokens that count. ``ref_logps`` (B, T) is needed when
    ``config.beta > 0``. ``num_items_in_batch`` (dapo only) is the active-token count of the
    whole accumulated batch; None means this micro-batch's count times the accumulation steps
    (exact when the micro-batches hold as many tokens each).

    Returns the loss to back-propagate (see the module docstring for its scaling) and metrics:
    ``policy_loss`` (the loss before the accumulation scaling), ``clip_ratio/low_mean``,
    ``clip_ratio/high_mean``, ``clip_ratio/region_mean`` (fractions of tokens whose ratio was
    clipped where it bounds the objective, as TRL logs them), ``clip_ratio/low_min`` and
    ``clip_ratio/high_max`` (over sequences), ``ratio_mean/min/max``, and ``kl`` (the token mean
    of the KL term as added to the loss, when ``beta > 0``).
    """
    import torch

    if logps.dim() != 2 or old_logps.shape != logps.shape or mask.shape != logps.shape:
        raise EmbodiaError(
            f"logps {tuple(logps.shape)}, old_logps {tuple(old_logps.shape)} and mask {tuple(mask.shape)} "
            "must share one (B, T) shape"
        )
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    if advantages.shape not in ((logps.shape[0], 1), tuple(logps.shape)):
        raise EmbodiaError(
            f"advantages must be (B,) or (B, T) for B = {logps.shape[0]}, got {tuple(advantages.shape)}"
        )
    if config.beta != 0.0 and (ref_logps is None or ref_logps.shape != logps.shape):
        raise EmbodiaError("beta > 0 needs ref_logps of the same (B, T) shape as logps")
    m = mask.to(logps.dtype)

    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - config.epsilon, 1 + config.clip_high)
    per_token = -torch.min(ratio * advantages, clipped * advantages)
    kl = None
    if config.beta != 0.0:
        assert ref_logps is not None  # checked above
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        if config.kl_importance_weight:
            kl = kl * ratio
        per_token = per_token + config.beta * kl

    accumulation = config.gradient_accumulation_steps
    if config.loss_type == "grpo":
        policy_loss = ((per_token * m).sum(-1) / m.sum(-1).clamp(min=1.0)).mean()
        loss = policy_loss / accumulation
    elif config.loss_type == "bnpo":
        policy_loss = (per_token * m).sum() / m.sum().clamp(min=1.0)
        loss = policy_loss / accumulation
    elif config.loss_type == "dr_grpo":
        policy_loss = (per_token * m).sum() / (per_token.shape[0] * config.completion_length_norm)
        loss = policy_loss / accumulation
    else:  # dapo
        tokens = m.sum() * accumulation if num_items_in_batch is None else num_items_in_batch
        loss = (per_token * m).sum() / torch.as_tensor(tokens, dtype=logps.dtype).clamp(min=1.0)
        policy_loss = loss

    with torch.no_grad():
        low = (ratio < 1 - config.epsilon) & (advantages < 0)
        high = (ratio > 1 + config.clip_high) & (advantages > 0)
        tokens_per_seq = m.sum(-1).clamp(min=1.0)
        total = m.sum().clamp(min=1.0)
        active = m.bool()
        ratios = ratio[active] if active.any() else ratio.new_ones(1)
        stats = {
            "policy_loss": float(policy_loss.detach()),
            "clip_ratio/low_mean": float((low * m).sum() / total),
            "clip_ratio/high_mean": float((high * m).sum() / total),
            "clip_ratio/region_mean": float(((low | high) * m).sum() / total),
            "clip_ratio/low_min": float(((low * m).sum(-1) / tokens_per_seq).min()),
            "clip_ratio/high_max": float(((high * m).sum(-1) / tokens_per_seq).max()),
            "ratio_mean": float(ratios.mean()),
            "ratio_min": float(ratios.min()),
            "ratio_max": float(ratios.max()),
        }
        if kl is not None:
            stats["kl"] = float((kl * m).sum() / total)
    return loss, stats


def completion_logps(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
    **model_inputs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token logprobs (with grad) and predictive entropies (detached) of completions.

    ``prompt_ids`` (B, P) left-padded and ``completion_ids`` (B, C) right-padded, with their
    attention masks; extra ``model_inputs`` (``pixel_values``, ...) go to the model as they are.
    Logits are divided by ``temperature`` (the sampling one), so the logprobs are those of the
    distribution that was sampled. Both outputs are (B, C) and 0 where ``completion_mask`` is 0.
    """
    import torch

    from embodia.policies.trainable import token_scores

    if prompt_ids.shape != prompt_mask.shape or completion_ids.shape != completion_mask.shape:
        raise EmbodiaError("prompt_ids/prompt_mask and completion_ids/completion_mask must match in shape")
    if prompt_ids.shape[0] != completion_ids.shape[0]:
        raise EmbodiaError(f"{prompt_ids.shape[0]} prompts but {completion_ids.shape[0]} completions")
    width = completion_ids.shape[1]
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    # The logits at position t predict token t + 1: the last `width + 1` positions cover the
    # completion (the final one predicts past it and is dropped).
    model_inputs.setdefault("use_cache", False)
    outputs = model(
        input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=width + 1, **model_inputs
    )
    return token_scores(outputs.logits[:, -width - 1 : -1], completion_ids, completion_mask, temperature)


def filter_dynamic(rewards: torch.Tensor) -> torch.Tensor:
    """DAPO's dynamic sampling: ``(num_prompts,)`` True for the groups to keep.

    A group is kept when its scorable (non-NaN) rewards are not all equal; a group of all-equal
    rewards (all solved, all failed) has zero advantage everywhere and only dilutes the batch.
    """
    import torch

    if rewards.dim() != 2:
        raise EmbodiaError(f"rewards must be a (num_prompts, G) batch, got shape {tuple(rewards.shape)}")
    scored = ~rewards.isnan()
    high = torch.where(scored, rewards, torch.full_like(rewards, -float("inf"))).max(dim=1).values
    low = torch.where(scored, rewards, torch.full_like(rewards, float("inf"))).min(dim=1).values
    return high > low
