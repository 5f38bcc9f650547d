"""What the code probe's operating-system sandbox costs per answer (issue #17).

    python benchmarks/sandbox.py [--quick] [--runs N]

Runs the same small ``solution()`` (a sort and a dict build, as DSR code answers are) through
``run_solution`` isolated (bubblewrap: namespaces, filesystem view, unprivileged uid, plus the
child's rlimits, seccomp filter and audit hook) and with ``isolated=False`` (the child alone,
what ``--unsafe-no-sandbox`` runs), interleaved, and reports the median wall time of each and
their difference. Both start a fresh interpreter per answer; the difference is what the
isolation adds.

Last line: one JSON object with isolated_ms, unisolated_ms, isolation_overhead_ms, runs.
"""

from __future__ import annotations

import json
import statistics
import time

from _common import benchmark_args

from embodia.envs.dsr.sandbox import isolation_problem, run_solution

CODE = """
def solution():
    values = sorted(range(2000), key=lambda v: (v * 7919) % 2003)
    return {str(v): v % 7 for v in values[:50]}
"""


def timed(isolated: bool) -> float:
    started = time.perf_counter()
    result = run_solution(CODE, isolated=isolated)
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise SystemExit(f"the benchmark's solution failed ({'isolated' if isolated else 'bare'}): {result}")
    return elapsed


def main() -> None:
    args = benchmark_args(__doc__, "20 runs of each", {"runs": 20}, runs=100)
    problem = isolation_problem()
    if problem is not None:
        raise SystemExit(f"the sandbox cannot run here: {problem}")
    runs = args.runs
    timed(True), timed(False)  # warm the page cache and the isolation probe
    isolated, bare = [], []
    for _ in range(runs):  # interleaved, so load on the machine weighs on both alike
        isolated.append(timed(True))
        bare.append(timed(False))
    isolated_ms = statistics.median(isolated) * 1000
    bare_ms = statistics.median(bare) * 1000
    print(f"isolated {isolated_ms:.1f} ms, bare child {bare_ms:.1f} ms per answer ({runs} runs each)")
    print(
        json.dumps(
            {
                "isolated_ms": round(isolated_ms, 2),
                "unisolated_ms": round(bare_ms, 2),
                "isolation_overhead_ms": round(isolated_ms - bare_ms, 2),
                "runs": runs,
            }
        )
    )


if __name__ == "__main__":
    main()
