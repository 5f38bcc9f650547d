"""The pieces every DSR-Bench structure plugs into: operations, problems and the registry.

An :class:`Operation` is one (data structure, operation) pair of the benchmark, e.g.
``queue.compound`` or ``bst.inorder``. Its ``generate`` draws one problem of a given size from
a seeded ``random.Random`` by running the pure-Python reference implementation of the
structure, so the truth is whatever the reference computes under the benchmark's
deterministic tie-break rules (spelled out in ``rules`` and shown to the model).

Answers are compared on :func:`canonical` serialisations: ``str(value)`` with the spaces
removed, as the public benchmark does, with dict keys sorted so key order never matters.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from embodia.errors import EmbodiaError

CATEGORIES = ("linear", "temporal", "associative", "hierarchical", "network", "hybrid", "spatial")
Category = Literal["linear", "temporal", "associative", "hierarchical", "network", "hybrid", "spatial"]

LENGTHS: dict[str, tuple[int, int]] = {"short": (5, 10), "medium": (11, 20), "long": (21, 30)}
"""Size ranges (number of operations, elements or nodes) per length level, drawn uniformly."""

Comparison = Literal["exact", "set"]
"""``set``: the answer is a list compared as a set (LRU cache contents)."""


class DSRError(EmbodiaError):
    """A DSR-Bench input that cannot be used (unknown operation, malformed instance file...)."""


@dataclass(frozen=True)
class Step:
    """One operation of a problem and the structure's canonical state right after it."""

    label: str
    """The operation as the question states it, e.g. ``(enqueue, 82)``."""
    state: Any


@dataclass(frozen=True)
class Problem:
    """One generated question with its truth, as an operation's ``generate`` returns it."""

    question: str
    """The instance itself: starting state and operations (no description, rules or format)."""
    truth: Any
    """The canonical final answer, JSON-serialisable (lists, never tuples)."""
    data: dict[str, Any]
    """The raw inputs, JSON-serialisable: what the code probe and the interactive env use."""
    steps: tuple[Step, ...] = ()
    """Per-operation ground truth for stepwise diagnostics and ``DSRInteractive-v0``."""
    initial_state: Any = None
    """The canonical state before the first step (when the problem has steps)."""


Generator = Callable[[random.Random, int, Mapping[str, Any]], Problem]
"""``generate(rng, size, variant) -> Problem``; ``variant`` carries e.g. ``{"dim": 3}``."""

Replay = Callable[[Mapping[str, Any]], Any]
"""``replay(data) -> truth``: an instance's truth recomputed from its ``data`` alone (JSON: lists,
never tuples), by the same reference code its ``generate`` ran."""

Question = Callable[[Mapping[str, Any]], str]
"""``question(data) -> str``: the question an instance with this ``data`` (JSON: lists, never
tuples) is posed with, word for word as its ``generate`` writes it."""


@dataclass(frozen=True)
class Operation:
    """One (structure, operation) pair of the benchmark."""

    structure: str
    """Registry name of the structure, e.g. ``priority_queue``."""
    name: str
    """The operation, e.g. ``compound`` or ``inorder``."""
    category: Category
    display: str
    """How the prompt names the structure, e.g. ``priority queue``."""
    description: str
    """The ``full`` description: how the structure and this operation work, step by step."""
    rules: str
    """Task rules: the deterministic tie-breaks and what ``final_answer`` must contain."""
    answer_schema: dict[str, Any]
    """JSON schema of ``final_answer``."""
    generate: Generator
    comparison: Comparison = "exact"
    state_schema: dict[str, Any] | None = None
    """JSON schema of one step's state, when it differs from ``answer_schema``."""
    variants: tuple[Mapping[str, Any], ...] = field(default_factory=lambda: ({},))
    """The variants the spatial suite cycles through (dimension, point distribution)."""
    prepare: Callable[[Any], Any] | None = None
    """Applied to a parsed answer before comparison where the reference's evaluator does so
    (hashmap: buckets sorted by number); it must accept any JSON value and never raise."""
    replay: Replay | None = None
    """The truth recomputed from an instance's data: what the importer checks a stored truth against."""
    question: Question | None = None
    """The question embodia's generator asks for an instance's data: what an imported instance is
    posed with."""

    @property
    def key(self) -> str:
        return f"{self.structure}.{self.name}"


OPERATIONS: dict[str, Operation] = {}
"""Every registered operation by ``structure.name``; filled when :mod:`embodia.envs.dsr` is imported."""


def register(*operations: Operation) -> None:
    for operation in operations:
        if operation.key in OPERATIONS:
            raise ValueError(f"DSR operation {operation.key} registered twice")
        if operation.category not in CATEGORIES:
            raise ValueError(f"{operation.key}: unknown category {operation.category!r}")
        OPERATIONS[operation.key] = operation


def get_operation(key: str) -> Operation:
    try:
        return OPERATIONS[key]
    except KeyError:
        raise DSRError(f"unknown DSR operation {key!r}; known: {', '.join(sorted(OPERATIONS))}") from None


def canonical(value: Any) -> str:
    """The string answers are compared on: Python's ``str`` without spaces, dict keys sorted."""
    text = str(value)
    if "{" in text:  # only values holding dicts need their keys sorted (the common case is lists)
        text = str(_sorted_keys(value))
    return text.replace(" ", "")


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_keys(item) for item in value]
    return value


def draw_size(rng: random.Random, length: str) -> int:
    try:
        low, high = LENGTHS[length]
    except KeyError:
        raise DSRError(f"unknown length {length!r}: expected one of {', '.join(LENGTHS)}") from None
    return rng.randint(low, high)


def op_label(name: str, *args: Any) -> str:
    """``(enqueue, 82)``: the way questions list operations."""
    return "(" + ", ".join([name, *(str(a) for a in args)]) + ")"


def list_schema(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


INT: dict[str, Any] = {"type": "integer"}
INT_LIST = list_schema(INT)
STR_LIST = list_schema({"type": "string"})


def distinct_values(rng: random.Random, count: int, low: int = 0, high: int = 99) -> list[int]:
    """``count`` distinct integers in [low, high] (tree keys, graph labels)."""
    return rng.sample(range(low, high + 1), count)


KEY_LOW, KEY_HIGH = 0, 99
"""The key range of the tree and heap structures."""


def fresh_key(rng: random.Random, present: Iterable[int], low: int = KEY_LOW, high: int = KEY_HIGH) -> int:
    """A key in [low, high] not in ``present``; falls back to [KEY_LOW, KEY_HIGH] when the range is full."""
    taken = set(present)
    if sum(1 for key in taken if low <= key <= high) > high - low:
        low, high = KEY_LOW, KEY_HIGH
    while True:  # the structures hold at most ~60 keys of 100, so a few draws suffice
        key = rng.randint(low, high)
        if key not in taken:
            return key


def steps_from(labels: Sequence[str], states: Sequence[Any]) -> tuple[Step, ...]:
    if len(labels) != len(states):
        raise ValueError(f"{len(labels)} step labels but {len(states)} states")
    return tuple(Step(label, state) for label, state in zip(labels, states, strict=True))


Op = list[Any]
"""One operation as problems record it: its name, then its arguments (``["insert", 42]``)."""


def replay(
    structure: Any,
    ops: Iterable[Op],
    *,
    apply: Callable[[Op], object] | None = None,
    label: Callable[[Op], str] | None = None,
) -> tuple[list[str], tuple[Step, ...]]:
    """Run ``ops`` on ``structure`` in order: each op's label (:func:`op_label` unless ``label``
    says otherwise) and the steps, each with ``structure.state()`` right after the op. An op
    ``[name, *args]`` calls ``structure.name(*args)`` unless ``apply`` is given."""
    labels, states = [], []
    for op in ops:
        if apply is None:
            getattr(structure, op[0])(*op[1:])
        else:
            apply(op)
        labels.append(op_label(*op) if label is None else label(op))
        states.append(structure.state())
    return labels, steps_from(labels, states)


def insert_delete_ops(
    rng: random.Random,
    count: int,
    new_item: Callable[[list[Any]], Any],
    delete_if: Callable[[float], bool],
    present: Sequence[Any] = (),
    *,
    repeats: bool = False,
) -> list[Op]:
    """``count`` ops ``["insert", item]`` / ``["delete", item]`` on a collection holding ``present``.

    While an item is present, ``delete_if(rng.random())`` says whether the next op deletes one
    (drawn with ``rng.choice``); otherwise it inserts ``new_item(items present)``. An inserted
    item that is present already is held once, unless ``repeats`` (a multiset)."""
    items = list(present)
    ops: list[Op] = []
    for _ in range(count):
        if items and delete_if(rng.random()):
            item = rng.choice(items)
            items.remove(item)
            ops.append(["delete", item])
        else:
            item = new_item(items)
            if repeats or item not in items:
                items.append(item)
            ops.append(["insert", item])
    return ops


def push_pop_ops(
    rng: random.Random, count: int, push: str, pop: str, pop_if: Callable[[float], bool]
) -> list[Op]:
    """``count`` ops ``[push, value]`` (a value in [KEY_LOW, KEY_HIGH]) / ``[pop]`` on a container
    that starts empty: while it holds anything, ``pop_if(rng.random())`` says whether to pop."""
    ops: list[Op] = []
    depth = 0
    for _ in range(count):
        if depth and pop_if(rng.random()):
            ops.append([pop])
            depth -= 1
        else:
            ops.append([push, rng.randint(KEY_LOW, KEY_HIGH)])
            depth += 1
    return ops


def empty_question(empty: str, asked: str) -> Question:
    """The question of running ``data["ops"]`` on a structure that starts empty: "You are given
    an empty <empty> initially. Q: What is <asked> after the following operations: ...?", each
    op written by :func:`op_label`."""

    def question(data: Mapping[str, Any]) -> str:
        labels = ", ".join(op_label(*op) for op in data["ops"])
        return (
            f"You are given an empty {empty} initially. Q: What is {asked} after the following "
            f"operations: {labels}?"
        )

    return question


def from_empty(
    structure: Any,
    ops: list[Op],
    question: Question,
    initial_state: Any,
    data: dict[str, Any] | None = None,
    *,
    apply: Callable[[Op], object] | None = None,
) -> Problem:
    """The problem of running ``ops`` (:func:`replay`) on ``structure``, which starts empty, posed
    as ``question(data)`` (an :func:`empty_question`, usually) and answered by its final state.
    ``data`` defaults to ``{"ops": ops}``."""
    _, steps = replay(structure, ops, apply=apply)
    data = {"ops": ops} if data is None else data
    return Problem(question(data), structure.state(), data, steps, initial_state)


def operation_maker(structure: str, category: Category, display: str, base: str) -> Callable[..., Operation]:
    """Makes the :class:`Operation` objects of one structure: they share ``structure``,
    ``category`` and ``display``, and each one's description follows the structure's ``base``."""

    def make(name: str, description: str, **fields: Any) -> Operation:
        return Operation(
            structure=structure,
            name=name,
            category=category,
            display=display,
            description=(base + description).strip(),
            **fields,
        )

    return make
