"""ChatPolicy and SamplingParams: one check of every request before a backend's ``_generate``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodia.core.chat import (
    ChatPolicy,
    ChatRequest,
    Completion,
    Images,
    Message,
    Policy,
    PolicyError,
    SamplingParams,
)

USER: list[Message] = [{"role": "user", "content": "which waypoint?"}]


class Echo(ChatPolicy):
    """A backend that answers with what it was asked: the sampling settings it received."""

    name = "echo"

    def __init__(self) -> None:
        self.received: list[SamplingParams] = []

    def _generate(self, request: ChatRequest) -> Completion:
        messages, images, params, on_text = request.messages, request.images, request.params, request.on_text
        self.received.append(params)
        text = f"{len(messages)} messages, {len(images)} images"
        if on_text is not None:
            on_text(text)
        return Completion(text, "stop", len(messages), 1, 0.0, model=self.name)


def test_complete_hands_the_backend_its_keywords_as_sampling_params() -> None:
    policy = Echo()
    assert isinstance(policy, Policy)
    pieces: list[str] = []
    image = np.zeros((4, 6, 3), dtype=np.uint8)
    stops = ["\n"]
    reply = policy.complete(USER, [image], max_tokens=7, temperature=0.5, stop=stops, on_text=pieces.append)
    stops.append("###")  # the request keeps the stops it was given
    assert reply.text == "1 messages, 1 images" and pieces == [reply.text]
    assert policy.received == [SamplingParams(max_tokens=7, temperature=0.5, stop=("\n",))]
    policy.complete(USER)
    assert policy.received[-1] == SamplingParams(256, 0.0, False, 0, ())
    assert policy.context_window() is None and policy.count_tokens(USER) is None


@pytest.mark.parametrize(
    ("messages", "images", "keywords", "message"),
    [
        ([], (), {}, "a completion needs at least one message"),
        ([{"role": "robot", "content": "x"}], (), {}, "message 0 has an invalid role 'robot'"),
        ([{"role": "user", "content": 3}], (), {}, "message 0 content must be a string"),
        (
            [{"role": "system", "content": "x"}],
            [np.zeros((2, 2, 3), dtype=np.uint8)],
            {},
            "images are attached to the last user message, but there is none",
        ),
        (USER, [np.zeros((2, 2), dtype=np.uint8)], {}, r"image 0 must be an \(H, W, 3\) uint8"),
        (USER, (), {"max_tokens": 0}, "max_tokens must be at least 1, got 0"),
        (USER, (), {"temperature": -0.1}, "temperature must be a finite number >= 0, got -0.1"),
        (USER, (), {"temperature": math.nan}, "temperature must be a finite number >= 0, got nan"),
        (USER, (), {"top_logprobs": -1}, "top_logprobs must be >= 0, got -1"),
        # the conversation is checked first
        ([], (), {"max_tokens": 0}, "a completion needs at least one message"),
    ],
)
def test_bad_requests_never_reach_the_backend(
    messages: list[Message], images: Images, keywords: dict[str, object], message: str
) -> None:
    policy = Echo()
    with pytest.raises(PolicyError, match=message):
        policy.complete(messages, images, **keywords)  # type: ignore[arg-type]
    assert policy.received == []


def test_sampling_params() -> None:
    assert not SamplingParams().wants_logprobs
    assert SamplingParams(logprobs=True).wants_logprobs
    assert SamplingParams(top_logprobs=2).wants_logprobs  # top_logprobs implies logprobs
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b")
    with pytest.raises(PolicyError, match="temperature must be a finite number >= 0, got inf"):
        SamplingParams(temperature=math.inf)
    with pytest.raises(TypeError, match="max_token"):
        Echo().complete(USER, max_token=3)  # type: ignore[call-arg]
