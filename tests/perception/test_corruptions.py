"""The image corruptions: severity orders the damage, a seed fixes it, the image keeps its
shape and dtype, and each formula holds on images whose answer is known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skimage import data
from skimage.transform import resize

from embodia.perception.corruptions import (
    CORRUPTIONS,
    FOG_BRIGHTNESS,
    LOW_LIGHT_GAMMA,
    LOW_LIGHT_SCALE,
    SEVERITIES,
    CorruptionError,
    corrupt,
)


def _psnr(clean: np.ndarray, other: np.ndarray) -> float:
    error = np.mean((clean.astype(np.float64) - other.astype(np.float64)) ** 2)
    return 10 * math.log10(255**2 / error)


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    """Three bundled photographs at 48x48 (astronaut, coffee, chelsea the cat)."""
    return [
        (resize(image, (48, 48), anti_aliasing=True) * 255).round().astype(np.uint8)
        for image in (data.astronaut(), data.coffee(), data.chelsea())
    ]


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_psnr_to_the_clean_image_falls_with_severity(kind: str, photos: list[np.ndarray]) -> None:
    by_severity = [
        np.mean([_psnr(photo, corrupt(photo, kind, severity, seed=3)) for photo in photos])
        for severity in range(1, 6)
    ]
    assert all(a > b for a, b in zip(by_severity, by_severity[1:], strict=False)), by_severity
    assert by_severity[-1] < 30  # severity 5 is a visible change


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_shape_dtype_seed_and_severity_zero(kind: str, photos: list[np.ndarray]) -> None:
    photo = photos[0]
    grey = photo[..., 0].copy()
    for image in (photo, grey):
        out = corrupt(image, kind, 4, seed=11)
        assert out.shape == image.shape and out.dtype == np.uint8
        assert np.array_equal(out, corrupt(image, kind, 4, seed=11))
        assert not np.array_equal(out, image)
        unchanged = corrupt(image, kind, 0)
        assert np.array_equal(unchanged, image) and unchanged is not image
    assert np.array_equal(photo, photos[0])  # the input is never written to


@pytest.mark.parametrize("kind", ["gaussian_noise", "fog", "low_light"])
def test_random_corruptions_differ_between_seeds(kind: str, photos: list[np.ndarray]) -> None:
    assert not np.array_equal(corrupt(photos[1], kind, 3, seed=0), corrupt(photos[1], kind, 3, seed=1))


def test_gaussian_noise_has_the_severitys_standard_deviation() -> None:
    grey = np.full((200, 200), 128, dtype=np.uint8)
    for severity in (1, 3):
        noise = (corrupt(grey, "gaussian_noise", severity).astype(np.float64) - 128) / 255
        assert abs(noise.mean()) < 0.003
        assert noise.std() == pytest.approx(SEVERITIES["gaussian_noise"][severity - 1], rel=0.03)


def _hand_kernel(kind: str, side: int) -> np.ndarray:
    """The blur's kernel written out from its definition (module docstring of corruptions)."""
    if kind == "gaussian_blur":
        sigma = SEVERITIES[kind][0] * side
        reach = math.ceil(3 * sigma)
        i, j = np.mgrid[-reach : reach + 1, -reach : reach + 1]
        weights = np.exp(-(i**2 + j**2) / (2 * sigma**2))
    else:
        radius = SEVERITIES[kind][0] * side
        reach = math.ceil(radius + 0.5)
        i, j = np.mgrid[-reach : reach + 1, -reach : reach + 1]
        weights = np.clip(radius + 0.5 - np.hypot(i, j), 0, 1)
    return weights / weights.sum()


@pytest.mark.parametrize("kind", ["gaussian_blur", "defocus_blur"])
def test_blurs_keep_a_flat_image_and_spread_an_impulse_by_their_kernel(kind: str) -> None:
    flat = np.full((40, 50, 3), 90, dtype=np.uint8)
    assert np.array_equal(corrupt(flat, kind, 5), flat)
    impulse = np.zeros((64, 64), dtype=np.uint8)
    impulse[32, 32] = 255
    spread = corrupt(impulse, kind, 1)
    kernel = _hand_kernel(kind, 64)
    reach = kernel.shape[0] // 2
    expected = np.zeros((64, 64))
    expected[32 - reach : 33 + reach, 32 - reach : 33 + reach] = 255 * kernel
    assert np.abs(spread - np.rint(expected)).max() <= 1
    assert spread[32, 32] < 255 and spread[32, 34] > 0


def test_fog_only_brightens_towards_the_fog_and_darkens_nothing_below_it() -> None:
    black = np.zeros((60, 60, 3), dtype=np.uint8)
    fogged = corrupt(black, "fog", 5, seed=2).astype(np.float64) / 255
    strength = SEVERITIES["fog"][4]
    # black * (1 - s F) + s F b = s F b with F in [0, 1], reaching 0 and 1 somewhere
    assert fogged.min() == pytest.approx(0, abs=1 / 255)
    assert fogged.max() == pytest.approx(strength * FOG_BRIGHTNESS, abs=1 / 255)
    white = np.full((60, 60, 3), 255, dtype=np.uint8)
    assert (
        corrupt(white, "fog", 5, seed=2).min() >= round(255 * (1 - strength + strength * FOG_BRIGHTNESS)) - 1
    )


def test_low_light_scales_a_gamma_curve() -> None:
    grey = np.full((150, 150), 200, dtype=np.uint8)
    for severity in (1, 5):
        dark = corrupt(grey, "low_light", severity).astype(np.float64) / 255
        expected = LOW_LIGHT_SCALE[severity - 1] * (200 / 255) ** LOW_LIGHT_GAMMA[severity - 1]
        assert dark.mean() == pytest.approx(expected, abs=0.003)
        assert dark.std() == pytest.approx(SEVERITIES["low_light"][severity - 1], rel=0.1, abs=0.002)


def test_jpeg_decoded_and_encoded_again_at_its_quality_barely_changes(photos: list[np.ndarray]) -> None:
    once = corrupt(photos[2], "jpeg", 1)
    twice = corrupt(once, "jpeg", 1)
    error = np.mean((photos[2].astype(float) - once) ** 2)
    assert np.mean((once.astype(float) - twice) ** 2) < error / 4  # what JPEG drops, it drops once


@pytest.mark.parametrize(
    ("image", "kind", "severity", "message"),
    [
        (np.zeros((8, 8, 3), np.uint8), "rain", 1, "unknown corruption 'rain'"),
        (np.zeros((8, 8, 3), np.uint8), "fog", 6, "severity must be 0..5, got 6"),
        (np.zeros((8, 8, 3), np.uint8), "fog", 2.0, "severity must be an integer"),
        (np.zeros((8, 8, 3), np.float32), "fog", 1, "must be uint8, got float32"),
        (np.zeros((8, 8, 4), np.uint8), "fog", 1, "H x W or H x W x 3, got shape (8, 8, 4)"),
        (np.zeros((1, 8), np.uint8), "fog", 1, "at least 2 pixels a side"),
    ],
)
def test_bad_input_is_named(image: np.ndarray, kind: str, severity: int, message: str) -> None:
    with pytest.raises(CorruptionError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        corrupt(image, kind, severity)
    assert "\n" not in str(raised.value) and isinstance(raised.value, ValueError)
