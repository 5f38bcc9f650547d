"""Reconstruction and code-usage measures against values worked out by hand, and the
no-learning baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodia.perception.tokenizers import baselines, metrics
from embodia.perception.tokenizers.lfq import TokenizerError


def test_psnr_by_hand() -> None:
    reference = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    test = reference.copy()
    test[0] = 10  # MSE 100
    test[1, 0, 0, 0] = 48  # MSE 48^2 / 48 = 48
    assert metrics.psnr(reference, test) == pytest.approx(
        [10 * math.log10(255**2 / 100), 10 * math.log10(255**2 / 48)]
    )
    assert metrics.dataset_psnr(reference, test) == pytest.approx(10 * math.log10(255**2 / 74))
    assert metrics.psnr(reference[0], reference[0])[0] == math.inf
    assert metrics.psnr(reference, test / 255.0, data_range=1.0)[0] == pytest.approx(
        10 * math.log10(255**2 / 100)
    )


def test_ssim_is_one_for_a_copy_and_lower_for_noise() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (1, 24, 32, 3), dtype=np.uint8)
    assert metrics.ssim(image, image)[0] == pytest.approx(1.0)
    noisy = np.clip(image + rng.normal(0, 40, image.shape), 0, 255).astype(np.uint8)
    assert metrics.ssim(image, noisy)[0] < 0.9


def test_mismatched_images_are_refused() -> None:
    with pytest.raises(TokenizerError, match="differ in shape"):
        metrics.psnr(np.zeros((1, 4, 4, 3)), np.zeros((1, 4, 5, 3)))
    with pytest.raises(TokenizerError, match="RGB"):
        metrics.ssim(np.zeros((1, 4, 4)), np.zeros((1, 4, 4)))
    with pytest.raises(TokenizerError, match="data_range"):
        metrics.psnr(np.zeros((1, 4, 4, 3)), np.zeros((1, 4, 4, 3)), data_range=0)


def test_bit_usage_by_hand() -> None:
    bits = np.array([[1, 0], [1, 1], [1, 0], [1, 1]])  # p = (1, 0.5)
    assert metrics.bit_probabilities(bits).tolist() == [1.0, 0.5]
    assert metrics.bit_balance(bits) == pytest.approx((0 + 0.5) / 2)
    assert metrics.bit_entropy(bits) == pytest.approx((0 + 1) / 2)
    # groups of one bit: bit 0 shows one of its 2 values, bit 1 both
    assert metrics.group_code_usage(bits, 1) == pytest.approx((1 / 2 + 2 / 2) / 2)
    # one group of two bits: codes 2 and 3 of 4
    assert metrics.group_code_usage(bits, 2) == pytest.approx(2 / 4)
    assert metrics.code_perplexity(bits) == pytest.approx(2.0)  # two codes, equally often
    skewed = np.array([[0, 0]] * 3 + [[0, 1]])
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert metrics.code_perplexity(skewed) == pytest.approx(math.exp(h))
    report = metrics.code_usage_report(bits.reshape(2, 2, 2), 1)
    assert report["codes"] == 4 and report["bits_per_code"] == 2


def test_bad_bits_are_refused() -> None:
    with pytest.raises(TokenizerError, match="0 or 1"):
        metrics.bit_balance(np.array([[0, 2]]))
    with pytest.raises(TokenizerError, match="does not divide"):
        metrics.group_code_usage(np.zeros((3, 6), dtype=int), 4)


def test_the_mean_image_baseline() -> None:
    images = np.zeros((2, 2, 2, 3), dtype=np.uint8)
    images[1] = 101
    assert baselines.mean_image(images).tolist() == np.full((2, 2, 3), 50).tolist()  # 50.5 rounds to even


def test_the_downsample_codec_counts_its_bits_and_keeps_flat_images() -> None:
    codec = baselines.Downsample(rows=3, cols=4, bits_per_channel=5)
    assert codec.bits_per_image == 3 * 4 * 3 * 5
    flat = np.full((2, 12, 16, 3), 255, dtype=np.uint8)
    flat[1] = 0
    assert np.array_equal(codec(flat), flat)
    # a grey of 128 is not a 2-bit level: the nearest is 170
    assert codec.__class__(3, 4, 2)(np.full((1, 12, 16, 3), 128, dtype=np.uint8)).max() == 170


def test_the_best_downsample_stays_within_the_budget() -> None:
    rng = np.random.default_rng(0)
    smooth = np.kron(rng.integers(0, 256, (4, 3, 4, 3)), np.ones((1, 4, 4, 1))).astype(np.uint8)
    chosen = baselines.best_downsample(smooth, 400)
    assert chosen.bits_per_image <= 400
    assert chosen.rows * 4 == chosen.cols * 3 or abs(chosen.cols - chosen.rows * 4 / 3) <= 0.5
    with pytest.raises(TokenizerError, match="no downsample setting fits 2 bits"):
        baselines.best_downsample(smooth, 2)
