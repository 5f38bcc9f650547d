"""The conv tokenizer: shapes of its codes, the sizes it refuses, decoding bits without the
encoder, the save/load round trip, and its throughput function."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from embodia.perception.tokenizers.autoencoder import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    BitwiseTokenizer,
    TokenizerConfig,
    codec_throughput,
    images_to_tensor,
    load_tokenizer,
    reconstruct,
    save_tokenizer,
    tensor_to_images,
    tokenizer_loss,
)
from embodia.perception.tokenizers.lfq import QuantizerConfig, TokenizerError


def _tokenizer(
    kind: str = "lfq", levels: int = 2, channels: tuple[int, ...] = (8, 16, 16)
) -> BitwiseTokenizer:
    torch.manual_seed(0)
    return BitwiseTokenizer(TokenizerConfig(QuantizerConfig(kind=kind, bits=6), levels, channels))  # type: ignore[arg-type]


def test_codes_have_one_k_bit_code_per_level_and_grid_position() -> None:
    tokenizer = _tokenizer(levels=3)
    images = torch.rand(2, 3, 16, 24)
    output = tokenizer(images)
    assert tokenizer.config.stride == 8 and tokenizer.config.grid(16, 24) == (2, 3)
    assert output.bits.shape == (2, 3, 2, 3, 6)
    assert set(output.bits.unique().tolist()) <= {0, 1}
    assert output.reconstruction.shape == images.shape
    assert tokenizer.config.bits_per_image(16, 24) == 2 * 3 * 3 * 6
    assert torch.equal(tokenizer.encode(images), output.bits)
    losses = tokenizer_loss(output, images)
    assert losses["reconstruction"].item() == pytest.approx(
        ((output.reconstruction - images) ** 2).mean().item()
    )
    assert losses["loss"].item() == pytest.approx((losses["reconstruction"] + output.quantized.loss).item())


@pytest.mark.parametrize("kind", ["lfq", "bsq"])
def test_bits_decode_to_the_forward_reconstruction(kind: str) -> None:
    tokenizer = _tokenizer(kind).eval()
    images = torch.rand(2, 3, 16, 16)
    with torch.no_grad():
        output = tokenizer(images)
        assert torch.allclose(tokenizer.decode_bits(output.bits), output.reconstruction, atol=1e-5)


def test_sizes_the_encoder_cannot_take_are_named() -> None:
    tokenizer = _tokenizer()
    with pytest.raises(TokenizerError, match="multiples of its stride 8, got 20x24"):
        tokenizer(torch.rand(1, 3, 20, 24))
    with pytest.raises(TokenizerError, match=r"\(N, 3, H, W\)"):
        tokenizer(torch.rand(1, 1, 16, 16))
    with pytest.raises(TokenizerError, match="2 levels x 6 bits, got 1 x 6"):
        tokenizer.decode_bits(torch.zeros(1, 1, 2, 2, 6, dtype=torch.int64))


def test_bad_architectures_are_refused() -> None:
    with pytest.raises(TokenizerError, match="multiple of 8"):
        TokenizerConfig(channels=(12, 16))
    with pytest.raises(TokenizerError, match="levels must be an integer in 1..2"):
        TokenizerConfig(levels=3, channels=(8, 16))
    with pytest.raises(TokenizerError, match="1..5 stage widths"):
        TokenizerConfig(channels=())


def test_uint8_images_round_trip_through_tensors() -> None:
    images = np.random.default_rng(0).integers(0, 256, (3, 8, 8, 3), dtype=np.uint8)
    tensor = images_to_tensor(images)
    assert tensor.shape == (3, 3, 8, 8) and float(tensor.max()) <= 1.0
    assert np.array_equal(tensor_to_images(tensor), images)
    with pytest.raises(TokenizerError, match="uint8"):
        images_to_tensor(images.astype(np.float32))
    with pytest.raises(TokenizerError, match="RGB"):
        images_to_tensor(images[..., :2])


def test_save_and_load_round_trip_exactly(tmp_path: Path) -> None:
    tokenizer = _tokenizer("bsq").eval()
    save_tokenizer(tokenizer, tmp_path / "tok")
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == [CONFIG_FILE, WEIGHTS_FILE]
    loaded = load_tokenizer(tmp_path / "tok")
    assert loaded.config == tokenizer.config
    for (name, value), (other, again) in zip(
        tokenizer.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert name == other and torch.equal(value, again)
    images = np.random.default_rng(1).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    first, second = reconstruct(tokenizer, images), reconstruct(loaded, images)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])


def test_loading_a_broken_tokenizer_names_the_problem(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="does not exist"):
        load_tokenizer(tmp_path / "none")
    folder = save_tokenizer(_tokenizer(), tmp_path / "tok")
    record = json.loads((folder / CONFIG_FILE).read_text())
    record["config"]["channels"] = [8, 16, 24]
    (folder / CONFIG_FILE).write_text(json.dumps(record))
    with pytest.raises(TokenizerError, match="does not fit its config"):
        load_tokenizer(folder)
    (folder / CONFIG_FILE).write_text("{")
    with pytest.raises(TokenizerError, match="is not JSON"):
        load_tokenizer(folder)
    (folder / CONFIG_FILE).unlink()
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        load_tokenizer(folder)


def test_codec_throughput_counts_images_per_second() -> None:
    images = np.zeros((4, 16, 16, 3), dtype=np.uint8)
    result = codec_throughput(_tokenizer(), images, repeats=2)
    assert result["images"] == 4
    assert result["encode_images_per_s"] > 0 and result["decode_images_per_s"] > 0
    with pytest.raises(TokenizerError, match="multiples of its stride"):
        codec_throughput(_tokenizer(), np.zeros((1, 12, 16, 3), dtype=np.uint8))
