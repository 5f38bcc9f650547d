"""DSR-Bench: data-structure reasoning environments (seed abstract 2).

Importing this package registers all 35 operations (``structures/``), the realistic
narratives, and the gymnasium ids ``embodia/DSR-v0`` and ``embodia/DSRInteractive-v0``.
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
    "spatial",
    "temporal",
]
