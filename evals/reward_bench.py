"""CMIRewardBench-style scoring of music reward models (``docs/rewards.md``).

**Pairwise accuracy** (:func:`pairwise_accuracy`): a pair's label and a model's verdict are each
``a``, ``b`` or ``tie``. A pair scores 1 when they agree, **0.5 when either is a tie** (and they
differ), else 0, as CMIRewardBench's evaluator scores "both"/"neither". A model's verdict
comes from its two scores (:func:`verdict`): a tie when they are within ``tie_margin``.

**Score agreement** (:func:`correlations`): Spearman, Pearson and Kendall's tau between a
model's scores and reference scores (the benchmark's MOS sets).

**Breakdowns** (:func:`breakdown`): the pairwise accuracy per value of a pair's field, such as
its degradation or its modality subset (:func:`modality`: ``T`` text only, ``L`` text and
lyrics, ``A`` text and a reference audio prompt, ``C`` all three).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodia.core.runs import runner
from embodia.errors import EmbodiaError

VERDICTS = ("a", "b", "tie")
DIMENSIONS = ("musicality", "alignment")


class RewardBenchError(EmbodiaError, ValueError):
    """Bench items or scores that cannot be scored; the message names the problem."""


def _check_verdict(value: object, where: str) -> str:
    if value not in VERDICTS:
        raise RewardBenchError(f"{where} is one of a, b, tie; got {value!r}")
    return str(value)


def pair_score(predicted: str, label: str) -> float:
    """1 when the verdict agrees with the label, 0.5 when either is a tie, else 0."""
    _check_verdict(predicted, "a verdict")
    _check_verdict(label, "a label")
    if predicted == label:
        return 1.0
    return 0.5 if "tie" in (predicted, label) else 0.0


def verdict(score_a: float, score_b: float, tie_margin: float = 0.0) -> str:
    """``a``, ``b`` or ``tie`` (scores within ``tie_margin``) from a model's two scores."""
    if not (np.isfinite(score_a) and np.isfinite(score_b)):
        raise RewardBenchError(f"scores must be finite, got {score_a} and {score_b}")
    if abs(score_a - score_b) <= tie_margin:
        return "tie"
    return "a" if score_a > score_b else "b"


def pairwise_accuracy(predicted: Sequence[str], labels: Sequence[str]) -> float:
    """The mean :func:`pair_score` over the pairs."""
    if len(predicted) != len(labels) or not labels:
        raise RewardBenchError(f"{len(predicted)} verdicts for {len(labels)} labels (and at least one pair)")
    return float(np.mean([pair_score(p, y) for p, y in zip(predicted, labels, strict=True)]))


def correlations(scores: Sequence[float], references: Sequence[float]) -> dict[str, float | None]:
    """Spearman, Pearson and Kendall's tau (b) of ``scores`` against ``references``; None where
    one side is constant."""
    from scipy import stats

    x, y = np.asarray(scores, dtype=np.float64), np.asarray(references, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise RewardBenchError(
            f"correlations need two equal-length series of at least 2, got {x.shape} and {y.shape}"
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise RewardBenchError("correlations need finite scores")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"spearman": None, "pearson": None, "kendall": None}
    return {
        "spearman": float(stats.spearmanr(x, y).statistic),
        "pearson": float(stats.pearsonr(x, y).statistic),
        "kendall": float(stats.kendalltau(x, y).statistic),
    }


def modality(item: Mapping[str, Any]) -> str:
    """A pair's modality subset: ``T``, ``L`` (lyrics), ``A`` (a reference audio) or ``C``."""
    lyrics = bool(str(item.get("instruction", {}).get("lyrics", "")).strip())
    reference = item.get("reference") is not None
    return {(False, False): "T", (True, False): "L", (False, True): "A", (True, True): "C"}[
        (lyrics, reference)
    ]


def breakdown(
    items: Sequence[Mapping[str, Any]],
    predicted: Sequence[str],
    labels: Sequence[str],
    key: Callable[[Mapping[str, Any]], str],
) -> dict[str, dict[str, float]]:
    """Pairwise accuracy and pair count per value of ``key(item)``, in sorted order."""
    if not len(items) == len(predicted) == len(labels):
        raise RewardBenchError(f"{len(items)} items, {len(predicted)} verdicts and {len(labels)} labels")
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(key(item), []).append(index)
    return {
        name: {
            "accuracy": pairwise_accuracy([predicted[i] for i in members], [labels[i] for i in members]),
            "pairs": float(len(members)),
        }
        for name, members in sorted(groups.items())
    }


# --------------------------------------------------------------------------- bench files

SCORES = "scores.jsonl"
SUMMARY = "summary.json"


def read_clip(value: object, base: Path, sample_rate: int, where: str) -> np.ndarray:
    """A pair's clip: ``{"path": "x.wav"}`` (a WAV file, relative to the bench file's folder;
    mixed to mono and resampled to ``sample_rate``) or a synthetic piece's specification
    (rendered)."""
    from embodia.evals.music_data import MusicDataError, render, spec_of

    if not isinstance(value, Mapping):
        raise RewardBenchError(
            f'{where} is a {{"path": ...}} object or a piece\'s specification, got {value!r}'
        )
    if "path" in value:
        return _wav(base / str(value["path"]), sample_rate, where)
    try:
        return render(spec_of(dict(value)), sample_rate)
    except MusicDataError as error:
        raise RewardBenchError(f"{where}: {error}") from None


def _wav(path: Path, sample_rate: int, where: str) -> np.ndarray:
    from math import gcd

    from scipy.io import wavfile
    from scipy.signal import resample_poly

    try:
        rate, data = wavfile.read(path)
    except (OSError, ValueError) as error:
        raise RewardBenchError(f"{where}: cannot read the WAV file {path}: {error}") from None
    samples = np.asarray(data, dtype=np.float64)
    if np.issubdtype(data.dtype, np.integer):
        samples /= float(np.iinfo(data.dtype).max)
    if samples.ndim == 2:
        samples = samples.mean(axis=1)
    if rate != sample_rate:
        common = gcd(int(rate), sample_rate)
        samples = resample_poly(samples, sample_rate // common, int(rate) // common)
    return np.asarray(np.clip(samples, -1.0, 1.0), dtype=np.float32)


def bench_pair(item: Mapping[str, Any], base: Path, sample_rate: int, where: str) -> Any:
    """A bench item as the reward model's :class:`~embodia.policies.rewards.cmi.PreferencePair`:
    its clips read (:func:`read_clip`), its preference and its labels (when it has them) in the
    model's dimension order (a tie where the item has no preference)."""
    from embodia.policies.rewards.cmi import DIMENSIONS as MODEL_ORDER
    from embodia.policies.rewards.cmi import PreferencePair

    reference = item.get("reference")
    preferred = item.get("preferred") or {}
    labels = item.get("labels")
    return PreferencePair(
        read_clip(item["a"], base, sample_rate, f"{where} clip a"),
        read_clip(item["b"], base, sample_rate, f"{where} clip b"),
        str(item["instruction"]["text"]),
        str(item["instruction"].get("lyrics", "")),
        None if reference is None else read_clip(reference, base, sample_rate, f"{where} reference"),
        (str(preferred.get(MODEL_ORDER[0], "tie")), str(preferred.get(MODEL_ORDER[1], "tie"))),
        None
        if labels is None
        else (
            (float(labels["a"][MODEL_ORDER[0]]), float(labels["a"][MODEL_ORDER[1]])),
            (float(labels["b"][MODEL_ORDER[0]]), float(labels["b"][MODEL_ORDER[1]])),
        ),
    )


def read_bench(path: Path | str) -> list[dict[str, Any]]:
    """The pairs of a bench file (JSONL): each has ``instruction`` (``text``, optional
    ``lyrics``), clips ``a`` and ``b``, an optional ``reference`` clip, ``preferred``
    (``musicality`` and ``alignment``: ``a``, ``b`` or ``tie``), and optionally ``labels``:
    reference scores per clip (``{"a": {"musicality": 4.1, "alignment": 3.0}, "b": ...}``)."""
    from embodia.core.runs import read_jsonl

    items = [item for _, item in read_jsonl(path, strict=True, error=RewardBenchError, what="bench file")]
    if not items:
        raise RewardBenchError(f"bench file {path} holds no pairs")
    for number, item in enumerate(items, start=1):
        where = f"{path} pair {number}"
        instruction = item.get("instruction")
        if not isinstance(instruction, Mapping) or not str(instruction.get("text", "")).strip():
            raise RewardBenchError(f"{where}: instruction.text is missing")
        preferred = item.get("preferred")
        if not isinstance(preferred, Mapping) or any(d not in preferred for d in DIMENSIONS):
            raise RewardBenchError(f"{where}: preferred needs musicality and alignment")
        for dimension in DIMENSIONS:
            _check_verdict(preferred[dimension], f"{where}: preferred.{dimension}")
        for side in ("a", "b"):
            if side not in item:
                raise RewardBenchError(f"{where}: clip {side} is missing")
        if "labels" in item:
            _check_labels(item["labels"], where)
    return items


def _check_labels(labels: Any, where: str) -> None:
    for side in ("a", "b"):
        scores = labels.get(side) if isinstance(labels, Mapping) else None
        if not isinstance(scores, Mapping):
            raise RewardBenchError(f"{where}: labels.{side} must map musicality and alignment to scores")
        for dimension in DIMENSIONS:
            value = scores.get(dimension)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise RewardBenchError(
                    f"{where}: labels.{side}.{dimension} must be a finite number, got {value!r}"
                )


# --------------------------------------------------------------------------- evaluating a model


@dataclass(frozen=True)
class RewardEvalSettings:
    """``embodia eval rewards``: a saved reward model (``model``, a folder) on a bench file."""

    model: str
    bench: str
    tie_margin: float = 0.0
    """Scores closer than this are the model's tie."""
    batch_size: int = 16

    def __post_init__(self) -> None:
        if not (np.isfinite(self.tie_margin) and self.tie_margin >= 0):
            raise RewardBenchError(f"tie_margin must be a finite number >= 0, got {self.tie_margin}")
        if self.batch_size < 1:
            raise RewardBenchError(f"batch_size must be at least 1, got {self.batch_size}")


def summarise_verdicts(
    items: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Per dimension: pairwise accuracy, its breakdowns by modality subset and (where the pairs
    name one) by degradation, and (where every pair carries ``labels``) the agreement of the
    model's scores of every clip with the reference scores (:func:`correlations`)."""
    out: dict[str, Any] = {"pairs": len(rows)}
    for dimension in DIMENSIONS:
        predicted = [row["verdict"][dimension] for row in rows]
        labels = [item["preferred"][dimension] for item in items]
        measured: dict[str, Any] = {
            "accuracy": pairwise_accuracy(predicted, labels),
            "by_modality": breakdown(items, predicted, labels, modality),
        }
        if all("degradation" in item for item in items):
            measured["by_degradation"] = breakdown(items, predicted, labels, lambda i: str(i["degradation"]))
        if all("labels" in item for item in items):
            scores = [row[f"scores_{side}"][dimension] for row in rows for side in ("a", "b")]
            references = [item["labels"][side][dimension] for item in items for side in ("a", "b")]
            measured["score_agreement"] = correlations(scores, references)
        out[dimension] = measured
    return out


def score_bench(
    model: Any,
    items: Sequence[Mapping[str, Any]],
    base: Path,
    *,
    tie_margin: float,
    batch_size: int,
    on_row: Callable[[dict[str, Any]], None],
    skip: int = 0,
) -> None:
    """Score the pairs from index ``skip`` on in batches, calling ``on_row`` with each pair's
    row (``index``, both clips' scores, the verdict per dimension) as its batch finishes."""
    import torch

    from embodia.policies.rewards.cmi import DIMENSIONS as MODEL_ORDER
    from embodia.policies.rewards.cmi import score_pairs

    rate = model.config.sample_rate
    for start in range(skip, len(items), batch_size):
        batch = items[start : start + batch_size]
        pairs = [bench_pair(item, base, rate, f"pair {start + k + 1}") for k, item in enumerate(batch)]
        with torch.no_grad():
            scores_a, scores_b = score_pairs(model, pairs)
        for offset in range(len(batch)):
            a = {d: float(scores_a[offset, k]) for k, d in enumerate(MODEL_ORDER)}
            b = {d: float(scores_b[offset, k]) for k, d in enumerate(MODEL_ORDER)}
            on_row(
                {
                    "index": start + offset,
                    "scores_a": a,
                    "scores_b": b,
                    "verdict": {d: verdict(a[d], b[d], tie_margin) for d in DIMENSIONS},
                }
            )


@runner
def run_reward_eval(settings: RewardEvalSettings, out: Path, *, resume: bool = False) -> dict[str, Any]:
    """Score every pair of the bench file (``scores.jsonl``, a line per pair as its batch
    finishes; ``resume=True`` continues after the last) and summarise (``summary.json``)."""
    from embodia.core.runs import RunFolder
    from embodia.policies.rewards.cmi import RewardModelError, load_reward_model

    folder = RunFolder(out, SCORES)
    items = read_bench(settings.bench)
    try:
        model = load_reward_model(settings.model)
    except RewardModelError as error:
        raise RewardBenchError(str(error)) from None
    config = asdict(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    kept = [r for r in folder.kept_records() if isinstance(r.get("index"), int)]
    rows = {r["index"]: r for r in kept}
    done = 0
    while done in rows:
        done += 1
    kept = [rows[i] for i in range(done)]
    with folder.recording(kept, {"settings": config}) as log:

        def on_row(row: dict[str, Any]) -> None:
            log.append(row)
            rows[row["index"]] = row

        score_bench(
            model,
            items,
            Path(settings.bench).parent,
            tie_margin=settings.tie_margin,
            batch_size=settings.batch_size,
            on_row=on_row,
            skip=done,
        )
    summary = summarise_verdicts(items, [rows[i] for i in range(len(items))])
    summary["settings"] = config
    folder.finish(SUMMARY, summary)
    return summary


# --------------------------------------------------------------------------- the study


@dataclass(frozen=True)
class RewardStudySettings:
    """Train a CMI-style reward model from scratch on synthetic preference pairs and measure it
    on held-out ones (other seeds), against the untrained start and the always-tie baseline."""

    train_pairs: int = 800
    test_pairs: int = 200
    steps: int = 600
    batch_pairs: int = 8
    learning_rate: float = 1e-3
    smoothing: float = 0.1
    regression_weight: float = 0.0
    """Weight of the regression loss on the pairs' pseudo-labels beside Bradley-Terry (0: none)."""
    width: int = 64
    text_hidden: int = 64
    log_every: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        from embodia.core.limits import check_seed, check_whole

        check_whole(
            self, "train_pairs", "test_pairs", "steps", "batch_pairs", "log_every", error=RewardBenchError
        )
        check_whole(self, "width", "text_hidden", minimum=8, error=RewardBenchError)
        if self.width % 4 or self.text_hidden % 2:
            raise RewardBenchError(
                f"width must be a multiple of 4 and text_hidden of 2, got {self.width}, {self.text_hidden}"
            )
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise RewardBenchError(f"learning_rate must be positive, got {self.learning_rate}")
        if not 0 <= self.smoothing < 1:
            raise RewardBenchError(f"smoothing is in [0, 1), got {self.smoothing}")
        if not (np.isfinite(self.regression_weight) and self.regression_weight >= 0):
            raise RewardBenchError(f"regression_weight must be >= 0, got {self.regression_weight}")
        check_seed("seed", self.seed, RewardBenchError)


BENCH = "bench.jsonl"
MODEL = "model"
METRICS = "metrics.jsonl"
STAGES = "study.jsonl"
TEST_SEED_OFFSET = 1_000_000
"""The held-out pairs are drawn from the training seed plus this."""


def tiny_reward_model(settings: RewardStudySettings, folder: Path) -> Any:
    """A reward model with a random-weight BERT text encoder (one layer, ``text_hidden`` wide)
    over embodia's tiny byte-level BPE tokenizer (trained into ``folder``)."""
    import torch
    from transformers import BertConfig, BertModel

    from embodia.policies.rewards.cmi import CMIConfig, CMIRewardModel
    from embodia.policies.tiny_models import train_tokenizer

    tokenizer = train_tokenizer(folder)
    torch.manual_seed(settings.seed)
    encoder = BertModel(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=settings.text_hidden,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=2 * settings.text_hidden,
            max_position_embeddings=128,
        )
    )
    return CMIRewardModel(encoder, tokenizer, CMIConfig(width=settings.width, heads=4))


def _rendered(items: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [bench_pair(item, Path("."), 16_000, f"pair {k + 1}") for k, item in enumerate(items)]


@runner
def run_reward_study(settings: RewardStudySettings, out: Path, *, resume: bool = False) -> dict[str, Any]:
    """The study (class docstring). The folder holds ``bench.jsonl`` (the held-out pairs, a
    bench file ``embodia eval rewards`` reads), ``metrics.jsonl`` (the loss every
    ``log_every`` steps), ``model/`` (the trained model), ``study.jsonl`` (a line per stage:
    the untrained and the trained model's held-out results) and ``summary.json``. A resumed run
    keeps the stages it finished; a training cut short starts again."""
    from embodia.core.runs import RecordLog, RunFolder, jsonl_text, write_atomic
    from embodia.evals.music_data import preference_pairs
    from embodia.policies.rewards.cmi import (
        RewardTraining,
        load_reward_model,
        save_reward_model,
        train_reward_model,
    )

    folder = RunFolder(out, STAGES)
    config = asdict(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    out = folder.out
    kept = [r for r in folder.kept_records() if "stage" in r]
    stages = {r["stage"]: r for r in kept}
    test_items = preference_pairs(settings.seed + TEST_SEED_OFFSET, settings.test_pairs)
    with folder.recording(kept, {"settings": config}) as log:
        if not (out / BENCH).is_file():
            write_atomic(out / BENCH, jsonl_text(test_items))

        def evaluate(model: Any, stage: str) -> None:
            rows: list[dict[str, Any]] = []
            score_bench(model, test_items, out, tie_margin=0.0, batch_size=25, on_row=rows.append)
            line = {"stage": stage, **summarise_verdicts(test_items, rows)}
            log.append(line)
            stages[stage] = line

        if "trained" not in stages:
            model = tiny_reward_model(settings, out / "tokenizer")
            if "untrained" not in stages:
                evaluate(model.eval(), "untrained")
            train = _rendered(preference_pairs(settings.seed, settings.train_pairs))
            losses: list[float] = []
            with RecordLog(out / METRICS) as metrics:

                def step_log(step: int, loss: float) -> None:
                    losses.append(loss)
                    if step % settings.log_every == 0:
                        window = losses[-settings.log_every :]
                        metrics.append({"step": step, "loss": float(np.mean(window))})

                training = RewardTraining(
                    settings.steps,
                    settings.batch_pairs,
                    settings.learning_rate,
                    settings.smoothing,
                    settings.seed,
                    settings.regression_weight,
                )
                train_reward_model(model, train, training, step_log)
            save_reward_model(model, out / MODEL)
            evaluate(load_reward_model(out / MODEL), "trained")
    summary = {
        "pairs": settings.test_pairs,
        "untrained": stages["untrained"],
        "trained": stages["trained"],
        "always_tie": {d: 0.5 for d in DIMENSIONS},
        "settings": config,
    }
    folder.finish(SUMMARY, summary)
    return summary
