"""Fusion baselines without learning: the average, the per-pixel max-abs choice and a
Laplacian-pyramid fusion (base level averaged, detail levels chosen by max-abs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from embodia.perception.fusion.errors import FusionError, gray_pair

BINOMIAL_TAPS = np.array([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
"""The 5-tap binomial low-pass filter of the Gaussian pyramid (Burt and Adelson)."""


def average_fusion(a: Any, b: Any) -> np.ndarray:
    """``(A + B) / 2`` per pixel."""
    first, second = gray_pair(a, b)
    return (first + second) / 2.0


def max_abs_choice(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element the value of larger magnitude (``a`` where they tie)."""
    return np.where(np.abs(a) >= np.abs(b), a, b)


def max_abs_fusion(a: Any, b: Any) -> np.ndarray:
    """Per pixel the source value of larger magnitude (for nonnegative intensities: the
    brighter source)."""
    first, second = gray_pair(a, b)
    return max_abs_choice(first, second)


def _blur(image: np.ndarray) -> np.ndarray:
    from scipy.ndimage import correlate1d

    rows = correlate1d(image, BINOMIAL_TAPS, axis=0, mode="reflect")
    return np.asarray(correlate1d(rows, BINOMIAL_TAPS, axis=1, mode="reflect"))


def _reduce(image: np.ndarray) -> np.ndarray:
    return _blur(image)[::2, ::2]


def _expand(image: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``image`` upsampled to ``shape``: its pixels placed on every second row and column,
    zeros between, low-pass filtered and divided by the filtered placement mask (4 inside; at
    the border the share of the filter that falls on placed pixels), so a constant stays
    that constant up to the edges."""
    spread = np.zeros(shape)
    spread[::2, ::2] = image
    placed = np.zeros(shape)
    placed[::2, ::2] = 1.0
    return _blur(spread) / _blur(placed)


def laplacian_pyramid(image: np.ndarray, levels: int) -> list[np.ndarray]:
    """``levels`` detail images (finest first), each a Gaussian level minus the expansion of the
    next, followed by the coarsest Gaussian level (the base)."""
    pyramid = []
    current = image
    for _ in range(levels):
        coarser = _reduce(current)
        pyramid.append(current - _expand(coarser, current.shape))
        current = coarser
    pyramid.append(current)
    return pyramid


def reconstruct_laplacian(pyramid: list[np.ndarray]) -> np.ndarray:
    """The image a :func:`laplacian_pyramid` came from (exactly, up to rounding)."""
    image = pyramid[-1]
    for detail in reversed(pyramid[:-1]):
        image = detail + _expand(image, detail.shape)
    return image


def pyramid_levels(shape: tuple[int, int], levels: int) -> int:
    """The levels actually used: at most ``levels``, fewer where the coarsest level would be
    smaller than 4 pixels a side."""
    usable = 0
    height, width = shape
    while usable < levels and min(height, width) >= 8:
        height, width = (height + 1) // 2, (width + 1) // 2
        usable += 1
    return usable


def laplacian_fusion(a: Any, b: Any, levels: int = 4) -> np.ndarray:
    """Laplacian-pyramid fusion: both sources decomposed into ``levels`` detail levels and a
    base; the bases averaged, each detail coefficient chosen by max-abs; the result rebuilt."""
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
        raise FusionError(f"levels must be a whole number >= 1, got {levels!r}")
    first, second = gray_pair(a, b)
    usable = pyramid_levels(first.shape, levels)
    pyramid_a = laplacian_pyramid(first, usable)
    pyramid_b = laplacian_pyramid(second, usable)
    fused = [max_abs_choice(x, y) for x, y in zip(pyramid_a[:-1], pyramid_b[:-1], strict=True)]
    fused.append((pyramid_a[-1] + pyramid_b[-1]) / 2.0)
    return reconstruct_laplacian(fused)


BASELINES: dict[str, Callable[[Any, Any], np.ndarray]] = {
    "average": average_fusion,
    "max_abs": max_abs_fusion,
    "laplacian": laplacian_fusion,
}
"""The baselines by the name the reports use."""
