"""The standard image-fusion metrics, as the widely used CDDFuse evaluator defines them.

Every metric takes 0-255 grayscale float arrays: ``fused`` (F) and the two sources ``a`` (A)
and ``b`` (B). Higher is better for all nine. The conventions (pinned by the tests, and in
``docs/fusion.md``):

- **EN** ``-sum h log2 h`` over the 256-level histogram of ``round(F)`` (clipped to 0..255,
  one bin per integer level, empty bins skipped).
- **SD** the population standard deviation of F.
- **SF** ``sqrt(mean(dx^2) + mean(dy^2))`` with ``dx``, ``dy`` the differences of horizontal and
  vertical neighbours.
- **AG** ``mean sqrt((Gx^2 + Gy^2) / 2)``; ``Gx``, ``Gy`` central differences inside,
  one-sided at the border.
- **MI** ``MI(F, A) + MI(F, B)`` in nats over the joint histogram of pixel values, each distinct
  value its own label (what ``sklearn.metrics.mutual_info_score`` computes on the flattened
  arrays). Measure a fused image as it is saved (``uint8``): a float image whose every pixel
  is a distinct value has ``MI(F, A) = H(A)``.
- **SCD** ``corr(A, F - B) + corr(B, F - A)`` (Pearson); a correlation with a constant array is 0.
- **VIF** ``VIFp(A -> F) + VIFp(B -> F)``: Sheikh and Bovik's pixel-domain visual information
  fidelity over 4 scales (:func:`vif_p`).
- **Qabf** Xydeas and Petrovic's edge-preservation measure (:func:`qabf`); Sobel filtering
  with a zero-padded border, as the reference's same-size filtering does (so the border of a
  nonzero image is an edge).
- **SSIM** ``ssim(F, A) + ssim(F, B)`` by ``skimage.metrics.structural_similarity`` with
  ``data_range=255`` (its defaults: a 7x7 uniform window, sample covariances).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from embodia.perception.fusion.errors import FusionError, as_gray, gray_pair

METRICS: tuple[str, ...] = ("EN", "SD", "SF", "MI", "SCD", "VIF", "Qabf", "SSIM", "AG")
"""The metrics :func:`fusion_metrics` reports, in the order fusion papers print them."""

VIF_NOISE_VARIANCE = 2.0
"""sigma_n^2 of VIF's visual-noise model (0-255 intensities)."""
VIF_SCALES = 4
VIF_TINY = 1e-10
"""Variances below this count as zero in VIF."""

QABF_GRADIENT = (0.9994, -15.0, 0.5)
"""Qabf's sigmoid (T_g, k_g, D_g) for the edge-strength agreement."""
QABF_ANGLE = (0.9879, -22.0, 0.8)
"""Qabf's sigmoid (T_a, k_a, D_a) for the edge-orientation agreement."""

SOBEL_X = np.array([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
SOBEL_Y = SOBEL_X.T.copy()


# --------------------------------------------------------------------------- one image


def entropy(fused: Any) -> float:
    """EN: the Shannon entropy in bits of the 256-level histogram of ``round(fused)``."""
    levels = np.clip(np.rint(as_gray(fused, "the fused image")), 0, 255).astype(np.int64)
    counts = np.bincount(levels.ravel(), minlength=256)
    share = counts[counts > 0] / levels.size
    return float(-(share * np.log2(share)).sum())


def standard_deviation(fused: Any) -> float:
    """SD: the population standard deviation of the pixel values."""
    return float(np.std(as_gray(fused, "the fused image")))


def spatial_frequency(fused: Any) -> float:
    """SF: ``sqrt(mean(row differences^2) + mean(column differences^2))``."""
    image = as_gray(fused, "the fused image")
    if min(image.shape) < 2:
        raise FusionError(
            f"spatial frequency needs at least 2x2 pixels, got {image.shape[0]}x{image.shape[1]}"
        )
    horizontal = np.diff(image, axis=1)
    vertical = np.diff(image, axis=0)
    return float(math.sqrt(np.mean(horizontal**2) + np.mean(vertical**2)))


def average_gradient(fused: Any) -> float:
    """AG: ``mean sqrt((Gx^2 + Gy^2) / 2)``, central differences (one-sided at the border)."""
    image = as_gray(fused, "the fused image")
    if min(image.shape) < 2:
        raise FusionError(
            f"average gradient needs at least 2x2 pixels, got {image.shape[0]}x{image.shape[1]}"
        )
    rows, cols = np.gradient(image)
    return float(np.mean(np.sqrt((cols**2 + rows**2) / 2.0)))


# --------------------------------------------------------------------------- information


def mutual_information(x: Any, y: Any) -> float:
    """The mutual information in nats of two equally sized arrays, each distinct value a label:
    ``sum_ij p_ij log(p_ij / (p_i p_j))`` over their joint histogram."""
    first, second = gray_pair(x, y, ("X", "Y"))
    _, labels_x = np.unique(first.ravel(), return_inverse=True)
    _, labels_y = np.unique(second.ravel(), return_inverse=True)
    count_x = np.bincount(labels_x)
    count_y = np.bincount(labels_y)
    pairs, joint = np.unique(labels_x * count_y.size + labels_y, return_counts=True)
    total = float(labels_x.size)
    row, col = pairs // count_y.size, pairs % count_y.size
    share = joint / total
    return float(np.sum(share * np.log(joint * total / (count_x[row] * count_y[col]))))


def correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's correlation of two equally sized arrays; 0 when either is constant."""
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(np.sum(dx * dx)) * float(np.sum(dy * dy)))
    return float(np.sum(dx * dy) / denominator) if denominator > 0 else 0.0


def sum_of_correlation_differences(fused: Any, a: Any, b: Any) -> float:
    """SCD: ``corr(A, F - B) + corr(B, F - A)``."""
    f, a, b = _triple(fused, a, b)
    return correlation(a, f - b) + correlation(b, f - a)


# --------------------------------------------------------------------------- VIF


def _gaussian_window(size: int, sigma: float) -> np.ndarray:
    offsets = np.arange(size) - (size - 1) / 2.0
    line = np.exp(-(offsets**2) / (2.0 * sigma**2))
    window = np.outer(line, line)
    return window / window.sum()


def _filter_valid(image: np.ndarray, window: np.ndarray) -> np.ndarray:
    """The window's weighted mean at every position where it fits wholly inside ``image``."""
    from scipy.signal import fftconvolve

    return np.asarray(fftconvolve(image, window[::-1, ::-1], mode="valid"))


def vif_scale_terms(reference: np.ndarray, distorted: np.ndarray, window: np.ndarray) -> tuple[float, float]:
    """One scale of pixel-domain VIF: ``(information kept, information in the reference)``.

    With local (window-weighted) means, variances ``s1``, ``s2`` and covariance ``s12`` of
    reference and distorted image, the distortion is modelled as a gain ``g = s12 / s1`` plus
    noise of variance ``sv = s2 - g s12``; the terms are ``sum log(1 + g^2 s1 / (sv + sn))`` and
    ``sum log(1 + s1 / sn)`` (natural logs; VIF is their ratio, so the base does not matter).
    Where the reference is flat (``s1`` ~ 0) nothing is kept (``g = 0``, ``sv = s2``); where the
    distorted image is flat, ``g = 0`` and ``sv = 0``; a negative gain keeps nothing (``g = 0``,
    ``sv = s2``); ``sv`` is floored at 1e-10."""
    mean_r = _filter_valid(reference, window)
    mean_d = _filter_valid(distorted, window)
    var_r = np.maximum(_filter_valid(reference * reference, window) - mean_r**2, 0.0)
    var_d = np.maximum(_filter_valid(distorted * distorted, window) - mean_d**2, 0.0)
    covariance = _filter_valid(reference * distorted, window) - mean_r * mean_d
    gain = covariance / (var_r + VIF_TINY)
    noise = var_d - gain * covariance
    flat_reference = var_r < VIF_TINY
    gain[flat_reference] = 0.0
    noise[flat_reference] = var_d[flat_reference]
    var_r[flat_reference] = 0.0
    flat_distorted = var_d < VIF_TINY
    gain[flat_distorted] = 0.0
    noise[flat_distorted] = 0.0
    negative = gain < 0
    noise[negative] = var_d[negative]
    gain[negative] = 0.0
    noise = np.maximum(noise, VIF_TINY)
    kept = np.sum(np.log1p(gain**2 * var_r / (noise + VIF_NOISE_VARIANCE)))
    present = np.sum(np.log1p(var_r / VIF_NOISE_VARIANCE))
    return float(kept), float(present)


VIF_MIN_SIDE = 41
"""The smallest side on which all four VIF scales have a window's worth of pixels."""


def vif_p(reference: Any, distorted: Any) -> float:
    """Pixel-domain VIF of ``distorted`` against ``reference`` over 4 scales: at scale
    ``s = 1..4`` a Gaussian window of ``N = 2^(5-s) + 1`` pixels and ``sigma = N / 5``; from the
    second scale on, both images are first filtered with that window and halved (every second
    pixel). VIFp is the sum over scales of :func:`vif_scale_terms`' kept information over the
    sum of the reference's information (NaN for a flat reference, which holds none)."""
    ref, dist = gray_pair(reference, distorted, ("reference", "distorted"))
    if min(ref.shape) < VIF_MIN_SIDE:
        raise FusionError(
            f"VIF needs images of at least {VIF_MIN_SIDE}x{VIF_MIN_SIDE} pixels, got {ref.shape}"
        )
    kept = present = 0.0
    for scale in range(1, VIF_SCALES + 1):
        size = 2 ** (5 - scale) + 1
        window = _gaussian_window(size, size / 5.0)
        if scale > 1:
            ref = _filter_valid(ref, window)[::2, ::2]
            dist = _filter_valid(dist, window)[::2, ::2]
        scale_kept, scale_present = vif_scale_terms(ref, dist, window)
        kept += scale_kept
        present += scale_present
    return kept / present if present > 0 else math.nan


def visual_information_fidelity(fused: Any, a: Any, b: Any) -> float:
    """VIF: ``VIFp(A -> F) + VIFp(B -> F)``."""
    f, a, b = _triple(fused, a, b)
    return vif_p(a, f) + vif_p(b, f)


# --------------------------------------------------------------------------- Qabf


def sobel_edges(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sobel edge strength ``g = sqrt(sx^2 + sy^2)`` and orientation ``alpha = arctan(sy / sx)``
    (``pi / 2`` where ``sx = 0``), the image zero-padded at its border."""
    from scipy.ndimage import correlate

    sx = correlate(image, SOBEL_X, mode="constant", cval=0.0)
    sy = correlate(image, SOBEL_Y, mode="constant", cval=0.0)
    strength = np.hypot(sx, sy)
    vertical = sx == 0
    orientation = np.where(vertical, math.pi / 2, np.arctan(sy / np.where(vertical, 1.0, sx)))
    return strength, orientation


def edge_preservation(
    strength_source: np.ndarray,
    angle_source: np.ndarray,
    strength_fused: np.ndarray,
    angle_fused: np.ndarray,
) -> np.ndarray:
    """Qabf's per-pixel ``Q^{SF} = Q_g Q_a`` of a source S in the fused image F:
    ``G = min(g_S, g_F) / max(g_S, g_F)`` (1 where ``g_S = g_F``, so also where both are 0),
    ``A = 1 - |alpha_S - alpha_F| / (pi / 2)``, ``Q_g = T_g / (1 + exp(k_g (G - D_g)))``,
    ``Q_a = T_a / (1 + exp(k_a (A - D_a)))``."""
    low = np.minimum(strength_source, strength_fused)
    high = np.maximum(strength_source, strength_fused)
    equal = high == low
    strength_kept = np.where(equal, 1.0, low / np.where(equal, 1.0, high))
    angle_kept = 1.0 - np.abs(angle_source - angle_fused) / (math.pi / 2)
    t_g, k_g, d_g = QABF_GRADIENT
    t_a, k_a, d_a = QABF_ANGLE
    q_g = t_g / (1.0 + np.exp(k_g * (strength_kept - d_g)))
    q_a = t_a / (1.0 + np.exp(k_a * (angle_kept - d_a)))
    return np.asarray(q_g * q_a)


def qabf(fused: Any, a: Any, b: Any) -> float:
    """Qabf: ``sum(Q^{AF} g_A + Q^{BF} g_B) / sum(g_A + g_B)``, the share of the sources' edge
    strength the fused image keeps (:func:`edge_preservation`); NaN when both sources are flat."""
    f, a, b = _triple(fused, a, b)
    g_f, angle_f = sobel_edges(f)
    g_a, angle_a = sobel_edges(a)
    g_b, angle_b = sobel_edges(b)
    weight = float(np.sum(g_a + g_b))
    if weight == 0:
        return math.nan
    kept = (
        edge_preservation(g_a, angle_a, g_f, angle_f) * g_a
        + edge_preservation(g_b, angle_b, g_f, angle_f) * g_b
    )
    return float(np.sum(kept) / weight)


# --------------------------------------------------------------------------- SSIM


def structural_similarity(fused: Any, a: Any, b: Any) -> float:
    """SSIM: ``ssim(F, A) + ssim(F, B)`` by scikit-image with ``data_range=255``."""
    from skimage.metrics import structural_similarity as ssim

    f, a, b = _triple(fused, a, b)
    if min(f.shape) < 7:
        raise FusionError(f"SSIM needs images of at least 7x7 pixels, got {f.shape[0]}x{f.shape[1]}")
    return float(ssim(f, a, data_range=255.0)) + float(ssim(f, b, data_range=255.0))


# --------------------------------------------------------------------------- all of them


def _triple(fused: Any, a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f, first = gray_pair(fused, a, ("F", "A"))
    _, second = gray_pair(fused, b, ("F", "B"))
    return f, first, second


def _mi(fused: Any, a: Any, b: Any) -> float:
    return mutual_information(fused, a) + mutual_information(fused, b)


METRIC_FUNCTIONS: dict[str, Callable[[Any, Any, Any], float]] = {
    "EN": lambda f, a, b: entropy(f),
    "SD": lambda f, a, b: standard_deviation(f),
    "SF": lambda f, a, b: spatial_frequency(f),
    "MI": _mi,
    "SCD": sum_of_correlation_differences,
    "VIF": visual_information_fidelity,
    "Qabf": qabf,
    "SSIM": structural_similarity,
    "AG": lambda f, a, b: average_gradient(f),
}


def fusion_metrics(fused: Any, a: Any, b: Any, metrics: tuple[str, ...] = METRICS) -> dict[str, float]:
    """The named metrics (all nine by default) of ``fused`` against the sources ``a`` and ``b``,
    all 0-255 grayscale arrays of one size."""
    unknown = [name for name in metrics if name not in METRIC_FUNCTIONS]
    if unknown:
        raise FusionError(
            f"unknown fusion metric(s) {', '.join(unknown)}: expected some of {', '.join(METRICS)}"
        )
    f, first, second = _triple(fused, a, b)
    return {name: METRIC_FUNCTIONS[name](f, first, second) for name in metrics}
