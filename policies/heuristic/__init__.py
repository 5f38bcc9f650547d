"""Non-learned exploration baselines: random walk and frontier exploration."""

from __future__ import annotations

from collections.abc import Callable

from embodia.errors import EmbodiaError
from embodia.policies.heuristic.base import EpisodeView, ExplorationAgent
from embodia.policies.heuristic.frontier import FrontierAgent, FrontierConfig
from embodia.policies.heuristic.random_walk import RandomWalkAgent

AGENTS: dict[str, Callable[[], ExplorationAgent]] = {
    "frontier": lambda: FrontierAgent(FrontierConfig(utility="nearest")),
    "frontier-utility": lambda: FrontierAgent(FrontierConfig(utility="utility")),
    "random": RandomWalkAgent,
}


def make_agent(name: str) -> ExplorationAgent:
    """An exploration agent by name (``frontier``, ``frontier-utility``, ``random``)."""
    if name not in AGENTS:
        raise EmbodiaError(f"unknown agent {name!r}: expected one of {', '.join(sorted(AGENTS))}")
    return AGENTS[name]()


__all__ = [
    "AGENTS",
    "EpisodeView",
    "ExplorationAgent",
    "FrontierAgent",
    "FrontierConfig",
    "RandomWalkAgent",
    "make_agent",
]
