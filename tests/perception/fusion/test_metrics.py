"""The fusion metrics against values worked out by hand on tiny arrays, and their anchors
(F = A = B: MI = 2 H(A) in nats, SSIM = 2, SCD = 0, VIF = 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodia.perception.fusion import metrics
from embodia.perception.fusion.errors import FusionError


def _texture(size: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:size, 0:size]
    smooth = 120 + 60 * np.sin(rows / 5.0) * np.cos(cols / 7.0)
    return np.clip(np.rint(smooth + rng.normal(0, 12, (size, size))), 0, 255)


def test_entropy_counts_rounded_levels_clipped_to_0_255() -> None:
    # levels 0, 0, 1, 2: shares 1/2, 1/4, 1/4 -> 0.5 * 1 + 2 * 0.25 * 2 = 1.5 bits
    assert metrics.entropy(np.array([[0.0, 0.0], [1.0, 2.0]])) == pytest.approx(1.5)
    # 0.4 -> 0, -3 -> 0 (clipped), 1.49 -> 1, 300 -> 255: shares 1/2, 1/4, 1/4 again
    assert metrics.entropy(np.array([[0.4, -3.0], [1.49, 300.0]])) == pytest.approx(1.5)
    assert metrics.entropy(np.full((3, 3), 7.0)) == 0.0


def test_standard_deviation_is_the_population_one() -> None:
    # mean 4, squared deviations 9, 1, 1, 9 -> variance 5
    assert metrics.standard_deviation(np.array([[1.0, 3.0], [5.0, 7.0]])) == pytest.approx(math.sqrt(5.0))


def test_spatial_frequency_by_hand() -> None:
    image = np.array([[1.0, 2.0, 4.0], [2.0, 2.0, 2.0]])
    # row differences 1, 2, 0, 0 -> mean square 5/4; column differences 1, 0, -2 -> 5/3
    assert metrics.spatial_frequency(image) == pytest.approx(math.sqrt(5 / 4 + 5 / 3))


def test_average_gradient_uses_central_differences_and_one_sided_borders() -> None:
    image = np.array([[1.0, 2.0, 4.0], [2.0, 2.0, 2.0]])
    gx = np.array([[1.0, 1.5, 2.0], [0.0, 0.0, 0.0]])  # (4 - 1) / 2 inside, one-sided at the ends
    gy = np.array([[1.0, 0.0, -2.0], [1.0, 0.0, -2.0]])  # two rows: one-sided both
    expected = np.mean(np.sqrt((gx**2 + gy**2) / 2))
    assert expected == pytest.approx((1 + math.sqrt(1.125) + 2 + math.sqrt(0.5) + 0 + math.sqrt(2)) / 6)
    assert metrics.average_gradient(image) == pytest.approx(expected)


def test_mutual_information_in_nats_by_hand() -> None:
    x = np.array([[0.0, 0.0], [1.0, 1.0]])
    y = np.array([[0.0, 0.0], [0.0, 1.0]])
    # joint (0,0): 1/2, (1,0): 1/4, (1,1): 1/4; marginals x: 1/2, 1/2; y: 3/4, 1/4
    expected = (
        0.5 * math.log(0.5 / (0.5 * 0.75))
        + 0.25 * math.log(0.25 / (0.5 * 0.75))
        + 0.25 * math.log(0.25 / (0.5 * 0.25))
    )
    assert metrics.mutual_information(x, y) == pytest.approx(expected)
    assert metrics.mutual_information(y, x) == pytest.approx(expected)
    # identical arrays: MI = H = 1.5 ln 2 nats for shares 1/2, 1/4, 1/4
    z = np.array([[0.0, 0.0], [1.0, 2.0]])
    assert metrics.mutual_information(z, z) == pytest.approx(1.5 * math.log(2))
    # each distinct value is a label: relabelling changes nothing; independence gives 0
    assert metrics.mutual_information(z * 10 + 3.5, z) == pytest.approx(1.5 * math.log(2))
    assert (
        metrics.mutual_information(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 1.0], [0.0, 1.0]]))
        == 0.0
    )


def test_scd_by_hand() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[4.0, 1.0], [3.0, 2.0]])
    # F = A + B: F - B = A and F - A = B, each perfectly correlated with itself
    assert metrics.sum_of_correlation_differences(a + b, a, b) == pytest.approx(2.0)
    f = np.array([[2.0, 2.0], [5.0, 3.0]])
    # corr(A, F - B) with F - B = (-2, 1, 2, 1): deviations A (-1.5, -.5, .5, 1.5), d (-2.5, .5, 1.5, .5)
    first = (3.75 - 0.25 + 0.75 + 0.75) / math.sqrt(5.0 * 9.0)
    # corr(B, F - A) with F - A = (1, 0, 2, -1): deviations B (1.5, -1.5, .5, -.5), e (.5, -.5, 1.5, -1.5)
    second = (0.75 + 0.75 + 0.75 + 0.75) / math.sqrt(5.0 * 5.0)
    assert metrics.sum_of_correlation_differences(f, a, b) == pytest.approx(first + second)
    # a constant difference has no correlation: F = A = B gives 0
    assert metrics.sum_of_correlation_differences(a, a, a) == 0.0


def test_vif_scale_terms_on_one_window_by_hand() -> None:
    reference = np.array([[0.0, 10.0, 20.0], [30.0, 40.0, 50.0], [60.0, 70.0, 80.0]])
    distorted = np.array([[5.0, 5.0, 30.0], [20.0, 50.0, 40.0], [70.0, 60.0, 90.0]])
    window = np.full((3, 3), 1 / 9)
    mean_r, mean_d = reference.mean(), distorted.mean()
    var_r = (reference**2).mean() - mean_r**2
    var_d = (distorted**2).mean() - mean_d**2
    cov = (reference * distorted).mean() - mean_r * mean_d
    gain = cov / (var_r + 1e-10)
    noise = var_d - gain * cov
    kept, present = metrics.vif_scale_terms(reference, distorted, window)
    assert kept == pytest.approx(math.log(1 + gain**2 * var_r / (noise + 2.0)))
    assert present == pytest.approx(math.log(1 + var_r / 2.0))
    # a contrast stretch keeps everything and more: g = 2, no noise (floored at 1e-10)
    kept, present = metrics.vif_scale_terms(reference, 2 * reference + 1, window)
    assert kept == pytest.approx(math.log(1 + 4 * var_r / (1e-10 + 2.0)))
    # a flat reference holds nothing; a negative gain keeps nothing
    assert metrics.vif_scale_terms(np.full((3, 3), 5.0), distorted, window) == (0.0, 0.0)
    kept, present = metrics.vif_scale_terms(reference, -reference, window)
    assert kept == 0.0 and present > 0


def test_vif_windows_and_anchors() -> None:
    window = metrics._gaussian_window(17, 17 / 5)
    assert window.sum() == pytest.approx(1.0) and np.allclose(window, window.T)
    assert window[8, 8] == window.max() and window[8, 0] / window[8, 8] == pytest.approx(
        math.exp(-64 / (2 * 3.4**2))
    )
    image = _texture()
    assert metrics.vif_p(image, image) == pytest.approx(1.0, abs=1e-6)
    assert metrics.visual_information_fidelity(image, image, image) == pytest.approx(2.0, abs=1e-6)
    assert metrics.vif_p(image, 1.5 * image) > 1.0  # contrast enhancement counts as gain
    blurred = (image + np.roll(image, 1, 0) + np.roll(image, 1, 1) + np.roll(image, 1, (0, 1))) / 4
    assert 0 < metrics.vif_p(image, blurred) < 1
    assert math.isnan(metrics.vif_p(np.full((64, 64), 9.0), image))
    with pytest.raises(FusionError, match="at least 41x41"):
        metrics.vif_p(image[:40, :40], image[:40, :40])


def test_sobel_edges_of_a_ramp_by_hand() -> None:
    ramp = np.tile(np.array([0.0, 1.0, 2.0, 3.0, 4.0]), (5, 1))
    strength, angle = metrics.sobel_edges(ramp)
    # inside: (right - left) column differences 2, weighted 1 + 2 + 1 = 4 -> 8; no vertical change
    assert strength[2, 2] == pytest.approx(8.0) and angle[2, 2] == pytest.approx(0.0)
    # a horizontal edge: sx = 0, so the orientation is pi / 2
    step = np.zeros((5, 5))
    step[3:] = 1.0
    strength, angle = metrics.sobel_edges(step)
    assert strength[2, 2] == pytest.approx(4.0) and angle[2, 2] == pytest.approx(math.pi / 2)


def test_edge_preservation_by_hand() -> None:
    t_g, k_g, d_g = metrics.QABF_GRADIENT
    t_a, k_a, d_a = metrics.QABF_ANGLE
    same = t_g / (1 + math.exp(k_g * (1 - d_g))) * t_a / (1 + math.exp(k_a * (1 - d_a)))
    q = metrics.edge_preservation(
        np.array([2.0, 2.0, 0.0]), np.zeros(3), np.array([2.0, 1.0, 0.0]), np.array([0.0, math.pi / 4, 0.0])
    )
    assert q[0] == pytest.approx(same)
    # G = 1/2 -> Q_g = T_g / 2; A = 1 - (pi/4) / (pi/2) = 1/2
    assert q[1] == pytest.approx(t_g / 2 * t_a / (1 + math.exp(k_a * (0.5 - d_a))))
    assert q[2] == pytest.approx(same)  # our choice: g_S = g_F = 0 counts as kept (G = 1)


def test_qabf_anchors() -> None:
    t_g, k_g, d_g = metrics.QABF_GRADIENT
    t_a, k_a, d_a = metrics.QABF_ANGLE
    same = t_g / (1 + math.exp(k_g * (1 - d_g))) * t_a / (1 + math.exp(k_a * (1 - d_a)))
    image = _texture(32)
    flat = np.zeros_like(image)  # zero: the zero-padded border adds no edges to it
    # F = A with B flat: every edge of A is kept exactly, B has none
    assert metrics.qabf(image, image, flat) == pytest.approx(same)
    assert metrics.qabf(flat, image, flat) < 0.05  # every edge lost
    assert math.isnan(metrics.qabf(image, flat, flat))  # no edges to keep
    # the border is zero-padded (as the reference's same-size filtering): a flat nonzero
    # image has edges along it, which a fused image without them loses
    grey = np.full_like(image, 50.0)
    assert metrics.qabf(image, image, grey) < same


def test_ssim_by_hand_on_one_window() -> None:
    rng = np.random.default_rng(3)
    f = rng.uniform(0, 255, (7, 7))
    a = np.clip(f + rng.normal(0, 30, (7, 7)), 0, 255)
    b = 255 - f
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def one_window(x: np.ndarray, y: np.ndarray) -> float:
        # on a 7x7 image only the centre pixel is kept: its window is the whole image, with
        # sample (N - 1) variances
        mx, my = x.mean(), y.mean()
        vx, vy = x.var(ddof=1), y.var(ddof=1)
        cov = ((x - mx) * (y - my)).sum() / 48
        return ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))

    assert metrics.structural_similarity(f, a, b) == pytest.approx(one_window(f, a) + one_window(f, b))


def test_the_anchors_of_identical_images() -> None:
    image = _texture()
    values = metrics.fusion_metrics(image, image, image)
    assert list(values) == list(metrics.METRICS)
    levels, counts = np.unique(image, return_counts=True)
    share = counts / image.size
    entropy_nats = float(-(share * np.log(share)).sum())
    assert values["MI"] == pytest.approx(2 * entropy_nats)
    assert values["SSIM"] == pytest.approx(2.0)
    assert values["SCD"] == 0.0
    assert values["VIF"] == pytest.approx(2.0, abs=1e-6)
    assert values["EN"] == pytest.approx(entropy_nats / math.log(2))
    assert values["SD"] == pytest.approx(float(np.std(image)))


def test_bad_inputs_are_named() -> None:
    image = _texture(48)
    with pytest.raises(FusionError, match="differ in size: 48x48 vs 48x47"):
        metrics.fusion_metrics(image, image, image[:, :47])
    with pytest.raises(FusionError, match="2-D grayscale image, got an array of shape"):
        metrics.fusion_metrics(np.stack([image] * 3, axis=-1), image, image)
    with pytest.raises(FusionError, match="not finite"):
        metrics.entropy(np.array([[1.0, np.nan]]))
    with pytest.raises(FusionError, match="unknown fusion metric"):
        metrics.fusion_metrics(image, image, image, ("EN", "PSNR"))
    with pytest.raises(FusionError, match="at least 2x2"):
        metrics.spatial_frequency(np.ones((1, 5)))
    with pytest.raises(FusionError, match="must hold numbers"):
        metrics.entropy(np.array([["a", "b"]]))
