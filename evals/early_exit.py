"""Early-exit networks measured: calibration (ECE) against early-exit failure prediction (EEFP)
as proxies for the compute an early-exit network saves (``docs/early_exit.md``).

**Metrics** (on held-out samples; a head's *confidence* is its max softmax probability):

- :func:`expected_calibration_error`: ECE with equal-width confidence bins, per head.
- :func:`eefp`: per head but the last, the AUROC of the confidence against *exiting here is
  safe* (the head is right, or no later head is:
  :func:`embodia.policies.early_exit.safe_to_exit`), safe samples positive. A ranking score: temperature
  scaling keeps every prediction, and reorders two samples only where their other logits are
  spread differently (or their confidences were both rounded to 1); a head where every sample is
  safe (or none is) has none.
- :func:`cost_accuracy_curve`: one point per threshold (every distinct confidence, and one above
  them all): the mean share of the full network's MACs the samples spend, exiting at the first
  head whose confidence reaches the threshold, and their accuracy.
- :func:`accuracy_at_budget`: the best accuracy of a threshold spending at most a share of the
  full MACs (25/50/75% in the report); :func:`efficiency`: the area under that best-accuracy
  envelope from the cheapest point to the full network, divided by its width (the accuracy
  the network keeps, on average over budgets).

**The study** (:func:`run_early_exit_study`): for every dataset (scikit-learn's bundled digits;
close-ups of puzzle renders labelled by the centred object's colour and shape), architecture
(:class:`~embodia.policies.early_exit.EarlyExitCNN`, :class:`~embodia.policies.early_exit.EarlyExitViT`)
and seed, a network is trained jointly on the training split, then four methods are compared on
the test split (temperatures are fitted on a held-out split):

- ``baseline``: the heads as trained;
- ``calibrated``: a temperature per head fitted on the held-out split;
- ``ce-heads``: the heads trained further, backbone frozen, by cross-entropy on the training
  split (a control: the same data and steps as the next, without its objective);
- ``eefp``: the heads trained further in the same way with the failure-prediction term.

(Retraining the heads on the held-out split instead was tried: it lowered the intermediate
heads' accuracy on the puzzle close-ups with either objective; a few hundred samples are too
few for the heads' 200 steps.)

Each method's gain is its efficiency minus the baseline's on the same network; over every
network and method the report correlates the gains with the change in EEFP and in ECE
(Spearman and Pearson). The folder holds ``evals.jsonl`` (one line per network, written as it
finishes; ``resume=True`` skips those), ``metrics.jsonl`` (the training losses every
``log_every`` steps) and ``summary.json``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodia.core.limits import check_seed, check_whole
from embodia.core.runs import RecordCallback, RecordLog, RunFolder, read_run_records, runner
from embodia.core.scores import auroc, calibration_error
from embodia.evals.robustness import LABELS, TEST_SET_OFFSET, closeup_set
from embodia.policies.early_exit import (
    EarlyExitCNN,
    EarlyExitError,
    EarlyExitViT,
    TrainingSettings,
    confidences,
    exit_costs,
    exit_decisions,
    finetune_heads,
    fit_temperatures,
    head_logits,
    safe_to_exit,
    train_jointly,
)

EVALS = "evals.jsonl"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
DATASETS: tuple[str, ...] = ("digits", "puzzles")
ARCHITECTURES: tuple[str, ...] = ("cnn", "vit")
METHODS: tuple[str, ...] = ("baseline", "calibrated", "ce-heads", "eefp")
BUDGETS: tuple[float, ...] = (0.25, 0.5, 0.75)
HELD_OUT_OFFSET = 2_000_000
"""The puzzle close-ups of the held-out split are the training set's seed plus this (the test
split's, plus :data:`~embodia.evals.robustness.TEST_SET_OFFSET`)."""


# --------------------------------------------------------------------------- metrics


def _check_heads(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    confidence, correct = np.asarray(confidence, dtype=np.float64), np.asarray(correct, dtype=bool)
    if confidence.ndim != 2 or confidence.shape != correct.shape or confidence.shape[1] == 0:
        raise EarlyExitError(
            "confidence and correctness are heads x samples of one shape, "
            f"got {confidence.shape} and {correct.shape}"
        )
    return confidence, correct


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int = 15) -> list[float]:
    """Per head, the expected calibration error over ``bins`` equal-width confidence bins
    (:func:`embodia.core.scores.calibration_error`)."""
    confidence, correct = _check_heads(confidence, correct)
    return [calibration_error(conf, right, bins) for conf, right in zip(confidence, correct, strict=True)]


def eefp(confidence: np.ndarray, correct: np.ndarray) -> list[float | None]:
    """Per head but the last: AUROC of the confidence, safe exits positive (module docstring);
    None where the safe and unsafe samples are not both present."""
    confidence, correct = _check_heads(confidence, correct)
    safe = safe_to_exit(correct)
    out: list[float | None] = []
    for conf, target in zip(confidence[:-1], safe[:-1], strict=True):
        out.append(auroc(conf[target], conf[~target]) if target.any() and not target.all() else None)
    return out


def cost_accuracy_curve(
    confidence: np.ndarray, correct: np.ndarray, costs: Sequence[float]
) -> list[tuple[float, float]]:
    """(mean share of the full MACs, accuracy) for each threshold, cheapest first (module
    docstring); ``costs`` are the cumulative MACs of each head."""
    confidence, correct = _check_heads(confidence, correct)
    if len(costs) != confidence.shape[0]:
        raise EarlyExitError(f"{len(costs)} costs for {confidence.shape[0]} heads")
    share = np.asarray(costs, dtype=np.float64) / float(costs[-1])
    samples = np.arange(confidence.shape[1])
    points = set()
    for threshold in [*np.unique(confidence[:-1]), math.inf]:
        exits = exit_decisions(confidence, float(threshold))
        points.add((float(share[exits].mean()), float(correct[exits, samples].mean())))
    return sorted(points)


def accuracy_at_budget(curve: Sequence[tuple[float, float]], budget: float) -> float | None:
    """The best accuracy of a point of ``curve`` spending at most ``budget`` of the full MACs
    (None when even the cheapest spends more)."""
    reachable = [accuracy for cost, accuracy in curve if cost <= budget + 1e-12]
    return max(reachable) if reachable else None


def efficiency(curve: Sequence[tuple[float, float]]) -> float:
    """The mean, over budgets from the cheapest point's cost to the full network, of the best
    accuracy reachable within the budget (the area under the envelope over its width)."""
    if not curve:
        raise EarlyExitError("efficiency needs a cost-accuracy curve with at least one point")
    start, end = curve[0][0], max(cost for cost, _ in curve)
    if end <= start:
        return max(accuracy for _, accuracy in curve)
    area, best = 0.0, curve[0][1]
    for (cost, accuracy), (following, _) in zip(curve, [*curve[1:], (end, 0.0)], strict=True):
        best = max(best, accuracy)
        area += best * (min(following, end) - cost)
    return area / (end - start)


def measure(
    logits: np.ndarray,
    labels: np.ndarray,
    costs: Sequence[float],
    temperatures: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Every metric of one method on one split: per-head accuracy, ECE and EEFP (and their
    means over the intermediate heads), accuracy at each budget, efficiency and the curve."""
    confidence = confidences(logits, temperatures)
    correct = np.asarray(logits).argmax(-1) == np.asarray(labels)[None, :]
    curve = cost_accuracy_curve(confidence, correct, costs)
    ece = expected_calibration_error(confidence, correct)
    failure = eefp(confidence, correct)
    defined = [value for value in failure if value is not None]
    return {
        "accuracy": correct.mean(axis=1).tolist(),
        "ece": ece,
        "ece_mean": statistics.fmean(ece[:-1]),
        "eefp": failure,
        "eefp_mean": statistics.fmean(defined) if defined else None,
        "accuracy_at": {f"{budget:.2f}": accuracy_at_budget(curve, budget) for budget in BUDGETS},
        "efficiency": efficiency(curve),
        "curve": [[round(cost, 5), round(accuracy, 5)] for cost, accuracy in curve],
    }


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Splits:
    train: tuple[torch.Tensor, torch.Tensor]
    held_out: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    num_classes: int

    @property
    def image_shape(self) -> tuple[int, int, int]:
        channels, height, width = self.train[0].shape[1:]
        return int(channels), int(height), int(width)


def _tensors(images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.as_tensor(images, dtype=torch.float32), torch.as_tensor(labels, dtype=torch.long)


def digits_splits(seed: int) -> Splits:
    """scikit-learn's bundled 8x8 digits (1,797 images, 10 classes), shuffled by ``seed`` into
    60% training, 20% held-out and 20% test, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.asarray(digits.images, dtype=np.float32)[:, None] / 16.0
    labels = np.asarray(digits.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(images))
    cut1, cut2 = int(0.6 * len(order)), int(0.8 * len(order))
    parts = [order[:cut1], order[cut1:cut2], order[cut2:]]
    train, held_out, test = (_tensors(images[p], labels[p]) for p in parts)
    return Splits(train, held_out, test, 10)


def puzzle_splits(seed: int, train_images: int, image_size: int) -> Splits:
    """Close-ups of puzzle renders labelled by the centred object's colour and shape (24
    classes): ``train_images`` for training and a quarter as many each for the held-out and
    test splits, drawn from their own sets; pixels scaled to [-1, 1]."""

    def split(set_seed: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = closeup_set(set_seed, count, image_size)
        pixels = images.astype(np.float32).transpose(0, 3, 1, 2) / 127.5 - 1.0
        return _tensors(pixels, labels)

    other = max(1, train_images // 4)
    return Splits(
        split(seed, train_images),
        split(seed + HELD_OUT_OFFSET, other),
        split(seed + TEST_SET_OFFSET, other),
        len(LABELS),
    )


# --------------------------------------------------------------------------- the study


@dataclass(frozen=True)
class EarlyExitSettings:
    """The study (module docstring)."""

    datasets: tuple[str, ...] = DATASETS
    architectures: tuple[str, ...] = ARCHITECTURES
    seeds: tuple[int, ...] = (0, 1, 2)
    train_steps: int = 600
    """Joint training steps of each network."""
    finetune_steps: int = 200
    """Steps of the ``ce-heads`` and ``eefp`` head retraining."""
    failure_weight: float = 3.0
    """Weight of the failure-prediction term (``eefp``): its binary cross-entropy, averaged
    over the intermediate heads and the batch, against the heads' summed cross-entropies."""
    batch_size: int = 64
    cnn_learning_rate: float = 3e-3
    """Joint training's peak learning rate for the CNNs (cosine decay)."""
    vit_learning_rate: float = 3e-4
    """... and for the ViTs: at the CNNs' rate a ViT's first head is as good as its last (its
    blocks learn little beyond a bag of patches), which leaves nothing to exit early for."""
    finetune_learning_rate: float = 1e-3
    puzzle_images: int = 2000
    """Training close-ups per puzzle network (the held-out and test splits get a quarter each)."""
    image_size: int = 24
    """Side of a puzzle close-up in pixels (a multiple of 4, the ViT's patch)."""
    log_every: int = 25

    def __post_init__(self) -> None:
        for name, allowed, chosen in (
            ("datasets", DATASETS, self.datasets),
            ("architectures", ARCHITECTURES, self.architectures),
        ):
            unknown = [value for value in chosen if value not in allowed]
            if not chosen or unknown or len(set(chosen)) != len(chosen):
                raise EarlyExitError(
                    f"{name} are distinct values of {', '.join(allowed)}; got {list(chosen)}"
                )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise EarlyExitError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        for seed in self.seeds:
            check_seed("seeds", seed, EarlyExitError)
        check_whole(
            self,
            "train_steps",
            "finetune_steps",
            "batch_size",
            "puzzle_images",
            "log_every",
            error=EarlyExitError,
        )
        check_whole(self, "image_size", minimum=8, error=EarlyExitError)
        if self.image_size % 4:
            raise EarlyExitError(
                f"image_size must be a multiple of 4 (the ViT's patch), got {self.image_size}"
            )
        for name in ("cnn_learning_rate", "vit_learning_rate", "finetune_learning_rate"):
            if not getattr(self, name) > 0:
                raise EarlyExitError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.failure_weight > 0:
            raise EarlyExitError(f"failure_weight must be positive, got {self.failure_weight}")


def build_network(architecture: str, splits: Splits, seed: int) -> EarlyExitCNN | EarlyExitViT:
    """The study's network for ``splits``' images, initialised from ``seed``: four blocks and
    four heads either way (the ViT's patches are 2 pixels on the 8-pixel digits, else 4)."""
    torch.manual_seed(seed)
    shape = splits.image_shape
    if architecture == "cnn":
        return EarlyExitCNN(splits.num_classes, shape, widths=(16, 32, 32, 64), pool_after=(0, 2))
    return EarlyExitViT(splits.num_classes, shape, patch=2 if shape[1] <= 8 else 4, width=64, depth=4)


def _splits(settings: EarlyExitSettings, dataset: str, seed: int) -> Splits:
    if dataset == "digits":
        return digits_splits(seed)
    return puzzle_splits(seed, settings.puzzle_images, settings.image_size)


def study_network(
    settings: EarlyExitSettings,
    dataset: str,
    architecture: str,
    seed: int,
    log: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """One network of the study: trained, then every method measured on the test split."""
    splits = _splits(settings, dataset, seed)
    unit = {"dataset": dataset, "architecture": architecture, "seed": seed}

    def logger(stage: str) -> Callable[[int, dict[str, float]], None]:
        def step_log(step: int, losses: dict[str, float]) -> None:
            if step % settings.log_every == 0:
                log({**unit, "stage": stage, "step": step, **losses})

        return step_log

    model = build_network(architecture, splits, seed)
    rate = settings.cnn_learning_rate if architecture == "cnn" else settings.vit_learning_rate
    train = TrainingSettings(settings.train_steps, settings.batch_size, rate, seed=seed)
    losses: list[float] = []
    step_log = logger("train")

    def train_log(step: int, values: dict[str, float]) -> None:
        losses.append(values["loss"])
        step_log(step, values)

    train_jointly(model, *splits.train, train, train_log)
    costs = exit_costs(model)
    test_images, test_labels = splits.test
    labels = test_labels.numpy()
    methods: dict[str, Any] = {}
    methods["baseline"] = measure(head_logits(model, test_images), labels, costs)
    temperatures = fit_temperatures(head_logits(model, splits.held_out[0]), splits.held_out[1].numpy())
    methods["calibrated"] = measure(head_logits(model, test_images), labels, costs, temperatures)
    methods["calibrated"]["temperatures"] = temperatures
    trained_heads = {name: tensor.clone() for name, tensor in model.heads.state_dict().items()}
    finetune = replace(train, steps=settings.finetune_steps, learning_rate=settings.finetune_learning_rate)
    for method, weight in (("ce-heads", 0.0), ("eefp", settings.failure_weight)):
        model.heads.load_state_dict(trained_heads)
        finetune_heads(model, *splits.train, finetune, failure_weight=weight, log=logger(method))
        methods[method] = measure(head_logits(model, test_images), labels, costs)
    return {
        **unit,
        "costs": costs,
        "train_loss_first": losses[0],
        "train_loss_last": losses[-1],
        "methods": methods,
    }


def _correlations(gains: Sequence[float], changes: Sequence[float]) -> dict[str, float | None]:
    from scipy import stats

    if len(gains) < 3 or len(set(gains)) < 2 or len(set(changes)) < 2:
        return {"spearman": None, "pearson": None}
    return {
        "spearman": float(stats.spearmanr(changes, gains).statistic),
        "pearson": float(stats.pearsonr(changes, gains).statistic),
    }


def summarise(lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per dataset, architecture and method, the means over seeds; and the correlations of each
    method's efficiency gain over the baseline with its change in EEFP and in ECE."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for line in lines:
        groups.setdefault((line["dataset"], line["architecture"]), []).append(line)
    table: dict[str, Any] = {}
    for (dataset, architecture), members in groups.items():
        rows = {}
        for method in METHODS:
            measured = [m["methods"][method] for m in members]

            def mean(values: Sequence[float | None]) -> float | None:
                kept = [v for v in values if v is not None]
                return statistics.fmean(kept) if kept else None

            rows[method] = {
                "final_accuracy": mean([m["accuracy"][-1] for m in measured]),
                "ece": mean([m["ece_mean"] for m in measured]),
                "eefp": mean([m["eefp_mean"] for m in measured]),
                "efficiency": mean([m["efficiency"] for m in measured]),
                "accuracy_at": {
                    key: mean([m["accuracy_at"][key] for m in measured]) for key in measured[0]["accuracy_at"]
                },
            }
        table[f"{dataset}/{architecture}"] = {"seeds": len(members), "methods": rows}
    gains, eefp_changes, ece_changes = [], [], []
    for line in lines:
        base = line["methods"]["baseline"]
        for method in METHODS[1:]:
            measured = line["methods"][method]
            if measured["eefp_mean"] is None or base["eefp_mean"] is None:
                continue
            gains.append(measured["efficiency"] - base["efficiency"])
            eefp_changes.append(measured["eefp_mean"] - base["eefp_mean"])
            ece_changes.append(measured["ece_mean"] - base["ece_mean"])
    return {
        "networks": table,
        "points": len(gains),
        "eefp_efficiency": _correlations(gains, eefp_changes),
        "ece_efficiency": _correlations(gains, ece_changes),
    }


@runner
def run_early_exit_study(
    settings: EarlyExitSettings, out: Path, *, resume: bool = False, on_record: RecordCallback | None = None
) -> dict[str, Any]:
    """Train and measure every network (module docstring); returns the summary (also
    ``summary.json``)."""
    folder = RunFolder(out, EVALS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    kept = folder.kept_records()
    done = {(r["dataset"], r["architecture"], r["seed"]): r for r in kept if "methods" in r}
    metrics_path = folder.out / METRICS
    # the losses of a network cut short are made again, so they go
    kept_losses = [
        r
        for r in (read_run_records(metrics_path) if metrics_path.is_file() else [])
        if (r.get("dataset"), r.get("architecture"), r.get("seed")) in done
    ]
    with (
        folder.recording(kept, {"settings": folder.config}) as log,
        RecordLog(metrics_path, kept_losses) as losses,
    ):
        for dataset in settings.datasets:
            for architecture in settings.architectures:
                for seed in settings.seeds:
                    if (dataset, architecture, seed) in done:
                        continue
                    line = study_network(settings, dataset, architecture, seed, losses.append)
                    log.append(line)
                    done[(dataset, architecture, seed)] = line
                    if on_record is not None:
                        on_record(line)
    summary = summarise(
        [done[(d, a, s)] for d in settings.datasets for a in settings.architectures for s in settings.seeds]
    )
    summary["settings"] = folder.config
    folder.finish(SUMMARY, summary)
    return summary
