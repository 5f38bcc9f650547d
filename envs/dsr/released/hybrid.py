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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import (
    Record,
    is_int_list,
    literal,
    ops_then_state,
    reads,
    records,
    released_lines,
)

_LRU_HEADER = re.compile(r"LRU Cache Simulation (\d+), Cache Size: (\d+)")
_ACCESS = re.compile(r"access (-?\d+)")
_BLOOM_HEADER = re.compile(r"CountingBloomFilter (\d+) \(m: (\d+), k: (\d+)\)")
_BLOOM_OP = re.compile(r"(insert|delete) (-?\d+)")
# the public reader's comment shows a "(Mode: easy)" suffix the stored files do not have
_DAWG_HEADER = re.compile(r"DAWG (\d+)(?: \(Mode: \w+\))?")
_DAWG_OP = re.compile(r"(insert|delete) ([a-z]+)")


def _access(line: str) -> list[Any] | None:
    found = _ACCESS.fullmatch(line)
    return None if found is None else ["access", int(found[1])]


def _bloom_op(line: str) -> list[Any] | None:
    found = _BLOOM_OP.fullmatch(line)
    return None if found is None else [found[1], int(found[2])]


def _dawg_op(line: str) -> list[Any] | None:
    found = _DAWG_OP.fullmatch(line)
    return None if found is None else [found[1], found[2]]


@reads("lru_cache.cache")
def lru_cache(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"lru_cache/cache/lru_{mode}.txt")
    if lines is None:
        return
    for match, first in records(lines, _LRU_HEADER, "the header 'LRU Cache Simulation {}, Cache Size: <k>'"):
        ops, text = ops_then_state(
            lines, _access, "'access <page>'", "the final cache", "Final Cache:", need_ops=False
        )
        capacity = int(match[2])
        if capacity < 1:
            raise lines.error(f"the cache size is {capacity}, not at least 1", first)
        truth = literal(text, lines, "the final cache")
        if not is_int_list(truth):
            raise lines.error("the final cache is not a list of integers")
        yield Record({"capacity": capacity, "ops": ops}, truth, lines.where(first))


@reads("bloom_filter.compound")
def bloom_filter(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"bloom_filter/compound/compound_{mode}.txt")
    if lines is None:
        return
    for match, first in records(lines, _BLOOM_HEADER, "the header 'CountingBloomFilter {} (m: <m>, k: <k>)'"):
        ops, text = ops_then_state(
            lines, _bloom_op, "'insert <v>', 'delete <v>'", "the counters", need_ops=False
        )
        m, k = int(match[2]), int(match[3])
        if m < 1 or k < 1:
            raise lines.error(f"a counting Bloom filter needs m >= 1 and k >= 1, found m={m}, k={k}", first)
        truth = literal(text, lines, "the counters")
        if not (is_int_list(truth) and len(truth) == m):
            raise lines.error(f"the counters are not a list of m = {m} integers")
        yield Record({"m": m, "k": k, "ops": ops}, truth, lines.where(first))


def _dawg_export(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[1] in ("T", "F")
        for pair in value
    )


@reads("dawg.compound")
def dawg(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"dawg/compound/compound_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, _DAWG_HEADER, "the header 'DAWG {}'"):
        ops, text = ops_then_state(
            lines, _dawg_op, "'insert <word>', 'delete <word>'", "the DAWG export", need_ops=False
        )
        truth = literal(text, lines, "the DAWG export")
        if not _dawg_export(truth):
            raise lines.error("the DAWG export is not a list of [prefix, 'T' | 'F'] pairs")
        yield Record({"ops": ops}, truth, lines.where(first))
