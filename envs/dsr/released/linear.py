"""Released array instances: ``array/<operation>/<operation>_<mode>.txt``.

Every record starts with its index, then the array (as ``array/array_input_<mode>.txt`` has it
on the same line number), then the operation's own lines (``Index: i``, ``Element: v``) and
``Answer: <truth>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import Record, int_list, is_int, literal, reads, records, released_lines

# the lines after the array, in order, and the data field each one fills
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "access": (("Index:", "index"),),
    "delete": (("Element:", "value"),),
    "insert": (("Index:", "index"), ("Element:", "value")),
    "reverse": (),
    "search": (("Element:", "value"),),
}


def _array_records(root: Path, mode: str, operation: str) -> Iterator[Record]:
    lines = released_lines(root, f"array/{operation}/{operation}_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, r"(0|[1-9]\d*)", "instance index {}"):
        data: dict[str, Any] = {"array": int_list(lines.next("the array"), lines, "the array")}
        for prefix, name in _FIELDS[operation]:
            value = literal(lines.after(prefix, f"the {name}"), lines, f"the {name}")
            if not is_int(value):
                raise lines.error(f"the {name} is not an integer")
            data[name] = value
        truth = literal(lines.after("Answer:", "the answer"), lines, "the answer")
        yield Record(data, truth, lines.where(first))


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
