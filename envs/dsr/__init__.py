"""DSR-Bench: data-structure reasoning environments (`docs/dsr.md`).

Importing this package registers all 35 operations (``structures/``) and the realistic
narratives; :func:`replay` recomputes any instance's truth from its data. The gymnasium ids
``embodia/DSR-v0`` and ``embodia/DSRInteractive-v0`` (classes in ``env.py``) are known to
gymnasium from ``import embodia`` on, without importing this package.
"""

from embodia.envs.dsr import realistic as realistic
from embodia.envs.dsr.core import (
    CATEGORIES,
    LENGTHS,
    OPERATIONS,
    DSRError,
    Operation,
    Problem,
    Step,
    canonical,
)
from embodia.envs.dsr.replay import replay, replay_data
from embodia.envs.dsr.structures import associative, hierarchical, hybrid, linear, network, spatial, temporal

__all__ = [
    "CATEGORIES",
    "LENGTHS",
    "OPERATIONS",
    "DSRError",
    "Operation",
    "Problem",
    "Step",
    "associative",
    "canonical",
    "hierarchical",
    "hybrid",
    "linear",
    "network",
    "replay",
    "replay_data",
    "spatial",
    "temporal",
]
