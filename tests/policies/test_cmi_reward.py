"""The CMI-style reward model: its mel filterbank and spectrogram against known tones, the
model's inputs and outputs, the Bradley-Terry loss by hand, and top-k filtering."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from embodia.evals.music_data import MusicSpec, render
from embodia.policies.rewards.cmi import (
    CMIConfig,
    CMIRewardModel,
    LogMel,
    RewardInputs,
    RewardModelError,
    mel_filterbank,
    pairwise_loss,
    top_k,
)


def test_mel_filters_are_unit_peaked_triangles_in_order() -> None:
    filters = mel_filterbank(16_000, 512, 40)
    assert filters.shape == (40, 257)
    assert np.all(filters >= 0) and np.all(filters.max(axis=1) <= 1.0) and np.all(filters.max(axis=1) > 0.5)
    peaks = filters.argmax(axis=1)
    assert np.all(np.diff(peaks) >= 0)


def test_a_tone_lights_the_mel_band_of_its_frequency() -> None:
    logmel = LogMel(16_000, n_fft=512, hop=256, n_mels=40)
    bins = np.linspace(0, 8000, 257)
    filters = mel_filterbank(16_000, 512, 40)
    for frequency in (220.0, 1000.0, 3000.0):
        t = np.arange(16_000) / 16_000
        mel = logmel(torch.as_tensor(np.sin(2 * np.pi * frequency * t), dtype=torch.float32)[None])
        band = int(mel[0].mean(dim=1).argmax())
        assert band == int(filters[:, int(np.argmin(np.abs(bins - frequency)))].argmax()), frequency
    with pytest.raises(RewardModelError, match="at least 512 samples"):
        logmel(torch.zeros(1, 100))


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> CMIRewardModel:
    from transformers import BertConfig, BertModel

    from embodia.policies.tiny_models import train_tokenizer

    tokenizer = train_tokenizer(Path(tmp_path_factory.mktemp("tokenizer")))
    torch.manual_seed(0)
    encoder = BertModel(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        )
    )
    return CMIRewardModel(encoder, tokenizer, CMIConfig(width=32, heads=2)).eval()


def _clip(seed: int, **factors: object) -> np.ndarray:
    return render(MusicSpec(notes=6, seed=seed, **factors))  # type: ignore[arg-type]


def test_the_model_scores_each_clip_on_both_dimensions_from_every_input(model: CMIRewardModel) -> None:
    clips = [_clip(0), _clip(1, tempo=150.0)]
    texts = ["a moderate melody in C major played on a soft sine synth"] * 2
    plain = RewardInputs(clips, texts, ["", ""], [None, None])
    with torch.no_grad():
        scores = model(plain)
        assert scores.shape == (2, 2) and torch.isfinite(scores).all()
        # the lyrics and the reference audio are read: they change the scores
        with_lyrics = model(RewardInputs(clips, texts, ["la mi so", ""], [None, None]))
        with_reference = model(RewardInputs(clips, texts, ["", ""], [None, _clip(5)]))
        # a batch's items do not leak into each other: each scores the same alone, the shorter
        # clip (padded in the batch) included
        alone = [model(RewardInputs(clips[i : i + 1], texts[:1], [""], [None]))[0] for i in range(2)]
    assert not torch.allclose(with_lyrics[0], scores[0]) and torch.allclose(
        with_lyrics[1], scores[1], atol=1e-5
    )
    assert torch.allclose(with_reference[0], scores[0], atol=1e-5) and not torch.allclose(
        with_reference[1], scores[1]
    )
    assert len(clips[0]) != len(clips[1])
    assert torch.allclose(alone[0], scores[0], atol=1e-5) and torch.allclose(alone[1], scores[1], atol=1e-5)
    with pytest.raises(RewardModelError, match="2 clips, 1 texts"):
        model(RewardInputs(clips, texts[:1], ["", ""], [None, None]))


def test_bradley_terry_loss_by_hand() -> None:
    a, b = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 0.0]])
    # a preferred on alignment (target 0.95 after smoothing 0.1), a tie on musicality (0.5)
    loss = pairwise_loss(a, b, [["a", "tie"]], smoothing=0.1)
    sig = 1 / (1 + np.exp(-2.0))
    first = -(0.95 * np.log(sig) + 0.05 * np.log(1 - sig))
    assert float(loss) == pytest.approx((first + np.log(2)) / 2, rel=1e-5)
    with pytest.raises(RewardModelError, match="a, b or tie; got 'both'"):
        pairwise_loss(a, b, [["a", "both"]])


def test_top_k_keeps_the_best_scored_candidates() -> None:
    kept = top_k(lambda i: f"take {i}", lambda takes: [len(t) + int(t[-1]) % 3 for t in takes], n=5, k=2)
    assert kept == [("take 2", 8.0), ("take 1", 7.0)]
    with pytest.raises(RewardModelError, match="k=6, n=5"):
        top_k(lambda i: i, lambda c: [0.0] * len(c), n=5, k=6)


def test_a_saved_model_loads_back_to_the_same_scores(model: CMIRewardModel, tmp_path: Path) -> None:
    import json

    from embodia.policies.rewards.cmi import CONFIG, load_reward_model, save_reward_model

    inputs = RewardInputs([_clip(2)], ["a fast melody in E major played on an organ"], ["la la"], [_clip(3)])
    folder = save_reward_model(model, tmp_path / "reward")
    loaded = load_reward_model(folder)
    with torch.no_grad():
        assert torch.allclose(loaded(inputs), model(inputs), atol=1e-6)
    saved = json.loads((folder / CONFIG).read_text())
    saved["config"]["width"] = 64
    (folder / CONFIG).write_text(json.dumps(saved))
    with pytest.raises(RewardModelError, match=r"reward.safetensors does not fit its config: tensor "):
        load_reward_model(folder)
    with pytest.raises(RewardModelError, match="has no reward.json"):
        load_reward_model(tmp_path)


def test_regression_training_fits_the_pairs_labels(model: CMIRewardModel) -> None:
    """With a regression weight, both clips' scores are pulled towards their labels: the
    squared error on the training pairs falls; pairs without labels cannot train it."""
    import copy

    model = copy.deepcopy(model)  # the module's model stays untrained for the other tests
    from embodia.evals.music_data import preference_pairs
    from embodia.evals.reward_bench import bench_pair
    from embodia.policies.rewards.cmi import RewardTraining, regression_loss, score_pairs, train_reward_model

    items = preference_pairs(3, 12)
    pairs = [bench_pair(item, Path("."), 16_000, f"pair {k}") for k, item in enumerate(items)]
    # the labels in the model's order: alignment first
    assert pairs[0].labels == (
        (items[0]["labels"]["a"]["alignment"], items[0]["labels"]["a"]["musicality"]),
        (items[0]["labels"]["b"]["alignment"], items[0]["labels"]["b"]["musicality"]),
    )
    targets = torch.tensor([p.labels for p in pairs], dtype=torch.float32)

    def error() -> float:
        with torch.no_grad():
            a, b = score_pairs(model, pairs)
        return float(regression_loss(torch.stack([a, b], dim=1), targets))

    before = error()
    train_reward_model(
        model, pairs, RewardTraining(steps=40, batch_pairs=6, learning_rate=1e-3, regression_weight=1.0)
    )
    assert error() < 0.5 * before, (error(), before)
    unlabelled = [replace(p, labels=None) for p in pairs]
    with pytest.raises(RewardModelError, match="needs pairs with labels"):
        train_reward_model(model, unlabelled, RewardTraining(steps=1, regression_weight=1.0))
    with pytest.raises(RewardModelError, match="regression_weight"):
        train_reward_model(model, pairs, RewardTraining(steps=1, regression_weight=-1.0))
