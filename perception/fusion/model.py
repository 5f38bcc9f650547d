"""IDEAL: observation-conditioned probabilistic decisions for two-modality image fusion.

Our own reconstruction (the paper's code is not public; ``docs/fusion.md`` gives the whole
formulation). For sources A and B (intensities in [0, 1] inside the model), a small
convolutional network reads *decision conditions* on a grid of one cell per ``stride`` x
``stride`` pixels:

- spatial: both sources and their gradient magnitudes on the grid, and the multi-scale
  difference attention ``D_s = |down_s A - down_s B|`` for ``s`` in {1, 1/2, 1/4};
- spectral, per ``patch`` x ``patch`` patch (Hann-windowed, mean removed): each source's
  power in ``bands`` octave bands, the complementary spectrum
  ``sum_b (|F_A| - |F_B|) / sum_b (|F_A| + |F_B|)`` per band, and each source's spectral-entropy
  reliability ``r = 1 - H``, ``H = -sum p log p / log K`` with ``p`` the non-DC power
  normalised over the patch's ``K`` non-DC frequencies;

and outputs a per-cell Beta policy ``pi ~ Beta(alpha, beta)``, ``alpha, beta = 1 +
softplus(NN(conditions))``, the contribution of A. The decision (its mean at inference, a
reparameterised sample in training) is pulled towards an even mix where the evidence is weak:

``w = 0.5 + gate (pi - 0.5)``, ``gate = trigger x trust (x certainty at inference)`` with
``trigger = 1 - exp(-sum_s softmax(theta)_s D_s / tau)`` (0 where the sources agree),
``trust = 1 - lambda (1 - max(r_A, r_B))`` and ``certainty = 1 - 12 Var[pi]`` (0 for the
flattest policy, Beta(1, 1)); theta, tau and lambda are learned. In training a draw's
spread is paid for in the loss, which teaches the concentration; multiplying the draw by
the certainty too would make the flattest policy the cheapest way to silence that spread. ``w`` is upsampled
bilinearly to the pixels and the fused image is ``F = w A + (1 - w) B``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as nnf
from torch import nn

from embodia.core.weights import load_weights
from embodia.errors import read_text_file
from embodia.perception.fusion.errors import FusionError, gray_pair

MODEL_FORMAT = 1
MODEL_KIND = "ideal-fusion"
WEIGHTS_FILE = "ideal.safetensors"
CONFIG_FILE = "ideal.json"

DIFFERENCE_SCALES = (1, 2, 4)
"""The downsampling factors of the difference attention: D at full, half and quarter size."""
SPATIAL_CHANNELS = 4 + len(DIFFERENCE_SCALES)
"""A, B, |grad A|, |grad B| on the grid, and one difference map per scale."""
MIN_SIDE = 4
"""The smallest image side IDEAL fuses."""


@dataclass(frozen=True)
class IDEALConfig:
    """The shape of an IDEAL model (what :func:`save_ideal` writes beside the weights)."""

    width: int = 16
    """Channels of the condition network."""
    stride: int = 4
    """Pixels per side of one decision cell: the policy is computed on a grid this much
    coarser than the image and upsampled (1, 2, 4 or 8)."""
    patch: int = 16
    """Pixels per side of the patches the spectral conditions are computed on (8, 16 or 32)."""
    bands: int = 3
    """Octave frequency bands of the spectral conditions."""
    prior: float = 2.0
    """a0 of the symmetric Beta(a0, a0) prior on the policy (mean 0.5)."""

    def __post_init__(self) -> None:
        for name in ("width", "stride", "patch", "bands"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise FusionError(f"IDEALConfig.{name} must be a whole number, got {value!r}")
        if not 1 <= self.width <= 256:
            raise FusionError(f"IDEALConfig.width must be in 1..256, got {self.width}")
        if self.stride not in (1, 2, 4, 8):
            raise FusionError(f"IDEALConfig.stride must be 1, 2, 4 or 8, got {self.stride}")
        if self.patch not in (8, 16, 32):  # so also at least the stride
            raise FusionError(f"IDEALConfig.patch must be 8, 16 or 32, got {self.patch}")
        most = int(math.log2(self.patch)) - 1
        if not 1 <= self.bands <= most:
            raise FusionError(
                f"IDEALConfig.bands must be in 1..{most} for {self.patch}-pixel patches, got {self.bands}"
            )
        if isinstance(self.prior, bool) or not (
            isinstance(self.prior, int | float) and 1.0 <= self.prior <= 100.0
        ):
            raise FusionError(f"IDEALConfig.prior must be a number in 1..100, got {self.prior!r}")

    @property
    def spectral_channels(self) -> int:
        """Band power of A and B and the complementary spectrum per band, and r_A, r_B."""
        return 3 * self.bands + 2

    @property
    def multiple(self) -> int:
        """Images are padded to a multiple of this many pixels (whole patches and cells)."""
        return max(self.patch, self.stride, max(DIFFERENCE_SCALES))


def band_masks(patch: int, bands: int) -> np.ndarray:
    """``(bands, patch, patch // 2 + 1)`` 0/1 masks over a patch's real FFT: octave bands of
    radial frequency (cycles per pixel) ``(0, 1/2^bands], ..., (1/4, 1/2 sqrt 2]``, DC in none."""
    rows = np.fft.fftfreq(patch)[:, None]
    cols = np.fft.rfftfreq(patch)[None, :]
    radius = np.hypot(rows, cols)
    edges = [0.0] + [0.5 / 2 ** (bands - 1 - k) for k in range(bands - 1)] + [np.inf]
    return np.stack(
        [(radius > low) & (radius <= high) for low, high in zip(edges, edges[1:], strict=False)]
    ).astype(np.float32)


@dataclass
class FusionOutput:
    """What the model decides for a batch (tensors; grid maps are ``(N, 1, h, w)``)."""

    fused: torch.Tensor
    """``(N, 1, H, W)`` the fused images, ``weight * A + (1 - weight) * B``."""
    weight: torch.Tensor
    """``(N, 1, H, W)`` A's contribution per pixel, after the modulation."""
    weight_grid: torch.Tensor
    """A's contribution per decision cell, after the modulation."""
    decision: torch.Tensor
    """The policy's draw per cell (its mean at inference), before the modulation."""
    alpha: torch.Tensor
    beta: torch.Tensor
    gate: torch.Tensor
    """trigger x trust (x certainty at inference): how far the decision may move from 0.5."""
    trigger: torch.Tensor
    """The difference trigger, 0 where the sources agree."""

    @property
    def mean(self) -> torch.Tensor:
        """The policy's mean ``alpha / (alpha + beta)``."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def variance(self) -> torch.Tensor:
        """The policy's variance, its uncertainty."""
        total = self.alpha + self.beta
        return self.alpha * self.beta / (total * total * (total + 1.0))


class IDEALNetwork(nn.Module):
    """The condition network, the Beta head and the evidence gate (module docstring)."""

    bands: torch.Tensor
    """``(bands, P, P // 2 + 1)`` the band masks (:func:`band_masks`)."""
    window: torch.Tensor
    """``(P, P)`` the 2-D Hann window the patches are weighted by."""

    def __init__(self, config: IDEALConfig) -> None:
        super().__init__()
        self.config = config
        width = config.width
        self.spatial = nn.Conv2d(SPATIAL_CHANNELS, width, 3, padding=1, padding_mode="replicate")
        self.spectral = nn.Conv2d(config.spectral_channels, width, 1)
        self.trunk = nn.Sequential(
            nn.GELU(),
            nn.Conv2d(2 * width, width, 3, padding=1, padding_mode="replicate"),
            nn.GELU(),
            nn.Conv2d(width, width, 3, padding=1, padding_mode="replicate"),
            nn.GELU(),
        )
        self.head = nn.Conv2d(width, 2, 1)
        with torch.no_grad():  # start near the prior's even mix
            self.head.weight.mul_(0.1)
            if self.head.bias is not None:
                self.head.bias.zero_()
        self.scale_logits = nn.Parameter(torch.zeros(len(DIFFERENCE_SCALES)))
        self.tau_raw = nn.Parameter(torch.tensor(math.log(math.expm1(0.03))))
        self.trust_logit = nn.Parameter(torch.tensor(-2.0))
        self.register_buffer(
            "bands", torch.from_numpy(band_masks(config.patch, config.bands)), persistent=False
        )
        hann = torch.hann_window(config.patch, periodic=False, dtype=torch.float32)
        self.register_buffer("window", torch.outer(hann, hann), persistent=False)

    # ------------------------------------------------------------ conditions

    def _to_grid(self, image: torch.Tensor, factor: int, grid: tuple[int, int]) -> torch.Tensor:
        """A map at 1/``factor`` of the padded size, brought to the decision grid."""
        stride = self.config.stride
        if factor < stride:
            return nnf.avg_pool2d(image, stride // factor)
        if factor > stride:
            return nnf.interpolate(image, size=grid, mode="bilinear", align_corners=False)
        return image

    def spatial_conditions(self, both: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N, 7, h, w)`` spatial conditions of the sources ``both`` (``(N, 2, H, W)``, A then
        B) and ``(N, 3, h, w)`` the difference maps among them."""
        stride = self.config.stride
        grid = (both.shape[-2] // stride, both.shape[-1] // stride)
        pooled = {1: both}
        for factor in range(1, max(max(DIFFERENCE_SCALES), stride).bit_length()):
            pooled[2**factor] = nnf.avg_pool2d(pooled[2 ** (factor - 1)], 2)
        differences = [
            self._to_grid((pooled[f][:, :1] - pooled[f][:, 1:]).abs(), f, grid) for f in DIFFERENCE_SCALES
        ]
        difference = torch.cat(differences, dim=1)
        across = (both[..., :, 1:] - both[..., :, :-1]).abs()
        down = (both[..., 1:, :] - both[..., :-1, :]).abs()
        if stride > 1:  # partial windows at the far edges keep the grid's size
            across = nnf.avg_pool2d(across, stride, ceil_mode=True)
            down = nnf.avg_pool2d(down, stride, ceil_mode=True)
        else:
            across = nnf.pad(across, (0, 1, 0, 0))
            down = nnf.pad(down, (0, 0, 0, 1))
        return torch.cat([pooled[stride], across + down, difference], dim=1), difference

    def spectral_conditions(
        self, both: torch.Tensor, grid: tuple[int, int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N, 3 bands + 2, h, w)`` spectral conditions of ``both`` (``(N, 2, H, W)``) on the
        decision grid, and ``(N, 2, h, w)`` the reliabilities r_A, r_B among them."""
        size = self.config.patch
        patches = both.unfold(2, size, size).unfold(3, size, size)  # N, 2, ph, pw, P, P
        patches = (patches - patches.mean(dim=(-2, -1), keepdim=True)) * self.window
        spectrum = torch.view_as_real(torch.fft.rfft2(patches)).flatten(-3, -2)  # ..., K, 2
        power = (spectrum * spectrum).sum(dim=-1)  # N, 2, ph, pw, K
        amplitude = power.sqrt()
        bands = self.bands.flatten(1).t()  # K, bands
        energy = torch.log1p(power @ (bands / bands.sum(dim=0)))  # mean power per band
        band_amplitude = amplitude @ bands
        complementary = (band_amplitude[:, 0] - band_amplitude[:, 1]) / (
            band_amplitude[:, 0] + band_amplitude[:, 1] + 1e-6
        )
        ac = power[..., 1:] + 1e-8  # every frequency but DC
        share = ac / ac.sum(dim=-1, keepdim=True)
        entropy = -(share * share.log()).sum(dim=-1) / math.log(ac.shape[-1])
        maps = torch.cat(
            [energy.permute(0, 1, 4, 2, 3).flatten(1, 2), complementary.permute(0, 3, 1, 2), 1.0 - entropy],
            dim=1,
        )
        maps = nnf.interpolate(maps, size=grid, mode="bilinear", align_corners=False)
        return maps, maps[:, -2:]

    # ------------------------------------------------------------ the decision

    @property
    def tau(self) -> torch.Tensor:
        """The trigger's difference scale (intensities in [0, 1]), kept positive."""
        return nnf.softplus(self.tau_raw) + 1e-4

    def forward(self, a: torch.Tensor, b: torch.Tensor, sample: bool = False) -> FusionOutput:
        """Fuse ``(N, 1, H, W)`` sources in [0, 1]; ``sample`` draws the policy
        (reparameterised) instead of taking its mean."""
        height, width = a.shape[-2:]
        multiple = self.config.multiple
        pad = (0, (-width) % multiple, 0, (-height) % multiple)
        both = torch.cat([a, b], dim=1)
        if any(pad):
            both = nnf.pad(both, pad, mode="replicate")
        spatial, difference = self.spatial_conditions(both)
        grid = (spatial.shape[-2], spatial.shape[-1])
        spectral, reliability = self.spectral_conditions(both, grid)
        features = torch.cat([self.spatial(spatial), self.spectral(spectral)], dim=1)
        raw = self.head(self.trunk(features))
        alpha = 1.0 + nnf.softplus(raw[:, :1])
        beta = 1.0 + nnf.softplus(raw[:, 1:])
        attention = torch.softmax(self.scale_logits, dim=0).view(1, -1, 1, 1)
        trigger = 1.0 - torch.exp(-(attention * difference).sum(dim=1, keepdim=True) / self.tau)
        trust = 1.0 - torch.sigmoid(self.trust_logit) * (1.0 - reliability.amax(dim=1, keepdim=True))
        if sample:  # training: a draw; its spread is what teaches the concentration
            decision = torch.distributions.Beta(alpha, beta).rsample()
            gate = trigger * trust
        else:  # inference: the mean, shrunk as far as the policy is unsure
            total = alpha + beta
            decision = alpha / total
            certainty = (1.0 - 12.0 * alpha * beta / (total * total * (total + 1.0))).clamp(min=0.0)
            gate = trigger * trust * certainty
        weight_grid = 0.5 + gate * (decision - 0.5)
        if self.config.stride > 1:
            weight = nnf.interpolate(weight_grid, size=both.shape[-2:], mode="bilinear", align_corners=False)
        else:
            weight = weight_grid
        weight = weight[..., :height, :width]
        fused = weight * a + (1.0 - weight) * b
        return FusionOutput(fused, weight, weight_grid, decision, alpha, beta, gate, trigger)


def build_ideal(config: IDEALConfig | None = None, seed: int = 0) -> IDEALNetwork:
    """A new IDEAL network of ``config`` (default :class:`IDEALConfig`), its weights drawn
    from ``seed`` without touching torch's global random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return IDEALNetwork(config or IDEALConfig())


def to_unit_tensor(image: np.ndarray) -> torch.Tensor:
    """A 0-255 image as a ``(1, 1, H, W)`` float32 tensor in [0, 1]."""

    return torch.from_numpy(np.ascontiguousarray(image, dtype=np.float32) / 255.0)[None, None]


@dataclass(frozen=True)
class FusionDecision:
    """A fused pair as numpy arrays of the image's size (0-255 intensities)."""

    fused: np.ndarray
    weight: np.ndarray
    """A's contribution per pixel (after the modulation towards 0.5)."""
    uncertainty: np.ndarray
    """The policy's variance per pixel (bilinearly upsampled from the decision grid)."""


def fusion_decision(model: IDEALNetwork, a: Any, b: Any) -> FusionDecision:
    """Fuse two 0-255 grayscale images of one size with a trained (or new) IDEAL model: the
    policy's mean decides, and the result is a float array in 0..255."""
    first, second = gray_pair(a, b)
    if min(first.shape) < MIN_SIDE:
        height, width = first.shape
        raise FusionError(
            f"IDEAL needs images of at least {MIN_SIDE}x{MIN_SIDE} pixels, got {height}x{width}"
        )
    with torch.inference_mode():
        output = model(to_unit_tensor(first), to_unit_tensor(second))
        variance = nnf.interpolate(output.variance, scale_factor=model.config.stride, mode="bilinear")
    height, width = first.shape
    return FusionDecision(
        fused=output.fused[0, 0].double().numpy() * 255.0,
        weight=output.weight[0, 0].double().numpy(),
        uncertainty=variance[0, 0, :height, :width].double().numpy(),
    )


def fuse_images(model: IDEALNetwork, a: Any, b: Any) -> np.ndarray:
    """The fused image (0..255 floats) of two 0-255 grayscale images (:func:`fusion_decision`)."""
    return fusion_decision(model, a, b).fused


# --------------------------------------------------------------------------- saving


def save_ideal(model: IDEALNetwork, directory: Path | str) -> Path:
    """Write ``ideal.safetensors`` (the weights) and ``ideal.json`` (the config) to ``directory``."""
    from safetensors.torch import save_file

    from embodia.core.runs import write_json

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    save_file(state, str(folder / WEIGHTS_FILE))
    write_json(
        folder / CONFIG_FILE,
        {"format": MODEL_FORMAT, "kind": MODEL_KIND, "config": asdict(model.config)},
    )
    return folder


def load_ideal(directory: Path | str) -> IDEALNetwork:
    """The model :func:`save_ideal` wrote, in eval mode; a :class:`FusionError` naming what is
    wrong with a folder that does not hold one."""
    folder = Path(directory)
    if not folder.is_dir():
        raise FusionError(f"IDEAL model folder {folder} does not exist")
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if not (folder / name).is_file():
            raise FusionError(f"{folder} is not an IDEAL model: it has no {name}")
    try:
        record = json.loads(read_text_file(folder / CONFIG_FILE, FusionError))
    except json.JSONDecodeError as error:
        raise FusionError(f"{folder / CONFIG_FILE} is not JSON: {error.msg}") from None
    if (
        not isinstance(record, dict)
        or record.get("kind") != MODEL_KIND
        or record.get("format") != MODEL_FORMAT
    ):
        raise FusionError(f"{folder / CONFIG_FILE} is not a format-{MODEL_FORMAT} {MODEL_KIND} record")
    settings = record.get("config")
    known = {field.name for field in fields(IDEALConfig)}
    if not isinstance(settings, dict) or set(settings) - known:
        raise FusionError(
            f"{folder / CONFIG_FILE} has no IDEALConfig mapping (fields {', '.join(sorted(known))})"
        )
    model = build_ideal(IDEALConfig(**settings))
    load_weights(model, folder / WEIGHTS_FILE, FusionError, "the model its config describes")
    return model.eval()


def fusion_benchmark_case(side: int = 512, model: IDEALNetwork | None = None) -> Callable[[], np.ndarray]:
    """What ``benchmarks/perception.py`` times as ``fusion_512_ms``: a zero-argument function
    that fuses one held-out infrared-visible pair of ``side`` x ``side`` pixels with ``model``
    (default: a new IDEAL model; the cost does not depend on the weights), returning the
    fused image. The pair is made once, here, outside the timed call."""
    from embodia.perception.fusion.data import fusion_pairs

    (pair,) = fusion_pairs("ir_vis", 1, side, split="test")
    fusion_model = (model or build_ideal()).eval()

    def fuse_once() -> np.ndarray:
        return fuse_images(fusion_model, pair.a, pair.b)

    return fuse_once
