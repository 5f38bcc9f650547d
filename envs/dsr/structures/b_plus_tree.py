"""B+ tree: the reference structure and its operation (:mod:`.hierarchical` registers it)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from embodia.envs.dsr.core import (
    INT_LIST,
    LENGTHS,
    Operation,
    Problem,
    empty_question,
    fresh_key,
    from_empty,
    insert_delete_ops,
    list_schema,
    replay,
)


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

    def _nodes(self) -> list[_BPNode]:
        """The nodes in pre-order: a node, then its children's subtrees from left to right."""
        out: list[_BPNode] = []

        def walk(node: _BPNode) -> None:
            out.append(node)
            for child in node.children:
                walk(child)

        walk(self.root)
        return out

    def preorder(self) -> list[list[int]]:
        return [list(node.keys) for node in self._nodes()]

    def leaves(self) -> list[list[int]]:
        """Key lists of the leaves from left to right."""
        return [list(node.keys) for node in self._nodes() if node.leaf]

    def state(self) -> list[list[int]]:
        return self.preorder()


def bplus_order(size: int) -> int:
    """The reference's order per length level: 4 (short), 6 (medium), 8 (long)."""
    if size <= LENGTHS["short"][1]:
        return 4
    if size <= LENGTHS["medium"][1]:
        return 6
    return 8


def _question_compound(data: Mapping[str, Any]) -> str:
    return empty_question(f"B+ tree of order {data['order']}", "the state of the B+ tree")(data)


def _bplus_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    order = int(variant.get("order", bplus_order(size)))
    ops = insert_delete_ops(rng, size, lambda present: fresh_key(rng, present), lambda draw: draw < 0.3)
    tree = BPlusTree(order)
    return from_empty(tree, ops, _question_compound, [[]], {"order": order, "ops": ops})


def _replay_compound(data: Mapping[str, Any]) -> list[list[int]]:
    tree = BPlusTree(data["order"])
    replay(tree, data["ops"])
    return tree.state()


B_PLUS_TREE_OPERATIONS: tuple[Operation, ...] = (
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
        replay=_replay_compound,
        question=_question_compound,
    ),
)
