"""An instance's truth recomputed from its ``data`` by the reference simulators.

Every operation registers a ``replay`` (:attr:`~embodia.envs.dsr.core.Operation.replay`) and every
narrative one in :data:`~embodia.envs.dsr.realistic.NARRATIVE_REPLAYS`; both are the code the
generators take their truth from. So an instance file, whoever wrote it, can be checked: a stored
truth that differs from :func:`replay` was not produced by these rules. ``data`` is all a replay
reads: where a variant matters (a B+ tree's order, a K-D tree's points) the data carries it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from embodia.envs.dsr import realistic
from embodia.envs.dsr.core import DSRError, Replay, get_operation

if TYPE_CHECKING:
    from embodia.envs.dsr.suites import Instance

REALISTIC_SUITE = "realistic"
"""The suite whose instances are narratives: their data names people and towns, not integers."""


class _Fields(dict[str, Any]):
    """An instance's data that names the operation and the field when a replay reads a missing one."""

    def __init__(self, operation: str, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.operation = operation

    def __missing__(self, field: str) -> Any:
        raise DSRError(f"{self.operation}: the instance data has no field {field!r} (it has {sorted(self)})")


def replay_data(operation: str, data: Mapping[str, Any], *, narrative: bool = False) -> Any:
    """The truth of an ``operation`` instance with this ``data`` (a narrative's when ``narrative``).

    DSRError, naming the operation, for an operation without a replay, a missing data field or data
    the reference cannot run (a key that is not a number, a given tree that breaks its rules...)."""
    get_operation(operation)
    replayer: Replay | None
    if narrative:
        replayer = realistic.NARRATIVE_REPLAYS.get(operation)
        missing = f"{operation} has no realistic narrative to replay"
    else:
        replayer = get_operation(operation).replay
        missing = f"{operation} has no replay"
    if replayer is None:
        raise DSRError(missing)
    if not isinstance(data, Mapping):
        raise DSRError(f"{operation}: the instance data is a {type(data).__name__}, not an object")
    try:
        return replayer(_Fields(operation, data))
    except (ArithmeticError, AttributeError, LookupError, TypeError, ValueError) as error:
        raise DSRError(f"{operation}: cannot replay the instance data: {error!r}") from error


def replay(instance: Instance) -> Any:
    """The truth of ``instance`` recomputed from its data (:func:`replay_data`)."""
    return replay_data(instance.operation, instance.data, narrative=instance.suite == REALISTIC_SUITE)
