"""Active-mapping gymnasium environments over any simulator backend (``docs/mapping.md``).

Importing this package is cheap: it only knows the ids and their entry points. The env
classes (and the simulator, Open3D, the mapper) load when an env is made, or on first use
of ``ActiveMappingEnv`` / ``ActiveMappingWaypointEnv`` / ``MappingEnvConfig`` from here.
"""

from __future__ import annotations

from typing import Any

from embodia.envs import registry

ENTRY_POINTS: dict[str, str] = registry.entry_points("mapping")
"""Every env id this package registers and the class it makes (from :mod:`embodia.envs.registry`)."""

_LAZY = ("ActiveMappingEnv", "ActiveMappingWaypointEnv", "MappingEnvConfig")


def register_envs() -> None:
    """Register this package's ids with gymnasium; ids already registered are left alone."""
    registry.register_envs(list(ENTRY_POINTS))


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from embodia.envs.mapping import active_mapping

        return getattr(active_mapping, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENTRY_POINTS",
    "ActiveMappingEnv",
    "ActiveMappingWaypointEnv",
    "MappingEnvConfig",
    "register_envs",
]
