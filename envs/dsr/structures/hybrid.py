"""Hybrid structures: LRU cache, counting Bloom filter, minimal DAWG."""

from __future__ import annotations

import functools
import random
import string
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from embodia.envs.dsr import core
from embodia.envs.dsr.structures.associative import delete_word, insert_word, size_level

# ---------------------------------------------------------------------------------------------------------
# LRU cache


class LRUCache:
    """A fixed-capacity LRU cache of pages; the canonical state lists them least to most recently used."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU cache needs a capacity of at least 1, got {capacity}")
        self.capacity = capacity
        self.pages: list[int] = []  # least recently used first; capacities are small, so a list is enough

    def access(self, page: int) -> int | None:
        """Use ``page``; returns the evicted page, if any."""
        if page in self.pages:
            self.pages.remove(page)
            self.pages.append(page)
            return None
        evicted = self.pages.pop(0) if len(self.pages) >= self.capacity else None
        self.pages.append(page)
        return evicted

    def state(self) -> list[int]:
        return list(self.pages)


# Per level: (capacity range, number of distinct pages), as in the reference.
_LRU_PARAMETERS = {"short": ((2, 5), 10), "medium": ((3, 7), 20), "long": ((4, 10), 30)}


def _run_lru(data: Mapping[str, Any]) -> tuple[LRUCache, tuple[core.Step, ...]]:
    """The cache of ``data["capacity"]`` after ``data["ops"]``, with the ops' steps."""
    cache = LRUCache(data["capacity"])
    _, steps = core.replay(cache, data["ops"])
    return cache, steps


def _replay_lru(data: Mapping[str, Any]) -> list[int]:
    return _run_lru(data)[0].state()


def _question_lru(data: Mapping[str, Any]) -> str:
    labels = ", ".join(core.op_label(*op) for op in data["ops"])
    return (
        f"You should create an LRU cache with cache size (max number of different pages stored in cache) "
        f"{data['capacity']}. Q: Initially, the cache is empty. What is the state of the LRU cache after the "
        f"following sequence of operations: {labels}?"
    )


def _lru_cache(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    (low, high), pages = _LRU_PARAMETERS[size_level(size)]
    capacity = rng.randint(low, high)
    ops: list[list[Any]] = [["access", rng.randrange(pages)] for _ in range(size)]
    data = {"capacity": capacity, "ops": ops}
    cache, steps = _run_lru(data)
    return core.Problem(_question_lru(data), cache.state(), data, steps, [])


# ---------------------------------------------------------------------------------------------------------
# Counting Bloom filter


def bloom_hash(item: int, salt: int, m: int) -> int:
    """The reference hash: h = h * 131 + ord(c) over str(item) from h = 0 (unbounded, no wrapping),
    then (h + salt) % m."""
    h = 0
    for char in str(item):
        h = h * 131 + ord(char)
    return (h + salt) % m


class CountingBloomFilter:
    """``m`` counters, ``k`` hash functions (salts 0..k-1); insert/delete add/subtract one per hash."""

    def __init__(self, m: int, k: int) -> None:
        if m < 1 or k < 1:
            raise ValueError(f"a counting Bloom filter needs m >= 1 and k >= 1, got m={m}, k={k}")
        self.m, self.k = m, k
        self.counts = [0] * m

    def positions(self, item: int) -> list[int]:
        return [bloom_hash(item, salt, self.m) for salt in range(self.k)]

    def insert(self, item: int) -> None:
        for position in self.positions(item):
            self.counts[position] += 1

    def delete(self, item: int) -> None:
        # Counters never drop below zero (the reference's guard; deletes here only name inserted items).
        for position in self.positions(item):
            if self.counts[position] > 0:
                self.counts[position] -= 1

    def might_contain(self, item: int) -> bool:
        return all(self.counts[position] > 0 for position in self.positions(item))

    def state(self) -> list[int]:
        return list(self.counts)


_BLOOM_PARAMETERS = {"short": (20, 3), "medium": (50, 4), "long": (100, 5)}


def _run_bloom(data: Mapping[str, Any]) -> tuple[CountingBloomFilter, tuple[core.Step, ...]]:
    """The filter of ``data["m"]`` counters and ``data["k"]`` hashes after ``data["ops"]``, with the
    ops' steps."""
    bloom = CountingBloomFilter(data["m"], data["k"])
    _, steps = core.replay(bloom, data["ops"])
    return bloom, steps


def _replay_bloom(data: Mapping[str, Any]) -> list[int]:
    return _run_bloom(data)[0].state()


def _question_bloom(data: Mapping[str, Any]) -> str:
    labels = ", ".join(core.op_label(*op) for op in data["ops"])
    return (
        f"You are given an empty Counting Bloom Filter with m = {data['m']} and k = {data['k']}. Q: What is "
        "the final state of the Counting Bloom Filter, represented as its count array (a list of integer "
        f"counts), after the following operations: {labels}?"
    )


def _bloom_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    m, k = _BLOOM_PARAMETERS[size_level(size)]
    # The reference's item range is 0..100, 100 included; the items are a multiset: an item inserted
    # twice needs two deletes.
    ops = core.insert_delete_ops(
        rng, size, lambda _: rng.randint(0, 100), lambda draw: draw >= 0.7, repeats=True
    )
    data = {"m": m, "k": k, "ops": ops}
    bloom, steps = _run_bloom(data)
    return core.Problem(_question_bloom(data), bloom.state(), data, steps, [0] * m)


# ---------------------------------------------------------------------------------------------------------
# DAWG


@dataclass(frozen=True)
class DAWGState:
    """One node of a minimized DAWG: its end flag and its outgoing edges (character -> node index)."""

    is_end: bool
    edges: dict[str, int]


class DAWGNode:
    __slots__ = ("children", "cls", "is_end")

    def __init__(self) -> None:
        self.children: dict[str, DAWGNode] = {}
        self.is_end = False
        self.cls: int | None = None
        """The node's signature class once minimized; cleared on every node an operation passes through."""


class DAWG:
    """Words kept in a trie (insert/delete as the associative ``Trie``), minimized on demand by merging the
    nodes with equal signatures ``(is_end, sorted (char, child signature) pairs)``, leaves first.

    A child's signature is replaced by the number of its class, which stands for the same nested
    signature. The class registry persists across operations, so minimizing after an operation only
    revisits the nodes on that operation's path.
    """

    def __init__(self) -> None:
        self.root = DAWGNode()
        self._registry: dict[tuple[bool, tuple[tuple[str, int], ...]], int] = {}
        self._classes: list[DAWGState] = []

    def insert(self, word: str) -> None:
        for node in insert_word(self.root, word, DAWGNode):
            node.cls = None

    def delete(self, word: str) -> bool:
        """Unmark the word's end and prune bottom-up; a word that is not stored is a no-op (False)."""
        path = delete_word(self.root, word)
        for node in path or ():
            node.cls = None
        return path is not None

    def _classify(self, node: DAWGNode) -> int:
        if node.cls is not None:
            return node.cls
        edges = tuple(sorted((char, self._classify(child)) for char, child in node.children.items()))
        signature = (node.is_end, edges)
        cls = self._registry.get(signature)
        if cls is None:
            cls = self._registry[signature] = len(self._classes)
            self._classes.append(DAWGState(node.is_end, dict(edges)))
        node.cls = cls
        return cls

    def minimize(self) -> tuple[int, list[DAWGState]]:
        """(root index, nodes): the minimal DAWG of the stored words, only its reachable nodes, numbered
        in breadth-first export order (the root is 0)."""
        root = self._classify(self.root)
        order = [index for index, _ in _bfs(root, self._classes)]
        number = {cls: position for position, cls in enumerate(order)}
        nodes = [
            DAWGState(self._classes[cls].is_end, {c: number[t] for c, t in self._classes[cls].edges.items()})
            for cls in order
        ]
        return 0, nodes

    def state(self) -> list[list[str]]:
        """Breadth-first export of the minimized DAWG: ``[prefix, "T" | "F"]`` per distinct node."""
        return bfs_export(self._classify(self.root), self._classes)


def _bfs(root: int, nodes: list[DAWGState]) -> list[tuple[int, str]]:
    """(node, prefix) in the reference export order: a FIFO queue of (node, prefix) from (root, ""), edges
    pushed in ascending character order; a node already output is skipped when dequeued again."""
    out: list[tuple[int, str]] = []
    seen: set[int] = set()
    queue: deque[tuple[int, str]] = deque([(root, "")])
    while queue:
        index, prefix = queue.popleft()
        if index in seen:
            continue
        seen.add(index)
        out.append((index, prefix))
        edges = nodes[index].edges
        for char in sorted(edges):
            queue.append((edges[char], prefix + char))
    return out


def bfs_export(root: int, nodes: list[DAWGState]) -> list[list[str]]:
    """The reference export: ``[prefix, "T" | "F"]`` per node in :func:`_bfs` order; each node appears
    once, with the prefix of its first dequeue."""
    return [[prefix, "T" if nodes[index].is_end else "F"] for index, prefix in _bfs(root, nodes)]


_DAWG_WORD_LENGTHS = {"short": (3, 6), "medium": (5, 10), "long": (8, 15)}


def _dawg_word(rng: random.Random, low: int, high: int, words: list[str]) -> str:
    """As the reference: w.p. 0.5 extend a prefix (at least one letter) of a stored word by at least one
    random letter, else a fresh random word."""
    if words and rng.random() < 0.5:
        existing = rng.choice(words)
        prefix = existing[: rng.randint(1, len(existing))]
        tail = max(rng.randint(low, high) - len(prefix), 1)
        return prefix + "".join(rng.choices(string.ascii_lowercase, k=tail))
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(low, high)))


_question_dawg = core.empty_question("Directed Acyclic Word Graph (DAWG)", "its final state")


def _dawg_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    low, high = _DAWG_WORD_LENGTHS[size_level(size)]
    # The words present are kept in a list, in insertion order (a set's order would follow str hashing,
    # which is randomised per process).
    new_word = functools.partial(_dawg_word, rng, low, high)
    ops = core.insert_delete_ops(rng, size, new_word, lambda draw: draw < 0.3)
    dawg = DAWG()
    return core.from_empty(dawg, ops, _question_dawg, [["", "F"]])


def _replay_dawg(data: Mapping[str, Any]) -> list[list[str]]:
    dawg = DAWG()
    core.replay(dawg, data["ops"])
    return dawg.state()


core.register(
    core.Operation(
        structure="lru_cache",
        name="cache",
        category="hybrid",
        display="LRU cache",
        description=(
            "An LRU (least recently used) cache holds at most a fixed number (its size) of different pages. "
            "It supports one operation, (access, p). If page p is already in the cache, it becomes the most "
            "recently used page and nothing is evicted. Otherwise, if the cache is full, the least recently "
            "used page (the one whose last access is the oldest) is evicted first; then p is added as the "
            "most recently used page."
        ),
        rules=(
            "final_answer is the list of the pages in the cache after all accesses. The answer is compared "
            "as a set (order is ignored); list them from the least to the most recently used."
        ),
        answer_schema=core.INT_LIST,
        generate=_lru_cache,
        replay=_replay_lru,
        question=_question_lru,
        comparison="set",
    ),
    core.Operation(
        structure="bloom_filter",
        name="compound",
        category="hybrid",
        display="counting Bloom filter",
        description=(
            "A counting Bloom filter answers set-membership queries and also supports deletion. It keeps an "
            "array of m integer counters, indexed 0 to m-1 and all 0 initially, and uses k hash functions. "
            "(insert, v): for each of the k hash functions, compute the index of v and add 1 to the counter "
            "at that index. (delete, v): for each of the k hash functions, compute the index of v and "
            "subtract 1 from the counter at that index, except that a counter already at 0 stays at 0."
        ),
        rules=(
            "Use this hash function. For an item v and the i-th hash function (salt i, for i = 0, ..., k-1): "
            "a) write v as a decimal string; b) start with h = 0; c) for each character c of the string from "
            "left to right, set h = h * 131 + ord(c), where ord is the character's ASCII code ('0' is 48, "
            "'9' is 57), with no reduction modulo m during this loop; d) add the salt: h = h + i; e) the "
            "index is h mod m. So the k indices of v are (h0 + 0) mod m, ..., (h0 + k - 1) mod m, where h0 "
            "is the value after step c. final_answer is the final count array as a list of m integers, "
            "index 0 first."
        ),
        answer_schema=core.INT_LIST,
        generate=_bloom_compound,
        replay=_replay_bloom,
        question=_question_bloom,
    ),
    core.Operation(
        structure="dawg",
        name="compound",
        category="hybrid",
        display="DAWG",
        description=(
            "A directed acyclic word graph (DAWG) stores a set of lowercase words as a trie whose identical "
            "sub-tries are shared. Each node has an is_end flag, 'T' when the path from the root to it "
            "spells a complete word, else 'F'; each edge carries one character. (insert, word): from the "
            "root, for each character follow the edge with that character, creating a new 'F' node when "
            "there is none; set the last node's flag to 'T'. (delete, word): follow the word's edges from "
            "the root and set the last node's flag to 'F'; then walking back towards the root, remove each "
            "node that is 'F' and has no children, stopping at the first node that is 'T' or still has "
            "children. Deleting a word that is not stored changes nothing. After the operations, minimize "
            "the graph by merging identical sub-tries: process the nodes bottom-up (children before their "
            "parent), give each node the signature (is_end, sorted list of (character, signature of the "
            "child) over its edges), and whenever a node's signature equals that of a node already seen, "
            "replace the node by that earlier node. Afterwards no two nodes have the same signature; for "
            "example all leaves (nodes without edges, which are always 'T') become a single node."
        ),
        rules=(
            "Export the minimized DAWG by a breadth-first traversal from the root using a FIFO queue of "
            '(node, prefix) pairs, starting with (root, ""). Repeatedly take the front pair; if that node '
            "was already output, skip it; otherwise output [prefix, is_end] and append (child, prefix + c) "
            "for each outgoing edge c in ascending alphabetical order. Each node is thus output exactly "
            "once, with the prefix by which it is first taken from the queue. The prefix of the root is the "
            "empty string and is_end is 'T' or 'F'. Give final_answer as the list of these [prefix, is_end] "
            'pairs in output order, e.g. [["", "F"], ["d", "F"], ["da", "T"]]. (A step\'s state is this '
            "export of the words stored after that operation, as if minimized then.)"
        ),
        answer_schema=core.list_schema(core.STR_LIST),
        generate=_dawg_compound,
        replay=_replay_dawg,
        question=_question_dawg,
    ),
)
