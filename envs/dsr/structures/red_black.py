"""Red-black tree (CLRS): the reference structure and its three operations (:mod:`.hierarchical`
registers them)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from embodia.envs.dsr import core

RED, BLACK = "r", "b"
COLOR_CODE = {RED: 0, BLACK: 1}
"""Answers give colors as the reference's evaluator scores them: 0 = red, 1 = black."""
EMPTY = "#"
"""Marks a missing child in a coloured pre-order (as does ``None``)."""


def color_of(value: Any) -> str:
    """:data:`RED` or :data:`BLACK` from any way a given tree writes a color: ``'r'``/``'b'``,
    ``'red'``/``'black'`` (any case) or the answer codes 0/1."""
    if isinstance(value, str) and value.lower() in ("r", "red", "b", "black"):
        return RED if value.lower().startswith("r") else BLACK
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return RED if value == COLOR_CODE[RED] else BLACK
    raise ValueError(f"not a red-black color: {value!r}")


class _RBNode:
    __slots__ = ("key", "color", "left", "right", "parent")

    def __init__(self, key: int, color: str, nil: _RBNode | None = None) -> None:
        self.key = key
        self.color = color
        self.left: _RBNode = nil if nil is not None else self
        self.right: _RBNode = nil if nil is not None else self
        self.parent: _RBNode = nil if nil is not None else self


Side = Literal["left", "right"]
_OTHER: dict[Side, Side] = {"left": "right", "right": "left"}


def _child(node: _RBNode, side: Side) -> _RBNode:
    return node.left if side == "left" else node.right


def _set_child(node: _RBNode, side: Side, child: _RBNode) -> None:
    if side == "left":
        node.left = child
    else:
        node.right = child


class RedBlackTree:
    """CLRS red-black tree (sentinel NIL); delete uses RB-TRANSPLANT and the in-order successor."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        """The tree of inserting ``keys`` in order into an empty tree."""
        self.nil = _RBNode(-1, BLACK)
        self.root = self.nil
        for key in keys:
            self.insert(key)

    @classmethod
    def from_preorder(cls, items: Iterable[Any]) -> RedBlackTree:
        """The tree given as its coloured pre-order: each node ``[key, color]`` (any color
        :func:`color_of` reads), each missing child ``None`` or ``"#"``, e.g.
        ``[[36, "b"], [21, "r"], None, None, None]``; the markers that would end the list may be
        left out (``[[36, "b"]]`` is one node), so ``[]`` is the empty tree.

        A given tree cannot be rebuilt by insertions (the fix-ups would move it), so its nodes are
        linked as written; ValueError when that is no red-black tree of distinct keys, because the
        CLRS operations that follow rely on its properties."""
        tree = cls()
        sequence = iter(items)

        def build(parent: _RBNode) -> _RBNode:
            item: Any = next(sequence, None)
            if item is None or item == EMPTY:
                return tree.nil
            key, color = item
            node = _RBNode(key, color_of(color), tree.nil)
            node.parent = parent
            node.left = build(node)
            node.right = build(node)
            return node

        tree.root = build(tree.nil)
        rest = list(sequence)
        if rest:
            raise ValueError(f"items left after the coloured pre-order of a complete tree: {rest}")
        tree._check()
        return tree

    @classmethod
    def from_nodes(cls, nodes: Iterable[Sequence[Any]]) -> RedBlackTree:
        """The tree whose :meth:`nodes` are ``nodes``: ``[key, color, left key, right key]`` per node
        in pre-order (``None`` for a missing child), the form problems state a given tree in."""
        rows = [list(row) for row in nodes]
        if any(len(row) != 4 for row in rows):
            raise ValueError(f"red-black nodes must be [key, color, left, right] rows, got {rows}")
        items: list[Any] = []
        position = 0

        def visit(key: Any) -> None:
            nonlocal position
            if key is None:
                items.append(None)
                return
            if position >= len(rows) or rows[position][0] != key:
                raise ValueError(f"the nodes are not in pre-order: node {key} expected at row {position}")
            _, color, left, right = rows[position]
            position += 1
            items.append([key, color])
            visit(left)
            visit(right)

        if rows:
            visit(rows[0][0])
        if position != len(rows):
            raise ValueError(f"rows not reachable from the root: {rows[position:]}")
        return cls.from_preorder(items)

    def _check(self) -> None:
        """ValueError unless the keys are distinct and in search order, the root is black, no red
        node has a red child and every path down to a NIL leaf has the same number of black nodes."""
        nil = self.nil
        if self.root.color != BLACK:
            raise ValueError(f"the root {self.root.key} is red")
        keys: list[int] = []

        def black_height(node: _RBNode) -> int:
            if node is nil:
                return 1
            if node.color == RED and RED in (node.left.color, node.right.color):
                raise ValueError(f"red node {node.key} has a red child")
            left = black_height(node.left)
            keys.append(node.key)
            right = black_height(node.right)
            if left != right:
                raise ValueError(f"node {node.key}: black heights {left} (left) and {right} (right) differ")
            return left + (node.color == BLACK)

        black_height(self.root)
        if any(a >= b for a, b in itertools.pairwise(keys)):
            raise ValueError(f"not a search tree of distinct keys: in-order {keys}")

    def _rotate(self, x: _RBNode, side: Side) -> None:
        """Rotate ``x`` down to the ``side`` ("left": a left rotation): its child on the other side
        takes its place and that child's ``side`` subtree becomes ``x``'s other child."""
        other = _OTHER[side]
        y = _child(x, other)
        _set_child(x, other, _child(y, side))
        if _child(y, side) is not self.nil:
            _child(y, side).parent = x
        y.parent = x.parent
        if x.parent is self.nil:
            self.root = y
        elif x is _child(x.parent, side):
            _set_child(x.parent, side, y)
        else:
            _set_child(x.parent, other, y)
        _set_child(y, side, x)
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
            # CLRS spells each case out twice, mirrored: ``side`` is the one the parent hangs on.
            side: Side = "left" if z.parent is grand.left else "right"
            other = _OTHER[side]
            uncle = _child(grand, other)
            if uncle.color == RED:  # case 1: recolor and move up
                z.parent.color = uncle.color = BLACK
                grand.color = RED
                z = grand
            else:
                if z is _child(z.parent, other):  # case 2: rotate into case 3
                    z = z.parent
                    self._rotate(z, side)
                z.parent.color = BLACK  # case 3
                z.parent.parent.color = RED
                self._rotate(z.parent.parent, other)
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
        """Remove one node holding ``key``; an absent key changes nothing (as in every
        structure here, and in the public benchmark's tree)."""
        z = self._find(key)
        if z is self.nil:
            return
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
            side: Side = "left" if x is x.parent.left else "right"  # as in the insert fix-up, mirrored
            other = _OTHER[side]
            w = _child(x.parent, other)
            if w.color == RED:  # case 1: make the sibling black
                w.color = BLACK
                x.parent.color = RED
                self._rotate(x.parent, side)
                w = _child(x.parent, other)
            if (
                _child(w, side).color == BLACK and _child(w, other).color == BLACK
            ):  # case 2: push the extra black up
                w.color = RED
                x = x.parent
            else:
                if _child(w, other).color == BLACK:  # case 3: turn into case 4
                    _child(w, side).color = BLACK
                    w.color = RED
                    self._rotate(w, other)
                    w = _child(x.parent, other)
                w.color = x.parent.color  # case 4
                x.parent.color = BLACK
                _child(w, other).color = BLACK
                self._rotate(x.parent, side)
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


def _rb_mixed_ops(
    rng: random.Random,
    count: int,
    present: list[int],
    p_delete: float,
    low: int = core.KEY_LOW,
    high: int = core.KEY_HIGH,
) -> list[list[Any]]:
    """``count`` insert/delete ops on distinct keys; deletes w.p. ``p_delete`` when the tree is not empty."""

    def new_key(keys: list[int]) -> int:
        return core.fresh_key(rng, keys, low, high)

    return core.insert_delete_ops(rng, count, new_key, lambda draw: draw < p_delete, present)


def _run_construct(data: Mapping[str, Any]) -> tuple[RedBlackTree, tuple[core.Step, ...]]:
    """The tree of inserting ``data["keys"]`` in order, with one step per insertion."""
    tree = RedBlackTree()
    _, steps = core.replay(tree, [["insert", key] for key in data["keys"]])
    return tree, steps


def _replay_construct(data: Mapping[str, Any]) -> list[list[int]]:
    return _run_construct(data)[0].state()


def _question_construct(data: Mapping[str, Any]) -> str:
    return (
        "You are given an empty red-black tree initially. Q: What is the state of the red-black tree after "
        f"inserting the following values in order: {data['keys']}?"
    )


def _rb_construct(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    keys = core.distinct_values(rng, size, core.KEY_LOW, core.KEY_HIGH)
    data = {"keys": keys}
    tree, steps = _run_construct(data)
    return core.Problem(_question_construct(data), tree.state(), data, steps, [])


_question_compound = core.empty_question("red-black tree", "the state of the red-black tree")


def _rb_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    ops = _rb_mixed_ops(rng, size, [], 0.3)
    tree = RedBlackTree()
    return core.from_empty(tree, ops, _question_compound, [])


def _replay_compound(data: Mapping[str, Any]) -> list[list[int]]:
    tree = RedBlackTree()
    core.replay(tree, data["ops"])
    return tree.state()


def _run_construct_compound(data: Mapping[str, Any]) -> tuple[RedBlackTree, tuple[core.Step, ...]]:
    """The given ``data["tree"]`` after ``data["ops"]``, with the ops' steps. Its ``data["keys"]``
    would rebuild the same tree, but the tree as stated is what the question gives."""
    tree = RedBlackTree.from_nodes(data["tree"])
    _, steps = core.replay(tree, data["ops"])
    return tree, steps


def _replay_construct_compound(data: Mapping[str, Any]) -> list[list[int]]:
    return _run_construct_compound(data)[0].state()


def _question_construct_compound(data: Mapping[str, Any]) -> str:
    labels = ", ".join(core.op_label(*op) for op in data["ops"])
    return (
        f"You are given the following red-black tree. {describe_rb(data['tree'])} Q: What is the state of "
        f"the red-black tree after the following operations: {labels}?"
    )


def _rb_construct_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    keys = core.distinct_values(rng, size, core.KEY_LOW, core.KEY_HIGH)
    given = RedBlackTree(keys)
    nodes = given.nodes()
    # As the reference: new keys come from the gaps of the initial tree's key range.
    ops = _rb_mixed_ops(rng, size, keys, 0.5, min(keys), max(keys))
    data = {"keys": keys, "tree": nodes, "ops": ops}
    tree, steps = _run_construct_compound(data)
    return core.Problem(_question_construct_compound(data), tree.state(), data, steps, given.state())


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
_RB_SCHEMA = core.list_schema({"type": "array", "items": core.INT, "minItems": 2, "maxItems": 2})
_RB_RULES = (
    "Use the CLRS fix-ups exactly as described; a deleted node with two children is replaced by its in-order "
    "successor. Give the final tree as its pre-order traversal (node, left subtree, right subtree) listing "
    "each node as a pair [key, color] with color 0 for red and 1 for black, e.g. [[36, 1], [21, 1], "
    "[66, 0]]; NIL leaves are not listed, and an empty tree is []."
)


_RB_OPERATION = core.operation_maker("rb_tree", "hierarchical", "red-black tree", _RB_BASE)


def _rb_op(
    name: str, description: str, generate: core.Generator, replay: core.Replay, question: core.Question
) -> core.Operation:
    return _RB_OPERATION(
        name,
        description,
        rules=_RB_RULES,
        answer_schema=_RB_SCHEMA,
        generate=generate,
        replay=replay,
        question=question,
    )


RED_BLACK_OPERATIONS: tuple[core.Operation, ...] = (
    _rb_op("construct", _RB_INSERT, _rb_construct, _replay_construct, _question_construct),
    _rb_op("compound", _RB_INSERT + _RB_DELETE, _rb_compound, _replay_compound, _question_compound),
    _rb_op(
        "construct_compound",
        _RB_INSERT + _RB_DELETE,
        _rb_construct_compound,
        _replay_construct_compound,
        _question_construct_compound,
    ),
)
