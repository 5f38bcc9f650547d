"""The OpenAI-compatible policy against a real vLLM server (CPU build) serving the tiny chat LM.

Nothing here is faked: the server is ``python -m vllm.entrypoints.openai.api_server`` in a
subprocess on 127.0.0.1, and numbers are checked against the same model run by transformers.
Besides greedy decoding, tests sample at temperature 1 with a fixed per-request ``seed``
(vLLM's ``extra_body`` field): as reproducible as greedy, and every token position is a
different draw, which is what stop strings and logprob ranks need.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from vllm_suite.checks import (
    chat,
    check_stop_sequences,
    prompt_ids,
    reference_logprobs,
    stop_inside,
)
from vllm_suite.server import VLLMServer, skip_reason, vllm_required

from embodia.core.chat import (
    VLM_HINT,
    Completion,
    ContextOverflowError,
    ContextWindow,
    Message,
    PolicyError,
    require_images,
)
from embodia.policies.openai_compat import OpenAICompatPolicy

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

SERVED_NAME = "tiny-chat"
SEED = 1234


@pytest.fixture(scope="module")
def server(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    vllm_server = VLLMServer(tiny_chat_model, log, served_model_name=SERVED_NAME)
    vllm_server.start()
    yield vllm_server
    vllm_server.stop()


def policy(server: VLLMServer, **extra_body: Any) -> OpenAICompatPolicy:
    # return_token_ids: vLLM adds the prompt's and the completion's token ids to the reply;
    # ignore_eos: replies run to max_tokens whatever the random weights make of <|im_end|>.
    return OpenAICompatPolicy(
        server.base_url,
        SERVED_NAME,
        timeout_s=60.0,
        max_retries=1,
        extra_body={"return_token_ids": True, "ignore_eos": True, **extra_body},
    )


def test_server_lists_the_tiny_model(server: VLLMServer) -> None:
    assert policy(server).wait_until_ready(timeout_s=30) == [SERVED_NAME]


def test_a_served_tiny_model_is_labelled_random_weights(server: VLLMServer) -> None:
    served = policy(server)
    served.check_reachable()
    assert served.name.endswith("(random weights)")
    assert served.random_weights is not None and "embodia models tiny chat" in served.random_weights


def test_completion_text_and_token_counts_match_the_tokenizer(server: VLLMServer, tokenizer: Any) -> None:
    messages = chat("Go to the kitchen and look for the table.")
    result = policy(server, seed=SEED).complete(messages, max_tokens=20, temperature=1.0)
    expected_prompt = prompt_ids(tokenizer, messages)
    assert result.extra["prompt_token_ids"] == expected_prompt
    assert result.prompt_tokens == len(expected_prompt)
    completion_ids = result.extra["token_ids"]
    assert isinstance(completion_ids, list)
    assert result.completion_tokens == len(completion_ids)
    assert result.finish_reason == "length"
    assert result.completion_tokens == 20
    assert result.text == tokenizer.decode(completion_ids, skip_special_tokens=True)
    assert result.text.strip(), "sampling from the tiny model gave an empty reply"
    assert result.model == SERVED_NAME
    assert 0 < result.latency_s < 30


def test_greedy_and_seeded_decoding_are_reproducible(server: VLLMServer) -> None:
    messages = chat("Which waypoint leads to the bedroom?")
    greedy = policy(server)
    first = greedy.complete(messages, max_tokens=12, temperature=0.0, logprobs=True)
    second = greedy.complete(messages, max_tokens=12, temperature=0.0, logprobs=True)
    assert first.text == second.text
    assert [t.token for t in first.tokens] == [t.token for t in second.tokens]
    assert [t.logprob for t in first.tokens] == pytest.approx([t.logprob for t in second.tokens], abs=1e-5)

    seeded = [
        policy(server, seed=seed).complete(messages, max_tokens=24, temperature=1.0) for seed in (1, 1, 2)
    ]
    assert seeded[0].text == seeded[1].text
    assert seeded[0].text != seeded[2].text, "two seeds sampled the same 24 tokens"


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_logprobs_match_transformers_and_top_logprobs_are_ranked(
    server: VLLMServer, reference_model: Any, tokenizer: Any, temperature: float
) -> None:
    top_k = 5
    result = policy(server, seed=SEED).complete(
        chat("The red sofa is in the"),
        max_tokens=10,
        temperature=temperature,
        logprobs=True,
        top_logprobs=top_k,
    )
    completion_ids = result.extra["token_ids"]
    prompt_ids = result.extra["prompt_token_ids"]
    assert isinstance(completion_ids, list) and isinstance(prompt_ids, list)
    assert len(result.tokens) == result.completion_tokens == len(completion_ids) == 10
    expected = reference_logprobs(reference_model, prompt_ids, completion_ids)
    for position, (token, token_id) in enumerate(zip(result.tokens, completion_ids, strict=True)):
        decoded = tokenizer.decode([token_id])
        if "\ufffd" not in decoded:  # a token holding part of a UTF-8 character has no text alone
            assert token.token == decoded
        # vLLM reports raw logprobs (before temperature), which is what transformers computes
        assert token.logprob == pytest.approx(float(expected[position, token_id]), abs=2e-3)
        assert len(token.top) == top_k
        best = expected[position].topk(top_k)
        best_values = [float(v) for v in best.values]
        # The k best, best first, at both temperatures: at temperature > 0 the policy asks for
        # k + 1 and ranks, as vLLM lists the sampled token first (docs/vllm.md).
        assert [v for _, v in token.top] == pytest.approx(best_values, abs=2e-3)
        if temperature == 0.0:  # greedy picks the argmax
            assert token_id == int(best.indices[0])
            assert token.top[0] == (token.token, pytest.approx(token.logprob, abs=1e-5))
        assert sum(math.exp(v) for _, v in token.top) <= 1.0 + 1e-4


def test_streamed_replies_match_the_whole_ones(server: VLLMServer) -> None:
    messages = chat("Describe the hallway to the kitchen.")
    for temperature in (0.0, 1.0):
        whole = policy(server, seed=SEED).complete(messages, max_tokens=24, temperature=temperature)
        pieces: list[str] = []
        streamed = policy(server, seed=SEED).complete(
            messages, max_tokens=24, temperature=temperature, on_text=pieces.append
        )
        assert len(pieces) > 1, "the reply came in one piece"
        assert "".join(pieces) == streamed.text == whole.text
        assert (streamed.prompt_tokens, streamed.completion_tokens) == (whole.prompt_tokens, 24)
        assert streamed.finish_reason == whole.finish_reason == "length"
    # logprobs and stops stream too
    stop, start = stop_inside(whole.text)
    pieces = []
    stopped = policy(server, seed=SEED).complete(
        messages, max_tokens=24, temperature=1.0, stop=[stop], logprobs=True, on_text=pieces.append
    )
    assert "".join(pieces) == stopped.text == whole.text[:start] and stopped.finish_reason == "stop"
    assert len(stopped.tokens) == stopped.completion_tokens


def test_content_latency_in_seconds_from_the_streamed_reply(server: VLLMServer) -> None:
    """The wall-clock content-latency metrics of SxS runs, from a real token stream: each
    word is timed by the delta that carried it, so the first update arrives before the last."""
    from embodia.core.interleaved import timed_blocks
    from embodia.evals.content_latency import stream_metrics, timed_completion

    text, deltas = timed_completion(
        policy(server, seed=SEED), chat("Describe the hallway to the kitchen."), max_tokens=48
    )
    assert len(deltas) > 1 and "".join(d for _, d in deltas) == text
    times = [t for t, _ in deltas]
    assert times == sorted(times) and times[0] > 0
    spans = timed_blocks(deltas, 4)
    metrics = stream_metrics(spans)
    assert metrics.ttfc_tokens == 0 and metrics.ttfc_s is not None
    assert 0 < metrics.ttfc_s < spans[-1].end_time_s <= times[-1]
    # a random observer waits less than the whole stream lasted
    assert metrics.expected_wait_s is not None and 0 <= metrics.expected_wait_s < times[-1]


def test_stop_sequences_end_the_reply_before_the_stop_string(server: VLLMServer) -> None:
    check_stop_sequences(policy(server, seed=SEED))


def test_eight_concurrent_requests_get_the_answers_of_sequential_ones(server: VLLMServer) -> None:
    client = policy(server, seed=SEED)
    client.complete(chat("warm up"), max_tokens=4)
    prompts = [
        chat(f"Go to the {room} and look for the lamp.")
        for room in ("kitchen", "garage", "office", "hallway")
    ]
    # each prompt both greedy and sampled: 8 requests, 8 known answers
    requests = [(p, temperature) for p in prompts for temperature in (0.0, 1.0)]
    alone = [client.complete(p, max_tokens=16, temperature=t).text for p, t in requests]
    assert len(set(alone)) == len(requests), "different requests should give different replies"
    start_together = threading.Barrier(len(requests))

    def send(request: tuple[list[Message], float]) -> Completion:
        messages, temperature = request
        start_together.wait(timeout=30)
        return client.complete(messages, max_tokens=16, temperature=temperature)

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        results = list(pool.map(send, requests))
    for i, result in enumerate(results):
        assert result.text == alone[i], f"request {i} got another reply than when sent alone"
        assert result.completion_tokens == 16


def test_a_text_only_model_is_refused_where_images_are_needed(server: VLLMServer) -> None:
    # The probe: one small picture, one token. vLLM refuses it for the text-only tiny model.
    with pytest.raises(PolicyError) as refused:
        require_images(policy(server), "the dfs explorer")
    assert str(refused.value) == (
        f"openai:{server.base_url}?model={SERVED_NAME} does not take images (the server says: "
        f"{SERVED_NAME} is not a multimodal model), but the dfs explorer works from pictures: use {VLM_HINT}"
    )


def _main_python() -> str:
    """The project's own environment, which runs the explorer (this one holds vLLM, not
    langgraph): EMBODIA_MAIN_PYTHON, else the repository's .venv."""
    python = os.environ.get("EMBODIA_MAIN_PYTHON") or str(
        Path(__file__).parents[2] / ".venv" / "bin" / "python"
    )
    if not Path(python).is_file():
        message = f"no main environment at {python} to run `embodia explore` (set EMBODIA_MAIN_PYTHON)"
        if vllm_required():
            pytest.fail(message)
        pytest.skip(message)
    return python


def test_explore_with_a_text_only_model_exits_2_before_it_starts(server: VLLMServer, tmp_path: Path) -> None:
    """The issue's case: `explore --policy openai:...` on a text-only model used to exit 0 with
    every request refused (HTTP 400) and every decision a fallback."""
    out = tmp_path / "run"
    spec = f"openai:{server.base_url}?model={SERVED_NAME}"
    command = [_main_python(), "-m", "embodia.cli", "explore", "--agent", "dfs", "--policy", spec]
    command += ["--scene", "procedural:seed=3,rooms=3", "--steps", "60", "--no-video", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    # The error is the one line that says error (the log warns first that the weights are random).
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {spec} (random weights) does not take images (the server says: ")
    assert f"{SERVED_NAME} is not a multimodal model" in lines[0] and "vision-language model" in lines[0]
    assert not out.exists()


def test_the_server_says_its_context_and_counts_prompts_with_the_models_tokenizer(
    server: VLLMServer, tokenizer: Any
) -> None:
    client = policy(server)
    assert client.context_window() == ContextWindow(
        server.max_model_len, SERVED_NAME, server.base_url, "serve the model with a larger --max-model-len"
    )
    messages = chat("Go to the kitchen and look for the table.")
    counted = client.count_tokens(messages)
    assert (
        counted
        == len(prompt_ids(tokenizer, messages))
        == client.complete(messages, max_tokens=2).prompt_tokens
    )


def test_requests_past_the_context_are_context_overflow_errors(server: VLLMServer) -> None:
    client = policy(server)
    window = server.max_model_len
    with pytest.raises(ContextOverflowError) as budget:
        client.complete(chat("hello"), max_tokens=window + 1)
    assert (budget.value.window.tokens, budget.value.prompt_tokens, budget.value.max_tokens) == (
        window,
        None,
        window + 1,
    )
    long_chat = chat("The red sofa is in the kitchen. " * 80)
    assert client.count_tokens(long_chat) > window
    with pytest.raises(ContextOverflowError) as prompt:
        client.complete(long_chat, max_tokens=4)
    # vLLM says "at least 513 input tokens"; the error has the prompt's own size
    assert prompt.value.window.tokens == window
    assert prompt.value.prompt_tokens == client.count_tokens(long_chat)
    # a prompt that fits with a budget that does not: vLLM gives the reply the room there is
    fits = chat("The red sofa is in the kitchen. " * 30)
    reply = client.complete(fits, max_tokens=window - 1)
    assert reply.finish_reason == "length" and reply.prompt_tokens + reply.completion_tokens == window


def test_eval_dsr_at_its_default_tokens_names_tokens(server: VLLMServer, tmp_path: Path) -> None:
    """The issue's case: `eval dsr` (--tokens 1500) against the CPU server at --max-model-len 512
    got HTTP 400 for every item; it is now refused at start with the option to change."""
    from typer.testing import CliRunner

    from embodia.cli import app

    spec = f"openai:{server.base_url}?model={SERVED_NAME}"
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "dsr", "--policy", spec, "--limit", "2", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: --tokens 1500 leaves no room in {SERVED_NAME}'s context of {server.max_model_len} tokens at "
        f"{server.base_url}: lower --tokens or serve the model with a larger --max-model-len"
    ]
    assert not out.exists()


def test_an_eval_dsr_prompt_past_the_context_fails_the_run_keeping_its_answers(
    server: VLLMServer, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from embodia.cli import app
    from embodia.envs.dsr import prompts
    from embodia.evals.dsr import ANSWERS_FILE, DSRSettings, select_instances

    spec = f"openai:{server.base_url}?model={SERVED_NAME}"
    chosen = ["--operation", "bst.compound", "--operation", "bst.preorder", "--length", "short"]
    chosen += ["--length", "medium", "--description", "name", "--tokens", "32", "--limit", "4"]
    settings = DSRSettings(
        policy=spec,
        lengths=("short", "medium"),
        operations=("bst.compound", "bst.preorder"),
        limit=4,
        description="name",
        tokens=32,
    )
    instances = select_instances(settings)
    client = policy(server)
    sizes = [
        client.count_tokens(prompts.messages(i, "stepwise", description="name", tokens=32)) for i in instances
    ]
    failing = next(j for j, size in enumerate(sizes) if size is not None and size > server.max_model_len)
    assert failing >= 1, f"the first instance should fit: prompt sizes {sizes}"
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "dsr", "--policy", spec, *chosen, "--out", str(out)])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line == (
        f"error: {instances[failing].id}: the prompt has {sizes[failing]} tokens, which fills "
        f"{SERVED_NAME}'s context of {server.max_model_len} tokens at {server.base_url}: choose shorter "
        "instances (--length short) or serve the model with a larger --max-model-len"
    )
    answered = [json.loads(text)["id"] for text in (out / ANSWERS_FILE).read_text().splitlines()]
    assert answered == [i.id for i in instances[:failing]]


def test_a_killed_server_is_a_clear_error_and_a_restarted_one_answers_again(server: VLLMServer) -> None:
    # Small timeout and one retry: a dead server must not hang the caller.
    fragile = OpenAICompatPolicy(
        server.base_url, SERVED_NAME, timeout_s=10.0, max_retries=1, extra_body={"ignore_eos": True}
    )
    messages = chat("Explore the bedroom first.")
    before = fragile.complete(messages, max_tokens=8, temperature=0.0)

    outcomes: list[BaseException] = []
    give_up = threading.Event()

    def keep_generating() -> None:
        # 480 tokens take about a second: send them back to back so one is always in flight.
        try:
            while not give_up.is_set():
                fragile.complete(messages, max_tokens=480, temperature=0.0)
        except BaseException as error:  # recorded for the assertions below
            outcomes.append(error)

    threads = [threading.Thread(target=keep_generating) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while server.running_requests() < 1:
            assert time.monotonic() < deadline, "the long requests never started generating"
            time.sleep(0.02)
        killed_at = time.monotonic()
        server.kill()
        for thread in threads:
            thread.join(timeout=30)
            assert not thread.is_alive(), "a request in flight hung after the server was killed"
        in_flight_failed_after = time.monotonic() - killed_at
    finally:
        give_up.set()
    assert len(outcomes) == 2
    for failure in outcomes:
        assert isinstance(failure, PolicyError), f"{type(failure).__name__}: {failure}"
        assert f"cannot reach the policy server at {server.base_url}" in str(failure)
    assert in_flight_failed_after < 15

    started = time.monotonic()
    with pytest.raises(PolicyError, match=r"cannot reach the policy server at .*connection refused"):
        fragile.complete(messages, max_tokens=8, temperature=0.0)
    assert time.monotonic() - started < 10, "a refused connection took too long to report"

    server.start()
    assert fragile.wait_until_ready(timeout_s=60) == [SERVED_NAME]
    after = fragile.complete(messages, max_tokens=8, temperature=0.0)
    assert after.text == before.text
    assert after.completion_tokens == 8
