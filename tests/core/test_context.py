"""Context windows: what each backend says its model holds, prompt token counts, and overflows
as :class:`ContextOverflowError` that name the option to change."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from context_models import set_context, tiny_chat, tiny_vlm
from transformers import AutoTokenizer, GPT2Config, LlavaConfig, PretrainedConfig, Qwen2Config

from embodia.core.chat import (
    ContextOverflowError,
    ContextWindow,
    Message,
    check_output_budget,
    context_window,
    count_prompt_tokens,
)
from embodia.policies import ScriptedPolicy
from embodia.policies.hf import HFPolicy, model_context_length
from embodia.policies.openai_compat import OpenAICompatPolicy, overflow_from_message

URL = "http://127.0.0.1:8000/v1"
CHAT: list[Message] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Which waypoint leads to the kitchen? Answer with a number."},
]


@pytest.fixture(scope="module")
def chat_1024(tmp_path_factory: pytest.TempPathFactory) -> HFPolicy:
    return HFPolicy(tiny_chat(tmp_path_factory.mktemp("chat-1024"), 1024))


@pytest.fixture(scope="module")
def vlm_1024(tmp_path_factory: pytest.TempPathFactory) -> HFPolicy:
    return HFPolicy(tiny_vlm(tmp_path_factory.mktemp("vlm-1024"), 1024))


@pytest.mark.parametrize(
    ("message", "limit", "prompt"),
    [
        # vLLM 0.32's server, a budget over the whole context
        (
            "max_completion_tokens=1500 cannot be greater than max_model_len=512. Please request fewer "
            "output tokens. (parameter=max_completion_tokens, value=1500)",
            512,
            None,
        ),
        # vLLM 0.32 (server and offline), a prompt over the context
        (
            "This model's maximum context length is 512 tokens. However, your prompt contains at least 513 "
            "input tokens, which exceeds this limit even without any output tokens.",
            512,
            513,
        ),
        # OpenAI, older vLLM
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5600 tokens "
            "(100 in the messages, 5500 in the completion).",
            4096,
            100,
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 1500. This model's maximum context "
            "length is 512 tokens and your request has 11 input tokens (1500 > 512 - 11).",
            512,
            11,
        ),
        ("The decoder prompt (length 600) is longer than the maximum model length of 512.", 512, 600),
    ],
)
def test_the_context_messages_of_vllm_and_openai_are_read(
    message: str, limit: int, prompt: int | None
) -> None:
    error = overflow_from_message(message, model="tiny-chat", at=URL, max_tokens=1500)
    assert isinstance(error, ContextOverflowError)
    assert (error.window.tokens, error.prompt_tokens, error.max_tokens) == (limit, prompt, 1500)
    assert error.window.describe() == f"tiny-chat's context of {limit} tokens at {URL}"
    assert "--max-model-len" in error.window.remedy


def test_other_rejections_are_not_overflows() -> None:
    for message in ("tiny-chat is not a multimodal model", "top_logprobs must be <= 20", ""):
        assert overflow_from_message(message, model="m", at=URL, max_tokens=10) is None


def test_an_overflow_names_the_option_to_change() -> None:
    window = ContextWindow(512, "tiny-chat", URL, "serve the model with a larger --max-model-len")
    budget = ContextOverflowError(window, prompt_tokens=None, max_tokens=1500)
    assert (
        str(budget)
        == f"a reply of up to 1500 tokens leaves no room in tiny-chat's context of 512 tokens at {URL}"
    )
    named = budget.naming("dsr-1", output_flag="--tokens", prompt_advice="choose shorter instances")
    assert str(named) == (
        f"dsr-1: --tokens 1500 leaves no room in tiny-chat's context of 512 tokens at {URL}: "
        "lower --tokens or serve the model with a larger --max-model-len"
    )
    assert (named.prompt_tokens, named.max_tokens, named.window) == (None, 1500, window)
    both = ContextOverflowError(window, prompt_tokens=300, max_tokens=400)
    assert str(both.naming("item 2", output_flag="--max-tokens", prompt_advice="x")) == (
        f"item 2: a prompt of 300 tokens and --max-tokens 400 do not fit tiny-chat's context of 512 tokens "
        f"at {URL}: lower --max-tokens or serve the model with a larger --max-model-len"
    )
    prompt = ContextOverflowError(window, prompt_tokens=530, max_tokens=12)
    # the reply budget is not what to change when the prompt alone fills the context
    assert str(prompt.naming("second 40", output_flag="--token-cap", prompt_advice="lower --budget")) == (
        f"second 40: the prompt has 530 tokens, which fills tiny-chat's context of 512 tokens at {URL}: "
        "lower --budget or serve the model with a larger --max-model-len"
    )


def test_context_length_from_the_config_or_the_tokenizer(tmp_path: Path) -> None:
    assert model_context_length(Qwen2Config(max_position_embeddings=2048)) == 2048
    vlm = LlavaConfig(text_config={"model_type": "qwen2", "max_position_embeddings": 8192})
    assert model_context_length(vlm) == 8192
    assert model_context_length(GPT2Config(n_positions=777)) == 777
    no_positions = PretrainedConfig()  # a config that names no length
    tokenizer_dir = tiny_chat(tmp_path / "chat", 640)
    assert model_context_length(no_positions, AutoTokenizer.from_pretrained(tokenizer_dir)) == 640
    unbounded = AutoTokenizer.from_pretrained(tokenizer_dir, model_max_length=int(1e30))
    assert model_context_length(no_positions, unbounded) is None


def test_an_hf_model_knows_its_context_and_counts_what_it_is_fed(
    chat_1024: HFPolicy, vlm_1024: HFPolicy
) -> None:
    assert context_window(chat_1024) == ContextWindow(1024, str(chat_1024.path))
    counted = count_prompt_tokens(chat_1024, CHAT)
    assert counted == chat_1024.complete(CHAT, max_tokens=2).prompt_tokens
    frames = [np.full((48, 64, 3), 40 * i, np.uint8) for i in range(2)]
    with_frames = count_prompt_tokens(vlm_1024, CHAT, frames)
    assert with_frames == vlm_1024.complete(CHAT, frames, max_tokens=2).prompt_tokens
    # the tiny VLM: 16 image tokens and its two vision markers per frame
    assert with_frames - count_prompt_tokens(vlm_1024, CHAT) == 2 * 18


def test_an_hf_prompt_past_the_context_is_refused_before_generating(tmp_path: Path) -> None:
    short = HFPolicy(tiny_chat(tmp_path / "chat", 64))
    long_chat: list[Message] = [
        {"role": "user", "content": "Go to the kitchen and look for the table. " * 12}
    ]
    prompt = short.count_tokens(long_chat)
    assert prompt > 64
    with pytest.raises(ContextOverflowError) as caught:
        short.complete(long_chat, max_tokens=5)
    error = caught.value
    assert (error.prompt_tokens, error.max_tokens, error.window.tokens) == (prompt, 5, 64)
    assert (
        str(error)
        == f"the prompt has {prompt} tokens, which fills {tmp_path / 'chat'}'s context of 64 tokens"
    )
    # a prompt that fits gets the reply the room allows
    fits = short.complete(CHAT[-1:], max_tokens=500)
    assert fits.prompt_tokens + fits.completion_tokens <= 64


def test_a_reply_budget_at_the_context_is_refused_at_start(chat_1024: HFPolicy) -> None:
    with pytest.raises(ContextOverflowError) as caught:
        check_output_budget(chat_1024, 1500, "--tokens")
    assert str(caught.value) == (
        f"--tokens 1500 leaves no room in {chat_1024.path}'s context of 1024 tokens: lower --tokens or use a "
        "model with a longer context"
    )
    with pytest.raises(
        ContextOverflowError, match=r"^--reasoner: a reply of up to 1024 tokens leaves no room"
    ):
        check_output_budget(chat_1024, 1024, None, what="--reasoner")
    assert check_output_budget(chat_1024, 1023, "--tokens") == context_window(chat_1024)
    scripted = ScriptedPolicy(["hi"])
    assert check_output_budget(scripted, 10**6, "--tokens") is None
    assert count_prompt_tokens(scripted, CHAT) is None


class _Server:
    """A local OpenAI-compatible server that is not vLLM: no ``max_model_len`` in its model
    list, no ``/tokenize``; it counts the requests it gets."""

    def __init__(self, models: list[dict[str, Any]], tokenize: dict[str, Any] | None) -> None:
        self.hits: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                owner.hits.append(f"GET {self.path}")
                self._reply(200, {"object": "list", "data": models})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                owner.hits.append(f"POST {self.path}")
                if self.path == "/tokenize" and tokenize is not None:
                    self._reply(200, tokenize)
                else:
                    self._reply(404, {"detail": "Not Found"})

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def plain_server() -> Iterator[_Server]:
    server = _Server([{"id": "m", "object": "model", "created": 0, "owned_by": "me"}], None)
    yield server
    server.close()


def test_a_server_that_says_nothing_leaves_the_context_unknown(plain_server: _Server) -> None:
    policy = OpenAICompatPolicy(plain_server.url, "m", timeout_s=5, max_retries=0)
    assert policy.context_window() is None
    assert policy.count_tokens(CHAT) is None
    assert policy.count_tokens(CHAT) is None  # asked once: the endpoint is known to be missing
    assert policy.context_window() is None
    assert plain_server.hits == ["GET /v1/models", "POST /tokenize"]


def test_a_vllm_like_server_gives_its_max_model_len_and_counts() -> None:
    models = [{"id": "m", "object": "model", "created": 0, "owned_by": "vllm", "max_model_len": 4096}]
    server = _Server(models, {"count": 37, "max_model_len": 4096, "tokens": list(range(37))})
    try:
        policy = OpenAICompatPolicy(server.url, "m", timeout_s=5, max_retries=0)
        assert policy.context_window() == ContextWindow(
            4096, "m", server.url, "serve the model with a larger --max-model-len"
        )
        assert policy.count_tokens(CHAT) == 37
    finally:
        server.close()


def test_ask_raises_an_overflow_of_the_first_attempt_and_falls_back_on_a_reask_that_outgrows(
    tmp_path: Path,
) -> None:
    from embodia.core.parsing import ParseFailure, ask

    def never(text: str) -> ParseFailure:
        return ParseFailure("not a number")

    model = tiny_chat(tmp_path / "chat", 1024)
    prompt = HFPolicy(model).count_tokens(CHAT)
    set_context(model, prompt - 1)
    with pytest.raises(ContextOverflowError):
        ask(HFPolicy(model), CHAT, parse=never, default=0, max_tokens=8)
    # The question fits with 20 tokens to spare; the model's reply and the re-ask do not.
    set_context(model, prompt + 20)
    decision = ask(HFPolicy(model), CHAT, parse=never, default=7, max_retries=3, max_tokens=8)
    assert decision.fallback and decision.value == 7
    first, second = decision.attempts  # no third: a longer conversation cannot fit either
    assert first.failure == "not a number"
    assert second.failure is not None and second.failure.startswith("policy error: the prompt has ")
