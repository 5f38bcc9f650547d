"""Early-exit networks: a backbone cut into blocks with a classifier head after each, so a
prediction can leave at the first head confident enough, and what it costs to reach each head.

**Models** (:class:`EarlyExitCNN`, :class:`EarlyExitViT`): ``forward(images)`` returns the
logits of every head, shallowest first. A head reads its block's output: the CNN's heads pool
the feature map and apply a linear layer; the ViT's heads normalise the mean token and apply a
linear layer. Both train on CPU in seconds at the sizes used here (8-pixel digits, 32-pixel
puzzle renders).

**Cost** (:func:`exit_costs`): the multiply-accumulates (MACs) spent to read head ``k``: every
block up to ``k`` and every head up to ``k`` (an exiting network evaluates the heads in turn and
stops at the first that is confident). Counted by hooks on the convolution and linear layers
plus the attention products that no layer owns (``tokens^2 * width`` per product), from one
forward pass of one image.

**Exiting** (:func:`exit_decisions`): a sample leaves at the first head whose confidence (max
softmax probability of its, possibly temperature-scaled, logits) reaches a threshold, else at
the last head.

**Training**: :func:`train_jointly` trains backbone and heads together on the sum of the heads'
cross-entropies (the usual way an early-exit network is trained, as in SDN/ZTW);
:func:`fit_temperatures` is the calibration baseline (one temperature per head, fitted on held-out
logits by minimising the negative log-likelihood); :func:`finetune_heads` retrains the heads on a
frozen backbone, with cross-entropy alone (the control) or with the early-exit failure
prediction objective (``docs/early_exit.md``): each intermediate head's confidence is also
trained, by binary cross-entropy, to say whether exiting there is *safe*, that is whether its
prediction is correct or no later head would be (:func:`safe_to_exit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from embodia.errors import EmbodiaError


class EarlyExitError(EmbodiaError, ValueError):
    """An early-exit model or its inputs cannot be used; the message names the problem."""


class _ExitNetwork(nn.Module):
    """Blocks and the head after each: ``forward`` returns every head's logits."""

    blocks: nn.ModuleList
    heads: nn.ModuleList
    image_shape: tuple[int, int, int]

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return images

    def forward(self, images: torch.Tensor) -> list[torch.Tensor]:
        if tuple(images.shape[1:]) != self.image_shape:
            raise EarlyExitError(
                f"the model takes images of shape {self.image_shape} (channels, height, width), "
                f"got {tuple(images.shape[1:])}"
            )
        hidden = self.embed(images)
        logits = []
        for block, head in zip(self.blocks, self.heads, strict=True):
            hidden = block(hidden)
            logits.append(head(hidden))
        return logits

    @property
    def num_exits(self) -> int:
        return len(self.heads)


class _ConvBlock(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, pool: bool) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        ]
        if pool:
            layers.append(nn.MaxPool2d(2))
        super().__init__(*layers)


class _PooledHead(nn.Module):
    def __init__(self, channels: int, num_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(channels, num_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear(features.mean(dim=(2, 3)))


class EarlyExitCNN(_ExitNetwork):
    """A small CNN: one 3x3 convolution, batch norm and ReLU per block (a 2x2 max-pool after
    the blocks named in ``pool_after``), and a pooled linear head after every block."""

    def __init__(
        self,
        num_classes: int,
        image_shape: tuple[int, int, int],
        widths: Sequence[int] = (16, 32, 32, 64),
        pool_after: Sequence[int] = (0, 2),
    ) -> None:
        super().__init__()
        _check_shape(num_classes, image_shape, len(widths))
        self.image_shape = tuple(image_shape)  # type: ignore[assignment]
        channels = [image_shape[0], *widths]
        self.blocks = nn.ModuleList(
            _ConvBlock(channels[i], channels[i + 1], i in pool_after) for i in range(len(widths))
        )
        self.heads = nn.ModuleList(_PooledHead(width, num_classes) for width in widths)


class _Attention(nn.Module):
    def __init__(self, width: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, length, width = tokens.shape
        q, k, v = self.qkv(tokens).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        mixed = functional.scaled_dot_product_attention(q, k, v)
        return self.out(mixed.transpose(1, 2).reshape(batch, length, width))

    def unowned_macs(self, tokens: torch.Tensor) -> int:
        """The two attention products (scores and their mix), which no linear layer counts."""
        batch, length, width = tokens.shape
        return 2 * batch * length * length * width


class _TransformerBlock(nn.Module):
    def __init__(self, width: int, num_heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = _Attention(width, num_heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, mlp_ratio * width), nn.GELU(), nn.Linear(mlp_ratio * width, width)
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens + self.attention(self.norm1(tokens))
        return tokens + self.mlp(self.norm2(tokens))


class _TokenHead(nn.Module):
    def __init__(self, width: int, num_classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(tokens.mean(dim=1)))


class EarlyExitViT(_ExitNetwork):
    """A small ViT: non-overlapping ``patch`` x ``patch`` patches embedded linearly with learned
    positions, pre-norm transformer blocks, and a head (layer norm of the mean token, linear)
    after every block."""

    def __init__(
        self,
        num_classes: int,
        image_shape: tuple[int, int, int],
        patch: int = 4,
        width: int = 64,
        depth: int = 4,
        num_heads: int = 4,
        mlp_ratio: int = 2,
    ) -> None:
        super().__init__()
        _check_shape(num_classes, image_shape, depth)
        channels, height, width_px = image_shape
        if patch < 1 or height % patch or width_px % patch:
            raise EarlyExitError(
                f"the image side ({height}x{width_px}) must be a multiple of the patch ({patch})"
            )
        if width % num_heads:
            raise EarlyExitError(
                f"the width ({width}) must be a multiple of the number of heads ({num_heads})"
            )
        self.image_shape = tuple(image_shape)  # type: ignore[assignment]
        self.patch = patch
        self.patch_embedding = nn.Linear(channels * patch * patch, width)
        self.positions = nn.Parameter(torch.randn(1, (height // patch) * (width_px // patch), width) * 0.02)
        self.blocks = nn.ModuleList(_TransformerBlock(width, num_heads, mlp_ratio) for _ in range(depth))
        self.heads = nn.ModuleList(_TokenHead(width, num_classes) for _ in range(depth))

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        patches = functional.unfold(images, self.patch, stride=self.patch).transpose(1, 2)
        return self.patch_embedding(patches) + self.positions


def _check_shape(num_classes: int, image_shape: Sequence[int], blocks: int) -> None:
    if num_classes < 2:
        raise EarlyExitError(f"an early-exit classifier needs at least two classes, got {num_classes}")
    if len(image_shape) != 3 or min(image_shape) < 1:
        raise EarlyExitError(f"image_shape is (channels, height, width), got {tuple(image_shape)}")
    if blocks < 2:
        raise EarlyExitError(f"an early-exit network needs at least two blocks (exits), got {blocks}")


# --------------------------------------------------------------------------- cost


def _macs_of(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> int:
    if isinstance(module, nn.Conv2d):
        kernel = module.kernel_size[0] * module.kernel_size[1] * (module.in_channels // module.groups)
        return int(output.numel() * kernel)
    if isinstance(module, nn.Linear):
        return int(output.numel() * module.in_features)
    if isinstance(module, _Attention):
        return module.unowned_macs(inputs[0])
    return 0


def exit_costs(model: _ExitNetwork) -> list[int]:
    """MACs per image to read each head (module docstring): cumulative over the blocks and
    heads up to it, the embedding included in the first."""
    spent: list[int] = [0]
    hooks = [
        module.register_forward_hook(lambda m, i, o: spent.__setitem__(0, spent[0] + _macs_of(m, i, o)))
        for module in model.modules()
        if isinstance(module, nn.Conv2d | nn.Linear | _Attention)
    ]
    per_exit: list[int] = []
    try:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            hidden = model.embed(torch.zeros(1, *model.image_shape))
            for block, head in zip(model.blocks, model.heads, strict=True):
                hidden = block(hidden)
                head(hidden)
                per_exit.append(spent[0])
        model.train(was_training)
    finally:
        for hook in hooks:
            hook.remove()
    return per_exit


# --------------------------------------------------------------------------- exiting


def confidences(logits: np.ndarray, temperatures: Sequence[float] | None = None) -> np.ndarray:
    """Max softmax probability per head and sample (``heads x samples``) of ``logits``
    (``heads x samples x classes``), each head's logits divided by its temperature first."""
    logits = np.asarray(logits, dtype=np.float64)
    if temperatures is not None:
        if len(temperatures) != logits.shape[0]:
            raise EarlyExitError(f"{len(temperatures)} temperatures for {logits.shape[0]} heads")
        logits = logits / np.asarray(temperatures, dtype=np.float64)[:, None, None]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    return np.asarray(probabilities.max(axis=-1))


def exit_decisions(confidence: np.ndarray, threshold: float) -> np.ndarray:
    """For each sample, the head it leaves at: the first whose confidence reaches ``threshold``,
    else the last."""
    confident = np.asarray(confidence) >= threshold
    confident[-1] = True
    return np.asarray(confident.argmax(axis=0))


def safe_to_exit(correct: np.ndarray) -> np.ndarray:
    """Per head and sample (``heads x samples`` of booleans): exiting there loses nothing,
    because the head is right or no later head is (further computation would be wasted)."""
    correct = np.asarray(correct, dtype=bool)
    later_right = np.zeros_like(correct)
    for k in range(correct.shape[0] - 2, -1, -1):
        later_right[k] = later_right[k + 1] | correct[k + 1]
    return np.asarray(correct | ~later_right)


# --------------------------------------------------------------------------- training


@dataclass(frozen=True)
class TrainingSettings:
    steps: int = 600
    batch_size: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    seed: int = 0


StepLog = Callable[[int, dict[str, float]], None]
"""Called with the step and the step's losses."""


def _batches(count: int, settings: TrainingSettings) -> list[np.ndarray]:
    rng = np.random.default_rng(settings.seed)
    order: list[int] = []
    needed = settings.steps * settings.batch_size
    while len(order) < needed:
        order.extend(rng.permutation(count).tolist())
    indices = np.asarray(order[:needed])
    return [indices[i * settings.batch_size : (i + 1) * settings.batch_size] for i in range(settings.steps)]


def _optimise(
    parameters: Sequence[nn.Parameter],
    settings: TrainingSettings,
    count: int,
    loss_of: Callable[[np.ndarray], dict[str, torch.Tensor]],
    log: StepLog | None,
) -> None:
    optimizer = torch.optim.AdamW(parameters, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(1, settings.steps))
    for step, batch in enumerate(_batches(count, settings), start=1):
        losses = loss_of(batch)
        optimizer.zero_grad()
        losses["loss"].backward()
        optimizer.step()
        schedule.step()
        if log is not None:
            log(step, {name: float(value.detach()) for name, value in losses.items()})


def _check_data(model: _ExitNetwork, images: torch.Tensor, labels: torch.Tensor) -> None:
    if images.ndim != 4 or len(images) != len(labels) or len(images) == 0:
        raise EarlyExitError(
            "training needs N images (N x C x H x W) and N labels, "
            f"got {tuple(images.shape)} and {tuple(labels.shape)}"
        )


def train_jointly(
    model: _ExitNetwork,
    images: torch.Tensor,
    labels: torch.Tensor,
    settings: TrainingSettings,
    log: StepLog | None = None,
) -> None:
    """Train backbone and heads together on the sum of the heads' cross-entropies."""
    _check_data(model, images, labels)
    torch.manual_seed(settings.seed)
    model.train()

    def loss_of(batch: np.ndarray) -> dict[str, torch.Tensor]:
        per_head = [functional.cross_entropy(logits, labels[batch]) for logits in model(images[batch])]
        return {
            "loss": torch.stack(per_head).sum(),
            **{f"ce_{k}": v.detach() for k, v in enumerate(per_head)},
        }

    _optimise(list(model.parameters()), settings, len(images), loss_of, log)
    model.eval()


def head_logits(model: _ExitNetwork, images: torch.Tensor, batch_size: int = 512) -> np.ndarray:
    """Every head's logits for ``images`` (``heads x samples x classes``), in eval mode."""
    model.eval()
    parts = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            parts.append(torch.stack(model(images[start : start + batch_size])))
    return np.asarray(torch.cat(parts, dim=1).numpy(), dtype=np.float64)


def fit_temperatures(logits: np.ndarray, labels: np.ndarray) -> list[float]:
    """Temperature scaling per head: the temperature minimising the negative log-likelihood of
    ``labels`` under each head's ``logits / T`` (held-out data), found by L-BFGS over log T."""
    values = torch.as_tensor(np.asarray(logits), dtype=torch.float64)
    targets = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    temperatures = []
    for head in values:
        log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.LBFGS([log_t], lr=0.5, max_iter=100, line_search_fn="strong_wolfe")

        def closure(
            head: torch.Tensor = head, log_t: torch.Tensor = log_t, optimizer: torch.optim.LBFGS = optimizer
        ) -> torch.Tensor:
            optimizer.zero_grad()
            loss = functional.cross_entropy(head / log_t.exp(), targets)
            loss.backward()
            return loss

        optimizer.step(closure)
        temperatures.append(float(log_t.detach().clamp(-5, 5).exp()))
    return temperatures


def finetune_heads(
    model: _ExitNetwork,
    images: torch.Tensor,
    labels: torch.Tensor,
    settings: TrainingSettings,
    *,
    failure_weight: float,
    log: StepLog | None = None,
) -> None:
    """Retrain the heads on a frozen backbone: each head's cross-entropy, plus, with
    ``failure_weight > 0``, the early-exit failure prediction term: for every head but the last,
    the binary cross-entropy between its confidence and whether exiting there is safe
    (:func:`safe_to_exit`, from the current heads' predictions on the batch)."""
    _check_data(model, images, labels)
    if failure_weight < 0:
        raise EarlyExitError(f"failure_weight is at least 0, got {failure_weight}")
    torch.manual_seed(settings.seed)
    with torch.no_grad():  # the backbone is frozen: its features are computed once
        model.eval()
        features = []
        hidden = model.embed(images)
        for block in model.blocks:
            hidden = block(hidden)
            features.append(hidden)
    for head in model.heads:
        head.train()

    def loss_of(batch: np.ndarray) -> dict[str, torch.Tensor]:
        logits = [head(f[batch]) for head, f in zip(model.heads, features, strict=True)]
        target = labels[batch]
        ce = torch.stack([functional.cross_entropy(z, target) for z in logits]).sum()
        losses = {"ce": ce.detach()}
        loss = ce
        if failure_weight > 0:
            correct = np.stack([(z.argmax(-1) == target).numpy() for z in logits])
            safe = torch.as_tensor(safe_to_exit(correct)[:-1], dtype=torch.float32)
            confidence = torch.stack([functional.softmax(z, -1).amax(-1) for z in logits[:-1]])
            failure = functional.binary_cross_entropy(confidence.clamp(1e-6, 1 - 1e-6), safe)
            losses["failure"] = failure.detach()
            loss = ce + failure_weight * failure
        losses["loss"] = loss
        return losses

    _optimise([p for head in model.heads for p in head.parameters()], settings, len(images), loss_of, log)
    model.eval()


# --------------------------------------------------------------------------- a language model


@dataclass(frozen=True)
class EarlyExitGeneration:
    """Tokens a causal LM wrote with early exit, and the decoder layers each one used."""

    token_ids: list[int]
    layers_used: list[int]
    """Per generated token, the layers it ran (the first token, from the prompt's full pass,
    always all of them)."""
    layers: int
    """The model's decoder layers."""

    @property
    def layer_share(self) -> float:
        """The share of the decoder's layer computations the generated tokens spent."""
        return sum(self.layers_used) / (self.layers * len(self.layers_used)) if self.layers_used else 1.0


def _decoder_parts(model: Any) -> tuple[Any, nn.ModuleList, Callable[..., Any]]:
    """The decoder, its layers and its architecture's rotary function, for the Llama-style
    causal LMs (Llama, Qwen2/3, Mistral, ...) whose layers this loop can drive."""
    import inspect
    import sys

    decoder = getattr(model, "model", None)
    layers = getattr(decoder, "layers", None)
    needed = ("embed_tokens", "norm", "rotary_emb")
    if (
        not isinstance(layers, nn.ModuleList)
        or not all(hasattr(decoder, name) for name in needed)
        or not hasattr(model, "lm_head")
        or not all(
            hasattr(layer, "input_layernorm")
            and all(hasattr(layer.self_attn, p) for p in ("k_proj", "v_proj"))
            for layer in layers
        )
    ):
        raise EarlyExitError(
            f"early exit drives the decoder layers of Llama-style causal LMs (model.model.layers with "
            f"self_attn.k_proj/v_proj, norm, rotary_emb and lm_head); {type(model).__name__} is not one"
        )
    rotary = getattr(sys.modules[type(layers[0].self_attn).__module__], "apply_rotary_pos_emb", None)
    if rotary is None or "cache" not in inspect.signature(layers[0].forward).parameters:
        raise EarlyExitError(
            f"{type(model).__name__}'s layers do not take the cache and rotary embedding as this "
            "transformers version's Llama-style layers do"
        )
    assert decoder is not None
    return decoder, layers, rotary


def early_exit_generate(
    model: Any,
    input_ids: torch.Tensor,
    *,
    threshold: float,
    min_layer: int = 1,
    max_new_tokens: int = 32,
    stop_ids: Sequence[int] = (),
) -> EarlyExitGeneration:
    """Greedy decoding that leaves the decoder early: after each layer from ``min_layer`` on,
    the layer's hidden state is read through the final norm and the LM head (the logit lens),
    and a token whose top probability reaches ``threshold`` is emitted from there. The layers
    it skipped still need its keys and values for later tokens: they are computed from the
    exit layer's hidden state by each skipped layer's own norm and key/value projections (the
    state propagation of CALM), which costs a fraction of running the layers. A ``threshold``
    above 1 never exits early: the tokens are then those of plain greedy decoding.

    ``input_ids``: one prompt (``1 x length``). Stops at a token in ``stop_ids`` (kept)."""
    decoder, layers, rotary = _decoder_parts(model)
    if input_ids.ndim != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] == 0:
        raise EarlyExitError(
            f"early exit decodes one prompt (1 x length ids), got shape {tuple(input_ids.shape)}"
        )
    if not 1 <= min_layer <= len(layers):
        raise EarlyExitError(f"min_layer must be in 1..{len(layers)}, got {min_layer}")
    lm_head, norm = model.lm_head, decoder.norm
    stops = set(stop_ids)
    device = input_ids.device
    model.eval()
    with torch.no_grad():
        prompt = model(input_ids=input_ids, use_cache=True)
        cache = prompt.cache
        token = int(prompt.logits[0, -1].argmax())
        tokens, used = [token], [len(layers)]
        position = input_ids.shape[1]
        while len(tokens) < max_new_tokens and token not in stops:
            positions = torch.tensor([[position]], device=device)
            hidden = decoder.embed_tokens(torch.tensor([[token]], device=device))
            cos_sin = decoder.rotary_emb(hidden, positions)
            logits = None
            for depth, layer in enumerate(layers, start=1):
                out = layer(
                    hidden, position_ids=positions, cache=cache, use_cache=True, position_embeddings=cos_sin
                )
                hidden = out[0] if isinstance(out, tuple) else out
                if depth == len(layers):
                    break
                if depth >= min_layer:
                    lens = lm_head(norm(hidden))[0, -1]
                    if float(functional.softmax(lens.float(), -1).max()) >= threshold:
                        logits = lens
                        for skipped in range(depth, len(layers)):
                            _propagate(layers[skipped], skipped, hidden, cos_sin, cache, rotary)
                        break
            if logits is None:
                logits = lm_head(norm(hidden))[0, -1]
            token = int(logits.argmax())
            tokens.append(token)
            used.append(depth)
            position += 1
    return EarlyExitGeneration(tokens, used, len(layers))


def _propagate(
    layer: Any,
    index: int,
    hidden: torch.Tensor,
    cos_sin: tuple[torch.Tensor, torch.Tensor],
    cache: Any,
    rotary: Callable[..., Any],
) -> None:
    """Layer ``index``'s keys and values of the current token, from the exit layer's state."""
    attention = layer.self_attn
    normed = layer.input_layernorm(hidden)
    shape = (*normed.shape[:-1], -1, attention.head_dim)
    keys = attention.k_proj(normed).view(shape)
    if hasattr(attention, "k_norm"):  # Qwen3-style per-head key norm
        keys = attention.k_norm(keys)
    keys = keys.transpose(1, 2)
    values = attention.v_proj(normed).view(shape).transpose(1, 2)
    cos, sin = cos_sin
    _, keys = rotary(keys, keys, cos, sin)
    cache.update(keys, values, index)
