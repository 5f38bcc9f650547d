"""Choosing a simulator backend by name (``--sim embedded|habitat``).

``embedded`` is embodia's CPU simulator (:class:`~embodia.sim.simulator.EmbeddedSimulator`);
``habitat`` is habitat-sim behind the same protocol
(:class:`~embodia.sim.habitat.simulator.HabitatSimulator`, which needs ``habitat_sim``, a conda
package, and is imported only when chosen).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Literal

from embodia.errors import EmbodiaError
from embodia.sim.loading import UP_AXES, UpAxis
from embodia.sim.protocol import SimConfig, Simulator

SimulatorKind = Literal["embedded", "habitat"]
SIMULATORS: tuple[SimulatorKind, ...] = ("embedded", "habitat")

SimulatorFactory = Callable[[SimConfig], Simulator]


def check_simulator_kind(kind: str, up: str = "auto") -> SimulatorKind:
    """``kind`` if it names a backend that takes ``up``, else an error naming the problem."""
    if kind not in SIMULATORS:
        raise EmbodiaError(f"unknown simulator {kind!r}: expected one of {', '.join(SIMULATORS)}")
    if up not in UP_AXES:
        raise EmbodiaError(f"invalid up axis {up!r}: expected one of {', '.join(UP_AXES)}")
    if kind == "habitat" and up != "auto":
        raise EmbodiaError(
            "--up is for the embedded simulator: habitat-sim takes a scene's up axis from its "
            "stage config (NAME.stage_config.json beside the mesh)"
        )
    return "habitat" if kind == "habitat" else "embedded"


def simulator_factory(kind: str = "embedded", up: UpAxis = "auto") -> SimulatorFactory:
    """What builds a simulator of backend ``kind`` from a :class:`SimConfig`."""
    if check_simulator_kind(kind, up) == "habitat":
        from embodia.sim.habitat.simulator import HabitatSimulator, import_habitat_sim

        import_habitat_sim()  # not installed: the error that says how, before any run starts
        return HabitatSimulator
    from embodia.sim.simulator import EmbeddedSimulator

    return partial(EmbeddedSimulator, up=up)


def make_simulator(kind: str = "embedded", up: UpAxis = "auto", config: SimConfig | None = None) -> Simulator:
    """A simulator of backend ``kind`` (habitat: habitat-sim must be installed, else an error
    that says how to install it, raised here rather than at the first reset)."""
    return simulator_factory(kind, up)(config or SimConfig())
