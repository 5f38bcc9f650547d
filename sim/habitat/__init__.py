"""habitat_sim backend behind the embodia simulator protocol (imported lazily).

``from embodia.sim.habitat import HabitatSimulator`` works everywhere; constructing one
needs habitat_sim, which has no usable PyPI wheel for Python 3.11::

    conda install habitat-sim headless -c conda-forge -c aihabitat

Without it the constructor raises :class:`~embodia.errors.BackendUnavailableError` with that
hint. Nothing here imports habitat_sim at import time.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

# Public names of embodia.sim.habitat.simulator, loaded on first access.
_LAZY = frozenset(
    {
        "INSTALL_HINT",
        "HabitatSimulator",
        "category_lookup_table",
        "cube_depth_to_radial_range",
        "import_habitat_sim",
        "instance_to_category",
        "island_mask",
    }
)

__all__ = sorted(_LAZY | {"is_habitat_available"})


def is_habitat_available() -> bool:
    """Whether ``habitat_sim`` can be found (without importing it)."""
    return importlib.util.find_spec("habitat_sim") is not None


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module("embodia.sim.habitat.simulator")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
