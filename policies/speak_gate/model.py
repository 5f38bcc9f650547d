"""The speak gate's model: Proact-VL's response head, its active loss and the flag features.

Every 1-second chunk becomes one user turn that ends in a ``<|FLAG|>`` token; a frozen VLM
reads it, and a small gated MLP (:class:`ResponseHead`) maps the hidden state of layer
``-2`` at the flag to a logit. ``sigmoid(logit) > threshold`` (0.3, as the reference's eval
scripts) means "speak now". Only the head is trained, with the reference's active loss
(:func:`gate_loss`); because the VLM is frozen, features are computed once per chunk
(:meth:`FlagFeatures.stream_features`) and training is a few seconds of Adam on them.

What the head sees (``FlagFeatures.pooling``):

- ``"flag"``: the reference's input, the layer's hidden state at the flag token.
- ``"flag+frames"``: that state, the mean of the layer's states over each frame's image
  tokens (last frame), and the difference last-minus-first frame of those means (in a causal
  LM the later frame's states also attend to the earlier one, so this is a change in what
  the model read, not a pixel difference). A trained
  VLM routes what it saw into the flag state by attention; a random-weight test model does
  so only weakly, so the pooled image states and their change within the second give the
  head the picture directly. It is an addition of ours, recorded in the gate's metadata.

Inputs are standardised by a fixed per-feature shift/scale stored in the head (set from the
training features), because a frozen model's hidden states have arbitrary per-channel
scales and the reference head has no bias to absorb them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from embodia.envs.streams.core import Chunk, Stream
from embodia.policies.speak_gate.config import (
    BOUNDARY_RATE,
    BOUNDARY_SMOOTH,
    FLAG,
    HISTORY_END,
    HISTORY_START,
    POOLINGS,
    QUERY_END,
    QUERY_START,
    SPECIAL_TOKENS,
    Context,
    ContextFn,
    GateError,
    Pooling,
)

# --- the head --------------------------------------------------------------------------------


class ResponseHead(nn.Module):
    """The reference's gated MLP: ``down(gelu(gate(x)) * up(x))``, hidden -> hidden/4 -> 1.

    ``feature_mean``/``feature_std`` are fixed buffers (identity until :func:`train_gate`
    sets them) that standardise the input before the MLP.
    """

    feature_mean: torch.Tensor
    feature_std: torch.Tensor

    def __init__(self, hidden_size: int, bias: bool = False) -> None:
        super().__init__()
        if hidden_size < 4:
            raise GateError(f"the head needs a hidden size of at least 4, got {hidden_size}")
        self.hidden_size = hidden_size
        self.intermediate_size = hidden_size // 4
        self.bias = bias
        self.gate_proj = nn.Linear(hidden_size, self.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, self.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(self.intermediate_size, 1, bias=bias)
        self.register_buffer("feature_mean", torch.zeros(hidden_size))
        self.register_buffer("feature_std", torch.ones(hidden_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``hidden.shape[:-1]``."""
        if hidden.shape[-1] != self.hidden_size:
            raise GateError(f"the head takes {self.hidden_size} features, got {hidden.shape[-1]}")
        x = (hidden - self.feature_mean) / self.feature_std
        return self.down_proj(F.gelu(self.gate_proj(x)) * self.up_proj(x)).squeeze(-1)

    def score(self, hidden: torch.Tensor) -> torch.Tensor:
        """Speaking probability, ``sigmoid(logit)``."""
        return torch.sigmoid(self.forward(hidden))


# --- the loss --------------------------------------------------------------------------------


def boundary_weights(labels: torch.Tensor, boundary_rate: float = BOUNDARY_RATE) -> torch.Tensor:
    """1 everywhere, ``boundary_rate`` at each step ``t >= 1`` whose label differs from ``t-1``."""
    weights = torch.ones_like(labels, dtype=torch.float32)
    if labels.numel() > 1:
        changed = labels[1:] != labels[:-1]
        weights[1:][changed] = boundary_rate
    return weights


def rise_labels(labels: torch.Tensor, ramp: Sequence[float] = BOUNDARY_SMOOTH) -> torch.Tensor:
    """Soft targets before each speech onset, as the reference codes them.

    An onset is a 1 after a 0, or a 1 at ``t=0``. The silent step ``k`` seconds before an
    onset is raised to ``ramp[k-1]`` (the maximum where ramps of two onsets meet), so with
    ``[0.05, 0.20]`` one second before gets 0.05 and two seconds before 0.20 (the reference's
    comment says the opposite order; its code does this). Speaking steps stay 1.
    """
    y = labels.float()
    onsets = torch.zeros_like(y, dtype=torch.bool)
    if y.numel():
        onsets[0] = y[0] == 1
        onsets[1:] = (y[1:] == 1) & (y[:-1] == 0)
    raised = torch.zeros_like(y)
    for shift, value in enumerate(ramp, start=1):
        if shift >= y.numel():
            break
        candidate = torch.zeros_like(y)
        candidate[:-shift] = onsets[shift:].float() * float(value)
        raised = torch.maximum(raised, candidate)
    return torch.where(y == 0, raised, torch.ones_like(y))


class GateLoss(NamedTuple):
    total: torch.Tensor
    point: torch.Tensor
    smooth: torch.Tensor
    rate: torch.Tensor


def gate_loss(
    logits: torch.Tensor,
    labels: torch.Tensor | Sequence[int],
    *,
    boundary_rate: float = BOUNDARY_RATE,
    boundary_smooth: Sequence[float] = BOUNDARY_SMOOTH,
    lambda_point: float = 1.0,
    lambda_smooth: float = 1.0,
    lambda_rate: float = 1.0,
) -> GateLoss:
    """The reference's active loss (``proact_trainer.compute_active_loss``) on one stream.

    ``logits`` and ``labels`` are per-second, shape ``(T,)``; labels are 0/1, and -100 marks
    a second to ignore (removed first, as the reference's strategy 3 does). With
    ``p = sigmoid(logits)``, hard labels ``y``, soft targets ``s = rise_labels(y)`` and
    weights ``w = boundary_weights(y)``::

        point  = sum_t w_t * BCE(logit_t, s_t) / sum_t w_t
        smooth = mean over t>=1 with y_t == y_{t-1} of (p_t - p_{t-1})**2   (0 if none)
        rate   = (mean_t p_t - mean_t y_t)**2
        total  = lambda_point * point + lambda_smooth * smooth + lambda_rate * rate

    The reference's defaults: boundary_rate 5, boundary_smooth [0.05, 0.20], all lambdas 1.
    """
    logits = logits.reshape(-1)
    y = torch.as_tensor(labels, device=logits.device).reshape(-1)
    if y.shape != logits.shape:
        raise GateError(f"{logits.numel()} logits but {y.numel()} labels")
    keep = y != -100
    if not bool(keep.any()):
        raise GateError("no labelled second to compute the gate loss on")
    logits, y = logits[keep], y[keep].to(logits.dtype)
    if not bool(((y == 0) | (y == 1)).all()):
        raise GateError("labels must be 0, 1 or -100")

    weights = boundary_weights(y, boundary_rate).to(logits.dtype)
    targets = rise_labels(y, boundary_smooth).to(logits.dtype)
    bce = F.binary_cross_entropy_with_logits(logits, targets, weight=weights, reduction="sum")
    point = bce / weights.sum()

    p = torch.sigmoid(logits)
    same = y[1:] == y[:-1]
    if bool(same.any()):
        smooth = ((p[1:] - p[:-1]) ** 2)[same].mean()
    else:
        smooth = torch.zeros((), dtype=logits.dtype, device=logits.device)
    rate = (p.mean() - y.mean()) ** 2
    total = lambda_point * point + lambda_smooth * smooth + lambda_rate * rate
    return GateLoss(total, point, smooth, rate)


# --- features --------------------------------------------------------------------------------


def _context_messages(context: Context) -> list[dict[str, str]]:
    if isinstance(context, str):
        return [{"role": "system", "content": context}] if context else []
    out = []
    for i, message in enumerate(context):
        role, content = message.get("role"), message.get("content")
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise GateError(f"context message {i} needs a role and a string content, got {dict(message)!r}")
        out.append({"role": role, "content": content})
    return out


def user_parts(chunk: Chunk) -> list[dict[str, str]]:
    """The chunk's user turn in content-part form, as the reference's ``_make_user_prompt``:
    ``<|history_start|>[SPEAKER]: text...<|history_end|>``, the frames, the query between its
    markers, then ``<|FLAG|>`` (the reference shows the frames as a 2-frame video; here they
    are images, which every VLM processor takes)."""
    parts: list[dict[str, str]] = []
    heard = "".join(f"[{line.speaker}]: {line.text}" for line in chunk.history)
    if heard:
        parts.append({"type": "text", "text": f"{HISTORY_START}{heard}{HISTORY_END}"})
    parts.extend({"type": "image"} for _ in chunk.frames)
    if chunk.query:
        parts.append({"type": "text", "text": f"{QUERY_START}{chunk.query}{QUERY_END}"})
    parts.append({"type": "text", "text": FLAG})
    return parts


class FlagFeatures:
    """A frozen local VLM that turns a chunk (plus optional text context) into the gate's
    input vector; see the module docstring for what ``pooling`` adds to the flag state.

    Loading goes through :class:`~embodia.policies.hf.HFPolicy` (local files only). The
    reference's special tokens are added when the tokenizer lacks them; if the embedding
    matrix then has too few rows it is resized and the new rows are drawn, from a generator
    seeded with ``seed``, around the mean of the existing rows with their spread.
    """

    def __init__(
        self,
        model_dir: Path | str,
        layer: int = -2,
        device: str = "cpu",
        *,
        pooling: Pooling = "flag",
        dtype: str = "float32",
        seed: int = 0,
    ) -> None:
        from embodia.core.chat import PolicyError
        from embodia.policies.hf import HFPolicy

        if pooling not in POOLINGS:
            raise GateError(f"unknown pooling {pooling!r}: {' | '.join(POOLINGS)}")
        try:
            policy = HFPolicy(model_dir, device=device, dtype=dtype)
        except PolicyError as error:
            raise GateError(f"cannot load the gate's VLM: {error}") from error
        if not policy.accepts_images:
            raise GateError(f"{model_dir} is a text-only model; the speak gate needs a VLM that takes frames")
        self.model_dir = Path(model_dir)
        self.random_weights = policy.random_weights
        """Why features of this VLM mean nothing (random weights), or None for a trained one."""
        self.device = policy.device
        self.processor: Any = policy.processor
        self.tokenizer: Any = policy.tokenizer
        self.model: Any = policy.model
        self.pooling: Pooling = pooling
        self.seed = seed
        self.model.eval()
        self.model.requires_grad_(False)
        self.added_tokens = self._add_special_tokens(seed)
        self.flag_id = int(self.tokenizer.convert_tokens_to_ids(FLAG))
        self.tokenizer.padding_side = "right"  # positions of real tokens stay as unbatched

        text_config = self.model.config.get_text_config()
        self.model_hidden_size = int(text_config.hidden_size)
        states = int(text_config.num_hidden_layers) + 1
        if not -states <= layer < states:
            raise GateError(f"layer {layer} is out of range for a model with {states} hidden states")
        self.layer = layer
        self.hidden_size = self.model_hidden_size * (3 if pooling == "flag+frames" else 1)
        """Size of the vectors this returns (the head's input size)."""
        self.context_length = policy.context_length
        image_token = getattr(self.processor, "image_token", None)
        image_id = getattr(self.processor, "image_token_id", None)
        if image_id is None and image_token is not None:
            image_id = self.tokenizer.convert_tokens_to_ids(image_token)
        self.image_id: int | None = None if image_id is None else int(image_id)
        if pooling == "flag+frames" and self.image_id is None:
            raise GateError(f"{model_dir}'s processor names no image token, so frames cannot be pooled")

    def _add_special_tokens(self, seed: int) -> list[str]:
        vocab = self.tokenizer.get_vocab()
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            self.tokenizer.add_tokens(missing, special_tokens=True)
        embeddings = self.model.get_input_embeddings()
        old_rows = int(embeddings.weight.shape[0])
        if len(self.tokenizer) > old_rows:
            self.model.resize_token_embeddings(len(self.tokenizer), mean_resizing=False)
            generator = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                layers = [self.model.get_input_embeddings()]
                output = self.model.get_output_embeddings()
                if output is not None and output.weight is not layers[0].weight:
                    layers.append(output)
                for module in layers:
                    weight = module.weight
                    old = weight[:old_rows].float()
                    new = old.mean(0) + old.std() * torch.randn(
                        weight.shape[0] - old_rows, weight.shape[1], generator=generator
                    )
                    weight[old_rows:] = new.to(weight.dtype).to(weight.device)
                    bias = getattr(module, "bias", None)
                    if bias is not None:
                        bias[old_rows:] = 0
        return missing

    def meta(self, **extra: Any) -> dict[str, Any]:
        """What :func:`save_gate` should record so that :meth:`LearnedGate.from_dir` rebuilds
        these features: model dir, layer, pooling, seed and feature size (plus ``extra``,
        e.g. ``threshold`` or ``context_turns``)."""
        return {
            "model_dir": str(self.model_dir.resolve()),
            "layer": self.layer,
            "pooling": self.pooling,
            "seed": self.seed,
            "hidden_size": self.hidden_size,
            **({} if self.random_weights is None else {"random_weights": self.random_weights}),
            **extra,
        }

    def conversation(self, chunk: Chunk, context: Context = ()) -> list[dict[str, Any]]:
        """The messages given to the chat template: the context, then the chunk's user turn."""
        out: list[dict[str, Any]] = [
            {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
            for m in _context_messages(context)
        ]
        out.append({"role": "user", "content": user_parts(chunk)})
        return out

    def prompt(self, chunk: Chunk, context: Context = ()) -> str:
        """The chat-templated text of one chunk (no generation prompt: the flag closes it)."""
        return str(
            self.processor.apply_chat_template(
                self.conversation(chunk, context), add_generation_prompt=False, tokenize=False
            )
        )

    def encode(self, chunks: Sequence[Chunk], contexts: Sequence[Context] | None = None) -> dict[str, Any]:
        """Model inputs for a batch of chunks, right-padded."""
        if not chunks:
            raise GateError("no chunk to encode")
        contexts = [()] * len(chunks) if contexts is None else list(contexts)
        if len(contexts) != len(chunks):
            raise GateError(f"{len(chunks)} chunks but {len(contexts)} contexts")
        texts = [self.prompt(c, x) for c, x in zip(chunks, contexts, strict=True)]
        images = [Image.fromarray(np.ascontiguousarray(f)) for c in chunks for f in c.frames]
        encoded = self.processor(
            text=texts, images=images or None, return_tensors="pt", padding=True, add_special_tokens=False
        )
        length = int(encoded["input_ids"].shape[1])
        if self.context_length is not None and length > self.context_length:
            raise GateError(
                f"a gate prompt has {length} tokens, more than the model's context of {self.context_length}: "
                "give a shorter context"
            )
        return {key: value.to(self.device) for key, value in encoded.items()}

    @torch.no_grad()
    def batch(self, chunks: Sequence[Chunk], contexts: Sequence[Context] | None = None) -> torch.Tensor:
        """Feature vectors ``(len(chunks), hidden_size)``, float32 on the CPU."""
        inputs = self.encode(chunks, contexts)
        output = self.model(**inputs, output_hidden_states=True, return_dict=True)
        states = output.hidden_states[self.layer]  # (B, L, H)
        ids, mask = inputs["input_ids"], inputs["attention_mask"].bool()
        rows = []
        for b in range(ids.shape[0]):
            flags = (ids[b].eq(self.flag_id) & mask[b]).nonzero().flatten()
            if flags.numel() == 0:
                raise GateError("the templated prompt lost its <|FLAG|> token")
            parts = [states[b, int(flags[-1])]]
            if self.pooling == "flag+frames":
                parts.extend(self._frame_pools(states[b], ids[b], len(chunks[b].frames)))
            rows.append(torch.cat(parts))
        return torch.stack(rows).float().cpu()

    def _frame_pools(self, states: torch.Tensor, ids: torch.Tensor, frames: int) -> list[torch.Tensor]:
        """Mean image-token state of the last frame, and last minus first frame."""
        zero = states.new_zeros(self.model_hidden_size)
        if self.image_id is None or frames == 0:
            return [zero, zero]
        positions = ids.eq(self.image_id).nonzero().flatten()
        if positions.numel() == 0:
            return [zero, zero]
        per_frame = positions.numel() // frames
        if per_frame * frames != positions.numel():
            raise GateError(f"{positions.numel()} image tokens do not split over {frames} frames")
        pooled = states[positions].reshape(frames, per_frame, -1).mean(1)
        return [pooled[-1], pooled[-1] - pooled[0]]

    def __call__(self, chunk: Chunk, context: Context = ()) -> torch.Tensor:
        """One chunk's feature vector, ``(hidden_size,)``."""
        return self.batch([chunk], [context])[0]

    def cache_key(self) -> str:
        """What the features depend on besides the chunk: model, layer, pooling, tokens."""
        config = json.dumps(self.model.config.to_dict(), sort_keys=True, default=str)
        weights = hashlib.sha256()
        for name, tensor in sorted(self.model.state_dict().items())[:4]:
            weights.update(name.encode())
            weights.update(tensor.detach().float().cpu().numpy().tobytes()[:4096])
        parts = [config, weights.hexdigest(), str(self.layer), self.pooling, ",".join(SPECIAL_TOKENS)]
        parts.append(str(self.seed))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

    def stream_features(
        self,
        streams: Sequence[Stream],
        *,
        batch_size: int = 16,
        context_fn: ContextFn | None = None,
        cache_dir: Path | str | None = None,
    ) -> list[torch.Tensor]:
        """Features ``(len(stream), hidden_size)`` of every chunk of every stream, batched.

        ``context_fn(stream, second)`` gives a chunk's context (none by default). With
        ``cache_dir`` each stream's features are saved under a key of the model, the
        prompts and the frames, and read back instead of recomputed next time.
        """
        if batch_size < 1:
            raise GateError(f"batch_size must be at least 1, got {batch_size}")
        cache = None if cache_dir is None else Path(cache_dir)
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
        base = self.cache_key() if cache is not None else ""
        out = []
        for stream in streams:
            chunks = list(stream.chunks())
            contexts = [() if context_fn is None else context_fn(stream, c.second) for c in chunks]
            path = None
            if cache is not None:
                path = cache / f"{self._stream_key(base, chunks, contexts)}.pt"
                if path.is_file():
                    out.append(torch.load(path, weights_only=True))
                    continue
            rows = [
                self.batch(chunks[i : i + batch_size], contexts[i : i + batch_size])
                for i in range(0, len(chunks), batch_size)
            ]
            features = torch.cat(rows) if rows else torch.zeros(0, self.hidden_size)
            if path is not None:
                torch.save(features, path)
            out.append(features)
        return out

    def _stream_key(self, base: str, chunks: Sequence[Chunk], contexts: Sequence[Context]) -> str:
        digest = hashlib.sha256(base.encode())
        for chunk, context in zip(chunks, contexts, strict=True):
            digest.update(self.prompt(chunk, context).encode())
            for frame in chunk.frames:
                digest.update(str(frame.shape).encode())
                digest.update(np.ascontiguousarray(frame).tobytes())
        return digest.hexdigest()[:32]


def stream_labels(stream: Stream) -> torch.Tensor:
    """0/1 per second of the stream: 1 where the active speaker's label has a line."""
    label = stream.label
    return torch.tensor([1.0 if s in label else 0.0 for s in stream.seconds])


def speaking_seconds(stream: Stream, scores: Sequence[float], threshold: float) -> set[int]:
    """The seconds a gate speaks in: those whose score is above ``threshold``."""
    return {s for s, p in zip(stream.seconds, scores, strict=True) if p > threshold}
