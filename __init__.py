"""embodia: a framework for embodied and multimodal agents.

The repository root is this package: ``envs/sim/scene.py`` is ``embodia.envs.sim.scene``.
Importing ``embodia`` stays cheap; heavy modules (Open3D, torch, habitat_sim) load only when
the subpackage that needs them is imported.
"""

from embodia.errors import EmbodiaError

__version__ = "0.1.0"

__all__ = ["EmbodiaError", "__version__"]
