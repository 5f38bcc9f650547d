"""MAA: manifold-adversarial adapters that make a frozen vision encoder robust to corrupted
images, and the Euclidean-alignment baseline they are measured against.

After each transformer block ``l`` of a frozen vision tower (a transformers ``ViTModel``,
``CLIPVisionModel`` or ``SiglipVisionModel``; the blocks are found generically), a low-rank
residual adapter rewrites the block's output tokens ``h``:

    A_l(h) = h + U_l gelu(D_l LN_l(h)),   D_l: hidden -> rank,  U_l: rank -> hidden,  U_l = 0 at init

so the adapted encoder starts as the frozen one. The adapters alone are trained, on pairs of a
clean image ``x`` and a corrupted copy ``x~``; ``f_l`` is the output of block ``l`` with the
adapters of the blocks before it in place, ``f°_l`` that of the frozen encoder:

- paired feature self-distillation: ``L_distill = sum_l mean_tokens ||A_l(f_l(x~)) - sg(f°_l(x))||^2 / d``
  (``d`` the hidden size, ``sg`` no gradient: the clean features are the fixed target);
- the token-level adversarial manifold constraint: a discriminator ``D`` (a small MLP on each
  token) learns to tell clean tokens ``f°_l(x)`` (label 1) from adapted corrupted ones
  ``A_l(f_l(x~))`` (label 0), and the adapters are pushed onto the clean tokens' support by
  ``L_adv = mean_tokens -log sigmoid(D(A_l(f_l(x~))))`` (non-saturating; ``"lsgan"``:
  ``(D - 1)^2 / 2``, with ``D`` trained on ``((D_clean - 1)^2 + D_adapted^2) / 2``);
- the adapters minimise ``L = L_distill + lambda * L_adv``; ``lambda = 0`` is the Euclidean
  (FARE-style) alignment the MAA paper argues against: features that come closer to the clean
  ones in L2 but can leave their manifold.

The discriminator is dropped at inference: :func:`save_adapters` writes the adapters only
(``adapters.safetensors`` and ``adapters.json``), and :func:`load_adapters` attaches them to an
encoder (forward hooks on its blocks), which then runs adapted wherever it is called. The paper
(ICML 2026) published no code; this formulation is our reconstruction (``docs/robustness.md``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from embodia.core.weights import load_weights
from embodia.errors import EmbodiaError, read_format_record, read_text_file

ADAPTERS_FORMAT = 1
ADAPTER_WEIGHTS = "adapters.safetensors"
ADAPTER_CONFIG = "adapters.json"
Objective = Literal["nonsaturating", "lsgan"]
OBJECTIVES: tuple[str, ...] = ("nonsaturating", "lsgan")
ENCODER_CLASSES: dict[str, str] = {
    "vit": "ViTModel",
    "clip_vision_model": "CLIPVisionModel",
    "clip": "CLIPVisionModel",
    "siglip_vision_model": "SiglipVisionModel",
    "siglip": "SiglipVisionModel",
}
"""The transformers ``model_type`` of a directory :func:`load_vision_encoder` loads, and the
vision class it loads it as (a full CLIP or SigLIP directory gives its vision tower)."""
PIXEL_MEAN = 0.5
PIXEL_STD = 0.5
"""The default normalisation of :func:`pixel_values` (the ViT and SigLIP processors' own)."""


class AdapterError(EmbodiaError, ValueError):
    """Adapters, images or settings that cannot be used together; the message names the problem."""


class UnsupportedEncoderError(AdapterError):
    """A model whose transformer blocks cannot be located, or a directory of another kind."""


# --------------------------------------------------------------------------- the encoder


def load_vision_encoder(directory: Path | str) -> nn.Module:
    """The vision encoder saved in ``directory`` (``save_pretrained``): a ViT, CLIP vision or
    SigLIP vision tower (:data:`ENCODER_CLASSES`), in eval mode with every weight frozen."""
    import transformers

    folder = Path(directory)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise AdapterError(f"{folder} is not a transformers model directory: it has no config.json")
    try:
        model_type = json.loads(read_text_file(config_file, AdapterError)).get("model_type")
    except (json.JSONDecodeError, AttributeError):
        raise AdapterError(f"{config_file} is not a JSON object") from None
    if model_type not in ENCODER_CLASSES:
        raise UnsupportedEncoderError(
            f"{folder} holds a {model_type!r} model; MAA adapts vision encoders of type "
            f"{', '.join(ENCODER_CLASSES)}"
        )
    encoder: nn.Module = getattr(transformers, ENCODER_CLASSES[model_type]).from_pretrained(folder)
    freeze(encoder)
    return encoder


def freeze(encoder: nn.Module) -> None:
    """Put ``encoder`` in eval mode with no weight trainable (the encoder MAA adapts stays as
    it was trained)."""
    encoder.eval()
    encoder.requires_grad_(False)


def encoder_blocks(encoder: nn.Module) -> nn.ModuleList:
    """The transformer blocks of ``encoder``, in order: the one ``ModuleList`` of
    ``config.num_hidden_layers`` modules of one class (``ViTLayer``, ``CLIPEncoderLayer``,
    ``SiglipEncoderLayer``, ...); :class:`UnsupportedEncoderError` when there is not exactly one."""
    config = getattr(encoder, "config", None)
    depth = getattr(config, "num_hidden_layers", None)
    hidden = getattr(config, "hidden_size", None)
    if not isinstance(depth, int) or not isinstance(hidden, int):
        raise UnsupportedEncoderError(
            f"{type(encoder).__name__} has no config with num_hidden_layers and hidden_size: "
            "MAA adapts transformers vision encoders (ViT, CLIP vision, SigLIP vision)"
        )
    found = [
        (name, module)
        for name, module in encoder.named_modules()
        if isinstance(module, nn.ModuleList)
        and len(module) == depth
        and len({type(block) for block in module}) == 1
    ]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)} ({', '.join(name for name, _ in found)})"
        raise UnsupportedEncoderError(
            f"{type(encoder).__name__}: found {what} lists of {depth} transformer blocks where MAA "
            "needs exactly one; supported: ViT, CLIP vision and SigLIP vision towers"
        )
    return found[0][1]


def encoder_hidden_size(encoder: nn.Module) -> int:
    """The width of ``encoder``'s tokens (its ``config.hidden_size``)."""
    hidden = getattr(getattr(encoder, "config", None), "hidden_size", None)
    if not isinstance(hidden, int):
        raise UnsupportedEncoderError(f"{type(encoder).__name__} has no config.hidden_size")
    return hidden


def encoder_image_size(encoder: nn.Module) -> int:
    """The side in pixels of the square images ``encoder`` takes (its ``config.image_size``)."""
    size = getattr(getattr(encoder, "config", None), "image_size", None)
    if isinstance(size, list | tuple) and len(size) == 2 and size[0] == size[1]:
        size = size[0]
    if not isinstance(size, int):
        raise UnsupportedEncoderError(f"{type(encoder).__name__} has no square config.image_size")
    return size


def pixel_values(
    images: np.ndarray | Sequence[np.ndarray],
    image_size: int,
    *,
    mean: float = PIXEL_MEAN,
    std: float = PIXEL_STD,
) -> torch.Tensor:
    """RGB ``uint8`` images (``N x S x S x 3``, or a list of ``S x S x 3``) as the encoder's
    float input ``N x 3 x S x S``, scaled to [0, 1] and normalised by ``(x - mean) / std``.
    The images must already be ``image_size`` pixels a side: corruptions act on what the
    encoder sees, so resizing is the caller's step, before corrupting."""

    stacked = _image_batch(images)
    if stacked.shape[1:3] != (image_size, image_size):
        raise AdapterError(
            f"images are {stacked.shape[1]}x{stacked.shape[2]} pixels but the encoder takes "
            f"{image_size}x{image_size}: resize them first"
        )
    scaled = torch.from_numpy(stacked).permute(0, 3, 1, 2).float() / 255.0
    return (scaled - mean) / std


def _image_batch(images: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    if isinstance(images, np.ndarray):
        stacked = images
    else:
        if not images:
            raise AdapterError("no images given")
        shapes = {np.shape(image) for image in images}
        if len(shapes) > 1:
            raise AdapterError(f"images of different sizes in one batch: {sorted(shapes)}")
        stacked = np.stack(images)
    if stacked.dtype != np.uint8 or stacked.ndim != 4 or stacked.shape[3] != 3:
        raise AdapterError(
            f"images must be RGB uint8 (N x H x W x 3), got {stacked.dtype} of shape {stacked.shape}"
        )
    if stacked.shape[0] == 0:
        raise AdapterError("no images given")
    return stacked


def block_outputs(encoder: nn.Module, pixels: torch.Tensor) -> list[torch.Tensor]:
    """The output tokens (``N x T x hidden``) of every transformer block of ``encoder`` for
    ``pixels``, each after the block's adapter when adapters are attached."""
    expected = encoder_image_size(encoder)
    channels = getattr(encoder.config, "num_channels", 3)
    if pixels.ndim != 4 or tuple(pixels.shape[1:]) != (channels, expected, expected):
        raise AdapterError(
            f"pixel values of shape {tuple(pixels.shape)} do not fit the encoder's input "
            f"(N, {channels}, {expected}, {expected})"
        )
    outputs: list[torch.Tensor] = []

    def keep(_module: nn.Module, _inputs: Any, output: Any) -> None:
        outputs.append(output[0] if isinstance(output, tuple) else output)

    # Registered after any adapter hook, so each sees the block's adapted output.
    handles = [block.register_forward_hook(keep) for block in encoder_blocks(encoder)]
    try:
        encoder(pixel_values=pixels)
    finally:
        for handle in handles:
            handle.remove()
    return outputs


def pooled_features(encoder: nn.Module, pixels: torch.Tensor, layer: int = -1) -> torch.Tensor:
    """One vector per image: the mean of block ``layer``'s output tokens (adapted when
    adapters are attached); what the study's linear probe reads."""
    return block_outputs(encoder, pixels)[layer].mean(dim=1)


# --------------------------------------------------------------------------- the adapters


@dataclass(frozen=True)
class AdapterConfig:
    """The shape of a set of adapters, saved beside their weights."""

    hidden_size: int
    """The encoder's token width."""
    num_layers: int
    """The encoder's number of transformer blocks."""
    layers: tuple[int, ...]
    """The blocks (0-based) that get an adapter."""
    rank: int
    """The bottleneck's width."""
    model_type: str = ""
    """The encoder's transformers ``model_type`` (checked on load when both name one)."""

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AdapterError(f"AdapterConfig.{name} must be a whole number >= 1, got {value!r}")
        layers = tuple(self.layers)
        if not layers or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.num_layers for i in layers
        ):
            raise AdapterError(
                f"AdapterConfig.layers must be block indices in 0..{self.num_layers - 1}, got {list(layers)}"
            )
        if len(set(layers)) != len(layers) or list(layers) != sorted(layers):
            raise AdapterError(f"AdapterConfig.layers must be increasing and distinct, got {list(layers)}")
        object.__setattr__(self, "layers", layers)

    @classmethod
    def for_encoder(cls, encoder: nn.Module, rank: int, layers: Sequence[int] | None = None) -> AdapterConfig:
        """Adapters of ``rank`` after the blocks ``layers`` of ``encoder`` (every block when
        None; negative indices count from the last block)."""
        depth = len(encoder_blocks(encoder))
        chosen = range(depth) if layers is None else [i + depth if i < 0 else i for i in layers]
        return cls(
            hidden_size=encoder_hidden_size(encoder),
            num_layers=depth,
            layers=tuple(sorted(chosen)),
            rank=rank,
            model_type=str(getattr(encoder.config, "model_type", "")),
        )


class BottleneckAdapter(nn.Module):
    """``h + up(gelu(down(norm(h))))`` on each token; ``up`` is zero at init, so the adapter
    starts as the identity."""

    def __init__(self, hidden_size: int, rank: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        self.down = nn.Linear(hidden_size, rank)
        self.up = nn.Linear(rank, hidden_size)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        residual: torch.Tensor = self.up(functional.gelu(self.down(self.norm(tokens))))
        return tokens + residual


class Adapters(nn.Module):
    """The adapters of one encoder (``blocks``: one :class:`BottleneckAdapter` per adapted
    block, keyed by its index) and the forward hooks that apply them once :meth:`attach` ed."""

    def __init__(self, config: AdapterConfig) -> None:
        super().__init__()
        self.config = config
        self.blocks = nn.ModuleDict(
            {str(i): BottleneckAdapter(config.hidden_size, config.rank) for i in config.layers}
        )
        self.enabled = True
        """Whether attached adapters act (see :meth:`disabled`)."""
        self._handles: list[Any] = []
        # Set outside nn.Module's registry: the encoder is not a part of the adapters.
        object.__setattr__(self, "_encoder", None)

    @property
    def encoder(self) -> nn.Module | None:
        """The encoder the adapters are attached to (None when detached)."""
        encoder: nn.Module | None = self.__dict__["_encoder"]
        return encoder

    def attach(self, encoder: nn.Module) -> Adapters:
        """Hook the adapters onto ``encoder``'s blocks: its every forward pass is adapted from
        now on (until :meth:`detach`). The encoder must have the shape they were made for."""
        if self.encoder is not None:
            raise AdapterError("these adapters are attached already: detach them first")
        blocks = encoder_blocks(encoder)
        hidden = encoder_hidden_size(encoder)
        if (hidden, len(blocks)) != (self.config.hidden_size, self.config.num_layers):
            raise AdapterError(
                f"the adapters fit an encoder of hidden size {self.config.hidden_size} with "
                f"{self.config.num_layers} blocks; this one has {hidden} and {len(blocks)}"
            )
        model_type = str(getattr(encoder.config, "model_type", ""))
        if self.config.model_type and model_type and model_type != self.config.model_type:
            raise AdapterError(
                f"the adapters were trained on a {self.config.model_type!r} encoder, not {model_type!r}"
            )
        parameter = next(encoder.parameters(), None)
        if parameter is not None:
            self.to(device=parameter.device)
        for index in self.config.layers:
            self._handles.append(blocks[index].register_forward_hook(self._hook(self.blocks[str(index)])))
        object.__setattr__(self, "_encoder", encoder)
        return self

    def _hook(self, adapter: nn.Module) -> Any:
        def apply(_module: nn.Module, _inputs: Any, output: Any) -> Any:
            if not self.enabled:
                return None
            if isinstance(output, tuple):
                return (adapter(output[0]), *output[1:])
            return adapter(output)

        return apply

    def detach(self) -> None:
        """Remove the hooks: the encoder runs as it was."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        object.__setattr__(self, "_encoder", None)

    @contextmanager
    def disabled(self) -> Iterator[None]:
        """The attached encoder runs unadapted inside the block (the frozen encoder's features)."""
        before, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = before


def save_adapters(adapters: Adapters, directory: Path | str, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``adapters.safetensors`` (the adapters' weights) and ``adapters.json`` (their
    :class:`AdapterConfig` and ``meta``) into ``directory``; nothing of the encoder or the
    discriminator."""
    from safetensors.torch import save_file

    from embodia.core.runs import write_json

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in adapters.state_dict().items()}
    save_file(state, str(folder / ADAPTER_WEIGHTS))
    record = {"format": ADAPTERS_FORMAT, **asdict(adapters.config), "meta": dict(meta or {})}
    record["layers"] = list(adapters.config.layers)
    write_json(folder / ADAPTER_CONFIG, record, default=str)
    return folder


def read_adapters(directory: Path | str) -> Adapters:
    """The adapters :func:`save_adapters` wrote in ``directory``, not attached to any encoder;
    an :class:`AdapterError` naming what is missing or inconsistent."""
    folder = Path(directory)
    config_file, weights_file = folder / ADAPTER_CONFIG, folder / ADAPTER_WEIGHTS
    for path in (config_file, weights_file):
        if not path.is_file():
            raise AdapterError(f"{folder} holds no MAA adapters: {path.name} is missing")
    record = read_format_record(config_file, ADAPTERS_FORMAT, "adapters", AdapterError)
    try:
        config = AdapterConfig(
            hidden_size=record["hidden_size"],
            num_layers=record["num_layers"],
            layers=tuple(record["layers"]),
            rank=record["rank"],
            model_type=str(record.get("model_type", "")),
        )
    except (KeyError, TypeError) as error:
        raise AdapterError(f"{config_file} lacks a field of the adapters' shape: {error}") from None
    adapters = Adapters(config)
    load_weights(adapters, weights_file, AdapterError, f"the adapters {config_file.name} describes")
    adapters.eval()
    return adapters


def load_adapters(encoder: nn.Module, directory: Path | str) -> Adapters:
    """The adapters saved in ``directory``, attached to ``encoder`` (frozen first): from now on
    the encoder's forward passes are the adapted ones, wherever it is called (a VLM's tower)."""
    adapters = read_adapters(directory)
    freeze(encoder)
    return adapters.attach(encoder)


# --------------------------------------------------------------------------- the losses


def distillation_loss(adapted: Sequence[torch.Tensor], clean: Sequence[torch.Tensor]) -> torch.Tensor:
    """Paired feature self-distillation: over the layers, the sum of the mean over tokens of
    ``||adapted - clean||^2 / d`` (each layer's mean squared error); the clean features are
    a fixed target (no gradient flows into them)."""
    if len(adapted) != len(clean) or not adapted:
        raise AdapterError(f"{len(adapted)} adapted feature layers against {len(clean)} clean ones")
    total = adapted[0].new_zeros(())
    for index, (ours, target) in enumerate(zip(adapted, clean, strict=True)):
        if ours.shape != target.shape:
            raise AdapterError(
                f"layer {index}: adapted features {tuple(ours.shape)} and clean ones "
                f"{tuple(target.shape)} differ in shape (images of different sizes?)"
            )
        total = total + (ours - target.detach()).pow(2).mean()
    return total


def discriminator_loss(
    clean_logits: torch.Tensor, adapted_logits: torch.Tensor, objective: Objective = "nonsaturating"
) -> torch.Tensor:
    """The discriminator's loss: clean tokens are real (1), adapted corrupted ones fake (0).
    Non-saturating: ``mean(-log sigmoid(D_clean)) + mean(-log(1 - sigmoid(D_adapted)))``;
    LSGAN: ``(mean((D_clean - 1)^2) + mean(D_adapted^2)) / 2``."""

    _check_objective(objective)
    if objective == "lsgan":
        return 0.5 * ((clean_logits - 1).pow(2).mean() + adapted_logits.pow(2).mean())
    return functional.softplus(-clean_logits).mean() + functional.softplus(adapted_logits).mean()


def adversarial_loss(adapted_logits: torch.Tensor, objective: Objective = "nonsaturating") -> torch.Tensor:
    """The adapters' adversarial loss, low when the discriminator takes their tokens for
    clean ones. Non-saturating: ``mean(-log sigmoid(D_adapted))``; LSGAN:
    ``mean((D_adapted - 1)^2) / 2``."""

    _check_objective(objective)
    if objective == "lsgan":
        return 0.5 * (adapted_logits - 1).pow(2).mean()
    return functional.softplus(-adapted_logits).mean()


def _check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise AdapterError(f"unknown adversarial objective {objective!r}; known: {', '.join(OBJECTIVES)}")


def token_discriminator(hidden_size: int, width: int = 64) -> nn.Module:
    """The token-level discriminator: an MLP mapping each token (``... x hidden``) to one
    logit (``...``), high for tokens it takes for clean ones."""

    class TokenDiscriminator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.Sequential(
                nn.Linear(hidden_size, width),
                nn.LeakyReLU(0.2),
                nn.Linear(width, width),
                nn.LeakyReLU(0.2),
                nn.Linear(width, 1),
            )

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.layers(tokens).squeeze(-1)
            return logits

    return TokenDiscriminator()


# --------------------------------------------------------------------------- training


@dataclass(frozen=True)
class MAAObjective:
    """What one MAA step optimises (module docstring)."""

    adversarial_weight: float = 0.1
    """``lambda``: 0 is the Euclidean-alignment baseline (no discriminator)."""
    objective: Objective = "nonsaturating"
    distill_layers: tuple[int, ...] | None = None
    """The blocks whose features are distilled (None: every adapted block)."""
    adversarial_layers: tuple[int, ...] = (-1,)
    """The blocks whose tokens a discriminator (one per block) judges; negative from the last."""

    def __post_init__(self) -> None:
        weight = self.adversarial_weight
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight < float("inf"):
            raise AdapterError(f"adversarial_weight must be a finite number >= 0, got {weight!r}")
        _check_objective(self.objective)
        if not self.adversarial_layers:
            raise AdapterError("adversarial_layers must name at least one block")


class MAATrainer:
    """One optimiser for the adapters and one for the discriminators; :meth:`step` takes a
    batch of clean and corrupted pixel values (the same images) and updates both."""

    def __init__(
        self,
        encoder: nn.Module,
        adapters: Adapters,
        objective: MAAObjective,
        *,
        learning_rate: float = 1e-3,
        discriminator_learning_rate: float = 1e-3,
        discriminator_width: int = 64,
    ) -> None:

        if adapters.encoder is not encoder:
            raise AdapterError("attach the adapters to the encoder before training them")
        freeze(encoder)
        self.encoder = encoder
        self.adapters = adapters
        self.objective = objective
        depth = adapters.config.num_layers
        self.distill_layers = _indices(objective.distill_layers or adapters.config.layers, depth)
        self.adversarial_layers = _indices(objective.adversarial_layers, depth)
        self.discriminators = nn.ModuleDict(
            {
                str(i): token_discriminator(adapters.config.hidden_size, discriminator_width)
                for i in self.adversarial_layers
            }
            if objective.adversarial_weight > 0
            else {}
        )
        self.adapter_optimizer = torch.optim.Adam(adapters.parameters(), lr=learning_rate)
        self.discriminator_optimizer = (
            torch.optim.Adam(
                self.discriminators.parameters(), lr=discriminator_learning_rate, betas=(0.5, 0.999)
            )
            if len(self.discriminators)
            else None
        )
        for optimizer in (self.adapter_optimizer, self.discriminator_optimizer):
            for group in optimizer.param_groups if optimizer is not None else ():
                group["initial_lr"] = group["lr"]

    def scale_learning_rates(self, factor: float) -> None:
        """Set both optimisers' learning rates to ``factor`` times those they were made with
        (a schedule computed from the step alone, so a resumed run follows it exactly)."""
        for optimizer in (self.adapter_optimizer, self.discriminator_optimizer):
            for group in optimizer.param_groups if optimizer is not None else ():
                group["lr"] = group["initial_lr"] * factor

    def step(self, clean: torch.Tensor, corrupted: torch.Tensor) -> dict[str, float]:
        """One update of the adapters (``L_distill + lambda L_adv``) then, with ``lambda > 0``,
        one of the discriminators on the same tokens; the batch's losses and the
        discriminators' token accuracy."""

        if clean.shape != corrupted.shape:
            raise AdapterError(
                f"clean pixels {tuple(clean.shape)} and corrupted ones "
                f"{tuple(corrupted.shape)} differ in shape"
            )
        self.adapters.train()
        with torch.no_grad(), self.adapters.disabled():
            target = block_outputs(self.encoder, clean)
        adapted = block_outputs(self.encoder, corrupted)
        distill = distillation_loss(
            [adapted[i] for i in self.distill_layers], [target[i] for i in self.distill_layers]
        )
        metrics = {"distill_loss": float(distill.detach())}
        loss = distill
        if len(self.discriminators):
            logits = [self.discriminators[str(i)](adapted[i]) for i in self.adversarial_layers]
            adversarial = torch.stack([adversarial_loss(x, self.objective.objective) for x in logits]).mean()
            loss = loss + self.objective.adversarial_weight * adversarial
            metrics["adversarial_loss"] = float(adversarial.detach())
        self.adapter_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.adapter_optimizer.step()
        metrics["loss"] = float(loss.detach())
        if self.discriminator_optimizer is not None:
            metrics.update(self._discriminator_step(target, adapted))
        self.adapters.eval()
        return metrics

    def _discriminator_step(
        self, target: list[torch.Tensor], adapted: list[torch.Tensor]
    ) -> dict[str, float]:

        assert self.discriminator_optimizer is not None
        losses, correct, total = [], 0.0, 0
        for i in self.adversarial_layers:
            discriminator = self.discriminators[str(i)]
            real, fake = discriminator(target[i]), discriminator(adapted[i].detach())
            losses.append(discriminator_loss(real, fake, self.objective.objective))
            threshold = 0.5 if self.objective.objective == "lsgan" else 0.0
            correct += float((real > threshold).sum() + (fake <= threshold).sum())
            total += real.numel() + fake.numel()
        loss = torch.stack(losses).mean()
        self.discriminator_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.discriminator_optimizer.step()
        return {"discriminator_loss": float(loss.detach()), "discriminator_accuracy": correct / total}

    def state(self) -> dict[str, Any]:
        """Everything a resumed run needs besides the encoder: adapter, discriminator and
        optimiser states (for ``torch.save``)."""
        return {
            "adapters": self.adapters.state_dict(),
            "discriminators": self.discriminators.state_dict(),
            "adapter_optimizer": self.adapter_optimizer.state_dict(),
            "discriminator_optimizer": (
                self.discriminator_optimizer.state_dict() if self.discriminator_optimizer else None
            ),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`'s result."""
        self.adapters.load_state_dict(state["adapters"])
        self.discriminators.load_state_dict(state["discriminators"])
        self.adapter_optimizer.load_state_dict(state["adapter_optimizer"])
        if self.discriminator_optimizer is not None:
            self.discriminator_optimizer.load_state_dict(state["discriminator_optimizer"])


def _indices(layers: Sequence[int], depth: int) -> tuple[int, ...]:
    chosen = tuple(sorted({i + depth if i < 0 else i for i in layers}))
    if any(not 0 <= i < depth for i in chosen):
        raise AdapterError(f"block indices {list(layers)} are outside 0..{depth - 1}")
    return chosen
