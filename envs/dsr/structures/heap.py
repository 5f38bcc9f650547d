"""Min-heap in array form: the reference structure and its two operations (:mod:`.hierarchical`
registers them)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from embodia.envs.dsr.core import (
    INT_LIST,
    KEY_HIGH,
    KEY_LOW,
    Operation,
    Problem,
    Step,
    empty_question,
    from_empty,
    operation_maker,
    push_pop_ops,
    replay,
)


class MinHeap:
    """A 0-indexed array min-heap; sift-down swaps with the left child when the children tie."""

    def __init__(self, items: Iterable[int] = ()) -> None:
        self.items: list[int] = list(items)

    def sift_down(self, index: int) -> None:
        items, n = self.items, len(self.items)
        while True:
            left, right, smallest = 2 * index + 1, 2 * index + 2, index
            if left < n and items[left] < items[smallest]:
                smallest = left
            # Strict comparison: on equal children the left one (checked first) stays the choice.
            if right < n and items[right] < items[smallest]:
                smallest = right
            if smallest == index:
                return
            items[index], items[smallest] = items[smallest], items[index]
            index = smallest

    def sift_up(self, index: int) -> None:
        items = self.items
        while index > 0:
            parent = (index - 1) // 2
            if items[index] >= items[parent]:
                return
            items[index], items[parent] = items[parent], items[index]
            index = parent

    def heapify_indices(self) -> range:
        return range(len(self.items) // 2 - 1, -1, -1)

    def heapify(self) -> None:
        for index in self.heapify_indices():
            self.sift_down(index)

    def insert(self, value: int) -> None:
        self.items.append(value)
        self.sift_up(len(self.items) - 1)

    def delete(self) -> int:
        """Extract the minimum: the last element replaces the root and sifts down."""
        top = self.items[0]
        last = self.items.pop()
        if self.items:
            self.items[0] = last
            self.sift_down(0)
        return top

    def state(self) -> list[int]:
        return list(self.items)


def _run_heapify(data: Mapping[str, Any]) -> tuple[MinHeap, tuple[Step, ...]]:
    """``data["array"]`` heapified bottom-up, with one step per sift-down."""
    heap = MinHeap(data["array"])
    _, steps = replay(heap, [["sift_down", index] for index in heap.heapify_indices()])
    return heap, steps


def _replay_heapify(data: Mapping[str, Any]) -> list[int]:
    return _run_heapify(data)[0].state()


def _question_heapify(data: Mapping[str, Any]) -> str:
    return (
        f"Q: Given the array {data['array']}, turn it into a min-heap with the bottom-up heapify "
        "algorithm. What is the resulting array?"
    )


def _heapify(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    array = [rng.randint(KEY_LOW, KEY_HIGH) for _ in range(size)]
    data = {"array": array}
    heap, steps = _run_heapify(data)
    return Problem(_question_heapify(data), heap.state(), data, steps, list(array))


_question_compound = empty_question("min-heap", "the state of the heap")


def _heap_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    ops = push_pop_ops(rng, size, "insert", "delete", lambda draw: draw < 0.3)
    heap = MinHeap()
    return from_empty(heap, ops, _question_compound, [])


def _replay_compound(data: Mapping[str, Any]) -> list[int]:
    heap = MinHeap()
    replay(heap, data["ops"])
    return heap.state()


_HEAP_BASE = (
    "A min-heap is a complete binary tree stored in a 0-indexed array: the children of index i are at "
    "2i+1 (left) and 2i+2 (right), the parent of index i > 0 is at (i-1)//2, and every value is less than or "
    "equal to its children's values. Values may repeat. Sifting down the value at index i: if it has a child "
    "strictly smaller than it, swap it with its smaller child (the left child when both children are equal) "
    "and continue from that child's index; stop when no child is strictly smaller or it has no children. "
)
_HEAP_RULES = (
    "On sift-down, a value is swapped only with a strictly smaller child, and with the left child when the "
    "two children are equal; on sift-up, a value is swapped only while it is strictly smaller than its "
    "parent. Give the final heap as the list of its array entries from index 0."
)

_heap_operation = operation_maker("heap", "hierarchical", "min-heap", _HEAP_BASE)

HEAP_OPERATIONS: tuple[Operation, ...] = (
    _heap_operation(
        "heapify",
        "Bottom-up heapify of an array of n values sifts down the value at each index from n//2 - 1 down "
        "to 0, in decreasing index order, each time on the array as the previous sift-downs left it.",
        rules=_HEAP_RULES,
        answer_schema=INT_LIST,
        generate=_heapify,
        replay=_replay_heapify,
        question=_question_heapify,
    ),
    _heap_operation(
        "compound",
        "(insert, k) appends k at the end of the array, then sifts it up: while it is strictly smaller "
        "than its parent, swap the two. (delete) removes the root (the minimum): the last entry is taken "
        "off the end of the array and, if any entries remain, placed at index 0 and sifted down.",
        rules=_HEAP_RULES,
        answer_schema=INT_LIST,
        generate=_heap_compound,
        replay=_replay_compound,
        question=_question_compound,
    ),
)
