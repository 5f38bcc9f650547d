"""DSR-Bench generation and scoring speed.

    python benchmarks/dsr.py [--quick] [--answers N]

Generates all 4,140 instances (the four suites, seed 0) in this process, then scores N
answers (default 100,000) cycling over the instances: a third exact (JSON), a third wrong
(the truth's canonical string with one character changed, in a code fence with prose) and
a third malformed (cut-off JSON), the mix a real run sees. Targets (issue #5): generation
<= 10 s on 2 cores, >= 20,000 answers scored per second. Last line: one JSON object with
instances, generate_s, score_per_s.
"""

from __future__ import annotations

import json
import time

from _common import benchmark_args

from embodia.envs.dsr import suites
from embodia.envs.dsr.core import canonical
from embodia.envs.dsr.scoring import score_reply


def replies_for(instance: suites.Instance) -> list[str]:
    exact = json.dumps({"final_answer": instance.truth})
    text = canonical(instance.truth)
    middle = len(text) // 2
    changed = text[:middle] + ("7" if text[middle] != "7" else "8") + text[middle + 1 :]
    wrong = f'The final state follows.\n```json\n{{"final_answer": "{changed}"}}\n```'
    malformed = exact[: max(1, len(exact) - 3)]
    return [exact, wrong, malformed]


def main() -> None:
    args = benchmark_args(__doc__, "20,000 answers (under a minute)", {"answers": 20_000}, answers=100_000)

    start = time.perf_counter()
    instances = list(suites.generate())
    generate_s = time.perf_counter() - start

    pool = [(reply, instance) for instance in instances for reply in replies_for(instance)]
    work = [pool[i % len(pool)] for i in range(args.answers)]
    start = time.perf_counter()
    exact = sum(score_reply(reply, instance).exact for reply, instance in work)
    score_s = time.perf_counter() - start

    print(f"generated {len(instances)} instances in {generate_s:.2f} s")
    print(f"scored {len(work)} answers in {score_s:.2f} s ({exact:.0f} exact)")
    print(
        json.dumps(
            {
                "instances": len(instances),
                "generate_s": round(generate_s, 3),
                "score_per_s": round(len(work) / score_s),
                "answers": len(work),
                "exact_answers": int(exact),
            }
        )
    )


if __name__ == "__main__":
    main()
