"""The learned speak/silent gate of Proact-VL (streaming-agents.md §A.3).

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
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from embodia.core.random_weights import random_weights_label
from embodia.envs.streams.core import Chunk, Stream
from embodia.errors import EmbodiaError, read_text_file

FLAG = "<|FLAG|>"
HISTORY_START, HISTORY_END = "<|history_start|>", "<|history_end|>"
QUERY_START, QUERY_END = "<|query_start|>", "<|query_end|>"
SPECIAL_TOKENS = (QUERY_START, QUERY_END, HISTORY_START, HISTORY_END, FLAG)
"""The reference's added tokens (``modeling_proact.py``), in its order."""
DEFAULT_THRESHOLD = 0.3
"""The reference's eval scripts' ``state_threshold`` (its training default is 0.5)."""
BOUNDARY_RATE = 5.0
BOUNDARY_SMOOTH = (0.05, 0.20)
GATE_WEIGHTS = "gate.safetensors"
GATE_META = "gate.json"
TRAIN_METRICS = "metrics.jsonl"
"""Per-epoch training curves (loss and its parts), written as training goes."""
GATE_FORMAT = 1
Pooling = Literal["flag", "flag+frames"]
POOLINGS: tuple[Pooling, ...] = ("flag", "flag+frames")

Context = Sequence[Mapping[str, str]] | str
ContextFn = Callable[[Stream, int], Context]


class GateError(EmbodiaError, ValueError):
    """A speak gate cannot be built, loaded or fed (bad model dir, gate dir, features)."""


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
    pooling: Literal["flag", "flag+frames"] = "flag",
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
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    if not directory.is_dir():
        raise GateError(f"gate directory {directory} does not exist")
    meta_path, weights_path = directory / GATE_META, directory / GATE_WEIGHTS
    for path in (meta_path, weights_path):
        if not path.is_file():
            raise GateError(f"{directory} is not a speak gate: it has no {path.name}")
    try:
        meta = json.loads(read_text_file(meta_path, GateError))
    except json.JSONDecodeError as error:
        raise GateError(f"{meta_path} is not JSON: {error.msg}") from None
    if not isinstance(meta, dict) or meta.get("format") != GATE_FORMAT:
        raise GateError(f"{meta_path} is not a format-{GATE_FORMAT} gate record")
    hidden = meta.get("hidden_size")
    if not isinstance(hidden, int) or isinstance(hidden, bool):
        raise GateError(f"{meta_path} has no integer hidden_size")
    head = ResponseHead(hidden, bias=bool(meta.get("bias", False)))
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as error:
        raise GateError(f"cannot read {weights_path}: {error}") from error
    expected = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in state.items()}
    if expected != found:
        raise GateError(f"{weights_path} does not fit a head of hidden size {hidden}: {found} vs {expected}")
    head.load_state_dict(state)
    head.eval()
    return head, meta


# --- the decider -----------------------------------------------------------------------------


class LearnedGate:
    """Speak/silent decider for the proactive agent: ``score`` is the head's probability on
    the chunk's flag features, ``decide`` is ``score > threshold``.

    ``context`` is the agent's retained conversation. Its last message, when a user turn, is
    the agent's own text rendering of this same second, which the gate's user turn already
    carries, so it is dropped; of the rest the last ``context_turns`` messages are given to
    the VLM (0, the default, ignores context, which matches training without context).
    """

    def __init__(
        self,
        features: FlagFeatures,
        head: ResponseHead,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        context_turns: int = 0,
        name: str | None = None,
    ) -> None:
        if features.hidden_size != head.hidden_size:
            raise GateError(
                f"the head takes {head.hidden_size} features but {features.model_dir} gives "
                f"{features.hidden_size} (layer {features.layer}, pooling {features.pooling})"
            )
        if not 0.0 <= threshold <= 1.0:
            raise GateError(f"threshold must be a probability, got {threshold}")
        if context_turns < 0:
            raise GateError(f"context_turns must be at least 0, got {context_turns}")
        self.features = features
        self.head = head.eval()
        self.threshold = threshold
        self.context_turns = context_turns
        self.name = name or f"gate:{features.model_dir.name}"
        if features.random_weights is not None:
            self.name = random_weights_label(self.name)

    @classmethod
    def from_dir(
        cls,
        directory: Path | str,
        *,
        features: FlagFeatures | None = None,
        model_dir: Path | str | None = None,
        device: str = "cpu",
        threshold: float | None = None,
    ) -> LearnedGate:
        """A gate saved by :func:`save_gate`, on the VLM its metadata names (or ``model_dir``)."""
        head, meta = load_gate(directory)
        if features is None:
            source = model_dir if model_dir is not None else meta.get("model_dir")
            if not source:
                raise GateError(f"{directory} names no model_dir; pass the VLM directory")
            features = FlagFeatures(
                source,
                layer=int(meta.get("layer", -2)),
                device=device,
                pooling=meta.get("pooling", "flag"),
                seed=int(meta.get("seed", 0)),
            )
        if features.layer != meta.get("layer", features.layer) or features.pooling != meta.get(
            "pooling", features.pooling
        ):
            raise GateError(
                f"{directory} was trained on layer {meta.get('layer')} / {meta.get('pooling')} features, "
                f"not layer {features.layer} / {features.pooling}"
            )
        return cls(
            features,
            head,
            float(meta.get("threshold", DEFAULT_THRESHOLD)) if threshold is None else threshold,
            context_turns=int(meta.get("context_turns", 0)),
        )

    def gate_context(self, context: Sequence[Mapping[str, str]]) -> list[Mapping[str, str]]:
        kept = [m for m in context if m.get("role") in ("user", "assistant")]
        if kept and kept[-1].get("role") == "user":
            kept = kept[:-1]
        return kept[-self.context_turns :] if self.context_turns else []

    @torch.no_grad()
    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        vector = self.features(chunk, self.gate_context(context))
        return float(self.head.score(vector))

    def decide(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> bool:
        return self.score(chunk, context) > self.threshold

    @torch.no_grad()
    def scores(self, stream: Stream, batch_size: int = 16) -> list[float]:
        """Context-free scores of every second of a stream, batched (for evaluation)."""
        (features,) = self.features.stream_features([stream], batch_size=batch_size)
        return [float(p) for p in self.head.score(features)]


def speaking_seconds(stream: Stream, scores: Sequence[float], threshold: float) -> set[int]:
    """The seconds a gate speaks in: those whose score is above ``threshold``."""
    return {s for s, p in zip(stream.seconds, scores, strict=True) if p > threshold}


__all__ = [
    "FLAG",
    "SPECIAL_TOKENS",
    "FlagFeatures",
    "GateError",
    "GateLoss",
    "LearnedGate",
    "ResponseHead",
    "TrainLog",
    "boundary_weights",
    "gate_loss",
    "load_gate",
    "rise_labels",
    "save_gate",
    "speaking_seconds",
    "stream_labels",
    "train_gate",
    "user_parts",
]
