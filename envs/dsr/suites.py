"""Seeded instance generation for the four DSR-Bench suites, and their JSONL form.

- ``main``: the 31 operations of the 17 non-spatial structures, 30 instances per (operation,
  length): 2,790.
- ``spatial``: K-D heap, K-D tree, geometric graph (construct, BFS) with the dimension cycling
  1D/2D/3D/5D over each group's 30 instances, plus K-D tree construction on moons, circles
  and blobs in 2D: 5 groups, 450.
- ``realistic``: queue, BST and graph problems retold as narratives with distractors: 270.
- ``code``: seven main operations posed for a model that writes code, the prompt mode cycling
  CodeOnly / CodeEnforce / CodeMaybe over each group's 30: 630.

4,140 in all (``docs/dsr.md`` explains how this split was chosen). Every instance is drawn from
``random.Random(f"{seed}:{instance id}")``, so any single instance can be regenerated alone
and generation order never matters.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embodia.core.runs import read_jsonl as read_jsonl_lines
from embodia.envs.dsr import realistic
from embodia.envs.dsr.core import LENGTHS, OPERATIONS, DSRError, Problem, Step, draw_size, get_operation
from embodia.envs.dsr.structures import spatial

SCHEMA_VERSION = 1
SUITES = ("main", "spatial", "realistic", "code")
PER_GROUP = 30
"""Instances per (operation, length) in every suite."""
CODE_MODES = ("CodeOnly", "CodeEnforce", "CodeMaybe")
CODE_OPERATIONS = (
    "stack.compound",
    "queue.compound",
    "heap.compound",
    "bst.insert",
    "graph.bfs",
    "dsu.compound",
    "lru_cache.cache",
)
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Group:
    """A set of 30-per-length instances: one operation, one suite, one variant cycle."""

    suite: str
    operation: str
    variants: tuple[Mapping[str, Any], ...] = ({},)
    tag: str = ""
    """Tells two groups of the same operation in one suite apart (``nonuniform``)."""

    @property
    def name(self) -> str:
        return f"{self.operation}@{self.tag}" if self.tag else self.operation


IDENTITY = ("id", "suite", "category", "structure", "operation", "length")
"""The :class:`Instance` fields that name it and where it comes from."""


@dataclass(frozen=True)
class Instance:
    """One benchmark question with everything needed to prompt, score and replay it."""

    id: str
    suite: str
    category: str
    structure: str
    operation: str
    """``structure.name`` of the operation whose semantics the truth follows."""
    length: str
    index: int
    variant: dict[str, Any]
    question: str
    truth: Any
    data: dict[str, Any]
    steps: tuple[Step, ...] = ()
    initial_state: Any = None
    rules: str = ""
    """Extra answer-format rules of a narrative (the operation's own rules come from the registry)."""
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """The fields that name the instance and where it comes from (:data:`IDENTITY`), as records
        and infos list them."""
        return {name: getattr(self, name) for name in IDENTITY}

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        record["steps"] = [{"label": s.label, "state": s.state} for s in self.steps]
        return record

    @classmethod
    def from_json(cls, record: Mapping[str, Any], where: str = "instance") -> Instance:
        version = record.get("schema_version")
        if version != SCHEMA_VERSION:
            raise DSRError(f"{where}: schema_version {version!r}, this embodia reads {SCHEMA_VERSION}")
        try:
            fields = dict(record)
            fields["steps"] = tuple(Step(s["label"], s["state"]) for s in record.get("steps", ()))
            instance = cls(**fields)
        except (TypeError, KeyError) as error:
            raise DSRError(f"{where}: not a DSR instance ({error})") from None
        get_operation(instance.operation)
        if instance.suite not in SUITES or instance.length not in LENGTHS:
            raise DSRError(f"{where}: unknown suite {instance.suite!r} or length {instance.length!r}")
        return instance


def groups(suite: str) -> list[Group]:
    if suite == "main":
        return [Group("main", key) for key, op in OPERATIONS.items() if op.category != "spatial"]
    if suite == "spatial":
        dims = tuple({"dim": d} for d in spatial.DIMS)
        shapes = tuple({"dim": 2, "distribution": d} for d in spatial.DISTRIBUTIONS)
        found = [Group("spatial", key, dims) for key, op in OPERATIONS.items() if op.category == "spatial"]
        return [*found, Group("spatial", "kd_tree.construct", shapes, tag="nonuniform")]
    if suite == "realistic":
        return [Group("realistic", key) for key in realistic.NARRATIVES]
    if suite == "code":
        return [Group("code", key, tuple({"mode": m} for m in CODE_MODES)) for key in CODE_OPERATIONS]
    raise DSRError(f"unknown DSR suite {suite!r}: expected one of {', '.join(SUITES)}")


def instance_id(group: Group, length: str, index: int) -> str:
    return f"{group.suite}/{group.name}/{length}/{index:02d}"


def make_instance(group: Group, length: str, index: int, seed: int = DEFAULT_SEED) -> Instance:
    ident = instance_id(group, length, index)
    rng = random.Random(f"{seed}:{ident}")
    variant = dict(group.variants[index % len(group.variants)])
    operation = get_operation(group.operation)
    size = draw_size(rng, length)
    rules = ""
    problem: Problem
    if group.suite == "realistic":
        problem = realistic.NARRATIVES[group.operation](rng, size, variant)
        rules = realistic.NARRATIVE_RULES[group.operation]
    else:
        problem = operation.generate(rng, size, {k: v for k, v in variant.items() if k != "mode"})
    return Instance(
        id=ident,
        suite=group.suite,
        category=operation.category,
        structure=operation.structure,
        operation=operation.key,
        length=length,
        index=index,
        variant=variant,
        question=problem.question,
        truth=problem.truth,
        data=problem.data,
        steps=problem.steps,
        initial_state=problem.initial_state,
        rules=rules,
        extra={"size": size, "seed": seed},
    )


def generate(
    suites: Sequence[str] = SUITES,
    *,
    seed: int = DEFAULT_SEED,
    lengths: Sequence[str] = tuple(LENGTHS),
    operations: Sequence[str] | None = None,
    per_group: int = PER_GROUP,
) -> Iterator[Instance]:
    """Every instance of ``suites`` (optionally only some lengths / operations), in a fixed order."""
    for length in lengths:
        if length not in LENGTHS:
            raise DSRError(f"unknown length {length!r}: expected one of {', '.join(LENGTHS)}")
    wanted = None if operations is None else set(operations)
    if wanted is not None:
        for key in wanted:
            get_operation(key)
    for suite in suites:
        for group in groups(suite):
            if wanted is not None and group.operation not in wanted:
                continue
            for length in lengths:
                for index in range(per_group):
                    yield make_instance(group, length, index, seed)


def write_jsonl(instances: Iterable[Instance], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for instance in instances:
            out.write(json.dumps(instance.to_json(), separators=(",", ":")) + "\n")
            count += 1
    return count


def read_jsonl(path: Path) -> list[Instance]:
    """The instances of a JSONL file (one instance object a line); a bad line is an error
    naming the file and the line."""
    return [
        Instance.from_json(record, f"{path}:{number}")
        for number, record in read_jsonl_lines(path, strict=True, error=DSRError, what="instance file")
    ]


def stats(instances: Iterable[Instance]) -> dict[str, Any]:
    """Counts by suite, category, structure, operation and length (what ``embodia dsr stats`` prints)."""
    by: dict[str, Counter[str]] = {
        k: Counter() for k in ("suite", "category", "structure", "operation", "length")
    }
    total = 0
    for instance in instances:
        total += 1
        for key, counter in by.items():
            counter[getattr(instance, key)] += 1
    return {"instances": total, **{key: dict(sorted(counter.items())) for key, counter in by.items()}}
