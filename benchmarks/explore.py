"""Depth-first explorer (heuristic policy) vs the strongest of three baselines, and the
runtime's cost.

    python benchmarks/explore.py [--houses v2|v1] [--scenes N] [--first-seed S] [--steps T]
                                 [--overhead-scenes K] [--instruction-only] [--quick]

Held-out scenes, procedural seeds 1000.. (``--first-seed 2000``: the houses the explorer's
rules are chosen on, never the held-out ones):

- ``v2`` (default, issue #22): ``procedural:seed=S,floors=F``, 10-20 rooms drawn from the
  seed, every fourth house (S % 4 == 3) with two floors;
- ``v1``: the first generation, ``procedural:seed=S,rooms=6+S%3`` (6-8 rooms), the setting of
  the earlier results in docs/benchmarks.md.

The baselines, nearest-frontier (``frontier``), ``frontier-utility`` and the tour planner
(``tour``), run unchanged on the primitive env; the explorer on the waypoint env; all see
128x256 panoramas. The strongest baseline is the one with the largest mean coverage_m2. The
setting is valid (``setting_valid``) only if that baseline covers at most 85% of the
explorable area on average (``baseline_coverage_ratio``): in a setting the baselines saturate,
no agent can lead them. Runtime overhead, on the first K scenes: the explorer's node functions
run as the LangGraph graph with a SQLite checkpoint per decision (without and with a listener
for the streamed events) and in a bare Python loop; the difference in time spent outside the
nodes, per decision, is the runtime's cost.

Instruction following (houses whose rooms are known, v2): per house a room kind it has
exactly one of is drawn by its seed; the explorer runs told "explore the ROOM first" and
untold, each until the room is 90% observed (``RegionCoverage``); ``instruction_steps_ratio``
is the mean over houses of told / untold steps, ``instruction_steps_ratio_pooled`` all told
steps over all untold steps (a run that never gets there counts the whole budget, and
``instruction_runs_not_covered`` says how many did not). As a reference, an oracle that
knows the house walks straight to the room's unobserved cells
(``instruction_steps_ratio_oracle``, oracle / untold steps): the ratio no explorer without a
map of the house can be expected to beat. ``--instruction-only`` runs just this part.

Last line: one JSON object (strongest_baseline, baseline_coverage_ratio, setting_valid,
coverage_ratio_vs_best, auc_ratio_vs_best and their 95% bootstrap intervals over houses
(``..._ci95``), instruction_steps_ratio, each baseline's means,
the explorer's, runtime_overhead_ms, ...).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium
import numpy as np

import embodia.envs  # noqa: F401  (registers the env ids)
from embodia.agents import explorer
from embodia.agents.baselines import make_agent
from embodia.agents.instructions import REGION_WORDS, room_first_instruction
from embodia.agents.runtime import run_config, sqlite_checkpointer, stream_run
from embodia.envs.mapping.measures import RegionCoverage
from embodia.evals.explore import _EnvView
from embodia.sim.scene import Region

PANORAMA = {"panorama_height": 128, "panorama_width": 256}


BASELINES = ("frontier", "frontier-utility", "tour")
VALID_BASELINE_COVERAGE = 0.85
"""The setting is valid when the strongest baseline covers at most this share on average."""
INSTRUCTED_SHARE = 0.9
"""An instructed room counts as explored once this share of it is observed."""


def scene(seed: int, houses: str = "v2") -> str:
    if houses == "v1":
        return f"procedural:seed={seed},rooms={6 + seed % 3}"
    return f"procedural:seed={seed},floors={2 if seed % 4 == 3 else 1}"


def run_baseline(name: str, spec: str, steps: int) -> dict[str, Any]:
    env = gymnasium.make("embodia/ActiveMapping-v0", max_steps=steps, **PANORAMA)
    observation, info = env.reset(seed=0, options={"scene": spec})
    agent = make_agent(name)
    agent.reset(_EnvView(env.unwrapped), seed=0)
    terminated = truncated = False
    while not (terminated or truncated):
        observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
    env.close()
    return info


def _explorer_env(spec: str, steps: int) -> Any:
    env = gymnasium.make("embodia/ActiveMappingWaypoint-v0", max_steps=steps, action_type="pixel", **PANORAMA)
    env.reset(seed=0, options={"scene": spec})
    return env


class NodeTimer:
    """Wraps node functions and adds up the time spent inside them (the agent's own work)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, node: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(node)
        def timed(state: Any, runtime: Any) -> dict[str, Any]:
            start = time.perf_counter()
            try:
                return node(state, runtime)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def run_dfs(
    spec: str, steps: int, checkpoint: Path, *, listen: bool = False
) -> tuple[dict[str, Any], int, float]:
    """The explorer as a LangGraph run with SQLite checkpoints (``listen``: with a listener for
    the streamed events, as the CLI runs it).

    Returns (info, decisions, seconds spent outside the nodes: the runtime's cost).
    """
    env = _explorer_env(spec, steps)
    context = explorer.ExplorerContext(env=env.unwrapped, policy=None, instruction="", recorder=None)
    timer = NodeTimer()
    events: list[dict[str, Any]] = []
    with sqlite_checkpointer(checkpoint) as saver:
        graph = explorer.build_explorer_graph(timer).compile(checkpointer=saver)
        start = time.perf_counter()
        state = stream_run(
            graph,
            {"decision": 0, "events": []},
            run_config(checkpoint.stem),
            context,
            events.append if listen else None,
        )
        total = time.perf_counter() - start
    info = env.unwrapped._info()
    env.close()
    return info, int(state["decision"]), total - timer.seconds


def _run_nodes(
    env: Any, instruction: str = "", until: Callable[[], bool] | None = None
) -> tuple[dict[str, Any], int, float]:
    """The explorer's node functions in a plain loop (no graph, no checkpoints) until the
    episode ends or ``until()`` holds after a decision; returns (info, decisions, seconds
    spent outside the nodes)."""
    context = explorer.ExplorerContext(env=env.unwrapped, policy=None, instruction=instruction, recorder=None)
    runtime = SimpleNamespace(context=context)
    timer = NodeTimer()
    nodes = [
        timer(getattr(explorer, name))
        for name in ("observe", "map_update", "regions", "propose", "select", "navigate", "update_tree")
    ]
    state: dict[str, Any] = {"decision": 0, "events": []}
    start = time.perf_counter()
    while not state.get("done") and not (until is not None and until()):
        for node in nodes:
            update = node(state, runtime)
            state["events"] += update.pop("events", [])  # the state's one reducer
            state.update(update)
    total = time.perf_counter() - start
    info = env.unwrapped._info()
    env.close()
    return info, int(state["decision"]), total - timer.seconds


def run_dfs_bare(spec: str, steps: int) -> tuple[dict[str, Any], int, float]:
    """The same node functions in a plain loop (no graph, no checkpoints), timed the same way."""
    return _run_nodes(_explorer_env(spec, steps))


def instructed_room(regions: Sequence[Region], seed: int) -> Region | None:
    """The room an instruction names in a house: one of the kinds the house has exactly one
    of (so "the kitchen" is one room), drawn by the house's seed; None if there is none."""
    kinds = Counter(region.kind for region in regions)
    unique = sorted(kind for kind, count in kinds.items() if count == 1 and kind in REGION_WORDS)
    if not unique:
        return None
    kind = unique[int(np.random.default_rng(seed).integers(len(unique)))]
    return next(region for region in regions if region.kind == kind)


def _watched_room(spec: str, steps: int, seed: int) -> tuple[Any, Region, RegionCoverage] | None:
    """The explorer's env on the house, its instructed room and that room's coverage measure,
    tracked from the start; None (the env closed) when the house has no such room."""
    env = _explorer_env(spec, steps)
    mapping = env.unwrapped
    room = instructed_room(mapping.simulator.scene.regions, seed)
    if room is None:
        env.close()
        return None
    watch = RegionCoverage(room)
    mapping.coverage.track(watch, mapping.bevs)
    return env, room, watch


def steps_to_cover(spec: str, steps: int, seed: int, instructed: bool) -> tuple[str, int | None] | None:
    """Steps until the house's instructed room (:func:`instructed_room`) is
    ``INSTRUCTED_SHARE`` observed, with "explore the ROOM first" or with no instruction
    (None: not within the budget); None when the house has no such room."""
    watched = _watched_room(spec, steps, seed)
    if watched is None:
        return None
    env, room, watch = watched
    instruction = room_first_instruction(room.kind) if instructed else ""
    _run_nodes(env, instruction, until=lambda: watch.get_metric() >= INSTRUCTED_SHARE)
    return room.kind, watch.steps_until(INSTRUCTED_SHARE)


ORACLE_CANDIDATES = 32
"""The oracle weighs this many of the room's unobserved cells nearest in a straight line
by their distance along the floor."""


def oracle_steps_to_cover(spec: str, steps: int, seed: int) -> int | None:
    """Steps until the instructed room is ``INSTRUCTED_SHARE`` observed by an agent that knows
    the house: a reference for the instruction target, not an agent. It reads the room's
    outline and the navigation mesh (what no explorer may read) and walks, decision after
    decision, to the unobserved cell of the room nearest along the floor, with the same
    waypoint budget, panoramas and coverage as the explorer; None: no such room, or not
    covered within ``steps``."""
    watched = _watched_room(spec, steps, seed)
    if watched is None:
        return None
    env, room, watch = watched
    mapping = env.unwrapped
    area = mapping.coverage.explorable
    centres = np.concatenate([floor.centres for floor in area.floors])
    in_room = area.region_cells(room)
    refused: set[int] = set()  # cells whose walk the env rejected from where the agent stood
    done = False
    while not done and watch.get_metric() < INSTRUCTED_SHARE:
        todo = np.nonzero(in_room & ~area.observed(mapping.bevs))[0]
        todo = np.asarray([cell for cell in todo if cell not in refused], dtype=np.int64)
        if not len(todo):
            break
        here = np.asarray(mapping.simulator.pose.position, dtype=np.float64)
        nearest = todo[np.argsort(np.linalg.norm(centres[todo] - here, axis=1))[:ORACLE_CANDIDATES]]
        walks = [mapping.simulator.geodesic_distance(here, centres[cell]) for cell in nearest]
        cell = int(nearest[int(np.argmin(walks))])
        _, _, terminated, truncated, info = mapping.step_to_point(centres[cell])
        refused = refused | {cell} if info.get("rejection") else set()
        done = terminated or truncated
    env.close()
    return watch.steps_until(INSTRUCTED_SHARE)


def instruction_row(spec: str, steps: int, seed: int) -> dict[str, Any]:
    """One house's instruction-following numbers: the same explorer told "explore the ROOM
    first" and untold, each stopped once the room is 90% observed, and the house-knowing
    oracle (:func:`oracle_steps_to_cover`) as a reference (empty: no such room)."""
    plain = steps_to_cover(spec, steps, seed, instructed=False)
    told = steps_to_cover(spec, steps, seed, instructed=True)
    if plain is None or told is None:
        return {}
    return {
        "instructed_room": plain[0],
        "room_steps_plain": plain[1],
        "room_steps_instructed": told[1],
        "room_steps_oracle": oracle_steps_to_cover(spec, steps, seed),
    }


def ratio_interval(
    ours: Sequence[float], theirs: Sequence[float], resamples: int = 10_000, seed: int = 0
) -> list[float]:
    """95% bootstrap interval of mean(ours) / mean(theirs) over houses resampled in pairs (the
    same house for both agents): how far the ratio of 20 houses could move on another 20."""
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    pick = np.random.default_rng(seed).integers(len(a), size=(resamples, len(a)))
    ratios = a[pick].mean(axis=1) / b[pick].mean(axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def instruction_summary(rows: Sequence[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Told / untold steps over the houses (a room not covered within the budget counts the
    whole budget: a lower bound): the mean of the houses' ratios (the issue's key), and the
    pooled ratio, all told steps over all untold steps, which weighs a house by how long its
    untold run took, so that a room in view from the start (5 steps told against 7) does
    not count as much as one found after 400 steps; how many runs never covered their room;
    and the oracle's mean ratio, oracle / untold steps, the least a target can ask of an agent
    that does not know the house."""
    told_steps, plain_steps, oracle_ratios, censored = [], [], [], 0
    for row in rows:
        if "instructed_room" not in row:
            continue
        told, plain = row["room_steps_instructed"], row["room_steps_plain"]
        # at least 1 step each: a room both runs see whole from the start is no gain
        told_steps.append(max(steps if told is None else told, 1))
        plain_steps.append(max(steps if plain is None else plain, 1))
        censored += (told is None) + (plain is None)
        if "room_steps_oracle" in row:
            oracle = row["room_steps_oracle"]
            oracle_ratios.append(max(steps if oracle is None else oracle, 1) / plain_steps[-1])
    ratios = [t / p for t, p in zip(told_steps, plain_steps, strict=True)]
    return {
        "instruction_steps_ratio": round(statistics.fmean(ratios), 4) if ratios else None,
        "instruction_steps_ratio_pooled": round(sum(told_steps) / sum(plain_steps), 4) if ratios else None,
        "instruction_houses": len(ratios),
        "instruction_runs_not_covered": censored,
        "instruction_steps_ratio_oracle": round(statistics.fmean(oracle_ratios), 4)
        if oracle_ratios
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--houses", choices=("v2", "v1"), default="v2", help="held-out house generation")
    parser.add_argument("--scenes", type=int, default=20, help="number of held-out scenes (seeds 1000..)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=1000,
        help="first house seed (1000: the held-out houses; 2000: the houses rules are tuned on)",
    )
    parser.add_argument("--steps", type=int, default=500, help="step budget")
    parser.add_argument("--quick", action="store_true", help="2 scenes, 120 steps, overhead on 1")
    parser.add_argument(
        "--instruction-only", action="store_true", help="only the instruction-following runs and keys"
    )
    parser.add_argument(
        "--overhead-scenes", type=int, default=3, help="scenes the runtime overhead is measured on"
    )
    args = parser.parse_args()
    n, steps = (2, 120) if args.quick else (args.scenes, args.steps)
    if args.quick:
        args.overhead_scenes = 1
    seeds = list(range(args.first_seed, args.first_seed + n))
    dfs: list[dict[str, Any]] = []
    baselines: dict[str, list[dict[str, Any]]] = {name: [] for name in BASELINES}
    per_scene: list[dict[str, Any]] = []
    if args.instruction_only:
        for seed in seeds:
            spec = scene(seed, args.houses)
            per_scene.append({"scene": spec, **instruction_row(spec, steps, seed)})
            print(json.dumps(per_scene[-1]), flush=True)
        summary = instruction_summary(per_scene, steps)
        print(json.dumps({"houses": args.houses, "scenes": n, "steps": steps, **summary}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            spec = scene(seed, args.houses)
            d, _, _ = run_dfs(spec, steps, Path(tmp) / f"{seed}.sqlite")
            dfs.append(d)
            row: dict[str, Any] = {
                "scene": spec,
                "explorable_m2": round(d["explorable_m2"], 2),
                "dfs_m2": round(d["coverage_m2"], 2),
                "dfs_ratio": round(d["coverage_ratio"], 4),
                "dfs_auc": round(d["coverage_auc"], 4),
            }
            for name in BASELINES:
                b = run_baseline(name, spec, steps)
                baselines[name].append(b)
                row[f"{name}_m2"] = round(b["coverage_m2"], 2)
                row[f"{name}_ratio"] = round(b["coverage_ratio"], 4)
                row[f"{name}_auc"] = round(b["coverage_auc"], 4)
            row.update(instruction_row(spec, steps, seed))
            per_scene.append(row)
            print(json.dumps(row), flush=True)
        # Runtime overhead: the time per decision spent outside the node functions, in the
        # graph with SQLite checkpoints (without and with a listener for the streamed events)
        # and in a bare loop making the same decisions. The work itself is timed away, so its
        # run-to-run noise cancels; the first scenes, interleaved, give a few dozen decisions.
        outside = {"graph": 0.0, "streaming": 0.0, "bare": 0.0}
        decisions = {"graph": 0, "streaming": 0, "bare": 0}
        for seed in seeds[: args.overhead_scenes]:
            spec = scene(seed, args.houses)
            runs = (
                ("graph", run_dfs(spec, steps, Path(tmp) / f"overhead-{seed}.sqlite")),
                ("streaming", run_dfs(spec, steps, Path(tmp) / f"streaming-{seed}.sqlite", listen=True)),
                ("bare", run_dfs_bare(spec, steps)),
            )
            for name, (_, made, seconds) in runs:
                decisions[name] += made
                outside[name] += seconds
        per_decision = {name: outside[name] / max(decisions[name], 1) for name in outside}
    mean = statistics.fmean
    result: dict[str, Any] = {"houses": args.houses, "scenes": n, "steps": steps}
    for name, runs in (("dfs", dfs), *baselines.items()):
        result[f"{name}_coverage_m2"] = round(mean(r["coverage_m2"] for r in runs), 3)
        result[f"{name}_coverage_ratio"] = round(mean(r["coverage_ratio"] for r in runs), 4)
        result[f"{name}_auc"] = round(mean(r["coverage_auc"] for r in runs), 4)
    strongest = max(BASELINES, key=lambda name: (result[f"{name}_coverage_m2"], result[f"{name}_auc"]))
    result["strongest_baseline"] = strongest
    result["baseline_coverage_ratio"] = result[f"{strongest}_coverage_ratio"]
    result["setting_valid"] = result["baseline_coverage_ratio"] <= VALID_BASELINE_COVERAGE
    result["coverage_ratio_vs_best"] = round(
        result["dfs_coverage_m2"] / result[f"{strongest}_coverage_m2"], 4
    )
    result["auc_ratio_vs_best"] = round(result["dfs_auc"] / result[f"{strongest}_auc"], 4)
    result["coverage_ratio_vs_best_ci95"] = ratio_interval(
        [r["coverage_m2"] for r in dfs], [r["coverage_m2"] for r in baselines[strongest]]
    )
    result["auc_ratio_vs_best_ci95"] = ratio_interval(
        [r["coverage_auc"] for r in dfs], [r["coverage_auc"] for r in baselines[strongest]]
    )
    result.update(instruction_summary(per_scene, steps))
    # the earlier keys: the explorer against frontier-utility
    result["coverage_ratio_vs_frontier"] = round(
        result["dfs_coverage_m2"] / result["frontier-utility_coverage_m2"], 4
    )
    result["auc_ratio_vs_frontier"] = round(result["dfs_auc"] / result["frontier-utility_auc"], 4)
    if len(set(decisions.values())) != 1:
        raise SystemExit(f"the runs made different numbers of decisions: {decisions}")
    result["runtime_decisions"] = decisions["graph"]
    result["runtime_graph_outside_nodes_ms"] = round(1000 * per_decision["graph"], 3)
    result["runtime_bare_outside_nodes_ms"] = round(1000 * per_decision["bare"], 3)
    result["runtime_overhead_ms"] = round(1000 * (per_decision["graph"] - per_decision["bare"]), 3)
    result["runtime_overhead_streaming_ms"] = round(
        1000 * (per_decision["streaming"] - per_decision["bare"]), 3
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
