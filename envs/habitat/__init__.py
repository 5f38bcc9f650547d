"""habitat_sim backend behind the embodia simulator protocol (imported lazily).

habitat-sim has no usable PyPI wheel for Python 3.11; install it with conda:
``conda install habitat-sim headless -c conda-forge -c aihabitat``.
"""

from __future__ import annotations

import importlib.util
from typing import Any


def is_habitat_available() -> bool:
    return importlib.util.find_spec("habitat_sim") is not None


def __getattr__(name: str) -> Any:
    if name == "HabitatSimulator":
        from embodia.envs.habitat.simulator import HabitatSimulator

        return HabitatSimulator
    raise AttributeError(name)
