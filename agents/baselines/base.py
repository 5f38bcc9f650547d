"""What an exploration agent needs from an ActiveMapping episode, and the agent interface."""

from __future__ import annotations

from typing import Any, Protocol

from embodia.perception.bev import BEVMap
from embodia.sim.protocol import SimConfig

#: Discrete action ids of ``embodia/ActiveMapping-v0`` (the simulator's ACTIONS order).
MOVE_FORWARD, TURN_LEFT, TURN_RIGHT = 0, 1, 2


class EpisodeView(Protocol):
    """The parts of an ActiveMapping env an agent may read: its own map and its body.

    The BEV is built only from the agent's own observations, so planning on it is honest;
    nothing here exposes the simulator's ground truth.
    """

    @property
    def bev(self) -> BEVMap: ...

    @property
    def sim_config(self) -> SimConfig: ...


class ExplorationAgent(Protocol):
    """A policy over primitive actions; ``reset`` is called at the start of every episode."""

    name: str

    def reset(self, episode: EpisodeView, seed: int | None = None) -> None: ...

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int: ...
