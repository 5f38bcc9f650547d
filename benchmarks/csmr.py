"""CSMR scheduling overhead and puzzle generation speed (issue #7).

    python benchmarks/csmr.py [--quick] [--items 200] [--puzzles 3000]

1. Scheduling overhead: CSMR with the exact oracle and a scripted reasoner that asks Q
   structured questions and then answers, against calling the same oracle Q times directly
   on the same items. The difference per query is what the LangGraph graph, the guard, the
   prompt building and the reply parsing cost (target <= 2 ms a query).
2. Generation: medium maze and sudoku instances per second (ground truth included; images
   are drawn lazily, on first use), target >= 1,000/s each.

Last line: one JSON object with schedule_overhead_ms, maze_per_s, sudoku_per_s.
"""

from __future__ import annotations

import json
import time

from _common import benchmark_args

from embodia.agents.csmr import CSMRSettings, build_csmr_graph, solve
from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.clevr import oracle
from embodia.perception.scheduler import OraclePerceiver
from embodia.policies.scripted import ScriptedPolicy

QUERIES = 3


def main() -> None:
    args = benchmark_args(
        __doc__,
        "40 items and 600 puzzles (under a minute)",
        {"items": 40, "puzzles": 600},
        items=200,
        puzzles=3000,
    )

    task = make_task("clevr")
    items = [task.generate(seed, "medium") for seed in range(args.items)]
    queries = [
        [{"kind": "count", "filters": {"colour": c}} for c in ("red", "blue", "green")][:QUERIES]
        for _ in items
    ]
    replies = []
    for item, qs in zip(items, queries, strict=True):
        replies += [
            json.dumps({"action": "query", "question": f"how many {q['filters']['colour']}?", "query": q})
            for q in qs
        ]
        replies.append(json.dumps({"action": "answer", "answer": str(item.answer)}))
    reasoner = ScriptedPolicy(replies)
    perceiver = OraclePerceiver(lambda item, query: oracle(item.facts, query))
    graph = build_csmr_graph()
    settings = CSMRSettings(max_queries=QUERIES + 1)
    start = time.perf_counter()
    for item in items:
        solve(item, item.prompt, perceiver, reasoner, settings, graph=graph)
    scheduled = time.perf_counter() - start
    start = time.perf_counter()
    for item, qs in zip(items, queries, strict=True):
        for q in qs:
            perceiver.look(item, "direct", q)
    direct = time.perf_counter() - start
    overhead_ms = 1000 * (scheduled - direct) / (len(items) * QUERIES)

    rates = {}
    for name in ("maze", "sudoku"):
        puzzle = make_task(name)
        puzzle.generate(0, "medium")  # first-use setup (sudoku builds its base pool)
        start = time.perf_counter()
        for seed in range(args.puzzles):
            puzzle.generate(seed, "medium")
        rates[name] = args.puzzles / (time.perf_counter() - start)

    print(
        f"CSMR: {len(items)} items x {QUERIES} looks in {scheduled:.2f} s; "
        f"the looks alone {direct * 1000:.1f} ms"
    )
    print(f"generation (medium): maze {rates['maze']:.0f}/s, sudoku {rates['sudoku']:.0f}/s")
    print(
        json.dumps(
            {
                "schedule_overhead_ms": round(overhead_ms, 3),
                "maze_per_s": round(rates["maze"]),
                "sudoku_per_s": round(rates["sudoku"]),
            }
        )
    )


if __name__ == "__main__":
    main()
