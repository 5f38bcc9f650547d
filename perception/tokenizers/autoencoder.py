"""A small convolutional encoder-decoder whose latent is quantised to bits (LFQ or BSQ,
:mod:`~embodia.perception.tokenizers.lfq`): a bitwise visual tokenizer that trains on a CPU in
minutes.

**Encoder.** One stage per entry of ``channels``, each halving the image: the first moves
2x2 pixel blocks into channels and applies a 3x3 convolution, each later one is a 4x4
convolution of stride 2 and a residual block. An image of ``H x W`` pixels ends on a grid of
``H / stride x W / stride`` positions, ``stride = 2^len(channels)``; other sizes are refused.

**Multi-level codes.** Each grid position carries ``levels`` (M) codes of K bits. Level 0 is
read from the deepest stage; level ``m`` from the stage ``m`` steps shallower, average-pooled
to the grid (its 2^m x 2^m cells): shallow features keep the fine detail and colour that the
deep ones smooth away, and the decoder fuses all levels. Bits per position: ``M * K``; the
codes of one image are an int64 tensor of shape ``(M, h, w, K)`` in {0, 1}.

**Decoder.** The M dequantised codes of a position are stacked (``M * K`` channels), then a
3x3 convolution and a residual block; per later stage (deepest first) a nearest-neighbour 2x
upsampling, a 3x3 convolution and a residual block; and a 3x3 convolution to 2x2 blocks of RGB
pixels that are spread back out (the first stage mirrored).

Images are float tensors (N, 3, H, W) in [0, 1] (:func:`images_to_tensor` turns uint8 arrays
into them). The training loss is the mean squared error of the reconstruction plus the
quantiser's commitment and entropy losses (:func:`tokenizer_loss`).

A trained tokenizer is saved as ``tokenizer.safetensors`` (the weights) and ``tokenizer.json``
(the :class:`TokenizerConfig`) by :func:`save_tokenizer`, and read back by
:func:`load_tokenizer`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from embodia.core.weights import load_weights
from embodia.errors import read_format_record
from embodia.perception.tokenizers.lfq import (
    Quantized,
    QuantizerConfig,
    SignQuantizer,
    TokenizerError,
    signs_to_bits,
)

WEIGHTS_FILE = "tokenizer.safetensors"
CONFIG_FILE = "tokenizer.json"
FORMAT = 1
MAX_STAGES = 5
MAX_CHANNELS = 512


@dataclass(frozen=True)
class TokenizerConfig:
    """The architecture of a :class:`BitwiseTokenizer` and its quantiser's settings."""

    quantizer: QuantizerConfig = field(default_factory=QuantizerConfig)
    levels: int = 2
    """M: codes per grid position, from the deepest stage and the ``M - 1`` above it."""
    channels: tuple[int, ...] = (32, 32, 64)
    """Widths of the downsampling stages (multiples of 8); the stride is 2^len(channels)."""

    def __post_init__(self) -> None:
        if not isinstance(self.quantizer, QuantizerConfig):
            raise TokenizerError(f"quantizer must be a QuantizerConfig, got {type(self.quantizer).__name__}")
        channels = tuple(self.channels)
        if not 1 <= len(channels) <= MAX_STAGES:
            raise TokenizerError(f"channels must list 1..{MAX_STAGES} stage widths, got {list(channels)}")
        for width in channels:
            if isinstance(width, bool) or not isinstance(width, int) or not 8 <= width <= MAX_CHANNELS:
                raise TokenizerError(
                    f"each of channels must be an integer in 8..{MAX_CHANNELS}, got {width!r}"
                )
            if width % 8:
                raise TokenizerError(f"each of channels must be a multiple of 8 (group norm), got {width}")
        object.__setattr__(self, "channels", channels)
        if (
            isinstance(self.levels, bool)
            or not isinstance(self.levels, int)
            or not 1 <= self.levels <= len(channels)
        ):
            raise TokenizerError(
                f"levels must be an integer in 1..{len(channels)} (one per stage), got {self.levels!r}"
            )

    @property
    def stride(self) -> int:
        """Pixels per grid position along each side."""
        return 2 ** len(self.channels)

    @property
    def bits_per_position(self) -> int:
        """``M * K``: the bits of one grid position (all its levels)."""
        return self.levels * self.quantizer.bits

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """The code grid of an image of ``height x width`` pixels; an error naming the size
        when the encoder cannot take it."""
        stride = self.stride
        if height < stride or width < stride or height % stride or width % stride:
            raise TokenizerError(
                f"the encoder takes images whose sides are multiples of its stride {stride}, "
                f"got {height}x{width}"
            )
        return height // stride, width // stride

    def bits_per_image(self, height: int, width: int) -> int:
        rows, cols = self.grid(height, width)
        return rows * cols * self.bits_per_position

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["channels"] = list(self.channels)
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> TokenizerConfig:
        """The config :meth:`as_dict` wrote; a :class:`TokenizerError` naming a bad entry."""
        try:
            quantizer = QuantizerConfig(**record["quantizer"])
            return cls(quantizer=quantizer, levels=record["levels"], channels=tuple(record["channels"]))
        except (KeyError, TypeError) as exc:
            raise TokenizerError(f"not a tokenizer config ({type(exc).__name__}: {exc})") from None


# --------------------------------------------------------------------------- the network


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(8, channels)


class ResidualBlock(nn.Module):
    """``x + conv(act(norm(conv(act(norm(x))))))`` with 3x3 convolutions."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            _norm(channels),
            nn.SiLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            _norm(channels),
            nn.SiLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class Encoder(nn.Module):
    """Images (N, 3, H, W) to latents (N, M, K, H / stride, W / stride) (module docstring)."""

    def __init__(self, config: TokenizerConfig) -> None:
        super().__init__()
        widths = config.channels
        # The first stage halves the image by moving 2x2 pixel blocks into channels: no
        # convolution runs at full resolution, where it would cost the most.
        self.stages = nn.ModuleList(
            [nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(12, widths[0], 3, padding=1))]
        )
        for previous, width in zip(widths, widths[1:], strict=False):
            self.stages.append(
                nn.Sequential(nn.Conv2d(previous, width, 4, stride=2, padding=1), ResidualBlock(width))
            )
        bits = config.quantizer.bits
        self.levels = nn.ModuleList()
        for level in range(config.levels):
            width = widths[len(widths) - 1 - level]
            self.levels.append(
                nn.Sequential(nn.AvgPool2d(2**level), _norm(width), nn.SiLU(), nn.Conv2d(width, bits, 1))
            )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = []
        x = images
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        latents = [head(features[len(features) - 1 - level]) for level, head in enumerate(self.levels)]
        return torch.stack(latents, dim=1)


class Decoder(nn.Module):
    """Code values (N, M * K, h, w) to images (N, 3, h * stride, w * stride)."""

    def __init__(self, config: TokenizerConfig) -> None:
        super().__init__()
        widths = config.channels
        self.inlet = nn.Sequential(
            nn.Conv2d(config.bits_per_position, widths[-1], 3, padding=1), ResidualBlock(widths[-1])
        )
        self.stages = nn.ModuleList()
        for index in range(len(widths) - 1, 0, -1):
            self.stages.append(
                nn.Sequential(
                    nn.Upsample(scale_factor=2, mode="nearest"),
                    nn.Conv2d(widths[index], widths[index - 1], 3, padding=1),
                    ResidualBlock(widths[index - 1]),
                )
            )
        # The last 2x upsampling is the encoder's first stage mirrored: channels to 2x2 blocks.
        self.outlet = nn.Sequential(
            _norm(widths[0]), nn.SiLU(), nn.Conv2d(widths[0], 12, 3, padding=1), nn.PixelShuffle(2)
        )

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        x = self.inlet(codes)
        for stage in self.stages:
            x = stage(x)
        return self.outlet(x)


@dataclass(frozen=True)
class TokenizerOutput:
    reconstruction: torch.Tensor
    """(N, 3, H, W), not clamped."""
    bits: torch.Tensor
    """(N, M, h, w, K) int64 in {0, 1}."""
    quantized: Quantized


class BitwiseTokenizer(nn.Module):
    """The encoder, the quantiser and the decoder (module docstring)."""

    def __init__(self, config: TokenizerConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.quantizer = SignQuantizer(config.quantizer)
        self.decoder = Decoder(config)

    def check_images(self, images: torch.Tensor) -> None:
        """An error naming the problem unless ``images`` is (N, 3, H, W) of a size the encoder takes."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise TokenizerError(f"images must be a (N, 3, H, W) tensor, got shape {tuple(images.shape)}")
        self.config.grid(int(images.shape[2]), int(images.shape[3]))

    def latents(self, images: torch.Tensor) -> torch.Tensor:
        """The encoder's output, channels last: (N, M, h, w, K)."""
        self.check_images(images)
        return self.encoder(images).permute(0, 1, 3, 4, 2)

    def forward(self, images: torch.Tensor) -> TokenizerOutput:
        quantized = self.quantizer(self.latents(images))
        return TokenizerOutput(self.decode_codes(quantized.codes), quantized.bits, quantized)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """The bits of ``images``: (N, M, h, w, K) int64 in {0, 1} (the latent's signs; the
        quantiser's losses are not computed)."""
        return signs_to_bits(self.latents(images))

    def decode_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """Images from code values (N, M, h, w, K)."""
        batch, levels, rows, cols, bits = codes.shape
        if levels != self.config.levels or bits != self.config.quantizer.bits:
            raise TokenizerError(
                f"the decoder takes codes of {self.config.levels} levels x "
                f"{self.config.quantizer.bits} bits, got {levels} x {bits}"
            )
        stacked = codes.permute(0, 1, 4, 2, 3).reshape(batch, levels * bits, rows, cols)
        return self.decoder(stacked)

    def decode_bits(self, bits: torch.Tensor) -> torch.Tensor:
        """Images (N, 3, H, W) from bits (N, M, h, w, K): the bits are turned into code values
        directly (:meth:`SignQuantizer.dequantize`), with no encoder involved."""
        return self.decode_codes(self.quantizer.dequantize(bits))


def tokenizer_loss(output: TokenizerOutput, images: torch.Tensor) -> dict[str, torch.Tensor]:
    """``loss`` (reconstruction MSE + the quantiser's weighted losses) and its parts:
    ``reconstruction``, ``commitment``, ``per_sample_entropy``, ``codebook_entropy``."""
    reconstruction = torch.nn.functional.mse_loss(output.reconstruction, images)
    quantized = output.quantized
    return {
        "loss": reconstruction + quantized.loss,
        "reconstruction": reconstruction,
        "commitment": quantized.commitment,
        "per_sample_entropy": quantized.entropy.per_sample,
        "codebook_entropy": quantized.entropy.codebook,
    }


# --------------------------------------------------------------------------- images


def images_to_tensor(images: NDArray[np.uint8] | list[NDArray[np.uint8]]) -> torch.Tensor:
    """uint8 RGB images (N, H, W, 3), or one (H, W, 3), as a float tensor (N, 3, H, W) in [0, 1]."""
    array = np.asarray(images)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise TokenizerError(f"images must be RGB arrays (N, H, W, 3), got shape {array.shape}")
    if array.dtype != np.uint8:
        raise TokenizerError(f"images must be uint8, got {array.dtype}")
    return torch.from_numpy(np.ascontiguousarray(array)).permute(0, 3, 1, 2).float() / 255.0


def tensor_to_images(images: torch.Tensor) -> NDArray[np.uint8]:
    """A float tensor (N, 3, H, W) in [0, 1] as uint8 RGB images (N, H, W, 3), clamped and rounded."""
    pixels = (images.detach().clamp(0, 1) * 255.0).round().to(torch.uint8)
    return pixels.permute(0, 2, 3, 1).cpu().numpy()


@torch.inference_mode()
def reconstruct(
    tokenizer: BitwiseTokenizer, images: NDArray[np.uint8], batch_size: int = 64
) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """The reconstructions (uint8, as given) and the bits (N, M, h, w, K) of uint8 images."""
    was_training = tokenizer.training
    tokenizer.eval()
    pictures, codes = [], []
    try:
        for start in range(0, len(images), batch_size):
            bits = tokenizer.encode(images_to_tensor(images[start : start + batch_size]))
            pictures.append(tensor_to_images(tokenizer.decode_bits(bits)))
            codes.append(bits.numpy())
    finally:
        tokenizer.train(was_training)
    return np.concatenate(pictures), np.concatenate(codes)


@torch.inference_mode()
def codec_throughput(
    tokenizer: BitwiseTokenizer, images: NDArray[np.uint8], repeats: int = 3
) -> dict[str, float]:
    """Encode (pixels to bits) and decode (bits to pixels) throughput of ``tokenizer`` on the
    batch ``images`` (uint8, N x H x W x 3), in images per second: the median of ``repeats``
    timed passes after one untimed warm-up pass."""
    if repeats < 1:
        raise TokenizerError(f"repeats must be at least 1, got {repeats}")
    tokenizer.eval()
    batch = images_to_tensor(images)
    tokenizer.check_images(batch)
    bits = tokenizer.encode(batch)
    tokenizer.decode_bits(bits)
    encode_s, decode_s = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        bits = tokenizer.encode(batch)
        middle = time.perf_counter()
        tokenizer.decode_bits(bits)
        encode_s.append(middle - started)
        decode_s.append(time.perf_counter() - middle)
    count = len(batch)
    return {
        "images": float(count),
        "encode_images_per_s": count / statistics.median(encode_s),
        "decode_images_per_s": count / statistics.median(decode_s),
    }


# --------------------------------------------------------------------------- saving


def save_tokenizer(tokenizer: BitwiseTokenizer, directory: Path | str) -> Path:
    """Write ``tokenizer.safetensors`` (the weights) and ``tokenizer.json`` (the config) to
    ``directory``; :func:`load_tokenizer` reads them back."""
    from safetensors.torch import save_file

    from embodia.core.runs import write_json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {name: value.detach().cpu().contiguous() for name, value in tokenizer.state_dict().items()}
    save_file(state, str(directory / WEIGHTS_FILE))
    write_json(directory / CONFIG_FILE, {"format": FORMAT, "config": tokenizer.config.as_dict()})
    return directory


def read_json_record(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``; a :class:`TokenizerError` naming ``what`` and the problem."""
    if not path.is_file():
        raise TokenizerError(f"{path.parent} is not a saved {what}: it has no {path.name}")
    return read_format_record(path, FORMAT, what, TokenizerError)


def load_state(module: nn.Module, path: Path) -> None:
    """Load a safetensors state dict into ``module``; a :class:`TokenizerError` when the file
    is missing, unreadable or holds other tensors than the module has."""
    load_weights(module, path, TokenizerError, "its config")


def load_tokenizer(directory: Path | str) -> BitwiseTokenizer:
    """The tokenizer :func:`save_tokenizer` wrote to ``directory``, in eval mode."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TokenizerError(f"tokenizer directory {directory} does not exist")
    record = read_json_record(directory / CONFIG_FILE, "tokenizer")
    config = record.get("config")
    if not isinstance(config, dict):
        raise TokenizerError(f"{directory / CONFIG_FILE} has no config mapping")
    tokenizer = BitwiseTokenizer(TokenizerConfig.from_dict(config))
    load_state(tokenizer, directory / WEIGHTS_FILE)
    return tokenizer.eval()
