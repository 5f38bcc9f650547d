"""Released array instances: ``array/<operation>/<operation>_<mode>.txt``.

Every record starts with its index, then the array (as ``array/array_input_<mode>.txt`` has it
on the same line number), then the operation's own lines (``Index: i``, ``Element: v``) and
``Answer: <truth>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import Lines, Record, literal, reads, released_file

# the lines after the array, in order, and the data field each one fills
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "access": (("Index:", "index"),),
    "delete": (("Element:", "value"),),
    "insert": (("Index:", "index"), ("Element:", "value")),
    "reverse": (),
    "search": (("Element:", "value"),),
}


def _array_records(root: Path, mode: str, operation: str) -> Iterator[Record]:
    path = released_file(root, f"array/{operation}/{operation}_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    expected = 0
    while not lines.done():
        header = lines.next("an instance index")
        first = lines.at
        if header != str(expected):
            raise lines.error(f"expected instance index {expected}, found {header[:40]!r}")
        array = literal(lines.next("the array"), lines, "the array")
        if not (isinstance(array, list) and all(isinstance(v, int) for v in array)):
            raise lines.error("the array is not a list of integers")
        data: dict[str, Any] = {"array": array}
        for prefix, name in _FIELDS[operation]:
            value = literal(lines.after(prefix, f"the {name}"), lines, f"the {name}")
            if not isinstance(value, int):
                raise lines.error(f"the {name} is not an integer")
            data[name] = value
        truth = literal(lines.after("Answer:", "the answer"), lines, "the answer")
        yield Record(data, truth, lines.where(first))
        expected += 1


@reads("array.access")
def access(root: Path, mode: str) -> Iterator[Record]:
    return _array_records(root, mode, "access")


@reads("array.delete")
def delete(root: Path, mode: str) -> Iterator[Record]:
    return _array_records(root, mode, "delete")


@reads("array.insert")
def insert(root: Path, mode: str) -> Iterator[Record]:
    return _array_records(root, mode, "insert")


@reads("array.reverse")
def reverse(root: Path, mode: str) -> Iterator[Record]:
    return _array_records(root, mode, "reverse")


@reads("array.search")
def search(root: Path, mode: str) -> Iterator[Record]:
    return _array_records(root, mode, "search")
