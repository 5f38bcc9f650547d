"""TrainablePolicy on the tiny random-weight models: sampling logprobs, scores, LoRA, save."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from embodia.core.chat import PolicyError
from embodia.core.random_weights import TRAINED_BY, random_weights_note, read_marker
from embodia.errors import EmbodiaError
from embodia.policies.hf import HFPolicy
from embodia.policies.rollouts import ChatPrompt
from embodia.policies.tiny_models import build_tiny_chat_lm
from embodia.policies.trainable import LoraSettings, TrainablePolicy

PROMPTS = [
    ChatPrompt(({"role": "user", "content": "Which waypoint leads to the kitchen? Answer with a number."},)),
    ChatPrompt(
        (
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Go to the bedroom."},
        )
    ),
]
# Batched generation (left padding, a KV cache) and the recompute (right padding, one forward)
# add the same float32 numbers in different orders: up to about 2e-5 apart on these logits
# (measured), while a wrong token, position or temperature is off by far more than 1e-4.
LOGP_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def policy(tiny_chat_lm_dir: Path) -> TrainablePolicy:
    return TrainablePolicy(tiny_chat_lm_dir, seed=0)


def _image(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (40, 60, 3), dtype=np.uint8)


def _recomputed(policy: TrainablePolicy, samples: list, temperature: float, images=None) -> torch.Tensor:
    scores = policy.completion_logps(
        [s.prompt_ids for s in samples],
        [s.completion_ids for s in samples],
        temperature=temperature,
        images=images,
    )
    return scores


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampling_logprobs_equal_the_recomputed_ones(policy: TrainablePolicy, temperature: float) -> None:
    policy.manual_seed(3)
    samples = policy.sample(PROMPTS, n=3, max_new_tokens=12, temperature=temperature)
    assert [s.prompt_index for s in samples] == [0, 0, 0, 1, 1, 1]
    assert len({len(s.prompt_ids) for s in samples}) == 2  # two prompt lengths: padding was needed
    assert len({tuple(s.completion_ids) for s in samples}) > 1  # sampling, not one greedy answer
    with torch.no_grad():
        scores = _recomputed(policy, samples, temperature)
    for row, sample in enumerate(samples):
        assert len(sample.logprobs) == len(sample.completion_ids) == int(scores.mask[row].sum())
        recomputed = scores.logps[row, : len(sample.completion_ids)]
        assert torch.allclose(recomputed, torch.tensor(sample.logprobs), atol=LOGP_TOLERANCE)
        assert sample.finish_reason == (
            "stop" if sample.completion_ids[-1] in policy.eos_token_ids else "length"
        )
        if sample.finish_reason == "length":
            assert len(sample.completion_ids) == 12
    # Padding is masked out: zero scores beyond each completion.
    assert float((scores.logps * (1 - scores.mask)).abs().sum()) == 0.0
    entropies = scores.entropies[scores.mask.bool()]
    assert bool((entropies > 0).all()) and bool((entropies <= np.log(len(policy.tokenizer)) + 1e-4).all())


def test_greedy_sampling_reports_the_models_own_distribution(policy: TrainablePolicy) -> None:
    samples = policy.sample(PROMPTS[:1], n=2, max_new_tokens=6, temperature=0.0)
    assert samples[0].completion_ids == samples[1].completion_ids
    with torch.no_grad():
        scores = _recomputed(policy, samples[:1], 1.0)
    assert torch.allclose(scores.logps[0], torch.tensor(samples[0].logprobs), atol=LOGP_TOLERANCE)


def test_seeded_sampling_is_reproducible(policy: TrainablePolicy) -> None:
    policy.manual_seed(11)
    first = policy.sample(PROMPTS, n=2, max_new_tokens=10)
    policy.manual_seed(11)
    again = policy.sample(PROMPTS, n=2, max_new_tokens=10)
    other = policy.sample(PROMPTS, n=2, max_new_tokens=10)  # the generator moved on
    assert [s.completion_ids for s in first] == [s.completion_ids for s in again]
    assert [s.logprobs for s in first] == [s.logprobs for s in again]
    assert [s.completion_ids for s in first] != [s.completion_ids for s in other]
    generator = torch.Generator().manual_seed(11)
    assert [
        s.completion_ids for s in policy.sample(PROMPTS, n=2, max_new_tokens=10, generator=generator)
    ] == [s.completion_ids for s in first]


def test_the_models_repetition_penalty_does_not_reshape_sampling(
    tiny_chat_lm_dir: Path, tmp_path: Path
) -> None:
    model_dir = tmp_path / "penalised"
    shutil.copytree(tiny_chat_lm_dir, model_dir)
    config_path = model_dir / "generation_config.json"
    config = json.loads(config_path.read_text())
    config["repetition_penalty"] = 3.0
    config_path.write_text(json.dumps(config))
    penalised = TrainablePolicy(model_dir)
    assert penalised.model.generation_config.repetition_penalty == 3.0
    samples = penalised.sample(PROMPTS, n=2, max_new_tokens=12)
    with torch.no_grad():
        scores = _recomputed(penalised, samples, 1.0)
    for row, sample in enumerate(samples):
        assert torch.allclose(
            scores.logps[row, : len(sample.logprobs)], torch.tensor(sample.logprobs), atol=LOGP_TOLERANCE
        )
    assert penalised.model.generation_config.repetition_penalty == 3.0  # restored for complete()


def test_gradients_flow_through_completion_logps(policy: TrainablePolicy) -> None:
    assert policy.model.training
    samples = policy.sample(PROMPTS, n=1, max_new_tokens=6)
    assert policy.model.training  # sampling ran in eval mode and switched back
    policy.model.zero_grad()
    scores = _recomputed(policy, samples, 1.0)
    loss = -(scores.logps.sum() / scores.mask.sum())
    loss.backward()
    grads = [p.grad for p in policy.trainable_parameters()]
    assert len(grads) == len(list(policy.model.parameters()))  # no LoRA: every weight trains
    assert all(g is not None for g in grads)
    assert sum(float(g.abs().sum()) for g in grads if g is not None) > 0
    policy.model.zero_grad()


def test_lora_trains_only_the_adapters_and_saves_merged(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    lora = TrainablePolicy(
        tiny_chat_lm_dir, lora=LoraSettings(r=4, alpha=8, target_modules=("q_proj", "v_proj"))
    )
    names = {name for name, p in lora.model.named_parameters() if p.requires_grad}
    assert names and all("lora_" in name for name in names)
    assert len(names) == 2 * 2 * 2  # 2 layers x (q, v) x (A, B)
    frozen_before = {n: p.detach().clone() for n, p in lora.model.named_parameters() if not p.requires_grad}
    optimiser = torch.optim.SGD(lora.trainable_parameters(), lr=0.5)
    samples = lora.sample(PROMPTS, n=1, max_new_tokens=6)
    for _ in range(2):  # B starts at zero: the second step moves the logits
        optimiser.zero_grad()
        scores = _recomputed(lora, samples, 1.0)
        (-(scores.logps.sum())).backward()
        assert all(p.grad is None for n, p in lora.model.named_parameters() if not p.requires_grad)
        optimiser.step()
    for name, before in frozen_before.items():
        assert torch.equal(dict(lora.model.named_parameters())[name], before)

    saved = lora.save(tmp_path / "merged")
    assert lora.model.training and any("lora_" in n for n, _ in lora.model.named_parameters())  # untouched
    reloaded = TrainablePolicy(saved)
    assert not any("lora" in n for n, _ in reloaded.model.named_parameters())
    ids = torch.tensor([samples[0].prompt_ids + samples[0].completion_ids])
    lora.model.eval()
    with torch.no_grad():
        trained = lora.model(input_ids=ids).logits
        merged = reloaded.model(input_ids=ids).logits
        base = HFPolicy(tiny_chat_lm_dir).model(input_ids=ids).logits
    lora.model.train()
    # W + BA merged in float32 rounds differently from x W + x B A: about 1e-5 of logits near 3,
    # depending on the BLAS kernels the machine picks; the training moved them by far more
    assert (trained - merged).abs().max() < 1e-4
    assert (trained - base).abs().max() > 1e-3  # the training changed something


def test_save_then_load_gives_identical_logits_and_a_chat_policy(
    policy: TrainablePolicy, tmp_path: Path
) -> None:
    saved = policy.save(tmp_path / "final")
    assert read_marker(saved) == read_marker(policy.path)  # still random weights, and says so
    assert not (saved / "README.md").exists()
    loaded = HFPolicy(saved)
    assert loaded.name.endswith("(random weights)")
    ids = torch.tensor([policy.count_tokens(list(PROMPTS[0].messages)) * [5]])
    with torch.no_grad():
        assert torch.equal(policy.model(input_ids=ids).logits, loaded.model(input_ids=ids).logits)
    reply = policy.complete(list(PROMPTS[0].messages), max_tokens=5)
    assert reply.text == loaded.complete(list(PROMPTS[0].messages), max_tokens=5).text


def test_vlm_samples_and_scores_with_images(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    vlm = TrainablePolicy(tiny_vlm_dir, seed=1)
    prompts = [
        ChatPrompt(({"role": "user", "content": "What is in the picture?"},), (_image(0),)),
        ChatPrompt(({"role": "user", "content": "Where is the door? Answer: 3"},), (_image(1),)),
    ]
    samples = vlm.sample(prompts, n=2, max_new_tokens=8)
    image_token = vlm.model.config.image_token_id
    assert all(s.prompt_ids.count(image_token) == 16 for s in samples)
    with torch.no_grad():
        scores = _recomputed(vlm, samples, 1.0, images=[p.images for p in prompts for _ in range(2)])
    for row, sample in enumerate(samples):
        assert torch.allclose(
            scores.logps[row, : len(sample.logprobs)], torch.tensor(sample.logprobs), atol=LOGP_TOLERANCE
        )
    saved = vlm.save(tmp_path / "vlm")
    assert HFPolicy(saved).accepts_images


def test_bad_input_is_a_policy_error(policy: TrainablePolicy, tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "no-tokenizer"
    bare.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(tiny_chat_lm_dir / name, bare / name)
    with pytest.raises(PolicyError, match="has no tokenizer"):
        TrainablePolicy(bare)
    with pytest.raises(PolicyError, match="text-only model"):
        policy.sample([ChatPrompt(PROMPTS[0].messages, (_image(0),))])
    with pytest.raises(PolicyError, match="n .* at least 1"):
        policy.sample(PROMPTS, n=0)
    with pytest.raises(PolicyError, match="one completion per prompt"):
        policy.completion_logps([[1, 2]], [[3], [4]])
    with pytest.raises(PolicyError, match="LoRA rank"):
        LoraSettings(r=0)
    with pytest.raises(PolicyError, match="cannot add LoRA"):
        TrainablePolicy(tiny_chat_lm_dir, lora=LoraSettings(target_modules=("no_such_layer",)))


def test_a_saved_model_folder_is_whole_marks_its_recipes_and_refuses_other_folders(
    policy: TrainablePolicy, tmp_path: Path
) -> None:
    first = policy.save(tmp_path / "sft", trained_by="sft", card="# SFT\n")
    assert read_marker(first)[TRAINED_BY] == ["sft"]
    assert (first / "README.md").read_text() == "# SFT\n"
    again = TrainablePolicy(first).save(tmp_path / "grpo", trained_by="grpo")
    assert read_marker(again)[TRAINED_BY] == ["sft", "grpo"]
    note = random_weights_note(again)
    assert note is not None and "then trained by sft then grpo" in note
    # saving over a finished save replaces it whole; no staging folder is left behind
    (first / "stale.bin").write_bytes(b"x")
    policy.save(first, trained_by="sft")
    assert not (first / "stale.bin").exists() and read_marker(first)[TRAINED_BY] == ["sft"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grpo", "sft"]
    # nor is a trained copy ever taken for the tiny build it came from
    with pytest.raises(EmbodiaError, match=r"holds a model trained from a tiny build \(sft\)"):
        build_tiny_chat_lm(first)
    # a folder that is not a model folder is never replaced
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me")
    with pytest.raises(PolicyError, match="exists and is not a model folder"):
        policy.save(other)
    assert (other / "todo.txt").read_text() == "keep me"
