"""Reply parsing time against reply size: every parser of model replies must be linear.

    python benchmarks/parsing.py [--quick] [--repeats N]

Each entry point (strip_thinking, extract_json, parse_choice, parse_label, the DSR scorer's
parse_reply and score_reply, the DSR env's reply reading, the CSMR action reader, the code
probe's extract_code, tool-call parsing, the puzzles' find_answer and every puzzle task's
parse) reads replies of 1,000, 16,000, 256,000 and 1,000,000 characters in each of a mix of
shapes: realistic (a long valid JSON answer with its reasoning, degenerate repetition of a
sentence) and adversarial (closed nested braces, many small objects, an object cut off after
many keys, ``<think>`` openers, runs of quotes inside brackets). An entry point's time at a
size is the sum over the shapes of the median time per call over the repeats (small replies are
called in a loop so that a measurement lasts at least 20 ms; the repeats interleave the sizes).
Its linearity is time(1 MB) / (time(1 KB) x 1,000): 1 when the cost is exactly proportional to
the size, below 1 when a fixed cost per call weighs on the 1 KB time, and growing with the size
when parsing is quadratic (it was: 16 KB took 12 s in parse_choice). Target (issue #17): <= 2
for every entry point.

Last line: one JSON object with parse_linearity (the worst entry point's ratio), the ratio of
each entry point, the raw times in milliseconds per size and entry point, sizes and repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from _common import import_from_tests

SIZES = (1_000, 16_000, 256_000, 1_000_000)

# (prefix, fragment repeated to fill the size, suffix)
SHAPES: dict[str, tuple[str, str, str]] = {
    "valid JSON with long reasoning": (
        '{"choice": 3, "final_answer": [4, 1], "reasoning": "',
        "the corridor to the left looks open. ",
        '"}',
    ),
    "degenerate repetition": ("", "I choose waypoint 3 because it is open. ", ""),
    "closed nested braces": ("", "{{{{{}}}}}", ""),
    "many small objects": ("", '{"choice": 1} ', ""),
    "object cut off after many keys": ('{"choice": 2, ', '"k": [1, 2], ', ""),
    "think openers": ("", "<think>", "Answer: 2"),
    "quotes in brackets": ('{"a": ', "\"'", ""),
}

QUICK_SHAPES = ("valid JSON with long reasoning", "closed nested braces", "think openers")


def reply_of(shape: str, size: int) -> str:
    prefix, fragment, suffix = SHAPES[shape]
    body = fragment * ((size - len(prefix) - len(suffix)) // len(fragment) + 1)
    return prefix + body[: size - len(prefix) - len(suffix)] + suffix


def calls_per_sample(parse: Callable[[str], object], reply: str) -> tuple[int, float]:
    """How many calls make one measurement last at least 20 ms (one, for large replies), and the
    time per call of that first measurement (it counts as the first repeat)."""
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            parse(reply)
        elapsed = time.perf_counter() - started
        if elapsed >= 0.02:
            return calls, elapsed / calls
        calls *= 4


def per_call_s(parse: Callable[[str], object], reply: str, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        parse(reply)
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"one measurement per case, shapes {', '.join(QUICK_SHAPES)} only (under a minute)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="measurements per case (median)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    repeats = 1 if args.quick else args.repeats

    points = import_from_tests("reply_parsers").reply_parsers()
    shapes = QUICK_SHAPES if args.quick else tuple(SHAPES)
    replies = {size: [reply_of(shape, size) for shape in shapes] for size in SIZES}
    times_ms: dict[str, dict[str, float]] = {}
    for name, parse in points.items():
        cases = [(size, reply, *calls_per_sample(parse, reply)) for size in SIZES for reply in replies[size]]
        # repeats interleave the sizes, so that a change in the machine's load hits them alike
        samples = [[first for _, _, _, first in cases]]
        for _ in range(repeats - 1):
            samples.append([per_call_s(parse, reply, calls) for _, reply, calls, _ in cases])
        medians = [statistics.median(column) for column in zip(*samples, strict=True)]
        times_ms[name] = {
            str(size): 1000 * sum(m for (s, *_), m in zip(cases, medians, strict=True) if s == size)
            for size in SIZES
        }
        print(
            f"{name}: " + ", ".join(f"{int(size):,} chars {ms:.3f} ms" for size, ms in times_ms[name].items())
        )
    small, large = str(SIZES[0]), str(SIZES[-1])
    scale = SIZES[-1] / SIZES[0]
    ratios = {name: round(t[large] / (t[small] * scale), 3) for name, t in times_ms.items()}
    worst = max(ratios, key=lambda name: ratios[name])
    print(f"worst ratio {ratios[worst]} ({worst})")
    print(
        json.dumps(
            {
                "parse_linearity": ratios[worst],
                "worst_entry_point": worst,
                "linearity": ratios,
                "times_ms": {name: {k: round(v, 4) for k, v in t.items()} for name, t in times_ms.items()},
                "sizes": list(SIZES),
                "shapes": list(shapes),
                "repeats": repeats,
            }
        )
    )


if __name__ == "__main__":
    main()
