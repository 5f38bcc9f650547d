"""The public DSR-Bench's released instance files as embodia instances, and truths checked by
replaying them (``docs/dsr.md``).

:func:`import_released` reads a copy of the public ``generation/`` folder (one folder per
structure and operation, a file per difficulty) with each operation's reader
(:mod:`.base`), builds each record's question from its data as embodia's generator words it,
and replays it on embodia's reference simulators. A stored truth the replay agrees with is
kept. Where they disagree, embodia keeps the rule its prompt states: the instance's truth is
the replay's, the stored one is kept in ``extra["released_truth"]``, and the disagreement is
reported (:class:`Disagreement`).

:func:`verify` replays the instances of any file (generated, imported, or the user's own) and
counts, per operation, the truths the replay agrees with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from embodia.envs.dsr.core import DSRError, canonical, get_operation

# each category module registers its readers when imported
from embodia.envs.dsr.released import (  # noqa: F401
    associative,
    hierarchical,
    hybrid,
    linear,
    network,
    spatial,
    temporal,
)
from embodia.envs.dsr.released.base import MODES, READERS, Record, ReleasedFormatError
from embodia.envs.dsr.replay import replay
from embodia.envs.dsr.suites import Instance

__all__ = [
    "READERS",
    "Disagreement",
    "ImportResult",
    "ReleasedFormatError",
    "Verification",
    "import_released",
    "verify",
]


@dataclass(frozen=True)
class Disagreement:
    """An instance whose stored truth embodia's replay does not reproduce."""

    id: str
    operation: str
    source: str
    """Where the instance came from (``file:line`` for a released one)."""
    data: dict[str, Any]
    stored: Any
    replayed: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operation": self.operation,
            "source": self.source,
            "data": self.data,
            "stored": self.stored,
            "replayed": self.replayed,
        }


@dataclass(frozen=True)
class ImportResult:
    instances: list[Instance]
    disagreements: list[Disagreement]
    files: int
    """Released files read."""
    by_operation: dict[str, int] = field(default_factory=dict)


def _variant_tag(variant: Mapping[str, Any]) -> str:
    return "".join(f"{key}={variant[key]}/" for key in sorted(variant))


def _instance(operation: str, length: str, index: int, record: Record) -> Instance:
    compute = get_operation(operation)
    if compute.question is None:
        raise DSRError(f"{operation} has no question builder: its released instances cannot be posed")
    question = compute.question(record.data)
    return Instance(
        id=f"released/{operation}/{length}/{_variant_tag(record.variant)}{index:02d}",
        suite="spatial" if compute.category == "spatial" else "main",
        category=compute.category,
        structure=compute.structure,
        operation=operation,
        length=length,
        index=index,
        variant=dict(record.variant),
        question=question,
        truth=record.truth,
        data=record.data,
        extra={"source": record.source},
    )


def import_released(root: Path | str, operations: Sequence[str] | None = None) -> ImportResult:
    """Every released instance under ``root`` (module docstring) of ``operations`` (default:
    every operation with a reader); an error naming the file and line of a record that is not
    in its layout, or when ``root`` holds none of the files."""
    folder = Path(root)
    if not folder.is_dir():
        raise DSRError(f"{folder} is not a folder")
    unknown = [op for op in operations or () if op not in READERS]
    if unknown:
        known = ", ".join(sorted(READERS))
        raise DSRError(f"no released-file reader for {unknown[0]!r}; there are readers for {known}")
    instances, disagreements, files = [], [], set()
    counts: Counter[str] = Counter()
    for operation in operations or sorted(READERS):
        for mode, length in MODES.items():
            index_by_variant: Counter[str] = Counter()
            for record in READERS[operation](folder, mode):
                files.add(record.source.rsplit(":", 1)[0])
                tag = _variant_tag(record.variant)
                instance = _instance(operation, length, index_by_variant[tag], record)
                index_by_variant[tag] += 1
                replayed = replay(instance)
                if canonical(replayed) != canonical(instance.truth):
                    disagreements.append(
                        Disagreement(
                            instance.id, operation, record.source, record.data, instance.truth, replayed
                        )
                    )
                    instance = replace(
                        instance, truth=replayed, extra={**instance.extra, "released_truth": instance.truth}
                    )
                instances.append(instance)
                counts[operation] += 1
    if not instances:
        raise DSRError(
            f"{folder} holds no released instance file (expected e.g. array/access/access_easy.txt)"
        )
    return ImportResult(instances, disagreements, len(files), dict(sorted(counts.items())))


@dataclass(frozen=True)
class Verification:
    agree: dict[str, int]
    """Per operation, the instances whose truth the replay reproduces."""
    total: dict[str, int]
    disagreements: list[Disagreement]


def verify(instances: Iterable[Instance]) -> Verification:
    """Replay every instance and compare with its stored truth (module docstring)."""
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    disagreements = []
    for instance in instances:
        total[instance.operation] += 1
        replayed = replay(instance)
        if canonical(replayed) == canonical(instance.truth):
            agree[instance.operation] += 1
        else:
            source = str(instance.extra.get("source", instance.id))
            disagreements.append(
                Disagreement(instance.id, instance.operation, source, instance.data, instance.truth, replayed)
            )
    return Verification({op: agree[op] for op in sorted(total)}, dict(sorted(total.items())), disagreements)
