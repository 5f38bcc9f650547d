"""Hierarchical structures: binary search tree, min-heap, red-black tree, B+ tree."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from embodia.envs.dsr.core import (
    INT,
    INT_LIST,
    LENGTHS,
    Operation,
    Problem,
    distinct_values,
    list_schema,
    op_label,
    register,
    steps_from,
)

KEY_LOW, KEY_HIGH = 0, 99


def _fresh_key(rng: random.Random, present: Iterable[int], low: int = KEY_LOW, high: int = KEY_HIGH) -> int:
    """A key in [low, high] not in ``present``; falls back to [KEY_LOW, KEY_HIGH] when the range is full."""
    taken = set(present)
    if sum(1 for key in taken if low <= key <= high) > high - low:
        low, high = KEY_LOW, KEY_HIGH
    while True:  # the structures hold at most ~60 keys of 100, so a few draws suffice
        key = rng.randint(low, high)
        if key not in taken:
            return key


def _ops_text(labels: list[str]) -> str:
    return ", ".join(labels)


# ---------------------------------------------------------------------------------------------
# Binary search tree
# ---------------------------------------------------------------------------------------------


class _BSTNode:
    __slots__ = ("key", "left", "right")

    def __init__(self, key: int) -> None:
        self.key = key
        self.left: _BSTNode | None = None
        self.right: _BSTNode | None = None


class BST:
    """An unbalanced BST of distinct keys; removal of a two-child node uses the in-order successor."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self.root: _BSTNode | None = None
        for key in keys:
            self.insert(key)

    def insert(self, key: int) -> None:
        node = _BSTNode(key)
        if self.root is None:
            self.root = node
            return
        current = self.root
        while True:
            if key < current.key:
                if current.left is None:
                    current.left = node
                    return
                current = current.left
            else:
                if current.right is None:
                    current.right = node
                    return
                current = current.right

    def remove(self, key: int) -> None:
        self.root = self._remove(self.root, key)

    def _remove(self, node: _BSTNode | None, key: int) -> _BSTNode | None:
        if node is None:
            return None
        if key < node.key:
            node.left = self._remove(node.left, key)
        elif key > node.key:
            node.right = self._remove(node.right, key)
        elif node.left is None:
            return node.right
        elif node.right is None:
            return node.left
        else:
            successor = node.right
            while successor.left is not None:
                successor = successor.left
            node.key = successor.key
            node.right = self._remove(node.right, successor.key)
        return node

    def preorder(self) -> list[int]:
        out: list[int] = []

        def walk(node: _BSTNode | None) -> None:
            if node is not None:
                out.append(node.key)
                walk(node.left)
                walk(node.right)

        walk(self.root)
        return out

    def inorder(self) -> list[int]:
        out: list[int] = []

        def walk(node: _BSTNode | None) -> None:
            if node is not None:
                walk(node.left)
                out.append(node.key)
                walk(node.right)

        walk(self.root)
        return out

    def postorder(self) -> list[int]:
        out: list[int] = []

        def walk(node: _BSTNode | None) -> None:
            if node is not None:
                walk(node.left)
                walk(node.right)
                out.append(node.key)

        walk(self.root)
        return out

    def depth(self) -> int:
        """Number of nodes on the longest root-to-leaf path (empty tree 0, single node 1)."""

        def height(node: _BSTNode | None) -> int:
            return 0 if node is None else 1 + max(height(node.left), height(node.right))

        return height(self.root)

    def nodes(self) -> list[list[int | None]]:
        """``[key, left key, right key]`` per node in pre-order (``None`` for a missing child)."""
        out: list[list[int | None]] = []

        def walk(node: _BSTNode | None) -> None:
            if node is not None:
                out.append([node.key, _key(node.left), _key(node.right)])
                walk(node.left)
                walk(node.right)

        walk(self.root)
        return out

    def traversals(self) -> dict[str, list[int]]:
        return {"pre_order": self.preorder(), "post_order": self.postorder()}

    def state(self) -> list[int]:
        """The pre-order traversal, which determines a BST of distinct keys uniquely."""
        return self.preorder()


def _key(node: _BSTNode | None) -> int | None:
    return None if node is None else node.key


def describe_bst(nodes: list[list[int | None]]) -> str:
    """The reference's wording: the root, then each node's children, in pre-order."""
    if not nodes:
        return "The tree is empty."
    parts = [f"The root node is Node {nodes[0][0]}."]
    for key, left, right in nodes:
        if left is not None and right is not None:
            parts.append(f"Node {key}'s left child is Node {left}, and its right child is Node {right}.")
        elif left is not None:
            parts.append(f"Node {key}'s left child is Node {left}.")
        elif right is not None:
            parts.append(f"Node {key}'s right child is Node {right}.")
    return " ".join(parts)


def _given_bst(rng: random.Random, size: int) -> tuple[list[int], BST]:
    keys = distinct_values(rng, size, KEY_LOW, KEY_HIGH)
    return keys, BST(keys)


def _bst_update(kind: str) -> Callable[[random.Random, int, Mapping[str, Any]], Problem]:
    """bst.insert / bst.remove: one insertion or removal in a given tree of ``size`` nodes."""

    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
        keys, tree = _given_bst(rng, size)
        nodes = tree.nodes()
        before = tree.traversals()
        if kind == "insert":
            # As the reference: a key strictly inside the tree's key range, so it lands deep.
            key = _fresh_key(rng, keys, min(keys), max(keys))
            tree.insert(key)
            action = f"inserting a node with value {key}"
        else:
            key = rng.choice(keys)
            tree.remove(key)
            action = f"removing the node with value {key}"
        truth = tree.traversals()
        question = (
            f"You are given a binary search tree. {describe_bst(nodes)} Q: What are the pre-order and "
            f"post-order traversals of the tree after {action}?"
        )
        data = {"keys": keys, "tree": nodes, kind: key}
        return Problem(question, truth, data, steps_from([op_label(kind, key)], [truth]), before)

    return generate


def _bst_traversal(query: str) -> Callable[[random.Random, int, Mapping[str, Any]], Problem]:
    """bst.preorder / inorder / postorder / depth of a given tree of ``size`` nodes."""
    questions = {
        "preorder": "What is the pre-order traversal of the tree?",
        "inorder": "What is the in-order traversal of the tree?",
        "postorder": "What is the post-order traversal of the tree?",
        "depth": "What is the depth of the tree?",
    }

    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
        keys, tree = _given_bst(rng, size)
        nodes = tree.nodes()
        truth: Any = tree.depth() if query == "depth" else getattr(tree, query)()
        question = f"You are given a binary search tree. {describe_bst(nodes)} Q: {questions[query]}"
        return Problem(question, truth, {"keys": keys, "tree": nodes})

    return generate


def _bst_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    tree = BST()
    present: list[int] = []
    ops: list[list[Any]] = []
    labels, states = [], []
    for _ in range(size):
        if not present or rng.random() < 0.7:
            key = _fresh_key(rng, present)
            tree.insert(key)
            present.append(key)
            ops.append(["insert", key])
        else:
            key = rng.choice(present)
            tree.remove(key)
            present.remove(key)
            ops.append(["delete", key])
        labels.append(op_label(*ops[-1]))
        states.append(tree.state())
    question = (
        "You are given an empty binary search tree initially. Q: What is the pre-order traversal of the "
        f"binary search tree after the following operations: {_ops_text(labels)}?"
    )
    return Problem(question, tree.state(), {"ops": ops}, steps_from(labels, states), [])


_BST_BASE = (
    "A binary search tree is a binary tree in which every node holds a key, every key in a node's left "
    "subtree is smaller than the node's key and every key in its right subtree is larger; all keys are "
    "distinct. "
)
_BST_INSERT = (
    "To insert a key, start at the root and compare: go to the left child if the key is smaller than the "
    "node's key, to the right child if it is larger, until the child to go to is missing; the new key "
    "becomes a leaf in that place. "
)
_BST_REMOVE = (
    "To remove a key, find its node. A node with no children is simply removed. A node with one child is "
    "replaced by that child (its whole subtree moves up one level). A node with two children stays where "
    "it is but takes the key of its in-order successor (the smallest key in its right subtree, found by "
    "going right once and then left as far as possible); the successor's old node, which has no left "
    "child, is then removed by the one-child or no-child rule. "
)
_PRE = "Pre-order traversal visits a node, then its left subtree, then its right subtree (recursively). "
_IN = "In-order traversal visits the left subtree, then the node, then the right subtree (recursively). "
_POST = "Post-order traversal visits the left subtree, then the right subtree, then the node (recursively). "
_DEPTH = (
    "The depth of a tree is the number of nodes on the longest path from the root down to a leaf: a tree "
    "with only a root has depth 1, a root with one child has depth 2. "
)
_TRAVERSALS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"pre_order": INT_LIST, "post_order": INT_LIST},
    "required": ["pre_order", "post_order"],
    "additionalProperties": False,
}
_TRAVERSALS_RULE = (
    'Give final_answer as an object {"pre_order": [...], "post_order": [...]}: the pre-order and the '
    "post-order traversal of the tree after the operation, each as a list of keys."
)


def _bst_op(name: str, description: str, rules: str, schema: dict[str, Any], generate: Any) -> Operation:
    return Operation(
        structure="bst",
        name=name,
        category="hierarchical",
        display="binary search tree",
        description=(_BST_BASE + description).strip(),
        rules=rules,
        answer_schema=schema,
        generate=generate,
    )


register(
    _bst_op(
        "insert", _BST_INSERT + _PRE + _POST, _TRAVERSALS_RULE, _TRAVERSALS_SCHEMA, _bst_update("insert")
    ),
    _bst_op(
        "remove",
        _BST_REMOVE + _PRE + _POST,
        "A removed node with two children takes its in-order successor's key (never its predecessor's). "
        + _TRAVERSALS_RULE,
        _TRAVERSALS_SCHEMA,
        _bst_update("remove"),
    ),
    _bst_op(
        "compound",
        "(insert, k) inserts k and (delete, k) removes k. " + _BST_INSERT + _BST_REMOVE + _PRE,
        "A deleted node with two children takes its in-order successor's key (never its predecessor's). "
        "Give the pre-order traversal of the final tree as a list of keys ([] if the tree is empty).",
        INT_LIST,
        _bst_compound,
    ),
    _bst_op(
        "preorder",
        _PRE,
        "Give the pre-order traversal as a list of keys.",
        INT_LIST,
        _bst_traversal("preorder"),
    ),
    _bst_op(
        "inorder", _IN, "Give the in-order traversal as a list of keys.", INT_LIST, _bst_traversal("inorder")
    ),
    _bst_op(
        "postorder",
        _POST,
        "Give the post-order traversal as a list of keys.",
        INT_LIST,
        _bst_traversal("postorder"),
    ),
    _bst_op(
        "depth",
        _DEPTH,
        "Count nodes, not edges (a single node has depth 1). Give the depth as one integer.",
        INT,
        _bst_traversal("depth"),
    ),
)


# ---------------------------------------------------------------------------------------------
# Min-heap (array form)
# ---------------------------------------------------------------------------------------------


class MinHeap:
    """A 0-indexed array min-heap; sift-down swaps with the left child when the children tie."""

    def __init__(self, items: Iterable[int] = ()) -> None:
        self.items: list[int] = list(items)

    def sift_down(self, index: int) -> None:
        items, n = self.items, len(self.items)
        while True:
            left, right, smallest = 2 * index + 1, 2 * index + 2, index
            if left < n and items[left] < items[smallest]:
                smallest = left
            # Strict comparison: on equal children the left one (checked first) stays the choice.
            if right < n and items[right] < items[smallest]:
                smallest = right
            if smallest == index:
                return
            items[index], items[smallest] = items[smallest], items[index]
            index = smallest

    def sift_up(self, index: int) -> None:
        items = self.items
        while index > 0:
            parent = (index - 1) // 2
            if items[index] >= items[parent]:
                return
            items[index], items[parent] = items[parent], items[index]
            index = parent

    def heapify_indices(self) -> range:
        return range(len(self.items) // 2 - 1, -1, -1)

    def heapify(self) -> None:
        for index in self.heapify_indices():
            self.sift_down(index)

    def insert(self, value: int) -> None:
        self.items.append(value)
        self.sift_up(len(self.items) - 1)

    def delete(self) -> int:
        """Extract the minimum: the last element replaces the root and sifts down."""
        top = self.items[0]
        last = self.items.pop()
        if self.items:
            self.items[0] = last
            self.sift_down(0)
        return top

    def state(self) -> list[int]:
        return list(self.items)


def _heapify(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    array = [rng.randint(KEY_LOW, KEY_HIGH) for _ in range(size)]
    heap = MinHeap(array)
    labels, states = [], []
    for index in heap.heapify_indices():
        heap.sift_down(index)
        labels.append(op_label("sift_down", index))
        states.append(heap.state())
    question = (
        f"Q: Given the array {array}, turn it into a min-heap with the bottom-up heapify algorithm. "
        "What is the resulting array?"
    )
    return Problem(question, heap.state(), {"array": array}, steps_from(labels, states), list(array))


def _heap_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    heap = MinHeap()
    ops: list[list[Any]] = []
    labels, states = [], []
    for _ in range(size):
        if not heap.items or rng.random() >= 0.3:
            value = rng.randint(KEY_LOW, KEY_HIGH)
            heap.insert(value)
            ops.append(["insert", value])
        else:
            heap.delete()
            ops.append(["delete"])
        labels.append(op_label(*ops[-1]))
        states.append(heap.state())
    question = (
        "You are given an empty min-heap initially. Q: What is the state of the heap after the following "
        f"operations: {_ops_text(labels)}?"
    )
    return Problem(question, heap.state(), {"ops": ops}, steps_from(labels, states), [])


_HEAP_BASE = (
    "A min-heap is a complete binary tree stored in a 0-indexed array: the children of index i are at "
    "2i+1 (left) and 2i+2 (right), the parent of index i > 0 is at (i-1)//2, and every value is less than or "
    "equal to its children's values. Values may repeat. Sifting down the value at index i: if it has a child "
    "strictly smaller than it, swap it with its smaller child (the left child when both children are equal) "
    "and continue from that child's index; stop when no child is strictly smaller or it has no children. "
)
_HEAP_RULES = (
    "On sift-down, a value is swapped only with a strictly smaller child, and with the left child when the "
    "two children are equal; on sift-up, a value is swapped only while it is strictly smaller than its "
    "parent. Give the final heap as the list of its array entries from index 0."
)

register(
    Operation(
        structure="heap",
        name="heapify",
        category="hierarchical",
        display="min-heap",
        description=_HEAP_BASE
        + "Bottom-up heapify of an array of n values sifts down the value at each index from n//2 - 1 down "
        "to 0, in decreasing index order, each time on the array as the previous sift-downs left it.",
        rules=_HEAP_RULES,
        answer_schema=INT_LIST,
        generate=_heapify,
    ),
    Operation(
        structure="heap",
        name="compound",
        category="hierarchical",
        display="min-heap",
        description=_HEAP_BASE
        + "(insert, k) appends k at the end of the array, then sifts it up: while it is strictly smaller "
        "than its parent, swap the two. (delete) removes the root (the minimum): the last entry is taken "
        "off the end of the array and, if any entries remain, placed at index 0 and sifted down.",
        rules=_HEAP_RULES,
        answer_schema=INT_LIST,
        generate=_heap_compound,
    ),
)


# ---------------------------------------------------------------------------------------------
# Red-black tree (CLRS)
# ---------------------------------------------------------------------------------------------

RED, BLACK = "r", "b"
COLOR_CODE = {RED: 0, BLACK: 1}
"""Answers give colors as the reference's evaluator scores them: 0 = red, 1 = black."""


class _RBNode:
    __slots__ = ("key", "color", "left", "right", "parent")

    def __init__(self, key: int, color: str, nil: _RBNode | None = None) -> None:
        self.key = key
        self.color = color
        self.left: _RBNode = nil if nil is not None else self
        self.right: _RBNode = nil if nil is not None else self
        self.parent: _RBNode = nil if nil is not None else self


class RedBlackTree:
    """CLRS red-black tree (sentinel NIL); delete uses RB-TRANSPLANT and the in-order successor."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self.nil = _RBNode(-1, BLACK)
        self.root = self.nil
        for key in keys:
            self.insert(key)

    def _rotate_left(self, x: _RBNode) -> None:
        y = x.right
        x.right = y.left
        if y.left is not self.nil:
            y.left.parent = x
        y.parent = x.parent
        if x.parent is self.nil:
            self.root = y
        elif x is x.parent.left:
            x.parent.left = y
        else:
            x.parent.right = y
        y.left = x
        x.parent = y

    def _rotate_right(self, x: _RBNode) -> None:
        y = x.left
        x.left = y.right
        if y.right is not self.nil:
            y.right.parent = x
        y.parent = x.parent
        if x.parent is self.nil:
            self.root = y
        elif x is x.parent.right:
            x.parent.right = y
        else:
            x.parent.left = y
        y.right = x
        x.parent = y

    def insert(self, key: int) -> None:
        z = _RBNode(key, RED, self.nil)
        parent, current = self.nil, self.root
        while current is not self.nil:
            parent = current
            current = current.left if key < current.key else current.right
        z.parent = parent
        if parent is self.nil:
            self.root = z
        elif key < parent.key:
            parent.left = z
        else:
            parent.right = z
        self._insert_fixup(z)

    def _insert_fixup(self, z: _RBNode) -> None:
        while z.parent.color == RED:
            grand = z.parent.parent
            if z.parent is grand.left:
                uncle = grand.right
                if uncle.color == RED:  # case 1: recolor and move up
                    z.parent.color = uncle.color = BLACK
                    grand.color = RED
                    z = grand
                else:
                    if z is z.parent.right:  # case 2: rotate into case 3
                        z = z.parent
                        self._rotate_left(z)
                    z.parent.color = BLACK  # case 3
                    z.parent.parent.color = RED
                    self._rotate_right(z.parent.parent)
            else:
                uncle = grand.left
                if uncle.color == RED:
                    z.parent.color = uncle.color = BLACK
                    grand.color = RED
                    z = grand
                else:
                    if z is z.parent.left:
                        z = z.parent
                        self._rotate_right(z)
                    z.parent.color = BLACK
                    z.parent.parent.color = RED
                    self._rotate_left(z.parent.parent)
        self.root.color = BLACK

    def _find(self, key: int) -> _RBNode:
        node = self.root
        while node is not self.nil and key != node.key:
            node = node.left if key < node.key else node.right
        return node

    def _transplant(self, u: _RBNode, v: _RBNode) -> None:
        if u.parent is self.nil:
            self.root = v
        elif u is u.parent.left:
            u.parent.left = v
        else:
            u.parent.right = v
        v.parent = u.parent  # also on the sentinel: the fix-up climbs from a NIL x through it

    def delete(self, key: int) -> None:
        z = self._find(key)
        if z is self.nil:
            raise KeyError(key)
        y, y_color = z, z.color
        if z.left is self.nil:
            x = z.right
            self._transplant(z, z.right)
        elif z.right is self.nil:
            x = z.left
            self._transplant(z, z.left)
        else:
            y = z.right
            while y.left is not self.nil:
                y = y.left
            y_color = y.color
            x = y.right
            if y.parent is z:
                x.parent = y
            else:
                self._transplant(y, y.right)
                y.right = z.right
                y.right.parent = y
            self._transplant(z, y)
            y.left = z.left
            y.left.parent = y
            y.color = z.color
        if y_color == BLACK:
            self._delete_fixup(x)

    def _delete_fixup(self, x: _RBNode) -> None:
        while x is not self.root and x.color == BLACK:
            if x is x.parent.left:
                w = x.parent.right
                if w.color == RED:  # case 1: make the sibling black
                    w.color = BLACK
                    x.parent.color = RED
                    self._rotate_left(x.parent)
                    w = x.parent.right
                if w.left.color == BLACK and w.right.color == BLACK:  # case 2: push the extra black up
                    w.color = RED
                    x = x.parent
                else:
                    if w.right.color == BLACK:  # case 3: turn into case 4
                        w.left.color = BLACK
                        w.color = RED
                        self._rotate_right(w)
                        w = x.parent.right
                    w.color = x.parent.color  # case 4
                    x.parent.color = BLACK
                    w.right.color = BLACK
                    self._rotate_left(x.parent)
                    x = self.root
            else:
                w = x.parent.left
                if w.color == RED:
                    w.color = BLACK
                    x.parent.color = RED
                    self._rotate_right(x.parent)
                    w = x.parent.left
                if w.right.color == BLACK and w.left.color == BLACK:
                    w.color = RED
                    x = x.parent
                else:
                    if w.left.color == BLACK:
                        w.right.color = BLACK
                        w.color = RED
                        self._rotate_left(w)
                        w = x.parent.left
                    w.color = x.parent.color
                    x.parent.color = BLACK
                    w.left.color = BLACK
                    self._rotate_right(x.parent)
                    x = self.root
        x.color = BLACK

    def nodes(self) -> list[list[Any]]:
        """``[key, color, left key, right key]`` per node in pre-order; colors ``'r'``/``'b'``."""
        out: list[list[Any]] = []
        nil = self.nil

        def walk(node: _RBNode) -> None:
            if node is not nil:
                left = None if node.left is nil else node.left.key
                right = None if node.right is nil else node.right.key
                out.append([node.key, node.color, left, right])
                walk(node.left)
                walk(node.right)

        walk(self.root)
        return out

    def keys(self) -> list[int]:
        return sorted(node[0] for node in self.nodes())

    def state(self) -> list[list[int]]:
        """Pre-order ``[key, color]`` pairs with color 0 = red, 1 = black."""
        return [[key, COLOR_CODE[color]] for key, color, _, _ in self.nodes()]


def describe_rb(nodes: list[list[Any]]) -> str:
    if not nodes:
        return "The tree is empty."
    color = {key: ("red" if c == RED else "black") for key, c, _, _ in nodes}
    parts = [f"The root is {nodes[0][0]} ({color[nodes[0][0]]})."]
    for key, _, left, right in nodes:
        left_text = "none" if left is None else f"{left} ({color[left]})"
        right_text = "none" if right is None else f"{right} ({color[right]})"
        parts.append(f"{key}'s left child is {left_text}, and its right child is {right_text}.")
    return " ".join(parts)


def _rb_run(tree: RedBlackTree, ops: list[list[Any]]) -> tuple[list[str], list[list[list[int]]]]:
    labels, states = [], []
    for name, key in ops:
        getattr(tree, name)(key)
        labels.append(op_label(name, key))
        states.append(tree.state())
    return labels, states


def _rb_mixed_ops(
    rng: random.Random,
    count: int,
    present: list[int],
    p_delete: float,
    low: int = KEY_LOW,
    high: int = KEY_HIGH,
) -> list[list[Any]]:
    """``count`` insert/delete ops on distinct keys; deletes w.p. ``p_delete`` when the tree is not empty."""
    present = list(present)
    ops: list[list[Any]] = []
    for _ in range(count):
        if present and rng.random() < p_delete:
            key = rng.choice(present)
            present.remove(key)
            ops.append(["delete", key])
        else:
            key = _fresh_key(rng, present, low, high)
            present.append(key)
            ops.append(["insert", key])
    return ops


def _rb_construct(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    keys = distinct_values(rng, size, KEY_LOW, KEY_HIGH)
    tree = RedBlackTree()
    labels, states = _rb_run(tree, [["insert", key] for key in keys])
    question = (
        "You are given an empty red-black tree initially. Q: What is the state of the red-black tree after "
        f"inserting the following values in order: {keys}?"
    )
    return Problem(question, tree.state(), {"keys": keys}, steps_from(labels, states), [])


def _rb_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    ops = _rb_mixed_ops(rng, size, [], 0.3)
    tree = RedBlackTree()
    labels, states = _rb_run(tree, ops)
    question = (
        "You are given an empty red-black tree initially. Q: What is the state of the red-black tree after "
        f"the following operations: {_ops_text(labels)}?"
    )
    return Problem(question, tree.state(), {"ops": ops}, steps_from(labels, states), [])


def _rb_construct_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    keys = distinct_values(rng, size, KEY_LOW, KEY_HIGH)
    tree = RedBlackTree(keys)
    nodes = tree.nodes()
    before = tree.state()
    # As the reference: new keys come from the gaps of the initial tree's key range.
    ops = _rb_mixed_ops(rng, size, keys, 0.5, min(keys), max(keys))
    labels, states = _rb_run(tree, ops)
    question = (
        f"You are given the following red-black tree. {describe_rb(nodes)} Q: What is the state of the "
        f"red-black tree after the following operations: {_ops_text(labels)}?"
    )
    data = {"keys": keys, "tree": nodes, "ops": ops}
    return Problem(question, tree.state(), data, steps_from(labels, states), before)


_RB_BASE = (
    "A red-black tree is a binary search tree (smaller keys to the left, larger to the right; keys are "
    "distinct) whose nodes are red or black, with: the root black; every missing child (NIL leaf) black; no "
    "red node with a red child; and the same number of black nodes on every path from a node down to a NIL "
    "leaf. It follows the standard CLRS algorithms. Left-rotating node x with right child y makes y take "
    "x's place, x becomes y's left child and y's old left subtree becomes x's right subtree; a right "
    "rotation is the mirror image. "
)
_RB_INSERT = (
    "(insert, k): insert k as a new red leaf as in a plain binary search tree, then fix up from the new "
    "node z while z's parent is red. If the parent is a left child of the grandparent, let the uncle be the "
    "grandparent's right child: case 1, the uncle is red: color the parent and the uncle black and the "
    "grandparent red, and continue with z = the grandparent; case 2, the uncle is black and z is a right "
    "child: set z = the parent and left-rotate z, which leads to case 3; case 3, the uncle is black and z "
    "is a left child: color the parent black and the grandparent red, and right-rotate the grandparent. If "
    "the parent is a right child, do the same with left and right exchanged. Finally color the root black. "
)
_RB_DELETE = (
    "(delete, k): let z be the node with key k. If z has at most one child, that child (or a NIL leaf) x "
    "takes z's place, and the removed color is z's. If z has two children, let y be its in-order successor "
    "(the minimum of z's right subtree) and x be y's right child (possibly NIL): x takes y's place, then y "
    "takes z's place with z's children and z's color, and the removed color is y's original color. If the "
    "removed color was black, fix up from x (whose parent is the node it was attached to) while x is not "
    "the root and x is black. If x is a left child, let w be its sibling: case 1, w is red: color w black "
    "and x's parent red, left-rotate the parent, and let w be x's new sibling; case 2, both of w's children "
    "are black: color w red and continue with x = x's parent; case 3, w's right child is black (its left "
    "child red): color w's left child black and w red, right-rotate w, and let w be x's new sibling; case "
    "4, w's right child is red: give w the parent's color, color the parent and w's right child black, "
    "left-rotate the parent, and stop. If x is a right child, do the same with left and right exchanged. "
    "Finally color x black. NIL leaves count as black. "
)
_RB_SCHEMA = list_schema({"type": "array", "items": INT, "minItems": 2, "maxItems": 2})
_RB_RULES = (
    "Use the CLRS fix-ups exactly as described; a deleted node with two children is replaced by its in-order "
    "successor. Give the final tree as its pre-order traversal (node, left subtree, right subtree) listing "
    "each node as a pair [key, color] with color 0 for red and 1 for black, e.g. [[36, 1], [21, 1], "
    "[66, 0]]; NIL leaves are not listed, and an empty tree is []."
)


def _rb_op(name: str, description: str, generate: Any) -> Operation:
    return Operation(
        structure="rb_tree",
        name=name,
        category="hierarchical",
        display="red-black tree",
        description=(_RB_BASE + description).strip(),
        rules=_RB_RULES,
        answer_schema=_RB_SCHEMA,
        generate=generate,
    )


register(
    _rb_op("construct", _RB_INSERT, _rb_construct),
    _rb_op("compound", _RB_INSERT + _RB_DELETE, _rb_compound),
    _rb_op("construct_compound", _RB_INSERT + _RB_DELETE, _rb_construct_compound),
)


# ---------------------------------------------------------------------------------------------
# B+ tree
# ---------------------------------------------------------------------------------------------


class _BPNode:
    __slots__ = ("keys", "children")

    def __init__(self, keys: list[int], children: list[_BPNode] | None = None) -> None:
        self.keys = keys
        self.children: list[_BPNode] = children if children is not None else []

    @property
    def leaf(self) -> bool:
        return not self.children


class BPlusTree:
    """B+ tree of a given order: a node splits when it reaches ``order`` keys; delete never rebalances."""

    def __init__(self, order: int) -> None:
        if order < 3:
            raise ValueError(f"B+ tree order must be at least 3, got {order}")
        self.order = order
        self.root = _BPNode([])

    @staticmethod
    def _route(node: _BPNode, key: int) -> int:
        """Index of the child to follow: the number of separators <= key (equal keys go right)."""
        index = 0
        while index < len(node.keys) and key >= node.keys[index]:
            index += 1
        return index

    def insert(self, key: int) -> None:
        split = self._insert(self.root, key)
        if split is not None:
            separator, right = split
            self.root = _BPNode([separator], [self.root, right])

    def _insert(self, node: _BPNode, key: int) -> tuple[int, _BPNode] | None:
        if node.leaf:
            node.keys.append(key)
            node.keys.sort()
            if len(node.keys) < self.order:
                return None
            mid = len(node.keys) // 2
            right = _BPNode(node.keys[mid:])
            node.keys = node.keys[:mid]
            return right.keys[0], right  # copy up the right leaf's smallest key
        index = self._route(node, key)
        split = self._insert(node.children[index], key)
        if split is None:
            return None
        separator, child = split
        node.keys.insert(index, separator)
        node.children.insert(index + 1, child)
        if len(node.keys) < self.order:
            return None
        mid = len(node.keys) // 2  # upper median for an even count; it moves up, kept in neither half
        right = _BPNode(node.keys[mid + 1 :], node.children[mid + 1 :])
        up = node.keys[mid]
        node.keys, node.children = node.keys[:mid], node.children[: mid + 1]
        return up, right

    def delete(self, key: int) -> None:
        node = self.root
        while not node.leaf:
            node = node.children[self._route(node, key)]
        if key in node.keys:
            node.keys.remove(key)

    def preorder(self) -> list[list[int]]:
        out: list[list[int]] = []

        def walk(node: _BPNode) -> None:
            out.append(list(node.keys))
            for child in node.children:
                walk(child)

        walk(self.root)
        return out

    def leaves(self) -> list[list[int]]:
        """Key lists of the leaves from left to right."""
        out: list[list[int]] = []

        def walk(node: _BPNode) -> None:
            if node.leaf:
                out.append(list(node.keys))
            for child in node.children:
                walk(child)

        walk(self.root)
        return out

    def state(self) -> list[list[int]]:
        return self.preorder()


def bplus_order(size: int) -> int:
    """The reference's order per length level: 4 (short), 6 (medium), 8 (long)."""
    if size <= LENGTHS["short"][1]:
        return 4
    if size <= LENGTHS["medium"][1]:
        return 6
    return 8


def _bplus_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    order = int(variant.get("order", bplus_order(size)))
    tree = BPlusTree(order)
    present: list[int] = []
    ops: list[list[Any]] = []
    labels, states = [], []
    for _ in range(size):
        if present and rng.random() < 0.3:
            key = rng.choice(present)
            present.remove(key)
            tree.delete(key)
            ops.append(["delete", key])
        else:
            key = _fresh_key(rng, present)
            present.append(key)
            tree.insert(key)
            ops.append(["insert", key])
        labels.append(op_label(*ops[-1]))
        states.append(tree.state())
    question = (
        f"You are given an empty B+ tree of order {order} initially. Q: What is the state of the B+ tree "
        f"after the following operations: {_ops_text(labels)}?"
    )
    return Problem(question, tree.state(), {"order": order, "ops": ops}, steps_from(labels, states), [[]])


register(
    Operation(
        structure="b_plus_tree",
        name="compound",
        category="hierarchical",
        display="B+ tree",
        description=(
            "A B+ tree of order m keeps every key in its leaves; internal nodes hold sorted separator keys "
            "only for routing, and a node with j separators has j+1 children. Keys are distinct. To find "
            "the leaf for key k, start at the root and at each internal node go to child number i (counting "
            "from 0), where i is the number of separators less than or equal to k (so a key equal to a "
            "separator goes to the right of it). The tree starts as one empty leaf. (insert, k): add k to "
            "its leaf, keeping the keys sorted. If the leaf now holds m keys, split it: the left leaf keeps "
            "the first m//2 keys, a new right leaf takes the rest, and a copy of the right leaf's smallest "
            "key is inserted into the parent as the separator between the two leaves (copy up). If an "
            "internal node now holds m keys, split it at index mid = m//2: the key at index mid moves up "
            "into the parent (it stays in neither half), the left node keeps the keys before mid and the "
            "first mid+1 children, the right node gets the keys after mid and the remaining children. When "
            "the root splits, a new root holding just the promoted key is created above the two halves. "
            "(delete, k): find k's leaf by the same routing and remove k from it; nothing else changes: no "
            "merging, borrowing or rebalancing, separator keys in internal nodes are left as they are "
            "(even when that key is no longer in any leaf), and a leaf may become empty and stays."
        ),
        rules=(
            "Split a node as soon as its key count reaches the order; the internal-node median is the key "
            "at index m//2 of its m sorted keys (the upper middle key, as m is even here). Give the final "
            "tree as its pre-order traversal (a node, then its children's subtrees from left to right), "
            "listing each node as the sorted list of its keys, e.g. [[10], [3, 5], [10, 12]]; an empty "
            "leaf is []."
        ),
        answer_schema=list_schema(INT_LIST),
        generate=_bplus_compound,
    ),
)
