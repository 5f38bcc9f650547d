"""LFQ and BSQ: bits and indices, the sign quantiser, straight-through gradients, the exact and
grouped entropies against values worked out by hand, and what the entropy loss does."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from embodia.errors import EmbodiaError
from embodia.perception.tokenizers.lfq import (
    MAX_EXACT_BITS,
    QuantizerConfig,
    SignQuantizer,
    TokenizerError,
    all_codes,
    bits_to_indices,
    exact_code_entropy,
    grouped_code_entropy,
    indices_to_bits,
    sign_quantize,
    signs_to_bits,
    straight_through,
)


def test_index_is_the_bits_read_most_significant_first() -> None:
    bits = torch.tensor([[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0]])
    assert bits_to_indices(bits).tolist() == [5, 1, 7, 0]
    assert indices_to_bits(torch.tensor([6]), 3).tolist() == [[1, 1, 0]]


def test_bits_and_indices_round_trip() -> None:
    every = torch.arange(2**10)
    assert torch.equal(bits_to_indices(indices_to_bits(every, 10)), every)
    bits = torch.randint(0, 2, (7, 5, 40), generator=torch.Generator().manual_seed(0))
    assert torch.equal(indices_to_bits(bits_to_indices(bits), 40), bits)


def test_indices_out_of_range_are_refused() -> None:
    with pytest.raises(TokenizerError, match="0..7"):
        indices_to_bits(torch.tensor([8]), 3)
    with pytest.raises(TokenizerError, match="1..62"):
        bits_to_indices(torch.zeros(2, 63, dtype=torch.int64))


def test_codes_are_signs_and_their_bits_say_which_are_positive() -> None:
    z = torch.tensor([[-2.0, 0.0, 0.3, 5.0]])
    q = sign_quantize(z)
    assert q.tolist() == [[-1.0, -1.0, 1.0, 1.0]]  # zero is quantised to -1: its bit is 0
    assert signs_to_bits(z).tolist() == [[0, 0, 1, 1]]
    random = torch.randn(100, 8)
    assert set(sign_quantize(random).unique().tolist()) == {-1.0, 1.0}
    assert all_codes(2).tolist() == [[-1, -1], [-1, 1], [1, -1], [1, 1]]


def test_the_straight_through_gradient_is_the_identity() -> None:
    z = torch.randn(6, 4, requires_grad=True)
    weights = torch.randn(6, 4)
    out = straight_through(z, sign_quantize(z))
    assert torch.equal(out, sign_quantize(z))
    (out * weights).sum().backward()
    assert torch.equal(z.grad, weights)


def test_the_lfq_module_passes_gradients_straight_through_and_outputs_signs() -> None:
    quantizer = SignQuantizer(QuantizerConfig(kind="lfq", bits=4, entropy_weight=0.0, commitment_weight=0.0))
    z = torch.randn(3, 5, 4, requires_grad=True)
    output = quantizer(z)
    assert set(output.codes.detach().unique().tolist()) <= {-1.0, 1.0}
    assert torch.equal(output.bits, (z > 0).long())
    weights = torch.randn(3, 5, 4)
    (output.codes * weights).sum().backward()
    assert torch.equal(z.grad, weights)


def test_bsq_codes_lie_on_the_unit_sphere() -> None:
    quantizer = SignQuantizer(QuantizerConfig(kind="bsq", bits=9))
    z = torch.randn(20, 9) * 7
    output = quantizer(z)
    assert torch.allclose(output.codes.detach().abs(), torch.full((20, 9), 1 / 3))
    assert torch.allclose(output.codes.detach().norm(dim=-1), torch.ones(20))
    assert torch.allclose(quantizer.dequantize(output.bits), output.codes.detach())
    u = z / z.norm(dim=-1, keepdim=True)
    assert output.commitment.item() == pytest.approx(((u - output.codes.detach()) ** 2).sum(-1).mean().item())


def test_the_lfq_commitment_is_the_mean_squared_distance_to_the_code() -> None:
    quantizer = SignQuantizer(QuantizerConfig(kind="lfq", bits=2, entropy_weight=0.0, commitment_weight=0.25))
    output = quantizer(torch.tensor([[0.5, -2.0]]))
    assert output.commitment.item() == pytest.approx((0.25 + 1.0) / 2)
    assert output.loss.item() == pytest.approx(0.25 * 0.625)


def test_exact_entropy_by_hand() -> None:
    # K = 1, z = 0: both codes equally likely for the one token.
    terms = exact_code_entropy(torch.zeros(1, 1), inv_temperature=100.0)
    assert terms.per_sample.item() == pytest.approx(math.log(2))
    assert terms.codebook.item() == pytest.approx(math.log(2))
    # K = 1, z = 0.25 and -0.25, 1/tau = 2: p(+1 | z) = sigma(4 * z / tau) = sigma(+-2).
    terms = exact_code_entropy(torch.tensor([[0.25], [-0.25]]), inv_temperature=2.0)
    p = 1 / (1 + math.exp(-2.0))
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert terms.per_sample.item() == pytest.approx(h, rel=1e-5)
    assert terms.codebook.item() == pytest.approx(math.log(2), rel=1e-5)  # the mean is uniform
    assert terms.loss(1.0).item() == pytest.approx(h - math.log(2), rel=1e-5)


def test_exact_entropy_is_the_softmax_over_squared_distances() -> None:
    z = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    tau = 0.7
    codes = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=3)))
    p = torch.softmax(-((z[:, None, :] - codes[None]) ** 2).sum(-1) / tau, dim=-1)
    per_sample = -(p * p.log()).sum(-1).mean()
    mean = p.mean(0)
    terms = exact_code_entropy(z, inv_temperature=1 / tau)
    assert terms.per_sample.item() == pytest.approx(per_sample.item(), rel=1e-5)
    assert terms.codebook.item() == pytest.approx(-(mean * mean.log()).sum().item(), rel=1e-5)


@pytest.mark.parametrize("bits", [2, 4, 6])
def test_grouped_entropy_with_one_group_is_the_exact_entropy(bits: int) -> None:
    z = torch.nn.functional.normalize(
        torch.randn(64, bits, generator=torch.Generator().manual_seed(bits)), dim=-1
    )
    scale = 1 / math.sqrt(bits)
    exact = exact_code_entropy(z, inv_temperature=3.0, code_scale=scale)
    grouped = grouped_code_entropy(z, bits, inv_temperature=3.0, code_scale=scale)
    assert grouped.codebook.item() == pytest.approx(exact.codebook.item(), rel=1e-5)
    assert grouped.per_sample.item() == pytest.approx(exact.per_sample.item(), rel=1e-4)


def test_smaller_groups_overestimate_the_codebook_entropy_but_not_the_per_sample_one() -> None:
    # Correlated bits: the sum of the groups' entropies is at least the joint one (subadditivity),
    # while the per-sample entropy factorises exactly.
    base = torch.randn(200, 1, generator=torch.Generator().manual_seed(2))
    z = torch.cat([base, base + 0.1, -base, torch.randn(200, 1)], dim=-1)
    exact = exact_code_entropy(z, inv_temperature=2.0)
    halves = grouped_code_entropy(z, 2, inv_temperature=2.0)
    bits = grouped_code_entropy(z, 1, inv_temperature=2.0)
    assert exact.codebook.item() < halves.codebook.item() < bits.codebook.item()
    assert halves.per_sample.item() == pytest.approx(exact.per_sample.item(), rel=1e-4)


def test_the_entropy_loss_spreads_collapsed_codes_over_the_codebook() -> None:
    def used_codes(entropy_weight: float) -> int:
        torch.manual_seed(0)
        inputs = torch.randn(512, 16)
        encoder = torch.nn.Linear(16, 4)
        with torch.no_grad():
            encoder.weight.mul_(0.05)
            encoder.bias.fill_(0.3)  # every input starts on the code 1111
        config = QuantizerConfig(kind="lfq", bits=4, entropy_weight=entropy_weight)  # 1/tau = 100
        quantizer = SignQuantizer(config)
        optimizer = torch.optim.Adam(encoder.parameters(), lr=0.02)
        for _ in range(150):
            loss = quantizer(encoder(inputs)).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            return len(bits_to_indices(quantizer(encoder(inputs)).bits).unique())

    without, with_entropy = used_codes(0.0), used_codes(0.1)
    assert without == 1
    assert with_entropy >= 14  # of 16


def test_bad_quantizer_settings_name_the_problem() -> None:
    with pytest.raises(TokenizerError, match="unknown quantizer 'vq'"):
        QuantizerConfig(kind="vq")  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match=f"up to K={MAX_EXACT_BITS}.*entropy_group_size"):
        QuantizerConfig(bits=16)
    QuantizerConfig(bits=16, entropy_group_size=8)
    QuantizerConfig(bits=16, entropy_weight=0.0)
    with pytest.raises(TokenizerError, match="does not divide"):
        QuantizerConfig(bits=16, entropy_group_size=5)
    with pytest.raises(TokenizerError, match="commitment_weight"):
        QuantizerConfig(commitment_weight=-1.0)
    with pytest.raises(TokenizerError, match="inv_temperature"):
        QuantizerConfig(inv_temperature=0.0)
    with pytest.raises(TokenizerError, match="last axis of 5"):
        SignQuantizer(QuantizerConfig(bits=4))(torch.zeros(2, 5))
    with pytest.raises(TokenizerError, match="up to K="):
        exact_code_entropy(torch.zeros(2, 13), 1.0)
    assert issubclass(TokenizerError, EmbodiaError) and issubclass(TokenizerError, ValueError)
