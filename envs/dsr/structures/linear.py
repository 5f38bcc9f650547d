"""Linear structures: the array and its single-shot operations (access, delete, insert, reverse, search)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from embodia.envs.dsr.core import INT, INT_LIST, Generator, Operation, Problem, Question, Replay, register


class Array:
    """A 0-indexed array of ints; the canonical state is the list itself."""

    def __init__(self, items: list[int]) -> None:
        self.items = list(items)

    def access(self, index: int) -> int:
        return self.items[index]

    def delete(self, value: int) -> None:
        """Remove the first (lowest-index) item equal to ``value``; absent values change nothing."""
        if value in self.items:
            self.items.remove(value)

    def insert(self, index: int, value: int) -> None:
        self.items.insert(index, value)

    def reverse(self) -> None:
        self.items.reverse()

    def search(self, value: int) -> int:
        """Index of the first occurrence of ``value``, -1 when absent."""
        return self.items.index(value) if value in self.items else -1

    def state(self) -> list[int]:
        return list(self.items)


def random_array(rng: random.Random, size: int) -> list[int]:
    """``size`` ints drawn with replacement from a pool of 10/20/30 values in [0, 99].

    The reference draws its arrays the same way (a pool as large as the length level's upper
    bound), so duplicates are frequent and "first occurrence" rules matter.
    """
    pool_size = 10 * max(1, -(-size // 10))
    pool = [rng.randint(0, 99) for _ in range(pool_size)]
    return rng.choices(pool, k=size)


def _replay_access(data: Mapping[str, Any]) -> int:
    return Array(data["array"]).access(data["index"])


def _replay_delete(data: Mapping[str, Any]) -> list[int]:
    array = Array(data["array"])
    array.delete(data["value"])
    return array.state()


def _replay_insert(data: Mapping[str, Any]) -> list[int]:
    array = Array(data["array"])
    array.insert(data["index"], data["value"])
    return array.state()


def _replay_reverse(data: Mapping[str, Any]) -> list[int]:
    array = Array(data["array"])
    array.reverse()
    return array.state()


def _replay_search(data: Mapping[str, Any]) -> int:
    return Array(data["array"]).search(data["value"])


def _question_access(data: Mapping[str, Any]) -> str:
    return f"Given an array {data['array']}. Q: What is the value stored in index {data['index']}?"


def _question_delete(data: Mapping[str, Any]) -> str:
    return (
        f"Given an array {data['array']}. Delete the first item that has the value {data['value']} in "
        "the array. Q: What is the updated array?"
    )


def _question_insert(data: Mapping[str, Any]) -> str:
    return (
        f"Given an array {data['array']}. Insert an item of value {data['value']} at index "
        f"{data['index']}. Q: What is the updated array?"
    )


def _question_reverse(data: Mapping[str, Any]) -> str:
    return f"Given an array {data['array']}. Q: What is the reversed array?"


def _question_search(data: Mapping[str, Any]) -> str:
    return (
        f"Given an array {data['array']}, indexed from 0. Q: What is the index of the first occurrence "
        f"of {data['value']}?"
    )


_DESCRIPTION = (
    "An array is a list of elements stored one after another, each at an integer index: the first "
    "element is at index 0, the next at index 1, and so on up to index n-1 for an array of n elements. "
)


def _access(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    items = random_array(rng, size)
    index = rng.randrange(len(items))
    data = {"array": items, "index": index}
    return Problem(_question_access(data), _replay_access(data), data)


def _delete(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    items = random_array(rng, size)
    value = rng.choice(items)
    data = {"array": items, "value": value}
    return Problem(_question_delete(data), _replay_delete(data), data)


def _insert(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    items = random_array(rng, size)
    index = rng.randrange(len(items))
    value = rng.randint(0, 99)
    data = {"array": items, "index": index, "value": value}
    return Problem(_question_insert(data), _replay_insert(data), data)


def _reverse(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    items = random_array(rng, size)
    data = {"array": items}
    return Problem(_question_reverse(data), _replay_reverse(data), data)


def _search(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    items = random_array(rng, size)
    # Always a value of the array, as in the reference, so the answer is never -1 in practice.
    value = rng.choice(items)
    data = {"array": items, "value": value}
    return Problem(_question_search(data), _replay_search(data), data)


def _array_op(
    name: str,
    description: str,
    rules: str,
    schema: dict[str, Any],
    generate: Generator,
    replay: Replay,
    question: Question,
) -> Operation:
    return Operation(
        structure="array",
        name=name,
        category="linear",
        display="array",
        description=_DESCRIPTION + description,
        rules=rules,
        answer_schema=schema,
        generate=generate,
        replay=replay,
        question=question,
    )


register(
    _array_op(
        "access",
        "Accessing index i reads the element stored at position i directly, counting from 0.",
        "Indices start at 0. final_answer is the integer stored at the given index.",
        INT,
        _access,
        _replay_access,
        _question_access,
    ),
    _array_op(
        "delete",
        "Deleting a value scans the array from index 0 upwards, removes the first element equal to that "
        "value, and shifts every later element one position to the left, so the array gets one shorter.",
        "If the value occurs several times, delete only its first (lowest-index) occurrence. final_answer "
        "is the updated array as a list of integers in index order.",
        INT_LIST,
        _delete,
        _replay_delete,
        _question_delete,
    ),
    _array_op(
        "insert",
        "Inserting value v at index i shifts the elements at indices i, i+1, ..., n-1 one position to the "
        "right and stores v at index i, so the array gets one longer and v ends up at index i.",
        "Indices start at 0; the new item ends up at exactly the given index and the items previously at "
        "that index or after it move one place right. final_answer is the updated array as a list of "
        "integers in index order.",
        INT_LIST,
        _insert,
        _replay_insert,
        _question_insert,
    ),
    _array_op(
        "reverse",
        "Reversing swaps the elements at indices 0 and n-1, then 1 and n-2, and so on towards the middle, "
        "so the last element becomes the first.",
        "final_answer is the reversed array as a list of integers in index order.",
        INT_LIST,
        _reverse,
        _replay_reverse,
        _question_reverse,
    ),
    _array_op(
        "search",
        "Searching for a value scans the array from index 0 upwards and stops at the first element equal to "
        "that value; its index is the result.",
        "If the value occurs several times, give the index of its first (lowest-index) occurrence; indices "
        "start at 0; give -1 if the value does not occur. final_answer is that index as an integer.",
        INT,
        _search,
        _replay_search,
        _question_search,
    ),
)
