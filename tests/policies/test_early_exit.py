"""Early-exit networks: the cost of each exit against hand-counted MACs, exiting, the safe-exit
target, temperature scaling recovering a known temperature, and training that learns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodia.evals.early_exit import digits_splits
from embodia.policies.early_exit import (
    EarlyExitCNN,
    EarlyExitError,
    EarlyExitViT,
    TrainingSettings,
    confidences,
    early_exit_generate,
    exit_costs,
    exit_decisions,
    finetune_heads,
    fit_temperatures,
    head_logits,
    safe_to_exit,
    train_jointly,
)


def test_cnn_exit_costs_are_the_hand_counted_macs() -> None:
    model = EarlyExitCNN(2, (1, 4, 4), widths=(2, 3), pool_after=(0,))
    # block 0: a 3x3 conv, 1 -> 2 channels on 4x4: 2*4*4 outputs x 9 taps = 288; head 0: 2 x 2 = 4
    # block 1 (after a 2x2 pool): 3*2*2 outputs x 9 taps x 2 channels = 216; head 1: 2 x 3 = 6
    assert exit_costs(model) == [292, 292 + 222]


def test_vit_exit_costs_count_the_attention_products() -> None:
    model = EarlyExitViT(2, (1, 4, 4), patch=2, width=4, depth=2, num_heads=1, mlp_ratio=2)
    # embedding: 4 patches x 4 outputs x 4 inputs = 64
    # a block: qkv 4*12*4 = 192, scores and mix 2*4*4*4 = 128, out 4*4*4 = 64,
    # mlp 4*8*4 + 4*4*8 = 256 -> 640; a head: 2 x 4 = 8
    assert exit_costs(model) == [64 + 648, 64 + 2 * 648]


def test_every_head_answers_and_a_wrong_image_shape_is_named() -> None:
    model = EarlyExitCNN(5, (3, 8, 8))
    logits = model(torch.zeros(2, 3, 8, 8))
    assert [tuple(z.shape) for z in logits] == [(2, 5)] * 4
    with pytest.raises(EarlyExitError, match=r"images of shape \(3, 8, 8\).*got \(1, 8, 8\)"):
        model(torch.zeros(2, 1, 8, 8))
    with pytest.raises(EarlyExitError, match="multiple of the patch"):
        EarlyExitViT(5, (3, 10, 10), patch=4)
    with pytest.raises(EarlyExitError, match="at least two blocks"):
        EarlyExitCNN(5, (3, 8, 8), widths=(8,))


def test_a_sample_leaves_at_the_first_confident_head() -> None:
    confidence = np.array([[0.9, 0.2, 0.5], [0.3, 0.8, 0.4], [0.1, 0.1, 0.1]])
    assert exit_decisions(confidence, 0.5).tolist() == [0, 1, 0]
    assert exit_decisions(confidence, 0.85).tolist() == [0, 2, 2]
    # temperatures divide each head's logits
    logits = np.array([[[2.0, 0.0]], [[2.0, 0.0]]])
    hot = confidences(logits, [1.0, 2.0])
    assert hot[0, 0] == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert hot[1, 0] == pytest.approx(1 / (1 + np.exp(-1.0)))


def test_exiting_is_safe_when_right_or_when_no_later_head_is() -> None:
    correct = np.array(
        [
            # samples: later fixes it, always wrong, right early, right then wrong
            [0, 0, 1, 1],
            [0, 0, 0, 0],
            [1, 0, 0, 0],
        ],
        dtype=bool,
    )
    assert safe_to_exit(correct).astype(int).tolist() == [[0, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]]


def test_temperature_scaling_recovers_the_temperature_the_labels_were_drawn_at() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(20_000, 6))
    true_temperature = 2.5
    probabilities = np.exp(logits / true_temperature)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(6, p=p) for p in probabilities])
    (fitted,) = fit_temperatures(logits[None], labels)
    assert fitted == pytest.approx(true_temperature, rel=0.05)


@pytest.fixture(scope="module")
def trained_digits() -> tuple[EarlyExitCNN, object]:
    splits = digits_splits(0)
    torch.manual_seed(0)
    model = EarlyExitCNN(10, splits.image_shape)
    losses: list[float] = []
    train_jointly(model, *splits.train, TrainingSettings(steps=300), lambda step, v: losses.append(v["loss"]))
    # the sum over heads: the one-convolution first head stays weak
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) / 2
    return model, splits


def test_joint_training_learns_digits_and_deeper_heads_are_better(trained_digits: tuple) -> None:
    model, splits = trained_digits
    images, labels = splits.test
    accuracy = (head_logits(model, images).argmax(-1) == labels.numpy()).mean(axis=1)
    assert accuracy[-1] > 0.9  # ten classes: chance is 0.1
    assert accuracy[0] < accuracy[-1]


def test_head_finetuning_keeps_the_backbone_and_the_failure_term_predicts_failures(
    trained_digits: tuple,
) -> None:
    from embodia.evals.early_exit import eefp

    model, splits = trained_digits
    backbone = {k: v.clone() for k, v in model.blocks.state_dict().items()}
    test_images, test_labels = splits.test

    def failure_auroc() -> float:
        logits = head_logits(model, test_images)
        scores = eefp(confidences(logits), logits.argmax(-1) == test_labels.numpy())
        return float(np.mean([s for s in scores if s is not None]))

    plain = failure_auroc()
    settings = TrainingSettings(steps=150, learning_rate=1e-3)
    finetune_heads(model, *splits.train, settings, failure_weight=3.0)
    # on held-out digits, the retrained heads tell safe exits from unsafe ones better than the
    # heads as trained (0.836 -> 0.879 when written)
    assert failure_auroc() > plain + 0.02
    for name, value in model.blocks.state_dict().items():
        assert torch.equal(value, backbone[name]), name
    with pytest.raises(EarlyExitError, match="failure_weight"):
        finetune_heads(model, *splits.train, settings, failure_weight=-1.0)


def _tiny_lm(kind: str) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config_class, model_class = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[kind]
    torch.manual_seed(0)
    config = config_class(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        initializer_range=0.3,
    )
    return model_class(config).eval()


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_lm_early_exit_never_taken_is_plain_greedy_decoding(kind: str) -> None:
    model = _tiny_lm(kind)
    prompt = torch.tensor([[1, 5, 7, 9, 3]])
    greedy = model.generate(prompt, do_sample=False, max_new_tokens=12, min_new_tokens=12, pad_token_id=0)
    decoded = early_exit_generate(model, prompt, threshold=1.5, max_new_tokens=12)
    assert decoded.token_ids == greedy[0, 5:].tolist()
    assert decoded.layers_used == [4] * 12 and decoded.layer_share == 1.0
    # always confident: every token after the first leaves at the first allowed layer
    eager = early_exit_generate(model, prompt, threshold=0.0, min_layer=2, max_new_tokens=12)
    assert eager.layers_used == [4] + [2] * 11
    assert eager.layer_share == pytest.approx((4 + 2 * 11) / 48)


def test_skipped_layers_get_the_keys_and_values_their_attention_would_compute() -> None:
    import copy

    from embodia.policies.early_exit import _decoder_parts, _propagate

    model = _tiny_lm("qwen2")
    decoder, layers, rotary = _decoder_parts(model)
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True).cache
        hidden = torch.randn(1, 1, 32)
        positions = torch.tensor([[3]])
        cos_sin = decoder.rotary_emb(hidden, positions)
        ran, propagated = copy.deepcopy(cache), copy.deepcopy(cache)
        layers[2](hidden, position_ids=positions, cache=ran, use_cache=True, position_embeddings=cos_sin)
        _propagate(layers[2], 2, hidden, cos_sin, propagated, rotary)
    assert torch.allclose(ran.layers[2].keys, propagated.layers[2].keys, atol=1e-6)
    assert torch.allclose(ran.layers[2].values, propagated.layers[2].values, atol=1e-6)
    assert ran.layers[2].keys.shape[2] == 4


def test_lm_early_exit_names_what_it_cannot_drive() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=20, n_embd=16, n_layer=2, n_head=2, n_positions=32))
    with pytest.raises(EarlyExitError, match="GPT2LMHeadModel is not one"):
        early_exit_generate(gpt2, torch.tensor([[1, 2]]), threshold=0.9)
    with pytest.raises(EarlyExitError, match="min_layer must be in 1..4"):
        early_exit_generate(_tiny_lm("llama"), torch.tensor([[1, 2]]), threshold=0.9, min_layer=5)
