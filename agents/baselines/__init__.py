"""Non-learned exploration baselines: random walk, frontier exploration and a frontier tour
planner (TARE's idea)."""

from __future__ import annotations

from collections.abc import Callable

from embodia.agents.baselines.base import EpisodeView, ExplorationAgent
from embodia.agents.baselines.frontier import FrontierAgent, FrontierConfig
from embodia.agents.baselines.random_walk import RandomWalkAgent
from embodia.agents.baselines.tour import TourAgent, TourConfig
from embodia.errors import EmbodiaError

AGENTS: dict[str, Callable[[], ExplorationAgent]] = {
    "frontier": lambda: FrontierAgent(FrontierConfig(utility="nearest")),
    "frontier-utility": lambda: FrontierAgent(FrontierConfig(utility="utility")),
    "tour": TourAgent,
    "random": RandomWalkAgent,
}


def make_agent(name: str) -> ExplorationAgent:
    """An exploration agent by name (``frontier``, ``frontier-utility``, ``tour``, ``random``)."""
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
    "TourAgent",
    "TourConfig",
    "make_agent",
]
