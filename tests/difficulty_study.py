"""Durian's controlled study: GRPO with each advantage estimator on a synthetic multimodal task.

Shared by ``benchmarks/durian.py`` (the full study, reported in docs/benchmarks.md) and
``tests/policies/recipes/test_durian_study.py`` (the same loop at a tiny size).

The task. A prompt is a 48 x 48 RGB image cut into a 3 x 3 grid of cells; one cell holds the
target, a red square, and the answer is that cell's number (9 answers, chance 1/9). Each prompt
has a difficulty tier that sets its visual complexity: ``easy`` images hold the target alone or
with one distractor of a far hue (green, blue) on a flat background; ``medium`` ones add a few
distractors, some of near hue, and a little pixel noise; ``hard`` ones hold many distractors of
hues near red (orange, crimson, pink) with a smaller target and strong noise. The more clutter
and noise, the higher the image's Shannon entropy (:func:`image_entropy`), which is Durian's
perceptual complexity. Training mixes the tiers, so a trained policy's groups are mostly all or
nearly all correct on easy prompts and nearly all wrong on hard ones: the extreme groups whose
advantages the group std inflates (1 correct out of 8 gets +2.47).

The policy (:class:`CellScorer`). Not a language model: one linear score per cell from that
cell's pixels, average-pooled 4 x 4 to 4 x 4 x 3 and standardised (weights shared across cells),
plus a bias per answer, softmax over the 9 cells: 58 parameters. A completion is one "token",
the chosen answer, so its logprob and the predictive entropy come straight from the softmax.

The loop is the real GRPO machinery: per step, P prompts drawn from the training pool, G answers
sampled from the policy for each, binary rewards, the configured estimator
(:meth:`GRPOConfig.estimator`) with Durian's :class:`DifficultyFeatures` (reasoning uncertainty
from :func:`reasoning_uncertainty` on the sampled answers' predictive entropies, visual entropy
from the images), then ``num_iterations`` AdamW steps on :func:`grpo_loss` against the sampling
policy's logprobs. Held-out reward is the exact expected reward, the mean probability the
policy gives the right answer on held-out prompts (no sampling noise).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from embodia.policies.recipes.advantages import DifficultyFeatures, image_entropy, reasoning_uncertainty
from embodia.policies.recipes.grpo import GRPOConfig, grpo_loss

SIZE = 48
"""Image side in pixels."""
GRID = 3
"""Cells per side; the answers are the GRID * GRID cells."""
POOL = 4
"""Average-pooling factor of the policy's features (48 -> 12)."""
ANSWERS = GRID * GRID
TIERS = ("easy", "medium", "hard")

TARGET = (0.95, 0.1, 0.1)
FAR_HUES = ((0.1, 0.85, 0.2), (0.15, 0.3, 0.95), (0.9, 0.9, 0.2), (0.2, 0.85, 0.85))
NEAR_HUES = ((0.95, 0.45, 0.1), (0.75, 0.05, 0.25), (0.95, 0.3, 0.4), (0.85, 0.2, 0.05))


@dataclass(frozen=True)
class TierSpec:
    """How one difficulty tier draws its images."""

    distractors: tuple[int, int]
    """Fewest and most distractor squares (inclusive)."""
    near_share: float
    """Chance that a distractor takes a hue near the target's red."""
    noise: float
    """Std of the Gaussian pixel noise (image values in 0..1)."""
    target_side: tuple[int, int]
    """Smallest and largest side of the target square in pixels (inclusive)."""
    unreadable: float = 0.0
    """Chance that the target takes a distractor's near hue, so no policy can read the answer
    off the image: its rare successes are luck (a perception failure in the reward)."""


TIER_SPECS = {
    "easy": TierSpec(distractors=(0, 1), near_share=0.0, noise=0.0, target_side=(9, 12)),
    "medium": TierSpec(distractors=(2, 4), near_share=0.5, noise=0.1, target_side=(6, 9)),
    "hard": TierSpec(distractors=(6, 8), near_share=1.0, noise=0.3, target_side=(4, 6), unreadable=0.5),
}


@dataclass(frozen=True)
class StudyConfig:
    """One study: the data, the GRPO settings shared by every estimator, its size."""

    estimators: tuple[str, ...] = ("group", "batch", "none", "durian")
    """Advantage estimators compared, each trained from the same seeds."""
    seeds: int = 5
    """Training seeds per estimator (policy initialisation, prompt order, sampling)."""
    steps: int = 300
    """GRPO steps (rollout batches) per run."""
    prompts_per_step: int = 16
    """P: prompts in one rollout batch."""
    group_size: int = 8
    """G: answers sampled per prompt."""
    num_iterations: int = 2
    """Optimisation passes over each rollout batch (GRPO's mu), against the sampling logprobs."""
    learning_rate: float = 0.02
    """AdamW's learning rate."""
    durian_levels: int = 4
    """Durian's K."""
    durian_alpha: float = 0.5
    """Durian's weight of visual entropy against reasoning uncertainty."""
    tier_mix: tuple[float, float, float] = (0.4, 0.2, 0.4)
    """Share of easy, medium and hard prompts, in training and held out."""
    train_prompts: int = 512
    """Size of the training pool the batches are drawn from."""
    eval_prompts: int = 360
    """Held-out prompts (images the policy never trains on)."""
    data_seed: int = 0
    """Seed of the images (the same data for every estimator and training seed)."""
    curve_every: int = 10
    """Held-out reward is measured every this many steps, for the curves."""


@dataclass(frozen=True)
class Prompts:
    """A set of prompts: features, answers, tiers and image entropies."""

    features: torch.Tensor
    """``(n, GRID * GRID, 48)`` standardised pooled pixels of each cell."""
    answers: torch.Tensor
    """``(n,)`` the target's cell."""
    tiers: torch.Tensor
    """``(n,)`` index into :data:`TIERS`."""
    entropy: torch.Tensor
    """``(n,)`` image entropy in bits."""


def draw_image(rng: np.random.Generator, tier: str) -> tuple[np.ndarray, int]:
    """One image of ``tier`` (H x W x 3 floats in 0..1) and its answer (the target's cell)."""
    spec = TIER_SPECS[tier]
    cell = SIZE // GRID
    image = np.full((SIZE, SIZE, 3), 0.12)
    answer = int(rng.integers(ANSWERS))

    def square(at: int, side: int, colour: tuple[float, float, float]) -> None:
        row, col = divmod(at, GRID)
        top = row * cell + int(rng.integers(0, cell - side + 1))
        left = col * cell + int(rng.integers(0, cell - side + 1))
        image[top : top + side, left : left + side] = colour

    others = [c for c in range(ANSWERS) if c != answer]
    count = int(rng.integers(spec.distractors[0], spec.distractors[1] + 1))
    for at in rng.choice(others, size=count, replace=False):
        hues = NEAR_HUES if rng.random() < spec.near_share else FAR_HUES
        side = int(rng.integers(spec.target_side[0], spec.target_side[1] + 1))
        square(int(at), side, hues[int(rng.integers(len(hues)))])
    target = NEAR_HUES[int(rng.integers(len(NEAR_HUES)))] if rng.random() < spec.unreadable else TARGET
    square(answer, int(rng.integers(spec.target_side[0], spec.target_side[1] + 1)), target)
    if spec.noise:
        image = image + rng.normal(0.0, spec.noise, image.shape)
    return np.clip(image, 0.0, 1.0), answer


def cell_features(image: np.ndarray) -> np.ndarray:
    """``(GRID * GRID, F)``: each cell of the image average-pooled by :data:`POOL` and flattened."""
    side = SIZE // GRID // POOL
    pooled = image.reshape(GRID, side, POOL, GRID, side, POOL, 3).mean(axis=(2, 5))
    return pooled.transpose(0, 2, 1, 3, 4).reshape(ANSWERS, -1)


class CellScorer(torch.nn.Module):
    """The policy: one linear score per cell from that cell's features (weights shared across
    cells, as a convolution with the cell as its stride) plus a bias per answer; softmax over
    the cells gives the answer distribution."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.score = torch.nn.Linear(features, 1)
        self.bias = torch.nn.Parameter(torch.zeros(ANSWERS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score(x).squeeze(-1) + self.bias


def make_prompts(n: int, mix: tuple[float, float, float], seed: int) -> tuple[Prompts, np.ndarray]:
    """``n`` prompts with tiers in proportion ``mix`` (exact counts, shuffled), and their raw
    pooled features (standardised later with the training pool's statistics)."""
    rng = np.random.default_rng(seed)
    counts = np.floor(np.asarray(mix) / sum(mix) * n).astype(int)
    counts[0] += n - counts.sum()
    tiers = rng.permutation(np.repeat(np.arange(len(TIERS)), counts))
    pooled, answers, entropies = [], [], []
    for tier in tiers:
        image, answer = draw_image(rng, TIERS[tier])
        entropies.append(image_entropy([image]))
        pooled.append(cell_features(image))
        answers.append(answer)
    raw = np.stack(pooled)
    prompts = Prompts(
        features=torch.zeros(0),
        answers=torch.tensor(answers),
        tiers=torch.as_tensor(tiers),
        entropy=torch.tensor(entropies, dtype=torch.float64),
    )
    return prompts, raw


def make_data(config: StudyConfig) -> tuple[Prompts, Prompts]:
    """The training pool and the held-out set, features standardised by the pool's statistics."""
    train, train_raw = make_prompts(config.train_prompts, config.tier_mix, config.data_seed)
    held, held_raw = make_prompts(config.eval_prompts, config.tier_mix, config.data_seed + 10_000)
    # One statistic per feature over every cell of the pool: the cells share the scorer's weights.
    mean, std = train_raw.mean((0, 1)), train_raw.std((0, 1)) + 1e-6

    def standardised(p: Prompts, raw: np.ndarray) -> Prompts:
        return replace(p, features=torch.as_tensor((raw - mean) / std, dtype=torch.float32))

    return standardised(train, train_raw), standardised(held, held_raw)


def held_out_reward(policy: torch.nn.Module, prompts: Prompts) -> dict[str, float]:
    """Expected reward (probability of the right answer) overall and per tier."""
    with torch.no_grad():
        probs = torch.softmax(policy(prompts.features), dim=-1)
        right = probs.gather(1, prompts.answers.unsqueeze(1)).squeeze(1)
    result = {"reward": float(right.mean())}
    for index, tier in enumerate(TIERS):
        chosen = prompts.tiers == index
        if chosen.any():
            result[f"reward_{tier}"] = float(right[chosen].mean())
    return result


def train_run(
    config: StudyConfig, estimator: str, seed: int, data: tuple[Prompts, Prompts]
) -> dict[str, Any]:
    """One GRPO run of ``estimator`` from ``seed``: its per-step metrics, held-out curve and end."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 9-way softmax on a batch of 16: extra threads only add overhead
    try:
        return _train_run(config, estimator, seed, data)
    finally:
        torch.set_num_threads(threads)


def _train_run(
    config: StudyConfig, estimator: str, seed: int, data: tuple[Prompts, Prompts]
) -> dict[str, Any]:
    train, held = data
    grpo = GRPOConfig(
        group_size=config.group_size,
        num_iterations=config.num_iterations,
        learning_rate=config.learning_rate,
        advantage=estimator,
        durian_levels=config.durian_levels,
        durian_alpha=config.durian_alpha,
        max_new_tokens=1,
        seed=seed,
    )
    advantage = grpo.estimator()
    torch.manual_seed(seed)
    policy = CellScorer(train.features.shape[-1])
    optimizer = torch.optim.AdamW(policy.parameters(), lr=grpo.learning_rate)
    sampler = torch.Generator().manual_seed(seed)
    g, p = grpo.group_size, config.prompts_per_step
    mask = torch.ones(p * g, 1)
    start = held_out_reward(policy, held)
    steps: list[dict[str, Any]] = []
    curve = [{"step": 0, **start}]
    for step in range(1, config.steps + 1):
        batch = torch.randint(len(train.answers), (p,), generator=sampler)
        x = train.features[batch]
        with torch.no_grad():
            log_probs = torch.log_softmax(policy(x) / grpo.temperature, dim=-1)
            chosen = torch.multinomial(log_probs.exp(), g, replacement=True, generator=sampler)
            old_logps = log_probs.gather(1, chosen).reshape(p * g, 1)
            entropy = -(log_probs.exp() * log_probs).sum(-1)
        rewards = (chosen == train.answers[batch].unsqueeze(1)).float()
        features = DifficultyFeatures(
            uncertainty=reasoning_uncertainty(
                "entropy", mask, g, token_entropies=entropy.repeat_interleave(g).unsqueeze(1)
            ),
            visual_entropy=train.entropy[batch],
        )
        result = advantage(rewards, features)
        values = result.values.reshape(p * g)
        for _ in range(grpo.num_iterations):
            logps = (
                torch.log_softmax(policy(x) / grpo.temperature, dim=-1).gather(1, chosen).reshape(p * g, 1)
            )
            loss, loss_stats = grpo_loss(logps, old_logps, values, mask, grpo)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        record = {
            "step": step,
            **result.stats,
            "reward_easy": float(rewards[train.tiers[batch] == 0].mean())
            if (train.tiers[batch] == 0).any()
            else None,
            "reward_hard": float(rewards[train.tiers[batch] == 2].mean())
            if (train.tiers[batch] == 2).any()
            else None,
            "groups_all_right": float((rewards.sum(1) == g).float().mean()),
            "groups_all_wrong": float((rewards.sum(1) == 0).float().mean()),
            "groups_one_off": float(((rewards.sum(1) == 1) | (rewards.sum(1) == g - 1)).float().mean()),
            "policy_loss": loss_stats["policy_loss"],
            "clip_fraction": loss_stats["clip_ratio/region_mean"],
            "entropy": float(entropy.mean()),
        }
        steps.append(record)
        if step % config.curve_every == 0 or step == config.steps:
            curve.append({"step": step, **held_out_reward(policy, held)})
    end = curve[-1]
    return {
        "estimator": estimator,
        "seed": seed,
        "start": start,
        "end": end,
        "steps": steps,
        "curve": curve,
        "max_abs_advantage": max(s["advantage_abs_max"] for s in steps),
        "mean_max_abs_advantage": float(np.mean([s["advantage_abs_max"] for s in steps])),
        "weights": [t.detach().clone() for t in policy.parameters()],
    }


def run_study(config: StudyConfig) -> dict[str, Any]:
    """Every estimator over every seed on one data set: the runs and a per-estimator summary."""
    started = time.perf_counter()
    data = make_data(config)
    runs = {
        name: [train_run(config, name, seed, data) for seed in range(config.seeds)]
        for name in config.estimators
    }
    summary: dict[str, Any] = {}
    for name, seed_runs in runs.items():
        finals = np.array([r["end"]["reward"] for r in seed_runs])
        summary[name] = {
            "final_reward": float(finals.mean()),
            "reward_std_across_seeds": float(finals.std(ddof=1)) if len(finals) > 1 else 0.0,
            "reward_var_across_seeds": float(finals.var(ddof=1)) if len(finals) > 1 else 0.0,
            "final_rewards": finals.tolist(),
            # The mean held-out reward over the curve's points: how fast it learned, not only where it ended.
            "reward_auc": float(np.mean([[c["reward"] for c in r["curve"]] for r in seed_runs])),
            **{
                f"final_{key}": float(np.mean([r["end"][key] for r in seed_runs]))
                for key in seed_runs[0]["end"]
                if key.startswith("reward_")
            },
            "max_abs_advantage": max(r["max_abs_advantage"] for r in seed_runs),
            "mean_max_abs_advantage": float(np.mean([r["mean_max_abs_advantage"] for r in seed_runs])),
            "mean_abs_advantage": float(
                np.mean([s["advantage_abs_mean"] for r in seed_runs for s in r["steps"]])
            ),
            "groups_all_right": float(
                np.mean([s["groups_all_right"] for r in seed_runs for s in r["steps"]])
            ),
            "groups_all_wrong": float(
                np.mean([s["groups_all_wrong"] for r in seed_runs for s in r["steps"]])
            ),
            "groups_one_off": float(np.mean([s["groups_one_off"] for r in seed_runs for s in r["steps"]])),
        }
    start = float(np.mean([r["start"]["reward"] for seed_runs in runs.values() for r in seed_runs]))
    train, held = data
    return {
        "config": asdict(config),
        "untrained_reward": start,
        "image_entropy_by_tier": {
            tier: float(train.entropy[train.tiers == i].mean()) for i, tier in enumerate(TIERS)
        },
        "runs": runs,
        "summary": summary,
        "seconds": time.perf_counter() - started,
    }
