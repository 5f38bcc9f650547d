"""Released associative instances.

* ``hashmap/compound/compound_<mode>.txt``: ``HashMap i with B buckets``, then ``add key k value v``
  / ``remove k`` lines, then ``Final HashMap: [[(k, v), ...], [], ...]`` (every bucket, by number,
  its pairs as tuples) and a blank line; most lines end with a space.
* ``trie/compound/compound_<mode>.txt``: ``TrieTree i``, then ``insert word`` / ``delete word``
  lines, then the pre-order of the node characters as a Python list (``['', 'h', ...]``).
* ``suffix_tree/construct/construct_<mode>.txt``: ``SuffixTree i``, the word with its ``$``
  terminator, then the pre-order edge labels as a Python list (``['$', 'atx$', ...]``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import Lines, Record, literal, reads, released_file

_Parse = Callable[[str], list[Any] | None]
"""An operation line as embodia's op (``[name, *args]``), or None when it is not one."""


def _header(lines: Lines, pattern: str, expected: int, what: str) -> re.Match[str]:
    """The record's header line, matched by ``pattern`` (its first group is the instance index)."""
    line = lines.next(what)
    match = re.fullmatch(pattern, line)
    if match is None or int(match.group(1)) != expected:
        raise lines.error(f"expected {what} for instance {expected}, found {line[:60]!r}")
    return match


def _ops_then_state(
    lines: Lines, parse: _Parse, ops_expected: str, state: str, label: str
) -> tuple[list[Any], Any]:
    """The operations up to the state line (starting ``label``, or ``[`` when there is none), and
    the literal on it."""
    ops: list[Any] = []
    start = label or "["
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
    if not ops:
        raise lines.error(f"{state} with no operation before it")
    return ops, literal(line[len(label) :].strip(), lines, state)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _hashmap_op(line: str) -> list[Any] | None:
    if match := re.fullmatch(r"add key (-?\d+) value (-?\d+)", line):
        return ["add", int(match.group(1)), int(match.group(2))]
    if match := re.fullmatch(r"remove (-?\d+)", line):
        return ["remove", int(match.group(1))]
    return None


def _is_pair(pair: Any) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) for v in pair)


@reads("hashmap.compound")
def hashmap(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"hashmap/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    expected = 0
    while not lines.done():
        header = _header(
            lines, r"HashMap (\d+) with (\d+) buckets", expected, "the header 'HashMap <i> with <B> buckets'"
        )
        first = lines.at
        buckets = int(header.group(2))
        ops, final = _ops_then_state(
            lines, _hashmap_op, "'add key <k> value <v>', 'remove <k>'", "the final hashmap", "Final HashMap:"
        )
        if not (
            isinstance(final, list)
            and all(isinstance(bucket, list) and all(_is_pair(pair) for pair in bucket) for bucket in final)
        ):
            raise lines.error("the final hashmap is not a list of buckets of (key, value) pairs")
        if len(final) != buckets:
            raise lines.error(f"the final hashmap has {len(final)} buckets, its header says {buckets}")
        truth = [
            {"number": number, "contents": [{"key": key, "value": value} for key, value in bucket]}
            for number, bucket in enumerate(final)
        ]
        yield Record({"buckets": buckets, "ops": ops}, truth, lines.where(first))
        expected += 1


def _trie_op(line: str) -> list[Any] | None:
    match = re.fullmatch(r"(insert|delete) (\S+)", line)
    return None if match is None else [match.group(1), match.group(2)]


@reads("trie.compound")
def trie(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"trie/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    expected = 0
    while not lines.done():
        _header(lines, r"TrieTree (\d+)", expected, "the header 'TrieTree <i>'")
        first = lines.at
        ops, truth = _ops_then_state(
            lines, _trie_op, "'insert <word>', 'delete <word>'", "the final trie", ""
        )
        if not _is_str_list(truth):
            raise lines.error("the final trie is not a list of strings")
        yield Record({"ops": ops}, truth, lines.where(first))
        expected += 1


@reads("suffix_tree.construct")
def suffix_tree(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"suffix_tree/construct/construct_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    expected = 0
    while not lines.done():
        _header(lines, r"SuffixTree (\d+)", expected, "the header 'SuffixTree <i>'")
        first = lines.at
        word = lines.next("the word")
        match = re.fullmatch(r"([^$\s]+)\$", word)
        if match is None:
            raise lines.error(f"expected the word ending in its one '$', found {word[:60]!r}")
        truth = literal(lines.next("the suffix tree"), lines, "the suffix tree")
        if not _is_str_list(truth):
            raise lines.error("the suffix tree is not a list of strings")
        yield Record({"string": match.group(1)}, truth, lines.where(first))
        expected += 1
