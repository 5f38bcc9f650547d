"""The public DSR-Bench's hierarchical instance files (binary search tree, min-heap, red-black tree,
B+ tree), hand-written here in each layout: read into embodia's data and truths, the truths
checked by replay, and files not in their layout named with the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from embodia.envs.dsr import released
from embodia.envs.dsr.core import canonical
from embodia.envs.dsr.released import ReleasedFormatError
from embodia.envs.dsr.replay import replay_data
from embodia.envs.dsr.structures.red_black import RedBlackTree


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.lstrip("\n"))


def _spaced(text: str) -> str:
    """The text with a space after each closing list, as the public bst files write them."""
    return text.replace("]\n", "] \n")


def _read(root: Path, operation: str, mode: str = "easy") -> list[released.Record]:
    return list(released.READERS[operation](root, mode))


def _replays(operation: str, records: list[released.Record]) -> None:
    for record in records:
        assert canonical(replay_data(operation, record.data)) == canonical(record.truth), record.source


BST_INPUT = """
Tree 0
50 30 70
30 20 40
20 None None
40 None None
70 60 None
60 None None
Tree 1
10 None 35
35 15 None
15 None 22
22 None None
"""
TREE_0 = [[50, 30, 70], [30, 20, 40], [20, None, None], [40, None, None], [70, 60, None], [60, None, None]]
TREE_1 = [[10, None, 35], [35, 15, None], [15, None, 22], [22, None, None]]

# the public files separate traversal records by a blank line
TRAVERSALS = _spaced("""
Pre-order: [50,30,20,40,70,60]
In-order: [20,30,40,50,60,70]
Post-order: [20,40,30,60,70,50]
Depth: 3

Pre-order: [10,35,15,22]
In-order: [10,15,22,35]
Post-order: [22,15,35,10]
Depth: 4

""")


@pytest.fixture
def bst_root(tmp_path: Path) -> Path:
    _write(tmp_path, "binary_tree/bst_generation/bst_input_easy.txt", BST_INPUT)
    _write(tmp_path, "binary_tree/traversal/bst_traversal_easy.txt", TRAVERSALS)
    return tmp_path


def test_bst_queries_take_the_given_tree_and_their_line(bst_root: Path) -> None:
    truths = {
        "bst.preorder": ([50, 30, 20, 40, 70, 60], [10, 35, 15, 22]),
        "bst.inorder": ([20, 30, 40, 50, 60, 70], [10, 15, 22, 35]),
        "bst.postorder": ([20, 40, 30, 60, 70, 50], [22, 15, 35, 10]),
        "bst.depth": (3, 4),
    }
    for operation, expected in truths.items():
        records = _read(bst_root, operation)
        assert [r.truth for r in records] == list(expected)
        assert [r.data for r in records] == [
            {"keys": [50, 30, 20, 40, 70, 60], "tree": TREE_0},
            {"keys": [10, 35, 15, 22], "tree": TREE_1},
        ]
        assert [r.source for r in records] == [
            "binary_tree/traversal/bst_traversal_easy.txt:1",
            "binary_tree/traversal/bst_traversal_easy.txt:6",
        ]
        assert all(r.variant == {} for r in records)
        _replays(operation, records)


def test_bst_insert_and_remove(bst_root: Path) -> None:
    _write(
        bst_root,
        "binary_tree/insert/bst_insert_easy.txt",
        _spaced("""
Insert: 45
Pre-order: [50,30,20,40,45,70,60]
Post-order: [20,45,40,30,60,70,50]
Insert: 12
Pre-order: [10,35,15,12,22]
Post-order: [12,22,15,35,10]
"""),
    )
    # 50 has two children: its in-order successor 60 takes its place
    _write(
        bst_root,
        "binary_tree/remove/bst_remove_easy.txt",
        _spaced("""
Remove: 50
Pre-order: [60,30,20,40,70]
Post-order: [20,40,30,70,60]
Remove: 35
Pre-order: [10,15,22]
Post-order: [22,15,10]
"""),
    )
    inserts = _read(bst_root, "bst.insert")
    assert [r.data for r in inserts] == [
        {"keys": [50, 30, 20, 40, 70, 60], "tree": TREE_0, "insert": 45},
        {"keys": [10, 35, 15, 22], "tree": TREE_1, "insert": 12},
    ]
    assert inserts[0].truth == {
        "pre_order": [50, 30, 20, 40, 45, 70, 60],
        "post_order": [20, 45, 40, 30, 60, 70, 50],
    }
    assert [r.source for r in inserts] == [
        "binary_tree/insert/bst_insert_easy.txt:1",
        "binary_tree/insert/bst_insert_easy.txt:4",
    ]
    removes = _read(bst_root, "bst.remove")
    assert removes[1].data == {"keys": [10, 35, 15, 22], "tree": TREE_1, "remove": 35}
    assert removes[0].truth == {"pre_order": [60, 30, 20, 40, 70], "post_order": [20, 40, 30, 70, 60]}
    _replays("bst.insert", inserts)
    _replays("bst.remove", removes)


def test_bst_compound(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "binary_tree/compound/bst_compound_easy.txt",
        _spaced("""
Insert: 40
Insert: 20
Insert: 60
Delete: 40
Insert: 50
[60,20,50]
Insert: 7
Delete: 7
Insert: 9
[9]
"""),
    )
    records = _read(tmp_path, "bst.compound")
    assert records[0].data == {
        "ops": [["insert", 40], ["insert", 20], ["insert", 60], ["delete", 40], ["insert", 50]]
    }
    assert [r.truth for r in records] == [[60, 20, 50], [9]]
    assert records[1].source == "binary_tree/compound/bst_compound_easy.txt:7"
    _replays("bst.compound", records)


def test_heap_heapify_and_compound(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "heap/heapify/heapify_easy.txt",
        """
Heap 0
[9, 4, 7, 1, 8, 1]
[1, 4, 1, 9, 8, 7]
Heap 1
[3, 2]
[2, 3]
""",
    )
    _write(
        tmp_path,
        "heap/compound/compound_easy.txt",
        """
Heap 0
insert 30
insert 10
insert 20
delete
insert 5
[5, 30, 20]
Heap 1
insert 8
delete
[]
""",
    )
    heapify = _read(tmp_path, "heap.heapify")
    assert [(r.data, r.truth) for r in heapify] == [
        ({"array": [9, 4, 7, 1, 8, 1]}, [1, 4, 1, 9, 8, 7]),
        ({"array": [3, 2]}, [2, 3]),
    ]
    assert [r.source for r in heapify] == [
        "heap/heapify/heapify_easy.txt:1",
        "heap/heapify/heapify_easy.txt:4",
    ]
    compound = _read(tmp_path, "heap.compound")
    assert compound[0].data == {
        "ops": [["insert", 30], ["insert", 10], ["insert", 20], ["delete"], ["insert", 5]]
    }
    assert [r.truth for r in compound] == [[5, 30, 20], []]
    assert compound[1].source == "heap/compound/compound_easy.txt:8"
    _replays("heap.heapify", heapify)
    _replays("heap.compound", compound)


def test_rb_construct_and_compound_with_repeated_keys(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "rb_tree/construct/rbt_construct_easy.txt",
        """
Tree 0
Values: [10,20,30]
Pre-order: [[20, 'b'],[10, 'r'],[30, 'r']]
Tree 1
Values: [5,3,8,1]
Pre-order: [[5, 'b'],[3, 'b'],[1, 'r'],[8, 'b']]
""",
    )
    # the public generator inserts some keys twice: an equal key goes right, a delete takes the first met
    _write(
        tmp_path,
        "rb_tree/compound/rbt_compound_easy.txt",
        """
Tree 0
Insert: 40
Insert: 40
Insert: 15
Insert: 8
Delete: 15
Pre-order: [[40, 'b'],[8, 'b'],[40, 'b']]
Tree 1
Insert: 5
Delete: 5
Pre-order: []
Tree 2
Insert: 30
Insert: 30
Delete: 30
Pre-order: [[30, 'b']]
""",
    )
    construct = _read(tmp_path, "rb_tree.construct")
    assert [(r.data, r.truth) for r in construct] == [
        ({"keys": [10, 20, 30]}, [[20, 1], [10, 0], [30, 0]]),
        ({"keys": [5, 3, 8, 1]}, [[5, 1], [3, 1], [1, 0], [8, 1]]),
    ]
    assert construct[1].source == "rb_tree/construct/rbt_construct_easy.txt:4"
    compound = _read(tmp_path, "rb_tree.compound")
    assert compound[0].data == {
        "ops": [["insert", 40], ["insert", 40], ["insert", 15], ["insert", 8], ["delete", 15]]
    }
    assert [r.truth for r in compound] == [[[40, 1], [8, 1], [40, 1]], [], [[30, 1]]]
    assert compound[2].data == {"ops": [["insert", 30], ["insert", 30], ["delete", 30]]}
    assert [r.source for r in compound] == [
        "rb_tree/compound/rbt_compound_easy.txt:1",
        "rb_tree/compound/rbt_compound_easy.txt:8",
        "rb_tree/compound/rbt_compound_easy.txt:12",
    ]
    _replays("rb_tree.construct", construct)
    _replays("rb_tree.compound", compound)


# A red-black tree that inserting its keys (in any order here: it is the pre-order) does not
# build: 30 is red with black children, where insertions would leave 30 black, 20 and 40 red.
RB_INPUT = """
Tree 0
10 b
5 b
#
#
30 r
20 b
#
#
40 b
#
#
Tree 1
7 b
#
#
"""
RB_TREE_0 = [
    [10, "b", 5, 30],
    [5, "b", None, None],
    [30, "r", 20, 40],
    [20, "b", None, None],
    [40, "b", None, None],
]


def test_rb_construct_compound_starts_from_the_given_coloured_tree(tmp_path: Path) -> None:
    _write(tmp_path, "rb_tree/rbt_input_easy.txt", RB_INPUT)
    _write(
        tmp_path,
        "rb_tree/construct_compound/rbt_construct_compound_easy.txt",
        """
Tree 0
Insert: 3
Delete: 5
Pre-order: [[10, 'b'],[3, 'b'],[30, 'r'],[20, 'b'],[40, 'b']]
Tree 1
Delete: 7
Insert: 9
Pre-order: [[9, 'b']]
""",
    )
    records = _read(tmp_path, "rb_tree.construct_compound")
    assert records[0].data == {
        "keys": [10, 5, 30, 20, 40],
        "tree": RB_TREE_0,
        "ops": [["insert", 3], ["delete", 5]],
    }
    assert records[0].truth == [[10, 1], [3, 1], [30, 0], [20, 1], [40, 1]]
    assert records[1].data == {
        "keys": [7],
        "tree": [[7, "b", None, None]],
        "ops": [["delete", 7], ["insert", 9]],
    }
    assert [r.source for r in records] == [
        "rb_tree/construct_compound/rbt_construct_compound_easy.txt:1",
        "rb_tree/construct_compound/rbt_construct_compound_easy.txt:5",
    ]
    _replays("rb_tree.construct_compound", records)
    # the keys alone would start from another tree, and end in another
    rebuilt = RedBlackTree(records[0].data["keys"])
    assert rebuilt.nodes() != RB_TREE_0
    rebuilt.insert(3)
    rebuilt.delete(5)
    assert canonical(rebuilt.state()) != canonical(records[0].truth)


def test_b_plus_tree_order_is_the_variant_and_repeated_keys_stay(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "b_plus_tree/compound/compound_medium.txt",
        """
BPlusTree 0 (Order: 4)
insert 5
insert 9
insert 5
insert 2
delete 5
[[5], [2, 5], [9]]
BPlusTree 1 (Order: 6)
insert 1
delete 1
[[]]
""",
    )
    assert _read(tmp_path, "b_plus_tree.compound") == []  # no easy file
    records = _read(tmp_path, "b_plus_tree.compound", "medium")
    assert records[0].data == {
        "order": 4,
        "ops": [["insert", 5], ["insert", 9], ["insert", 5], ["insert", 2], ["delete", 5]],
    }
    assert records[0].truth == [[5], [2, 5], [9]] and records[0].variant == {"order": 4}
    assert records[1].data == {"order": 6, "ops": [["insert", 1], ["delete", 1]]} and records[1].truth == [[]]
    assert records[1].variant == {"order": 6}
    assert records[1].source == "b_plus_tree/compound/compound_medium.txt:8"
    _replays("b_plus_tree.compound", records)


OPERATIONS = [
    "bst.preorder",
    "bst.inorder",
    "bst.postorder",
    "bst.depth",
    "bst.insert",
    "bst.remove",
    "bst.compound",
    "heap.heapify",
    "heap.compound",
    "rb_tree.construct",
    "rb_tree.compound",
    "rb_tree.construct_compound",
    "b_plus_tree.compound",
]


def test_an_absent_file_has_no_records(tmp_path: Path) -> None:
    # the auxiliary trees alone are no instances
    _write(tmp_path, "binary_tree/bst_generation/bst_input_easy.txt", BST_INPUT)
    _write(tmp_path, "rb_tree/rbt_input_easy.txt", RB_INPUT)
    for operation in OPERATIONS:
        assert operation in released.READERS
        for mode in ("easy", "medium", "hard"):
            assert _read(tmp_path, operation, mode) == []


RB_OPS = "rb_tree/construct_compound/rbt_construct_compound_easy.txt"
RB_ONE_OP = "Tree 0\nInsert: 9\nPre-order: []\n"

MALFORMED: list[tuple[str, dict[str, str], str]] = [
    # a truncated record
    (
        "bst.insert",
        {"binary_tree/insert/bst_insert_easy.txt": "Insert: 45\nPre-order: [50,30,20,40,45,70,60] \n"},
        r"bst_insert_easy.txt:2: the file ends where the post-order was expected",
    ),
    (
        "rb_tree.compound",
        {"rb_tree/compound/rbt_compound_easy.txt": "Tree 0\nInsert: 4\nTree 1\nInsert: 5\nPre-order: []\n"},
        r"rbt_compound_easy.txt:3: expected 'Insert: k', 'Delete: k' or the final pre-order .*found 'Tree 1'",
    ),
    (
        "bst.compound",
        {"binary_tree/compound/bst_compound_easy.txt": "Insert: 4\n[4] \n[4] \n"},
        r"bst_compound_easy.txt:3: the final pre-order with no operation before it",
    ),
    (
        "rb_tree.construct_compound",
        {
            "rb_tree/rbt_input_easy.txt": "Tree 0\n7 b\n#\nTree 1\n",
            RB_OPS: RB_ONE_OP,
        },
        r"rbt_input_easy.txt:4: expected a node '<key> r\|b' or '#', found 'Tree 1'",
    ),
    # a bad literal
    (
        "heap.heapify",
        {"heap/heapify/heapify_easy.txt": "Heap 0\n[3, 2\n[2, 3]\n"},
        r"heapify_easy.txt:2: the array is not a Python literal",
    ),
    (
        "rb_tree.construct",
        {"rb_tree/construct/rbt_construct_easy.txt": "Tree 0\nValues: [4]\nPre-order: [[4, 'x']]\n"},
        r"rbt_construct_easy.txt:3: the pre-order is not a list of \[key, 'r'\|'b'\] pairs",
    ),
    (
        "bst.depth",
        {
            "binary_tree/bst_generation/bst_input_easy.txt": BST_INPUT,
            "binary_tree/traversal/bst_traversal_easy.txt": TRAVERSALS.replace("Depth: 4", "Depth: four"),
        },
        r"bst_traversal_easy.txt:9: the depth is not a Python literal",
    ),
    (
        "b_plus_tree.compound",
        {"b_plus_tree/compound/compound_easy.txt": "BPlusTree 0 (Order: 4)\ninsert 3\n[[3], [4]\n"},
        r"compound_easy.txt:3: the final tree is not a Python literal",
    ),
    # a record with no auxiliary tree
    (
        "bst.preorder",
        {
            "binary_tree/bst_generation/bst_input_easy.txt": BST_INPUT.split("Tree 1")[0],
            "binary_tree/traversal/bst_traversal_easy.txt": TRAVERSALS,
        },
        r"bst_traversal_easy.txt:6: the record needs Tree 1 of "
        r"binary_tree/bst_generation/bst_input_easy.txt, which has only 1",
    ),
    (
        "bst.remove",
        {"binary_tree/remove/bst_remove_easy.txt": "Remove: 50\nPre-order: [60] \nPost-order: [60] \n"},
        r"bst_remove_easy.txt:1: the record needs Tree 0 of binary_tree/bst_generation/bst_input_easy.txt, "
        r"which is absent",
    ),
    (
        "rb_tree.construct_compound",
        {RB_OPS: RB_ONE_OP},
        r"rbt_construct_compound_easy.txt:1: the record needs Tree 0 of rb_tree/rbt_input_easy.txt, "
        r"which is absent",
    ),
    # auxiliary trees that are not what they claim
    (
        "bst.insert",
        {
            "binary_tree/bst_generation/bst_input_easy.txt": "Tree 0\n5 9 None\n9 None None\n",
            "binary_tree/insert/bst_insert_easy.txt": "Insert: 7\nPre-order: [5] \nPost-order: [5] \n",
        },
        r"bst_input_easy.txt:1: Tree 0 is not a binary search tree",
    ),
    (
        "rb_tree.construct_compound",
        {
            "rb_tree/rbt_input_easy.txt": "Tree 0\n7 r\n#\n#\n",
            RB_OPS: RB_ONE_OP,
        },
        r"rbt_input_easy.txt:1: Tree 0 is not a red-black tree: the root 7 is red",
    ),
    # headers and operations out of the layout
    (
        "heap.compound",
        {"heap/compound/compound_easy.txt": "Heap 1\ninsert 3\n[3]\n"},
        r"compound_easy.txt:1: expected the header 'Heap 0', found 'Heap 1'",
    ),
    (
        "heap.compound",
        {"heap/compound/compound_easy.txt": "Heap 0\ninsert 3\ndelete 3\n[]\n"},
        r"compound_easy.txt:3: expected 'insert v', 'delete' or the final heap",
    ),
    (
        "b_plus_tree.compound",
        {"b_plus_tree/compound/compound_easy.txt": "BPlusTree 0\ninsert 3\n[[3]]\n"},
        r"compound_easy.txt:1: expected the header 'BPlusTree 0 \(Order: <m>\)', found 'BPlusTree 0'",
    ),
    (
        "bst.postorder",
        {
            "binary_tree/bst_generation/bst_input_easy.txt": BST_INPUT,
            "binary_tree/traversal/bst_traversal_easy.txt": TRAVERSALS.replace("In-order", "Inorder"),
        },
        r"bst_traversal_easy.txt:2: expected the in-order starting 'In-order:'",
    ),
]


@pytest.mark.parametrize(("operation", "files", "message"), MALFORMED)
def test_files_not_in_their_layout_are_named_with_the_line(
    tmp_path: Path, operation: str, files: dict[str, Any], message: str
) -> None:
    for relative, text in files.items():
        _write(tmp_path, relative, text)
    with pytest.raises(ReleasedFormatError, match=message):
        _read(tmp_path, operation)
