"""Parallel bitwise prediction of spatially grouped, multi-level codes, and a tiny unified
autoregressive model that writes an image's codes from a text and reads its own codes back.

**Grouping.** The codes of an image, (M, h, w, K) bits (:mod:`~.autoencoder`), are cut into
``g x g`` blocks of grid positions, in raster order; one block is one autoregressive *step*
that carries all its ``N = g^2 * M * K`` bits (within a step: row, column, level, bit).
The visual sequence is ``g^2`` times shorter than one step per position.

**The bitwise head** (Infinity's "infinite-vocabulary classifier"): a linear layer gives two
logits per bit, reshaped to (B, L, N, 2): N independent binary classifiers instead of one
softmax over 2^N codes. The loss of a step is the sum over its bits of the per-bit cross
entropy, averaged over steps (:func:`bitwise_loss`).

**The unified model** (:class:`TinyUnifiedAR`): a causal transformer over
``[text tokens (left-padded), <image>, step 1, ..., step S-1]``; the output at ``<image>``
predicts step 1, the output at step ``s`` predicts step ``s + 1``. A step enters the model as
its bits themselves (signs ``+-1`` through a linear layer): the codes it generated are read
back as they are, never decoded to pixels and encoded again, so generation and understanding
share one token space (UniAR's single-tokenizer loop). Training is teacher-forced; with
``flip_probability`` the bits fed as inputs are flipped at random (Infinity's bitwise
self-correction) while the targets stay the true bits. :func:`generate_images` samples the
steps one by one and decodes them with the tokenizer's decoder.

Our reconstruction of UniAR's head, whose code is not public: ``g^2 * M * K`` binary logits
per step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from embodia.perception.tokenizers.autoencoder import (
    FORMAT,
    BitwiseTokenizer,
    load_state,
    read_json_record,
    tensor_to_images,
)
from embodia.perception.tokenizers.lfq import TokenizerError, bits_to_signs

AR_WEIGHTS_FILE = "unified_ar.safetensors"
AR_CONFIG_FILE = "unified_ar.json"
PAD, UNKNOWN = "<pad>", "<unk>"
_WORDS = re.compile(r"\w+|[^\w\s]")


# --------------------------------------------------------------------------- grouping


def group_bits(bits: torch.Tensor, group: int) -> torch.Tensor:
    """Codes (B, M, h, w, K) as steps (B, S, g*g*M*K): ``g x g`` blocks of positions in raster
    order, each block's bits ordered by row, column, level and bit."""
    if bits.ndim != 5:
        raise TokenizerError(f"codes must be (B, M, h, w, K), got shape {tuple(bits.shape)}")
    batch, levels, rows, cols, width = bits.shape
    check_grouping(rows, cols, group)
    blocks = bits.reshape(batch, levels, rows // group, group, cols // group, group, width)
    # -> (B, block row, block col, row in block, col in block, level, bit)
    ordered = blocks.permute(0, 2, 4, 3, 5, 1, 6)
    return ordered.reshape(batch, (rows // group) * (cols // group), group * group * levels * width)


def ungroup_bits(steps: torch.Tensor, group: int, levels: int, rows: int, cols: int) -> torch.Tensor:
    """The inverse of :func:`group_bits`: steps (B, S, N) back to codes (B, M, h, w, K)."""
    check_grouping(rows, cols, group)
    batch, count, per_step = steps.shape
    if count != (rows // group) * (cols // group) or per_step % (group * group * levels):
        raise TokenizerError(
            f"{count} steps of {per_step} bits do not fill a {rows}x{cols} grid of {levels}-level codes "
            f"in {group}x{group} groups"
        )
    width = per_step // (group * group * levels)
    blocks = steps.reshape(batch, rows // group, cols // group, group, group, levels, width)
    return blocks.permute(0, 5, 1, 3, 2, 4, 6).reshape(batch, levels, rows, cols, width)


def check_grouping(rows: int, cols: int, group: int) -> None:
    """An error unless ``group`` is a positive integer dividing both sides of the code grid."""
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise TokenizerError(f"group must be a positive integer, got {group!r}")
    if rows % group or cols % group:
        raise TokenizerError(f"a {rows}x{cols} code grid cannot be cut into {group}x{group} groups")


# --------------------------------------------------------------------------- the head and its loss


class BitwiseHead(nn.Module):
    """Two logits for each of ``bits`` bits: (..., d) -> (..., bits, 2)."""

    def __init__(self, width: int, bits: int) -> None:
        super().__init__()
        self.bits = bits
        self.linear = nn.Linear(width, bits * 2)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden).unflatten(-1, (self.bits, 2))


def per_bit_cross_entropy(logits: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """The cross entropy (nats) of each bit: ``logits`` (..., N, 2), ``bits`` (..., N) in {0, 1};
    the result is shaped like ``bits``."""
    if logits.shape[:-1] != bits.shape or logits.shape[-1] != 2:
        raise TokenizerError(
            f"logits (..., N, 2) and bits (..., N) do not match: {tuple(logits.shape)} vs {tuple(bits.shape)}"
        )
    return -torch.log_softmax(logits.float(), dim=-1).gather(-1, bits.long().unsqueeze(-1)).squeeze(-1)


def bitwise_loss(logits: torch.Tensor, bits: torch.Tensor) -> dict[str, torch.Tensor]:
    """``loss``: the sum over a step's bits of their cross entropy, averaged over steps (and
    batch); ``bit_cross_entropy``: the mean per bit (nats); ``bit_accuracy``: the share of bits
    whose larger logit is the true one."""
    per_bit = per_bit_cross_entropy(logits, bits)
    return {
        "loss": per_bit.sum(-1).mean(),
        "bit_cross_entropy": per_bit.mean(),
        "bit_accuracy": (logits.argmax(-1) == bits).float().mean(),
    }


def sample_bits(
    logits: torch.Tensor, temperature: float = 0.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One bit per pair of logits (..., N, 2): the likelier one (``temperature`` 0) or drawn from
    ``softmax(logits / temperature)``."""
    if temperature < 0 or not math.isfinite(temperature):
        raise TokenizerError(f"temperature must be a finite number >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(-1)
    probability_one = torch.softmax(logits.float() / temperature, dim=-1)[..., 1]
    draws = torch.rand(probability_one.shape, generator=generator, device=logits.device)
    return (draws < probability_one).long()


def flip_bits(
    bits: torch.Tensor, probability: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``bits`` with each one flipped with ``probability`` (bitwise self-correction's noise)."""
    if probability == 0:
        return bits
    flips = torch.rand(bits.shape, generator=generator, device=bits.device) < probability
    return torch.where(flips, 1 - bits, bits)


# --------------------------------------------------------------------------- text


class WordVocab:
    """Words and punctuation marks of a set of texts, lowercased; id 0 pads, id 1 is any word
    not seen when the vocabulary was built."""

    def __init__(self, words: Iterable[str]) -> None:
        self.words = [PAD, UNKNOWN, *sorted(set(words) - {PAD, UNKNOWN})]
        self.ids = {word: index for index, word in enumerate(self.words)}

    @classmethod
    def build(cls, texts: Iterable[str]) -> WordVocab:
        return cls(word for text in texts for word in split_words(text))

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, length: int) -> list[int]:
        """``text``'s ids, left-padded to ``length``; an error when it has more words."""
        ids = [self.ids.get(word, 1) for word in split_words(text)]
        if len(ids) > length:
            raise TokenizerError(f"a text of {len(ids)} words does not fit the model's {length} text tokens")
        return [0] * (length - len(ids)) + ids

    def encode_batch(self, texts: Sequence[str], length: int) -> torch.Tensor:
        return torch.tensor([self.encode(text, length) for text in texts], dtype=torch.int64)


def split_words(text: str) -> list[str]:
    """Lowercased words and punctuation marks."""
    return _WORDS.findall(text.lower())


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class UnifiedARConfig:
    """The tiny unified model's shape."""

    vocab_size: int
    text_length: int
    """Text tokens (left-padded) before the image."""
    steps: int
    """S: autoregressive steps per image (code groups)."""
    bits_per_step: int
    """N = g^2 * M * K."""
    width: int = 128
    layers: int = 2
    heads: int = 4

    def __post_init__(self) -> None:
        for name, low, high in (
            ("vocab_size", 3, 1_000_000),
            ("text_length", 1, 4096),
            ("steps", 1, 4096),
            ("bits_per_step", 1, 65_536),
            ("width", 8, 4096),
            ("layers", 1, 64),
            ("heads", 1, 64),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise TokenizerError(f"{name} must be an integer in {low}..{high}, got {value!r}")
        if self.width % self.heads:
            raise TokenizerError(f"width {self.width} is not a multiple of heads {self.heads}")


class TinyUnifiedAR(nn.Module):
    """A causal transformer that writes an image's code steps after its text (module docstring)."""

    def __init__(self, config: UnifiedARConfig) -> None:
        super().__init__()
        self.config = config
        width = config.width
        self.text_embedding = nn.Embedding(config.vocab_size, width)
        self.bit_embedding = nn.Linear(config.bits_per_step, width)
        self.begin_image = nn.Parameter(torch.zeros(width))
        self.positions = nn.Embedding(config.text_length + config.steps, width)
        layer = nn.TransformerEncoderLayer(
            width, config.heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = BitwiseHead(width, config.bits_per_step)
        nn.init.normal_(self.begin_image, std=0.02)

    def embed_steps(self, step_bits: torch.Tensor) -> torch.Tensor:
        """The input vectors of code steps (B, s, N): their bits, as signs, through a linear layer."""
        return self.bit_embedding(bits_to_signs(step_bits))

    def forward(self, text_ids: torch.Tensor, step_bits: torch.Tensor) -> torch.Tensor:
        """Logits (B, s + 1, N, 2) for steps ``1 .. s + 1`` given the text (B, T) and the bits of
        steps ``1 .. s`` (B, s, N), ``s < S``."""
        config = self.config
        batch, count = text_ids.shape[0], step_bits.shape[1]
        if text_ids.shape[1] != config.text_length:
            raise TokenizerError(f"texts must be {config.text_length} tokens, got {text_ids.shape[1]}")
        if count >= config.steps or (count and step_bits.shape[2] != config.bits_per_step):
            raise TokenizerError(
                f"the model reads up to {config.steps - 1} steps of {config.bits_per_step} bits, "
                f"got {tuple(step_bits.shape[1:])}"
            )
        parts = [self.text_embedding(text_ids), self.begin_image.expand(batch, 1, -1)]
        if count:
            parts.append(self.embed_steps(step_bits))
        sequence = torch.cat(parts, dim=1)
        length = sequence.shape[1]
        sequence = sequence + self.positions(torch.arange(length, device=sequence.device))
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=sequence.device)
        hidden = self.norm(self.blocks(sequence, mask=mask, is_causal=True))
        return self.head(hidden[:, config.text_length :])

    def teacher_forced(
        self,
        text_ids: torch.Tensor,
        steps: torch.Tensor,
        flip_probability: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """:func:`bitwise_loss` of every step of ``steps`` (B, S, N) given the steps before it
        (their bits flipped with ``flip_probability``; the targets are never flipped)."""
        inputs = flip_bits(steps[:, :-1], flip_probability, generator)
        return bitwise_loss(self(text_ids, inputs), steps)

    @torch.no_grad()
    def generate(
        self, text_ids: torch.Tensor, temperature: float = 0.0, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """The S code steps (B, S, N) written one by one after ``text_ids``: each step's bits are
        sampled from its logits and fed back, as bits, to predict the next."""
        written = text_ids.new_zeros((text_ids.shape[0], 0, self.config.bits_per_step))
        for step in range(self.config.steps):
            logits = self(text_ids, written)[:, step]
            written = torch.cat([written, sample_bits(logits, temperature, generator).unsqueeze(1)], dim=1)
        return written


@torch.no_grad()
def generate_images(
    model: TinyUnifiedAR,
    tokenizer: BitwiseTokenizer,
    vocab: WordVocab,
    texts: Sequence[str],
    group: int,
    *,
    height: int,
    width: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[NDArray[np.uint8], torch.Tensor]:
    """Images (N, H, W, 3) written by ``model`` for ``texts``, and their codes (N, M, h, w, K):
    the generated bits go straight to the tokenizer's decoder."""
    rows, cols = tokenizer.config.grid(height, width)
    steps = model.generate(vocab.encode_batch(texts, model.config.text_length), temperature, generator)
    codes = ungroup_bits(steps, group, tokenizer.config.levels, rows, cols)
    was_training = tokenizer.training
    tokenizer.eval()
    try:
        images = tensor_to_images(tokenizer.decode_bits(codes))
    finally:
        tokenizer.train(was_training)
    return images, codes


# --------------------------------------------------------------------------- saving


def save_unified_ar(model: TinyUnifiedAR, vocab: WordVocab, group: int, directory: Path | str) -> Path:
    """Write ``unified_ar.safetensors`` and ``unified_ar.json`` (config, vocabulary, group)."""
    from safetensors.torch import save_file

    from embodia.core.runs import write_json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {name: value.detach().cpu().contiguous() for name, value in model.state_dict().items()}
    save_file(state, str(directory / AR_WEIGHTS_FILE))
    record = {"format": FORMAT, "config": asdict(model.config), "vocab": vocab.words, "group": group}
    write_json(directory / AR_CONFIG_FILE, record)
    return directory


def load_unified_ar(directory: Path | str) -> tuple[TinyUnifiedAR, WordVocab, int]:
    """The model, vocabulary and group size :func:`save_unified_ar` wrote, in eval mode."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TokenizerError(f"model directory {directory} does not exist")
    record: dict[str, Any] = read_json_record(directory / AR_CONFIG_FILE, "unified AR model")
    try:
        config = UnifiedARConfig(**record["config"])
        words = [str(word) for word in record["vocab"]]
        group = int(record["group"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TokenizerError(f"{directory / AR_CONFIG_FILE} is not a unified AR record ({exc})") from None
    if words[:2] != [PAD, UNKNOWN] or len(words) != config.vocab_size:
        raise TokenizerError(f"{directory / AR_CONFIG_FILE}: the vocabulary does not fit the config")
    vocab = WordVocab(words[2:])
    model = TinyUnifiedAR(config)
    load_state(model, directory / AR_WEIGHTS_FILE)
    return model.eval(), vocab, group
