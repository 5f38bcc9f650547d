"""A CMI-style music reward model: it scores a piece of audio on **alignment** with a
compositional instruction (a text description, and any of lyrics and a reference audio prompt)
and on **musicality**.

**Audio front end** (:class:`LogMel`): a log-mel spectrogram computed in torch (Hann-window
STFT, a triangular mel filterbank, log of the power), no torchaudio.
**Audio encoder** (:class:`AudioEncoder`): the spectrogram normalised per frame, then two
strided convolutions over its time axis (the mel bins as channels), giving one token per 4
frames; a clip's tokens do not depend on the clips batched with it.
**Text** (description and lyrics): any transformers encoder's last hidden states, projected.
The lyrics' tokens are appended to the description's, as CMI-RM concatenates them late.
**Fusion** (:class:`CMIRewardModel`), after CMI-RM's layout:

1. a *prompt transformer* over the instruction's tokens: text, lyrics, and the reference
   audio's tokens (a learned null token when there is none);
2. a *joint transformer* over the prompt tokens followed by the evaluated audio's tokens;
3. the masked mean of the evaluated audio's outputs, then an MLP head giving
   ``[alignment, musicality]``.

A type embedding marks each token's source. In training, each optional input is dropped with
``modality_dropout`` (modality dropout), so one model serves the T, L, A and C subsets.

**Training** (:func:`pairwise_loss`, :func:`regression_loss`): Bradley-Terry on preference
pairs, ``-log sigmoid(r_preferred - r_other)`` per dimension with label smoothing (a tie's
target is one half), and/or regression onto scores.

**Inference-time filtering** (:func:`top_k`): draw n candidates from any generator, keep the
k the model scores highest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from embodia.errors import EmbodiaError

DIMENSIONS = ("alignment", "musicality")
"""The two scores, in output order (as CMI-RM's head)."""


class RewardModelError(EmbodiaError, ValueError):
    """A reward model or its inputs cannot be used; the message names the problem."""


# --------------------------------------------------------------------------- audio


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int, low: float = 30.0) -> np.ndarray:
    """Triangular filters evenly spaced on the mel scale (HTK's 2595 log10(1 + f/700)), as an
    ``n_mels x (n_fft // 2 + 1)`` matrix over the STFT's bins."""
    high = sample_rate / 2

    def mel(f: np.ndarray | float) -> np.ndarray:
        return np.asarray(2595.0 * np.log10(1.0 + np.asarray(f) / 700.0))

    def hertz(m: np.ndarray) -> np.ndarray:
        return np.asarray(700.0 * (10.0 ** (m / 2595.0) - 1.0))

    edges = hertz(np.linspace(mel(low), mel(high), n_mels + 2))
    bins = np.linspace(0.0, high, n_fft // 2 + 1)
    filters = np.zeros((n_mels, len(bins)))
    for i in range(n_mels):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        rising = (bins - left) / (centre - left)
        falling = (right - bins) / (right - centre)
        filters[i] = np.clip(np.minimum(rising, falling), 0.0, None)
    return filters


class LogMel(nn.Module):
    """Log-mel spectrogram of mono audio (``batch x samples``) as ``batch x mels x frames``."""

    window: torch.Tensor
    filters: torch.Tensor

    def __init__(self, sample_rate: int = 16_000, n_fft: int = 512, hop: int = 256, n_mels: int = 64) -> None:
        super().__init__()
        self.sample_rate, self.n_fft, self.hop = sample_rate, n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        filters = torch.as_tensor(mel_filterbank(sample_rate, n_fft, n_mels), dtype=torch.float32)
        self.register_buffer("filters", filters, persistent=False)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        if audio.ndim != 2 or audio.shape[1] < self.n_fft:
            raise RewardModelError(
                f"audio is batch x samples of at least {self.n_fft} samples, got {tuple(audio.shape)}"
            )
        spectrum = torch.stft(audio, self.n_fft, self.hop, window=self.window, return_complex=True)
        power = spectrum.abs().pow(2)
        return torch.log(self.filters @ power + 1e-6)


class AudioEncoder(nn.Module):
    """Audio tokens: each clip's log-mel spectrogram, normalised per frame, then two strided
    1-D convolutions over time. Clips are transformed one by one and their frames zero-padded
    between the layers, so a clip's tokens do not depend on the clips batched with it."""

    def __init__(self, width: int, sample_rate: int = 16_000, n_mels: int = 64) -> None:
        super().__init__()
        self.features = LogMel(sample_rate, n_mels=n_mels)
        self.norm = nn.LayerNorm(n_mels)
        self.conv1 = nn.Conv1d(n_mels, width, 5, stride=2, padding=2)
        self.conv2 = nn.Conv1d(width, width, 5, stride=2, padding=2)

    def forward(self, clips: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens (``batch x tokens x width``) and their mask (True: real) of mono clips."""
        mels = [self.norm(self.features(clip[None])[0].T) for clip in clips]
        frames = torch.tensor([len(m) for m in mels])
        x = torch.zeros(len(mels), int(frames.max()), mels[0].shape[1])
        for i, mel in enumerate(mels):
            x[i, : len(mel)] = mel
        hidden = functional.gelu(self.conv1(x.transpose(1, 2)))
        halves = (frames + 1) // 2  # each stride-2 convolution halves the frames, rounding up
        hidden = hidden * (torch.arange(hidden.shape[2])[None, :] < halves[:, None])[:, None, :]
        tokens = functional.gelu(self.conv2(hidden)).transpose(1, 2)
        mask = torch.arange(tokens.shape[1])[None, :] < ((halves + 1) // 2)[:, None]
        return tokens, mask


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class CMIConfig:
    width: int = 128
    heads: int = 4
    prompt_layers: int = 1
    joint_layers: int = 2
    sample_rate: int = 16_000
    n_mels: int = 64
    max_text_tokens: int = 48
    modality_dropout: float = 0.2


def _encoder(width: int, heads: int, layers: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        width, heads, 2 * width, dropout=0.0, batch_first=True, norm_first=True
    )
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


@dataclass
class RewardInputs:
    """A batch: evaluated audio, instruction texts, lyrics (empty: none) and reference audio
    (None: none), each a list of one entry per item."""

    audio: Sequence[np.ndarray]
    texts: Sequence[str]
    lyrics: Sequence[str]
    references: Sequence[np.ndarray | None]


class CMIRewardModel(nn.Module):
    """The reward model (module docstring); ``text_encoder`` and ``tokenizer`` are any
    transformers encoder and its tokenizer."""

    def __init__(self, text_encoder: Any, tokenizer: Any, config: CMIConfig = CMIConfig()) -> None:
        super().__init__()
        if config.width % config.heads:
            raise RewardModelError(f"width {config.width} is not a multiple of heads {config.heads}")
        self.config = config
        self.text_encoder = text_encoder
        self.tokenizer = tokenizer
        hidden = int(getattr(text_encoder.config, "hidden_size", 0) or 0)
        if hidden < 1:
            raise RewardModelError(
                f"{type(text_encoder).__name__} has no hidden_size: not a transformers encoder"
            )
        self.text_projection = nn.Linear(hidden, config.width)
        self.audio = AudioEncoder(config.width, config.sample_rate, config.n_mels)
        self.types = nn.Embedding(4, config.width)  # text, lyrics, reference audio, evaluated audio
        self.null_reference = nn.Embedding(1, config.width)
        self.prompt = _encoder(config.width, config.heads, config.prompt_layers)
        self.joint = _encoder(config.width, config.heads, config.joint_layers)
        self.head = nn.Sequential(
            nn.LayerNorm(config.width),
            nn.Linear(config.width, config.width),
            nn.ReLU(),
            nn.Linear(config.width, 2),
        )

    def _text(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.config.max_text_tokens,
            return_tensors="pt",
        )
        hidden = self.text_encoder(
            input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]
        ).last_hidden_state
        return self.text_projection(hidden), encoded["attention_mask"].bool()

    def _audio(self, clips: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.audio([torch.as_tensor(np.asarray(clip, dtype=np.float32)) for clip in clips])

    def forward(self, batch: RewardInputs) -> torch.Tensor:
        """``batch x 2`` scores: ``[alignment, musicality]``."""
        size = len(batch.audio)
        if not size or not (len(batch.texts) == len(batch.lyrics) == len(batch.references) == size):
            raise RewardModelError(
                f"a batch has one text, lyrics and reference per audio clip: {size} clips, "
                f"{len(batch.texts)} texts, {len(batch.lyrics)} lyrics, {len(batch.references)} references"
            )
        empty = [i for i, text in enumerate(batch.texts) if not text.strip()]
        if empty:
            raise RewardModelError(f"every item needs its instruction's text; item {empty[0]} has none")
        drop = self.config.modality_dropout if self.training else 0.0
        keep_lyrics = [bool(text.strip()) and (float(torch.rand(())) >= drop) for text in batch.lyrics]
        keep_reference = [r is not None and (float(torch.rand(())) >= drop) for r in batch.references]
        text, text_mask = self._text(batch.texts)
        parts = [text + self.types.weight[0]]
        masks = [text_mask]
        if any(keep_lyrics):
            kept = [t if keep else "" for t, keep in zip(batch.lyrics, keep_lyrics, strict=True)]
            lyrics, lyrics_mask = self._text(kept)
            parts.append(lyrics + self.types.weight[1])
            masks.append(lyrics_mask & torch.tensor(keep_lyrics)[:, None])
        reference = self.null_reference.weight[None].expand(size, 1, -1)
        reference_mask = torch.ones(size, 1, dtype=torch.bool)
        given = [i for i, keep in enumerate(keep_reference) if keep]
        if given:
            tokens, mask = self._audio([batch.references[i] for i in given])  # type: ignore[misc]
            width = tokens.shape[1]
            reference = torch.cat([reference, torch.zeros(size, width, self.config.width)], dim=1).clone()
            reference_mask = torch.cat([reference_mask, torch.zeros(size, width, dtype=torch.bool)], dim=1)
            index = torch.tensor(given)
            reference[index, 1:] = tokens
            reference_mask[index, 1:] = mask
        parts.append(reference + self.types.weight[2])
        masks.append(reference_mask)
        prompt_mask = torch.cat(masks, dim=1)
        prompt = self.prompt(torch.cat(parts, dim=1), src_key_padding_mask=~prompt_mask)
        audio, audio_mask = self._audio(batch.audio)
        joint_mask = torch.cat([prompt_mask, audio_mask], dim=1)
        joint = self.joint(
            torch.cat([prompt, audio + self.types.weight[3]], dim=1), src_key_padding_mask=~joint_mask
        )
        evaluated = joint[:, prompt.shape[1] :]
        weights = audio_mask.float()[:, :, None]
        pooled = (evaluated * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return torch.as_tensor(self.head(pooled))

    def own_modules(self) -> nn.ModuleDict:
        """Every part but the text encoder (which is saved the transformers way)."""
        return nn.ModuleDict({name: m for name, m in self.named_children() if name != "text_encoder"})

    def describe(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "text_encoder": type(self.text_encoder).__name__}


# --------------------------------------------------------------------------- losses and filtering


def pairwise_loss(
    scores_a: torch.Tensor, scores_b: torch.Tensor, preferred: Sequence[Sequence[str]], smoothing: float = 0.1
) -> torch.Tensor:
    """Bradley-Terry loss over both dimensions: the binary cross-entropy of
    ``sigmoid(r_a - r_b)`` against 1 (``a`` preferred), 0 (``b``) or 0.5 (a tie), the hard
    targets smoothed by ``smoothing`` towards one half."""
    if not 0 <= smoothing < 1:
        raise RewardModelError(f"label smoothing is in [0, 1), got {smoothing}")
    values = {"a": 1.0, "b": 0.0, "tie": 0.5}
    try:
        targets = torch.tensor([[values[p] for p in row] for row in preferred], dtype=torch.float32)
    except KeyError as error:
        raise RewardModelError(f"a preference is a, b or tie; got {error.args[0]!r}") from None
    if targets.shape != scores_a.shape or scores_a.shape != scores_b.shape:
        raise RewardModelError(
            f"preferences {tuple(targets.shape)} and scores {tuple(scores_a.shape)}, "
            f"{tuple(scores_b.shape)} differ"
        )
    targets = targets * (1 - smoothing) + 0.5 * smoothing
    return functional.binary_cross_entropy_with_logits(scores_a - scores_b, targets)


def regression_loss(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the scores against reference scores (``batch x 2``)."""
    if scores.shape != targets.shape:
        raise RewardModelError(f"scores {tuple(scores.shape)} and targets {tuple(targets.shape)} differ")
    return functional.mse_loss(scores, targets)


def top_k(
    generate: Callable[[int], Any],
    score: Callable[[Sequence[Any]], Sequence[float]],
    n: int,
    k: int,
) -> list[tuple[Any, float]]:
    """Draw ``n`` candidates (``generate(i)``), keep the ``k`` with the highest ``score``, best
    first (ties in draw order)."""
    if not 1 <= k <= n:
        raise RewardModelError(f"top-k filtering keeps 1..n of n candidates; got k={k}, n={n}")
    candidates = [generate(i) for i in range(n)]
    scores = [float(s) for s in score(candidates)]
    if len(scores) != n or not all(math.isfinite(s) for s in scores):
        raise RewardModelError(f"the scorer gave {len(scores)} finite scores for {n} candidates")
    order = sorted(range(n), key=lambda i: -scores[i])[:k]
    return [(candidates[i], scores[i]) for i in order]


# --------------------------------------------------------------------------- training


@dataclass(frozen=True)
class PreferencePair:
    """Two clips for one instruction and which is preferred per dimension (``a``, ``b`` or
    ``tie``, in :data:`DIMENSIONS` order); ``labels``, when known, are reference scores of the
    two clips (``(a's, b's)``, each in :data:`DIMENSIONS` order) for regression training."""

    audio_a: np.ndarray
    audio_b: np.ndarray
    text: str
    lyrics: str
    reference: np.ndarray | None
    preferred: tuple[str, str]
    labels: tuple[tuple[float, float], tuple[float, float]] | None = None


@dataclass(frozen=True)
class RewardTraining:
    steps: int = 300
    batch_pairs: int = 8
    learning_rate: float = 3e-4
    smoothing: float = 0.1
    seed: int = 0
    regression_weight: float = 0.0
    """The weight of the regression loss on the pairs' ``labels`` beside the Bradley-Terry
    loss (0: pairwise training alone)."""


def score_pairs(model: CMIRewardModel, pairs: Sequence[PreferencePair]) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's scores of every pair's two clips (``pairs x 2`` each)."""

    def side(pick: Callable[[PreferencePair], np.ndarray]) -> RewardInputs:
        return RewardInputs(
            [pick(p) for p in pairs],
            [p.text for p in pairs],
            [p.lyrics for p in pairs],
            [p.reference for p in pairs],
        )

    return model(side(lambda p: p.audio_a)), model(side(lambda p: p.audio_b))


def train_reward_model(
    model: CMIRewardModel,
    pairs: Sequence[PreferencePair],
    settings: RewardTraining,
    log: Callable[[int, float], None] | None = None,
) -> None:
    """Bradley-Terry training on ``pairs`` (AdamW, cosine decay), plus ``regression_weight``
    times the regression loss of both clips' scores on their ``labels`` (the batch's pairs that
    have labels); ``log(step, loss)``."""
    if not pairs:
        raise RewardModelError("training needs at least one preference pair")
    if settings.regression_weight < 0 or not math.isfinite(settings.regression_weight):
        raise RewardModelError(f"regression_weight must be >= 0, got {settings.regression_weight}")
    if settings.regression_weight > 0 and all(p.labels is None for p in pairs):
        raise RewardModelError("regression training needs pairs with labels; none of these has any")
    generator = np.random.default_rng(settings.seed)
    torch.manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(1, settings.steps))
    model.train()
    for step in range(1, settings.steps + 1):
        batch = [pairs[int(i)] for i in generator.integers(len(pairs), size=settings.batch_pairs)]
        scores_a, scores_b = score_pairs(model, batch)
        loss = pairwise_loss(scores_a, scores_b, [p.preferred for p in batch], settings.smoothing)
        labelled = [k for k, p in enumerate(batch) if p.labels is not None]
        if settings.regression_weight > 0 and labelled:
            targets = torch.tensor([batch[k].labels for k in labelled], dtype=torch.float32)  # pairs x 2 x 2
            scores = torch.stack([scores_a[labelled], scores_b[labelled]], dim=1)
            loss = loss + settings.regression_weight * regression_loss(scores, targets)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if log is not None:
            log(step, float(loss.detach()))
    model.eval()


# --------------------------------------------------------------------------- the model folder

WEIGHTS = "reward.safetensors"
CONFIG = "reward.json"
TEXT_ENCODER = "text_encoder"


def save_reward_model(model: CMIRewardModel, directory: Path | str) -> Path:
    """Write the model into ``directory``: ``reward.json`` (its config), ``reward.safetensors``
    (every weight but the text encoder's) and ``text_encoder/`` (the encoder and its
    tokenizer, as transformers saves them)."""
    import json

    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.text_encoder.save_pretrained(directory / TEXT_ENCODER)
    model.tokenizer.save_pretrained(directory / TEXT_ENCODER)
    own = {name: value.contiguous() for name, value in model.own_modules().state_dict().items()}
    save_file(own, str(directory / WEIGHTS))
    (directory / CONFIG).write_text(json.dumps(model.describe(), indent=1) + "\n", encoding="utf-8")
    return directory


def load_reward_model(directory: Path | str) -> CMIRewardModel:
    """The model :func:`save_reward_model` wrote into ``directory``, in eval mode."""
    import json

    from transformers import AutoModel, AutoTokenizer

    from embodia.core.weights import load_weights

    directory = Path(directory)
    if not (directory / CONFIG).is_file():
        raise RewardModelError(f"{directory} is not a reward model folder: it has no {CONFIG}")
    try:
        config = CMIConfig(**json.loads((directory / CONFIG).read_text(encoding="utf-8"))["config"])
    except (ValueError, KeyError, TypeError) as error:
        raise RewardModelError(f"{directory / CONFIG} is not a reward model's config: {error}") from None
    try:
        encoder = AutoModel.from_pretrained(directory / TEXT_ENCODER, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(directory / TEXT_ENCODER, local_files_only=True)
    except (OSError, ValueError) as error:
        raise RewardModelError(
            f"cannot load the text encoder in {directory / TEXT_ENCODER}: {error}"
        ) from None
    model = CMIRewardModel(encoder, tokenizer, config)
    load_weights(model.own_modules(), directory / WEIGHTS, RewardModelError, "its config")
    return model.eval()
