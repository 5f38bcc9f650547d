"""How well a bitwise tokenizer reconstructs images and how it uses its codes.

- :func:`psnr`: ``10 log10(range^2 / MSE)`` in dB, per image (``inf`` for a perfect copy);
  :func:`dataset_psnr` the same from the MSE over all pixels of all images (finite unless every
  image is copied perfectly, so one flat image cannot make a mean infinite).
- :func:`ssim`: the structural similarity of scikit-image
  (``skimage.metrics.structural_similarity``, colour channels averaged, ``data_range`` given
  explicitly), per image.
- :func:`bit_balance`: ``mean_k min(p_k, 1 - p_k)`` with ``p_k`` the share of codes whose bit
  ``k`` is 1: 0.5 for evenly used bits, 0 for a bit stuck at one value.
- :func:`bit_entropy`: ``mean_k H_2(p_k)`` in bits (1 for evenly used bits).
- :func:`group_code_usage`: the K bits cut into groups of ``g``; per group, the share of its
  2^g sub-codes that occur at least once, averaged over the groups (the codebook usage that
  can still be counted when 2^K is too large to fill).
- :func:`code_perplexity`: ``exp(H(f))`` of the empirical distribution ``f`` of the codes (or
  sub-codes) that occur: the number of equally used codes that would have the same entropy.

Bits come as int arrays in {0, 1} whose last axis is the code's K bits; every other axis is a
token.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.perception.tokenizers.lfq import MAX_EXACT_BITS, MAX_INDEX_BITS, TokenizerError


def _pairs(reference: ArrayLike, test: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    a, b = np.asarray(reference, dtype=np.float64), np.asarray(test, dtype=np.float64)
    if a.shape != b.shape:
        raise TokenizerError(f"image batches differ in shape: {a.shape} vs {b.shape}")
    if a.ndim == 3:
        a, b = a[None], b[None]
    if a.ndim != 4 or a.shape[-1] != 3:
        raise TokenizerError(f"images must be RGB arrays (N, H, W, 3), got shape {a.shape}")
    return a, b


def psnr(reference: ArrayLike, test: ArrayLike, data_range: float = 255.0) -> NDArray[np.float64]:
    """Peak signal-to-noise ratio (dB) of each image of ``test`` against ``reference``
    (N, H, W, 3) or one (H, W, 3); ``data_range`` is the span of pixel values (255 for uint8)."""
    if not data_range > 0:
        raise TokenizerError(f"data_range must be positive, got {data_range}")
    a, b = _pairs(reference, test)
    mse = ((a - b) ** 2).mean(axis=(1, 2, 3))
    with np.errstate(divide="ignore"):
        result: NDArray[np.float64] = 10.0 * np.log10(data_range**2 / mse)
    return result


def dataset_psnr(reference: ArrayLike, test: ArrayLike, data_range: float = 255.0) -> float:
    """PSNR (dB) from the mean squared error over every pixel of every image."""
    if not data_range > 0:
        raise TokenizerError(f"data_range must be positive, got {data_range}")
    a, b = _pairs(reference, test)
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10.0 * math.log10(data_range**2 / mse)


def ssim(reference: ArrayLike, test: ArrayLike, data_range: float = 255.0) -> NDArray[np.float64]:
    """Structural similarity of each image (scikit-image's, over the colour channels)."""
    from skimage.metrics import structural_similarity

    if not data_range > 0:
        raise TokenizerError(f"data_range must be positive, got {data_range}")
    a, b = _pairs(reference, test)
    side = min(a.shape[1], a.shape[2])
    window = min(7, side if side % 2 else side - 1)
    if window < 3:
        raise TokenizerError(f"SSIM needs images of at least 3x3 pixels, got {a.shape[1]}x{a.shape[2]}")
    return np.array(
        [
            structural_similarity(x, y, data_range=data_range, channel_axis=-1, win_size=window)
            for x, y in zip(a, b, strict=True)
        ]
    )


def _bits(bits: ArrayLike) -> NDArray[np.int64]:
    array = np.asarray(bits)
    if array.ndim < 1 or array.shape[-1] < 1 or array.size == 0:
        raise TokenizerError(
            f"bits must have a last axis of K bits and at least one code, got shape {array.shape}"
        )
    if not np.isin(array, (0, 1)).all():
        raise TokenizerError("bits must be 0 or 1")
    flat: NDArray[np.int64] = array.reshape(-1, array.shape[-1]).astype(np.int64)
    return flat


def bit_probabilities(bits: ArrayLike) -> NDArray[np.float64]:
    """``p_k``: the share of codes whose bit ``k`` is 1."""
    result: NDArray[np.float64] = _bits(bits).mean(axis=0)
    return result


def bit_balance(bits: ArrayLike) -> float:
    """``mean_k min(p_k, 1 - p_k)``, in [0, 0.5]."""
    p = bit_probabilities(bits)
    return float(np.minimum(p, 1 - p).mean())


def bit_entropy(bits: ArrayLike) -> float:
    """``mean_k H_2(p_k)``, in bits per bit: in [0, 1]."""
    p = bit_probabilities(bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    return float(np.nan_to_num(terms, nan=0.0).mean())


def _group_indices(bits: ArrayLike, group_size: int, largest: int = MAX_EXACT_BITS) -> NDArray[np.int64]:
    """(codes, groups) sub-code indices, most significant bit first."""
    flat = _bits(bits)
    width = flat.shape[1]
    if isinstance(group_size, bool) or not isinstance(group_size, int) or not 1 <= group_size <= largest:
        raise TokenizerError(f"group_size must be an integer in 1..{largest}, got {group_size!r}")
    if width % group_size:
        raise TokenizerError(f"group_size {group_size} does not divide the {width} bits of a code")
    weights = 2 ** np.arange(group_size - 1, -1, -1, dtype=np.int64)
    result: NDArray[np.int64] = flat.reshape(len(flat), width // group_size, group_size) @ weights
    return result


def group_code_usage(bits: ArrayLike, group_size: int) -> float:
    """The mean over groups of ``group_size`` bits of the share of the group's 2^g sub-codes
    that occur."""
    indices = _group_indices(bits, group_size)
    used = [len(np.unique(indices[:, group])) for group in range(indices.shape[1])]
    return float(np.mean(used) / 2**group_size)


def code_perplexity(bits: ArrayLike, group_size: int | None = None) -> float:
    """``exp(H(f))`` of the codes that occur (``group_size``: of each group's sub-codes,
    averaged over the groups; None: of whole codes)."""
    flat = _bits(bits)
    indices = _group_indices(flat, group_size or flat.shape[1], largest=MAX_INDEX_BITS)
    values = []
    for group in range(indices.shape[1]):
        _, counts = np.unique(indices[:, group], return_counts=True)
        f = counts / counts.sum()
        values.append(math.exp(float(-(f * np.log(f)).sum())))
    return float(np.mean(values))


def code_usage_report(bits: ArrayLike, group_size: int) -> dict[str, Any]:
    """The usage measures of a batch of codes (N, ..., K) in one mapping."""
    flat = _bits(bits)
    return {
        "bits_per_code": int(flat.shape[1]),
        "codes": len(flat),
        "bit_balance": bit_balance(flat),
        "bit_entropy": bit_entropy(flat),
        "group_size": group_size,
        "group_code_usage": group_code_usage(flat, group_size),
        "group_perplexity": code_perplexity(flat, group_size),
    }
