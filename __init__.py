"""embodia: a framework for embodied and multimodal agents.

The repository root is this package: ``sim/scene.py`` is ``embodia.sim.scene``.
Importing ``embodia`` makes the gymnasium env ids known (so ``gymnasium.register_envs(embodia)``
then ``gymnasium.make("embodia/ActiveMapping-v0")`` works) and otherwise stays cheap: it imports
neither gymnasium nor any environment (``embodia.envs.registry`` says how), and heavy modules
(numpy, Open3D, torch, habitat_sim) load only when the subpackage that needs them is imported.
"""

import embodia.envs  # noqa: F401  (makes the env ids known to gymnasium; imports no environment)
from embodia.errors import EmbodiaError

__version__ = "0.1.0"

__all__ = ["EmbodiaError", "__version__"]
