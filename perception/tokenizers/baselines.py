"""Codecs without learning, to say what a tokenizer's PSNR is worth.

- **Mean image** (0 bits per image): every image is replaced by the mean of the training images.
- **Downsample** at a budget of bits per image: each image is averaged down to ``rows x cols``
  pixels (box filter), each channel is quantised uniformly to ``b`` bits, and the result is
  scaled back up (bicubic). It spends ``rows * cols * 3 * b`` bits per image; among the sizes
  with the image's aspect ratio and ``b`` in 1..8 that fit the budget, :func:`best_downsample`
  picks the one with the best PSNR on the images it is given (the training images, so the
  choice is not fitted to the held-out ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodia.perception.tokenizers.lfq import TokenizerError
from embodia.perception.tokenizers.metrics import dataset_psnr


def mean_image(images: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """The pixel-wise mean of ``images`` (N, H, W, 3), rounded to uint8."""
    result: NDArray[np.uint8] = np.asarray(images, dtype=np.float64).mean(axis=0).round().astype(np.uint8)
    return result


@dataclass(frozen=True)
class Downsample:
    """One setting of the downsample codec."""

    rows: int
    cols: int
    bits_per_channel: int

    @property
    def bits_per_image(self) -> int:
        return self.rows * self.cols * 3 * self.bits_per_channel

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.uint8]:
        """``images`` (N, H, W, 3) sent through the codec."""
        from PIL import Image

        if not 1 <= self.bits_per_channel <= 8:
            raise TokenizerError(f"bits_per_channel must be in 1..8, got {self.bits_per_channel}")
        levels = 2**self.bits_per_channel - 1
        out = []
        for image in np.asarray(images, dtype=np.uint8):
            height, width = image.shape[:2]
            small = np.asarray(Image.fromarray(image).resize((self.cols, self.rows), Image.Resampling.BOX))
            quantised = np.round(np.round(small / 255.0 * levels) / levels * 255.0).astype(np.uint8)
            large = Image.fromarray(quantised).resize((width, height), Image.Resampling.BICUBIC)
            out.append(np.asarray(large))
        return np.stack(out)


def best_downsample(images: NDArray[np.uint8], bits_per_image: int) -> Downsample:
    """The :class:`Downsample` setting within ``bits_per_image`` with the best PSNR on ``images``."""
    height, width = np.asarray(images).shape[1:3]
    candidates = [
        Downsample(rows, max(1, round(rows * width / height)), bits)
        for bits in range(1, 9)
        for rows in range(1, height + 1)
    ]
    fitting = [c for c in candidates if c.bits_per_image <= bits_per_image and c.cols <= width]
    if not fitting:
        raise TokenizerError(f"no downsample setting fits {bits_per_image} bits per image")
    # The largest size for each bit depth is the only one worth trying: fewer pixels lose more.
    largest = {c.bits_per_channel: c for c in sorted(fitting, key=lambda c: c.rows)}
    return max(largest.values(), key=lambda c: dataset_psnr(images, c(images)))
