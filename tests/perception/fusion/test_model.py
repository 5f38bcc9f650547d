"""IDEAL's conditions, decision and modulation on hand-made tensors; save/load round trips;
errors for bad configs and inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from embodia.perception.fusion.errors import FusionError
from embodia.perception.fusion.model import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    IDEALConfig,
    band_masks,
    build_ideal,
    fuse_images,
    fusion_decision,
    load_ideal,
    save_ideal,
)


def _texture(size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:size, 0:size]
    return np.clip(
        128 + 60 * np.sin(rows / 3.0) * np.cos(cols / 4.0) + rng.normal(0, 10, (size, size)), 0, 255
    )


def test_config_errors_name_the_field() -> None:
    with pytest.raises(FusionError, match="stride must be 1, 2, 4 or 8, got 3"):
        IDEALConfig(stride=3)
    with pytest.raises(FusionError, match=r"bands must be in 1..3 for 16-pixel patches, got 4"):
        IDEALConfig(bands=4)
    with pytest.raises(FusionError, match="patch must be 8, 16 or 32, got 12"):
        IDEALConfig(patch=12)
    with pytest.raises(FusionError, match="prior must be a number in 1..100"):
        IDEALConfig(prior=0.5)
    with pytest.raises(FusionError, match="width must be a whole number"):
        IDEALConfig(width=True)


def test_band_masks_split_the_non_dc_frequencies_into_octaves() -> None:
    masks = band_masks(16, 3)
    assert masks.shape == (3, 16, 9)
    assert masks[:, 0, 0].sum() == 0  # DC is in no band
    assert np.array_equal(masks.sum(axis=0) + (np.arange(16 * 9) == 0).reshape(16, 9), np.ones((16, 9)))
    radius = np.hypot(np.fft.fftfreq(16)[:, None], np.fft.rfftfreq(16)[None, :])
    assert masks[0][radius == 1 / 16].all() and masks[0][radius == 0.125].all()
    assert masks[1][radius == 0.25].all() and not masks[1][radius == 0.125].any()
    assert masks[2][radius == 0.5].all()


def test_difference_maps_at_every_scale() -> None:
    model = build_ideal()
    a = torch.rand(1, 1, 32, 32)
    both = torch.cat([a, a + 0.2], dim=1)
    spatial, difference = model.spatial_conditions(both)
    assert spatial.shape == (1, 7, 8, 8) and difference.shape == (1, 3, 8, 8)
    assert torch.allclose(difference, torch.full_like(difference, 0.2), atol=1e-6)
    # a checkerboard differs pixel by pixel but not on average: only D_1 sees it
    checker = torch.from_numpy((np.indices((32, 32)).sum(axis=0) % 2).astype(np.float32))[None, None]
    spatial, difference = model.spatial_conditions(torch.cat([checker, 1 - checker], dim=1))
    assert torch.allclose(difference[0, 0], torch.ones(8, 8)) and difference[0, 1:].abs().max() < 1e-6
    # the means on the grid and the gradient magnitudes (|dx| + |dy| of the checkerboard: 2)
    assert torch.allclose(spatial[0, 0], torch.full((8, 8), 0.5))
    assert spatial[0, 2, :7, :7].allclose(torch.full((7, 7), 2.0))


def test_spectral_reliability_is_high_for_structure_and_zero_for_flat_or_noise() -> None:
    model = build_ideal(IDEALConfig(patch=16, stride=4))
    rows, cols = np.mgrid[0:16, 0:16]
    wave = torch.from_numpy((0.5 + 0.4 * np.sin(2 * math.pi * cols / 4)).astype(np.float32))[None, None]
    noise = torch.from_numpy(np.random.default_rng(0).uniform(0, 1, (16, 16)).astype(np.float32))[None, None]
    flat = torch.full((1, 1, 16, 16), 0.3)
    maps, reliability = model.spectral_conditions(torch.cat([wave, noise], dim=1), (4, 4))
    assert maps.shape == (1, 11, 4, 4)
    assert float(reliability[0, 0, 0, 0]) > 0.5  # one frequency (and its window's spread)
    assert float(reliability[0, 1, 0, 0]) < 0.15  # power everywhere
    _, reliability = model.spectral_conditions(torch.cat([flat, wave], dim=1), (4, 4))
    assert float(reliability[0, 0, 0, 0]) == pytest.approx(0.0, abs=1e-5)  # no power: H = 1
    # complementary spectra: +1 in every band where only A has power
    maps, _ = model.spectral_conditions(torch.cat([noise, flat], dim=1), (4, 4))
    assert torch.allclose(maps[0, 6:9, 0, 0], torch.ones(3), atol=1e-4)
    # band power: log1p of the mean power, zero for a flat patch
    assert maps[0, 3:6].abs().max() < 1e-9 and torch.all(maps[0, 0:3] > 0.01)


def test_where_the_sources_agree_the_mix_is_even_and_the_image_kept() -> None:
    model = build_ideal(seed=3).eval()
    image = _texture(40)
    decision = fusion_decision(model, image, image)
    assert np.array_equal(decision.weight, np.full((40, 40), 0.5))
    assert np.allclose(decision.fused, image, atol=1e-3)
    with torch.inference_mode():
        output = model(torch.rand(1, 1, 40, 40), torch.rand(1, 1, 40, 40))
    assert torch.all(output.trigger > 0)


def test_the_fused_image_is_the_weighted_mix_at_any_size() -> None:
    model = build_ideal(seed=1).eval()
    a, b = _texture(37, 1), _texture(37, 2)[:, :30]
    a = a[:, :30]
    decision = fusion_decision(model, a, b)
    assert decision.fused.shape == decision.weight.shape == decision.uncertainty.shape == (37, 30)
    assert np.all((decision.weight >= 0) & (decision.weight <= 1))
    assert np.allclose(decision.fused, decision.weight * a + (1 - decision.weight) * b, atol=1e-3)
    assert np.all(decision.uncertainty > 0) and np.all(decision.uncertainty <= 1 / 12 + 1e-6)
    assert np.array_equal(fuse_images(model, a, b), decision.fused)


def test_the_modulation_shrinks_an_unsure_policy_towards_an_even_mix() -> None:
    model = build_ideal(seed=0).eval()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.copy_(torch.tensor([3.0, -30.0]))  # alpha = 1 + softplus(3), beta = 1
        model.trust_logit.fill_(-50.0)  # reliability ignored
    a, b = torch.rand(1, 1, 32, 32), torch.rand(1, 1, 32, 32)
    with torch.inference_mode():
        output = model(a, b)
    alpha = 1 + math.log1p(math.exp(3.0))
    mean, variance = alpha / (alpha + 1), alpha / ((alpha + 1) ** 2 * (alpha + 2))
    expected = 0.5 + output.trigger * (1 - 12 * variance) * (mean - 0.5)
    assert torch.allclose(output.weight_grid, expected, atol=1e-5)
    assert torch.allclose(output.mean, torch.full_like(output.mean, mean), atol=1e-5)
    # a flat policy (alpha = beta = 1) is wholly unsure: the mix is even whatever the difference
    with torch.no_grad():
        model.head.bias.copy_(torch.tensor([-30.0, -30.0]))
    with torch.inference_mode():
        assert torch.allclose(model(a, b).weight, torch.full((1, 1, 32, 32), 0.5), atol=1e-6)


def test_training_draws_are_reparameterised() -> None:
    model = build_ideal(seed=0)
    a, b = torch.rand(2, 1, 32, 32), torch.rand(2, 1, 32, 32)
    torch.manual_seed(0)
    first = model(a, b, sample=True)
    first.fused.mean().backward()
    assert model.head.bias.grad is not None and model.head.bias.grad.abs().sum() > 0
    assert not torch.equal(first.decision, first.mean)  # a draw, not the mean


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    model = build_ideal(IDEALConfig(width=8, stride=2, patch=8, bands=2, prior=3.0), seed=5)
    with torch.no_grad():
        model.tau_raw.fill_(0.7)
    save_ideal(model, tmp_path / "ideal")
    loaded = load_ideal(tmp_path / "ideal")
    assert loaded.config == model.config and not loaded.training
    for (name, mine), (other, theirs) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert name == other and torch.equal(mine, theirs)
    a, b = _texture(33, 3), _texture(33, 4)
    assert np.array_equal(fuse_images(model.eval(), a, b), fuse_images(loaded, a, b))
    assert json.loads((tmp_path / "ideal" / CONFIG_FILE).read_text())["config"]["prior"] == 3.0


def test_load_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FusionError, match="does not exist"):
        load_ideal(tmp_path / "nothing")
    folder = save_ideal(build_ideal(IDEALConfig(width=8)), tmp_path / "m")
    (folder / WEIGHTS_FILE).rename(tmp_path / "weights")
    with pytest.raises(FusionError, match=f"has no {WEIGHTS_FILE}"):
        load_ideal(folder)
    (tmp_path / "weights").rename(folder / WEIGHTS_FILE)
    record = json.loads((folder / CONFIG_FILE).read_text())
    (folder / CONFIG_FILE).write_text(json.dumps({**record, "config": {**record["config"], "width": 16}}))
    with pytest.raises(FusionError, match="does not fit the model its config describes"):
        load_ideal(folder)
    (folder / CONFIG_FILE).write_text(json.dumps({**record, "kind": "other"}))
    with pytest.raises(FusionError, match="is not a format-1 ideal-fusion record"):
        load_ideal(folder)
    (folder / CONFIG_FILE).write_text(json.dumps({**record, "config": {**record["config"], "depth": 3}}))
    with pytest.raises(FusionError, match="has no IDEALConfig mapping"):
        load_ideal(folder)
    (folder / CONFIG_FILE).write_text("{not json")
    with pytest.raises(FusionError, match="is not JSON"):
        load_ideal(folder)


def test_fusion_input_errors_are_named() -> None:
    model = build_ideal()
    with pytest.raises(FusionError, match="differ in size: 32x32 vs 32x31"):
        fuse_images(model, np.zeros((32, 32)), np.zeros((32, 31)))
    with pytest.raises(FusionError, match="2-D grayscale image"):
        fuse_images(model, np.zeros((32, 32, 3)), np.zeros((32, 32, 3)))
    with pytest.raises(FusionError, match="at least 4x4 pixels"):
        fuse_images(model, np.zeros((3, 32)), np.zeros((3, 32)))
