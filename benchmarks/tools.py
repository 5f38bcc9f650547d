"""Tool calls: what a native call costs per decision, and what decoding under its schema costs per token.

    python benchmarks/tools.py [--quick]

Two measures, each against its competitor in the same process:

- ``tool_call_overhead_ms``: a native call as an agent handles it in one decision
  (``ToolBox.answer``: checking the call's arguments against the tool's JSON schema,
  dispatching to the function, the call's record with its result and the ``role: tool``
  answer, written as JSON), minus a
  direct Python call of the same function (``direct_call_us``). Issue #23's target: at most
  1 ms.
- ``constrained_overhead_ms_per_token``: the tiny transformers chat model (random weights,
  built into a temporary folder) writing a call under ``tool_choice="required"``, so each
  token is chosen under the call's schema, against the same model given the same prompt (the
  tools offered, ``tool_choice="auto"``) writing as many tokens freely; the difference per
  generated token. Reported, no target.

Last line: one JSON object with those keys, ``direct_call_us``, ``native_call_us``,
``free_ms_per_token``, ``constrained_ms_per_token`` and the repeat counts.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import benchmark_args

from embodia.core.tool_calls import call_from_parts
from embodia.policies.hf import HFPolicy
from embodia.policies.tiny_models import build_tiny
from embodia.tools.base import Tool, ToolBox

GOTO = Tool(
    "goto_waypoint",
    "Walk to the numbered waypoint drawn on the panorama.",
    {
        "type": "object",
        "properties": {"index": {"type": "integer", "minimum": 0, "maximum": 11}},
        "required": ["index"],
        "additionalProperties": False,
    },
    lambda index: {"reached": True, "newly_covered_m2": 1.25, "steps_left": 400 - index},
)


def per_call_us(run: object, calls: int, rounds: int) -> float:
    """Median over ``rounds`` of the microseconds per call of ``run()`` called ``calls`` times."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            run()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    args = benchmark_args(
        __doc__,
        "fewer repeats (under a minute)",
        {"calls": 200.0, "rounds": 5.0, "replies": 3.0},
        calls=2000.0,
        rounds=15.0,
        replies=10.0,
    )
    calls, rounds, replies = int(args.calls), int(args.rounds), int(args.replies)
    box = ToolBox([GOTO])
    call = call_from_parts("call_0_0", "goto_waypoint", '{"index": 3}')

    def native() -> None:  # as a decision handles a reply's call (core.parsing.ask's on_calls)
        answer = box.answer((call,), lambda result: result.value)
        json.dumps({"calls": answer.records, "messages": answer.messages})

    direct_us = per_call_us(lambda: GOTO.function(index=3), calls, rounds)
    native_us = per_call_us(native, calls, rounds)

    with tempfile.TemporaryDirectory() as folder:
        build_tiny("chat", Path(folder) / "chat")
        policy = HFPolicy(Path(folder) / "chat")
        messages = [{"role": "user", "content": "Which waypoint leads to the kitchen?"}]
        tools = [GOTO.openai_schema()]
        policy.complete(messages, tools=tools, tool_choice="required", max_tokens=32)  # warm-up
        # Pairs of replies to the same prompt with as many tokens each, one forced and one
        # free (a free reply that ends sooner, at an end-of-sequence token, is not a pair):
        # the prompt's prefill is the same in both, so the difference is the constraint's.
        constrained, free = [], []
        for i in range(replies * 5):
            if len(constrained) == replies:
                break
            ask = [{"role": "user", "content": f"Decision {i}: which waypoint?"}]
            forced = policy.complete(ask, tools=tools, tool_choice="required", max_tokens=32)  # type: ignore[arg-type]
            if not forced.tool_calls or not forced.tool_calls[0].ok:
                raise SystemExit(f"the forced reply is not a valid call: {forced.text!r}")
            tokens = forced.completion_tokens
            loose = policy.complete(ask, tools=tools, tool_choice="auto", max_tokens=tokens)  # type: ignore[arg-type]
            if loose.completion_tokens == tokens:
                constrained.append(forced.latency_s / tokens * 1e3)
                free.append(loose.latency_s / tokens * 1e3)
        if len(constrained) < replies:
            raise SystemExit(
                f"only {len(constrained)} of {replies} free replies ran as long as the forced ones"
            )
    constrained_ms, free_ms = statistics.median(constrained), statistics.median(free)
    print(
        json.dumps(
            {
                "tool_call_overhead_ms": round((native_us - direct_us) / 1e3, 4),
                "direct_call_us": round(direct_us, 3),
                "native_call_us": round(native_us, 3),
                "constrained_overhead_ms_per_token": round(constrained_ms - free_ms, 3),
                "constrained_ms_per_token": round(constrained_ms, 3),
                "free_ms_per_token": round(free_ms, 3),
                "calls": calls,
                "rounds": rounds,
                "replies": replies,
            }
        )
    )


if __name__ == "__main__":
    main()
