"""MAA adapters on tiny ViT, CLIP and SigLIP towers: identity at init, the encoder frozen,
the losses' formulas and signs, one training step that moves only the adapters, the
save/load round trip, and the errors for what does not fit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from embodia.perception.adapters.maa import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    AdapterConfig,
    AdapterError,
    Adapters,
    MAAObjective,
    MAATrainer,
    UnsupportedEncoderError,
    adversarial_loss,
    block_outputs,
    discriminator_loss,
    distillation_loss,
    encoder_blocks,
    load_adapters,
    load_vision_encoder,
    pixel_values,
    read_adapters,
    save_adapters,
)

TOWERS = ("vit", "clip", "siglip")


def _pixels(seed: int, count: int = 4, side: int = 16) -> torch.Tensor:
    return torch.randn(count, 3, side, side, generator=torch.Generator().manual_seed(seed))


def _trained(encoder: torch.nn.Module, steps: int = 3, weight: float = 0.5) -> tuple[Adapters, MAATrainer]:
    """Adapters after ``steps`` MAA steps on noise-corrupted random images (no longer the identity)."""
    torch.manual_seed(1)
    adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=4)).attach(encoder)
    trainer = MAATrainer(encoder, adapters, MAAObjective(adversarial_weight=weight), learning_rate=1e-2)
    for step in range(steps):
        clean = _pixels(step)
        trainer.step(clean, clean + 0.5 * _pixels(100 + step))
    return adapters, trainer


@pytest.mark.parametrize("tower", TOWERS)
def test_fresh_adapters_leave_every_block_output_unchanged(tower: str, tower_dirs: dict[str, Path]) -> None:
    encoder = load_vision_encoder(tower_dirs[tower])
    pixels = _pixels(0)
    with torch.no_grad():
        before = block_outputs(encoder, pixels)
        final_before = encoder(pixel_values=pixels).last_hidden_state
        adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=4)).attach(encoder)
        after = block_outputs(encoder, pixels)
        final_after = encoder(pixel_values=pixels).last_hidden_state
    assert len(before) == 3 and all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert torch.equal(final_before, final_after)
    assert sorted(adapters.blocks) == ["0", "1", "2"]


@pytest.mark.parametrize("tower", TOWERS)
def test_a_step_trains_the_adapters_and_nothing_of_the_encoder(
    tower: str, tower_dirs: dict[str, Path]
) -> None:
    encoder = load_vision_encoder(tower_dirs[tower])
    weights = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    adapters, trainer = _trained(encoder, steps=1)
    assert all(p.grad is None and not p.requires_grad for p in encoder.parameters())
    assert all(torch.equal(p, weights[name]) for name, p in encoder.named_parameters())
    ups = [adapters.blocks[str(i)].up.weight for i in range(3)]
    assert all(float(up.grad.abs().sum()) > 0 for up in ups)  # type: ignore[union-attr]
    assert all(float(up.detach().abs().sum()) > 0 for up in ups)  # moved off zero
    assert all(p.grad is not None for p in trainer.discriminators.parameters())
    pixels = _pixels(7)
    with torch.no_grad():
        adapted = block_outputs(encoder, pixels)
        with adapters.disabled():
            frozen = block_outputs(encoder, pixels)
    assert not torch.equal(adapted[-1], frozen[-1])
    adapters.detach()
    with torch.no_grad():
        assert torch.equal(block_outputs(encoder, pixels)[-1], frozen[-1])


def test_distillation_loss_is_the_sum_over_layers_of_each_layers_mean_squared_error() -> None:
    adapted = [
        torch.tensor([[[1.0, 2.0], [3.0, 4.0]]], requires_grad=True),
        torch.tensor([[[0.0, 0.0], [0.0, 1.0]]], requires_grad=True),
    ]
    clean = [torch.zeros(1, 2, 2, requires_grad=True), torch.ones(1, 2, 2, requires_grad=True)]
    loss = distillation_loss(adapted, clean)
    # layer 0: (1 + 4 + 9 + 16) / 4 = 7.5; layer 1: (1 + 1 + 1 + 0) / 4 = 0.75
    assert float(loss.detach()) == pytest.approx(8.25)
    loss.backward()
    assert all(c.grad is None for c in clean)  # the clean features are a fixed target
    # d/da of mean((a - c)^2) = 2 (a - c) / 4
    assert torch.allclose(adapted[0].grad, torch.tensor([[[0.5, 1.0], [1.5, 2.0]]]))  # type: ignore[arg-type]


def test_discriminator_and_adversarial_losses_by_hand() -> None:
    zero, big = torch.zeros(3), torch.full((3,), 20.0)
    # non-saturating: -log sigmoid(real) - log(1 - sigmoid(fake)); at 0 both are log 2
    assert float(discriminator_loss(zero, zero)) == pytest.approx(2 * math.log(2))
    assert float(discriminator_loss(big, -big)) == pytest.approx(0.0, abs=1e-8)  # a perfect discriminator
    assert float(discriminator_loss(-big, big)) == pytest.approx(40.0, rel=1e-6)  # a fooled one
    real, fake = torch.tensor([0.3]), torch.tensor([-1.2])
    expected = -math.log(1 / (1 + math.exp(-0.3))) - math.log(1 - 1 / (1 + math.exp(1.2)))
    assert float(discriminator_loss(real, fake)) == pytest.approx(expected)
    assert float(adversarial_loss(fake)) == pytest.approx(-math.log(1 / (1 + math.exp(1.2))))
    # LSGAN: ((D_real - 1)^2 + D_fake^2) / 2 and (D_fake - 1)^2 / 2
    assert float(discriminator_loss(torch.ones(2), torch.zeros(2), "lsgan")) == 0.0
    assert float(discriminator_loss(torch.zeros(2), torch.ones(2), "lsgan")) == pytest.approx(1.0)
    assert float(adversarial_loss(torch.tensor([1.0, 0.0]), "lsgan")) == pytest.approx(0.25)


@pytest.mark.parametrize("objective", ["nonsaturating", "lsgan"])
def test_loss_signs_the_discriminator_gains_on_clean_tokens_the_adapters_on_their_own(objective: str) -> None:
    real = torch.tensor([0.2, -0.1], requires_grad=True)
    fake = torch.tensor([0.1, 0.4], requires_grad=True)
    discriminator_loss(real, fake, objective).backward()  # type: ignore[arg-type]
    assert (real.grad < 0).all() and (fake.grad > 0).all()  # type: ignore[operator]
    fake_for_adapters = torch.tensor([0.1, 0.4], requires_grad=True)
    adversarial_loss(fake_for_adapters, objective).backward()  # type: ignore[arg-type]
    assert (fake_for_adapters.grad < 0).all()  # type: ignore[operator]  # adapters push D up


def test_the_discriminator_learns_to_tell_shifted_tokens_apart(tower_dirs: dict[str, Path]) -> None:
    encoder = load_vision_encoder(tower_dirs["vit"])
    adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=2)).attach(encoder)
    torch.manual_seed(0)
    # The adapters barely move (lr 1e-6): the discriminator faces fixed clean vs corrupted tokens.
    trainer = MAATrainer(
        encoder,
        adapters,
        MAAObjective(adversarial_weight=1.0),
        learning_rate=1e-6,
        discriminator_learning_rate=3e-3,
    )
    clean = _pixels(0, count=8)
    corrupted = clean + 1.5
    accuracy = [trainer.step(clean, corrupted)["discriminator_accuracy"] for _ in range(60)]
    assert np.mean(accuracy[-10:]) > 0.9 > np.mean(accuracy[:3])


def test_euclidean_baseline_has_no_discriminator(tower_dirs: dict[str, Path]) -> None:
    encoder = load_vision_encoder(tower_dirs["clip"])
    adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=4)).attach(encoder)
    trainer = MAATrainer(encoder, adapters, MAAObjective(adversarial_weight=0.0))
    metrics = trainer.step(_pixels(0), _pixels(1))
    assert len(trainer.discriminators) == 0 and trainer.discriminator_optimizer is None
    assert set(metrics) == {"distill_loss", "loss"} and metrics["loss"] == metrics["distill_loss"]


@pytest.mark.parametrize("tower", TOWERS)
def test_saved_adapters_load_onto_a_fresh_encoder_exactly(
    tower: str, tower_dirs: dict[str, Path], tmp_path: Path
) -> None:
    encoder = load_vision_encoder(tower_dirs[tower])
    adapters, _ = _trained(encoder)
    pixels = _pixels(9)
    with torch.no_grad():
        expected = encoder(pixel_values=pixels).last_hidden_state
    save_adapters(adapters, tmp_path / "adapters", meta={"note": "test"})
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == [ADAPTER_CONFIG, ADAPTER_WEIGHTS]
    record = json.loads((tmp_path / "adapters" / ADAPTER_CONFIG).read_text())
    assert record["layers"] == [0, 1, 2] and record["rank"] == 4 and record["meta"] == {"note": "test"}
    fresh = load_vision_encoder(tower_dirs[tower])
    loaded = load_adapters(fresh, tmp_path / "adapters")
    with torch.no_grad():
        got = fresh(pixel_values=pixels).last_hidden_state
    assert torch.equal(got, expected)
    original, again = adapters.state_dict(), loaded.state_dict()
    assert original.keys() == again.keys() and all(torch.equal(original[k], again[k]) for k in original)
    assert loaded.config == adapters.config and loaded.encoder is fresh


def test_adapters_on_chosen_blocks_only(tower_dirs: dict[str, Path], tmp_path: Path) -> None:
    encoder = load_vision_encoder(tower_dirs["siglip"])
    config = AdapterConfig.for_encoder(encoder, rank=3, layers=[-1, 0])
    assert config.layers == (0, 2)
    adapters = Adapters(config).attach(encoder)
    assert sorted(adapters.blocks) == ["0", "2"]
    save_adapters(adapters, tmp_path)
    assert read_adapters(tmp_path).config == config


def test_pixel_values_scale_and_normalise() -> None:
    images = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    images[1] = 255
    pixels = pixel_values(images, 4)
    assert pixels.shape == (2, 3, 4, 4) and pixels.dtype == torch.float32
    assert float(pixels[0].max()) == -1.0 and float(pixels[1].min()) == 1.0  # (x - 0.5) / 0.5
    assert torch.equal(pixel_values(list(images), 4), pixels)


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_a_full_clip_or_siglip_directory_loads_as_its_vision_tower(kind: str, tmp_path: Path) -> None:
    import transformers

    vision = {"image_size": 16, "patch_size": 4, "hidden_size": 32, "num_hidden_layers": 2}
    vision |= {"num_attention_heads": 2, "intermediate_size": 64}
    text = {"vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    text |= {"intermediate_size": 64, "max_position_embeddings": 16, "bos_token_id": 1, "eos_token_id": 2}
    classes = {
        "clip": (transformers.CLIPConfig, transformers.CLIPModel),
        "siglip": (transformers.SiglipConfig, transformers.SiglipModel),
    }
    config_class, model_class = classes[kind]
    torch.manual_seed(0)
    full = model_class(config_class(text_config=text, vision_config=vision)).eval()
    full.save_pretrained(tmp_path)
    encoder = load_vision_encoder(tmp_path)
    assert type(encoder).__name__ == {"clip": "CLIPVisionModel", "siglip": "SiglipVisionModel"}[kind]
    with torch.no_grad():
        expected = full.vision_model(pixel_values=_pixels(3)).last_hidden_state
        assert torch.equal(encoder(pixel_values=_pixels(3)).last_hidden_state, expected)
    assert len(encoder_blocks(encoder)) == 2


def test_unsupported_models_and_directories_are_named(tower_dirs: dict[str, Path], tmp_path: Path) -> None:
    import transformers

    bert_dir = tmp_path / "bert"
    transformers.BertModel(
        transformers.BertConfig(
            vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    ).save_pretrained(bert_dir)
    with pytest.raises(UnsupportedEncoderError, match="holds a 'bert' model; MAA adapts vision encoders"):
        load_vision_encoder(bert_dir)
    with pytest.raises(AdapterError, match="is not a transformers model directory"):
        load_vision_encoder(tmp_path / "nothing")
    with pytest.raises(UnsupportedEncoderError, match="has no config with num_hidden_layers"):
        encoder_blocks(torch.nn.Linear(2, 2))

    class TwoStacks(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = transformers.PretrainedConfig(num_hidden_layers=2, hidden_size=4)
            self.a = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
            self.b = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])

    with pytest.raises(UnsupportedEncoderError, match=r"found 2 \(a, b\) lists of 2 transformer blocks"):
        encoder_blocks(TwoStacks())


def test_mismatched_sizes_and_shapes_are_named(tower_dirs: dict[str, Path], tmp_path: Path) -> None:
    encoder = load_vision_encoder(tower_dirs["vit"])
    with pytest.raises(AdapterError, match="images are 20x20 pixels but the encoder takes 16x16"):
        pixel_values(np.zeros((1, 20, 20, 3), np.uint8), 16)
    with pytest.raises(AdapterError, match="images of different sizes in one batch"):
        pixel_values([np.zeros((16, 16, 3), np.uint8), np.zeros((8, 8, 3), np.uint8)], 16)
    with pytest.raises(AdapterError, match="must be RGB uint8"):
        pixel_values(np.zeros((1, 16, 16, 3), np.float32), 16)
    with pytest.raises(AdapterError, match=r"pixel values of shape \(2, 3, 8, 8\) do not fit"):
        block_outputs(encoder, torch.zeros(2, 3, 8, 8))
    adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=2)).attach(encoder)
    trainer = MAATrainer(encoder, adapters, MAAObjective())
    with pytest.raises(AdapterError, match="differ in shape"):
        trainer.step(_pixels(0, count=2), _pixels(1, count=3))
    with pytest.raises(AdapterError, match="attached already"):
        adapters.attach(encoder)
    with pytest.raises(AdapterError, match=r"layer 0: adapted features \(1, 2\) and clean ones \(1, 3\)"):
        distillation_loss([torch.zeros(1, 2)], [torch.zeros(1, 3)])
    save_adapters(adapters, tmp_path / "vit")
    other = load_vision_encoder(tower_dirs["clip"])
    with pytest.raises(AdapterError, match="trained on a 'vit' encoder, not 'clip_vision_model'"):
        load_adapters(other, tmp_path / "vit")
    wider = AdapterConfig(hidden_size=48, num_layers=3, layers=(0,), rank=2)
    with pytest.raises(AdapterError, match="hidden size 48 with 3 blocks; this one has 32 and 3"):
        Adapters(wider).attach(other)


def test_broken_adapter_folders_are_named(tower_dirs: dict[str, Path], tmp_path: Path) -> None:
    encoder = load_vision_encoder(tower_dirs["vit"])
    with pytest.raises(AdapterError, match="holds no MAA adapters: adapters.json is missing"):
        load_adapters(encoder, tmp_path)
    adapters = Adapters(AdapterConfig.for_encoder(encoder, rank=2))
    save_adapters(adapters, tmp_path)
    config = tmp_path / ADAPTER_CONFIG
    record = json.loads(config.read_text())
    config.write_text(json.dumps({**record, "rank": 3}))
    with pytest.raises(AdapterError, match="does not fit the adapters adapters.json describes"):
        read_adapters(tmp_path)
    config.write_text(json.dumps({**record, "format": 99}))
    with pytest.raises(AdapterError, match="is not a format-1 adapters record"):
        read_adapters(tmp_path)
    config.write_text("{not json")
    with pytest.raises(AdapterError, match="is not JSON"):
        read_adapters(tmp_path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rank": 0}, "AdapterConfig.rank must be a whole number >= 1, got 0"),
        ({"layers": (3,)}, r"layers must be block indices in 0..2, got \[3\]"),
        ({"layers": (1, 0)}, "increasing and distinct"),
        ({"layers": ()}, "block indices"),
    ],
)
def test_bad_adapter_configs_are_named(fields: dict[str, object], message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        AdapterConfig(**{"hidden_size": 8, "num_layers": 3, "layers": (0,), "rank": 2, **fields})  # type: ignore[arg-type]


def test_bad_objectives_are_named() -> None:
    with pytest.raises(AdapterError, match="adversarial_weight must be a finite number >= 0, got -1"):
        MAAObjective(adversarial_weight=-1)
    with pytest.raises(AdapterError, match="unknown adversarial objective 'wgan'"):
        MAAObjective(objective="wgan")  # type: ignore[arg-type]
    with pytest.raises(AdapterError, match="unknown adversarial objective"):
        discriminator_loss(torch.zeros(1), torch.zeros(1), "hinge")  # type: ignore[arg-type]
