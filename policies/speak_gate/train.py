"""Fitting the speak gate's head on frozen-VLM features (:func:`train_gate`, and
:func:`fit_gate` from stream specs to a saved gate), and the gate folder it lives in:
``gate.safetensors`` (the head), ``gate.json`` (its metadata) and ``metrics.jsonl`` (the
training curves)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from embodia.core.weights import load_weights
from embodia.errors import read_format_record
from embodia.policies.speak_gate.config import (
    DEFAULT_THRESHOLD,
    FLAG,
    GATE_FORMAT,
    GATE_META,
    GATE_WEIGHTS,
    SPECIAL_TOKENS,
    TRAIN_METRICS,
    GateError,
    Pooling,
)
from embodia.policies.speak_gate.model import (
    FlagFeatures,
    ResponseHead,
    gate_loss,
    speaking_seconds,
    stream_labels,
)

# --- training --------------------------------------------------------------------------------


@dataclass
class TrainLog:
    epochs: list[dict[str, float]]
    """Per epoch: mean ``loss``, ``point``, ``smooth``, ``rate`` over the streams."""
    seconds: int
    streams: int

    @property
    def final(self) -> dict[str, float]:
        return self.epochs[-1] if self.epochs else {}


def train_gate(
    features_by_stream: Sequence[torch.Tensor],
    labels_by_stream: Sequence[torch.Tensor | Sequence[int]],
    epochs: int = 100,
    lr: float = 1e-3,
    seed: int = 0,
    *,
    weight_decay: float = 0.0,
    standardize: bool = True,
    bias: bool = False,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
    **loss_options: Any,
) -> tuple[ResponseHead, TrainLog]:
    """Fit a :class:`ResponseHead` with Adam on :func:`gate_loss`, one step per stream per
    epoch in a seeded shuffled order; the result depends only on the inputs and ``seed``."""
    if not features_by_stream:
        raise GateError("no stream to train the gate on")
    if len(features_by_stream) != len(labels_by_stream):
        raise GateError(f"{len(features_by_stream)} feature sequences but {len(labels_by_stream)} label ones")
    if epochs < 1:
        raise GateError(f"epochs must be at least 1, got {epochs}")
    features = [torch.as_tensor(f, dtype=torch.float32) for f in features_by_stream]
    labels = [torch.as_tensor(y, dtype=torch.float32).reshape(-1) for y in labels_by_stream]
    sizes = {f.shape[-1] for f in features}
    if len(sizes) != 1 or any(f.ndim != 2 for f in features):
        shapes = [tuple(f.shape) for f in features]
        raise GateError(f"features must be (seconds, size) with one size, got shapes {shapes}")
    for i, (f, y) in enumerate(zip(features, labels, strict=True)):
        if f.shape[0] != y.numel():
            raise GateError(f"stream {i} has {f.shape[0]} feature rows but {y.numel()} labels")
    hidden = sizes.pop()

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = ResponseHead(hidden, bias=bias)
    if standardize:
        stacked = torch.cat(features)
        head.feature_mean.copy_(stacked.mean(0))
        head.feature_std.copy_(stacked.std(0, unbiased=False).clamp_min(1e-6))
    optimizer = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    order = random.Random(seed)
    log: list[dict[str, float]] = []
    head.train()
    for epoch in range(epochs):
        indices = list(range(len(features)))
        order.shuffle(indices)
        totals = dict.fromkeys(("loss", "point", "smooth", "rate"), 0.0)
        for i in indices:
            optimizer.zero_grad()
            loss = gate_loss(head(features[i]), labels[i], **loss_options)
            loss.total.backward()
            optimizer.step()
            for key, value in zip(totals, loss, strict=True):
                totals[key] += float(value.detach()) / len(indices)
        log.append({"epoch": float(epoch), **totals})
        if on_epoch is not None:
            on_epoch(log[-1])
    head.eval()
    return head, TrainLog(log, sum(int(y.numel()) for y in labels), len(features))


def fit_gate(
    model_dir: Path | str,
    out: Path | str,
    train_sources: Sequence[str],
    held_out_sources: Sequence[str] = (),
    *,
    scenario: str = "solo",
    epochs: int = 100,
    lr: float = 1e-3,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    pooling: Pooling = "flag",
) -> dict[str, Any]:
    """Train a gate on the streams of ``train_sources`` (stream specs, e.g.
    ``procedural:arena,seed=3,duration=90``), save it to ``out`` and report its F1 over
    speaking seconds on ``held_out_sources`` against always- and never-speaking."""
    from embodia.envs.streams.sources import open_stream

    if not train_sources:
        raise GateError("no stream to train the gate on: give at least one source")
    features = FlagFeatures(model_dir, pooling=pooling, seed=seed)
    train = [open_stream(spec, scenario) for spec in train_sources]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / TRAIN_METRICS).open("w") as metrics:

        def record(epoch: dict[str, float]) -> None:
            # one line per epoch as it ends, so a viewer or a killed run still has the curves
            metrics.write(json.dumps({**epoch, "epoch": int(epoch["epoch"])}) + "\n")
            metrics.flush()

        head, log = train_gate(
            features.stream_features(train),
            [stream_labels(s) for s in train],
            epochs=epochs,
            lr=lr,
            seed=seed,
            on_epoch=record,
        )
    save_gate(
        out, head, features.meta(threshold=threshold, trained_on=list(train_sources), scenario=scenario)
    )
    report: dict[str, Any] = {
        "gate": str(out),
        "train_streams": len(train),
        "final_loss": log.final.get("loss"),
    }
    if features.random_weights is not None:
        report["random_weights"] = features.random_weights
    if held_out_sources:
        held_out = [open_stream(spec, scenario) for spec in held_out_sources]
        rows = []
        for stream, feats in zip(held_out, features.stream_features(held_out), strict=True):
            label = set(stream.label)
            predicted = speaking_seconds(stream, head.score(feats).detach().tolist(), threshold)
            rows.append(
                [
                    _timing_f1(predicted, label),
                    _timing_f1(set(stream.seconds), label),
                    _timing_f1(set(), label),
                ]
            )
        report["held_out"] = {
            key: sum(row[i] for row in rows) / len(rows)
            for i, key in enumerate(("gate_f1", "always_f1", "never_f1"))
        }
    return report


def _timing_f1(predicted: set[int], label: set[int]) -> float:
    from embodia.core.scores import f1

    result = f1(predicted, label)
    return result["f1"] if result is not None else 0.0


# --- saving ----------------------------------------------------------------------------------


def save_gate(directory: Path | str, head: ResponseHead, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``gate.safetensors`` (the head's state dict) and ``gate.json`` (its metadata:
    hidden size, layer, threshold, model dir, pooling, special tokens, and ``meta``)."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "format": GATE_FORMAT,
        "hidden_size": head.hidden_size,
        "bias": head.bias,
        "layer": -2,
        "threshold": DEFAULT_THRESHOLD,
        "pooling": "flag",
        "model_dir": None,
        "special_tokens": list(SPECIAL_TOKENS),
        "flag_token": FLAG,
    }
    record.update(meta or {})
    if record["hidden_size"] != head.hidden_size:
        raise GateError(f"meta says hidden size {record['hidden_size']} but the head has {head.hidden_size}")
    if record.get("model_dir") is not None:
        record["model_dir"] = str(record["model_dir"])
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(directory / GATE_WEIGHTS))
    (directory / GATE_META).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return directory


def load_gate(directory: Path | str) -> tuple[ResponseHead, dict[str, Any]]:
    """The head and metadata :func:`save_gate` wrote; a missing or inconsistent gate dir is a
    :class:`GateError` naming what is wrong."""
    directory = Path(directory)
    if not directory.is_dir():
        raise GateError(f"gate directory {directory} does not exist")
    meta_path, weights_path = directory / GATE_META, directory / GATE_WEIGHTS
    for path in (meta_path, weights_path):
        if not path.is_file():
            raise GateError(f"{directory} is not a speak gate: it has no {path.name}")
    meta = read_format_record(meta_path, GATE_FORMAT, "gate", GateError)
    hidden = meta.get("hidden_size")
    if not isinstance(hidden, int) or isinstance(hidden, bool):
        raise GateError(f"{meta_path} has no integer hidden_size")
    head = ResponseHead(hidden, bias=bool(meta.get("bias", False)))
    load_weights(head, weights_path, GateError, f"a head of hidden size {hidden}")
    head.eval()
    return head, meta
