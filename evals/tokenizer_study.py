"""Train the bitwise visual tokenizer on the project's renders and measure it; then, as a
demonstration of UniAR's single-tokenizer loop, a tiny unified AR model that writes the codes
of a CLEVR-like scene from its description.

**Data** (:func:`study_images`): CLEVR-like puzzle renders
(:mod:`embodia.envs.puzzles.clevr_scene`, 1 to 3 objects, box-filtered down to
``height x width``, each with its scene description) and pinhole views of the simulator's
procedural houses (:func:`~embodia.perception.tokenizers.data.simulator_views`).
Held-out images are drawn apart: other puzzle seeds, and houses never seen in training.

**Tokenizer training**: Adam on the reconstruction MSE plus the quantiser's commitment and
entropy losses, a learning rate warmed up linearly and decayed by a cosine, a batch of
``batch_size`` training images per step (drawn by a generator seeded with the run's seed and
the step, so a resumed run draws the batches an uninterrupted one would). Held-out measures
every ``eval_every`` steps and at step 0 (the untrained tokenizer): PSNR over all pixels
(:func:`~embodia.perception.tokenizers.metrics.dataset_psnr`), SSIM, bit balance and entropy,
code usage and perplexity of the sub-codes. Baselines at the end: the mean training image (0
bits) and the best downsample codec within the tokenizer's bits per image
(:mod:`~embodia.perception.tokenizers.baselines`).

**The AR demonstration** (``ar_steps`` > 0; needs the puzzle renders): the trained tokenizer's
codes of the training puzzles are grouped (``ar_group``), a :class:`TinyUnifiedAR` is trained
teacher-forced on (description, codes), and on held-out descriptions it writes codes (sampled
at ``ar_temperature``) that go straight to the decoder. Measures: held-out per-bit cross
entropy and accuracy against a baseline that predicts each bit from its frequency in the
training codes, and how many of the generated bits survive decoding and encoding again (what
re-encoding would change).

The run folder: ``config.yaml``; ``metrics.jsonl`` (one line per logged step, ``phase``
``tokenizer`` or ``ar``; evaluation lines carry ``eval_*`` keys); ``checkpoint/`` (weights,
optimiser states, the step; written every ``checkpoint_every`` steps, swapped in whole);
``final/`` (``tokenizer.*``, and ``unified_ar.*`` with the demonstration); ``samples.png``
(held-out renders over their reconstructions), ``ar_samples.png`` (held-out puzzle renders,
their reconstructions, and what the AR model wrote from their descriptions), ``curves.png``
and ``summary.json``. ``resume=True`` continues from the last checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray

from embodia.core.limits import MAX_SET_SIZE, MAX_STEPS, check_image_size, check_range, check_seed
from embodia.core.runs import RecordLog, RunFolder, runner
from embodia.envs.puzzles.clevr_scene import describe, draw_scene, render_scene
from embodia.perception.tokenizers import baselines, metrics
from embodia.perception.tokenizers.autoencoder import (
    BitwiseTokenizer,
    TokenizerConfig,
    codec_throughput,
    images_to_tensor,
    load_tokenizer,
    reconstruct,
    save_tokenizer,
    tokenizer_loss,
)
from embodia.perception.tokenizers.bitwise_ar import (
    TinyUnifiedAR,
    UnifiedARConfig,
    WordVocab,
    check_grouping,
    generate_images,
    group_bits,
    per_bit_cross_entropy,
    save_unified_ar,
    split_words,
)
from embodia.perception.tokenizers.lfq import QUANTIZERS, QuantizerConfig, TokenizerError
from embodia.policies.recipes.curves import plot_curves

METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint"
FINAL = "final"
SOURCES = ("clevr", "sim", "mixed")
SIM_TRAIN_SCENES = 4
SIM_EVAL_SCENES = 2
SIM_EVAL_SCENE_OFFSET = 50
"""Held-out houses are ``procedural:seed=100*seed+50...``; training ones start at ``100*seed``."""
MAX_OBJECTS = 3
CURVE_KEYS = (
    "loss",
    "reconstruction",
    "eval_psnr",
    "eval_group_code_usage",
    "ar_loss",
    "eval_ar_bit_cross_entropy",
)
SAMPLE_COUNT = 8


@dataclass(frozen=True)
class TokenizerStudySettings:
    """A tokenizer training run and its optional AR demonstration (module docstring)."""

    source: Literal["clevr", "sim", "mixed"] = "mixed"
    """Training and held-out images: puzzle renders, simulator views, or half of each."""
    train_images: int = 512
    eval_images: int = 64
    height: int = 48
    width: int = 64
    quantizer: Literal["lfq", "bsq"] = "bsq"
    bits: int = 8
    """K: bits per code."""
    levels: int = 2
    """M: codes per grid position (feature levels)."""
    channels: tuple[int, ...] = (16, 32)
    """Encoder stage widths; the stride is 2^len(channels)."""
    commitment_weight: float = 0.25
    entropy_weight: float = 0.1
    diversity_gamma: float = 1.0
    inv_temperature: float = 100.0
    entropy_group_size: int | None = None
    """None: the exact entropy over 2^K codes; g: BSQ's grouped entropy."""
    steps: int = 3000
    batch_size: int = 16
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    log_every: int = 25
    eval_every: int = 250
    checkpoint_every: int = 100
    ar_steps: int = 0
    """Steps of the AR demonstration after the tokenizer's (0: none)."""
    ar_group: int = 2
    """g: the AR model writes g x g grid positions (all their levels) per step."""
    ar_width: int = 128
    ar_layers: int = 2
    ar_heads: int = 4
    ar_batch_size: int = 16
    ar_learning_rate: float = 1e-3
    ar_flip_probability: float = 0.0
    """Bitwise self-correction: the share of input bits flipped in training."""
    ar_temperature: float = 1.0
    """Sampling temperature of the pictures the AR model writes at the end (0: greedy)."""
    threads: int = 1
    """Torch CPU threads (more only wait on each other on a busy machine)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise TokenizerError(f"unknown source {self.source!r}: expected one of {', '.join(SOURCES)}")
        if self.quantizer not in QUANTIZERS:
            raise TokenizerError(
                f"unknown quantizer {self.quantizer!r}: expected one of {', '.join(QUANTIZERS)}"
            )
        object.__setattr__(self, "channels", tuple(self.channels))
        least = 2 if self.source == "mixed" else 1
        check_range("train_images", self.train_images, least, MAX_SET_SIZE, TokenizerError)
        check_range("eval_images", self.eval_images, least, MAX_SET_SIZE, TokenizerError)
        check_image_size("the images", self.height, self.width, TokenizerError)
        config = self.tokenizer_config()  # the quantiser's and the architecture's own checks
        config.grid(self.height, self.width)
        for name, high in (
            ("steps", MAX_STEPS),
            ("batch_size", 4096),
            ("log_every", MAX_STEPS),
            ("eval_every", MAX_STEPS),
            ("checkpoint_every", MAX_STEPS),
            ("ar_batch_size", 4096),
            ("threads", 256),
        ):
            _check_whole(name, getattr(self, name), 1, high)
        _check_whole("warmup_steps", self.warmup_steps, 0, MAX_STEPS)
        _check_whole("ar_steps", self.ar_steps, 0, MAX_STEPS)
        for name in ("learning_rate", "ar_learning_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, int | float) and 0 < value < math.inf):
                raise TokenizerError(f"{name} must be a finite number > 0, got {value!r}")
        check_range("ar_flip_probability", self.ar_flip_probability, 0.0, 0.5, TokenizerError)
        check_range("ar_temperature", self.ar_temperature, 0.0, 10.0, TokenizerError)
        if self.ar_steps:
            if self.source == "sim":
                raise TokenizerError(
                    "the AR demonstration needs described images: use source clevr or mixed, or ar_steps 0"
                )
            rows, cols = config.grid(self.height, self.width)
            check_grouping(rows, cols, self.ar_group)
            UnifiedARConfig(
                vocab_size=3,
                text_length=1,
                steps=(rows // self.ar_group) * (cols // self.ar_group),
                bits_per_step=self.ar_group**2 * config.bits_per_position,
                width=self.ar_width,
                layers=self.ar_layers,
                heads=self.ar_heads,
            )
        check_seed("seed", self.seed, TokenizerError)

    def tokenizer_config(self) -> TokenizerConfig:
        quantizer = QuantizerConfig(
            kind=self.quantizer,
            bits=self.bits,
            commitment_weight=self.commitment_weight,
            entropy_weight=self.entropy_weight,
            diversity_gamma=self.diversity_gamma,
            inv_temperature=self.inv_temperature,
            entropy_group_size=self.entropy_group_size,
        )
        return TokenizerConfig(quantizer=quantizer, levels=self.levels, channels=self.channels)

    def record(self) -> dict[str, Any]:
        """The settings as plain data (``config.yaml``)."""
        record = dataclasses.asdict(self)
        record["channels"] = list(self.channels)
        return record


def _check_whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TokenizerError(f"{name} must be an integer in {low}..{high}, got {value!r}")


# --------------------------------------------------------------------------- data


def clevr_renders(
    count: int, height: int, width: int, seed: Sequence[int] | int
) -> tuple[NDArray[np.uint8], list[str]]:
    """``count`` CLEVR-like scenes of 1 to ``MAX_OBJECTS`` objects, rendered, box-filtered to
    ``height x width``, and their descriptions (the puzzle's scene template)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    images, captions = [], []
    for _ in range(count):
        facts = {"objects": draw_scene(rng, int(rng.integers(1, MAX_OBJECTS + 1)))}
        full = Image.fromarray(render_scene(facts))
        images.append(np.asarray(full.resize((width, height), Image.Resampling.BOX)))
        captions.append(describe(facts, {}))
    return np.stack(images), captions


_RENDER_VIEWS = """
import json, sys
import numpy as np
from embodia.perception.tokenizers.data import simulator_views
arguments = json.loads(sys.argv[2])
np.save(sys.argv[1], simulator_views(**arguments))
"""


def views_in_child_process(
    scene_seeds: Sequence[int], views: int, height: int, width: int, seed: int
) -> NDArray[np.uint8]:
    """:func:`~embodia.perception.tokenizers.data.simulator_views` in a child Python process.
    The renderer's parallel kernels start an OpenMP team (numba, on the libgomp torch loaded)
    in the process that runs them, and torch's own operations then wait on that team's
    spinning worker: on a busy machine, training steps after rendering in the same process ran
    about 6 times slower than in a fresh process beside them."""
    import json
    import subprocess
    import sys
    import tempfile

    arguments = {
        "scene_seeds": list(scene_seeds),
        "views": views,
        "height": height,
        "width": width,
        "seed": seed,
    }
    with tempfile.TemporaryDirectory(prefix="embodia-views-") as folder:
        path = Path(folder) / "views.npy"
        done = subprocess.run(
            [sys.executable, "-c", _RENDER_VIEWS, str(path), json.dumps(arguments)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise TokenizerError(f"rendering the simulator views failed: {last}")
        views_array: NDArray[np.uint8] = np.load(path)
    return views_array


@dataclass(frozen=True)
class Split:
    """The images of one split, and the descriptions of its puzzle renders (the first ones)."""

    images: NDArray[np.uint8]
    captions: list[str]
    sources: list[str]
    """Per image: ``clevr`` or ``sim``."""


def study_images(settings: TokenizerStudySettings) -> tuple[Split, Split]:
    """The training and held-out images of ``settings`` (module docstring), deterministic in
    its seed."""
    splits = []
    for split, count in ((0, settings.train_images), (1, settings.eval_images)):
        puzzles = {"clevr": count, "sim": 0, "mixed": count // 2}[settings.source]
        parts: list[NDArray[np.uint8]] = []
        captions: list[str] = []
        if puzzles:
            images, captions = clevr_renders(puzzles, settings.height, settings.width, [settings.seed, split])
            parts.append(images)
        if count - puzzles:
            first = 100 * settings.seed + (SIM_EVAL_SCENE_OFFSET if split else 0)
            scenes = range(first, first + (SIM_EVAL_SCENES if split else SIM_TRAIN_SCENES))
            parts.append(
                views_in_child_process(
                    list(scenes), count - puzzles, settings.height, settings.width, settings.seed
                )
            )
        sources = ["clevr"] * puzzles + ["sim"] * (count - puzzles)
        splits.append(Split(np.concatenate(parts), captions, sources))
    return splits[0], splits[1]


# --------------------------------------------------------------------------- training pieces


def learning_rate_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps to ``peak``, then a cosine down to 5% of it at ``total``."""
    if warmup and step <= warmup:
        return peak * step / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def batch_indices(seed: int, phase: int, step: int, size: int, population: int) -> NDArray[np.int64]:
    """The training examples of one step: a function of the seed, the phase and the step only."""
    return np.random.default_rng([seed, phase, step]).integers(population, size=size)


def measure_tokenizer(
    tokenizer: BitwiseTokenizer, images: NDArray[np.uint8], sources: Sequence[str] | None = None
) -> dict[str, Any]:
    """Held-out measures of ``tokenizer`` on ``images`` (``eval_*`` keys), per source too."""
    reconstructions, bits = reconstruct(tokenizer, images)
    width = bits.shape[-1]
    group = max(g for g in range(1, min(width, 8) + 1) if width % g == 0)
    usage = metrics.code_usage_report(bits, group)
    result: dict[str, Any] = {
        "eval_psnr": metrics.dataset_psnr(images, reconstructions),
        "eval_psnr_median_image": float(np.median(metrics.psnr(images, reconstructions))),
        "eval_ssim": float(metrics.ssim(images, reconstructions).mean()),
        "eval_bit_balance": usage["bit_balance"],
        "eval_bit_entropy": usage["bit_entropy"],
        "eval_group_code_usage": usage["group_code_usage"],
        "eval_group_perplexity": usage["group_perplexity"],
        "eval_usage_group_size": group,
    }
    if sources is not None and len(set(sources)) > 1:
        for source in sorted(set(sources)):
            chosen = np.array([s == source for s in sources])
            result[f"eval_psnr_{source}"] = metrics.dataset_psnr(images[chosen], reconstructions[chosen])
            result[f"eval_ssim_{source}"] = float(
                metrics.ssim(images[chosen], reconstructions[chosen]).mean()
            )
    return result


def _save_checkpoint(out: Path, state: Mapping[str, Any]) -> None:
    """``state`` as ``checkpoint/state.pt``, swapped in whole: a kill during the save leaves the
    previous checkpoint."""
    staging = out / f".{CHECKPOINT}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    torch.save(dict(state), staging / "state.pt")
    final, retired = out / CHECKPOINT, out / f".{CHECKPOINT}.old"
    shutil.rmtree(retired, ignore_errors=True)
    if final.exists():
        os.replace(final, retired)
    os.replace(staging, final)
    shutil.rmtree(retired, ignore_errors=True)


def _load_checkpoint(out: Path) -> dict[str, Any] | None:
    for path in (out / CHECKPOINT / "state.pt", out / f".{CHECKPOINT}.old" / "state.pt"):
        if path.is_file():
            state: dict[str, Any] = torch.load(path, weights_only=False)
            return state
    return None


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _grid_picture(rows: Sequence[NDArray[np.uint8]], path: Path) -> None:
    """Rows of images side by side, rows stacked, as a PNG (2 pixels of white between)."""
    import imageio.v3 as iio

    def pad(image: NDArray[np.uint8]) -> NDArray[np.uint8]:
        return np.pad(image, ((1, 1), (1, 1), (0, 0)), constant_values=255)

    picture = np.concatenate([np.concatenate([pad(i) for i in row], axis=1) for row in rows], axis=0)
    iio.imwrite(path, picture)


# --------------------------------------------------------------------------- the run


class _Study:
    """The state of one run: data, models, optimisers, and the step done last."""

    def __init__(self, settings: TokenizerStudySettings, out: Path) -> None:
        self.settings = settings
        self.out = out
        self.train, self.held_out = study_images(settings)
        torch.manual_seed(settings.seed)
        self.tokenizer = BitwiseTokenizer(settings.tokenizer_config())
        self.optimizer = torch.optim.Adam(self.tokenizer.parameters(), lr=settings.learning_rate)
        self.train_tensor = images_to_tensor(self.train.images)
        self.done = 0
        self.ar: _ARDemo | None = None

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "step": self.done,
            "tokenizer": self.tokenizer.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }
        if self.ar is not None:
            state["ar"] = self.ar.model.state_dict()
            state["ar_optimizer"] = self.ar.optimizer.state_dict()
        return state

    def restore(self, state: Mapping[str, Any]) -> None:
        self.tokenizer.load_state_dict(state["tokenizer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.done = int(state["step"])
        if "ar" in state:
            self.ar = _ARDemo(self)
            self.ar.model.load_state_dict(state["ar"])
            self.ar.optimizer.load_state_dict(state["ar_optimizer"])

    def tokenizer_step(self, step: int) -> dict[str, Any]:
        settings = self.settings
        started = time.perf_counter()
        lr = learning_rate_at(step, settings.steps, settings.learning_rate, settings.warmup_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        chosen = batch_indices(settings.seed, 0, step, settings.batch_size, len(self.train_tensor))
        batch = self.train_tensor[torch.from_numpy(chosen)]
        self.tokenizer.train()
        losses = tokenizer_loss(self.tokenizer(batch), batch)
        self.optimizer.zero_grad()
        losses["loss"].backward()
        self.optimizer.step()
        line = {key: float(value.detach()) for key, value in losses.items()}
        line["train_psnr"] = 10 * math.log10(1.0 / max(line["reconstruction"], 1e-12))
        line["learning_rate"] = lr
        line["images_per_s"] = settings.batch_size / (time.perf_counter() - started)
        return line


class _ARDemo:
    """The AR demonstration's data and model, built from the trained tokenizer."""

    def __init__(self, study: _Study) -> None:
        settings = study.settings
        self.settings = settings
        tokenizer = study.tokenizer
        self.rows, self.cols = tokenizer.config.grid(settings.height, settings.width)
        train_count, eval_count = len(study.train.captions), len(study.held_out.captions)
        self.train_steps = self.encode(tokenizer, study.train.images[:train_count])
        self.eval_steps = self.encode(tokenizer, study.held_out.images[:eval_count])
        self.vocab = WordVocab.build(study.train.captions)
        captions = [*study.train.captions, *study.held_out.captions]
        text_length = max(len(split_words(caption)) for caption in captions)
        self.train_text = self.vocab.encode_batch(study.train.captions, text_length)
        self.eval_text = self.vocab.encode_batch(study.held_out.captions, text_length)
        config = UnifiedARConfig(
            vocab_size=len(self.vocab),
            text_length=text_length,
            steps=self.train_steps.shape[1],
            bits_per_step=self.train_steps.shape[2],
            width=settings.ar_width,
            layers=settings.ar_layers,
            heads=settings.ar_heads,
        )
        torch.manual_seed(settings.seed + 1)
        self.model = TinyUnifiedAR(config)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.ar_learning_rate)

    def encode(self, tokenizer: BitwiseTokenizer, images: NDArray[np.uint8]) -> torch.Tensor:
        _, bits = reconstruct(tokenizer, images)
        return group_bits(torch.from_numpy(bits), self.settings.ar_group)

    def step(self, step: int) -> dict[str, Any]:
        settings = self.settings
        started = time.perf_counter()
        lr = learning_rate_at(
            step, settings.ar_steps, settings.ar_learning_rate, min(settings.warmup_steps, step)
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        chosen = torch.from_numpy(
            batch_indices(settings.seed, 1, step, settings.ar_batch_size, len(self.train_steps))
        )
        noise = torch.Generator().manual_seed(settings.seed * 100_003 + step)
        self.model.train()
        losses = self.model.teacher_forced(
            self.train_text[chosen], self.train_steps[chosen], settings.ar_flip_probability, noise
        )
        self.optimizer.zero_grad()
        losses["loss"].backward()
        self.optimizer.step()
        line = {f"ar_{key}": float(value.detach()) for key, value in losses.items()}
        line["ar_learning_rate"] = lr
        line["ar_examples_per_s"] = settings.ar_batch_size / (time.perf_counter() - started)
        return line

    @torch.no_grad()
    def measure(self) -> dict[str, Any]:
        """Teacher-forced held-out per-bit cross entropy and accuracy, and the same of the
        baseline that predicts each bit by its frequency in the training codes."""
        self.model.eval()
        losses = self.model.teacher_forced(self.eval_text, self.eval_steps)
        frequency = self.train_steps.float().mean(0).clamp(1e-3, 1 - 1e-3)
        logits = torch.stack([torch.log1p(-frequency), torch.log(frequency)], dim=-1)
        baseline = per_bit_cross_entropy(logits.expand(*self.eval_steps.shape, 2), self.eval_steps)
        return {
            "eval_ar_bit_cross_entropy": float(losses["bit_cross_entropy"]),
            "eval_ar_bit_accuracy": float(losses["bit_accuracy"]),
            "eval_ar_baseline_bit_cross_entropy": float(baseline.mean()),
            "eval_ar_baseline_bit_accuracy": float(
                ((frequency > 0.5).long() == self.eval_steps).float().mean()
            ),
        }


RecordCallback = Callable[[dict[str, Any]], None]


@runner
def run_tokenizer_study(
    settings: TokenizerStudySettings,
    out: Path,
    *,
    resume: bool = False,
    on_record: RecordCallback | None = None,
) -> dict[str, Any]:
    """Train and measure the tokenizer (and the AR demonstration) into the run folder ``out``
    (module docstring); ``on_record`` gets each ``metrics.jsonl`` line as it is written.
    Returns the summary."""
    folder = RunFolder(out, METRICS)
    record = settings.record()
    folder.begin(record, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    out = folder.out
    started = time.perf_counter()
    with torch_threads(settings.threads):
        study = _Study(settings, out)
        saved = _load_checkpoint(out) if folder.resuming else None
        if saved is not None:
            study.restore(saved)
        resumed_after = study.done or None
        kept = [
            r for r in folder.kept_records() if isinstance(r.get("step"), int) and r["step"] <= study.done
        ]
        with folder.recording(kept, {"settings": record}) as log:
            _train(study, log, on_record)
        summary = _summarise(study, folder.read_records())
    summary["resumed_after_step"] = resumed_after
    summary["wall_s"] = time.perf_counter() - started
    folder.finish(SUMMARY, summary)
    return summary


def _train(study: _Study, log: RecordLog, on_record: RecordCallback | None) -> None:
    settings = study.settings

    def note(line: dict[str, Any]) -> None:
        log.append(line)
        if on_record is not None:
            on_record(line)

    if study.done == 0:
        note({"step": 0, "phase": "tokenizer", **measure_tokenizer(study.tokenizer, study.held_out.images)})
    for step in range(study.done + 1, settings.steps + 1):
        line = study.tokenizer_step(step)
        study.done = step
        last = step == settings.steps
        if step % settings.eval_every == 0 or last:
            line.update(measure_tokenizer(study.tokenizer, study.held_out.images, study.held_out.sources))
        if step % settings.checkpoint_every == 0 or last:
            _save_checkpoint(study.out, study.state())  # before the line: a logged step is kept
        if step % settings.log_every == 0 or step % settings.eval_every == 0 or last:
            note({"step": step, "phase": "tokenizer", **line})
    save_tokenizer(study.tokenizer, study.out / FINAL)
    if not settings.ar_steps:
        return
    if study.ar is None:
        study.ar = _ARDemo(study)
    demo = study.ar
    total = settings.steps + settings.ar_steps
    for step in range(study.done + 1, total + 1):
        ar_step = step - settings.steps
        line = demo.step(ar_step)
        study.done = step
        last = step == total
        if ar_step % settings.eval_every == 0 or last:
            line.update(demo.measure())
        if ar_step % settings.checkpoint_every == 0 or last:
            _save_checkpoint(study.out, study.state())
        if ar_step % settings.log_every == 0 or ar_step % settings.eval_every == 0 or last:
            note({"step": step, "phase": "ar", **line})
    save_unified_ar(demo.model, demo.vocab, settings.ar_group, study.out / FINAL)


def _summarise(study: _Study, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    settings, out = study.settings, study.out
    tokenizer = study.tokenizer
    held_out, train = study.held_out, study.train
    measured = measure_tokenizer(tokenizer, held_out.images, held_out.sources)
    reconstructions, _ = reconstruct(tokenizer, held_out.images[:SAMPLE_COUNT])
    _grid_picture([held_out.images[:SAMPLE_COUNT], reconstructions], out / "samples.png")
    bits = tokenizer.config.bits_per_image(settings.height, settings.width)
    average = baselines.mean_image(train.images)
    mean_copies = np.broadcast_to(average, held_out.images.shape)
    downsample = baselines.best_downsample(train.images, bits)
    downsampled = downsample(held_out.images)
    untrained = next((r for r in rows if r.get("step") == 0 and "eval_psnr" in r), {})
    summary: dict[str, Any] = {
        "settings": settings.record(),
        "steps": settings.steps,
        "train_images": len(train.images),
        "eval_images": len(held_out.images),
        "grid": list(tokenizer.config.grid(settings.height, settings.width)),
        "bits_per_position": tokenizer.config.bits_per_position,
        "bits_per_image": bits,
        "held_out": {key.removeprefix("eval_"): value for key, value in measured.items()},
        "untrained": {"psnr": untrained.get("eval_psnr"), "ssim": untrained.get("eval_ssim")},
        "baselines": {
            "mean_image": {
                "bits_per_image": 0,
                "psnr": metrics.dataset_psnr(held_out.images, mean_copies),
                "ssim": float(metrics.ssim(held_out.images, mean_copies).mean()),
            },
            "downsample": {
                "bits_per_image": downsample.bits_per_image,
                "rows": downsample.rows,
                "cols": downsample.cols,
                "bits_per_channel": downsample.bits_per_channel,
                "psnr": metrics.dataset_psnr(held_out.images, downsampled),
                "ssim": float(metrics.ssim(held_out.images, downsampled).mean()),
            },
        },
        "tokenizer": str(out / FINAL),
        "ar": None,
    }
    if study.ar is not None:
        summary["ar"] = _summarise_ar(study, study.ar)
    plot_curves(rows, out / "curves.png", CURVE_KEYS, title="bitwise tokenizer")
    return summary


def _summarise_ar(study: _Study, demo: _ARDemo) -> dict[str, Any]:
    settings = study.settings
    count = min(SAMPLE_COUNT, len(study.held_out.captions))
    captions = study.held_out.captions[:count]
    generator = torch.Generator().manual_seed(settings.seed)
    written, codes = generate_images(
        demo.model,
        study.tokenizer,
        demo.vocab,
        captions,
        settings.ar_group,
        height=settings.height,
        width=settings.width,
        temperature=settings.ar_temperature,
        generator=generator,
    )
    # What re-encoding would do: the codes of the decoded pictures against those written.
    _, again = reconstruct(study.tokenizer, written)
    renders = study.held_out.images[:count]
    reconstructions, _ = reconstruct(study.tokenizer, renders)
    _grid_picture([renders, reconstructions, written], study.out / "ar_samples.png")
    return {
        "steps": settings.ar_steps,
        "sequence_steps": demo.model.config.steps,
        "bits_per_step": demo.model.config.bits_per_step,
        "text_tokens": demo.model.config.text_length,
        "train_examples": len(demo.train_steps),
        "eval_examples": len(demo.eval_steps),
        **{key.removeprefix("eval_ar_"): value for key, value in demo.measure().items()},
        "reencoded_bit_agreement": float((torch.from_numpy(again) == codes).float().mean()),
        "sample_captions": captions,
        "model": str(study.out / FINAL),
    }


# --------------------------------------------------------------------------- benchmark


def tokenizer_throughput(
    batch_size: int = 32,
    height: int = 48,
    width: int = 64,
    repeats: int = 3,
    tokenizer_dir: Path | str | None = None,
    threads: int = 1,
) -> dict[str, float]:
    """Encode and decode throughput (images/s) of a tokenizer on a batch of ``batch_size``
    CLEVR-like renders, with ``threads`` torch threads: the tokenizer saved in
    ``tokenizer_dir``, or one of the default settings' architecture with fresh weights (the
    cost does not depend on the weights). On 2 shared cores, 2 threads measured 6 to 20 times
    slower than 1 (they wait on each other), hence the default."""
    with torch_threads(threads):
        if tokenizer_dir is None:
            torch.manual_seed(0)
            tokenizer = BitwiseTokenizer(
                TokenizerStudySettings(height=height, width=width).tokenizer_config()
            )
        else:
            tokenizer = load_tokenizer(tokenizer_dir)
        images, _ = clevr_renders(batch_size, height, width, 0)
        measured = codec_throughput(tokenizer, images, repeats)
    return {**measured, "height": float(height), "width": float(width), "threads": float(threads)}
