"""Binary search tree: the reference structure and its seven operations (:mod:`.hierarchical`
registers them)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from embodia.envs.dsr import core


class _BSTNode:
    __slots__ = ("key", "left", "right")

    def __init__(self, key: int) -> None:
        self.key = key
        self.left: _BSTNode | None = None
        self.right: _BSTNode | None = None


class BST:
    """An unbalanced BST of distinct keys; removal of a two-child node uses the in-order successor."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        """The tree of inserting ``keys`` in order; a tree's pre-order rebuilds that tree."""
        self.root: _BSTNode | None = None
        for key in keys:
            self.insert(key)

    @classmethod
    def from_nodes(cls, nodes: Iterable[Sequence[int | None]]) -> BST:
        """The tree whose :meth:`nodes` are ``nodes`` (``[key, left key, right key]`` in pre-order, as
        problems state a given tree); ValueError when they describe no BST of distinct keys."""
        rows = [list(row) for row in nodes]
        if any(len(row) != 3 for row in rows):
            raise ValueError(f"BST nodes must be [key, left, right] rows, got {rows}")
        keys = [row[0] for row in rows if row[0] is not None]
        if len(keys) != len(rows) or len(set(keys)) != len(keys):
            raise ValueError(f"BST keys must be present and distinct, got {[row[0] for row in rows]}")
        # Inserting a BST's pre-order rebuilds it, so the rows describe a BST iff they are its rows.
        tree = cls(keys)
        if tree.nodes() != rows:
            raise ValueError(f"the nodes do not describe a binary search tree in pre-order: {rows}")
        return tree

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

    def delete(self, key: int) -> None:
        """:meth:`remove`, under the name the compound operation gives it."""
        self.remove(key)

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

    def _walk(self, order: Literal["pre", "in", "post"]) -> list[_BSTNode]:
        """The nodes in pre-, in- or post-order: a node before, between or after its subtrees."""
        out: list[_BSTNode] = []

        def walk(node: _BSTNode | None) -> None:
            if node is not None:
                if order == "pre":
                    out.append(node)
                walk(node.left)
                if order == "in":
                    out.append(node)
                walk(node.right)
                if order == "post":
                    out.append(node)

        walk(self.root)
        return out

    def preorder(self) -> list[int]:
        return [node.key for node in self._walk("pre")]

    def inorder(self) -> list[int]:
        return [node.key for node in self._walk("in")]

    def postorder(self) -> list[int]:
        return [node.key for node in self._walk("post")]

    def depth(self) -> int:
        """Number of nodes on the longest root-to-leaf path (empty tree 0, single node 1)."""

        def height(node: _BSTNode | None) -> int:
            return 0 if node is None else 1 + max(height(node.left), height(node.right))

        return height(self.root)

    def nodes(self) -> list[list[int | None]]:
        """``[key, left key, right key]`` per node in pre-order (``None`` for a missing child)."""
        return [[node.key, _key(node.left), _key(node.right)] for node in self._walk("pre")]

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
    keys = core.distinct_values(rng, size, core.KEY_LOW, core.KEY_HIGH)
    return keys, BST(keys)


Update = Literal["insert", "remove"]


def _replay_update(kind: Update) -> core.Replay:
    """The traversals after ``data[kind]`` is inserted into / removed from ``data["tree"]``."""

    def replay(data: Mapping[str, Any]) -> dict[str, list[int]]:
        tree = BST.from_nodes(data["tree"])
        getattr(tree, kind)(data[kind])
        return tree.traversals()

    return replay


def _question_update(kind: Update) -> core.Question:
    """The question of inserting ``data["insert"]`` into / removing ``data["remove"]`` from
    ``data["tree"]``."""
    action = "inserting a node with value" if kind == "insert" else "removing the node with value"

    def question(data: Mapping[str, Any]) -> str:
        return (
            f"You are given a binary search tree. {describe_bst(data['tree'])} Q: What are the pre-order "
            f"and post-order traversals of the tree after {action} {data[kind]}?"
        )

    return question


def _bst_update(kind: Update) -> core.Generator:
    """bst.insert / bst.remove: one insertion or removal in a given tree of ``size`` nodes."""

    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
        keys, tree = _given_bst(rng, size)
        nodes = tree.nodes()
        before = tree.traversals()
        # As the reference: a key to insert lies strictly inside the tree's key range, so it lands deep.
        key = core.fresh_key(rng, keys, min(keys), max(keys)) if kind == "insert" else rng.choice(keys)
        data = {"keys": keys, "tree": nodes, kind: key}
        truth = _replay_update(kind)(data)
        steps = core.steps_from([core.op_label(kind, key)], [truth])
        return core.Problem(_question_update(kind)(data), truth, data, steps, before)

    return generate


Query = Literal["preorder", "inorder", "postorder", "depth"]


def _replay_query(query: Query) -> core.Replay:
    """The pre-, in- or post-order or the depth of ``data["tree"]``."""

    def replay(data: Mapping[str, Any]) -> Any:
        return getattr(BST.from_nodes(data["tree"]), query)()

    return replay


_QUERIES: dict[Query, str] = {
    "preorder": "What is the pre-order traversal of the tree?",
    "inorder": "What is the in-order traversal of the tree?",
    "postorder": "What is the post-order traversal of the tree?",
    "depth": "What is the depth of the tree?",
}


def _question_query(query: Query) -> core.Question:
    """The question of ``query`` on ``data["tree"]``."""

    def question(data: Mapping[str, Any]) -> str:
        return f"You are given a binary search tree. {describe_bst(data['tree'])} Q: {_QUERIES[query]}"

    return question


def _bst_traversal(query: Query) -> core.Generator:
    """bst.preorder / inorder / postorder / depth of a given tree of ``size`` nodes."""

    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
        keys, tree = _given_bst(rng, size)
        data = {"keys": keys, "tree": tree.nodes()}
        return core.Problem(_question_query(query)(data), _replay_query(query)(data), data)

    return generate


_question_compound = core.empty_question(
    "binary search tree", "the pre-order traversal of the binary search tree"
)


def _bst_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> core.Problem:
    ops = core.insert_delete_ops(
        rng, size, lambda present: core.fresh_key(rng, present), lambda draw: draw >= 0.7
    )
    tree = BST()
    return core.from_empty(tree, ops, _question_compound, [])


def _replay_compound(data: Mapping[str, Any]) -> list[int]:
    tree = BST()
    core.replay(tree, data["ops"])
    return tree.state()


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
    "properties": {"pre_order": core.INT_LIST, "post_order": core.INT_LIST},
    "required": ["pre_order", "post_order"],
    "additionalProperties": False,
}
_TRAVERSALS_RULE = (
    'Give final_answer as an object {"pre_order": [...], "post_order": [...]}: the pre-order and the '
    "post-order traversal of the tree after the operation, each as a list of keys."
)


_BST_OPERATION = core.operation_maker("bst", "hierarchical", "binary search tree", _BST_BASE)


def _bst_op(
    name: str,
    description: str,
    rules: str,
    schema: dict[str, Any],
    generate: core.Generator,
    replay: core.Replay,
    question: core.Question,
) -> core.Operation:
    return _BST_OPERATION(
        name,
        description,
        rules=rules,
        answer_schema=schema,
        generate=generate,
        replay=replay,
        question=question,
    )


BST_OPERATIONS: tuple[core.Operation, ...] = (
    _bst_op(
        "insert",
        _BST_INSERT + _PRE + _POST,
        _TRAVERSALS_RULE,
        _TRAVERSALS_SCHEMA,
        _bst_update("insert"),
        _replay_update("insert"),
        _question_update("insert"),
    ),
    _bst_op(
        "remove",
        _BST_REMOVE + _PRE + _POST,
        "A removed node with two children takes its in-order successor's key (never its predecessor's). "
        + _TRAVERSALS_RULE,
        _TRAVERSALS_SCHEMA,
        _bst_update("remove"),
        _replay_update("remove"),
        _question_update("remove"),
    ),
    _bst_op(
        "compound",
        "(insert, k) inserts k and (delete, k) removes k. " + _BST_INSERT + _BST_REMOVE + _PRE,
        "A deleted node with two children takes its in-order successor's key (never its predecessor's). "
        "Give the pre-order traversal of the final tree as a list of keys ([] if the tree is empty).",
        core.INT_LIST,
        _bst_compound,
        _replay_compound,
        _question_compound,
    ),
    _bst_op(
        "preorder",
        _PRE,
        "Give the pre-order traversal as a list of keys.",
        core.INT_LIST,
        _bst_traversal("preorder"),
        _replay_query("preorder"),
        _question_query("preorder"),
    ),
    _bst_op(
        "inorder",
        _IN,
        "Give the in-order traversal as a list of keys.",
        core.INT_LIST,
        _bst_traversal("inorder"),
        _replay_query("inorder"),
        _question_query("inorder"),
    ),
    _bst_op(
        "postorder",
        _POST,
        "Give the post-order traversal as a list of keys.",
        core.INT_LIST,
        _bst_traversal("postorder"),
        _replay_query("postorder"),
        _question_query("postorder"),
    ),
    _bst_op(
        "depth",
        _DEPTH,
        "Count nodes, not edges (a single node has depth 1). Give the depth as one integer.",
        core.INT,
        _bst_traversal("depth"),
        _replay_query("depth"),
        _question_query("depth"),
    ),
)
