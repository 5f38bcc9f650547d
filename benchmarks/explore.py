"""Depth-first explorer (heuristic policy) vs the frontier-utility baseline, and the runtime's cost.

    python benchmarks/explore.py [--scenes N] [--steps T] [--overhead-scenes K] [--quick]

Held-out scenes: procedural seeds 1000.. with 6-8 rooms (rooms = 6 + seed % 3), so neither
agent saturates in the budget. Both agents see 128x256 panoramas; frontier-utility runs
unchanged on the primitive env, the explorer on the waypoint env. Runtime overhead, on the
first K scenes: the explorer's node functions run as the LangGraph graph with a SQLite
checkpoint per decision (without and with a listener for the streamed events) and in a
bare Python loop; the difference in time spent outside the nodes, per decision, is the
runtime's cost. Last line: one JSON object (coverage_ratio_vs_frontier, auc_ratio_vs_frontier,
dfs_coverage_m2, frontier_coverage_m2, dfs_auc, frontier_auc, runtime_overhead_ms, ...).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium

import embodia.envs  # noqa: F401  (registers the env ids)
from embodia.agents import explorer
from embodia.agents.baselines import make_agent
from embodia.agents.runtime import run_config, sqlite_checkpointer, stream_run
from embodia.evals.explore import _EnvView

PANORAMA = {"panorama_height": 128, "panorama_width": 256}


def scene(seed: int) -> str:
    return f"procedural:seed={seed},rooms={6 + seed % 3}"


def run_frontier(spec: str, steps: int) -> dict[str, Any]:
    env = gymnasium.make("embodia/ActiveMapping-v0", max_steps=steps, **PANORAMA)
    observation, info = env.reset(seed=0, options={"scene": spec})
    agent = make_agent("frontier-utility")
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


def run_dfs_bare(spec: str, steps: int) -> tuple[dict[str, Any], int, float]:
    """The same node functions in a plain loop (no graph, no checkpoints), timed the same way."""
    env = _explorer_env(spec, steps)
    context = explorer.ExplorerContext(env=env.unwrapped, policy=None, instruction="", recorder=None)
    runtime = SimpleNamespace(context=context)
    timer = NodeTimer()
    nodes = [
        timer(getattr(explorer, name))
        for name in ("observe", "map_update", "regions", "propose", "select", "navigate", "update_tree")
    ]
    state: dict[str, Any] = {"decision": 0, "events": []}
    start = time.perf_counter()
    while not state.get("done"):
        for node in nodes:
            update = node(state, runtime)
            state["events"] += update.pop("events", [])  # the state's one reducer
            state.update(update)
    total = time.perf_counter() - start
    info = env.unwrapped._info()
    env.close()
    return info, int(state["decision"]), total - timer.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=20, help="number of held-out scenes (seeds 1000..)")
    parser.add_argument("--steps", type=int, default=500, help="step budget")
    parser.add_argument("--quick", action="store_true", help="3 scenes, 300 steps (under a minute)")
    parser.add_argument(
        "--overhead-scenes", type=int, default=3, help="scenes the runtime overhead is measured on"
    )
    args = parser.parse_args()
    n, steps = (3, 300) if args.quick else (args.scenes, args.steps)
    seeds = list(range(1000, 1000 + n))
    dfs, frontier, per_scene = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            spec = scene(seed)
            d, _, _ = run_dfs(spec, steps, Path(tmp) / f"{seed}.sqlite")
            f = run_frontier(spec, steps)
            dfs.append(d)
            frontier.append(f)
            per_scene.append(
                {
                    "scene": spec,
                    "dfs_auc": round(d["coverage_auc"], 4),
                    "frontier_auc": round(f["coverage_auc"], 4),
                    "dfs_m2": round(d["coverage_m2"], 2),
                    "frontier_m2": round(f["coverage_m2"], 2),
                    "dfs_ratio": round(d["coverage_ratio"], 4),
                    "frontier_ratio": round(f["coverage_ratio"], 4),
                }
            )
        # Runtime overhead: the time per decision spent outside the node functions, in the
        # graph with SQLite checkpoints (without and with a listener for the streamed events)
        # and in a bare loop making the same decisions. The work itself is timed away, so its
        # run-to-run noise cancels; the first scenes, interleaved, give a few dozen decisions.
        outside = {"graph": 0.0, "streaming": 0.0, "bare": 0.0}
        decisions = {"graph": 0, "streaming": 0, "bare": 0}
        for seed in seeds[: args.overhead_scenes]:
            spec = scene(seed)
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
    result = {
        "scenes": n,
        "steps": steps,
        "dfs_coverage_m2": round(mean(d["coverage_m2"] for d in dfs), 3),
        "frontier_coverage_m2": round(mean(f["coverage_m2"] for f in frontier), 3),
        "dfs_auc": round(mean(d["coverage_auc"] for d in dfs), 4),
        "frontier_auc": round(mean(f["coverage_auc"] for f in frontier), 4),
        "runtime_decisions": decisions["graph"],
        "runtime_graph_outside_nodes_ms": round(1000 * per_decision["graph"], 3),
        "runtime_bare_outside_nodes_ms": round(1000 * per_decision["bare"], 3),
    }
    if len(set(decisions.values())) != 1:
        raise SystemExit(f"the runs made different numbers of decisions: {decisions}")
    result["coverage_ratio_vs_frontier"] = round(
        result["dfs_coverage_m2"] / result["frontier_coverage_m2"], 4
    )
    result["auc_ratio_vs_frontier"] = round(result["dfs_auc"] / result["frontier_auc"], 4)
    result["runtime_overhead_ms"] = round(1000 * (per_decision["graph"] - per_decision["bare"]), 3)
    result["runtime_overhead_streaming_ms"] = round(
        1000 * (per_decision["streaming"] - per_decision["bare"]), 3
    )
    for row in per_scene:
        print(json.dumps(row))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
