"""Training IDEAL without references, and measuring it against the baselines on held-out pairs.

:func:`run_fusion_training` (``embodia train fusion``) trains an IDEAL model
(:mod:`embodia.perception.fusion.model`) on random crops of generated pairs
(:mod:`embodia.perception.fusion.data`) with the unsupervised fusion objective
(:func:`fusion_losses`) and the Beta prior's KL, then fuses held-out pairs of every kind with
IDEAL and the baselines and reports the nine standard metrics. The run folder holds
``config.yaml``, ``metrics.jsonl`` (a line every ``log_every`` steps), ``checkpoint.pt`` (the
model, the optimiser and the step, every ``checkpoint_every`` steps), ``model/`` (the trained
model: ``ideal.safetensors`` + ``ideal.json``, :func:`load_ideal`), and ``summary.json`` (the
metric table). A killed run continues from its last checkpoint with ``resume=True``, and
ends with the same weights as a run that was never stopped.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as nnf

from embodia.core.limits import check_seed
from embodia.core.runs import RunFolder, runner
from embodia.perception.fusion.baselines import BASELINES
from embodia.perception.fusion.data import PAIR_KINDS, FusionPair, fusion_pairs
from embodia.perception.fusion.errors import FusionError
from embodia.perception.fusion.metrics import METRICS, fusion_metrics
from embodia.perception.fusion.model import (
    FusionOutput,
    IDEALConfig,
    IDEALNetwork,
    build_ideal,
    fuse_images,
    save_ideal,
    to_unit_tensor,
)

METRICS_FILE = "metrics.jsonl"
CHECKPOINT_FILE = "checkpoint.pt"
MODEL_FOLDER = "model"
SUMMARY_FILE = "summary.json"
METHODS = ("ideal", *BASELINES)
"""The methods the summary's table compares: IDEAL, then the baselines."""


@dataclass(frozen=True)
class FusionTrainSettings:
    """One IDEAL training run (module docstring)."""

    steps: int = 600
    """Optimiser steps."""
    batch_size: int = 8
    """Crops per step."""
    crop: int = 96
    """Pixels per side of a training crop."""
    learning_rate: float = 3e-3
    """Adam's learning rate."""
    kinds: tuple[str, ...] = PAIR_KINDS
    """Pair kinds to train and evaluate on (ir_vis, medical, sim_depth)."""
    train_pairs: int = 12
    """Training pairs of each kind, crops drawn from them."""
    pair_size: int = 192
    """Pixels per side of a training pair."""
    eval_pairs: int = 4
    """Held-out pairs of each kind the metric table is measured on."""
    eval_size: int = 256
    """Pixels per side of a held-out pair."""
    width: int = 16
    """Channels of the condition network."""
    stride: int = 4
    """Pixels per side of a decision cell."""
    patch: int = 16
    """Pixels per side of a spectral patch."""
    bands: int = 3
    """Octave bands of the spectral conditions."""
    prior: float = 2.0
    """a0 of the symmetric Beta(a0, a0) prior."""
    intensity_weight: float = 1.0
    """Weight of mean |F - max(A, B)|."""
    gradient_weight: float = 1.0
    """Weight of mean | |grad F| - max(|grad A|, |grad B|) |."""
    ssim_weight: float = 0.5
    """Weight of (1 - SSIM(F, A)) + (1 - SSIM(F, B))."""
    kl_weight: float = 0.02
    """Weight of the mean KL(Beta(alpha, beta) || Beta(a0, a0)) per decision cell."""
    agree_share: float = 0.25
    """Share of the crops in which a random rectangle of B is made equal to A (regions where
    the modalities agree, so the policy meets evidence-free cells in training)."""
    log_every: int = 10
    """Steps per metrics.jsonl line."""
    checkpoint_every: int = 50
    """Steps between two checkpoints."""
    seed: int = 0
    """Seed of the pairs, the crops, the policy's draws and the initial weights."""

    def __post_init__(self) -> None:
        whole = {
            "steps": (1, 1_000_000),
            "batch_size": (1, 256),
            "crop": (32, 512),
            "train_pairs": (1, 1000),
            "pair_size": (32, 1024),
            "eval_pairs": (1, 1000),
            "eval_size": (48, 1024),
            "log_every": (1, 1_000_000),
            "checkpoint_every": (1, 1_000_000),
        }
        for name, (low, high) in whole.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise FusionError(
                    f"FusionTrainSettings.{name} must be a whole number in {low}..{high}, got {value!r}"
                )
        if self.crop > self.pair_size:
            raise FusionError(
                f"FusionTrainSettings.crop ({self.crop}) must not exceed pair_size ({self.pair_size})"
            )
        numbers = (
            "learning_rate",
            "prior",
            "intensity_weight",
            "gradient_weight",
            "ssim_weight",
            "kl_weight",
            "agree_share",
        )
        for name in numbers:
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise FusionError(f"FusionTrainSettings.{name} must be a finite number >= 0, got {value!r}")
        if self.agree_share > 1:
            raise FusionError(f"FusionTrainSettings.agree_share must be in 0..1, got {self.agree_share!r}")
        if not self.learning_rate > 0:
            raise FusionError(
                f"FusionTrainSettings.learning_rate must be positive, got {self.learning_rate!r}"
            )
        if (
            not self.kinds
            or any(kind not in PAIR_KINDS for kind in self.kinds)
            or len(set(self.kinds)) < len(self.kinds)
        ):
            names = ", ".join(PAIR_KINDS)
            raise FusionError(
                f"FusionTrainSettings.kinds must be distinct names among {names}, got {list(self.kinds)}"
            )
        check_seed("FusionTrainSettings.seed", self.seed, FusionError)
        self.model_config()  # the model's own checks now

    def model_config(self) -> IDEALConfig:
        """The shape of the model this run trains."""
        return IDEALConfig(
            width=self.width, stride=self.stride, patch=self.patch, bands=self.bands, prior=self.prior
        )

    def as_config(self) -> dict[str, Any]:
        """The settings as ``config.yaml`` holds them (lists for tuples)."""
        return {**asdict(self), "kinds": list(self.kinds)}


# --------------------------------------------------------------------------- the objective


def gradient_magnitude(images: torch.Tensor) -> torch.Tensor:
    """``|S_x * I| + |S_y * I|`` (Sobel, replicated border) of ``(N, 1, H, W)`` images, by
    shifted slices (far cheaper to differentiate on the CPU than a convolution)."""
    padded = nnf.pad(images, (1, 1, 1, 1), mode="replicate")
    across = padded[..., :, 2:] - padded[..., :, :-2]  # H + 2 rows
    down = padded[..., 2:, :] - padded[..., :-2, :]  # W + 2 columns
    sobel_x = across[..., :-2, :] + 2 * across[..., 1:-1, :] + across[..., 2:, :]
    sobel_y = down[..., :, :-2] + 2 * down[..., :, 1:-1] + down[..., :, 2:]
    return sobel_x.abs() + sobel_y.abs()


SSIM_WINDOW = 7
"""Side of SSIM's uniform window, as scikit-image's default (the SSIM metric)."""


def ssim_index(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean SSIM per image of ``(N, 1, H, W)`` images in [0, 1] over 7x7 uniform windows
    (K1 = 0.01, K2 = 0.03, sample covariances: scikit-image's defaults; positions where the
    window fits)."""
    c1, c2 = 0.01**2, 0.03**2
    count = SSIM_WINDOW * SSIM_WINDOW
    correction = count / (count - 1)

    def local(image: torch.Tensor) -> torch.Tensor:  # separable: two 7-tap passes, not 49
        rows = nnf.avg_pool2d(image, (SSIM_WINDOW, 1), stride=1)
        return nnf.avg_pool2d(rows, (1, SSIM_WINDOW), stride=1)

    mean_x, mean_y = local(x), local(y)
    var_x = correction * (local(x * x) - mean_x**2)
    var_y = correction * (local(y * y) - mean_y**2)
    cov = correction * (local(x * y) - mean_x * mean_y)
    index = ((2 * mean_x * mean_y + c1) * (2 * cov + c2)) / (
        (mean_x**2 + mean_y**2 + c1) * (var_x + var_y + c2)
    )
    return index.mean(dim=(1, 2, 3))


def fusion_losses(
    output: FusionOutput, a: torch.Tensor, b: torch.Tensor, prior: float
) -> dict[str, torch.Tensor]:
    """The unsupervised objective's terms for a batch (sources in [0, 1]):

    - ``intensity``: ``mean |F - max(A, B)|`` (keep the brighter, e.g. hot targets);
    - ``gradient``: ``mean | |grad F| - max(|grad A|, |grad B|) |`` (keep the sharper texture);
    - ``ssim``: ``mean (1 - SSIM(F, A)) + (1 - SSIM(F, B))`` (keep both structures);
    - ``kl``: ``mean KL(Beta(alpha, beta) || Beta(a0, a0))`` per decision cell."""
    fused = output.fused
    intensity = (fused - torch.maximum(a, b)).abs().mean()
    target = torch.maximum(gradient_magnitude(a), gradient_magnitude(b))
    gradient = (gradient_magnitude(fused) - target).abs().mean()
    ssim = (2.0 - ssim_index(fused, a) - ssim_index(fused, b)).mean()
    even = torch.full_like(output.alpha, float(prior))
    kl = torch.distributions.kl_divergence(
        torch.distributions.Beta(output.alpha, output.beta), torch.distributions.Beta(even, even)
    ).mean()
    return {"intensity": intensity, "gradient": gradient, "ssim": ssim, "kl": kl}


def total_loss(terms: Mapping[str, torch.Tensor], settings: FusionTrainSettings) -> torch.Tensor:
    """The weighted sum of :func:`fusion_losses`' terms."""
    return (
        settings.intensity_weight * terms["intensity"]
        + settings.gradient_weight * terms["gradient"]
        + settings.ssim_weight * terms["ssim"]
        + settings.kl_weight * terms["kl"]
    )


# --------------------------------------------------------------------------- batches


def training_pairs(settings: FusionTrainSettings) -> list[FusionPair]:
    """The pairs the crops are drawn from: ``train_pairs`` of each kind."""
    pairs: list[FusionPair] = []
    for kind in settings.kinds:
        pairs += fusion_pairs(
            kind, settings.train_pairs, settings.pair_size, split="train", seed=settings.seed
        )
    return pairs


def held_out_pairs(settings: FusionTrainSettings) -> dict[str, list[FusionPair]]:
    """The held-out pairs of each kind the metric table is measured on."""
    return {
        kind: fusion_pairs(kind, settings.eval_pairs, settings.eval_size, split="test", seed=settings.seed)
        for kind in settings.kinds
    }


def crop_batch(
    pairs: Sequence[FusionPair], settings: FusionTrainSettings, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s batch: random crops of random pairs (kinds equally likely), a share
    ``agree_share`` of them with a rectangle where B is A, each flipped, turned by a multiple
    of 90 degrees and its sources swapped at random; ``(N, 1, c, c)``
    tensors in [0, 1]. The same step gives the same batch (a resumed run sees what it would
    have)."""
    rng = np.random.default_rng([settings.seed, step, 7])
    by_kind: dict[str, list[FusionPair]] = {}
    for pair in pairs:
        by_kind.setdefault(pair.kind, []).append(pair)
    kinds = sorted(by_kind)
    first, second = [], []
    side = settings.crop
    for _ in range(settings.batch_size):
        group = by_kind[kinds[int(rng.integers(len(kinds)))]]
        pair = group[int(rng.integers(len(group)))]
        top = int(rng.integers(0, pair.a.shape[0] - side + 1))
        left = int(rng.integers(0, pair.a.shape[1] - side + 1))
        a = pair.a[top : top + side, left : left + side]
        b = pair.b[top : top + side, left : left + side]
        if rng.random() < settings.agree_share:
            height, width = rng.integers(side // 4, side // 2 + 1, size=2)
            row, col = int(rng.integers(0, side - height + 1)), int(rng.integers(0, side - width + 1))
            b = b.copy()
            b[row : row + height, col : col + width] = a[row : row + height, col : col + width]
        turns, flip, swap = int(rng.integers(4)), bool(rng.integers(2)), bool(rng.integers(2))
        a, b = np.rot90(a, turns), np.rot90(b, turns)
        if flip:
            a, b = a[:, ::-1], b[:, ::-1]
        if swap:
            a, b = b, a
        first.append(np.ascontiguousarray(a))
        second.append(np.ascontiguousarray(b))
    return (
        torch.from_numpy(np.stack(first) / 255.0).float()[:, None],
        torch.from_numpy(np.stack(second) / 255.0).float()[:, None],
    )


# --------------------------------------------------------------------------- evaluation


def as_saved(image: np.ndarray) -> np.ndarray:
    """A fused image as a PNG would store it (rounded, clipped to 0..255), the form the
    metrics are measured on (the reference evaluator reads saved images)."""
    return np.clip(np.rint(image), 0, 255).astype(np.float64)


def metric_table(
    model: IDEALNetwork, held_out: Mapping[str, Sequence[FusionPair]]
) -> dict[str, dict[str, dict[str, float]]]:
    """``{kind: {method: {metric: mean over the kind's pairs}}}`` for IDEAL and each baseline."""
    methods: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        "ideal": lambda a, b: fuse_images(model, a, b),
        **BASELINES,
    }
    table: dict[str, dict[str, dict[str, float]]] = {}
    for kind, pairs in held_out.items():
        table[kind] = {}
        for method, fuse in methods.items():
            rows = [fusion_metrics(as_saved(fuse(pair.a, pair.b)), pair.a, pair.b) for pair in pairs]
            table[kind][method] = {name: float(np.nanmean([row[name] for row in rows])) for name in METRICS}
    return table


@dataclass(frozen=True)
class WeakEvidence:
    """How far from an even mix the policy decides where the sources agree and where not."""

    agree_weight: float
    """Mean |w - 0.5| of the final weight where B was made equal to A."""
    agree_mean: float
    """Mean |m - 0.5| of the Beta policy's mean (before the modulation) there."""
    differ_weight: float
    """Mean |w - 0.5| where the sources differ."""
    differ_mean: float
    """Mean |m - 0.5| of the Beta policy's mean there."""


def weak_evidence_probe(model: IDEALNetwork, pair: FusionPair) -> WeakEvidence:
    """Fuse ``pair`` with its B replaced by A on the left half (so A == B there) and compare
    the decisions inside that half (away from its edge) with those on the right half."""
    a = pair.a.astype(np.float64)
    b = pair.b.astype(np.float64).copy()
    width = a.shape[1]
    half = width // 2
    b[:, :half] = a[:, :half]
    stride = model.config.stride
    # beyond the reach of the convolutions and the patches, where the image is wide enough
    margin = min(4 * model.config.patch, half // 2)
    with torch.inference_mode():
        output = model(to_unit_tensor(a), to_unit_tensor(b))
    weight = np.abs(output.weight[0, 0].numpy() - 0.5)
    mean = np.abs(output.mean[0, 0].numpy() - 0.5)
    agree_cols, differ_cols = slice(0, half - margin), slice(half + margin, width)
    return WeakEvidence(
        agree_weight=float(weight[:, agree_cols].mean()),
        agree_mean=float(mean[:, 0 : (half - margin) // stride].mean()),
        differ_weight=float(weight[:, differ_cols].mean()),
        differ_mean=float(mean[:, (half + margin) // stride :].mean()),
    )


# --------------------------------------------------------------------------- the runner


def _save_checkpoint(path: Path, model: IDEALNetwork, optimizer: torch.optim.Optimizer, step: int) -> None:
    """Write the checkpoint whole and atomically (a kill leaves the old one or the new one)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, temporary)
    os.replace(temporary, path)


def _step_seed(settings: FusionTrainSettings, step: int) -> int:
    return (settings.seed * 1_000_003 + step) % (2**63)


@runner
def run_fusion_training(
    settings: FusionTrainSettings,
    out: Path,
    *,
    resume: bool = False,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train IDEAL and measure it against the baselines on held-out pairs (module docstring);
    returns the summary (also ``summary.json``). ``on_step`` is called with each
    ``metrics.jsonl`` line."""
    folder = RunFolder(out, METRICS_FILE)
    config = settings.as_config()
    folder.begin(config, resume, may_grow=("steps",))
    finished = folder.finished(SUMMARY_FILE)
    if finished is not None and finished.get("steps") == settings.steps:
        return finished
    out = folder.out
    model = build_ideal(settings.model_config(), seed=settings.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.learning_rate)
    start = 0
    checkpoint = out / CHECKPOINT_FILE
    if folder.resuming and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
    kept = [record for record in folder.kept_records() if int(record.get("step", 0)) <= start]
    with folder.recording(kept, {"settings": config}) as log:
        pairs = training_pairs(settings)
        model.train()
        window: list[dict[str, float]] = []
        clock = time.perf_counter()
        for step in range(start + 1, settings.steps + 1):
            a, b = crop_batch(pairs, settings, step)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(_step_seed(settings, step))
                output = model(a, b, sample=True)
            terms = fusion_losses(output, a, b, settings.prior)
            loss = total_loss(terms, settings)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                window.append(
                    {
                        "loss": float(loss),
                        **{name: float(value) for name, value in terms.items()},
                        "weight_spread": float((output.weight - 0.5).abs().mean()),
                        "gate": float(output.gate.mean()),
                    }
                )
            if step % settings.log_every == 0 or step == settings.steps:
                record: dict[str, Any] = {"step": step}
                record.update({key: sum(row[key] for row in window) / len(window) for key in window[0]})
                record["seconds_per_step"] = (time.perf_counter() - clock) / len(window)
                log.append(record)
                if on_step is not None:
                    on_step(record)
                window, clock = [], time.perf_counter()
            if step % settings.checkpoint_every == 0 or step == settings.steps:
                _save_checkpoint(checkpoint, model, optimizer, step)
        model.eval()
        save_ideal(model, out / MODEL_FOLDER)
        held_out = held_out_pairs(settings)
        table = metric_table(model, held_out)
        probe = weak_evidence_probe(model, held_out[settings.kinds[0]][0])
    records = folder.read_records()
    summary = {
        "steps": settings.steps,
        "loss_first": records[0]["loss"] if records else None,
        "loss_last": records[-1]["loss"] if records else None,
        "model": str(out / MODEL_FOLDER),
        "held_out_pairs": {kind: len(pairs) for kind, pairs in held_out.items()},
        "metrics": list(METRICS),
        "table": table,
        "weak_evidence": asdict(probe),
    }
    folder.finish(SUMMARY_FILE, summary)
    return summary
