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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import (
    Record,
    is_int_list,
    is_str_list,
    literal,
    ops_then_state,
    reads,
    records,
    released_lines,
)


def _hashmap_op(line: str) -> list[Any] | None:
    if match := re.fullmatch(r"add key (-?\d+) value (-?\d+)", line):
        return ["add", int(match.group(1)), int(match.group(2))]
    if match := re.fullmatch(r"remove (-?\d+)", line):
        return ["remove", int(match.group(1))]
    return None


def _is_pair(pair: Any) -> bool:
    return is_int_list(pair) and len(pair) == 2


@reads("hashmap.compound")
def hashmap(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"hashmap/compound/compound_{mode}.txt")
    if lines is None:
        return
    shown = "the header 'HashMap {} with <B> buckets'"
    for header, first in records(lines, r"HashMap (\d+) with (\d+) buckets", shown):
        buckets = int(header.group(2))
        ops, text = ops_then_state(
            lines, _hashmap_op, "'add key <k> value <v>', 'remove <k>'", "the final hashmap", "Final HashMap:"
        )
        final = literal(text, lines, "the final hashmap")
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


def _trie_op(line: str) -> list[Any] | None:
    match = re.fullmatch(r"(insert|delete) (\S+)", line)
    return None if match is None else [match.group(1), match.group(2)]


@reads("trie.compound")
def trie(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"trie/compound/compound_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, r"TrieTree (\d+)", "the header 'TrieTree {}'"):
        ops, text = ops_then_state(lines, _trie_op, "'insert <word>', 'delete <word>'", "the final trie")
        truth = literal(text, lines, "the final trie")
        if not is_str_list(truth):
            raise lines.error("the final trie is not a list of strings")
        yield Record({"ops": ops}, truth, lines.where(first))


@reads("suffix_tree.construct")
def suffix_tree(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"suffix_tree/construct/construct_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, r"SuffixTree (\d+)", "the header 'SuffixTree {}'"):
        word = lines.next("the word")
        match = re.fullmatch(r"([^$\s]+)\$", word)
        if match is None:
            raise lines.error(f"expected the word ending in its one '$', found {word[:60]!r}")
        truth = literal(lines.next("the suffix tree"), lines, "the suffix tree")
        if not is_str_list(truth):
            raise lines.error("the suffix tree is not a list of strings")
        yield Record({"string": match.group(1)}, truth, lines.where(first))
