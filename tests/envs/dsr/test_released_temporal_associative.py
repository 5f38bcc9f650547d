"""The released temporal and associative instance files (stack, queue, priority queue, skip list,
hashmap, trie, suffix tree), hand-written here in each layout: read into embodia's data and truth,
and the truths checked by replay."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from embodia.envs.dsr import released
from embodia.envs.dsr.core import canonical
from embodia.envs.dsr.released import ReleasedFormatError
from embodia.envs.dsr.released.base import Record
from embodia.envs.dsr.replay import replay_data
from embodia.envs.dsr.structures.temporal import FibonacciHeap, apply_pq_op


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.lstrip("\n"))


def _read(root: Path, operation: str, mode: str = "easy") -> list[Record]:
    return list(released.READERS[operation](root, mode))


def _replays(operation: str, records: list[Record]) -> None:
    for record in records:
        assert canonical(replay_data(operation, record.data)) == canonical(record.truth), record.source


def _fails(root: Path, operation: str, relative: str, text: str, message: str) -> None:
    """``text`` as ``relative`` is not in the layout: the error starts with the file and line."""
    _write(root, relative, text)
    with pytest.raises(ReleasedFormatError, match=re.escape(message)):
        _read(root, operation)


STACK = """
push 12
push 7
pop
push 40
[12, 40]
push 3
pop
[]
"""


def test_stack(tmp_path: Path) -> None:
    _write(tmp_path, "stack/compound/compound_easy.txt", STACK)
    records = _read(tmp_path, "stack.compound")
    assert [(r.data, r.truth, r.source, r.variant) for r in records] == [
        (
            {"ops": [["push", 12], ["push", 7], ["pop"], ["push", 40]]},
            [12, 40],
            "stack/compound/compound_easy.txt:1",
            {},
        ),
        ({"ops": [["push", 3], ["pop"]]}, [], "stack/compound/compound_easy.txt:6", {}),
    ]
    _replays("stack.compound", records)
    assert _read(tmp_path, "stack.compound", "medium") == []


QUEUE = """
enqueue 5
enqueue 9
dequeue
enqueue 1
[9, 1]

enqueue 0
[0]
"""


def test_queue_medium(tmp_path: Path) -> None:
    _write(tmp_path, "queue/compound/compound_medium.txt", QUEUE)
    assert _read(tmp_path, "queue.compound") == []
    records = _read(tmp_path, "queue.compound", "medium")
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"ops": [["enqueue", 5], ["enqueue", 9], ["dequeue"], ["enqueue", 1]]},
            [9, 1],
            "queue/compound/compound_medium.txt:1",
        ),
        ({"ops": [["enqueue", 0]]}, [0], "queue/compound/compound_medium.txt:7"),
    ]
    _replays("queue.compound", records)


# Instance 0 does not consolidate: with consolidation 1 would sit below 2 and come after 3.
PRIORITY_QUEUE = """
PriorityQueue 0
insert (1, 34)
insert (2, 35)
insert (3, 5)
insert (4, 40)
insert (5, 99)
delete
insert (6, 35)
raise_key (3, 5)
[[4, 40], [6, 35], [2, 35], [1, 34], [3, 5]]
PriorityQueue 1
insert (7, 3)
decrease_key (7, 0)
delete
[]
"""


def test_priority_queue(tmp_path: Path) -> None:
    _write(tmp_path, "priority_queue/compound/compound_easy.txt", PRIORITY_QUEUE)
    records = _read(tmp_path, "priority_queue.compound")
    first_ops = [
        ["insert", 1, 34],
        ["insert", 2, 35],
        ["insert", 3, 5],
        ["insert", 4, 40],
        ["insert", 5, 99],
        ["delete"],
        ["insert", 6, 35],
        ["raise_key", 3, 5],
    ]
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"ops": first_ops},
            [[4, 40], [6, 35], [2, 35], [1, 34], [3, 5]],
            "priority_queue/compound/compound_easy.txt:1",
        ),
        (
            {"ops": [["insert", 7, 3], ["decrease_key", 7, 0], ["delete"]]},
            [],
            "priority_queue/compound/compound_easy.txt:11",
        ),
    ]
    _replays("priority_queue.compound", records)
    consolidating = FibonacciHeap()
    for op in first_ops:
        apply_pq_op(consolidating, op)
    assert consolidating.state() == [[4, 40], [6, 35], [2, 35], [3, 5], [1, 34]]


SKIP_LIST = """
SkipList 0 (Max Level: 3)
insert 50
Level generation probabilities: 0.1000, 0.2000, 0.3000, 0.4000
insert 20
Level generation probabilities: 0.4999, 0.5000
insert 50
insert 70
Level generation probabilities: 0.9000
delete 20
[[50], [50], [50], [50, 70]]
SkipList 1 (Max Level: 3)
insert 8
Level generation probabilities: 0.7000
delete 8
delete 8
[[]]
"""


def test_skip_list(tmp_path: Path) -> None:
    _write(tmp_path, "skip_list/compound/compound_easy.txt", SKIP_LIST)
    records = _read(tmp_path, "skip_list.compound")
    first_ops = [
        ["insert", 50, [0.1, 0.2, 0.3, 0.4]],  # the fourth coin is drawn at the max level: ignored
        ["insert", 20, [0.4999, 0.5]],
        ["insert", 50, []],  # already present: no probabilities line
        ["insert", 70, [0.9]],
        ["delete", 20],
    ]
    assert [(r.data, r.truth, r.source, r.variant) for r in records] == [
        (
            {"max_level": 3, "ops": first_ops},
            [[50], [50], [50], [50, 70]],
            "skip_list/compound/compound_easy.txt:1",
            {},
        ),
        (
            {"max_level": 3, "ops": [["insert", 8, [0.7]], ["delete", 8], ["delete", 8]]},
            [[]],
            "skip_list/compound/compound_easy.txt:11",
            {},
        ),
    ]
    _replays("skip_list.compound", records)


# Every line but the blank separators ends with a space, as in the public files.
HASHMAP = "".join(
    f"{line} \n" if line else "\n"
    for line in [
        "HashMap 0 with 10 buckets",
        "add key 13 value 1",
        "add key 23 value 2",
        "add key 5 value 3",
        "remove 13",
        "add key 13 value 4",
        "add key 23 value 9",
        "remove 77",
        "Final HashMap: [[], [], [], [(23, 9), (13, 4)], [], [(5, 3)], [], [], [], []]",
        "",
        "HashMap 1 with 4 buckets",
        "add key 40 value 0",
        "remove 40",
        "Final HashMap: [[], [], [], []]",
        "",
    ]
)


def _buckets(count: int, filled: dict[int, list[tuple[int, int]]]) -> list[dict[str, Any]]:
    return [
        {"number": n, "contents": [{"key": k, "value": v} for k, v in filled.get(n, [])]}
        for n in range(count)
    ]


def test_hashmap(tmp_path: Path) -> None:
    _write(tmp_path, "hashmap/compound/compound_easy.txt", HASHMAP)
    records = _read(tmp_path, "hashmap.compound")
    first_ops = [
        ["add", 13, 1],
        ["add", 23, 2],
        ["add", 5, 3],
        ["remove", 13],
        ["add", 13, 4],
        ["add", 23, 9],
        ["remove", 77],
    ]
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"buckets": 10, "ops": first_ops},
            _buckets(10, {3: [(23, 9), (13, 4)], 5: [(5, 3)]}),
            "hashmap/compound/compound_easy.txt:1",
        ),
        (
            {"buckets": 4, "ops": [["add", 40, 0], ["remove", 40]]},
            _buckets(4, {}),
            "hashmap/compound/compound_easy.txt:11",
        ),
    ]
    _replays("hashmap.compound", records)


TRIE = """
TrieTree 0
insert cat
insert car
insert cart
delete car
insert dog
insert cat
delete dog
['', 'c', 'a', 'r', 't', 't']
TrieTree 1
insert ab
delete ab
['']
"""


def test_trie(tmp_path: Path) -> None:
    _write(tmp_path, "trie/compound/compound_easy.txt", TRIE)
    records = _read(tmp_path, "trie.compound")
    first_ops = [
        ["insert", "cat"],
        ["insert", "car"],
        ["insert", "cart"],
        ["delete", "car"],
        ["insert", "dog"],
        ["insert", "cat"],
        ["delete", "dog"],
    ]
    assert [(r.data, r.truth, r.source) for r in records] == [
        ({"ops": first_ops}, ["", "c", "a", "r", "t", "t"], "trie/compound/compound_easy.txt:1"),
        ({"ops": [["insert", "ab"], ["delete", "ab"]]}, [""], "trie/compound/compound_easy.txt:10"),
    ]
    _replays("trie.compound", records)


SUFFIX_TREE = """
SuffixTree 0
abab$
['$', 'ab', '$', 'ab$', 'b', '$', 'ab$']
SuffixTree 1
xyz$
['$', 'xyz$', 'yz$', 'z$']
"""


def test_suffix_tree_hard(tmp_path: Path) -> None:
    _write(tmp_path, "suffix_tree/construct/construct_hard.txt", SUFFIX_TREE)
    records = _read(tmp_path, "suffix_tree.construct", "hard")
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"string": "abab"},
            ["$", "ab", "$", "ab$", "b", "$", "ab$"],
            "suffix_tree/construct/construct_hard.txt:1",
        ),
        ({"string": "xyz"}, ["$", "xyz$", "yz$", "z$"], "suffix_tree/construct/construct_hard.txt:4"),
    ]
    _replays("suffix_tree.construct", records)
    assert _read(tmp_path, "suffix_tree.construct") == []


def test_truncated_records(tmp_path: Path) -> None:
    _fails(
        tmp_path,
        "stack.compound",
        "stack/compound/compound_easy.txt",
        "push 1\n[1]\npush 2\npop\n",
        "stack/compound/compound_easy.txt:4: the file ends where the final stack was expected",
    )
    # a record without its final state runs into the next record's header
    _fails(
        tmp_path,
        "priority_queue.compound",
        "priority_queue/compound/compound_easy.txt",
        "PriorityQueue 0\ninsert (1, 2)\nPriorityQueue 1\ninsert (3, 4)\n[[3, 4]]\n",
        "priority_queue/compound/compound_easy.txt:3: expected 'insert (v, p)', 'delete', "
        "'raise_key (v, p)', 'decrease_key (v, p)' or the final priority queue (a line starting '['), "
        "found 'PriorityQueue 1'",
    )
    _fails(
        tmp_path,
        "suffix_tree.construct",
        "suffix_tree/construct/construct_easy.txt",
        "SuffixTree 0\nab$\n",
        "suffix_tree/construct/construct_easy.txt:2: the file ends where the suffix tree was expected",
    )
    _fails(
        tmp_path,
        "hashmap.compound",
        "hashmap/compound/compound_easy.txt",
        "HashMap 0 with 2 buckets \nFinal HashMap: [[], []] \n",
        "hashmap/compound/compound_easy.txt:2: the final hashmap with no operation before it",
    )


def test_bad_truth_literals(tmp_path: Path) -> None:
    _fails(
        tmp_path,
        "hashmap.compound",
        "hashmap/compound/compound_easy.txt",
        "HashMap 0 with 2 buckets \nadd key 1 value 2 \nFinal HashMap: [[], [(1, 2)] \n",
        "hashmap/compound/compound_easy.txt:3: the final hashmap is not a Python literal: '[[], [(1, 2)]'",
    )
    _fails(
        tmp_path,
        "hashmap.compound",
        "hashmap/compound/compound_easy.txt",
        "HashMap 0 with 3 buckets \nadd key 1 value 2 \nFinal HashMap: [[], [(1, 2)]] \n",
        "hashmap/compound/compound_easy.txt:3: the final hashmap has 2 buckets, its header says 3",
    )
    _fails(
        tmp_path,
        "trie.compound",
        "trie/compound/compound_easy.txt",
        "TrieTree 0\ninsert ab\n['', a, b]\n",
        "trie/compound/compound_easy.txt:3: the final trie is not a Python literal",
    )
    _fails(
        tmp_path,
        "skip_list.compound",
        "skip_list/compound/compound_easy.txt",
        "SkipList 0 (Max Level: 3)\ninsert 4\nLevel generation probabilities: 0.9\n[4]\n",
        "skip_list/compound/compound_easy.txt:4: the final skip list is not a non-empty list of levels",
    )
    _fails(
        tmp_path,
        "priority_queue.compound",
        "priority_queue/compound/compound_easy.txt",
        "PriorityQueue 0\ninsert (1, 2)\n[(1, 2, 3)]\n",
        "priority_queue/compound/compound_easy.txt:3: the final priority queue is not a list of "
        "[value, priority] pairs",
    )
    _fails(
        tmp_path,
        "queue.compound",
        "queue/compound/compound_easy.txt",
        "enqueue 1\n['1']\n",
        "queue/compound/compound_easy.txt:2: the final queue is not a list of integers",
    )
    _fails(
        tmp_path,
        "skip_list.compound",
        "skip_list/compound/compound_easy.txt",
        "SkipList 0 (Max Level: 3)\ninsert 4\nLevel generation probabilities: 0.9, x\n[[4]]\n",
        "skip_list/compound/compound_easy.txt:3: the level generation probabilities are not numbers",
    )


def test_unexpected_lines(tmp_path: Path) -> None:
    _fails(
        tmp_path,
        "stack.compound",
        "stack/compound/compound_easy.txt",
        "Stack 0\npush 1\n[1]\n",
        "stack/compound/compound_easy.txt:1: expected 'push <value>', 'pop' or the final stack",
    )
    _fails(
        tmp_path,
        "skip_list.compound",
        "skip_list/compound/compound_easy.txt",
        "SkipList 1 (Max Level: 3)\ninsert 4\n[[4]]\n",
        "skip_list/compound/compound_easy.txt:1: expected the header 'SkipList 0 (Max Level: <m>)', "
        "found 'SkipList 1 (Max Level: 3)'",
    )
    # a probabilities line only ever follows an insert
    _fails(
        tmp_path,
        "skip_list.compound",
        "skip_list/compound/compound_easy.txt",
        "SkipList 0 (Max Level: 3)\ninsert 4\ndelete 4\nLevel generation probabilities: 0.9000\n[[]]\n",
        "skip_list/compound/compound_easy.txt:4: expected 'insert <v>', 'delete <v>' or the final skip list",
    )
    _fails(
        tmp_path,
        "hashmap.compound",
        "hashmap/compound/compound_easy.txt",
        "HashMap 0 with 1 buckets \nadd key 31 value 37 \nFinal HashMap: [[(31, 37)]] \n\n"
        "HashMap 2 with 1 buckets \n",
        "hashmap/compound/compound_easy.txt:5: expected the header 'HashMap 1 with <B> buckets', "
        "found 'HashMap 2 with 1 buckets'",
    )
    _fails(
        tmp_path,
        "hashmap.compound",
        "hashmap/compound/compound_easy.txt",
        "HashMap 0 with 1 buckets \nput key 31 value 37 \nFinal HashMap: [[]] \n",
        "hashmap/compound/compound_easy.txt:2: expected 'add key <k> value <v>', 'remove <k>' or the final "
        "hashmap (a line starting 'Final HashMap:'), found 'put key 31 value 37'",
    )
    _fails(
        tmp_path,
        "trie.compound",
        "trie/compound/compound_easy.txt",
        "Trie 0\ninsert ab\n['', 'a', 'b']\n",
        "trie/compound/compound_easy.txt:1: expected the header 'TrieTree 0', found 'Trie 0'",
    )
    _fails(
        tmp_path,
        "suffix_tree.construct",
        "suffix_tree/construct/construct_easy.txt",
        "SuffixTree 0\nabab\n['$']\n",
        "suffix_tree/construct/construct_easy.txt:2: expected the word ending in its one '$', found 'abab'",
    )
