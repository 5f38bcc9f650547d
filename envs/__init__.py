"""Gymnasium environments, with their tasks and their measures.

``envs.mapping`` is active mapping in a simulator (``embodia.sim``); ``envs.dsr`` is DSR-Bench;
``envs.streams`` holds the live game streams; ``envs.puzzles`` the visual reasoning puzzles.

Importing ``embodia.envs`` makes every gym id of :data:`embodia.envs.registry.ENTRY_POINTS`
known to gymnasium, so ``gymnasium.make("embodia/ActiveMapping-v0")`` works afterwards, and
loads no environment: each id names its class as a ``"module:Class"`` string that gymnasium
imports when the env is made, and gymnasium itself is not imported here (``envs.registry``
says how the ids still reach it). The subpackages load on first use, ``embodia.envs.dsr`` as
an attribute included.
"""

from __future__ import annotations

from embodia.envs.registry import register_when_gymnasium_loads

TYPE_CHECKING = False  # typing's own would import typing, which costs more than this package
if TYPE_CHECKING:
    from types import ModuleType

_SUBPACKAGES = ("dsr", "mapping", "puzzles", "streams")

register_when_gymnasium_loads()


def __getattr__(name: str) -> ModuleType:
    if name in _SUBPACKAGES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
