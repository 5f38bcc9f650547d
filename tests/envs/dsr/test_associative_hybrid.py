"""Hashmap, trie, suffix tree, LRU cache, counting Bloom filter, DAWG: invariants, goldens, generators."""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodia.envs.dsr.core import OPERATIONS, canonical
from embodia.envs.dsr.structures.associative import HashMap, SuffixTree, Trie, TrieNode, size_level
from embodia.envs.dsr.structures.hybrid import DAWG, CountingBloomFilter, DAWGState, LRUCache, bloom_hash

CATEGORIES = {
    "associative": ("hashmap.compound", "trie.compound", "suffix_tree.construct"),
    "hybrid": ("lru_cache.cache", "bloom_filter.compound", "dawg.compound"),
}
KEYS = tuple(key for keys in CATEGORIES.values() for key in keys)
SETTINGS = settings(max_examples=100, deadline=None)


def test_modules_register_their_operations() -> None:
    for category, keys in CATEGORIES.items():
        for key in keys:
            assert OPERATIONS[key].category == category
    for key in KEYS:
        operation = OPERATIONS[key]
        assert operation.description and "final_answer" in operation.rules
        assert operation.comparison == ("set" if key == "lru_cache.cache" else "exact")


def test_size_level() -> None:
    assert [size_level(n) for n in (1, 5, 10, 11, 20, 21, 30, 99)] == [
        "short", "short", "short", "medium", "medium", "long", "long", "long",
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------- hashmap


def _pairs(hashmap: HashMap) -> list[list[tuple[int, int]]]:
    return [[(p["key"], p["value"]) for p in bucket["contents"]] for bucket in hashmap.state()]


def _apply(structure: Any, ops: list[list[Any]]) -> None:
    for op in ops:
        getattr(structure, op[0])(*op[1:])


def test_hashmap_golden_update_in_place_and_readd_at_end() -> None:
    hashmap = HashMap(5)
    hashmap.add(3, 10)
    hashmap.add(8, 20)
    hashmap.add(13, 30)
    hashmap.add(8, 25)  # existing key: value overwritten, position kept
    assert _pairs(hashmap) == [[], [], [], [(3, 10), (8, 25), (13, 30)], []]
    assert hashmap.remove(3)
    assert not hashmap.remove(7)  # absent: no-op
    hashmap.add(3, 40)  # re-added: goes to the end
    hashmap.add(4, 1)
    hashmap.add(0, 2)
    assert _pairs(hashmap) == [[(0, 2)], [], [], [(8, 25), (13, 30), (3, 40)], [(4, 1)]]
    assert hashmap.state()[1] == {"number": 1, "contents": []}  # empty buckets are listed
    assert hashmap.state()[4] == {"number": 4, "contents": [{"key": 4, "value": 1}]}


def test_hashmap_golden_reference_instances() -> None:
    # The reference's short instances 3 and 17 (10 buckets).
    hashmap = HashMap(10)
    _apply(hashmap, [["add", 10, 48], ["remove", 10], ["add", 80, 22], ["add", 49, 33], ["add", 10, 54]])
    _apply(hashmap, [["add", 52, 10], ["add", 63, 63]])
    assert _pairs(hashmap) == [
        [(80, 22), (10, 54)],
        [],
        [(52, 10)],
        [(63, 63)],
        [],
        [],
        [],
        [],
        [],
        [(49, 33)],
    ]
    hashmap = HashMap(10)
    _apply(hashmap, [["add", 28, 6], ["remove", 28], ["add", 81, 85], ["add", 74, 76], ["add", 14, 95]])
    _apply(hashmap, [["add", 14, 74], ["add", 51, 90]])
    assert _pairs(hashmap) == [[], [(81, 85), (51, 90)], [], [], [(74, 76), (14, 74)], [], [], [], [], []]


_HASHMAP_OP = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 40), st.integers(0, 99)),
    st.tuples(st.just("remove"), st.integers(0, 40)),
)


@SETTINGS
@given(st.integers(1, 7), st.lists(_HASHMAP_OP, max_size=40))
def test_hashmap_matches_dict(buckets: int, ops: list[tuple[Any, ...]]) -> None:
    hashmap, model = HashMap(buckets), dict[int, int]()
    for op in ops:
        if op[0] == "add":
            hashmap.add(op[1], op[2])
            model[op[1]] = op[2]  # a dict keeps an updated key's position, appends a new or re-added one
        else:
            assert hashmap.remove(op[1]) == (op[1] in model)
            model.pop(op[1], None)
        state = hashmap.state()
        assert [bucket["number"] for bucket in state] == list(range(buckets))
        # Per bucket, the pairs in the dict's insertion order: exactly chaining's order.
        assert _pairs(hashmap) == [
            [(k, v) for k, v in model.items() if k % buckets == i] for i in range(buckets)
        ]
        assert all(hashmap.get(key) == value for key, value in model.items())


# ------------------------------------------------------------------------------------------------ trie


def test_trie_golden_pre_order_and_pruning() -> None:
    trie = Trie()
    for word in ["to", "tea", "ten", "i", "in", "inn"]:
        trie.insert(word)
    assert trie.state() == ["", "i", "n", "n", "t", "e", "a", "n", "o"]
    trie.delete("inn")  # the last n goes
    assert trie.state() == ["", "i", "n", "t", "e", "a", "n", "o"]
    trie.delete("i")  # i still leads to "in": only unmarked
    assert trie.state() == ["", "i", "n", "t", "e", "a", "n", "o"]
    trie.delete("in")  # n, then the now unmarked childless i, go
    assert trie.state() == ["", "t", "e", "a", "n", "o"]
    assert not trie.delete("te")  # a prefix that is not a word: no-op
    assert not trie.delete("tent")
    assert trie.words() == ["tea", "ten", "to"]
    for word in ["tea", "ten", "to"]:
        trie.delete(word)
    assert trie.state() == [""] and trie.root.children == {}


def test_trie_golden_delete_keeps_shared_prefix() -> None:
    trie = Trie()
    for word in ["car", "cat", "ca"]:
        trie.insert(word)
    assert trie.state() == ["", "c", "a", "r", "t"]
    trie.delete("car")
    assert trie.state() == ["", "c", "a", "t"]
    trie.delete("ca")
    assert trie.state() == ["", "c", "a", "t"] and trie.words() == ["cat"]


def _no_dead_branches(node: TrieNode) -> bool:
    return all(
        (child.is_end or child.children) and _no_dead_branches(child) for child in node.children.values()
    )


_WORD = st.text("abc", min_size=1, max_size=5)


def _against_set(words: Trie | DAWG, ops: list[tuple[str, str]]) -> Iterator[set[str]]:
    """Apply ``ops`` to ``words`` and to a set (a delete reports whether the word was stored);
    the set after each operation."""
    model: set[str] = set()
    for name, word in ops:
        if name == "insert":
            words.insert(word)
            model.add(word)
        else:
            assert words.delete(word) == (word in model)
            model.discard(word)
        yield model


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["insert", "delete"]), _WORD), max_size=40))
def test_trie_matches_set(ops: list[tuple[str, str]]) -> None:
    trie = Trie()
    for model in _against_set(trie, ops):
        assert trie.words() == sorted(model)
        assert all(trie.contains(word) for word in model)
        assert _no_dead_branches(trie.root)
        # Pre-order with sorted children visits the node prefixes in lexicographic order.
        prefixes = sorted({word[:i] for word in model for i in range(1, len(word) + 1)})
        assert trie.state() == ["", *(prefix[-1] for prefix in prefixes)]


# ----------------------------------------------------------------------------------------- suffix tree


def test_suffix_tree_golden() -> None:
    assert SuffixTree("banana").state() == ["$", "a", "$", "na", "$", "na$", "banana$", "na", "$", "na$"]
    assert SuffixTree("abab").state() == ["$", "ab", "$", "ab$", "b", "$", "ab$"]
    # The reference prompt's example ("yygok$").
    assert SuffixTree("yygok").state() == ["$", "gok$", "k$", "ok$", "y", "gok$", "ygok$"]
    assert SuffixTree("").state() == ["$"]
    assert SuffixTree("aaa").state() == ["$", "a", "$", "a", "$", "a$"]
    with pytest.raises(ValueError):
        SuffixTree("a$b")


def _grouped_model(suffixes: list[str]) -> list[str]:
    """Pre-order edge labels by recursive grouping of the sorted suffixes (independent of insertion)."""
    out: list[str] = []
    groups: dict[str, list[str]] = {}
    for suffix in sorted(suffixes):
        groups.setdefault(suffix[0], []).append(suffix)
    for _, group in sorted(groups.items()):
        length = 1
        while all(len(s) > length for s in group) and len({s[length] for s in group}) == 1:
            length += 1
        out.append(group[0][:length])
        if len(group) > 1:
            out.extend(_grouped_model([s[length:] for s in group]))
    return out


@SETTINGS
@given(st.text("ab", max_size=14) | st.text("abc", max_size=14))
def test_suffix_tree_properties(text: str) -> None:
    tree = SuffixTree(text)
    full = text + "$"
    leaves = [path for path, node in tree.edges() if not node.children]
    assert len(leaves) == len(full)
    assert sorted(leaves) == sorted(full[i:] for i in range(len(full)))  # each suffix exactly once
    for path, node in tree.edges():
        if path and node.children:
            assert len(node.children) >= 2
        assert all(key == child.label[0] for key, child in node.children.items())
        assert all(child.label for child in node.children.values())
    assert tree.state() == _grouped_model([full[i:] for i in range(len(full))])


# ------------------------------------------------------------------------------------------- LRU cache


def test_lru_golden() -> None:
    cache = LRUCache(2)
    states = []
    for page in [1, 2, 1, 3, 4]:
        cache.access(page)
        states.append(cache.state())
    # Re-accessing 1 refreshes it, so 3 evicts 2 (not 1); then 4 evicts 1.
    assert states == [[1], [1, 2], [2, 1], [1, 3], [3, 4]]
    cache = LRUCache(3)
    assert [cache.access(p) for p in [5, 6, 7, 5, 8, 6, 6]] == [None, None, None, None, 6, 7, None]
    assert cache.state() == [5, 8, 6]


@SETTINGS
@given(st.integers(1, 5), st.lists(st.integers(0, 8), max_size=40))
def test_lru_matches_ordered_dict(capacity: int, pages: list[int]) -> None:
    cache, model = LRUCache(capacity), OrderedDict[int, None]()
    for page in pages:
        cache.access(page)
        if page in model:
            model.move_to_end(page)
        else:
            if len(model) >= capacity:
                model.popitem(last=False)
            model[page] = None
        assert cache.state() == list(model)
        assert len(cache.state()) <= capacity and cache.state()[-1] == page


# ------------------------------------------------------------------------------------ counting Bloom filter


def test_bloom_golden_hash_salt_before_mod() -> None:
    # str(29) = "29": h = 50 * 131 + 57 = 6607; 6607 % 20 = 7, then salts 1, 2 give 8, 9.
    assert [bloom_hash(29, salt, 20) for salt in range(3)] == [7, 8, 9]
    # "47": 52 * 131 + 55 = 6867 -> 7 too (a collision with 29).
    assert [bloom_hash(47, salt, 20) for salt in range(3)] == [7, 8, 9]
    # "5": 53 -> 13.
    assert [bloom_hash(5, salt, 20) for salt in range(3)] == [13, 14, 15]
    # "20": 50 * 131 + 48 = 6598 -> 18: the salt is added before the mod, so the third index wraps to 0.
    assert [bloom_hash(20, salt, 20) for salt in range(3)] == [18, 19, 0]
    # "100": (49 * 131 + 48) * 131 + 48 = 847225, no wrapping of h: 847225 % 100 = 25.
    assert bloom_hash(100, 0, 100) == 25
    bloom = CountingBloomFilter(20, 3)
    for item in [29, 47, 5, 20]:
        bloom.insert(item)
    expected = [0] * 20
    for index, count in {7: 2, 8: 2, 9: 2, 13: 1, 14: 1, 15: 1, 18: 1, 19: 1, 0: 1}.items():
        expected[index] = count
    assert bloom.state() == expected
    bloom.delete(29)
    for index in (7, 8, 9):
        expected[index] = 1
    assert bloom.state() == expected
    empty = CountingBloomFilter(20, 3)
    empty.delete(29)  # counters never go below zero
    assert empty.state() == [0] * 20


@SETTINGS
@given(
    st.integers(1, 30),
    st.integers(1, 5),
    st.lists(st.tuples(st.booleans(), st.integers(0, 200)), max_size=40),
)
def test_bloom_counts_are_sums_over_present_items(m: int, k: int, ops: list[tuple[bool, int]]) -> None:
    bloom, present = CountingBloomFilter(m, k), list[int]()
    for insert, number in ops:
        if insert or not present:
            bloom.insert(number)
            present.append(number)
        else:
            item = present[number % len(present)]  # deletes only name present items, as generated
            bloom.delete(item)
            present.remove(item)
        expected = [0] * m
        for item in present:
            digits = str(item)
            h0 = sum(ord(c) * 131 ** (len(digits) - 1 - i) for i, c in enumerate(digits))
            for salt in range(k):
                expected[(h0 + salt) % m] += 1
        assert bloom.state() == expected
        assert min(bloom.state(), default=0) >= 0
        assert all(bloom.might_contain(item) for item in present)


# ------------------------------------------------------------------------------------------------ DAWG


def _dawg(words: list[str], deletes: tuple[str, ...] = ()) -> DAWG:
    dawg = DAWG()
    for word in words:
        dawg.insert(word)
    for word in deletes:
        dawg.delete(word)
    return dawg


def test_dawg_golden() -> None:
    # The reference prompt's example: "da" and "gy" (each r -> end) merge; "gy" is skipped when dequeued.
    dawg = _dawg(["dzso", "gyr", "gqqvvl"], ("gqqvvl",))
    dawg.insert("dar")
    assert dawg.state() == [
        ["", "F"],
        ["d", "F"],
        ["g", "F"],
        ["da", "F"],
        ["dz", "F"],
        ["dar", "T"],
        ["dzs", "F"],
    ]
    # "ta" and "to" merge; the shared node is output once, under the prefix first dequeued.
    assert _dawg(["tap", "top"]).state() == [["", "F"], ["t", "F"], ["ta", "F"], ["tap", "T"]]
    # Shared end leaf at different depths: breadth-first reaches it first as "b".
    assert _dawg(["ab", "b"]).state() == [["", "F"], ["a", "F"], ["b", "T"]]
    # A deletion prunes the dead branch before minimizing.
    assert _dawg(["abc", "ab"], ("abc",)).state() == [["", "F"], ["a", "F"], ["ab", "T"]]
    assert _dawg(["ab"], ("ab", "zz")).state() == [["", "F"]]
    # Equal right languages {"", "b"} under "a" and "b": one node, which is 'T'.
    assert _dawg(["a", "ab", "b", "bb"]).state() == [["", "F"], ["a", "T"], ["ab", "T"]]


def _language(root: int, nodes: list[DAWGState]) -> list[frozenset[str]]:
    """Right language of every node (the words spelled from it to an end)."""
    memo: dict[int, frozenset[str]] = {}

    def of(index: int) -> frozenset[str]:
        if index not in memo:
            node = nodes[index]
            words = {""} if node.is_end else set()
            for char, child in node.edges.items():
                words |= {char + rest for rest in of(child)}
            memo[index] = frozenset(words)
        return memo[index]

    return [of(index) for index in range(len(nodes))]


def _export_model(words: set[str]) -> list[list[str]]:
    """The breadth-first export computed from the word set alone: a node is its right language."""
    out: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    queue = [""]
    for prefix in queue:
        right = frozenset(w[len(prefix) :] for w in words if w.startswith(prefix))
        if right in seen:
            continue
        seen.add(right)
        out.append([prefix, "T" if prefix in words else "F"])
        queue.extend(prefix + c for c in sorted({r[0] for r in right if r}))
    return out


_AB_WORD = st.text("ab", min_size=1, max_size=5)  # two letters: suffixes are shared often


def _trie_size(words: set[str]) -> int:
    return 1 + len({w[:i] for w in words for i in range(1, len(w) + 1)})


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["insert", "insert", "delete"]), _AB_WORD), max_size=30))
def test_dawg_is_the_minimal_automaton_of_the_words(ops: list[tuple[str, str]]) -> None:
    dawg = DAWG()
    for model in _against_set(dawg, ops):
        root, nodes = dawg.minimize()
        languages = _language(root, nodes)
        assert languages[root] == frozenset(model)  # accepts exactly the stored words
        assert len(set(languages)) == len(nodes)  # minimal: no two nodes with the same right language
        signatures = {(n.is_end, tuple(sorted(n.edges.items()))) for n in nodes}
        assert len(signatures) == len(nodes)
        assert len(nodes) <= _trie_size(model)
        state = dawg.state()
        assert state == _export_model(model)
        assert len(state) == len(nodes)
        # The incrementally re-minimized state equals a DAWG built afresh from the current words.
        assert state == _dawg(sorted(model)).state()


# ------------------------------------------------------------------------------------------- generators


def _replay(key: str, data: dict[str, Any]) -> Any:
    """Recompute the truth from the problem's raw data."""
    if key == "suffix_tree.construct":
        return SuffixTree(data["string"]).state()
    structure: Any = {
        "hashmap.compound": lambda: HashMap(data["buckets"]),
        "trie.compound": Trie,
        "lru_cache.cache": lambda: LRUCache(data["capacity"]),
        "bloom_filter.compound": lambda: CountingBloomFilter(data["m"], data["k"]),
        "dawg.compound": DAWG,
    }[key]()
    _apply(structure, data["ops"])
    return structure.state()


@pytest.mark.parametrize("key", KEYS)
def test_problems_are_deterministic_consistent_and_json(key: str) -> None:
    operation = OPERATIONS[key]
    for seed in range(40):
        size = random.Random(seed).choice([5, 7, 10, 11, 16, 20, 21, 25, 30])
        problem = operation.generate(random.Random(seed), size, {})
        assert problem == operation.generate(random.Random(seed), size, {})
        assert json.loads(json.dumps(problem.truth)) == problem.truth
        assert json.loads(json.dumps(problem.data)) == problem.data
        assert "final_answer" not in problem.question and problem.question.rstrip().endswith("?")
        jsonschema.validate(problem.truth, operation.answer_schema)
        assert _replay(key, problem.data) == problem.truth
        if key == "suffix_tree.construct":
            assert problem.steps == () and problem.initial_state is None
            assert len(problem.data["string"]) == size and set(problem.data["string"]) <= set("abc")
            assert f"{problem.data['string']}$" in problem.question
            continue
        assert len(problem.steps) == len(problem.data["ops"]) == size
        assert problem.steps[-1].state == problem.truth
        assert json.loads(json.dumps(problem.initial_state)) == problem.initial_state
        for step in problem.steps:
            assert step.label in problem.question
            jsonschema.validate(step.state, operation.answer_schema)
            assert json.loads(json.dumps(step.state)) == step.state
        assert canonical(problem.truth) == canonical(json.loads(json.dumps(problem.truth)))


def test_generator_parameters_follow_the_reference_levels() -> None:
    for size, buckets, (m, k) in [(7, 10, (20, 3)), (15, 20, (50, 4)), (28, 30, (100, 5))]:
        hashmap = OPERATIONS["hashmap.compound"].generate(random.Random(size), size, {})
        assert hashmap.data["buckets"] == buckets == len(hashmap.truth)
        assert f"(add, ({hashmap.data['ops'][0][1]}, {hashmap.data['ops'][0][2]}))" in hashmap.question
        bloom = OPERATIONS["bloom_filter.compound"].generate(random.Random(size), size, {})
        assert (bloom.data["m"], bloom.data["k"]) == (m, k) and len(bloom.truth) == m
        assert sum(bloom.truth) % k == 0
    for seed in range(30):
        lru = OPERATIONS["lru_cache.cache"].generate(random.Random(seed), 25, {})
        assert 4 <= lru.data["capacity"] <= 10 and all(0 <= op[1] < 30 for op in lru.data["ops"])
        trie = OPERATIONS["trie.compound"].generate(random.Random(seed), 8, {})
        assert all(8 <= len(op[1]) <= 12 for op in trie.data["ops"])
        dawg = OPERATIONS["dawg.compound"].generate(random.Random(seed), 25, {})
        assert all(len(op[1]) >= 8 for op in dawg.data["ops"])
        present: list[int] = []
        bloom = OPERATIONS["bloom_filter.compound"].generate(random.Random(seed), 25, {})
        for name, item in bloom.data["ops"]:
            if name == "insert":
                present.append(item)
            else:
                assert item in present  # deletes name only inserted items
                present.remove(item)


def test_generation_is_fast() -> None:
    start = time.perf_counter()
    for key in KEYS:
        for seed in range(30):
            OPERATIONS[key].generate(random.Random(seed), 30, {})
    assert (time.perf_counter() - start) / (30 * len(KEYS)) < 0.01
