"""Advantage estimators: golden numbers, TRL's numerics, Durian's identities and features."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from embodia.errors import EmbodiaError
from embodia.policies.recipes.advantages import (
    EPS,
    ESTIMATORS,
    DifficultyFeatures,
    Durian,
    advantage_estimator,
    image_entropy,
    reasoning_uncertainty,
)


def _binary(correct: int, g: int = 8) -> torch.Tensor:
    return torch.tensor([[1.0] * correct + [0.0] * (g - correct)])


def test_registry_names() -> None:
    assert set(ESTIMATORS) == {"group", "batch", "none", "durian"}
    assert advantage_estimator("durian", levels=3, alpha=0.2).num_levels == 3  # type: ignore[attr-defined]


def test_golden_binary_rewards() -> None:
    group = advantage_estimator("group")
    one = group(_binary(1)).values[0]
    assert float(one[0]) == pytest.approx(2.47, abs=5e-3)
    assert torch.allclose(one[1:], torch.tensor(-0.35), atol=5e-3)
    half = group(_binary(4)).values[0]
    assert torch.allclose(half[:4], torch.tensor(0.94), atol=5e-3)
    assert torch.allclose(half[4:], torch.tensor(-0.94), atol=5e-3)
    dr = advantage_estimator("none")(_binary(1)).values[0]
    assert float(dr[0]) == 0.875 and torch.equal(dr[1:], torch.full((7,), -0.125))


def test_group_and_batch_match_trl_formulas() -> None:
    """TRL: A = (r - group mean) / (Bessel std + 1e-4), the std per group or over the batch."""
    r = torch.rand(5, 6, generator=torch.Generator().manual_seed(0))
    centred = r - r.mean(dim=1, keepdim=True)
    group = advantage_estimator("group")(r)
    torch.testing.assert_close(group.values, centred / (r.std(dim=1, keepdim=True) + 1e-4))
    batch = advantage_estimator("batch")(r)
    torch.testing.assert_close(batch.values, centred / (r.std() + 1e-4))
    assert EPS == 1e-4
    none = advantage_estimator("none")(r.numpy())  # numpy in, same numbers
    torch.testing.assert_close(none.values, centred)
    assert none.scale is None and "scale_min" not in none.stats


def test_nan_rewards_are_left_out_and_get_zero() -> None:
    r = torch.tensor([[1.0, math.nan, 0.0, 0.0], [math.nan, math.nan, math.nan, 2.0]])
    a = advantage_estimator("group")(r).values
    scored = torch.tensor([1.0, 0.0, 0.0])
    expected = (scored - scored.mean()) / (scored.std() + EPS)
    torch.testing.assert_close(a[0, [0, 2, 3]], expected)
    assert a[0, 1] == 0
    assert torch.equal(a[1], torch.zeros(4))  # one scorable reward: nothing to compare with
    assert not a.isnan().any()


def test_group_of_one_and_constant_groups_get_zero() -> None:
    for name in ("group", "batch", "none"):
        assert torch.equal(advantage_estimator(name)(torch.tensor([[3.0], [1.0]])).values, torch.zeros(2, 1))
    result = advantage_estimator("group")(torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
    assert torch.equal(result.values[:2], torch.zeros(2, 3))
    assert result.stats["frac_reward_zero_std"] == pytest.approx(2 / 3)
    assert result.stats["advantage_abs_max"] == pytest.approx(float(result.values.abs().max()))
    assert result.stats["scale_min"] == 0.0


def _features(num_prompts: int, seed: int, images: bool = True) -> DifficultyFeatures:
    gen = torch.Generator().manual_seed(seed)
    return DifficultyFeatures(
        uncertainty=torch.rand(num_prompts, generator=gen),
        visual_entropy=torch.rand(num_prompts, generator=gen) * 8 if images else None,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_durian_identities(seed: int) -> None:
    """K = number of prompts gives exactly group std; K = 1 gives exactly batch std."""
    r = torch.randint(0, 3, (7, 5), generator=torch.Generator().manual_seed(seed)).float()
    features = _features(7, seed)
    group = advantage_estimator("group")(r).values
    batch = advantage_estimator("batch")(r).values
    assert torch.equal(Durian(levels=7)(r, features).values, group)
    assert torch.equal(Durian(levels=50)(r, features).values, group)  # K above the prompts: one each
    assert torch.equal(Durian(levels=1)(r, features).values, batch)
    assert not torch.equal(group, batch)


def test_durian_buckets_by_quantile_and_shares_the_std() -> None:
    # difficulty = uncertainty alone (no images): prompts 3, 0 easiest ... 1, 5 hardest
    uncertainty = torch.tensor([0.2, 0.9, 0.5, 0.1, 0.6, 0.95])
    r = torch.tensor(
        [
            [1.0, 1.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [1.0, 0.0, 1.0, 0.0],
            [1.0, 1.0, 1.0, 1.0],
            [0.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    result = Durian(levels=3)(r, DifficultyFeatures(uncertainty=uncertainty))
    assert result.levels is not None
    assert result.levels.tolist() == [0, 2, 1, 0, 1, 2]
    assert result.scale is not None
    for level in range(3):
        members = result.levels == level
        pooled = r[members].reshape(-1).std()
        torch.testing.assert_close(result.scale[members], pooled.expand(int(members.sum())))
    centred = r - r.mean(dim=1, keepdim=True)
    torch.testing.assert_close(result.values, centred / (result.scale.unsqueeze(1) + EPS))
    # a level's all-equal prompt still gets 0, and its rewards still count in the level's std
    assert torch.equal(result.values[5], torch.zeros(4))
    assert float(result.scale[1]) == pytest.approx(float(torch.tensor([0.0] * 7 + [1.0]).std()))


def test_durian_difficulty_mixes_z_scores() -> None:
    visual = torch.tensor([0.0, 1.0, 2.0, 3.0])
    uncertainty = torch.tensor([30.0, 20.0, 10.0, 0.0])  # another scale, opposite order
    durian = Durian(levels=4, alpha=0.75)
    mixed = durian.difficulty(4, DifficultyFeatures(uncertainty=uncertainty, visual_entropy=visual))
    z_visual = ((visual - visual.mean()) / visual.std(unbiased=False)).double()
    torch.testing.assert_close(mixed, 0.75 * z_visual - 0.25 * z_visual)  # z(U) = -z(H) here
    assert (
        Durian(alpha=1.0)
        .difficulty(4, DifficultyFeatures(uncertainty=uncertainty, visual_entropy=visual))
        .argmax()
        == 3
    )
    assert (
        Durian(alpha=0.0)
        .difficulty(4, DifficultyFeatures(uncertainty=uncertainty, visual_entropy=visual))
        .argmax()
        == 0
    )
    text_only = Durian(alpha=0.9).difficulty(4, DifficultyFeatures(uncertainty=uncertainty))
    assert text_only.argmax() == 0  # U alone, whatever alpha says
    constant = Durian().difficulty(3, DifficultyFeatures(uncertainty=torch.ones(3)))
    assert torch.equal(constant, torch.zeros(3, dtype=torch.float64))


def test_durian_bad_input() -> None:
    r = torch.zeros(3, 4)
    with pytest.raises(EmbodiaError, match="difficulty features"):
        Durian()(r)
    with pytest.raises(EmbodiaError, match="uncertainty must have one value per prompt"):
        Durian()(r, DifficultyFeatures(uncertainty=torch.zeros(2)))
    with pytest.raises(EmbodiaError, match="finite"):
        Durian()(r, DifficultyFeatures(uncertainty=torch.tensor([0.0, math.nan, 1.0])))
    with pytest.raises(EmbodiaError, match="levels"):
        Durian(levels=0)
    with pytest.raises(EmbodiaError, match="alpha"):
        Durian(alpha=1.5)


def test_bad_rewards_and_names() -> None:
    with pytest.raises(EmbodiaError, match="unknown advantage estimator 'gruop'"):
        advantage_estimator("gruop")
    with pytest.raises(EmbodiaError, match="takes no options"):
        advantage_estimator("group", levels=3)
    with pytest.raises(EmbodiaError, match=r"\(num_prompts, G\)"):
        advantage_estimator("group")(torch.zeros(8))
    with pytest.raises(EmbodiaError, match="infinity"):
        advantage_estimator("group")(torch.tensor([[1.0, math.inf]]))


def test_image_entropy() -> None:
    flat = np.full((8, 8), 77, dtype=np.uint8)
    assert image_entropy([flat]) == 0.0
    halves = np.zeros((4, 8), dtype=np.uint8)
    halves[:, 4:] = 255
    assert image_entropy([halves]) == pytest.approx(1.0)
    ramp = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert image_entropy([ramp]) == pytest.approx(8.0)
    assert image_entropy([flat, ramp]) == pytest.approx(4.0)  # the mean over a prompt's images
    rgb = np.stack([halves] * 3, axis=-1)
    assert image_entropy([rgb]) == pytest.approx(1.0)
    assert image_entropy([Image.fromarray(ramp)]) == pytest.approx(8.0)
    assert image_entropy([halves.astype(np.float32) / 255]) == pytest.approx(1.0)
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    assert 7.0 < image_entropy([noise]) <= 8.0
    with pytest.raises(EmbodiaError, match="at least one image"):
        image_entropy([])
    with pytest.raises(EmbodiaError, match="shape"):
        image_entropy([np.zeros((4, 4, 2), dtype=np.uint8)])
    with pytest.raises(EmbodiaError, match="uint8 or floats"):
        image_entropy([np.full((4, 4), 3.0)])


def test_reasoning_uncertainty() -> None:
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]])
    entropies = torch.tensor([[1.0, 2.0, 9.0], [3.0, 9.0, 9.0], [0.5, 0.5, 0.5], [9.0, 9.0, 9.0]])
    u = reasoning_uncertainty("entropy", mask, 2, token_entropies=entropies)
    torch.testing.assert_close(u, torch.tensor([2.0, 0.5]))  # (1+2+3)/3 and 1.5/3
    logps = torch.log(torch.tensor([[0.5, 0.5, 1.0], [0.25, 1.0, 1.0], [1.0, 1.0, 1.0], [0.1, 0.1, 0.1]]))
    u = reasoning_uncertainty("probability", mask, 2, logps=logps)
    torch.testing.assert_close(u, torch.tensor([1 - (0.5 + 0.25) / 2, 0.0]))
    with pytest.raises(EmbodiaError, match="needs logps"):
        reasoning_uncertainty("probability", mask, 2, token_entropies=entropies)
    with pytest.raises(EmbodiaError, match="unknown uncertainty kind"):
        reasoning_uncertainty("confidence", mask, 2, logps=logps)
    with pytest.raises(EmbodiaError, match="G = 3"):
        reasoning_uncertainty("entropy", mask, 3, token_entropies=entropies)
