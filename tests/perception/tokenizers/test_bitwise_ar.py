"""The parallel bitwise head and the tiny unified AR model: grouping of codes into steps, the
per-bit cross entropy by hand, generation that reads its own bits back, and learning."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from embodia.envs.puzzles.clevr_scene import describe, draw_scene, render_scene
from embodia.perception.tokenizers.autoencoder import BitwiseTokenizer, TokenizerConfig, reconstruct
from embodia.perception.tokenizers.bitwise_ar import (
    BitwiseHead,
    TinyUnifiedAR,
    UnifiedARConfig,
    WordVocab,
    bitwise_loss,
    flip_bits,
    generate_images,
    group_bits,
    load_unified_ar,
    per_bit_cross_entropy,
    sample_bits,
    save_unified_ar,
    ungroup_bits,
)
from embodia.perception.tokenizers.lfq import QuantizerConfig, TokenizerError


def test_a_step_holds_a_group_of_positions_with_all_their_levels() -> None:
    # (B=1, M=2, h=2, w=4, K=1): position (r, c) of level m holds 100*m + 10*r + c
    values = torch.tensor([[[[100 * m + 10 * r + c for c in range(4)] for r in range(2)] for m in range(2)]])
    steps = group_bits(values.unsqueeze(-1), 2)
    assert steps.shape == (1, 2, 8)  # 2 groups of 2x2 positions x 2 levels x 1 bit
    assert steps[0, 0].tolist() == [0, 100, 1, 101, 10, 110, 11, 111]
    assert steps[0, 1].tolist() == [2, 102, 3, 103, 12, 112, 13, 113]
    assert torch.equal(ungroup_bits(steps, 2, 2, 2, 4).squeeze(-1), values)


def test_grouping_round_trips_and_refuses_grids_it_cannot_cut() -> None:
    bits = torch.randint(0, 2, (3, 2, 6, 8, 5), generator=torch.Generator().manual_seed(0))
    for group in (1, 2):
        steps = group_bits(bits, group)
        assert steps.shape == (3, 48 // group**2, group**2 * 2 * 5)
        assert torch.equal(ungroup_bits(steps, group, 2, 6, 8), bits)
    with pytest.raises(TokenizerError, match="6x8 code grid cannot be cut into 4x4"):
        group_bits(bits, 4)


def test_per_bit_cross_entropy_by_hand() -> None:
    logits = torch.tensor([[[0.0, 0.0], [2.0, 0.0], [2.0, 0.0]]])  # (L=1, N=3, 2)
    bits = torch.tensor([[1, 0, 1]])
    expected = [math.log(2), math.log1p(math.exp(-2)), math.log1p(math.exp(2))]
    assert per_bit_cross_entropy(logits, bits)[0].tolist() == pytest.approx(expected)
    losses = bitwise_loss(logits, bits)
    assert losses["loss"].item() == pytest.approx(sum(expected))  # summed over a step's bits
    assert losses["bit_cross_entropy"].item() == pytest.approx(sum(expected) / 3)
    # the argmax of [0, 0] is 0: right only for the second bit
    assert losses["bit_accuracy"].item() == pytest.approx(1 / 3)
    with pytest.raises(TokenizerError, match="do not match"):
        per_bit_cross_entropy(logits, torch.tensor([[1, 0]]))


def test_the_loss_averages_over_steps_and_batch() -> None:
    logits = torch.zeros(2, 5, 4, 2)
    bits = torch.zeros(2, 5, 4, dtype=torch.int64)
    assert bitwise_loss(logits, bits)["loss"].item() == pytest.approx(4 * math.log(2))


def test_the_head_gives_two_logits_per_bit() -> None:
    head = BitwiseHead(16, 12)
    assert head(torch.zeros(3, 7, 16)).shape == (3, 7, 12, 2)


def test_sampling_bits() -> None:
    logits = torch.tensor([[3.0, -1.0], [-1.0, 3.0], [0.0, 0.0]])
    assert sample_bits(logits).tolist() == [0, 1, 0]
    draws = sample_bits(logits.expand(4000, 3, 2), 1.0, torch.Generator().manual_seed(0)).float().mean(0)
    assert draws.tolist() == pytest.approx([1 / (1 + math.exp(4)), 1 / (1 + math.exp(-4)), 0.5], abs=0.03)
    with pytest.raises(TokenizerError, match="temperature"):
        sample_bits(logits, -1.0)


def test_flipping_bits_flips_the_share_asked_for() -> None:
    bits = torch.zeros(100_000, dtype=torch.int64)
    assert flip_bits(bits, 0.0) is bits
    assert flip_bits(bits, 0.1, torch.Generator().manual_seed(0)).float().mean().item() == pytest.approx(
        0.1, abs=0.01
    )


def test_the_vocabulary_left_pads_and_names_texts_too_long() -> None:
    vocab = WordVocab.build(["There is 1 object: a red cube."])
    assert vocab.words[:2] == ["<pad>", "<unk>"]
    ids = vocab.encode("a blue cube.", 5)
    assert [vocab.words[i] for i in ids] == ["<pad>", "a", "<unk>", "cube", "."]
    with pytest.raises(TokenizerError, match="5 words does not fit the model's 3 text tokens"):
        vocab.encode("a red cube and a", 3)


def _model(steps: int = 4, bits: int = 6, text: int = 5, vocab: int = 10, seed: int = 0) -> TinyUnifiedAR:
    torch.manual_seed(seed)
    config = UnifiedARConfig(
        vocab_size=vocab, text_length=text, steps=steps, bits_per_step=bits, width=32, heads=4
    )
    return TinyUnifiedAR(config)


def test_the_model_is_causal_over_steps() -> None:
    model = _model().eval()
    text = torch.randint(0, 10, (1, 5))
    steps = torch.randint(0, 2, (1, 3, 6))
    changed = steps.clone()
    changed[0, 2] = 1 - changed[0, 2]
    with torch.no_grad():
        before, after = model(text, steps), model(text, changed)
    assert before.shape == (1, 4, 6, 2)
    assert torch.equal(before[:, :3], after[:, :3])  # step 3's bits are seen only by the prediction of step 4
    assert not torch.equal(before[:, 3], after[:, 3])


def test_generation_feeds_back_the_bits_it_wrote() -> None:
    model = _model(steps=6).eval()
    text = torch.randint(0, 10, (3, 5), generator=torch.Generator().manual_seed(1))
    fed: list[torch.Tensor] = []
    embed = model.embed_steps

    def recording(step_bits: torch.Tensor) -> torch.Tensor:
        fed.append(step_bits.clone())
        return embed(step_bits)

    model.embed_steps = recording  # type: ignore[method-assign]
    written = model.generate(text)
    assert written.shape == (3, 6, 6)
    # the model's input at each later step is exactly the bits it wrote before it
    assert [len(f[0]) for f in fed] == [1, 2, 3, 4, 5]
    for inputs in fed:
        assert torch.equal(inputs, written[:, : inputs.shape[1]])
    # and greedy decoding is what teacher forcing on its own output predicts
    with torch.no_grad():
        assert torch.equal(model(text, written[:, :-1]).argmax(-1), written)


def _clevr(count: int, seed: int) -> tuple[np.ndarray, list[str]]:
    from PIL import Image

    rng = np.random.default_rng(seed)
    images, captions = [], []
    for _ in range(count):
        facts = {"objects": draw_scene(rng, int(rng.integers(1, 3)))}
        images.append(np.asarray(Image.fromarray(render_scene(facts)).resize((32, 16), Image.Resampling.BOX)))
        captions.append(describe(facts, {}))
    return np.stack(images), captions


def test_generated_images_are_decoded_from_the_written_bits_without_the_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(0)
    tokenizer = BitwiseTokenizer(TokenizerConfig(QuantizerConfig(bits=4), levels=2, channels=(8, 16))).eval()
    images, captions = _clevr(4, 0)
    vocab = WordVocab.build(captions)
    model = TinyUnifiedAR(
        UnifiedARConfig(vocab_size=len(vocab), text_length=30, steps=8, bits_per_step=4 * 2 * 4, width=32)
    ).eval()

    def no_encoder(*_: object) -> None:
        raise AssertionError("generation must not encode images")

    monkeypatch.setattr(tokenizer, "encode", no_encoder)
    monkeypatch.setattr(tokenizer, "latents", no_encoder)
    pictures, codes = generate_images(model, tokenizer, vocab, captions[:2], 2, height=16, width=32)
    assert pictures.shape == (2, 16, 32, 3) and pictures.dtype == np.uint8
    assert codes.shape == (2, 2, 4, 8, 4)
    steps = model.generate(vocab.encode_batch(captions[:2], 30))
    assert torch.equal(group_bits(codes, 2), steps)
    with torch.no_grad():
        assert np.array_equal(
            pictures,
            (tokenizer.decode_bits(codes).clamp(0, 1) * 255).round().byte().permute(0, 2, 3, 1).numpy(),
        )


def test_teacher_forced_per_bit_loss_goes_down_in_training() -> None:
    torch.manual_seed(0)
    tokenizer = BitwiseTokenizer(TokenizerConfig(QuantizerConfig(bits=4), levels=2, channels=(8, 16)))
    images, captions = _clevr(24, 1)
    _, bits = reconstruct(tokenizer, images)
    steps = group_bits(torch.from_numpy(bits), 2)
    vocab = WordVocab.build(captions)
    text = vocab.encode_batch(captions, 30)
    model = _model(steps=steps.shape[1], bits=steps.shape[2], text=30, vocab=len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    curve = []
    for _ in range(40):
        losses = model.teacher_forced(
            text, steps, flip_probability=0.05, generator=torch.Generator().manual_seed(0)
        )
        optimizer.zero_grad()
        losses["loss"].backward()
        optimizer.step()
        curve.append(losses["bit_cross_entropy"].item())
    assert curve[0] > 0.6  # about ln 2 at the start
    assert curve[-1] < 0.5 * curve[0]
    assert np.mean(curve[-5:]) < np.mean(curve[5:10]) < np.mean(curve[:5])


def test_the_model_saves_and_loads_exactly(tmp_path: Path) -> None:
    model = _model().eval()
    vocab = WordVocab(["a", "b", "c", "d", "e", "f", "g", "h"])
    save_unified_ar(model, vocab, 2, tmp_path / "ar")
    loaded, words, group = load_unified_ar(tmp_path / "ar")
    assert group == 2 and words.words == vocab.words and loaded.config == model.config
    text = torch.randint(0, 10, (2, 5))
    assert torch.equal(loaded.generate(text), model.generate(text))
    with pytest.raises(TokenizerError, match="does not exist"):
        load_unified_ar(tmp_path / "none")


def test_bad_model_shapes_are_named() -> None:
    with pytest.raises(TokenizerError, match="width 30 is not a multiple of heads 4"):
        UnifiedARConfig(vocab_size=5, text_length=2, steps=2, bits_per_step=2, width=30)
    model = _model()
    with pytest.raises(TokenizerError, match="texts must be 5 tokens"):
        model(torch.zeros(1, 4, dtype=torch.int64), torch.zeros(1, 0, 6, dtype=torch.int64))
    with pytest.raises(TokenizerError, match="up to 3 steps of 6 bits"):
        model(torch.zeros(1, 5, dtype=torch.int64), torch.zeros(1, 4, 6, dtype=torch.int64))
