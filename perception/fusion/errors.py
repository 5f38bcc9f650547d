"""The fusion package's error and the input checks every entry point shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from embodia.core.limits import MAX_IMAGE_SIDE
from embodia.errors import EmbodiaError


class FusionError(EmbodiaError, ValueError):
    """Fusion input or settings that cannot be used; the message names the problem."""


def as_gray(image: Any, what: str) -> np.ndarray:
    """``image`` as a 2-D float64 array; a :class:`FusionError` naming ``what`` unless it is a
    2-D numeric array of finite values with both sides in ``1..MAX_IMAGE_SIDE``."""
    array = np.asarray(image)
    if array.ndim != 2:
        raise FusionError(f"{what} must be a 2-D grayscale image, got an array of shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise FusionError(f"{what} must hold numbers, got dtype {array.dtype}")
    height, width = array.shape
    if not (0 < height <= MAX_IMAGE_SIDE and 0 < width <= MAX_IMAGE_SIDE):
        raise FusionError(f"{what} must be 1..{MAX_IMAGE_SIDE} pixels a side, got {height}x{width}")
    values = array.astype(np.float64)
    if not np.isfinite(values).all():
        raise FusionError(f"{what} holds values that are not finite (NaN or infinity)")
    return values


def gray_pair(a: Any, b: Any, names: tuple[str, str] = ("A", "B")) -> tuple[np.ndarray, np.ndarray]:
    """Two images checked by :func:`as_gray` and of the same size (else a :class:`FusionError`)."""
    first, second = as_gray(a, f"image {names[0]}"), as_gray(b, f"image {names[1]}")
    if first.shape != second.shape:
        raise FusionError(
            f"images {names[0]} and {names[1]} differ in size: "
            f"{first.shape[0]}x{first.shape[1]} vs {second.shape[0]}x{second.shape[1]}"
        )
    return first, second
