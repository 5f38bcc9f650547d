"""Live-stream agent speed and memory (issue #6).

    python benchmarks/live.py [--quick] [--minutes 10] [--hours 2]

1. Per-chunk decision latency of the event heuristic and of the learned gate over a tiny
   random-weight VLM (what ``embodia models tiny vlm`` builds), on the same procedural arena
   chunks.
2. The real-time factor of a whole heuristic run (render the chunk, decide, write the line,
   step the env) over a ``--minutes`` procedural stream: processing seconds / stream seconds
   (target <= 0.5 on 2 cores).
3. Memory over a ``--hours`` stream with the heuristic agent and a context budget: peak RSS
   when the run reaches 10 minutes and at its end (target ratio <= 1.2).

Last line: one JSON object with decision_ms_heuristic, decision_ms_gate, rtf_heuristic,
rss_mb_10min, rss_mb_120min, rss_ratio.
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import benchmark_args

from embodia.agents.baselines.speaking import EventHeuristic
from embodia.agents.proactive import ContextBudget, HudSpeaker, ProactiveAgent, run_stream
from embodia.envs.streams.env import LiveGamingEnv
from embodia.envs.streams.sources import open_stream


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    """Resident memory now (the peak alone would hide growth under the import baseline)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def decision_ms(decider: object, chunks: list) -> float:  # type: ignore[type-arg]
    times = []
    for chunk in chunks:
        start = time.perf_counter()
        decider.score(chunk, [])  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times[3:]))


def heuristic_agent(budget: int = 16_384) -> ProactiveAgent:
    return ProactiveAgent("CASTER", EventHeuristic(), HudSpeaker(), ContextBudget("You are CASTER.", budget))


def long_stream(hours: float) -> tuple[int, float, dict[int, tuple[float, float]], int, int]:
    """A heuristic run over an ``hours``-long arena stream: (seconds, wall s, {second: (peak,
    current RSS MB)} at 10 min and at the end, context size in words, evicted turns)."""
    long_seconds = int(hours * 3600)
    env = LiveGamingEnv(source=f"procedural:arena,seed=2,duration={long_seconds}")
    marks: dict[int, tuple[float, float]] = {}

    def mark(event: dict) -> None:  # type: ignore[type-arg]
        second = int(event["second"]) + 1
        if second in (600, long_seconds):
            marks[second] = (peak_rss_mb(), current_rss_mb())

    agent = heuristic_agent()
    start = time.perf_counter()
    run_stream(env, [agent], on_event=mark, keep_records=False)
    wall = time.perf_counter() - start
    budget = agent.budget
    return long_seconds, wall, marks, budget.tokens, budget.evicted_turns


def main() -> None:
    args = benchmark_args(
        __doc__, "2 minutes, a 0.25-hour stream", {"minutes": 2, "hours": 0.25}, minutes=10.0, hours=2.0
    )

    stream = open_stream("procedural:arena,seed=0,duration=60")
    chunks = [stream.chunk(s) for s in range(40)]
    heuristic_ms = decision_ms(EventHeuristic(), chunks)

    from embodia.policies.speak_gate import FlagFeatures, LearnedGate, ResponseHead
    from embodia.policies.tiny_models import build_tiny_vlm

    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_vlm(Path(tmp) / "vlm")
        features = FlagFeatures(model)
        gate = LearnedGate(features, ResponseHead(features.hidden_size))
        gate_ms = decision_ms(gate, chunks[:20])

    seconds = int(args.minutes * 60)
    env = LiveGamingEnv(source=f"procedural:arena,seed=1,duration={seconds}")
    start = time.perf_counter()
    run_stream(env, [heuristic_agent()], keep_records=False)
    rtf = (time.perf_counter() - start) / seconds

    # A fresh process, so its peak RSS is the stream's alone (not the tiny VLM's above).
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        long_seconds, long_s, marks, tokens, evicted = pool.apply(long_stream, (args.hours,))
    (rss_10, now_10), (rss_end, now_end) = marks[600], marks[long_seconds]

    print(f"decision: heuristic {heuristic_ms:.3f} ms, gate (tiny VLM) {gate_ms:.1f} ms per chunk")
    print(f"{seconds} s stream in {rtf * seconds:.1f} s: RTF {rtf:.3f}")
    print(
        f"{long_seconds} s stream in {long_s:.0f} s: peak RSS {rss_10:.0f} MB at 10 min, "
        f"{rss_end:.0f} MB at the end (current {now_10:.0f} -> {now_end:.0f} MB); "
        f"context {tokens} words, {evicted} turns evicted"
    )
    print(
        json.dumps(
            {
                "decision_ms_heuristic": round(heuristic_ms, 3),
                "decision_ms_gate": round(gate_ms, 2),
                "rtf_heuristic": round(rtf, 4),
                "rss_mb_10min": round(rss_10, 1),
                "rss_mb_120min": round(rss_end, 1),
                "rss_ratio": round(rss_end / rss_10, 3),
                "rss_current_growth_mb": round(now_end - now_10, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
