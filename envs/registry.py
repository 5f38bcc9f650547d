"""Every gymnasium id embodia defines, and the one place that registers them.

:data:`ENTRY_POINTS` maps each id to its class as a ``"module:Class"`` string, the way
gymnasium's own ids are registered: gymnasium imports the module when the env is made, so
registering an id loads no environment code (no DSR structure, no simulator, no Open3D).

Why registration waits for gymnasium instead of importing it. Gymnasium keeps its registry in
``gymnasium.envs.registration``, and importing any part of gymnasium runs its package
``__init__``, which imports numpy: about 100 ms on a 2-core machine, more than the whole 60 ms
budget of ``import embodia`` (``docs/benchmarks.md``, "Start-up"). Gymnasium 1.x has no
entry-point plugin group, so the ids have to be put there by code. But nothing can look an id up
before gymnasium is imported (``gymnasium.make``, ``make_vec``, ``spec``, ``registry`` and
``register_envs`` all live in it), so :func:`register_when_gymnasium_loads` registers at once
when gymnasium is already imported, and otherwise leaves a one-shot finder on
``sys.meta_path`` that registers the ids right after gymnasium's own ``__init__`` has run,
before ``import gymnasium`` returns to whoever asked. Either way, after ``import embodia``
every id is in ``gymnasium.registry`` whenever gymnasium can be asked, and a program that never
imports gymnasium (``embodia --help``) never pays for it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing costs more than this whole module
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

ENTRY_POINTS: dict[str, str] = {
    "embodia/ActiveMapping-v0": "embodia.envs.mapping.active_mapping:ActiveMappingEnv",
    "embodia/ActiveMappingWaypoint-v0": "embodia.envs.mapping.active_mapping:ActiveMappingWaypointEnv",
    "embodia/DSR-v0": "embodia.envs.dsr.env:DSREnv",
    "embodia/DSRInteractive-v0": "embodia.envs.dsr.env:DSRInteractiveEnv",
    "embodia/LiveGaming-v0": "embodia.envs.streams.env:LiveGamingEnv",
    "embodia/Puzzle-v0": "embodia.envs.puzzles.env:PuzzleEnv",
}
"""Every env id embodia registers and the class ``gymnasium.make`` builds for it (no id has
default kwargs: each class's own defaults apply)."""


def entry_points(package: str) -> dict[str, str]:
    """The ids whose class lives in ``embodia.envs.PACKAGE`` (``"dsr"``, ``"mapping"``, ...)."""
    prefix = f"embodia.envs.{package}."
    return {env_id: entry for env_id, entry in ENTRY_POINTS.items() if entry.startswith(prefix)}


def register_envs(env_ids: Sequence[str] | None = None) -> None:
    """Register ``env_ids`` (default: all of :data:`ENTRY_POINTS`) with gymnasium, importing it;
    ids already registered are left alone, so registering twice is neither a warning nor an error."""
    import gymnasium

    for env_id in ENTRY_POINTS if env_ids is None else env_ids:
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=ENTRY_POINTS[env_id])


class _RegisterAfterGymnasium:
    """A ``sys.meta_path`` finder that finds nothing itself: when ``gymnasium`` is about to be
    imported, it takes itself off ``sys.meta_path``, asks the other finders for gymnasium's spec,
    and wraps that spec's loader so that :func:`register_envs` runs once gymnasium's ``__init__``
    has finished."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "gymnasium":
            return None
        _disarm()
        spec = _spec_from_the_other_finders(fullname, path, target)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec  # nothing to wrap (gymnasium missing, or an unusual loader): import as usual
        exec_module = loader.exec_module

        def exec_then_register(module: ModuleType) -> None:
            try:
                exec_module(module)
            except BaseException:
                _arm()  # gymnasium failed to import; a later attempt registers if it succeeds
                raise
            finally:
                del loader.exec_module  # back to the class's method
            register_envs()

        loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


def _spec_from_the_other_finders(
    fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> ModuleSpec | None:
    """What the import system would find without this module's finder (as ``importlib.util.find_spec``
    does, without importing it)."""
    for finder in list(sys.meta_path):
        find_spec = getattr(finder, "find_spec", None)
        spec = None if find_spec is None else find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


_FINDER = _RegisterAfterGymnasium()


def _arm() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _disarm() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def register_when_gymnasium_loads() -> None:
    """Make every id of :data:`ENTRY_POINTS` known to gymnasium without importing gymnasium:
    now if it is already imported, otherwise as soon as it is (see the module docstring)."""
    if "gymnasium" in sys.modules:
        register_envs()
    else:
        _arm()
