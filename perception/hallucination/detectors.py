"""Scores that tell a caption's real objects from its hallucinated ones, read from one
:class:`~embodia.perception.hallucination.signals.CaptionPass`.

Convention (as the InsLen reference's evaluation): a score is **higher for a real object**;
detection is measured with real (recalled) mentions as the positive class
(:mod:`embodia.perception.hallucination.metrics`).

A mention spans several tokens ("a red cube" is " red", " c", "u", "be" in a small BPE); a
token-level score is computed at each of them and combined by ``aggregate``: ``min`` (the
default: the least supported word decides, since a wrong colour or a wrong shape each makes
the object absent), ``mean``, or ``first`` (the reference's first sub-token).

- :func:`inslen_scores`: the Instruction Lens Score (Calibrated Local Score and Context
  Consistency Score; the reference's hyper-parameters as defaults, its layer choices for a
  32-layer model carried to any depth as fractions of it).
- :func:`attention_scores`: the attention-mass baseline (SVAR): attention from the state that
  predicts the token to the image tokens, summed over heads and the middle layers.
- :func:`token_signals`: the decoding signals HaloProbe's internal estimator reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

import numpy as np

from embodia.perception.hallucination.mentions import HallucinationError
from embodia.perception.hallucination.signals import CaptionPass, layer_index

if TYPE_CHECKING:
    import torch

Aggregate = Literal["min", "mean", "first"]
AGGREGATES: tuple[str, ...] = ("min", "mean", "first")


def _check_aggregate(aggregate: str) -> None:
    if aggregate not in AGGREGATES:
        raise HallucinationError(f"aggregate must be one of {', '.join(AGGREGATES)}; got {aggregate!r}")


def combine(token_scores: Sequence[float], aggregate: str) -> float:
    """One mention's score from its tokens' scores."""
    _check_aggregate(aggregate)
    if not token_scores:
        raise HallucinationError("a mention has no tokens to score")
    if aggregate == "first":
        return float(token_scores[0])
    return float(np.min(token_scores) if aggregate == "min" else np.mean(token_scores))


@dataclass(frozen=True)
class InsLenConfig:
    """InsLen's hyper-parameters; the defaults are the reference's for LLaVA-1.5 (32 layers):
    image layer 24, output layer 32, instruction layer 22, as fractions of the depth."""

    top_k: int = 32
    """Image tokens the local score averages over (capped at the image's token count)."""
    image_layer: float = 24 / 32
    """ℓ_v: the layer whose image-token states the local score compares with, as a fraction
    of the decoder's depth."""
    text_layer: float = 32 / 32
    """ℓ_t: the layer of the object's own (predicting) state."""
    instruction_layer: float = 22 / 32
    """ℓ_i: the layer whose instruction-token states the lens reads."""
    scale: float = 0.1
    """τ: the logit lens multiplies logits by it (a softer distribution, temperature 1/τ)."""
    bias: float = 2.0
    """b in CCS = (b - d) · mean(π)."""
    context_num: int = 4
    """c: the instruction tokens (top by lens probability) that form the context."""
    weight: float = 0.4
    """λ in InsLen = (1 - λ) · CLS + λ · CCS."""
    aggregate: Aggregate = "min"

    def __post_init__(self) -> None:
        for name in ("image_layer", "text_layer", "instruction_layer"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 <= value <= 1):
                raise HallucinationError(f"InsLen {name} is a fraction of the depth in [0, 1]; got {value!r}")
        if not (isinstance(self.top_k, int) and self.top_k >= 1):
            raise HallucinationError(f"InsLen top_k must be a positive integer; got {self.top_k!r}")
        if not (isinstance(self.context_num, int) and self.context_num >= 1):
            raise HallucinationError(
                f"InsLen context_num must be a positive integer; got {self.context_num!r}"
            )
        if not (isinstance(self.weight, int | float) and 0 <= self.weight <= 1):
            raise HallucinationError(f"InsLen weight λ must be in [0, 1]; got {self.weight!r}")
        if not (isinstance(self.scale, int | float) and self.scale > 0):
            raise HallucinationError(f"InsLen scale must be positive; got {self.scale!r}")
        _check_aggregate(self.aggregate)


@dataclass(frozen=True)
class InsLenParts:
    """The parts of one token's InsLen score."""

    lens_weight: float
    """w: the largest lens probability of the token over the instruction tokens."""
    local: float
    """S_loc: mean cosine between the object state and its top-k image-token states."""
    calibrated_local: float
    """CLS = w · S_loc."""
    context_consistency: float
    """CCS = (b - d) · mean(π)."""
    score: float
    """InsLen = (1 - λ) · CLS + λ · CCS."""


INSLEN_PARTS: tuple[str, ...] = tuple(f.name for f in fields(InsLenParts))


def inslen_token_parts(
    hidden_object: torch.Tensor,
    image_states: torch.Tensor,
    image_probs: torch.Tensor,
    instruction_states: torch.Tensor,
    instruction_probs: torch.Tensor,
    config: InsLenConfig,
) -> InsLenParts:
    """InsLen of one token from the tensors it reads: the object's predicting state at ℓ_t
    (D,), the image tokens' states at ℓ_v (N, D) and their lens probabilities of the token
    (N,), the instruction tokens' states at ℓ_i (M, D) and lens probabilities (M,)."""
    import torch

    if instruction_probs.numel() == 0:
        raise HallucinationError("the prompt has no instruction tokens after the image")
    k = min(config.top_k, int(image_probs.numel()))
    top_image = torch.topk(image_probs, k).indices
    cosines = torch.nn.functional.cosine_similarity(hidden_object[None], image_states[top_image], dim=-1)
    local = float(cosines.mean())
    lens_weight = float(instruction_probs.max())
    c = min(config.context_num, int(instruction_probs.numel()))
    top = torch.topk(instruction_probs, c)
    context = instruction_states[top.indices].mean(dim=0)
    distance = float(
        torch.linalg.vector_norm(hidden_object - context) / torch.linalg.vector_norm(hidden_object)
    )
    consistency = (config.bias - distance) * float(top.values.mean())
    calibrated = lens_weight * local
    score = (1 - config.weight) * calibrated + config.weight * consistency
    return InsLenParts(lens_weight, local, calibrated, consistency, score)


Layers = tuple[int, int, int]
"""InsLen's (ℓ_v, ℓ_t, ℓ_i) as hidden-state indices (0 is the embedding layer)."""


def inslen_layers(config: InsLenConfig, layers: int) -> Layers:
    """The hidden-state indices of ``config``'s layer fractions in a model of ``layers`` layers."""
    return (
        layer_index(config.image_layer, layers),
        layer_index(config.text_layer, layers),
        layer_index(config.instruction_layer, layers),
    )


def inslen_scores(
    caption: CaptionPass, config: InsLenConfig | None = None, layers: Layers | None = None
) -> list[float]:
    """InsLen of each mention of ``caption`` (higher: more likely real), at ``config``'s layer
    fractions or at the hidden-state indices ``layers``."""
    config = config or InsLenConfig()
    return inslen_grid(caption, config, [(layers or inslen_layers(config, caption.layers), config.weight)])[0]


def inslen_layer_grid(layers: int) -> list[Layers]:
    """The layer choices a search tries: every (ℓ_v, ℓ_i) pair of hidden states, with the
    object's state from the last layer or the one before it (the reference reads the last)."""
    return [
        (v, t, i)
        for t in sorted({max(1, layers - 1), layers})
        for v in range(layers + 1)
        for i in range(layers + 1)
    ]


InsLenChoice = tuple[Layers, float]
"""A choice a search tries: the layers and the weight λ of CCS beside CLS."""

INSLEN_WEIGHTS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""The λ a search tries (the reference's 0.4 among them)."""


def inslen_search_grid(layers: int) -> list[InsLenChoice]:
    """Every layer choice of :func:`inslen_layer_grid` with every λ of :data:`INSLEN_WEIGHTS`."""
    return [(choice, weight) for choice in inslen_layer_grid(layers) for weight in INSLEN_WEIGHTS]


def inslen_grid(
    caption: CaptionPass, config: InsLenConfig, choices: Sequence[InsLenChoice]
) -> list[list[float]]:
    """InsLen of each mention at each of the ``choices`` of layers and λ: one list of mention
    scores per choice. Each layer's lens and each token's parts are computed once, whatever the
    number of choices; λ mixes the token's parts before they are combined over the mention."""
    tokens = _token_parts(caption, config, [layers for layers, _ in choices])
    return [
        [
            combine(
                [(1 - weight) * p.calibrated_local + weight * p.context_consistency for p in mention],
                config.aggregate,
            )
            for mention in tokens[layers]
        ]
        for layers, weight in choices
    ]


def inslen_grid_parts(
    caption: CaptionPass, config: InsLenConfig, choices: Sequence[Layers]
) -> list[list[InsLenParts]]:
    """Every part of each mention's score at each layer choice (each part combined over the
    mention's tokens by ``config.aggregate``, as the score is): what tells which premise of the
    score holds on a model."""
    tokens = _token_parts(caption, config, choices)
    return [
        [
            InsLenParts(
                *(
                    combine([getattr(parts, name) for parts in mention], config.aggregate)
                    for name in INSLEN_PARTS
                )
            )
            for mention in tokens[layers]
        ]
        for layers in choices
    ]


def _token_parts(
    caption: CaptionPass, config: InsLenConfig, choices: Sequence[Layers]
) -> dict[Layers, list[list[InsLenParts]]]:
    """Per layer choice, per mention, the parts of each of its tokens' scores."""
    for choice in choices:
        if not all(0 <= index <= caption.layers for index in choice):
            raise HallucinationError(f"InsLen layers {choice} are outside the model's 0..{caption.layers}")
    image_lens = {v: caption.lens(v, caption.image, config.scale) for v in {c[0] for c in choices}}
    instruction_lens = {
        i: caption.lens(i, caption.instruction, config.scale) for i in {c[2] for c in choices}
    }
    out: dict[Layers, list[list[InsLenParts]]] = {}
    for image_layer, text_layer, instruction_layer in dict.fromkeys(choices):
        image_states = caption.hidden[image_layer, caption.image]
        instruction_states = caption.hidden[instruction_layer, caption.instruction]
        out[(image_layer, text_layer, instruction_layer)] = [
            [
                inslen_token_parts(
                    caption.hidden[text_layer, p - 1],
                    image_states,
                    image_lens[image_layer][:, int(caption.input_ids[p])],
                    instruction_states,
                    instruction_lens[instruction_layer][:, int(caption.input_ids[p])],
                    config,
                )
                for p in positions
            ]
            for positions in caption.mention_tokens
        ]
    return out


@dataclass(frozen=True)
class AttentionConfig:
    """The attention-mass baseline: the reference sums layers 4-17 of a 32-layer model (the
    middle layers, numbered 0-31), here as fractions of the last layer's index: layer
    ``round(fraction * (L - 1))`` of a model with L layers."""

    first_layer: float = 4 / 31
    last_layer: float = 17 / 31
    aggregate: Aggregate = "min"

    def __post_init__(self) -> None:
        if not (0 <= self.first_layer <= self.last_layer <= 1):
            raise HallucinationError(
                "attention layers are fractions 0 <= first <= last <= 1; "
                f"got {self.first_layer}, {self.last_layer}"
            )
        _check_aggregate(self.aggregate)

    def layers(self, count: int) -> range:
        """The attention layers (0..count-1) it sums over: at least one."""
        return range(round(self.first_layer * (count - 1)), round(self.last_layer * (count - 1)) + 1)


def image_attention(caption: CaptionPass) -> torch.Tensor:
    """(L, H, T) attention mass each position's query gives the image tokens, per layer and head."""
    if caption.attentions is None:
        raise HallucinationError("this detector reads attention maps: run caption_pass(..., attentions=True)")
    return caption.attentions[:, :, :, caption.image].sum(dim=-1)


def attention_scores(caption: CaptionPass, config: AttentionConfig | None = None) -> list[float]:
    """The attention mass on the image of each mention (higher: more likely real)."""
    config = config or AttentionConfig()
    mass = image_attention(caption)
    layers = list(config.layers(int(mass.shape[0])))
    return [
        combine([float(mass[layers, :, p - 1].sum()) for p in positions], config.aggregate)
        for positions in caption.mention_tokens
    ]


def token_signals(caption: CaptionPass) -> list[np.ndarray]:
    """For each mention, its tokens' decoding signals, one row per token: the attention mass
    on the image per layer and head (L·H values), the entropy of the next-token distribution
    that produced the token, the token's logit-lens probability at each layer 1..L, and its
    log-probability."""
    import torch

    mass = image_attention(caption)
    log_probs = torch.log_softmax(caption.logits, dim=-1)
    out = []
    for positions in caption.mention_tokens:
        rows = []
        for p in positions:
            token = int(caption.input_ids[p])
            step = log_probs[p - 1]
            entropy = float(-(step.exp() * step).sum())
            lens = [
                float(caption.lens(layer, torch.tensor([p - 1]))[0, token])
                for layer in range(1, caption.layers + 1)
            ]
            rows.append(
                np.concatenate([mass[:, :, p - 1].flatten().numpy(), [entropy], lens, [float(step[token])]])
            )
        out.append(np.stack(rows))
    return out


def signal_names(layers: int, heads: int) -> list[str]:
    """Names of :func:`token_signals`' columns."""
    return (
        [f"image_attention/L{layer}H{head}" for layer in range(layers) for head in range(heads)]
        + ["entropy"]
        + [f"lens_prob/L{layer}" for layer in range(1, layers + 1)]
        + ["log_prob"]
    )


Scorer = Callable[[CaptionPass], list[float]]
"""A detector: a caption pass in, one score per mention out (higher: more likely real)."""
