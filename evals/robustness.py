"""Robustness of a frozen vision encoder to corrupted images, with and without MAA adapters:
the adapters' training run and the study that measures them on puzzle renders.

**The images**: close-ups of CLEVR-like objects (:func:`embodia.evals.backdoor.closeup`: a crop
of a puzzle scene centred on one object), resized to the encoder's input side, labelled by
the centred object's colour and shape (8 x 3 = 24 classes); or, for :func:`run_maa`, the
images of a folder. Corruptions (:mod:`embodia.perception.corruptions`) act on the images the
encoder sees, after resizing.

**Training the adapters** (:func:`run_maa`, ``embodia train maa``): MAA adapters
(:mod:`embodia.perception.adapters.maa`) on a frozen encoder loaded from a directory, trained
on pairs of a clean image and a copy corrupted by a random kind and severity (a share
``clean_share`` of the copies left clean, so the adapters also learn to leave clean images
alone). ``adversarial_weight = 0`` trains the Euclidean-alignment baseline. The run folder
holds ``metrics.jsonl`` (a line every ``log_every`` steps: the window's mean losses),
``checkpoints/`` (adapters, discriminators and optimisers every ``save_every`` steps; a
resumed run continues from the last one and, every batch being drawn from ``(seed, step)``
and the learning rate decaying along half a cosine of the step, ends where an uninterrupted
run would), ``adapters/`` (the adapters alone, for
:func:`embodia.perception.adapters.maa.load_adapters`) and ``summary.json``.

**The study** (:func:`run_robustness_study`): per seed, a tiny random-weight encoder is
pretrained on clean close-ups (classification, so that it has features worth keeping) and
frozen; a linear probe is fitted on its clean features of the training images; adapters are
trained by the Euclidean baseline and by MAA with one budget; then, on held-out images under
every corruption and severity, each of ``frozen`` (no adapter), ``euclidean`` and ``maa`` is
measured:

- ``accuracy``: the clean-trained probe's accuracy on the (adapted) features;
- ``l2`` and ``cosine``: per block, the mean over tokens of the L2 distance and the cosine
  similarity between the features of the corrupted image and the frozen encoder's features of
  the clean one;
- ``support``: the manifold measure, the mean distance of an image's pooled final features to
  their ``KNN`` nearest clean training features (standardised), divided by the same for the
  clean held-out images (1: as near the clean support as clean images are).

The summary gives per method the clean accuracy, the mean corrupted accuracy, the share of the
frozen encoder's corrupted-minus-clean gap recovered, and the means per kind and per severity,
over the seeds. The folder holds ``seed-N/encoder`` (the pretrained encoder),
``seed-N/euclidean`` and ``seed-N/maa`` (the :func:`run_maa` runs), ``evals.jsonl`` (a line per
seed and stage as each finishes) and ``summary.json``; ``resume=True`` continues where it was cut.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import transformers
from torch import nn
from torch.nn import functional

from embodia.core.limits import MAX_SET_SIZE, check_range, check_seed, check_whole
from embodia.core.runs import RecordCallback, RunFolder, runner
from embodia.envs.puzzles.clevr_scene import COLOURS, SHAPES
from embodia.errors import EmbodiaError
from embodia.evals.backdoor import closeup
from embodia.perception.adapters.maa import (
    PIXEL_MEAN,
    PIXEL_STD,
    AdapterConfig,
    Adapters,
    MAAObjective,
    MAATrainer,
    block_outputs,
    encoder_hidden_size,
    encoder_image_size,
    freeze,
    load_adapters,
    load_vision_encoder,
    pixel_values,
    pooled_features,
    save_adapters,
)
from embodia.perception.corruptions import CORRUPTIONS, MAX_SEVERITY, corrupt

METRICS = "metrics.jsonl"
EVALS = "evals.jsonl"
SUMMARY = "summary.json"
CHECKPOINTS = "checkpoints"
ADAPTERS = "adapters"
CLEVR = "clevr"
"""``MAASettings.data`` for generated close-ups of puzzle renders."""
TEST_SET_OFFSET = 1_000_000
"""The close-up set of held-out images is the training set's seed plus this."""
LABELS: tuple[str, ...] = tuple(f"{colour} {shape}" for colour in COLOURS for shape in SHAPES)
"""The classes of a close-up: the centred object's colour and shape."""
KNN = 5
METHODS: tuple[str, ...] = ("frozen", "euclidean", "maa")
ARCHITECTURES: tuple[str, ...] = ("vit", "clip", "siglip")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
BATCH = 250
"""Images per forward pass when measuring."""


class RobustnessError(EmbodiaError, ValueError):
    """Robustness or MAA settings that cannot be used; the message names them."""


# --------------------------------------------------------------------------- images


def closeup_set(seed: int, count: int, image_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` close-ups of the set ``seed`` resized to ``image_size`` pixels a side
    (``N x S x S x 3`` uint8), and their labels (indices into :data:`LABELS`)."""
    from PIL import Image

    images, labels = [], []
    for index in range(count):
        crop, target = closeup(seed, index)
        resized = Image.fromarray(crop).resize((image_size, image_size), Image.Resampling.BILINEAR)
        images.append(np.asarray(resized, dtype=np.uint8))
        labels.append(LABELS.index(f"{target['colour']} {target['shape']}"))
    return np.stack(images), np.array(labels, dtype=np.int64)


def folder_images(folder: Path, count: int, image_size: int) -> np.ndarray:
    """The first ``count`` images of ``folder`` (by name; PNG, JPEG, BMP, WebP) as RGB, each
    cut to its centred square and resized to ``image_size`` pixels a side."""
    from PIL import Image, UnidentifiedImageError

    if not folder.is_dir():
        raise RobustnessError(f"data {folder} is neither {CLEVR!r} nor a folder of images")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)[:count]
    if not files:
        raise RobustnessError(f"data folder {folder} holds no image ({', '.join(IMAGE_SUFFIXES)})")
    images = []
    for file in files:
        try:
            with Image.open(file) as opened:
                image = opened.convert("RGB")
        except (UnidentifiedImageError, OSError) as error:
            raise RobustnessError(f"cannot read the image {file}: {error}") from None
        side = min(image.size)
        left, top = (image.width - side) // 2, (image.height - side) // 2
        square = image.crop((left, top, left + side, top + side))
        images.append(np.asarray(square.resize((image_size, image_size), Image.Resampling.BILINEAR)))
    return np.stack(images)


def corrupted_pairs(
    images: np.ndarray,
    rng: np.random.Generator,
    corruptions: Sequence[str],
    severities: Sequence[int],
    clean_share: float,
) -> np.ndarray:
    """A copy of each of ``images`` corrupted by a kind and severity drawn from ``rng`` (left
    clean with probability ``clean_share``)."""
    kinds = rng.integers(len(corruptions), size=len(images))
    levels = rng.choice(np.asarray(severities), size=len(images))
    clean = rng.random(len(images)) < clean_share
    seeds = rng.integers(2**31, size=len(images))
    return np.stack(
        [
            image if keep else corrupt(image, corruptions[kind], int(level), seed=int(seed))
            for image, kind, level, keep, seed in zip(images, kinds, levels, clean, seeds, strict=True)
        ]
    )


def corrupted_set(images: np.ndarray, kind: str, severity: int, seed: int) -> np.ndarray:
    """Every one of ``images`` corrupted by ``kind`` at ``severity``, each with its own seed
    drawn from ``(seed, kind, severity)``: the same set for every method measured."""
    rng = np.random.default_rng([seed, CORRUPTIONS.index(kind), severity])
    seeds = rng.integers(2**31, size=len(images))
    return np.stack(
        [corrupt(image, kind, severity, seed=int(s)) for image, s in zip(images, seeds, strict=True)]
    )


# --------------------------------------------------------------------------- training MAA


@dataclass(frozen=True)
class MAASettings:
    """An MAA training run (module docstring)."""

    encoder: str
    """The frozen vision encoder: a directory saved by transformers (ViT, CLIP, SigLIP)."""
    data: str = CLEVR
    """The clean images: ``clevr`` (generated close-ups of puzzle renders) or a folder."""
    images: int = 2000
    """How many clean images (the first ones of the folder, or generated)."""
    corruptions: tuple[str, ...] = CORRUPTIONS
    severities: tuple[int, ...] = (1, 2, 3, 4, 5)
    clean_share: float = 0.15
    """The share of training copies left clean."""
    rank: int = 32
    layers: tuple[int, ...] = ()
    """The blocks that get an adapter (none given: every block; negative from the last)."""
    adversarial_weight: float = 0.05
    """``lambda`` of the adversarial manifold term; 0 trains the Euclidean baseline."""
    objective: Literal["nonsaturating", "lsgan"] = "nonsaturating"
    adversarial_layers: tuple[int, ...] = (-1,)
    discriminator_width: int = 64
    steps: int = 1500
    batch_size: int = 64
    learning_rate: float = 3e-3
    discriminator_learning_rate: float = 1e-3
    log_every: int = 25
    save_every: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.encoder, str) or not self.encoder:
            raise RobustnessError("encoder must name a directory holding a vision encoder")
        if self.data != CLEVR and not Path(self.data).expanduser().is_dir():
            raise RobustnessError(f"data must be {CLEVR!r} or a folder of images, got {self.data!r}")
        check_whole(
            self, "images", "rank", "steps", "batch_size", "log_every", "save_every", error=RobustnessError
        )
        check_range("images", self.images, 1, MAX_SET_SIZE, RobustnessError)
        check_whole(self, "discriminator_width", error=RobustnessError)
        _check_corruptions(self.corruptions, self.severities)
        for name in ("clean_share",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise RobustnessError(f"{name} must be in [0, 1), got {value!r}")
        for name in ("learning_rate", "discriminator_learning_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise RobustnessError(f"{name} must be a positive number, got {value!r}")
        check_seed("seed", self.seed, RobustnessError)
        self.objective_config()  # MAA's own checks now

    def objective_config(self) -> MAAObjective:
        try:
            return MAAObjective(
                adversarial_weight=self.adversarial_weight,
                objective=self.objective,
                adversarial_layers=tuple(self.adversarial_layers),
            )
        except EmbodiaError as error:
            raise RobustnessError(str(error)) from None


def _check_corruptions(corruptions: Sequence[str], severities: Sequence[int]) -> None:
    unknown = [kind for kind in corruptions if kind not in CORRUPTIONS]
    if not corruptions or unknown:
        raise RobustnessError(
            f"corruptions must be some of {', '.join(CORRUPTIONS)}, got {list(corruptions)}"
        )
    if not severities or any(
        isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_SEVERITY for s in severities
    ):
        raise RobustnessError(f"severities must be whole numbers 1..{MAX_SEVERITY}, got {list(severities)}")


def _normalisation(directory: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The pixel mean and standard deviation of the encoder's image processor
    (``preprocessor_config.json``) when the directory has one; 0.5 and 0.5 otherwise."""
    processor = directory / "preprocessor_config.json"
    try:
        record = json.loads(processor.read_text(encoding="utf-8"))
        mean, std = record["image_mean"], record["image_std"]
        return tuple(float(m) for m in mean), tuple(float(s) for s in std)
    except (OSError, ValueError, KeyError, TypeError):
        return (PIXEL_MEAN,) * 3, (PIXEL_STD,) * 3


class _Pixels:
    """Turns uint8 images into the encoder's normalised input."""

    def __init__(self, encoder_dir: Path, image_size: int) -> None:
        mean, std = _normalisation(encoder_dir)
        self.image_size = image_size
        self.mean = torch.tensor(mean).view(1, -1, 1, 1)
        self.std = torch.tensor(std).view(1, -1, 1, 1)

    def __call__(self, images: np.ndarray) -> torch.Tensor:
        scaled = pixel_values(images, self.image_size, mean=0.0, std=1.0)
        return (scaled - self.mean) / self.std


def training_images(settings: MAASettings, image_size: int) -> np.ndarray:
    """The clean images of a run: generated close-ups of the set ``seed``, or a folder's."""
    if settings.data == CLEVR:
        return closeup_set(settings.seed, settings.images, image_size)[0]
    return folder_images(Path(settings.data).expanduser(), settings.images, image_size)


@runner
def run_maa(
    settings: MAASettings, out: Path, *, resume: bool = False, on_record: RecordCallback | None = None
) -> dict[str, Any]:
    """Train MAA adapters (or, with ``adversarial_weight = 0``, the Euclidean baseline) on the
    frozen encoder ``settings.encoder`` (module docstring); returns the summary (also
    ``summary.json``). ``on_record`` sees each metrics line as it is written."""
    folder = RunFolder(out, METRICS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    encoder_dir = Path(settings.encoder).expanduser()
    encoder = load_vision_encoder(encoder_dir)
    image_size = encoder_image_size(encoder)
    to_pixels = _Pixels(encoder_dir, image_size)
    images = training_images(settings, image_size)
    if len(images) < settings.batch_size:
        raise RobustnessError(f"batch_size {settings.batch_size} is more than the {len(images)} images")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        try:
            adapter_config = AdapterConfig.for_encoder(encoder, settings.rank, settings.layers or None)
        except EmbodiaError as error:
            raise RobustnessError(str(error)) from None
        adapters = Adapters(adapter_config).attach(encoder)
        trainer = MAATrainer(
            encoder,
            adapters,
            settings.objective_config(),
            learning_rate=settings.learning_rate,
            discriminator_learning_rate=settings.discriminator_learning_rate,
            discriminator_width=settings.discriminator_width,
        )
    checkpoints = folder.out / CHECKPOINTS
    start = 0
    if folder.resuming:
        start = _load_last_checkpoint(checkpoints, trainer)
    kept = [r for r in folder.kept_records() if int(r.get("step", 0)) <= start]
    started = time.perf_counter()
    with folder.recording(kept, {"settings": folder.config}) as log:
        window: list[dict[str, float]] = []
        for step in range(start + 1, settings.steps + 1):
            rng = np.random.default_rng([settings.seed, step])
            clean = images[rng.choice(len(images), settings.batch_size, replace=False)]
            corrupted = corrupted_pairs(
                clean, rng, settings.corruptions, settings.severities, settings.clean_share
            )
            trainer.scale_learning_rates(cosine_decay(step, settings.steps))
            window.append(trainer.step(to_pixels(clean), to_pixels(corrupted)))
            if step % settings.log_every == 0 or step == settings.steps:
                record = {
                    "step": step,
                    **{key: statistics.fmean(m[key] for m in window) for key in window[0]},
                    "images_per_s": len(window) * settings.batch_size / (time.perf_counter() - started),
                }
                log.append(record)
                if on_record is not None:
                    on_record(record)
                window, started = [], time.perf_counter()
            if step % settings.save_every == 0 or step == settings.steps:
                _save_checkpoint(checkpoints, step, trainer)
    records = folder.read_records()
    adapters.detach()
    saved = save_adapters(
        adapters,
        folder.out / ADAPTERS,
        meta={
            "encoder": str(encoder_dir),
            "steps": settings.steps,
            "adversarial_weight": settings.adversarial_weight,
        },
    )
    summary = {
        "settings": folder.config,
        "steps": settings.steps,
        "adapters": str(saved),
        "adapter_parameters": sum(p.numel() for p in adapters.parameters()),
        "distill_loss_first": records[0]["distill_loss"] if records else None,
        "distill_loss_last": records[-1]["distill_loss"] if records else None,
        "discriminator_accuracy_last": records[-1].get("discriminator_accuracy") if records else None,
    }
    folder.finish(SUMMARY, summary)
    return summary


def cosine_decay(step: int, steps: int) -> float:
    """The learning-rate factor of step ``step`` (1-based) of ``steps``: from 1 down to 0 along
    half a cosine."""
    return 0.5 * (1 + math.cos(math.pi * (step - 1) / steps))


def _save_checkpoint(folder: Path, step: int, trainer: MAATrainer) -> None:
    """``checkpoints/step-N.pt`` written whole (a temporary file renamed), then the older ones
    removed: a kill leaves at least one complete checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"step-{step:07d}.pt"
    temporary = folder / f".{target.name}.tmp"
    torch.save({"step": step, **trainer.state()}, temporary)
    os.replace(temporary, target)
    for older in folder.glob("step-*.pt"):
        if older != target:
            older.unlink()


def _load_last_checkpoint(folder: Path, trainer: MAATrainer) -> int:
    """The step of the last checkpoint, its state loaded into ``trainer`` (0 when none)."""
    found = sorted(folder.glob("step-*.pt"))
    if not found:
        return 0
    state = torch.load(found[-1], weights_only=True)
    trainer.load_state(state)
    return int(state["step"])


# --------------------------------------------------------------------------- the study


def tiny_vision_encoder(
    architecture: str,
    *,
    image_size: int = 32,
    patch_size: int = 8,
    hidden_size: int = 64,
    layers: int = 4,
    heads: int = 4,
    seed: int = 0,
) -> transformers.PreTrainedModel:
    """A random-weight vision tower built from a transformers config: ``vit`` (``ViTModel``),
    ``clip`` (``CLIPVisionModel``) or ``siglip`` (``SiglipVisionModel``)."""
    shape = {
        "image_size": image_size,
        "patch_size": patch_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 2 * hidden_size,
    }
    builders = {
        "vit": (transformers.ViTConfig, transformers.ViTModel),
        "clip": (transformers.CLIPVisionConfig, transformers.CLIPVisionModel),
        "siglip": (transformers.SiglipVisionConfig, transformers.SiglipVisionModel),
    }
    if architecture not in builders:
        raise RobustnessError(f"architecture must be one of {', '.join(builders)}, got {architecture!r}")
    config_class, model_class = builders[architecture]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model_class(config_class(**shape))


def pretrain_encoder(
    encoder: nn.Module,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    steps: int,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    seed: int = 0,
) -> list[float]:
    """Train ``encoder`` (every weight) with a linear head on the mean of its last block's
    tokens to classify ``images`` by ``labels``; then freeze it. The loss of each step."""
    image_size = images.shape[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        hidden = encoder_hidden_size(encoder)
        head = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, len(LABELS)))
    encoder.train()
    encoder.requires_grad_(True)
    optimizer = torch.optim.AdamW(
        [*encoder.parameters(), *head.parameters()], lr=learning_rate, weight_decay=0.01
    )
    rng = np.random.default_rng([seed, 1 << 20])
    losses = []
    for _ in range(steps):
        chosen = rng.choice(len(images), min(batch_size, len(images)), replace=False)
        logits = head(pooled_features(encoder, pixel_values(images[chosen], image_size)))
        loss = nn.functional.cross_entropy(logits, torch.from_numpy(labels[chosen]))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    freeze(encoder)
    return losses


class LinearProbe:
    """Multinomial logistic regression on standardised features, fitted by L-BFGS from zero
    weights (deterministic), with an L2 penalty ``l2`` on the weights."""

    def __init__(
        self, features: torch.Tensor, labels: np.ndarray, *, l2: float = 1e-3, iterations: int = 200
    ) -> None:
        self.mean = features.mean(0)
        self.std = features.std(0).clamp_min(1e-6)
        standardised = (features - self.mean) / self.std
        self.linear = nn.Linear(features.shape[1], int(labels.max()) + 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        optimizer = torch.optim.LBFGS(
            self.linear.parameters(), max_iter=iterations, line_search_fn="strong_wolfe"
        )
        targets = torch.from_numpy(labels)

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = (
                nn.functional.cross_entropy(self.linear(standardised), targets)
                + l2 * self.linear.weight.pow(2).sum()
            )
            loss.backward()
            return loss

        optimizer.step(closure)
        self.linear.requires_grad_(False)

    def predict(self, features: torch.Tensor) -> np.ndarray:
        predicted: np.ndarray = self.linear((features - self.mean) / self.std).argmax(1).numpy()
        return predicted


def support_distance(features: torch.Tensor, bank: torch.Tensor, k: int = KNN) -> torch.Tensor:
    """Per row of ``features``, the mean distance to its ``k`` nearest rows of ``bank``, both
    standardised by ``bank``'s per-dimension mean and standard deviation."""
    mean, std = bank.mean(0), bank.std(0).clamp_min(1e-6)
    distances = torch.cdist((features - mean) / std, (bank - mean) / std)
    return distances.topk(min(k, len(bank)), dim=1, largest=False).values.mean(1)


def feature_alignment(
    adapted: Sequence[torch.Tensor], clean: Sequence[torch.Tensor]
) -> tuple[list[float], list[float]]:
    """Per block, the mean over tokens of the L2 distance and of the cosine similarity between
    ``adapted`` and ``clean`` features (lists of ``N x T x hidden``)."""
    l2 = [float((a - c).norm(dim=-1).mean()) for a, c in zip(adapted, clean, strict=True)]
    cosine = [
        float(functional.cosine_similarity(a, c, dim=-1).mean()) for a, c in zip(adapted, clean, strict=True)
    ]
    return l2, cosine


def encode(
    encoder: nn.Module, to_pixels: Callable[[np.ndarray], torch.Tensor], images: np.ndarray
) -> list[torch.Tensor]:
    """The block outputs of ``encoder`` for ``images``, batch by batch, concatenated."""
    with torch.no_grad():
        batches = [
            block_outputs(encoder, to_pixels(images[i : i + BATCH])) for i in range(0, len(images), BATCH)
        ]
    return [torch.cat([batch[layer] for batch in batches]) for layer in range(len(batches[0]))]


@dataclass(frozen=True)
class RobustnessSettings:
    """The study (module docstring): a tiny encoder pretrained on clean close-ups, then the
    Euclidean baseline and MAA adapters trained with one budget, per seed."""

    architecture: Literal["vit", "clip", "siglip"] = "vit"
    image_size: int = 32
    patch_size: int = 8
    hidden_size: int = 64
    layers: int = 4
    heads: int = 4
    train_images: int = 2000
    test_images: int = 500
    pretrain_steps: int = 400
    maa: Mapping[str, Any] | None = None
    """:class:`MAASettings` fields for both adapter runs (``steps``, ``rank``, ...) besides
    ``encoder``, ``data``, ``images``, ``seed``, ``corruptions`` and ``severities``, which the
    study sets; ``adversarial_weight`` is MAA's (the baseline's is 0)."""
    corruptions: tuple[str, ...] = CORRUPTIONS
    severities: tuple[int, ...] = (1, 2, 3, 4, 5)
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise RobustnessError(
                f"architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}"
            )
        check_whole(self, "image_size", "patch_size", "hidden_size", "layers", "heads", error=RobustnessError)
        check_whole(self, "train_images", "test_images", "pretrain_steps", error=RobustnessError)
        if self.image_size % self.patch_size or self.hidden_size % self.heads:
            raise RobustnessError(
                "image_size must be a multiple of patch_size and hidden_size a multiple of heads, got "
                f"{self.image_size}/{self.patch_size} and {self.hidden_size}/{self.heads}"
            )
        _check_corruptions(self.corruptions, self.severities)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise RobustnessError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        for seed in self.seeds:
            check_seed("seeds", seed, RobustnessError)
        self.maa_settings("encoder", 0, 0.0)  # the adapter runs' own checks now

    def maa_settings(self, encoder: str, seed: int, adversarial_weight: float | None) -> MAASettings:
        """The settings of one adapter run of the study (``adversarial_weight`` None: MAA's)."""
        fields = dict(self.maa or {})
        fixed = {"encoder", "data", "images", "seed", "corruptions", "severities"}
        if fixed & set(fields):
            raise RobustnessError(f"maa may not set {', '.join(sorted(fixed & set(fields)))}: the study does")
        if adversarial_weight is not None:
            fields["adversarial_weight"] = adversarial_weight
        try:
            return MAASettings(
                encoder=encoder,
                images=self.train_images,
                corruptions=self.corruptions,
                severities=self.severities,
                seed=seed,
                **fields,
            )
        except TypeError as error:
            raise RobustnessError(f"maa: {error}") from None


@runner
def run_robustness_study(
    settings: RobustnessSettings, out: Path, *, resume: bool = False, on_record: RecordCallback | None = None
) -> dict[str, Any]:
    """Pretrain, train the adapters, measure every method under every corruption (module
    docstring); returns the summary (also ``summary.json``)."""
    folder = RunFolder(out, EVALS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    kept = folder.kept_records()
    done = {(r["seed"], r["stage"]): r for r in kept if "stage" in r}
    with folder.recording(kept, {"settings": folder.config}) as log:

        def record(line: dict[str, Any]) -> None:
            log.append(line)
            done[(line["seed"], line["stage"])] = line
            if on_record is not None:
                on_record(line)

        for seed in settings.seeds:
            _study_seed(settings, folder.out / f"seed-{seed}", seed, done, record)
    summary = summarise(settings, [done[(seed, method)] for seed in settings.seeds for method in METHODS])
    summary["pretrain"] = [done[(seed, "pretrain")] for seed in settings.seeds]
    folder.finish(SUMMARY, summary)
    return summary


def _study_seed(
    settings: RobustnessSettings,
    out: Path,
    seed: int,
    done: Mapping[tuple[int, str], Mapping[str, Any]],
    record: Callable[[dict[str, Any]], None],
) -> None:
    """Seed ``seed`` of the study in ``out``: the encoder pretrained, both adapter runs, the
    three methods measured; the stages in ``done`` are skipped, each new one's line goes to
    ``record``."""
    train, train_labels = closeup_set(seed, settings.train_images, settings.image_size)
    test, test_labels = closeup_set(seed + TEST_SET_OFFSET, settings.test_images, settings.image_size)
    encoder_dir = out / "encoder"
    if not (encoder_dir / "config.json").is_file() or (seed, "pretrain") not in done:
        tower = tiny_vision_encoder(
            settings.architecture,
            image_size=settings.image_size,
            patch_size=settings.patch_size,
            hidden_size=settings.hidden_size,
            layers=settings.layers,
            heads=settings.heads,
            seed=seed,
        )
        losses = pretrain_encoder(tower, train, train_labels, steps=settings.pretrain_steps, seed=seed)
        staging = out / ".encoder.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        tower.save_pretrained(staging)
        shutil.rmtree(encoder_dir, ignore_errors=True)
        os.replace(staging, encoder_dir)
        record({"seed": seed, "stage": "pretrain", "loss_first": losses[0], "loss_last": losses[-1]})
    runs = {
        "euclidean": settings.maa_settings(str(encoder_dir), seed, 0.0),
        "maa": settings.maa_settings(str(encoder_dir), seed, None),
    }
    for method, maa_settings in runs.items():
        if (seed, method) not in done:
            run_maa(maa_settings, out / method, resume=(out / method).exists())
    to_pixels = _Pixels(encoder_dir, settings.image_size)
    reference = CleanReference(
        load_vision_encoder(encoder_dir), to_pixels, train, train_labels, test, test_labels
    )
    corrupted = {
        (kind, severity): corrupted_set(test, kind, severity, seed)
        for kind in settings.corruptions
        for severity in settings.severities
    }
    for method in METHODS:
        if (seed, method) in done:
            continue
        encoder = load_vision_encoder(encoder_dir)
        if method != "frozen":
            load_adapters(encoder, out / method / ADAPTERS)
        by_corruption = {
            kind: {
                str(severity): reference.measure(encoder, corrupted[(kind, severity)])
                for severity in settings.severities
            }
            for kind in settings.corruptions
        }
        record(
            {
                "seed": seed,
                "stage": method,
                "clean": reference.measure(encoder, test),
                "corrupted": by_corruption,
            }
        )


class CleanReference:
    """What the measures compare with, from the frozen encoder on clean images: the probe
    fitted on the training images' pooled features (also the support's bank), and the
    held-out images' features and labels."""

    def __init__(
        self,
        frozen: nn.Module,
        to_pixels: Callable[[np.ndarray], torch.Tensor],
        train: np.ndarray,
        train_labels: np.ndarray,
        test: np.ndarray,
        test_labels: np.ndarray,
    ) -> None:
        self.to_pixels = to_pixels
        self.bank = encode(frozen, to_pixels, train)[-1].mean(1)
        self.probe = LinearProbe(self.bank, train_labels)
        self.clean = encode(frozen, to_pixels, test)
        self.labels = test_labels
        self.clean_support = float(support_distance(self.clean[-1].mean(1), self.bank).mean())

    def measure(self, encoder: nn.Module, images: np.ndarray) -> dict[str, Any]:
        """The probe's accuracy, the alignment per block and the support distance of
        ``encoder``'s features of ``images`` (the held-out images, corrupted or not)."""
        features = encode(encoder, self.to_pixels, images)
        pooled = features[-1].mean(1)
        l2, cosine = feature_alignment(features, self.clean)
        return {
            "accuracy": float((self.probe.predict(pooled) == self.labels).mean()),
            "l2": l2,
            "cosine": cosine,
            "support": float(support_distance(pooled, self.bank).mean()) / self.clean_support,
        }


def summarise(settings: RobustnessSettings, lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per method, over the seeds: clean accuracy, mean corrupted accuracy, the share of the
    frozen encoder's corrupted-minus-clean gap recovered, accuracy per kind and per severity,
    and the alignment and support measures averaged over every corrupted set."""
    by_method: dict[str, list[Mapping[str, Any]]] = {method: [] for method in METHODS}
    for line in lines:
        by_method[line["stage"]].append(line)

    def cells(line: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return [cell for severities in line["corrupted"].values() for cell in severities.values()]

    def mean(values: Sequence[float]) -> float:
        return statistics.fmean(values)

    result: dict[str, Any] = {
        "settings": json.loads(json.dumps(asdict(settings), default=dict)),
        "methods": {},
    }
    for method, rows in by_method.items():
        depth = len(rows[0]["clean"]["l2"])
        result["methods"][method] = {
            "clean_accuracy": mean([r["clean"]["accuracy"] for r in rows]),
            "corrupted_accuracy": mean([mean([c["accuracy"] for c in cells(r)]) for r in rows]),
            "corrupted_accuracy_per_seed": [mean([c["accuracy"] for c in cells(r)]) for r in rows],
            "by_corruption": {
                kind: mean([mean([c["accuracy"] for c in r["corrupted"][kind].values()]) for r in rows])
                for kind in settings.corruptions
            },
            "by_severity": {
                str(s): mean(
                    [
                        mean([r["corrupted"][kind][str(s)]["accuracy"] for kind in settings.corruptions])
                        for r in rows
                    ]
                )
                for s in settings.severities
            },
            "l2": [mean([mean([c["l2"][layer] for c in cells(r)]) for r in rows]) for layer in range(depth)],
            "cosine": [
                mean([mean([c["cosine"][layer] for c in cells(r)]) for r in rows]) for layer in range(depth)
            ],
            "support": mean([mean([c["support"] for c in cells(r)]) for r in rows]),
            "clean_support": mean([r["clean"]["support"] for r in rows]),
        }
    frozen = result["methods"]["frozen"]
    gap = frozen["clean_accuracy"] - frozen["corrupted_accuracy"]
    for numbers in result["methods"].values():
        numbers["gap_recovered"] = (
            (numbers["corrupted_accuracy"] - frozen["corrupted_accuracy"]) / gap if gap > 0 else None
        )
        numbers["clean_accuracy_change"] = numbers["clean_accuracy"] - frozen["clean_accuracy"]
    return result


def adapter_overhead(
    batch_size: int = 64, repeats: int = 5, rounds: int = 7, seed: int = 0
) -> dict[str, float]:
    """Images per second through the study's tiny ViT, frozen and with adapters after every
    block (rank 32): what the adapters cost at inference. For the benchmark. The two are timed
    in alternating rounds after a warm-up of each, and each rate is the median round's, so a
    change of the machine's load or a first call's set-up falls on both alike."""
    encoder = tiny_vision_encoder("vit", seed=seed)
    freeze(encoder)
    pixels = torch.randn(batch_size, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
    adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=32))

    def rate() -> float:
        with torch.no_grad():
            started = time.perf_counter()
            for _ in range(repeats):
                encoder(pixel_values=pixels)
        return batch_size * repeats / (time.perf_counter() - started)

    measured: dict[str, list[float]] = {"frozen": [], "adapted": []}
    for round_ in range(rounds + 1):
        for kind in ("frozen", "adapted"):
            if kind == "adapted":
                adapters.attach(encoder)
            value = rate()
            if kind == "adapted":
                adapters.detach()
            if round_:  # round 0 warms both up
                measured[kind].append(value)
    frozen, adapted = (float(np.median(measured[kind])) for kind in ("frozen", "adapted"))
    return {"frozen_images_per_s": frozen, "adapted_images_per_s": adapted}
