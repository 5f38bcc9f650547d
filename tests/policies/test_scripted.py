"""The scripted policy: replays outputs, records requests, keeps the backend contract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embodia.core.chat import Completion, Message, Policy, PolicyError, TokenLogprob
from embodia.policies.scripted import ScriptedPolicy

USER: list[Message] = [{"role": "user", "content": "pick a waypoint please"}]


def test_replays_in_order_and_records_requests() -> None:
    policy = ScriptedPolicy(["first reply", "second"])
    assert isinstance(policy, Policy)
    image = np.zeros((8, 16, 3), dtype=np.uint8)
    a = policy.complete(USER, [image], max_tokens=32, temperature=0.7, stop=["\n"])
    b = policy.complete([{"role": "system", "content": "be brief"}, *USER])
    assert isinstance(a, Completion)
    assert (a.text, b.text) == ("first reply", "second")
    assert a.finish_reason == "stop" and a.tokens == ()
    assert a.prompt_tokens == 4 and a.completion_tokens == 2
    assert b.prompt_tokens == 6 and b.completion_tokens == 1
    assert a.latency_s >= 0 and a.model == "scripted"
    assert policy.calls == 2
    first = policy.requests[0]
    assert first.messages == tuple(USER) and first.images[0] is image
    assert (first.max_tokens, first.temperature, first.stop) == (32, 0.7, ("\n",))
    assert policy.requests[1].messages[0]["content"] == "be brief"


def test_running_out_and_looping() -> None:
    policy = ScriptedPolicy(["only"])
    policy.complete(USER)
    with pytest.raises(PolicyError, match="scripted policy ran out of outputs after 1 calls"):
        policy.complete(USER)
    looping = ScriptedPolicy(["a", "b"], loop=True)
    assert [looping.complete(USER).text for _ in range(5)] == ["a", "b", "a", "b", "a"]
    with pytest.raises(PolicyError, match="needs at least one output"):
        ScriptedPolicy([], loop=True)


def test_logprob_outputs_only_when_asked() -> None:
    scripted = {
        "text": "Answer: 3",
        "tokens": [
            {"token": "Answer:", "logprob": -0.2, "top": [["Answer:", -0.2], ["The", -1.9], ["I", -3.0]]},
            {"token": " 3", "logprob": -0.05, "top": [[" 3", -0.05], [" 4", -3.1]]},
        ],
    }
    policy = ScriptedPolicy([scripted], loop=True)
    plain = policy.complete(USER)
    assert plain.tokens == ()
    full = policy.complete(USER, logprobs=True, top_logprobs=2)
    assert full.tokens == (
        TokenLogprob("Answer:", -0.2, (("Answer:", -0.2), ("The", -1.9))),
        TokenLogprob(" 3", -0.05, ((" 3", -0.05), (" 4", -3.1))),
    )
    assert policy.complete(USER, logprobs=True).tokens[0].top == ()
    assert sum(t.logprob for t in full.tokens) == pytest.approx(-0.25)


def test_stop_strings_max_tokens_and_finish_reasons() -> None:
    policy = ScriptedPolicy(
        [
            "Answer: 2\nBecause the hall is open.",
            "one two three four five",
            {"text": "cut", "finish_reason": "length"},
        ]
    )
    stopped = policy.complete(USER, stop=["\n", "hall"])
    assert stopped.text == "Answer: 2" and stopped.finish_reason == "stop"
    long = policy.complete(USER, max_tokens=3)
    assert long.text == "one two three" and long.finish_reason == "length" and long.completion_tokens == 3
    assert policy.complete(USER).finish_reason == "length"


def test_scripted_errors_raise_policy_error() -> None:
    policy = ScriptedPolicy([{"error": "server went away"}, "fine"])
    with pytest.raises(PolicyError, match="server went away"):
        policy.complete(USER)
    assert policy.complete(USER).text == "fine"
    assert policy.calls == 2


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ([3], "scripted output 0 must be a string or an object"),
        ([{"txt": "x"}], "unknown fields \\['txt'\\]"),
        ([{"finish_reason": "stop"}], "needs a string 'text'"),
        ([{"text": "x", "finish_reason": "done"}], "finish_reason must be one of stop, length, error"),
        ([{"text": "x", "tokens": [{"token": "x"}]}], "token 0 needs a numeric 'logprob'"),
        ([{"error": 5}], "'error' must be a string"),
    ],
)
def test_malformed_scripts_are_rejected(outputs: list[object], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        ScriptedPolicy(outputs)  # type: ignore[arg-type]


def test_requests_are_validated_like_any_backend() -> None:
    policy = ScriptedPolicy(["x"])
    with pytest.raises(PolicyError, match="image 0 must be an \\(H, W, 3\\) uint8"):
        policy.complete(USER, [np.zeros((4, 4), dtype=np.uint8)])
    with pytest.raises(PolicyError, match="at least one message"):
        policy.complete([])
    assert policy.calls == 0


def test_from_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    lines = [json.dumps("Answer: 1"), "", json.dumps({"text": "Answer: 2", "finish_reason": "length"})]
    path.write_text("\n".join(lines) + "\n")
    policy = ScriptedPolicy.from_jsonl(path)
    assert policy.name == f"scripted:{path}"
    assert [policy.complete(USER).text for _ in range(2)] == ["Answer: 1", "Answer: 2"]
    with pytest.raises(PolicyError, match="ran out of outputs after 2 calls"):
        policy.complete(USER)

    with pytest.raises(PolicyError, match="scripted outputs file not found"):
        ScriptedPolicy.from_jsonl(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"ok"\n{"text": \n')
    with pytest.raises(PolicyError, match=r"bad.jsonl:2: not JSON"):
        ScriptedPolicy.from_jsonl(bad)
    number = tmp_path / "number.jsonl"
    number.write_text("3\n")
    with pytest.raises(PolicyError, match=r"number.jsonl:1: expected a JSON string or object, got int"):
        ScriptedPolicy.from_jsonl(number)
