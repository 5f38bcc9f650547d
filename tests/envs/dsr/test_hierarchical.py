"""Hierarchical DSR structures: BST, min-heap, red-black tree, B+ tree."""

from __future__ import annotations

import heapq
import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodia.envs.dsr.core import LENGTHS, OPERATIONS, get_operation
from embodia.envs.dsr.structures.b_plus_tree import _BPNode
from embodia.envs.dsr.structures.hierarchical import (
    BLACK,
    BST,
    RED,
    BPlusTree,
    MinHeap,
    RedBlackTree,
    bplus_order,
)

HIER_KEYS = [
    "bst.insert",
    "bst.remove",
    "bst.compound",
    "bst.preorder",
    "bst.inorder",
    "bst.postorder",
    "bst.depth",
    "heap.heapify",
    "heap.compound",
    "rb_tree.construct",
    "rb_tree.compound",
    "rb_tree.construct_compound",
    "b_plus_tree.compound",
]

# Operation sequences: (is_insert, key) pairs; a delete picks a present key by index.
OPS = st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=60)


def _replay_distinct(ops: list[tuple[bool, int]]) -> list[tuple[str, int]]:
    """Turn raw draws into valid insert-absent / delete-present operations."""
    present: list[int] = []
    out: list[tuple[str, int]] = []
    for is_insert, key in ops:
        if is_insert or not present:
            if key in present:
                continue
            present.append(key)
            out.append(("insert", key))
        else:
            victim = present.pop(key % len(present))
            out.append(("delete", victim))
    return out


def _against_set(tree: Any, raw: list[tuple[bool, int]]) -> Iterator[set[int]]:
    """Apply the operations :func:`_replay_distinct` makes of ``raw`` to ``tree`` and to a set;
    the set after each operation."""
    model: set[int] = set()
    for name, key in _replay_distinct(raw):
        getattr(tree, name)(key)
        if name == "insert":
            model.add(key)
        else:
            model.remove(key)
        yield model


# --------------------------------------------------------------------------------- BST


def _children(tree: BST) -> tuple[int | None, dict[int, tuple[int | None, int | None]]]:
    nodes = tree.nodes()
    kids: dict[int, tuple[int | None, int | None]] = {}
    for key, left, right in nodes:
        assert key is not None
        kids[key] = (left, right)
    return (nodes[0][0] if nodes else None), kids


def _check_bst_order(root: int | None, kids: dict[int, tuple[int | None, int | None]]) -> None:
    stack: list[tuple[int | None, float, float]] = [(root, float("-inf"), float("inf"))]
    while stack:
        key, low, high = stack.pop()
        if key is None:
            continue
        assert low < key < high
        left, right = kids[key]
        stack.append((left, low, key))
        stack.append((right, key, high))


def _walk(key: int | None, kids: dict[int, tuple[int | None, int | None]], order: str) -> list[int]:
    if key is None:
        return []
    left, right = kids[key]
    parts = {"n": [key], "l": _walk(left, kids, order), "r": _walk(right, kids, order)}
    return [k for part in order for k in parts[part]]


def _height(key: int | None, kids: dict[int, tuple[int | None, int | None]]) -> int:
    return 0 if key is None else 1 + max(_height(kids[key][0], kids), _height(kids[key][1], kids))


@settings(max_examples=100, deadline=None)
@given(OPS)
def test_bst_invariants_against_set(raw: list[tuple[bool, int]]) -> None:
    tree = BST()
    for model in _against_set(tree, raw):
        root, kids = _children(tree)
        _check_bst_order(root, kids)
        assert tree.inorder() == sorted(model)
        assert set(kids) == model
    root, kids = _children(tree)
    assert tree.preorder() == _walk(root, kids, "nlr")
    assert tree.postorder() == _walk(root, kids, "lrn")
    assert tree.depth() == _height(root, kids)
    assert tree.state() == tree.preorder()


def test_bst_insert_golden() -> None:
    tree = BST([50, 30, 70])
    tree.insert(60)
    assert tree.traversals() == {"pre_order": [50, 30, 70, 60], "post_order": [30, 60, 70, 50]}


def test_bst_remove_two_children_uses_successor() -> None:
    tree = BST([50, 30, 70, 20, 40, 60, 80, 65])
    tree.remove(50)  # successor 60 moves up; its right child 65 takes 60's old place
    assert tree.preorder() == [60, 30, 20, 40, 70, 65, 80]
    assert tree.postorder() == [20, 40, 30, 65, 80, 70, 60]


def test_bst_remove_leaf_and_one_child() -> None:
    tree = BST([50, 30, 70, 20])
    tree.remove(30)  # one child: 20 moves up
    assert tree.preorder() == [50, 20, 70]
    tree.remove(70)
    assert tree.preorder() == [50, 20]


def test_bst_compound_golden() -> None:
    tree = BST([5, 3, 8, 4])
    tree.remove(5)  # successor is the right child 8 itself
    assert tree.preorder() == [8, 3, 4]


def test_bst_depth_counts_nodes() -> None:
    assert BST().depth() == 0
    assert BST([50]).depth() == 1
    assert BST([50, 30, 70]).depth() == 2
    assert BST([50, 30, 20]).depth() == 3
    # The reference's first easy traversal instance: depth 4 for a longest path of 4 nodes.
    assert BST([13, 4, 58, 44, 21, 54, 92, 62]).depth() == 4


def test_bst_traversal_golden() -> None:
    tree = BST([8, 3, 10, 1, 6, 14, 4, 7, 13])
    assert tree.preorder() == [8, 3, 1, 6, 4, 7, 10, 14, 13]
    assert tree.inorder() == [1, 3, 4, 6, 7, 8, 10, 13, 14]
    assert tree.postorder() == [1, 4, 7, 6, 3, 13, 14, 10, 8]
    assert tree.depth() == 4


# --------------------------------------------------------------------------------- heap


def _is_min_heap(items: list[int]) -> bool:
    return all(items[(i - 1) // 2] <= items[i] for i in range(1, len(items)))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 15), st.none()), max_size=60))
def test_heap_against_heapq(ops: list[int | None]) -> None:
    heap, model = MinHeap(), []
    for op in ops:
        if op is None:
            if not model:
                continue
            assert heap.delete() == heapq.heappop(model)
        else:
            heap.insert(op)
            heapq.heappush(model, op)
        assert _is_min_heap(heap.items)
        assert Counter(heap.items) == Counter(model)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 15), max_size=40))
def test_heapify_property(values: list[int]) -> None:
    heap = MinHeap(values)
    heap.heapify()
    assert _is_min_heap(heap.items)
    assert Counter(heap.items) == Counter(values)


def test_heapify_prefers_left_child_on_ties() -> None:
    heap = MinHeap([9, 3, 3])
    heap.heapify()
    assert heap.state() == [3, 9, 3]
    # Right-preference would give [2, 2, 4, 7, 8, 5, 6].
    heap = MinHeap([5, 2, 2, 7, 8, 4, 6])
    heap.heapify()
    assert heap.state() == [2, 5, 2, 7, 8, 4, 6]


def test_heapify_golden_bottom_up() -> None:
    heap = MinHeap([94, 74, 50, 18, 43])
    heap.heapify()  # index 1: 74 <-> 18; index 0: 94 <-> 18, then 94 <-> 43
    assert heap.state() == [18, 43, 50, 74, 94]


def test_heap_compound_golden() -> None:
    heap = MinHeap()
    for value in (4, 1, 1, 7):
        heap.insert(value)
    assert heap.state() == [1, 4, 1, 7]  # the second 1 is not strictly smaller than the root: stays
    assert heap.delete() == 1
    assert heap.state() == [1, 4, 7]
    heap = MinHeap()
    for value in (2, 5, 5, 9):
        heap.insert(value)
    heap.delete()  # 9 goes to the root, children tie at 5: swap with the left one
    assert heap.state() == [5, 9, 5]


# --------------------------------------------------------------------------------- red-black tree


def _check_rb(tree: RedBlackTree) -> None:
    nil = tree.nil
    assert tree.root.color == BLACK
    assert tree.root is nil or tree.root.parent is nil

    def black_height(node: Any, low: float, high: float) -> int:
        if node is nil:
            return 1
        assert low < node.key < high
        assert node.color in (RED, BLACK)
        for child in (node.left, node.right):
            if child is not nil:
                assert child.parent is node
                if node.color == RED:
                    assert child.color == BLACK
        left = black_height(node.left, low, node.key)
        right = black_height(node.right, node.key, high)
        assert left == right
        return left + (node.color == BLACK)

    black_height(tree.root, float("-inf"), float("inf"))


@settings(max_examples=100, deadline=None)
@given(OPS)
def test_rb_properties_against_set(raw: list[tuple[bool, int]]) -> None:
    tree = RedBlackTree()
    for model in _against_set(tree, raw):
        _check_rb(tree)
        assert tree.keys() == sorted(model)
    assert [pair[0] for pair in tree.state()] == [node[0] for node in tree.nodes()]


def test_rb_insert_case_3_and_case_1() -> None:
    tree = RedBlackTree([10, 20, 30])  # 30: black uncle, straight line -> rotate left at 10
    assert tree.state() == [[20, 1], [10, 0], [30, 0]]
    tree.insert(40)  # red uncle 10 -> recolor, root stays black
    assert tree.state() == [[20, 1], [10, 1], [30, 1], [40, 0]]


def test_rb_insert_case_2_zigzag() -> None:
    tree = RedBlackTree([10, 30])
    assert tree.state() == [[10, 1], [30, 0]]
    tree.insert(20)  # zig-zag: rotate right at 30, then left at 10
    assert tree.state() == [[20, 1], [10, 0], [30, 0]]


def test_rb_construct_golden_clrs_exercise() -> None:
    # CLRS exercise 13.3-2: insert 41, 38, 31, 12, 19, 8 into an empty tree.
    tree = RedBlackTree([41, 38, 31, 12, 19, 8])
    assert tree.state() == [[38, 1], [19, 0], [12, 1], [8, 0], [31, 1], [41, 1]]


def test_rb_delete_golden_double_black() -> None:
    tree = RedBlackTree([41, 38, 31, 12, 19, 8])
    tree.delete(8)  # red leaf: no fix-up
    assert tree.state() == [[38, 1], [19, 0], [12, 1], [31, 1], [41, 1]]
    tree.delete(12)  # black leaf: double black, sibling 31 black with black children -> case 2
    assert tree.state() == [[38, 1], [19, 1], [31, 0], [41, 1]]
    tree.delete(19)
    assert tree.state() == [[38, 1], [31, 1], [41, 1]]
    tree.delete(31)
    assert tree.state() == [[38, 1], [41, 0]]
    tree.delete(38)
    assert tree.state() == [[41, 1]]
    tree.delete(41)
    assert tree.state() == []


def test_rb_delete_cases_1_3_4() -> None:
    tree = RedBlackTree([20, 10, 30, 40])
    tree.delete(10)  # case 4: sibling's far child red
    assert tree.state() == [[30, 1], [20, 1], [40, 1]]
    tree = RedBlackTree([20, 10, 30, 25])
    tree.delete(10)  # case 3 (near child red) then case 4
    assert tree.state() == [[25, 1], [20, 1], [30, 1]]
    tree = RedBlackTree([20, 10, 30, 25, 35, 40])
    assert tree.state() == [[20, 1], [10, 1], [30, 0], [25, 1], [35, 1], [40, 0]]
    tree.delete(10)  # case 1 (red sibling) then case 2 ends at the red parent
    assert tree.state() == [[30, 1], [20, 1], [25, 0], [35, 1], [40, 0]]


def test_rb_delete_two_children_successor_deeper() -> None:
    tree = RedBlackTree([20, 10, 30, 25, 35, 40])
    tree.delete(20)  # successor 25 (not a child of 20) replaces the root, then case 4 at 30
    assert tree.state() == [[25, 1], [10, 1], [35, 0], [30, 1], [40, 1]]


def test_deleting_an_absent_key_changes_nothing_in_every_structure() -> None:
    tree = RedBlackTree([1, 2])
    before = tree.state()
    tree.delete(3)
    assert tree.state() == before
    bst, bplus = BST([5, 1, 9]), BPlusTree(3)
    for key in (5, 1, 9, 4):
        bplus.insert(key)
    for structure in (bst, bplus):
        state = structure.state()
        structure.delete(7)
        assert structure.state() == state


# --------------------------------------------------------------------------------- B+ tree


def _check_bplus(tree: BPlusTree, model: set[int]) -> None:
    leaf_depths: set[int] = set()

    def walk(node: _BPNode, depth: int, low: float, high: float) -> None:
        assert len(node.keys) < tree.order
        assert node.keys == sorted(node.keys)
        assert all(low <= key < high for key in node.keys)
        if node.leaf:
            leaf_depths.add(depth)
            return
        assert node.keys, "internal nodes never lose separators"
        assert len(node.children) == len(node.keys) + 1
        bounds = [low, *node.keys, high]
        for index, child in enumerate(node.children):
            walk(child, depth + 1, bounds[index], bounds[index + 1])

    walk(tree.root, 0, float("-inf"), float("inf"))
    assert len(leaf_depths) == 1
    assert [key for leaf in tree.leaves() for key in leaf] == sorted(model)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([3, 4, 5, 6, 8]), OPS)
def test_bplus_invariants_against_set(order: int, raw: list[tuple[bool, int]]) -> None:
    tree = BPlusTree(order)
    for model in _against_set(tree, raw):
        _check_bplus(tree, model)


def test_bplus_leaf_split_copies_up() -> None:
    tree = BPlusTree(4)
    for key in (1, 2, 3):
        tree.insert(key)
    assert tree.state() == [[1, 2, 3]]
    tree.insert(4)  # 4 keys reach the order: [1, 2] | [3, 4], 3 copied up
    assert tree.state() == [[3], [1, 2], [3, 4]]
    odd = BPlusTree(5)
    for key in (1, 2, 3, 4, 5):
        odd.insert(key)
    assert odd.state() == [[3], [1, 2], [3, 4, 5]]  # left keeps 5 // 2 keys


def test_bplus_internal_split_moves_upper_median() -> None:
    tree = BPlusTree(4)
    for key in range(1, 9):
        tree.insert(key)
    assert tree.state() == [[3, 5, 7], [1, 2], [3, 4], [5, 6], [7, 8]]
    tree.insert(9)
    tree.insert(10)  # root [3, 5, 7, 9] reaches 4 keys: 7 (index 2) moves up, kept in neither half
    assert tree.state() == [[7], [3, 5], [1, 2], [3, 4], [5, 6], [9], [7, 8], [9, 10]]


def test_bplus_delete_keeps_separators_and_empty_leaves() -> None:
    tree = BPlusTree(4)
    for key in range(1, 11):
        tree.insert(key)
    tree.delete(7)  # routes right of separator 7, separators stay
    assert tree.state() == [[7], [3, 5], [1, 2], [3, 4], [5, 6], [9], [8], [9, 10]]
    tree.delete(1)
    tree.delete(2)
    assert tree.state() == [[7], [3, 5], [], [3, 4], [5, 6], [9], [8], [9, 10]]
    tree.delete(42)  # absent: nothing changes
    assert tree.leaves() == [[], [3, 4], [5, 6], [8], [9, 10]]


def test_bplus_order_per_length() -> None:
    assert [bplus_order(n) for n in (5, 10, 11, 20, 21, 30)] == [4, 4, 6, 6, 8, 8]
    with pytest.raises(ValueError):
        BPlusTree(2)


# --------------------------------------------------------------------------------- generate()


def test_all_hierarchical_operations_registered() -> None:
    got = sorted(key for key, op in OPERATIONS.items() if op.category == "hierarchical")
    assert got == sorted(HIER_KEYS)


def _sizes() -> list[int]:
    return [size for low, high in LENGTHS.values() for size in (low, high)]


@pytest.mark.parametrize("key", HIER_KEYS)
def test_generate_contract(key: str) -> None:
    operation = get_operation(key)
    for seed, size in enumerate(_sizes() * 3):
        problem = operation.generate(random.Random(seed), size, {})
        again = operation.generate(random.Random(seed), size, {})
        assert problem == again
        for value in (problem.truth, problem.data, problem.initial_state):
            assert json.loads(json.dumps(value)) == value
        jsonschema.validate(problem.truth, operation.answer_schema)
        assert "Q:" in problem.question
        if problem.steps:
            assert problem.steps[-1].state == problem.truth
            for step in problem.steps:
                assert json.loads(json.dumps(step.state)) == step.state
                jsonschema.validate(step.state, operation.answer_schema)
            assert problem.initial_state is not None
        if "ops" in problem.data:
            assert len(problem.data["ops"]) == size == len(problem.steps)


@pytest.mark.parametrize("key", ["bst.insert", "bst.remove", "bst.preorder", "bst.depth"])
def test_bst_generate_recomputes_from_data(key: str) -> None:
    operation = get_operation(key)
    for seed in range(20):
        problem = operation.generate(random.Random(seed), 12, {})
        keys = problem.data["keys"]
        assert len(keys) == 12 == len(set(keys))
        tree = BST(keys)
        assert tree.nodes() == problem.data["tree"]
        for node in problem.data["tree"]:
            assert f"Node {node[0]}" in problem.question
        if key == "bst.insert":
            value = problem.data["insert"]
            assert value not in keys and min(keys) < value < max(keys)
            tree.insert(value)
            assert problem.truth == tree.traversals()
            assert problem.initial_state == BST(keys).traversals()
        elif key == "bst.remove":
            tree.remove(problem.data["remove"])
            assert problem.truth == tree.traversals()
        elif key == "bst.preorder":
            assert problem.truth == tree.preorder()
        else:
            assert problem.truth == tree.depth()


def test_heap_generate_recomputes_from_data() -> None:
    problem = get_operation("heap.heapify").generate(random.Random(3), 25, {})
    heap = MinHeap(problem.data["array"])
    heap.heapify()
    assert problem.truth == heap.state()
    assert problem.initial_state == problem.data["array"]
    assert [step.label for step in problem.steps] == [f"(sift_down, {i})" for i in range(11, -1, -1)]
    problem = get_operation("heap.compound").generate(random.Random(3), 25, {})
    heap = MinHeap()
    for op in problem.data["ops"]:
        getattr(heap, op[0])(*op[1:])
    assert problem.truth == heap.state()


def test_rb_generate_recomputes_from_data() -> None:
    problem = get_operation("rb_tree.construct").generate(random.Random(5), 20, {})
    assert problem.truth == RedBlackTree(problem.data["keys"]).state()
    for key in ("rb_tree.compound", "rb_tree.construct_compound"):
        problem = get_operation(key).generate(random.Random(5), 20, {})
        tree = RedBlackTree(problem.data.get("keys", []))
        if "tree" in problem.data:
            assert tree.nodes() == problem.data["tree"]
            assert problem.initial_state == tree.state()
        present = set(problem.data.get("keys", []))
        for name, value in problem.data["ops"]:
            assert (value in present) == (name == "delete")
            present.symmetric_difference_update({value})
            getattr(tree, name)(value)
        assert problem.truth == tree.state()
        assert sorted(pair[0] for pair in problem.truth) == sorted(present)


def test_bplus_generate_order_and_variant() -> None:
    operation = get_operation("b_plus_tree.compound")
    for size, order in ((7, 4), (15, 6), (27, 8)):
        problem = operation.generate(random.Random(size), size, {})
        assert problem.data["order"] == order
        assert f"order {order}" in problem.question
        assert problem.initial_state == [[]]
        tree = BPlusTree(order)
        for name, value in problem.data["ops"]:
            getattr(tree, name)(value)
        assert problem.truth == tree.state()
    assert operation.generate(random.Random(0), 7, {"order": 3}).data["order"] == 3
