"""Lookup-free (LFQ) and binary spherical (BSQ) quantisation: a latent vector of K numbers
becomes K bits, with the commitment and entropy losses that train an encoder towards them.

**LFQ** (MAGVIT-v2). For ``z`` in R^K, ``q(z)_k = sign(z_k)`` in {-1, +1} (zero counts as
negative, so a code's bits are ``1[z_k > 0]``). The code's index is
``sum_k 2^(K-k) * 1[z_k > 0]`` with the first bit most significant; the codebook, {-1, +1}^K,
is implicit: 2^K codes and no table to look up. The decoder sees ``zhat = z + sg(q(z) - z)``
(straight-through: the forward value is ``q(z)``, the gradient passes as if ``zhat = z``).

**BSQ** (binary spherical quantisation). The vector is first put on the unit sphere,
``u = z / ||z||``, and quantised to ``uhat = sign(u) / sqrt(K)`` (also of norm 1), again
straight-through.

**Losses.** ``commitment`` pulls the encoder's output towards its code: LFQ's is the mean
squared error per element, ``mean_k (z_k - sg(q_k))^2``; BSQ's is the squared distance on the
sphere, ``||u - sg(uhat)||^2``; both averaged over tokens. The entropy loss

    L_ent = E_x[H(p(c|z))] - gamma * H(E_x[p(c|z)]),
    p(c|z) = softmax_c(-||z - c||^2 / tau) = softmax_c(2 z.c / tau)

(the two forms agree because ``||z||^2`` and ``||c||^2`` do not depend on ``c``) makes each
token confident about its code (the first term) while the batch as a whole spreads over the
codebook (the second). ``1 / tau`` is ``inv_temperature``; for BSQ ``z`` is ``u`` and the codes
are scaled by ``1 / sqrt(K)``. Exactly, ``p`` is a softmax over all 2^K codes
(:func:`exact_code_entropy`, up to ``K = MAX_EXACT_BITS``). BSQ's factorisation
(:func:`grouped_code_entropy`) splits the K bits into groups of ``g`` with sub-codebooks of 2^g:
the codebook entropy is approximated by the sum over groups of ``H(mean_x p_group)``, and the
per-sample entropy is computed from per-bit probabilities, ``p_k = sigma(4 s z_k / tau)`` with
code scale ``s`` (1 for LFQ, 1/sqrt(K) for BSQ). The per-sample term is exact either way (the
softmax over the product codebook factorises into independent bits); the codebook term is
exact when ``g = K``.

Entropies are in nats.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

from embodia.errors import EmbodiaError

MAX_EXACT_BITS = 12
"""The largest K whose exact entropy (a softmax over all 2^K codes per token) is computed."""
MAX_INDEX_BITS = 62
"""The most bits an index can hold (an int64, sign bit left alone)."""
QUANTIZERS: tuple[str, ...] = ("lfq", "bsq")
QuantizerKind = Literal["lfq", "bsq"]


class TokenizerError(EmbodiaError, ValueError):
    """A tokenizer setting, input or saved file that cannot be used; the message names it."""


# --------------------------------------------------------------------------- bits and indices


def bits_to_indices(bits: torch.Tensor) -> torch.Tensor:
    """Indices (int64, shape ``bits.shape[:-1]``) of codes given as bits in {0, 1} along the
    last axis, the first bit the most significant: ``sum_k 2^(K-k) * bit_k``."""
    width = bits.shape[-1]
    if not 1 <= width <= MAX_INDEX_BITS:
        raise TokenizerError(f"an index holds 1..{MAX_INDEX_BITS} bits, got codes of {width} bits")
    weights = torch.pow(2, torch.arange(width - 1, -1, -1, device=bits.device, dtype=torch.int64))
    return (bits.to(torch.int64) * weights).sum(-1)


def indices_to_bits(indices: torch.Tensor, bits: int) -> torch.Tensor:
    """The ``bits`` bits (int64 in {0, 1}, a new last axis, most significant first) of each
    index; the inverse of :func:`bits_to_indices`."""
    if not 1 <= bits <= MAX_INDEX_BITS:
        raise TokenizerError(f"an index holds 1..{MAX_INDEX_BITS} bits, got {bits}")
    indices = indices.to(torch.int64)
    if bool((indices < 0).any()) or bool((indices >= 2**bits).any()):
        raise TokenizerError(f"indices must be in 0..{2**bits - 1} for {bits} bits")
    shifts = torch.arange(bits - 1, -1, -1, device=indices.device, dtype=torch.int64)
    return (indices.unsqueeze(-1) >> shifts) & 1


def signs_to_bits(values: torch.Tensor) -> torch.Tensor:
    """``1[value > 0]`` as int64: the bits of a code (or of the latent it quantises)."""
    return (values > 0).to(torch.int64)


def bits_to_signs(bits: torch.Tensor) -> torch.Tensor:
    """Bits in {0, 1} as float signs in {-1, +1}."""
    return bits.float() * 2.0 - 1.0


def sign_quantize(values: torch.Tensor) -> torch.Tensor:
    """``q(z) = sign(z)`` in {-1, +1}, with zero quantised to -1 (its bit is 0)."""
    return torch.where(values > 0, 1.0, -1.0).to(values.dtype)


def straight_through(values: torch.Tensor, quantized: torch.Tensor) -> torch.Tensor:
    """``z + sg(q - z)``: ``q`` forward, the identity backward."""
    return values + (quantized - values).detach()


def all_codes(bits: int, scale: float = 1.0) -> torch.Tensor:
    """Every code of ``bits`` bits as rows of ``scale * {-1, +1}``, row ``i`` the code of index ``i``."""
    return bits_to_signs(indices_to_bits(torch.arange(2**bits), bits)) * scale


# --------------------------------------------------------------------------- entropies


def entropy(probabilities: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy in nats along ``dim`` (``0 log 0 = 0``)."""
    return -(probabilities * torch.log(probabilities.clamp_min(1e-12))).sum(dim)


def binary_entropy_of_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of a Bernoulli(``sigma(logit)``), element-wise, stable for any logit:
    ``sigma(x) softplus(-x) + sigma(-x) softplus(x)``."""
    softplus = torch.nn.functional.softplus
    return torch.sigmoid(logits) * softplus(-logits) + torch.sigmoid(-logits) * softplus(logits)


@dataclass(frozen=True)
class EntropyTerms:
    """The two halves of the entropy loss, in nats, averaged over the tokens given."""

    per_sample: torch.Tensor
    """``E_x[H(p(c|z))]``: low when every token is sure of its code."""
    codebook: torch.Tensor
    """``H(E_x[p(c|z)])`` (or its grouped approximation): high when the codes are used evenly."""

    def loss(self, diversity_gamma: float) -> torch.Tensor:
        """``per_sample - gamma * codebook``."""
        return self.per_sample - diversity_gamma * self.codebook


def _flat(values: torch.Tensor) -> torch.Tensor:
    return values.reshape(-1, values.shape[-1]).float()


def exact_code_entropy(values: torch.Tensor, inv_temperature: float, code_scale: float = 1.0) -> EntropyTerms:
    """Both entropy terms from ``p(c|z) = softmax_c(2 z.c * inv_temperature)`` over all 2^K
    codes ``c`` in ``code_scale * {-1, +1}^K`` (``values``: (..., K), one token per row)."""
    width = values.shape[-1]
    if width > MAX_EXACT_BITS:
        raise TokenizerError(
            f"the exact entropy over 2^{width} codes is supported up to K={MAX_EXACT_BITS} bits: "
            "set entropy_group_size to a divisor of K (BSQ's grouped entropy)"
        )
    flat = _flat(values)
    codes = all_codes(width, code_scale).to(flat.device)
    probabilities = torch.softmax(2.0 * inv_temperature * flat @ codes.T, dim=-1)
    return EntropyTerms(entropy(probabilities).mean(), entropy(probabilities.mean(0)))


def grouped_code_entropy(
    values: torch.Tensor, group_size: int, inv_temperature: float, code_scale: float = 1.0
) -> EntropyTerms:
    """BSQ's factorised entropy terms: the codebook entropy as the sum over groups of
    ``group_size`` bits of ``H(mean_x p_group)``, with ``p_group`` a softmax over the group's
    2^g sub-codes; the per-sample entropy as the sum of per-bit binary entropies with
    ``p_k = sigma(4 * code_scale * z_k * inv_temperature)``."""
    width = values.shape[-1]
    check_group_size(width, group_size)
    flat = _flat(values)
    codes = all_codes(group_size, code_scale).to(flat.device)
    groups = flat.reshape(flat.shape[0], width // group_size, group_size)
    probabilities = torch.softmax(2.0 * inv_temperature * groups @ codes.T, dim=-1)
    codebook = entropy(probabilities.mean(0)).sum()
    per_sample = binary_entropy_of_logits(4.0 * code_scale * inv_temperature * flat).sum(-1).mean()
    return EntropyTerms(per_sample, codebook)


def check_group_size(bits: int, group_size: int) -> None:
    """An error unless ``group_size`` divides ``bits`` and its sub-codebook is small enough."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise TokenizerError(f"entropy_group_size must be a positive integer, got {group_size!r}")
    if bits % group_size:
        raise TokenizerError(f"entropy_group_size {group_size} does not divide the {bits} bits of a code")
    if group_size > MAX_EXACT_BITS:
        raise TokenizerError(
            f"entropy_group_size {group_size} makes sub-codebooks of 2^{group_size} codes; "
            f"at most {MAX_EXACT_BITS} bits per group"
        )


# --------------------------------------------------------------------------- the quantiser


@dataclass(frozen=True)
class QuantizerConfig:
    """How latent vectors become bits, and the weights of the quantiser's losses. The defaults
    are MAGVIT-v2's (commitment 0.25, entropy 0.1, diversity gamma 1, inverse temperature 100)."""

    kind: QuantizerKind = "lfq"
    """``lfq`` (signs of the latent) or ``bsq`` (signs of the latent on the unit sphere)."""
    bits: int = 8
    """K: bits per code; the implicit codebook has 2^K codes."""
    commitment_weight: float = 0.25
    entropy_weight: float = 0.1
    diversity_gamma: float = 1.0
    """gamma: weight of the codebook entropy against the per-sample entropy."""
    inv_temperature: float = 100.0
    """1 / tau of ``p(c|z)``."""
    entropy_group_size: int | None = None
    """None: the exact entropy over all 2^K codes (K <= MAX_EXACT_BITS); g: BSQ's grouped
    entropy over K / g sub-codebooks of 2^g codes."""

    def __post_init__(self) -> None:
        if self.kind not in QUANTIZERS:
            raise TokenizerError(f"unknown quantizer {self.kind!r}: expected one of {', '.join(QUANTIZERS)}")
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= 32:
            raise TokenizerError(f"bits must be an integer in 1..32, got {self.bits!r}")
        for name in ("commitment_weight", "entropy_weight", "diversity_gamma"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, int | float) and 0 <= value < math.inf):
                raise TokenizerError(f"{name} must be a finite number >= 0, got {value!r}")
        temperature = self.inv_temperature
        if isinstance(temperature, bool) or not (
            isinstance(temperature, int | float) and 0 < temperature < math.inf
        ):
            raise TokenizerError(f"inv_temperature must be a finite number > 0, got {temperature!r}")
        if self.entropy_group_size is None:
            if self.entropy_weight > 0 and self.bits > MAX_EXACT_BITS:
                raise TokenizerError(
                    f"the exact entropy over 2^{self.bits} codes is supported up to K={MAX_EXACT_BITS} "
                    "bits: set entropy_group_size to a divisor of K (BSQ's grouped entropy)"
                )
        else:
            check_group_size(self.bits, self.entropy_group_size)

    @property
    def code_scale(self) -> float:
        """The magnitude of each entry of a code: 1 for LFQ, 1/sqrt(K) for BSQ."""
        return 1.0 if self.kind == "lfq" else 1.0 / math.sqrt(self.bits)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Quantized:
    """What :class:`SignQuantizer` makes of a batch of latent vectors."""

    codes: torch.Tensor
    """The straight-through code values the decoder sees, shaped like the input."""
    bits: torch.Tensor
    """The codes' bits, int64 in {0, 1}, shaped like the input."""
    loss: torch.Tensor
    """``commitment_weight * commitment + entropy_weight * L_ent``."""
    commitment: torch.Tensor
    entropy: EntropyTerms


class SignQuantizer(torch.nn.Module):
    """LFQ or BSQ (module docstring) over the last axis of its input, of size ``config.bits``."""

    def __init__(self, config: QuantizerConfig) -> None:
        super().__init__()
        self.config = config

    def project(self, values: torch.Tensor) -> torch.Tensor:
        """The latent as the quantiser sees it: itself (LFQ) or on the unit sphere (BSQ)."""
        if self.config.kind == "lfq":
            return values
        return torch.nn.functional.normalize(values, dim=-1, eps=1e-8)

    def dequantize(self, bits: torch.Tensor) -> torch.Tensor:
        """The code values of ``bits`` (what the decoder reads): ``+-1`` (LFQ) or
        ``+-1/sqrt(K)`` (BSQ). Generated bits reach the decoder through this, not an encoder."""
        return bits_to_signs(bits) * self.config.code_scale

    def forward(self, values: torch.Tensor) -> Quantized:
        config = self.config
        if values.shape[-1] != config.bits:
            raise TokenizerError(
                f"the quantizer takes vectors of {config.bits} numbers, got a last axis of {values.shape[-1]}"
            )
        projected = self.project(values)
        hard = sign_quantize(projected) * config.code_scale
        if config.kind == "lfq":
            commitment = ((projected - hard.detach()) ** 2).mean()
        else:
            commitment = ((projected - hard.detach()) ** 2).sum(-1).mean()
        if config.entropy_weight == 0:
            terms = EntropyTerms(values.new_zeros(()), values.new_zeros(()))
        elif config.entropy_group_size is None:
            terms = exact_code_entropy(projected, config.inv_temperature, config.code_scale)
        else:
            terms = grouped_code_entropy(
                projected, config.entropy_group_size, config.inv_temperature, config.code_scale
            )
        loss = config.commitment_weight * commitment + config.entropy_weight * terms.loss(
            config.diversity_gamma
        )
        return Quantized(
            codes=straight_through(projected, hard),
            bits=signs_to_bits(projected),
            loss=loss,
            commitment=commitment,
            entropy=terms,
        )
