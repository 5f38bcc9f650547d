"""Released temporal instances: ``<structure>/compound/compound_<mode>.txt``.

Every record is its operations, one a line, then the final state as a Python list on a line
starting ``[``:

* stack, queue: no header; ``push v`` / ``pop`` (``enqueue v`` / ``dequeue``); the elements bottom
  to top (front to back), ``[]`` when empty.
* priority queue: ``PriorityQueue i``, then ``insert (v, p)``, ``delete``, ``raise_key (v, p)``,
  ``decrease_key (v, p)``; the ``[value, priority]`` pairs by descending (priority, value) (the
  public heap never consolidates).
* skip list: ``SkipList i (Max Level: m)``, then ``insert v``, followed by ``Level generation
  probabilities: p1, p2, ...`` only when ``v`` was absent (a repeated insert has none), or
  ``delete v``; the levels from the highest non-empty one down to level 0, ``[[]]`` when empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import (
    Record,
    int_list,
    is_int_list,
    literal,
    ops_then_state,
    reads,
    records,
    released_lines,
)


def _line_records(root: Path, mode: str, structure: str, add: str, remove: str) -> Iterator[Record]:
    lines = released_lines(root, f"{structure}/compound/compound_{mode}.txt")
    if lines is None:
        return

    def parse(line: str) -> list[Any] | None:
        if line == remove:
            return [remove]
        match = re.fullmatch(rf"{add} (-?\d+)", line)
        return None if match is None else [add, int(match.group(1))]

    state = f"the final {structure}"
    while not lines.done():
        first = lines.at + 1
        ops, text = ops_then_state(lines, parse, f"'{add} <value>', '{remove}'", state)
        yield Record({"ops": ops}, int_list(text, lines, state), lines.where(first))


@reads("stack.compound")
def stack(root: Path, mode: str) -> Iterator[Record]:
    return _line_records(root, mode, "stack", "push", "pop")


@reads("queue.compound")
def queue(root: Path, mode: str) -> Iterator[Record]:
    return _line_records(root, mode, "queue", "enqueue", "dequeue")


def _pq_op(line: str) -> list[Any] | None:
    if line == "delete":
        return ["delete"]
    match = re.fullmatch(r"(insert|raise_key|decrease_key) \(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)", line)
    return None if match is None else [match.group(1), int(match.group(2)), int(match.group(3))]


@reads("priority_queue.compound")
def priority_queue(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"priority_queue/compound/compound_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, r"PriorityQueue (\d+)", "the header 'PriorityQueue {}'"):
        ops, text = ops_then_state(
            lines,
            _pq_op,
            "'insert (v, p)', 'delete', 'raise_key (v, p)', 'decrease_key (v, p)'",
            "the final priority queue",
        )
        truth = literal(text, lines, "the final priority queue")
        if not (isinstance(truth, list) and all(is_int_list(pair) and len(pair) == 2 for pair in truth)):
            raise lines.error("the final priority queue is not a list of [value, priority] pairs")
        yield Record({"ops": ops}, truth, lines.where(first))


_COINS = "Level generation probabilities:"


@reads("skip_list.compound")
def skip_list(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"skip_list/compound/compound_{mode}.txt")
    if lines is None:
        return

    def parse(line: str) -> list[Any] | None:
        match = re.fullmatch(r"(insert|delete) (-?\d+)", line)
        if match is None:
            return None
        if match.group(1) == "delete":
            return ["delete", int(match.group(2))]
        # the probabilities follow only an insert of an absent key; a repeated insert draws none
        coins: list[float] = []
        if (lines.peek() or "").startswith(_COINS):
            text = lines.after(_COINS, "the level generation probabilities")
            try:
                coins = [float(coin) for coin in text.split(",")]
            except ValueError:
                raise lines.error(
                    f"the level generation probabilities are not numbers: {text[:60]!r}"
                ) from None
        return ["insert", int(match.group(2)), coins]

    for header, first in records(
        lines, r"SkipList (\d+) \(Max Level: (\d+)\)", "the header 'SkipList {} (Max Level: <m>)'"
    ):
        ops, text = ops_then_state(lines, parse, "'insert <v>', 'delete <v>'", "the final skip list")
        truth = literal(text, lines, "the final skip list")
        if not (isinstance(truth, list) and truth and all(is_int_list(level) for level in truth)):
            raise lines.error("the final skip list is not a non-empty list of levels of integers")
        yield Record({"max_level": int(header.group(2)), "ops": ops}, truth, lines.where(first))
