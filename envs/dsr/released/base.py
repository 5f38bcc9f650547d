"""What every reader of the public DSR-Bench's released instance files shares.

The public benchmark keeps its instances as plain text under its ``generation/`` folder: one
folder per structure and operation, one file per difficulty (``*_easy.txt``, ``*_medium.txt``,
``*_hard.txt``; embodia's short, medium and long), some with an input file beside them (the
arrays, the graphs, the trees a question starts from). Each operation's layout is read by one
:data:`Reader`, registered with :func:`reads`; the readers live in this package's category
modules.

A reader turns a file's records into :class:`Record` values: the instance's ``data`` in the form
embodia's generator writes for that operation (so embodia's question builder and replay take
it), its stored truth, its variant (a dimension, a point shape, a B+ tree order) and where it
came from. A record that does not have its layout's shape is a :class:`ReleasedFormatError`
naming the file and the line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodia.envs.dsr.core import DSRError

MODES = {"easy": "short", "medium": "medium", "hard": "long"}
"""The public file suffix of each difficulty, and embodia's length for it."""


class ReleasedFormatError(DSRError):
    """A released instance file that is not in its operation's layout; the message names the
    file and the line."""


@dataclass(frozen=True)
class Record:
    """One released instance as its reader found it."""

    data: dict[str, Any]
    truth: Any
    """The stored truth, converted to embodia's answer form (lists, not tuples; colours as
    embodia writes them)."""
    source: str
    """``file:line`` of the record's first line, relative to the folder read."""
    variant: dict[str, Any] = field(default_factory=dict)


Reader = Callable[[Path, str], Iterator[Record]]
"""``reader(root, mode)``: the records of one operation at one difficulty (``easy``, ``medium``
or ``hard``) under ``root`` (the public ``generation/`` folder or a copy of it); nothing when
the operation's file for that difficulty is absent."""

READERS: dict[str, Reader] = {}
"""Every operation's reader, by ``structure.name``."""


def reads(operation: str) -> Callable[[Reader], Reader]:
    """Register the decorated function as ``operation``'s reader."""

    def register(reader: Reader) -> Reader:
        if operation in READERS:
            raise ValueError(f"a released-file reader for {operation} is registered twice")
        READERS[operation] = reader
        return reader

    return register


class Lines:
    """A text file's lines with their numbers, read in order; errors name the file and line."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        text = path.read_text(encoding="utf-8")
        # trailing spaces are common in the released files and never meaningful
        self.lines = [line.rstrip() for line in text.splitlines()]
        self.at = 0

    def where(self, number: int | None = None) -> str:
        return f"{self.name}:{self.at if number is None else number}"

    def error(self, message: str, number: int | None = None) -> ReleasedFormatError:
        return ReleasedFormatError(f"{self.where(number)}: {message}")

    def done(self) -> bool:
        """Whether only blank lines are left (they are skipped)."""
        while self.at < len(self.lines) and not self.lines[self.at].strip():
            self.at += 1
        return self.at >= len(self.lines)

    def next(self, what: str) -> str:
        """The next non-blank line (its number is then :attr:`at`); an error naming ``what``
        was expected when the file ends."""
        if self.done():
            raise self.error(f"the file ends where {what} was expected", len(self.lines))
        self.at += 1
        return self.lines[self.at - 1].strip()

    def peek(self) -> str | None:
        return None if self.done() else self.lines[self.at].strip()

    def after(self, prefix: str, what: str) -> str:
        """The next line's text after ``prefix`` (an error when it does not start so)."""
        line = self.next(what)
        if not line.startswith(prefix):
            raise self.error(f"expected {what} starting {prefix!r}, found {line[:60]!r}")
        return line[len(prefix) :].strip()


def literal(text: str, lines: Lines, what: str) -> Any:
    """A Python literal as the public generators write them (``str`` of lists, tuples, quoted
    strings), tuples made lists; an error naming the line otherwise."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # deep nesting too
        raise lines.error(f"{what} is not a Python literal: {text[:60]!r}") from None
    return _lists(value)


def _lists(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_lists(item) for item in value]
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    return value


def released_file(root: Path, relative: str) -> Path | None:
    """``root / relative`` when it is a file, else None (an operation the folder lacks)."""
    path = root / relative
    return path if path.is_file() else None


def released_lines(root: Path, relative: str) -> Lines | None:
    """The lines of ``root / relative``, or None when it is not a file (an operation the folder
    lacks)."""
    path = released_file(root, relative)
    return None if path is None else Lines(path, root)


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(is_int(item) for item in value)


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def int_list(text: str, lines: Lines, what: str) -> list[int]:
    """The list of integers written (as a Python literal) in ``text``; an error naming ``what``
    otherwise."""
    value = literal(text, lines, what)
    if not is_int_list(value):
        raise lines.error(f"{what} is not a list of integers")
    return value


def header(lines: Lines, pattern: str | re.Pattern[str], expected: int, what: str) -> re.Match[str]:
    """The next line, a record's header: matched by ``pattern`` in full, its first group the
    instance index, which must be ``expected``. ``what`` names the header with ``{}`` standing
    for the index (``"the header 'Tree {}'"``)."""
    shown = what.format(expected)
    line = lines.next(shown)
    match = re.fullmatch(pattern, line)
    if match is None or int(match[1]) != expected:
        raise lines.error(f"expected {shown}, found {line[:60]!r}")
    return match


def records(lines: Lines, pattern: str | re.Pattern[str], what: str) -> Iterator[tuple[re.Match[str], int]]:
    """For each record of a file whose records start with a :func:`header` (indices counted from 0):
    the header's match and its line number (the record's ``first`` line, for
    ``lines.where(first)``). The caller reads the rest of the record before asking for the next."""
    expected = 0
    while not lines.done():
        match = header(lines, pattern, expected, what)
        yield match, lines.at
        expected += 1


Parse = Callable[[str], list[Any] | None]
"""An operation line as embodia's op (``[name, *args]``), or None when it is not one."""


def ops_then_state(
    lines: Lines, parse: Parse, ops_expected: str, state: str, label: str = "", *, need_ops: bool = True
) -> tuple[list[Any], str]:
    """The operations, one a line read by ``parse``, up to the line holding the final ``state``
    (the first line starting ``label``, or ``[`` when there is no label), and that line's text
    after its label. ``ops_expected`` lists the operations' shapes for the error on any other
    line; ``need_ops`` makes a record without operations an error."""
    start = label or "["
    ops: list[Any] = []
    while True:
        line = lines.next(state)
        if line.startswith(start):
            break
        op = parse(line)
        if op is None:
            raise lines.error(
                f"expected {ops_expected} or {state} (a line starting {start!r}), found {line[:60]!r}"
            )
        ops.append(op)
    if need_ops and not ops:
        raise lines.error(f"{state} with no operation before it")
    return ops, line[len(label) :].strip()
