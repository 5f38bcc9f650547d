"""Released hybrid instances; each record is a header, one line per operation and the final state.

* ``lru_cache/cache/lru_<mode>.txt``: ``LRU Cache Simulation i, Cache Size: k``, ``access p`` lines,
  ``Final Cache: [...]`` (least to most recently used).
* ``bloom_filter/compound/compound_<mode>.txt``: ``CountingBloomFilter i (m: M, k: K)``, ``insert v`` /
  ``delete v`` lines, the M counters ``[...]``.
* ``dawg/compound/compound_<mode>.txt``: ``DAWG i``, ``insert word`` / ``delete word`` lines, the
  breadth-first export ``[['', 'F'], ['a', 'T'], ...]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import Lines, Record, literal, reads, released_file

_LRU_HEADER = re.compile(r"LRU Cache Simulation (\d+), Cache Size: (\d+)")
_ACCESS = re.compile(r"(access) (-?\d+)")
_BLOOM_HEADER = re.compile(r"CountingBloomFilter (\d+) \(m: (\d+), k: (\d+)\)")
_BLOOM_OP = re.compile(r"(insert|delete) (-?\d+)")
# the public reader's comment shows a "(Mode: easy)" suffix the stored files do not have
_DAWG_HEADER = re.compile(r"DAWG (\d+)(?: \(Mode: \w+\))?")
_DAWG_OP = re.compile(r"(insert|delete) ([a-z]+)")


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _records(
    lines: Lines,
    header: tuple[re.Pattern[str], str],
    op: tuple[re.Pattern[str], str, Callable[[str], Any]],
    truth_prefix: str,
) -> Iterator[tuple[re.Match[str], list[list[Any]], Any, int]]:
    """(header match, ops, final-state line, first line) per record: a header (its first group the
    record's index, counted from 0), op lines, and the final-state line, which starts ``truth_prefix``."""
    pattern, shape = header
    op_pattern, op_shape, argument = op
    expected = 0
    while not lines.done():
        line = lines.next("a record header")
        first = lines.at
        match = pattern.fullmatch(line)
        if match is None or int(match[1]) != expected:
            raise lines.error(f"expected the header {shape.format(expected)!r}, found {line[:60]!r}")
        ops: list[list[Any]] = []
        while True:
            line = lines.next(f"an operation {op_shape!r} or the final state")
            if line.startswith(truth_prefix):
                break
            found = op_pattern.fullmatch(line)
            if found is None:
                raise lines.error(
                    f"expected an operation {op_shape!r} or the final state, found {line[:60]!r}"
                )
            ops.append([found[1], argument(found[2])])
        yield match, ops, line, first
        expected += 1


@reads("lru_cache.cache")
def lru_cache(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"lru_cache/cache/lru_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    header = (_LRU_HEADER, "LRU Cache Simulation {}, Cache Size: <k>")
    for match, ops, line, first in _records(lines, header, (_ACCESS, "access <page>", int), "Final Cache:"):
        capacity = int(match[2])
        if capacity < 1:
            raise lines.error(f"the cache size is {capacity}, not at least 1", first)
        truth = literal(line.removeprefix("Final Cache:").strip(), lines, "the final cache")
        if not _int_list(truth):
            raise lines.error("the final cache is not a list of integers")
        yield Record({"capacity": capacity, "ops": ops}, truth, lines.where(first))


@reads("bloom_filter.compound")
def bloom_filter(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"bloom_filter/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    header = (_BLOOM_HEADER, "CountingBloomFilter {} (m: <m>, k: <k>)")
    for match, ops, line, first in _records(lines, header, (_BLOOM_OP, "insert|delete <v>", int), "["):
        m, k = int(match[2]), int(match[3])
        if m < 1 or k < 1:
            raise lines.error(f"a counting Bloom filter needs m >= 1 and k >= 1, found m={m}, k={k}", first)
        truth = literal(line, lines, "the counters")
        if not (_int_list(truth) and len(truth) == m):
            raise lines.error(f"the counters are not a list of m = {m} integers")
        yield Record({"m": m, "k": k, "ops": ops}, truth, lines.where(first))


def _dawg_export(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[1] in ("T", "F")
        for pair in value
    )


@reads("dawg.compound")
def dawg(root: Path, mode: str) -> Iterator[Record]:
    path = released_file(root, f"dawg/compound/compound_{mode}.txt")
    if path is None:
        return
    lines = Lines(path, root)
    header = (_DAWG_HEADER, "DAWG {}")
    for _, ops, line, first in _records(lines, header, (_DAWG_OP, "insert|delete <word>", str), "["):
        truth = literal(line, lines, "the DAWG export")
        if not _dawg_export(truth):
            raise lines.error("the DAWG export is not a list of [prefix, 'T' | 'F'] pairs")
        yield Record({"ops": ops}, truth, lines.where(first))
