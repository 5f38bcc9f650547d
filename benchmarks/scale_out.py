"""Scale-out on Ray: units per second of `eval dsr` and `eval explore`, in this process vs on Ray workers.

    python benchmarks/scale_out.py [--scenes N] [--steps T] [--instances N] [--rounds R]
                                   [--workers W] [--agent A] [--worker-threads K] [--quick]

Both competitors run side by side in this process, through the runners the commands call
(``run_dsr``, ``evaluate_exploration``): ``--backend local`` runs the units here, one after
another; ``--backend ray`` runs them on W Ray actors (default 2, one CPU each) of a Ray this
script starts with ``ray.init(num_cpus=W, include_dashboard=False, log_to_driver=False)``.
Rounds alternate the order (local first, then Ray first) so that a drift in the machine's
load does not favour one. ``eval explore`` has a third competitor, ``local_all_cores``: this
process again, its ray caster on every core (below).

- ``eval dsr``: N instances of the main suite (stepwise prompts), answered by a scripted
  policy that gives the same one-line reply to every prompt (``scripted:FILE?loop=yes``):
  cheap units (build the prompt, score the reply), so Ray's per-unit cost shows.
- ``eval explore``: the agent (default ``dfs``, the depth-first explorer with its heuristic
  policy) on N held-out procedural houses (seeds 1000.., 6-8 rooms) at T primitive steps
  (default 150), 128x256 panoramas: heavy units (ray casting, mapping), each shipping its
  run folder back to the driver on Ray.

Throughput, in units per second:

- ``*_units_per_s`` (steady state, no start-up): the units after each worker's first
  one, over the time from the W-th result to the last, ``(n - W) / (t_last - t_W)``, with W = 1
  locally. It leaves out ``ray.init``, starting the actors, and each worker's first unit
  (which imports the simulator in a fresh process); the fair comparison.
- ``*_units_per_s_with_startup``: every unit over everything one command spends: locally the
  runner call; on Ray ``ray_init_s`` plus the runner call (which starts its actors).

``ray_speedup_explore`` and ``ray_speedup_dsr`` are steady-state ray / local (median over
rounds). Start-up is measured apart: ``ray_init_s`` and ``ray_actor_start_s`` (W actors of a
no-op worker made and ready: a Ray worker process, no embodia import).

``explore_local_seconds_per_unit`` and ``explore_ray_seconds_per_unit``: a scene's own wall
time (``wall_s`` of its summary, timed on its worker), after each worker's first; their ratio,
``explore_ray_unit_slowdown``, says how much slower a scene runs beside another than alone.

``ray_overhead_ms_per_unit``: what Ray adds to one unit, measured on a no-op unit (it returns
its payload, an ``int``): the time per unit of a stream of them on one warm Ray actor, one at
a time, minus the same through the local backend. ``dsr_ray_minus_local_ms_per_unit`` is the
same difference measured on the DSR units (wall time per unit, W workers vs this process).

Threads: ``--worker-threads K`` (default 1) sets OMP_NUM_THREADS, NUMBA_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS to K before anything imports numba or numpy, in this
process (the local backend) and so in the Ray workers (started by ``ray.init`` with this
environment): one process per core, as the scale-out comparison needs; the simulator's
parallel kernels (numba, OpenMP layer) would otherwise start a thread per core in each of the
W workers. embodia's ray caster reads OMP_NUM_THREADS too (Open3D does not: it casts on
every core unless told a number), so a worker casts on its own core and so does the local
competitor: 1 process on 1 core against W processes on W cores, the scale-out comparison.
``local_all_cores`` is the local run with the ray caster on every core (Open3D's default,
what a local run gets without OMP_NUM_THREADS), which takes part of the second core:
``ray_speedup_explore_vs_all_cores_local`` is Ray's speedup over that. ``--worker-threads
0`` leaves the libraries' defaults (numba takes a thread per core in each process; ``embodia
eval ... --backend ray`` does not get these: it sets NUMBA_NUM_THREADS and OMP_NUM_THREADS
in each worker to the CPUs it reserves).
Ray runs its workers at nice 15; the script starts Ray with ``RAY_worker_niceness=0`` so that
they share the CPU with any other work on the machine on the same terms as this process.

``cpu_ceiling_speedup``: what the machine gives W busy processes over one right now, on a
pure-Python loop (W x one loop's time / W loops at once, median of 3): W on W idle cores of
their own, less where the cores are shared (other work, a hypervisor). It touches no memory
to speak of, so it bounds the speedups from above without saying how close they can come.

Last line: one JSON object (ray_speedup_explore, ray_speedup_explore_vs_all_cores_local,
ray_overhead_ms_per_unit, the throughputs,
the unit counts, the start-up times, cpu_ceiling_speedup, the load average before and after,
``other_cpu_share``: the share of the machine's CPU that processes outside this benchmark took
during the timed runs, over all of them and in the worst one; 0 on a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _common import log

from embodia.core.scale_out import Backend, Unit, WorkerPool
from embodia.sim.raycast import THREADS_VARIABLE as RAYCASTER_THREADS

RAY_NICENESS = "RAY_worker_niceness"
"""Ray's setting (read from the environment by ``ray.init``) of its workers' nice value."""
THREAD_VARIABLES = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
ALL_CORES = "local_all_cores"
"""The third explore competitor: this process, its ray caster on every core."""
SPIN, SPIN_QUICK = 5_000_000, 2_000_000
"""Iterations of the loop that measures the machine's ceiling (about 1 s and 0.4 s here)."""
QUICK = {"scenes": 4, "steps": 60, "instances": 200, "rounds": 1, "noop_units": 300}

REPLY = '{"final_answer": [1, 2, 3]}'
"""The scripted policy's one reply (valid JSON, wrong for nearly every instance: it is scored)."""


def scene(seed: int) -> str:
    """A held-out house, as benchmarks/explore.py draws them."""
    return f"procedural:seed={seed},rooms={6 + seed % 3}"


def steady_rate(times: list[float], workers: int) -> float:
    """Units per second after each worker's first unit: ``(n - W) / (t_last - t_W)``."""
    ordered = sorted(times)
    if len(ordered) <= workers:
        raise SystemExit(f"{len(ordered)} units cannot give a steady rate over {workers} workers")
    return (len(ordered) - workers) / (ordered[-1] - ordered[workers - 1])


@dataclass
class Timed:
    """One runner call: its wall seconds, when each unit's result landed (seconds after the
    start) and what the runner reported for it (an answer record, a scene line)."""

    wall_s: float
    times: list[float]
    records: list[Any]


def timed_run(run: Callable[[Callable[..., None]], object]) -> Timed:
    """``run`` gets the callback the runner calls as each unit's result lands."""
    times: list[float] = []
    records: list[Any] = []
    start = time.perf_counter()

    def landed(record: Any, *_: object) -> None:
        times.append(time.perf_counter() - start)
        records.append(record)

    run(landed)
    return Timed(time.perf_counter() - start, times, records)


def dsr_run(reply_file: Path, instances: int, out: Path, backend: Backend) -> Timed:
    from embodia.evals.dsr import DSRSettings, run_dsr  # after the thread limits, as numpy

    settings = DSRSettings(policy=f"scripted:{reply_file}?loop=yes", suite="main", limit=instances)
    return timed_run(lambda on_answer: run_dsr(settings, out, on_answer=on_answer, backend=backend))


def explore_run(agent: str, scenes: list[str], steps: int, out: Path, backend: Backend) -> Timed:
    from embodia.evals.explore import evaluate_exploration

    def run(on_scene: Callable[..., None]) -> object:
        return evaluate_exploration(agent, scenes, out, steps=steps, on_scene=on_scene, backend=backend)

    return timed_run(run)


def _noop_worker() -> Callable[[int, object], int]:
    return lambda payload, _: payload


def noop_ms_per_unit(pool: WorkerPool[int, int], units: int) -> float:
    """Milliseconds per no-op unit through ``pool`` (its workers made and warm beforehand)."""
    pool.run([Unit(f"warm-{i}", i) for i in range(20)], lambda *_: None)
    start = time.perf_counter()
    pool.run([Unit(str(i), i) for i in range(units)], lambda *_: None)
    return 1000 * (time.perf_counter() - start) / units


def spin(count: int) -> float:
    """Seconds of a pure-Python loop: CPU only, no memory traffic, no threads."""
    start = time.perf_counter()
    total = 0
    for i in range(count):
        total += i
    return time.perf_counter() - start


def cpu_ceiling(count: int, processes: int, repeats: int = 3) -> float:
    """The speedup the machine gives ``processes`` busy processes over one, on the same loop:
    ``processes`` x one loop's time / the time of ``processes`` loops at once (at most
    ``processes`` where each has a core of its own, less where they share, or other work runs);
    the median of ``repeats``."""
    context = multiprocessing.get_context("fork")  # before ray.init: nothing but this process to copy
    ratios = []
    with context.Pool(1) as one, context.Pool(processes) as pool:
        for _ in range(repeats):
            alone = one.apply(spin, (count,))
            start = time.perf_counter()
            pool.map(spin, [count] * processes)
            ratios.append(processes * alone / (time.perf_counter() - start))
    return statistics.median(ratios)


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_ticks() -> tuple[dict[int, int], dict[int, int]]:
    """Every process's CPU ticks (user + system) and parent, from /proc."""
    ticks: dict[int, int] = {}
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    return ticks, parents


def _under(pid: int, root: int, parents: dict[int, int]) -> bool:
    while pid != root and pid in parents and pid > 1:
        pid = parents[pid]
    return pid == root


def sample_other_cpu(root: int, connection: Connection) -> None:
    """Runs in a process of its own (so that it takes nothing from a local run's thread): every
    half second, the CPU the processes outside ``root``'s tree spent since the last look. Each
    message on ``connection`` is answered with the total so far in seconds; ``None`` ends it."""
    seen: dict[int, int] = {}
    other = 0
    first = True
    while True:
        ticks, parents = process_ticks()
        for pid, spent in ticks.items():
            before = seen.get(pid, spent if first else 0)  # a process started since counts whole
            if not _under(pid, root, parents):
                other += max(0, spent - before)
        seen, first = ticks, False
        if connection.poll(0.5):
            if connection.recv() is None:
                return
            connection.send(other / TICK)


class OtherWork:
    """The CPU that processes outside this benchmark (other jobs on the machine) took during
    each timed run, as a share of the machine: other CPU seconds / (cores x wall). 0 on a
    quiet machine; Ray's daemons and workers are this benchmark's own."""

    def __init__(self) -> None:
        self.other_s = self.wall_s = self.worst = 0.0
        self._connection: Connection | None = None
        if Path("/proc/stat").is_file():  # Linux
            self._connection, theirs = multiprocessing.get_context("spawn").Pipe()
            self._process = multiprocessing.get_context("spawn").Process(
                target=sample_other_cpu, args=(os.getpid(), theirs), daemon=True
            )
            self._process.start()

    def _total(self) -> float:
        assert self._connection is not None
        self._connection.send("total")
        return float(self._connection.recv())

    def measure(self, run: Callable[[], Timed]) -> Timed:
        if self._connection is None:
            return run()
        before = self._total()
        result = run()
        other = self._total() - before
        self.other_s += other
        self.wall_s += result.wall_s
        self.worst = max(self.worst, other / ((os.cpu_count() or 1) * result.wall_s))
        return result

    @property
    def share(self) -> float:
        return self.other_s / ((os.cpu_count() or 1) * self.wall_s) if self.wall_s else 0.0

    def close(self) -> None:
        if self._connection is not None:
            self._connection.send(None)
            self._process.join(timeout=5)
            self._connection = None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=16, help="explore units: houses (seeds 1000..)")
    parser.add_argument("--steps", type=int, default=150, help="explore step budget")
    parser.add_argument("--instances", type=int, default=1000, help="dsr units: main-suite instances")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both competitors (order alternates)")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (and Ray's CPUs)")
    parser.add_argument("--noop-units", type=int, default=2000, help="no-op units timed for the overhead")
    parser.add_argument("--agent", default="dfs", help="exploration agent (dfs, frontier, frontier-utility)")
    parser.add_argument(
        "--worker-threads",
        type=int,
        default=1,
        help="threads of the numeric libraries per process (0: the libraries' defaults)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="4 scenes at 60 steps, 200 DSR instances, 300 no-op units, 1 round (under a minute)",
    )
    args = parser.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    return args


def limit_threads(threads: int) -> None:
    """Set before numpy and numba are first imported (they read it once), in this process and,
    through ``ray.init``'s environment, in the Ray workers."""
    if threads > 0:
        for name in THREAD_VARIABLES:
            os.environ[name] = str(threads)


@contextmanager
def raycaster_threads(threads: int) -> Iterator[None]:
    """The ray caster's threads for the runs inside (0: every core). It reads OMP_NUM_THREADS
    as each scene loads, unlike numpy and numba, which read it once at import."""
    before = os.environ.get(RAYCASTER_THREADS)
    os.environ[RAYCASTER_THREADS] = str(threads)
    try:
        yield
    finally:
        if before is None:
            del os.environ[RAYCASTER_THREADS]
        else:
            os.environ[RAYCASTER_THREADS] = before


def main() -> None:
    args = parse_args()
    limit_threads(args.worker_threads)
    import ray

    workers = args.workers
    ray_backend = Backend("ray", num_workers=workers)
    local = Backend()
    load_before = load_average()
    scenes = [scene(seed) for seed in range(1000, 1000 + args.scenes)]

    ceiling = cpu_ceiling(SPIN_QUICK if args.quick else SPIN, workers)
    log(f"{workers} busy processes at once run {ceiling:.2f}x as much as one (pure-Python loop)")
    other = OtherWork()
    # Ray runs its workers at nice 15; at 0 they compete for the CPU with other work on the
    # machine on the same terms as the local backend (this process).
    os.environ[RAY_NICENESS] = "0"
    start = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    ray_init_s = time.perf_counter() - start
    log(f"ray.init: {ray_init_s:.2f} s")
    try:
        start = time.perf_counter()
        with WorkerPool(_noop_worker, Backend("ray", num_workers=workers)) as pool:
            pool.run([Unit(str(i), i) for i in range(workers)], lambda *_: None)
            actor_start_s = time.perf_counter() - start
            noop_ray_parallel_ms = noop_ms_per_unit(pool, args.noop_units)
        with WorkerPool(_noop_worker, Backend("ray", num_workers=1)) as pool:
            noop_ray_ms = noop_ms_per_unit(pool, args.noop_units)
        with WorkerPool(_noop_worker, local) as pool:
            noop_local_ms = noop_ms_per_unit(pool, args.noop_units)
        log(
            f"{workers} no-op actors ready in {actor_start_s:.2f} s; no-op unit: {noop_ray_ms:.3f} ms on one "
            f"Ray actor, {noop_ray_parallel_ms:.3f} ms per unit on {workers}, {noop_local_ms:.4f} ms locally"
        )

        rounds: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="embodia-scale-out-") as tmp:
            reply_file = Path(tmp) / "reply.jsonl"
            reply_file.write_text(json.dumps(REPLY) + "\n")
            # Warm this process (imports, numba's cached kernels) as a worker's first unit warms it.
            explore_run(args.agent, scenes[:1], min(args.steps, 20), Path(tmp) / "warm-explore", local)
            dsr_run(reply_file, 10, Path(tmp) / "warm-dsr", local)
            for number in range(args.rounds):
                measured: dict[str, Timed] = {}
                for workload in ("dsr", "explore"):
                    # explore also runs locally with the ray caster on every core (Open3D's
                    # default, what a local run gets without OMP_NUM_THREADS)
                    kinds = ("local", "ray") if workload == "dsr" else ("local", "ray", ALL_CORES)
                    for kind in kinds if number % 2 == 0 else kinds[::-1]:
                        backend = ray_backend if kind == "ray" else local
                        folder = Path(tmp) / f"{workload}-{kind}-{number}"
                        if workload == "dsr":
                            run = partial(dsr_run, reply_file, args.instances, folder, backend)
                        else:
                            run = partial(explore_run, args.agent, scenes, args.steps, folder, backend)
                        with raycaster_threads(0 if kind == ALL_CORES else args.worker_threads):
                            timed = measured[f"{workload}_{kind}"] = other.measure(run)
                        log(
                            f"round {number + 1} {workload} {kind}: {len(timed.times)} units in "
                            f"{timed.wall_s:.2f} s"
                        )
                rounds.append(measured)
    finally:
        ray.shutdown()
        other.close()

    def workers_of(key: str) -> int:
        return workers if key.endswith("_ray") else 1

    def steady(timed: Timed, key: str) -> float:
        return steady_rate(timed.times, workers_of(key))

    def with_startup(timed: Timed, key: str) -> float:
        return len(timed.times) / (timed.wall_s + (ray_init_s if key.endswith("_ray") else 0.0))

    result: dict[str, Any] = {
        "quick": args.quick,
        "workers": workers,
        "cpus": os.cpu_count(),
        "worker_threads": args.worker_threads or "library defaults",
        "rounds": args.rounds,
        "agent": args.agent,
        "steps": args.steps,
        "explore_units": args.scenes,
        "dsr_units": args.instances,
        "throughput_includes_startup": False,
        "cpu_ceiling_speedup": round(ceiling, 3),
        "ray_worker_niceness": 0,
        "ray_init_s": round(ray_init_s, 3),
        "ray_actor_start_s": round(actor_start_s, 3),
    }
    rates = {key: [steady(r[key], key) for r in rounds] for key in rounds[0]}
    for workload in ("explore", "dsr"):
        for kind in ("local", "ray"):
            key = f"{workload}_{kind}"
            result[f"{key}_units_per_s"] = round(statistics.median(rates[key]), 3)
            result[f"{key}_units_per_s_with_startup"] = round(
                statistics.median(with_startup(r[key], key) for r in rounds), 3
            )
            result[f"{key}_wall_s"] = [round(r[key].wall_s, 2) for r in rounds]
        pairs = zip(rates[f"{workload}_ray"], rates[f"{workload}_local"], strict=True)
        ratios = [ray / here for ray, here in pairs]
        result[f"ray_speedup_{workload}"] = round(statistics.median(ratios), 3)
        result[f"ray_speedup_{workload}_per_round"] = [round(ratio, 3) for ratio in ratios]
        result[f"ray_speedup_{workload}_with_startup"] = round(
            result[f"{workload}_ray_units_per_s_with_startup"]
            / result[f"{workload}_local_units_per_s_with_startup"],
            3,
        )
    all_cores = f"explore_{ALL_CORES}"
    result[f"{all_cores}_units_per_s"] = round(statistics.median(rates[all_cores]), 3)
    result[f"{all_cores}_wall_s"] = [round(r[all_cores].wall_s, 2) for r in rounds]
    ratios = [ray / here for ray, here in zip(rates["explore_ray"], rates[all_cores], strict=True)]
    result["ray_speedup_explore_vs_all_cores_local"] = round(statistics.median(ratios), 3)
    result["ray_speedup_explore_vs_all_cores_local_per_round"] = [round(ratio, 3) for ratio in ratios]
    for kind in ("local", "ray", ALL_CORES):
        # A scene's own wall time (run_exploration's, on its worker), after each worker's first
        # (as the rates): how much slower a unit runs beside another one than alone.
        key = f"explore_{kind}"
        seconds = [line["summary"]["wall_s"] for r in rounds for line in r[key].records[workers_of(key) :]]
        result[f"explore_{kind}_seconds_per_unit"] = round(statistics.fmean(seconds), 3)
    result["explore_ray_unit_slowdown"] = round(
        result["explore_ray_seconds_per_unit"] / result["explore_local_seconds_per_unit"], 3
    )
    result["ray_overhead_ms_per_unit"] = round(noop_ray_ms - noop_local_ms, 3)
    result["ray_noop_ms_per_unit_one_actor"] = round(noop_ray_ms, 3)
    result["ray_noop_ms_per_unit_all_actors"] = round(noop_ray_parallel_ms, 3)
    result["local_noop_ms_per_unit"] = round(noop_local_ms, 4)
    result["dsr_ray_minus_local_ms_per_unit"] = round(
        1000 / result["dsr_ray_units_per_s"] - 1000 / result["dsr_local_units_per_s"], 3
    )
    result["noop_units"] = args.noop_units
    result["other_cpu_share"] = round(other.share, 3)
    result["other_cpu_share_worst_run"] = round(other.worst, 3)
    result["load_before"] = load_before
    result["load_after"] = load_average()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
