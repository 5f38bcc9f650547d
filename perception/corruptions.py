"""Image corruptions at five severities: Gaussian noise, Gaussian and defocus blur, JPEG
compression, fog and low light, as a camera or a video link degrades what an agent sees.

:func:`corrupt` takes an RGB (``H x W x 3``) or grey (``H x W``) ``uint8`` image and returns
one of the same shape and dtype. Severity 0 is the image unchanged; 1 to 5 degrade it more and
more (the image's PSNR to the clean one falls with severity). Every random draw comes from
``seed``, so a corruption is reproducible. The kinds, with ``x`` the image scaled to [0, 1]
and ``s`` the severity's parameter from :data:`SEVERITIES`:

- ``gaussian_noise``: ``x + N(0, s²)`` per pixel and channel.
- ``gaussian_blur``: convolution with a Gaussian of standard deviation ``s * min(H, W)``
  (relative to the image's size, so a render and its half-size copy blur alike).
- ``defocus_blur``: convolution with an anti-aliased disk of radius ``s * min(H, W)``.
- ``jpeg``: PIL's JPEG encoder at quality ``s`` (the image decoded back).
- ``fog``: a smooth random field ``F`` in [0, 1] (three octaves of bicubically upsampled
  uniform noise) blended in: ``x (1 - s F) + s F * FOG_BRIGHTNESS``.
- ``low_light``: ``LOW_LIGHT_SCALE[k] * x ** LOW_LIGHT_GAMMA[k] + N(0, s²)`` (a darker,
  contrast-crushed exposure with sensor noise).

Results are rounded and clipped to 0..255. The parameters are ours, chosen so that severity 5
is heavy but the scene stays recognisable on images of 32 to a few hundred pixels a side.
"""

from __future__ import annotations

import io
import math

import numpy as np

from embodia.errors import EmbodiaError

SEVERITIES: dict[str, tuple[float, ...]] = {
    "gaussian_noise": (0.04, 0.08, 0.12, 0.18, 0.26),
    "gaussian_blur": (0.02, 0.03, 0.045, 0.06, 0.08),
    "defocus_blur": (0.03, 0.045, 0.06, 0.08, 0.1),
    "jpeg": (30, 18, 12, 8, 5),
    "fog": (0.25, 0.4, 0.55, 0.7, 0.85),
    "low_light": (0.01, 0.015, 0.02, 0.025, 0.03),
}
"""Per kind, the parameter of severities 1 to 5 (module docstring)."""
CORRUPTIONS: tuple[str, ...] = tuple(SEVERITIES)
"""The kinds :func:`corrupt` knows."""
MAX_SEVERITY = 5
FOG_BRIGHTNESS = 0.85
"""The grey level (in [0, 1]) fog blends towards."""
LOW_LIGHT_SCALE: tuple[float, ...] = (0.7, 0.55, 0.4, 0.3, 0.2)
LOW_LIGHT_GAMMA: tuple[float, ...] = (1.2, 1.4, 1.6, 1.8, 2.0)
FOG_OCTAVES: tuple[int, ...] = (2, 4, 8)
"""Cells across the image of each octave of the fog's field; finer octaves weigh less."""


class CorruptionError(EmbodiaError, ValueError):
    """A corruption that cannot be applied (unknown kind, bad severity or image); the message
    names the problem."""


def corrupt(image: np.ndarray, kind: str, severity: int, *, seed: int = 0) -> np.ndarray:
    """``image`` (``uint8``, ``H x W`` or ``H x W x 3``) corrupted by ``kind`` at ``severity``
    (0: unchanged, 1 to 5: more and more degraded), its random draws from ``seed``; a new
    array of the same shape and dtype (module docstring)."""
    if kind not in SEVERITIES:
        raise CorruptionError(f"unknown corruption {kind!r}; known: {', '.join(CORRUPTIONS)}")
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer):
        raise CorruptionError(f"severity must be an integer 0..{MAX_SEVERITY}, got {severity!r}")
    if not 0 <= severity <= MAX_SEVERITY:
        raise CorruptionError(f"severity must be 0..{MAX_SEVERITY}, got {severity}")
    _check_image(image)
    if severity == 0:
        return np.array(image, copy=True)
    parameter = SEVERITIES[kind][severity - 1]
    if kind == "jpeg":
        return _jpeg(image, int(parameter))
    rng = np.random.default_rng(seed)
    x = image.astype(np.float64) / 255.0
    planar = x[..., None] if x.ndim == 2 else x
    side = min(image.shape[0], image.shape[1])
    if kind == "gaussian_noise":
        out = planar + rng.normal(0.0, parameter, planar.shape)
    elif kind == "gaussian_blur":
        out = _convolve(planar, _gaussian_kernel(parameter * side))
    elif kind == "defocus_blur":
        out = _convolve(planar, _disk_kernel(parameter * side))
    elif kind == "fog":
        field = _smooth_field(rng, planar.shape[0], planar.shape[1])[..., None]
        out = planar * (1.0 - parameter * field) + parameter * field * FOG_BRIGHTNESS
    else:  # low_light
        scale, gamma = LOW_LIGHT_SCALE[severity - 1], LOW_LIGHT_GAMMA[severity - 1]
        out = scale * planar**gamma + rng.normal(0.0, parameter, planar.shape)
    pixels = np.clip(np.rint(out * 255.0), 0, 255).astype(np.uint8)
    return pixels[..., 0] if image.ndim == 2 else pixels


def _check_image(image: np.ndarray) -> None:
    if not isinstance(image, np.ndarray):
        raise CorruptionError(f"the image must be a numpy array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise CorruptionError(f"the image must be uint8, got {image.dtype}")
    if not (image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)):
        raise CorruptionError(f"the image must be H x W or H x W x 3, got shape {image.shape}")
    if min(image.shape[:2]) < 2:
        raise CorruptionError(f"the image must be at least 2 pixels a side, got {image.shape[:2]}")


def _gaussian_kernel(sigma: float) -> np.ndarray:
    radius = max(1, math.ceil(3 * sigma))
    offsets = np.arange(-radius, radius + 1, dtype=np.float64)
    line = np.exp(-(offsets**2) / (2 * sigma**2))
    kernel = np.outer(line, line)
    return kernel / kernel.sum()


def _disk_kernel(radius: float) -> np.ndarray:
    """A disk of ``radius`` pixels whose edge pixels weigh by how far inside the edge they lie
    (a sub-pixel radius still blurs, and the blur grows smoothly with the radius)."""
    reach = math.ceil(radius + 0.5)
    offsets = np.arange(-reach, reach + 1, dtype=np.float64)
    distance = np.hypot(offsets[:, None], offsets[None, :])
    kernel = np.clip(radius + 0.5 - distance, 0.0, 1.0)
    return kernel / kernel.sum()


def _convolve(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``image`` (``H x W x C``) convolved with a square, symmetric ``kernel``, edges mirrored;
    through the FFT so that wide kernels on large images stay fast."""
    reach = kernel.shape[0] // 2
    height, width = image.shape[:2]
    if reach >= min(height, width):  # a mirror cannot reach further than the image is wide
        reach = min(height, width) - 1
        kernel = kernel[
            kernel.shape[0] // 2 - reach : kernel.shape[0] // 2 + reach + 1,
            kernel.shape[1] // 2 - reach : kernel.shape[1] // 2 + reach + 1,
        ]
        kernel = kernel / kernel.sum()
    padded = np.pad(image, ((reach, reach), (reach, reach), (0, 0)), mode="reflect")
    shape = padded.shape[:2]
    spectrum = np.fft.rfft2(padded, axes=(0, 1)) * np.fft.rfft2(kernel, s=shape)[..., None]
    full = np.fft.irfft2(spectrum, s=shape, axes=(0, 1))
    # The FFT's product is a circular convolution shifted by the kernel's reach.
    return full[2 * reach : 2 * reach + height, 2 * reach : 2 * reach + width]


def _smooth_field(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth random field in [0, 1] of ``height x width``: octaves of uniform noise on
    coarse grids, upsampled bicubically, the octave of ``n`` cells weighing ``1 / n``."""
    from PIL import Image

    field = np.zeros((height, width), dtype=np.float64)
    for cells in FOG_OCTAVES:
        coarse = rng.random((cells + 1, cells + 1)).astype(np.float32)
        upsampled = Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC)
        field += np.asarray(upsampled, dtype=np.float64) / cells
    low, high = field.min(), field.max()
    return (field - low) / (high - low) if high > low else np.zeros_like(field)


def _jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return np.asarray(decoded.convert("L" if image.ndim == 2 else "RGB"), dtype=np.uint8).copy()
