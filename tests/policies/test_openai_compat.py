"""The OpenAI-compatible backend without a server: request building, response parsing, errors.

A real vLLM server is exercised by the vLLM integration suite; here the pure functions get
vLLM-shaped data, and the down-server paths run against real closed / silent local sockets.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import numpy as np
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from PIL import Image

from embodia.core.chat import Message, Policy, PolicyError, SamplingParams, TokenLogprob
from embodia.policies.openai_compat import (
    OpenAICompatPolicy,
    build_chat_request,
    collect_stream,
    completion_from_response,
    parse_chat_body,
    policy_error_from_openai,
)

MESSAGES: list[Message] = [
    {"role": "system", "content": "You pick waypoints."},
    {"role": "user", "content": "Which one?"},
    {"role": "assistant", "content": "Answer: seven"},
    {"role": "user", "content": "Reply with a number 0-5 only."},
]


def _decode_data_url(url: str) -> np.ndarray:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :]))).convert("RGB"))


def test_images_become_png_parts_of_the_last_user_message() -> None:
    rng = np.random.default_rng(0)
    panorama = rng.integers(0, 256, size=(16, 32, 3), dtype=np.uint8)
    top_down = rng.integers(0, 256, size=(9, 9, 3), dtype=np.uint8)
    params = SamplingParams(max_tokens=12, temperature=0.3)
    request = build_chat_request(MESSAGES, [panorama, top_down], model="tiny", params=params)
    wire = request["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "user"]
    assert wire[1]["content"] == "Which one?"  # earlier user turns stay plain strings
    parts = wire[3]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    assert parts[0]["text"] == "Reply with a number 0-5 only."
    np.testing.assert_array_equal(_decode_data_url(parts[1]["image_url"]["url"]), panorama)
    np.testing.assert_array_equal(_decode_data_url(parts[2]["image_url"]["url"]), top_down)
    assert request["model"] == "tiny"
    assert request["max_completion_tokens"] == 12 and "max_tokens" not in request
    assert request["temperature"] == 0.3
    # the caller's messages are not modified
    assert MESSAGES[3]["content"] == "Reply with a number 0-5 only."


def test_optional_fields_only_when_asked() -> None:
    plain = build_chat_request(MESSAGES, model="m")
    assert set(plain) == {"model", "messages", "max_completion_tokens", "temperature"}
    assert all(isinstance(m["content"], str) for m in plain["messages"])
    asked = build_chat_request(
        MESSAGES,
        model="m",
        params=SamplingParams(logprobs=True, top_logprobs=5, stop=["\n", "###"]),
        extra_body={"top_k": 20, "structured_outputs": {"choice": ["SPEAK", "SILENT"]}},
    )
    assert asked["logprobs"] is True and asked["top_logprobs"] == 5
    assert asked["stop"] == ["\n", "###"]
    assert asked["extra_body"] == {"top_k": 20, "structured_outputs": {"choice": ["SPEAK", "SILENT"]}}
    only_logprobs = build_chat_request(MESSAGES, model="m", params=SamplingParams(logprobs=True))
    assert only_logprobs["logprobs"] is True and "top_logprobs" not in only_logprobs
    implied = build_chat_request(MESSAGES, model="m", params=SamplingParams(top_logprobs=3))
    assert implied["logprobs"] is True and implied["top_logprobs"] == 3
    # checked before any server is asked (nothing listens on port 9)
    policy = OpenAICompatPolicy("http://127.0.0.1:9/v1", "m", max_retries=0)
    with pytest.raises(PolicyError, match="image 0 must be an \\(H, W, 3\\) uint8"):
        policy.complete(MESSAGES, [np.zeros((4, 4, 3), dtype=np.float32)])  # type: ignore[list-item]


def _vllm_response(**choice_overrides: Any) -> dict[str, Any]:
    """A chat completion exactly as vLLM's OpenAI-compatible server returns it."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": "Answer: 3",
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": [],
            "reasoning": None,
            "reasoning_content": None,
        },
        "logprobs": {
            "content": [
                {
                    "token": "Answer",
                    "logprob": -0.0123,
                    "bytes": [65, 110, 115, 119, 101, 114],
                    "top_logprobs": [
                        {"token": "Answer", "logprob": -0.0123, "bytes": [65, 110, 115, 119, 101, 114]},
                        {"token": "The", "logprob": -4.51, "bytes": [84, 104, 101]},
                    ],
                },
                {
                    "token": ":",
                    "logprob": -9999.0,
                    "bytes": [58],
                    "top_logprobs": [
                        {"token": ":", "logprob": -0.001, "bytes": [58]},
                        {"token": " is", "logprob": -7.2, "bytes": [32, 105, 115]},
                    ],
                },
                {"token": " 3", "logprob": -0.25, "bytes": [32, 51], "top_logprobs": []},
            ],
            "refusal": None,
        },
        "finish_reason": "stop",
        "stop_reason": None,
        "token_ids": None,
    }
    choice.update(choice_overrides)
    return {
        "id": "chatcmpl-9f2c4e0d6a1b4d0e8a3c",
        "object": "chat.completion",
        "created": 1764700000,
        "model": "tiny-chat",
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {
            "prompt_tokens": 41,
            "total_tokens": 44,
            "completion_tokens": 3,
            "prompt_tokens_details": None,
        },
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "kv_transfer_params": None,
    }


def test_completion_from_a_vllm_response() -> None:
    response = ChatCompletion.model_validate(_vllm_response())
    completion = completion_from_response(response, 0.42)
    assert completion.text == "Answer: 3"
    assert completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens) == (41, 3)
    assert completion.latency_s == 0.42 and completion.model == "tiny-chat"
    assert completion.tokens == (
        TokenLogprob("Answer", -0.0123, (("Answer", -0.0123), ("The", -4.51))),
        TokenLogprob(":", -9999.0, ((":", -0.001), (" is", -7.2))),
        TokenLogprob(" 3", -0.25, ()),
    )
    assert completion.extra == {"id": "chatcmpl-9f2c4e0d6a1b4d0e8a3c"}


def test_vllm_extras_and_finish_reasons() -> None:
    data = _vllm_response(finish_reason="length", stop_reason=None, token_ids=[17, 4, 88], logprobs=None)
    data["choices"][0]["message"].update(content="The panorama", reasoning="Marker 3 is a door.")
    data["prompt_token_ids"] = [1, 2, 3]
    completion = completion_from_response(ChatCompletion.model_validate(data), 0.1)
    assert completion.finish_reason == "length" and completion.tokens == ()
    assert completion.extra["reasoning"] == "Marker 3 is a door."
    assert completion.extra["token_ids"] == [17, 4, 88]
    assert completion.extra["prompt_token_ids"] == [1, 2, 3]

    old = _vllm_response(stop_reason="###")  # older vLLM: reasoning_content; a stop string hit
    old["choices"][0]["message"].update(content=None, reasoning_content="thinking...")
    completion = completion_from_response(ChatCompletion.model_validate(old), 0.1)
    assert completion.text == "" and completion.extra["reasoning"] == "thinking..."
    assert completion.extra["stop_reason"] == "###"

    aborted = parse_chat_body(json.dumps(_vllm_response(finish_reason="abort")), "http://h/v1")
    completion = completion_from_response(aborted, 0.1)
    assert completion.finish_reason == "error" and completion.extra["finish_reason"] == "abort"
    tools = completion_from_response(
        ChatCompletion.model_validate(_vllm_response(finish_reason="tool_calls")), 0
    )
    assert tools.finish_reason == "stop"


def test_malformed_bodies() -> None:
    good = parse_chat_body(json.dumps(_vllm_response()), "http://h/v1")
    assert completion_from_response(good, 0.0).text == "Answer: 3"
    for body, message in [
        ("<html><body>502 Bad Gateway</body></html>", "malformed reply from http://h/v1: not JSON: '<html>"),
        ("[1, 2]", "expected a JSON object, got list"),
        (json.dumps({**_vllm_response(), "choices": []}), "malformed reply from http://h/v1: no choices"),
        (json.dumps({"object": "error", "message": "x"}), "no choices"),
        (json.dumps({**_vllm_response(), "choices": [{"index": 0}]}), "choice 0 has no message"),
    ]:
        with pytest.raises(PolicyError, match=message):
            parse_chat_body(body, "http://h/v1")
    empty = ChatCompletion.model_validate({**_vllm_response(), "choices": []})
    with pytest.raises(PolicyError, match="malformed reply from http://h/v1: no choices"):
        completion_from_response(empty, 0.0, source="http://h/v1")


def _status_error(status: int, body: Any) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1:8000/v1/chat/completions")
    response = httpx2.Response(status, json=body, request=request)
    cls = (
        openai.BadRequestError
        if status == 400
        else openai.NotFoundError
        if status == 404
        else openai.InternalServerError
    )
    return cls(f"Error code: {status}", response=response, body=body)


def test_server_errors_become_one_clear_line() -> None:
    url = "http://127.0.0.1:8000/v1"
    too_many = _status_error(
        400,
        {
            "error": {
                "message": "Requested top_logprobs (50) exceeds\nmaximum (20)",
                "type": "BadRequestError",
                "code": 400,
            }
        },
    )
    error = policy_error_from_openai(too_many, url, timeout_s=5, retries=2)
    assert str(error) == (
        f"the policy server at {url} rejected the request (HTTP 400): "
        "Requested top_logprobs (50) exceeds maximum (20)"
    )
    old_shape = _status_error(
        404, {"object": "error", "message": "The model `nope` does not exist.", "code": 404}
    )
    assert str(policy_error_from_openai(old_shape, url, timeout_s=5, retries=2)).endswith(
        "(HTTP 404): The model `nope` does not exist."
    )
    crashed = _status_error(500, {"error": {"message": "EngineCore died"}})
    assert str(policy_error_from_openai(crashed, url, timeout_s=5, retries=2)) == (
        f"the policy server at {url} failed with HTTP 500 (after 2 retries): EngineCore died"
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A socket that accepts connections and never answers (a hung server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def test_constructing_does_not_connect_and_checks_arguments() -> None:
    port = _closed_port()
    policy = OpenAICompatPolicy(f"http://127.0.0.1:{port}/v1/", "tiny", timeout_s=3, max_retries=1)
    assert isinstance(policy, Policy)
    assert (
        policy.base_url == f"http://127.0.0.1:{port}/v1"
        and policy.name == f"openai:{policy.base_url}?model=tiny"
    )
    for args, kwargs, message in [
        (("127.0.0.1:8000", "m"), {}, "must start with http:// or https://"),
        (("http://h/v1", ""), {}, "needs the served model name"),
        (("http://h/v1", "m"), {"timeout_s": 0}, "timeout_s must be > 0"),
        (("http://h/v1", "m"), {"max_retries": -1}, "max_retries must be >= 0"),
    ]:
        with pytest.raises(PolicyError, match=message):
            OpenAICompatPolicy(*args, **kwargs)


def test_down_server_fails_fast_with_a_clear_message() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    policy = OpenAICompatPolicy(url, "tiny", timeout_s=2, max_retries=1)
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        policy.complete([{"role": "user", "content": "hello"}])
    assert time.monotonic() - started < 5
    assert str(caught.value) == f"cannot reach the policy server at {url}: connection refused (after 1 retry)"
    with pytest.raises(PolicyError, match="connection refused"):
        policy.models()
    started = time.monotonic()
    with pytest.raises(
        PolicyError, match=f"the policy server at {url} was not ready within 0.6 s: .*refused"
    ):
        policy.wait_until_ready(timeout_s=0.6, poll_s=0.2)
    assert time.monotonic() - started < 3


def test_check_reachable_needs_an_answer_of_any_kind(silent_server: int) -> None:
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(PolicyError) as caught:
        OpenAICompatPolicy(down, "tiny", max_retries=0).check_reachable()
    assert str(caught.value) == f"cannot reach the policy server at {down}: connection refused"
    hung = f"http://127.0.0.1:{silent_server}/v1"
    with pytest.raises(PolicyError, match=f"the policy server at {hung} did not answer within 0.3 s"):
        OpenAICompatPolicy(hung, "tiny", timeout_s=0.3, max_retries=0).check_reachable()
    # a server that answers GET /models with an error (501 here) is there all the same
    server = _serve_stream([], finish=True)
    try:
        OpenAICompatPolicy(f"http://127.0.0.1:{server.server_address[1]}/v1", "tiny").check_reachable()
    finally:
        server.shutdown()
        server.server_close()


def test_hung_server_times_out(silent_server: int) -> None:
    url = f"http://127.0.0.1:{silent_server}/v1"
    policy = OpenAICompatPolicy(url, "tiny", timeout_s=0.5, max_retries=0)
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        policy.complete([{"role": "user", "content": "hello"}])
    assert 0.4 < time.monotonic() - started < 4
    assert str(caught.value) == f"the policy server at {url} did not answer within 0.5 s"


def _chunk(
    delta: dict[str, Any] | None, *, usage: dict[str, Any] | None = None, **choice: Any
) -> ChatCompletionChunk:
    """One server-sent chunk as vLLM streams it (``delta=None``: the closing usage-only chunk)."""
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, **choice}]
    )
    return ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-stream1",
            "object": "chat.completion.chunk",
            "created": 1764700000,
            "model": "tiny-chat",
            "choices": choices,
            "usage": usage,
        }
    )


def _logprob(token: str, value: float, *top: tuple[str, float]) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": value,
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top],
    }


def test_a_stream_of_chunks_adds_up_to_the_completion() -> None:
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk(
            {"content": "Answer"},
            logprobs={"content": [_logprob("Answer", -0.5, ("The", -0.2), ("Answer", -0.5))]},
            token_ids=[17],
        ),
        _chunk(
            {"content": ": 3"},
            logprobs={"content": [_logprob(":", -0.1), _logprob(" 3", -0.3)]},
            token_ids=[4, 88],
        ),
        _chunk({}, finish_reason="stop", stop_reason="###"),
        _chunk(None, usage={"prompt_tokens": 41, "completion_tokens": 3, "total_tokens": 44}),
    ]
    pieces: list[str] = []
    response = collect_stream(iter(chunks), pieces.append)
    assert pieces == ["Answer", ": 3"]  # the empty role chunk is not a piece
    completion = completion_from_response(response, 0.2, top_logprobs=1)
    assert completion.text == "Answer: 3" and completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens) == (41, 3)
    assert [t.token for t in completion.tokens] == ["Answer", ":", " 3"]
    assert completion.tokens[0].top == (("The", -0.2),)  # ranked best first, cut to the k asked
    assert completion.extra["token_ids"] == [17, 4, 88] and completion.extra["stop_reason"] == "###"
    assert completion.model == "tiny-chat" and completion.extra["id"] == "chatcmpl-stream1"

    with pytest.raises(PolicyError, match="without a single choice"):
        collect_stream(iter(chunks[-1:]), pieces.append)


def test_top_logprobs_are_ranked_and_cut_to_the_number_asked() -> None:
    # vLLM 0.32 at temperature > 0 lists the sampled token first whatever its rank; the policy
    # asks for one more than wanted, so ranking and cutting gives the true top k.
    token = _logprob(" 7", -2.3, (" 7", -2.3), (" 3", -0.2), (" 5", -0.9), (" 1", -1.4))
    data = _vllm_response(logprobs={"content": [token], "refusal": None})
    response = ChatCompletion.model_validate(data)
    (ranked,) = completion_from_response(response, 0.1, top_logprobs=3).tokens
    assert ranked.logprob == -2.3
    assert ranked.top == ((" 3", -0.2), (" 5", -0.9), (" 1", -1.4))
    (kept,) = completion_from_response(response, 0.1).tokens  # not asked: as the server sent it
    assert [t for t, _ in kept.top] == [" 7", " 3", " 5", " 1"]


def _serve_stream(events: list[bytes], *, finish: bool) -> Any:
    """An HTTP server whose chat replies stream ``events``, then end the body (``finish``) or
    drop the connection with it cut short."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in events:
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            if finish:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(
    ("tail", "finish", "message"),
    [
        ([], False, "the reply stream from {url} broke off: "),
        ([b"data: {not json\n\n", b"data: [DONE]\n\n"], True, "malformed reply stream from {url}: "),
    ],
    ids=["cut-short", "garbled-event"],
)
def test_a_broken_stream_is_a_clear_error(tail: list[bytes], finish: bool, message: str) -> None:
    first = _chunk({"role": "assistant", "content": "Answer"}).model_dump_json()
    server = _serve_stream([f"data: {first}\n\n".encode(), *tail], finish=finish)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        policy = OpenAICompatPolicy(url, "tiny", timeout_s=5, max_retries=0)
        pieces: list[str] = []
        with pytest.raises(PolicyError) as caught:
            policy.complete([{"role": "user", "content": "hello"}], on_text=pieces.append)
        assert str(caught.value).startswith(message.format(url=url)), caught.value
        assert pieces == ["Answer"]  # what arrived before the break was handed on
    finally:
        server.shutdown()
        server.server_close()


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "goto_waypoint",
            "description": "Walk there.",
            "parameters": {
                "type": "object",
                "properties": {"index": {"type": "integer"}},
                "required": ["index"],
            },
        },
    }
]


def test_tools_and_the_tool_conversation_go_on_the_wire() -> None:
    call = {
        "id": "call_0_0",
        "type": "function",
        "function": {"name": "goto_waypoint", "arguments": '{"index": 1}'},
    }
    messages: list[Message] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": '{"reached": true}', "tool_call_id": "call_0_0"},
    ]
    request = build_chat_request(messages, model="m", tools=TOOLS, tool_choice="auto")
    assert request["tools"] == TOOLS and "parallel_tool_calls" not in request
    request = build_chat_request(messages, model="m", tools=TOOLS, tool_choice={"name": "goto_waypoint"})
    assert request["tool_choice"] == {"type": "function", "function": {"name": "goto_waypoint"}}
    assert request["messages"][1]["tool_calls"] == [call]
    assert request["messages"][2] == {
        "role": "tool",
        "content": '{"reached": true}',
        "tool_call_id": "call_0_0",
    }
    assert (
        build_chat_request(messages, model="m", tools=TOOLS, tool_choice="required")["tool_choice"]
        == "required"
    )


def test_a_forced_call_is_asked_for_once_with_strict_arguments() -> None:
    """vLLM pins a call's arguments to their schema only for ``strict`` tools; a tool that
    says ``strict: false`` itself keeps it."""
    say = {"name": "say", "strict": False, "parameters": {"type": "object"}}
    loose = {"type": "function", "function": say}
    for choice in ("required", {"name": "goto_waypoint"}):
        request = build_chat_request(MESSAGES, model="m", tools=[*TOOLS, loose], tool_choice=choice)
        assert request["parallel_tool_calls"] is False
        assert [tool["function"]["strict"] for tool in request["tools"]] == [True, False]
        assert request["tools"][0]["function"]["parameters"] == TOOLS[0]["function"]["parameters"]
    assert "strict" not in TOOLS[0]["function"]  # the caller's tools are not changed
    assert "tools" not in build_chat_request(MESSAGES, model="m") and "tool_choice" not in build_chat_request(
        MESSAGES, model="m"
    )


def _server_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "goto_waypoint", "arguments": arguments}}


def test_calls_the_server_parsed_come_back_with_their_arguments_read() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            _server_call("chatcmpl-tool-a1", '{"index": 2}'),
            _server_call("chatcmpl-tool-b2", '{"index": '),
        ],
    }
    response = ChatCompletion.model_validate(
        _vllm_response(message=message, finish_reason="tool_calls", logprobs=None)
    )
    completion = completion_from_response(response, 0.1)
    ok, cut = completion.tool_calls
    assert (ok.id, ok.name, ok.arguments, ok.ok) == ("chatcmpl-tool-a1", "goto_waypoint", {"index": 2}, True)
    assert (
        cut.arguments is None and cut.arguments_text == '{"index": ' and "not valid JSON" in (cut.error or "")
    )
    assert completion.text == "" and completion.extra["finish_reason"] == "tool_calls"
    assert completion.assistant_message()["tool_calls"][0] == _server_call("chatcmpl-tool-a1", '{"index": 2}')
    # the unvalidated body the policy reads (model_construct) gives the same calls
    assert completion_from_response(
        parse_chat_body(json.dumps(response.model_dump()), "s"), 0.1
    ).tool_calls == (completion.tool_calls)


def test_a_streamed_call_is_put_together_from_its_pieces() -> None:
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "chatcmpl-tool-x",
                        "type": "function",
                        "function": {"name": "goto_waypoint"},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ind'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ex": 4}'}}]}),
        _chunk({}, finish_reason="tool_calls"),
        _chunk(None, usage={"prompt_tokens": 41, "completion_tokens": 9, "total_tokens": 50}),
    ]
    pieces: list[str] = []
    completion = completion_from_response(collect_stream(iter(chunks), pieces.append), 0.3)
    (call,) = completion.tool_calls
    assert (call.id, call.name, call.arguments) == ("chatcmpl-tool-x", "goto_waypoint", {"index": 4})
    assert pieces == [] and completion.text == ""
