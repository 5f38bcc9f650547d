"""Temporal structures: stack, queue, priority queue (Fibonacci-heap semantics), skip list."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from embodia.envs.dsr.core import INT_LIST, Operation, Problem, op_label, register, steps_from


class Stack:
    """A LIFO stack; the canonical state is the list bottom to top."""

    def __init__(self) -> None:
        self.items: list[int] = []

    def push(self, value: int) -> None:
        self.items.append(value)

    def pop(self) -> int:
        return self.items.pop()

    def state(self) -> list[int]:
        return list(self.items)


class Queue:
    """A FIFO queue; the canonical state is the list front to back."""

    def __init__(self) -> None:
        self.items: deque[int] = deque()

    def enqueue(self, value: int) -> None:
        self.items.append(value)

    def dequeue(self) -> int:
        return self.items.popleft()

    def state(self) -> list[int]:
        return list(self.items)


def _push_pop_ops(rng: random.Random, size: int, add: str, remove: str) -> list[list[Any]]:
    """``size`` operations: add a random value w.p. 0.7, else remove; always add when empty."""
    ops: list[list[Any]] = []
    depth = 0
    for _ in range(size):
        if depth == 0 or rng.random() < 0.7:
            ops.append([add, rng.randint(0, 99)])
            depth += 1
        else:
            ops.append([remove])
            depth -= 1
    return ops


def _linear_compound(structure: str, add: str, remove: str, make: type[Stack] | type[Queue]) -> Any:
    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
        ops = _push_pop_ops(rng, size, add, remove)
        container = make()
        labels, states = [], []
        for op in ops:
            getattr(container, op[0])(*op[1:])
            labels.append(op_label(*op))
            states.append(container.state())
        question = (
            f"You are given an empty {structure} initially. Q: What is the state of the {structure} after "
            f"the following operations: {', '.join(labels)}?"
        )
        return Problem(question, container.state(), {"ops": ops}, steps_from(labels, states), [])

    return generate


register(
    Operation(
        structure="stack",
        name="compound",
        category="temporal",
        display="stack",
        description=(
            "A stack is a last-in, first-out collection. (push, x) puts x on top of the stack; "
            "(pop) removes the element on top."
        ),
        rules="Give the final stack as a list of its elements from the bottom to the top.",
        answer_schema=INT_LIST,
        generate=_linear_compound("stack", "push", "pop", Stack),
    ),
    Operation(
        structure="queue",
        name="compound",
        category="temporal",
        display="queue",
        description=(
            "A queue is a first-in, first-out collection. (enqueue, x) adds x at the back of the "
            "queue; (dequeue) removes the element at the front."
        ),
        rules="Give the final queue as a list of its elements from the front to the back.",
        answer_schema=INT_LIST,
        generate=_linear_compound("queue", "enqueue", "dequeue", Queue),
    ),
)
