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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import Lines, Record, literal, reads, released_file

_Parse = Callable[[str], list[Any] | None]
"""An operation line as embodia's op (``[name, *args]``), or None when it is not one."""


def _ops_then_state(lines: Lines, parse: _Parse, ops_expected: str, state: str) -> tuple[list[Any], Any]:
    """The operations up to the first line starting ``[``, and that line's literal."""
    ops: list[Any] = []
    while True:
        line = lines.next(state)
        if line.startswith("["):
            break
        op = parse(line)
        if op is None:
            raise lines.error(
                f"expected {ops_expected} or {state} (a line starting '['), found {line[:60]!r}"
            )
        ops.append(op)
    if not ops:
        raise lines.error(f"{state} with no operation before it")
    return ops, literal(line, lines, state)


def _header(lines: Lines, pattern: str, expected: int, what: str) -> re.Match[str]:
    """The record's header line, matched by ``pattern`` (its first group is the instance index)."""
    line = lines.next(what)
    match = re.fullmatch(pattern, line)
    if match is None or int(match.group(1)) != expected:
        raise lines.error(f"expected {what} for instance {expected}, found {line[:60]!r}")
    return match


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) for v in value)


def _line_records(root: Path, mode: str, structure: str, add: str, remove: str) -> Iterator[Record]:
    path = released_file(root, f"{structure}/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)

    def parse(line: str) -> list[Any] | None:
        if line == remove:
            return [remove]
        match = re.fullmatch(rf"{add} (-?\d+)", line)
        return None if match is None else [add, int(match.group(1))]

    while not lines.done():
        first = lines.at + 1
        ops, truth = _ops_then_state(lines, parse, f"'{add} <value>', '{remove}'", f"the final {structure}")
        if not _is_int_list(truth):
            raise lines.error(f"the final {structure} is not a list of integers")
        yield Record({"ops": ops}, truth, lines.where(first))


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
    path = released_file(root, f"priority_queue/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    expected = 0
    while not lines.done():
        _header(lines, r"PriorityQueue (\d+)", expected, "the header 'PriorityQueue <i>'")
        first = lines.at
        ops, truth = _ops_then_state(
            lines,
            _pq_op,
            "'insert (v, p)', 'delete', 'raise_key (v, p)', 'decrease_key (v, p)'",
            "the final priority queue",
        )
        if not (isinstance(truth, list) and all(_is_int_list(pair) and len(pair) == 2 for pair in truth)):
            raise lines.error("the final priority queue is not a list of [value, priority] pairs")
        yield Record({"ops": ops}, truth, lines.where(first))
        expected += 1


_COINS = "Level generation probabilities:"


@reads("skip_list.compound")
def skip_list(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"skip_list/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)

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

    expected = 0
    while not lines.done():
        header = _header(
            lines,
            r"SkipList (\d+) \(Max Level: (\d+)\)",
            expected,
            "the header 'SkipList <i> (Max Level: <m>)'",
        )
        first = lines.at
        ops, truth = _ops_then_state(lines, parse, "'insert <v>', 'delete <v>'", "the final skip list")
        if not (isinstance(truth, list) and truth and all(_is_int_list(level) for level in truth)):
            raise lines.error("the final skip list is not a non-empty list of levels of integers")
        yield Record({"max_level": int(header.group(2)), "ops": ops}, truth, lines.where(first))
        expected += 1
