"""VLLMOfflinePolicy: the tiny chat LM run in-process by ``vllm.LLM`` (CPU build), checked
against transformers; plus the errors it gives where vLLM is missing or the input is bad."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_suite.checks import (
    chat,
    check_stop_sequences,
    prompt_ids,
    reference_logprobs,
)
from vllm_suite.server import skip_reason

from embodia.core.chat import (
    VLM_HINT,
    ContextOverflowError,
    ContextWindow,
    Policy,
    PolicyError,
    require_images,
)
from embodia.policies.spec import make_policy
from embodia.policies.vllm_offline import VLLMOfflinePolicy

SEED = 1234


@pytest.fixture(scope="module")
def offline(tiny_chat_model: Path) -> Iterator[VLLMOfflinePolicy]:
    policy = VLLMOfflinePolicy(tiny_chat_model, seed=SEED)
    yield policy
    policy.close()


def test_a_missing_vllm_is_a_clear_policy_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(PolicyError, match=r"needs vLLM, which is not importable.*\[vllm\] extra"):
        VLLMOfflinePolicy(tmp_path)


def test_a_missing_model_directory_is_a_clear_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"no model directory at .*nowhere"):
        VLLMOfflinePolicy(tmp_path / "nowhere")


@pytest.mark.vllm
@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
class TestOfflinePolicy:
    def test_is_a_policy_with_text_and_token_counts_of_the_tokenizer(
        self, offline: VLLMOfflinePolicy, tokenizer: Any
    ) -> None:
        assert isinstance(offline, Policy)
        messages = chat("Go to the kitchen and look for the table.")
        result = offline.complete(messages, max_tokens=20, temperature=1.0)
        assert result.prompt_tokens == len(prompt_ids(tokenizer, messages))
        completion_ids = result.extra["token_ids"]
        assert isinstance(completion_ids, list)
        assert result.finish_reason == "length"
        assert result.completion_tokens == len(completion_ids) == 20
        assert result.text == tokenizer.decode(completion_ids, skip_special_tokens=True)
        assert result.text.strip()
        assert result.tokens == ()  # logprobs were not asked for
        assert 0 < result.latency_s < 30
        again = offline.complete(messages, max_tokens=20, temperature=1.0)
        assert again.text == result.text  # the per-request seed makes sampling reproducible

    @pytest.mark.parametrize("temperature", [0.0, 1.0])
    def test_logprobs_match_transformers_and_top_logprobs_are_the_best_first(
        self, offline: VLLMOfflinePolicy, tokenizer: Any, reference_model: Any, temperature: float
    ) -> None:
        top_k = 4
        messages = chat("The red sofa is in the")
        result = offline.complete(
            messages, max_tokens=10, temperature=temperature, logprobs=True, top_logprobs=top_k
        )
        completion_ids = result.extra["token_ids"]
        assert isinstance(completion_ids, list)
        assert len(result.tokens) == result.completion_tokens == len(completion_ids) == 10
        expected = reference_logprobs(reference_model, prompt_ids(tokenizer, messages), completion_ids)
        for position, (token, token_id) in enumerate(zip(result.tokens, completion_ids, strict=True)):
            assert token.logprob == pytest.approx(float(expected[position, token_id]), abs=2e-3)
            best = expected[position].topk(top_k)
            assert [v for _, v in token.top] == pytest.approx([float(v) for v in best.values], abs=2e-3)
            if temperature == 0.0:
                assert token_id == int(best.indices[0])
                assert token.top[0] == (token.token, pytest.approx(token.logprob, abs=1e-5))

    def test_logprobs_without_alternatives(self, offline: VLLMOfflinePolicy) -> None:
        result = offline.complete(chat("Answer: 3"), max_tokens=5, logprobs=True)
        assert len(result.tokens) == 5
        assert all(t.top == () and t.logprob <= 0 for t in result.tokens)

    def test_stop_sequences_end_the_reply_before_the_stop_string(self, offline: VLLMOfflinePolicy) -> None:
        check_stop_sequences(offline)

    def test_a_text_only_model_is_refused_where_images_are_needed(self, offline: VLLMOfflinePolicy) -> None:
        with pytest.raises(PolicyError) as refused:
            require_images(offline, "the dfs explorer")
        assert str(refused.value) == (
            f"{offline.name} does not take images (vLLM loads {offline.path} (Qwen2ForCausalLM) "
            f"as a text-only model), but the dfs explorer works from pictures: use {VLM_HINT}"
        )

    def test_the_engine_says_its_context_and_counts_prompts(
        self, offline: VLLMOfflinePolicy, tokenizer: Any
    ) -> None:
        assert offline.context_window() == ContextWindow(
            512, str(offline.path), remedy="load it with a larger max_model_len (vllm:DIR?max_model_len=N)"
        )
        messages = chat("Go to the kitchen and look for the table.")
        assert offline.count_tokens(messages) == len(prompt_ids(tokenizer, messages))
        # a budget past the context: vLLM gives the reply the room the prompt leaves
        reply = offline.complete(messages, max_tokens=1500)
        assert reply.prompt_tokens + reply.completion_tokens <= 512

    def test_bad_requests_are_policy_errors(self, offline: VLLMOfflinePolicy) -> None:
        with pytest.raises(PolicyError, match="max_tokens must be at least 1"):
            offline.complete(chat("hi"), max_tokens=0)
        with pytest.raises(PolicyError, match="top_logprobs 21 exceeds this policy's max_logprobs 20"):
            offline.complete(chat("hi"), logprobs=True, top_logprobs=21)
        too_long = chat("kitchen " * 600)  # longer than max_model_len 512
        with pytest.raises(ContextOverflowError) as caught:
            offline.complete(too_long, max_tokens=8)
        assert caught.value.window == offline.context_window()
        assert caught.value.prompt_tokens == offline.count_tokens(too_long) > 512
        assert str(caught.value).endswith(f"which fills {offline.path}'s context of 512 tokens")
        # the engine is still usable after a rejected request
        assert offline.complete(chat("hi"), max_tokens=3).completion_tokens == 3


@pytest.mark.vllm
@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_a_vllm_spec_builds_the_offline_policy(
    tiny_chat_model: Path, offline: VLLMOfflinePolicy, caplog: pytest.LogCaptureFixture
) -> None:
    spec = f"vllm:{tiny_chat_model}?seed={SEED}&max_logprobs=5"
    with caplog.at_level("WARNING", logger="embodia.policies.vllm_offline"):
        from_spec = make_policy(spec)
    try:
        assert isinstance(from_spec, VLLMOfflinePolicy)
        # The tiny model's weights are random: the name, and so every record, says it.
        assert from_spec.name == f"{spec} (random weights)"
        warned = [r.getMessage() for r in caplog.records if r.name == "embodia.policies.vllm_offline"]
        assert warned == [from_spec.random_weights]
        assert f"{tiny_chat_model} holds random weights (built by `embodia models tiny chat`" in warned[0]
        messages = chat("Go to the garage.")
        # same model, same seed: the same sample as the fixture's policy
        expected = offline.complete(messages, max_tokens=12, temperature=1.0)
        assert from_spec.complete(messages, max_tokens=12, temperature=1.0).text == expected.text
        with pytest.raises(PolicyError, match="exceeds this policy's max_logprobs 5"):
            from_spec.complete(messages, logprobs=True, top_logprobs=6)
    finally:
        from_spec.close()


# Runs last in this file: it closes the module's policy.
@pytest.mark.vllm
@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_a_closed_policy_refuses_calls(offline: VLLMOfflinePolicy) -> None:
    offline.close()
    offline.close()  # idempotent
    with pytest.raises(PolicyError, match="was closed"):
        offline.complete(chat("hi"), max_tokens=3)
