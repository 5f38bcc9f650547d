"""Advantage estimators of the GRPO family, behind one interface.

A rollout batch's rewards come as a ``(num_prompts, G)`` float tensor: G completions sampled
for each prompt (a group). Every estimator centres a reward on its own group's mean and
differs only in the scale it divides by:

========  ==========================================================  ===========================
name      advantage of completion i of prompt q                        known as
========  ==========================================================  ===========================
group     (r_qi - mean_q) / (std of prompt q's G rewards + eps)         GRPO (DeepSeekMath), TRL's
                                                                      ``scale_rewards="group"``
batch     (r_qi - mean_q) / (std of all rewards of the batch + eps)    Lite-PPO, TRL's ``"batch"``
none      r_qi - mean_q                                                Dr. GRPO, TRL's ``"none"``
durian    (r_qi - mean_q) / (std of all rewards of q's difficulty      Durian (arXiv 2602.21743),
          level + eps)                                                 as read here; see below
========  ==========================================================  ===========================

Numerics follow TRL's ``GRPOTrainer``: means ignore NaN rewards (a completion no reward could
score), every std is Bessel-corrected (divides by n - 1), ``eps`` is TRL's 1e-4 added to the
std (verl adds 1e-6, OpenRLHF 1e-9), NaN advantages become 0, and a group of size 1 (or a
level with a single scorable reward) gets advantage 0.

Why the scale matters, with binary rewards and G = 8: one correct answer out of 8 gets +2.47
(the seven wrong ones -0.35) under the group std, four out of 8 get +-0.94, and Dr. GRPO gives
+0.875 / -0.125. A lucky sample in a hard group is pushed 2.6 times as hard as one in a
balanced group; this extreme-sample sensitivity is what Durian targets.

**Durian.** The paper ("Enhancing Multi-Modal LLMs Reasoning via Difficulty-Aware Group
Normalization", Li et al., arXiv 2602.21743) has no public method section or code; what it
states (in its abstract) is: a per-sample difficulty from perceptual complexity (visual
entropy) and reasoning uncertainty (model confidence), samples re-grouped by difficulty level,
the std shared within each level and the mean kept per prompt. Everything more precise is our
reading, and these choices are ours:

- perceptual complexity H_vis(q): :func:`image_entropy`, the Shannon entropy in bits of a
  256-bin greyscale histogram, averaged over the prompt's images;
- reasoning uncertainty U(q), from the G completions (:func:`reasoning_uncertainty`): either the
  mean token predictive entropy over all the group's completion tokens (``"entropy"``), or 1
  minus the group's mean length-normalised sequence probability, exp(mean token logprob)
  (``"probability"``; the raw product of token probabilities underflows to 0 for any completion
  of realistic length, so it could not rank prompts);
- difficulty d(q) = alpha * z(H_vis) + (1 - alpha) * z(U), z-scores within the batch (a z-score
  of a constant feature is 0); a batch without images uses U alone;
- K levels by quantile: prompts sorted by difficulty (ties by their order in the batch) and cut
  into K runs of equal size (sizes differ by at most one); K above the number of prompts means
  one prompt per level;
- a level's std is the Bessel std of all rewards of its prompts pooled together.

Two identities tie it to the others: K = number of prompts gives exactly ``group``, K = 1 gives
exactly ``batch``, because all three share one pooled-std computation (:func:`_level_std`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from embodia.errors import EmbodiaError

if TYPE_CHECKING:
    import numpy as np
    import torch
    from PIL import Image

EPS = 1e-4
"""Added to every std before dividing: TRL's value (verl uses 1e-6, OpenRLHF 1e-9)."""

UncertaintyKind = Literal["entropy", "probability"]
UNCERTAINTY_KINDS: tuple[str, ...] = ("entropy", "probability")


@dataclass(frozen=True)
class Advantages:
    """What an estimator returns for one rollout batch."""

    values: torch.Tensor
    """``(num_prompts, G)`` advantages, finite (NaN became 0)."""
    scale: torch.Tensor | None
    """``(num_prompts,)`` the std each prompt's centred rewards were divided by (before eps);
    None for ``none``, which divides by nothing."""
    levels: torch.Tensor | None = None
    """``(num_prompts,)`` Durian's difficulty level of each prompt (0 = easiest); None otherwise."""
    stats: dict[str, float] = field(default_factory=dict)
    """Batch metrics: ``advantage_abs_max``, ``advantage_abs_mean``, ``reward_mean``,
    ``reward_std``, ``frac_reward_zero_std`` (groups whose own rewards are all equal, as TRL
    logs it), ``scale_min`` / ``scale_max`` (when there is a scale)."""


@dataclass(frozen=True)
class DifficultyFeatures:
    """Per-prompt inputs of Durian's difficulty; see the module docstring."""

    uncertainty: torch.Tensor | None = None
    """``(num_prompts,)`` reasoning uncertainty U, e.g. from :func:`reasoning_uncertainty`."""
    visual_entropy: torch.Tensor | None = None
    """``(num_prompts,)`` perceptual complexity H_vis in bits (:func:`image_entropy`); None for a
    batch without images."""


class AdvantageEstimator(ABC):
    """Centres each reward on its group's mean and divides by :meth:`scale` (if any)."""

    name: ClassVar[str]

    def __call__(self, rewards: Any, features: DifficultyFeatures | None = None) -> Advantages:
        """Advantages of a ``(num_prompts, G)`` reward batch (torch or numpy; NaN = unscorable)."""
        import torch

        r = _as_rewards(rewards)
        count = (~r.isnan()).sum(dim=1)
        mean = torch.nanmean(r, dim=1, keepdim=True)
        centred = r - mean
        scale = self.scale(r, features)
        values = centred if scale is None else centred / (scale.unsqueeze(1) + EPS)
        values = torch.nan_to_num(values, nan=0.0)
        values[count <= 1] = 0.0  # one scorable completion carries no comparison
        return Advantages(
            values=values,
            scale=scale,
            levels=self.levels(r, features),
            stats=_stats(r, values, scale),
        )

    @abstractmethod
    def scale(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> torch.Tensor | None:
        """``(num_prompts,)`` std to divide each prompt's centred rewards by; None for none."""

    def levels(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> torch.Tensor | None:
        """Difficulty level per prompt, for estimators that have them."""
        return None


class GroupStd(AdvantageEstimator):
    """GRPO: each prompt's own reward std."""

    name = "group"

    def scale(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> torch.Tensor:
        import torch

        return _level_std(rewards, torch.arange(rewards.shape[0]))


class BatchStd(AdvantageEstimator):
    """Lite-PPO: one std over the whole batch, the mean still per prompt."""

    name = "batch"

    def scale(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> torch.Tensor:
        import torch

        return _level_std(rewards, torch.zeros(rewards.shape[0], dtype=torch.long))


class NoScale(AdvantageEstimator):
    """Dr. GRPO: centred rewards, no division."""

    name = "none"

    def scale(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> None:
        return None


class Durian(AdvantageEstimator):
    """Difficulty-bucketed std: one std per difficulty level (see the module docstring)."""

    name = "durian"

    def __init__(self, levels: int = 4, alpha: float = 0.5) -> None:
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
            raise EmbodiaError(f"durian levels must be a whole number >= 1, got {levels!r}")
        if not (isinstance(alpha, int | float) and 0.0 <= alpha <= 1.0):
            raise EmbodiaError(f"durian alpha must be in 0..1, got {alpha!r}")
        self.num_levels = levels
        self.alpha = float(alpha)

    def scale(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> torch.Tensor:
        return _level_std(rewards, self.levels(rewards, features))

    def levels(self, rewards: torch.Tensor, features: DifficultyFeatures | None) -> torch.Tensor:
        import torch

        difficulty = self.difficulty(rewards.shape[0], features)
        order = torch.sort(difficulty, stable=True).indices
        rank = torch.empty_like(order)
        rank[order] = torch.arange(len(order))
        k = min(self.num_levels, len(order))
        return rank * k // len(order)

    def difficulty(self, num_prompts: int, features: DifficultyFeatures | None) -> torch.Tensor:
        """d = alpha * z(H_vis) + (1 - alpha) * z(U); U alone without images, H_vis alone without U."""
        if features is None or (features.uncertainty is None and features.visual_entropy is None):
            raise EmbodiaError(
                "the durian advantage needs difficulty features: "
                "reasoning uncertainty and/or visual entropy per prompt"
            )
        parts = []
        for what, values, weight in (
            ("visual entropy", features.visual_entropy, self.alpha),
            ("uncertainty", features.uncertainty, 1.0 - self.alpha),
        ):
            if values is not None:
                parts.append((_zscore(_per_prompt(what, values, num_prompts)), weight))
        if len(parts) == 1:
            return parts[0][0]
        return parts[0][0] * parts[0][1] + parts[1][0] * parts[1][1]


ESTIMATORS: dict[str, type[AdvantageEstimator]] = {
    cls.name: cls for cls in (GroupStd, BatchStd, NoScale, Durian)
}
"""The registry: estimator name -> class."""


def advantage_estimator(name: str, **options: Any) -> AdvantageEstimator:
    """The estimator registered as ``name`` (``durian`` takes ``levels`` and ``alpha``)."""
    if name not in ESTIMATORS:
        raise EmbodiaError(f"unknown advantage estimator {name!r}: expected one of {', '.join(ESTIMATORS)}")
    if options and name != "durian":
        raise EmbodiaError(f"the {name} advantage takes no options, got {', '.join(sorted(options))}")
    return ESTIMATORS[name](**options)


# --------------------------------------------------------------------------- difficulty features


def image_entropy(images: Sequence[Image.Image | np.ndarray]) -> float:
    """Mean Shannon entropy (bits) of the 256-bin greyscale histograms of a prompt's images.

    Images are PIL images or arrays (H x W grey, H x W x 3 RGB, H x W x 4 RGBA; uint8, or floats
    in 0..1). Colour becomes grey with PIL's ITU-R 601-2 luma (``convert("L")``). A constant
    image has entropy 0; uniform noise approaches 8 bits.
    """
    import numpy as np
    from PIL import Image

    if len(images) == 0:
        raise EmbodiaError(
            "image_entropy needs at least one image (a prompt without images has no visual entropy)"
        )
    entropies = []
    for image in images:
        if not isinstance(image, Image.Image):
            image = Image.fromarray(_as_uint8(np.asarray(image)))
        grey = np.asarray(image.convert("L"))
        counts = np.bincount(grey.ravel(), minlength=256).astype(np.float64)
        p = counts[counts > 0] / counts.sum()
        entropies.append(float(-(p * np.log2(p)).sum()) + 0.0)  # + 0.0: no -0.0 for a flat image
    return sum(entropies) / len(entropies)


def _as_uint8(array: np.ndarray) -> np.ndarray:
    import numpy as np

    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)) or 0 in array.shape:
        raise EmbodiaError(f"an image must be H x W, H x W x 3 or H x W x 4, got shape {array.shape}")
    if array.dtype == np.uint8:
        return array
    if (
        np.issubdtype(array.dtype, np.floating)
        and np.isfinite(array).all()
        and 0 <= array.min() <= array.max() <= 1
    ):
        return np.round(array * 255).astype(np.uint8)
    raise EmbodiaError(f"image values must be uint8 or floats in 0..1, got {array.dtype}")


def reasoning_uncertainty(
    kind: str,
    mask: torch.Tensor,
    group_size: int,
    *,
    token_entropies: torch.Tensor | None = None,
    logps: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(num_prompts,)`` reasoning uncertainty U from a batch's ``(num_prompts * G, T)`` completions.

    ``kind="entropy"``: the mean of ``token_entropies`` over every completion token of the group
    (weighted by token, so long completions count by their length). ``kind="probability"``: 1 minus
    the group's mean of exp(mean token logprob) per completion. ``mask`` marks the completion tokens;
    rows are grouped G at a time, as the rollout batch orders them. A completion with no token
    counts as probability 1 (certain) and adds no entropy.
    """
    import torch

    if kind not in UNCERTAINTY_KINDS:
        raise EmbodiaError(
            f"unknown uncertainty kind {kind!r}: expected one of {', '.join(UNCERTAINTY_KINDS)}"
        )
    values = token_entropies if kind == "entropy" else logps
    if values is None:
        needed = "token_entropies" if kind == "entropy" else "logps"
        raise EmbodiaError(f"the {kind!r} uncertainty needs {needed}")
    if values.shape != mask.shape or values.dim() != 2 or values.shape[0] % group_size:
        raise EmbodiaError(
            f"per-token values {tuple(values.shape)} and mask {tuple(mask.shape)} must be one "
            f"(num_prompts * G, T) shape with G = {group_size}"
        )
    m = mask.to(values.dtype)
    values = values.detach() * m
    if kind == "entropy":
        per_group = values.reshape(-1, group_size * values.shape[1]).sum(1)
        tokens = m.reshape(-1, group_size * m.shape[1]).sum(1)
        return per_group / tokens.clamp(min=1.0)
    mean_logp = values.sum(1) / m.sum(1).clamp(min=1.0)
    return 1.0 - torch.exp(mean_logp).reshape(-1, group_size).mean(1)


# --------------------------------------------------------------------------- shared numerics


def _as_rewards(rewards: Any) -> torch.Tensor:
    import torch

    r = torch.as_tensor(rewards).detach()
    if r.dim() != 2 or 0 in r.shape:
        raise EmbodiaError(f"rewards must be a (num_prompts, G) batch, got shape {tuple(r.shape)}")
    if not r.is_floating_point():
        r = r.to(torch.float32)
    if r.isinf().any():
        raise EmbodiaError("rewards must be finite (NaN marks an unscorable completion), got an infinity")
    return r.clone()


def _level_std(rewards: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """``(num_prompts,)`` the Bessel std of all (non-NaN) rewards pooled within each prompt's level.

    Two passes (level mean, then squared deviations) keep it exact for constant rewards. A level
    with fewer than 2 scorable rewards has std NaN (its advantages become 0, as in TRL).
    """
    import torch

    num_levels = int(levels.max()) + 1
    per_level = levels.unsqueeze(1).expand_as(rewards).reshape(-1)
    flat = rewards.reshape(-1)
    scored = ~flat.isnan()
    values = torch.where(scored, flat, torch.zeros_like(flat))
    count = torch.zeros(num_levels, dtype=rewards.dtype).index_add_(0, per_level, scored.to(rewards.dtype))
    total = torch.zeros(num_levels, dtype=rewards.dtype).index_add_(0, per_level, values)
    mean = total / count
    deviation = torch.where(scored, (flat - mean[per_level]) ** 2, torch.zeros_like(flat))
    squares = torch.zeros(num_levels, dtype=rewards.dtype).index_add_(0, per_level, deviation)
    std = torch.sqrt(squares / (count - 1))
    std[count <= 1] = math.nan
    return std[levels]


def _per_prompt(what: str, values: Any, num_prompts: int) -> torch.Tensor:
    import torch

    v = torch.as_tensor(values, dtype=torch.float64).detach()
    if v.shape != (num_prompts,):
        raise EmbodiaError(
            f"{what} must have one value per prompt ({num_prompts}), got shape {tuple(v.shape)}"
        )
    if not torch.isfinite(v).all():
        raise EmbodiaError(f"{what} must be finite for every prompt")
    return v


def _zscore(values: torch.Tensor) -> torch.Tensor:
    """z-scores within the batch; a constant feature (or a single prompt) scores 0 everywhere."""
    import torch

    centred = values - values.mean()
    std = values.std(unbiased=False)
    return centred / std if std > 0 else torch.zeros_like(values)


def _stats(rewards: torch.Tensor, values: torch.Tensor, scale: torch.Tensor | None) -> dict[str, float]:
    import torch

    own_std = _level_std(rewards, torch.arange(rewards.shape[0]))
    zero_std = torch.isclose(torch.nan_to_num(own_std, nan=0.0), torch.zeros_like(own_std))
    stats = {
        "advantage_abs_max": float(values.abs().max()),
        "advantage_abs_mean": float(values.abs().mean()),
        "reward_mean": float(torch.nanmean(rewards)),
        "reward_std": float(
            torch.nan_to_num(_level_std(rewards, torch.zeros_like(own_std, dtype=torch.long))[0], nan=0.0)
        ),
        "frac_reward_zero_std": float(zero_std.float().mean()),
    }
    if scale is not None:
        finite = scale[~scale.isnan()]
        stats["scale_min"] = float(finite.min()) if finite.numel() else 0.0
        stats["scale_max"] = float(finite.max()) if finite.numel() else 0.0
    return stats
