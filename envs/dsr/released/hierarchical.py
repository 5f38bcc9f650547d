"""Released hierarchical instances: binary search tree (``binary_tree/``), min-heap, red-black tree,
B+ tree.

* The bst operations' given trees: ``binary_tree/bst_generation/bst_input_<mode>.txt``, each
  ``Tree k`` then one ``key left right`` line per node in pre-order (``None`` for a missing
  child). Record k of an operation's file is about ``Tree k``; embodia's ``keys`` are the tree's
  pre-order (inserting it rebuilds the tree).
* bst.preorder / inorder / postorder / depth: ``binary_tree/traversal/bst_traversal_<mode>.txt``,
  no header; ``Pre-order: [..]``, ``In-order: [..]``, ``Post-order: [..]``, ``Depth: d`` (nodes on
  the longest root-to-leaf path) per tree, each operation taking its line.
* bst.insert / bst.remove: ``binary_tree/<insert|remove>/bst_<insert|remove>_<mode>.txt``, no
  header; ``Insert: k`` (``Remove: k``), then the traversals after it, ``Pre-order: [..]`` and
  ``Post-order: [..]``.
* bst.compound: ``binary_tree/compound/bst_compound_<mode>.txt``, no header; ``Insert: k`` /
  ``Delete: k``, then the final pre-order on a line starting ``[``.
* heap.heapify: ``heap/heapify/heapify_<mode>.txt``; ``Heap i``, the array, the heapified array.
* heap.compound: ``heap/compound/compound_<mode>.txt``; ``Heap i``, ``insert v`` / ``delete``, the
  final array.
* rb_tree.construct: ``rb_tree/construct/rbt_construct_<mode>.txt``; ``Tree i``, ``Values: [..]``
  (the insertion order), ``Pre-order: [[key, 'r'|'b'], ..]``.
* rb_tree.compound: ``rb_tree/compound/rbt_compound_<mode>.txt``; ``Tree i``, ``Insert: k`` /
  ``Delete: k``, ``Pre-order: [..]``.
* rb_tree.construct_compound: ``rb_tree/construct_compound/rbt_construct_compound_<mode>.txt``,
  laid out as the compound, starting from ``Tree i`` of ``rb_tree/rbt_input_<mode>.txt``: its
  coloured pre-order, one ``key r|b`` or ``#`` (a missing child) a line. That tree is taken as
  written (re-inserting its keys would build another).
* b_plus_tree.compound: ``b_plus_tree/compound/compound_<mode>.txt``; ``BPlusTree i (Order: m)``,
  ``insert k`` / ``delete k``, the final pre-order of node key lists (``[[]]`` when empty); the
  order is the variant.

Colours become embodia's answer codes (0 red, 1 black). The public red-black and B+ tree
compounds insert some keys twice; they are read as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import (
    Lines,
    Parse,
    Record,
    int_list,
    is_int,
    is_int_list,
    literal,
    ops_then_state,
    reads,
    records,
    released_file,
    released_lines,
)
from embodia.envs.dsr.structures.bst import BST
from embodia.envs.dsr.structures.red_black import COLOR_CODE, RedBlackTree

_BST_INPUT = "binary_tree/bst_generation/bst_input_{mode}.txt"
_RB_INPUT = "rb_tree/rbt_input_{mode}.txt"
_TREE = r"Tree (\d+)"
_HEAP = r"Heap (\d+)"


def _value(lines: Lines, prefix: str, what: str) -> int:
    """The integer on the next line after ``prefix``."""
    value = literal(lines.after(prefix, what), lines, what)
    if not is_int(value):
        raise lines.error(f"{what} is not an integer")
    return value


def _op_parser(insert: str, delete: str, delete_takes_key: bool = True) -> Parse:
    """Reads ``<insert> k`` and ``<delete> k`` (``<delete>`` alone unless ``delete_takes_key``)."""

    def parse(line: str) -> list[Any] | None:
        if not delete_takes_key and line == delete:
            return ["delete"]
        match = re.fullmatch(rf"({re.escape(insert)}|{re.escape(delete)}) (-?\d+)", line)
        if match is None or (match.group(1) == delete and not delete_takes_key):
            return None
        return ["insert" if match.group(1) == insert else "delete", int(match.group(2))]

    return parse


def _rb_state(text: str, lines: Lines, what: str) -> list[list[int]]:
    """A ``[[key, 'r'|'b'], ...]`` pre-order as embodia's ``[[key, 0|1], ...]``."""
    value = literal(text, lines, what)
    if not (
        isinstance(value, list)
        and all(
            isinstance(pair, list)
            and len(pair) == 2
            and is_int(pair[0])
            and isinstance(pair[1], str)
            and pair[1] in COLOR_CODE
            for pair in value
        )
    ):
        raise lines.error(f"{what} is not a list of [key, 'r'|'b'] pairs")
    return [[key, COLOR_CODE[color]] for key, color in value]


# ----------------------------------------------------------------------------- the given trees


class _Given:
    """The trees of an auxiliary file, by instance index (None when the file is absent)."""

    def __init__(self, name: str, trees: list[Any] | None) -> None:
        self.name = name
        self.trees = trees

    def tree(self, index: int, lines: Lines, first: int) -> Any:
        """Tree ``index``; an error naming the record (file and line) that needs it otherwise."""
        if self.trees is None:
            raise lines.error(f"the record needs Tree {index} of {self.name}, which is absent", first)
        if index >= len(self.trees):
            has = f"which has only {len(self.trees)}"
            raise lines.error(f"the record needs Tree {index} of {self.name}, {has}", first)
        return self.trees[index]


def _bst_node(line: str, lines: Lines) -> list[int | None]:
    match = re.fullmatch(r"(-?\d+) (-?\d+|None) (-?\d+|None)", line)
    if match is None:
        raise lines.error(f"expected a node '<key> <left|None> <right|None>', found {line[:60]!r}")
    return [None if text == "None" else int(text) for text in match.groups()]


def _bst_trees(root: Path, mode: str) -> _Given:
    """``bst_input``'s trees as embodia's ``[key, left, right]`` rows in pre-order."""
    relative = _BST_INPUT.format(mode=mode)
    path = released_file(root, relative)
    if path is None:
        return _Given(relative, None)
    lines = Lines(path, root)
    trees: list[list[list[int | None]]] = []
    for _, first in records(lines, _TREE, "the header 'Tree {}'"):
        nodes: list[list[int | None]] = []
        while (lines.peek() or "Tree").split(" ")[0] != "Tree":
            nodes.append(_bst_node(lines.next("a node"), lines))
        try:
            BST.from_nodes(nodes)
        except ValueError as error:
            raise lines.error(f"Tree {len(trees)} is not a binary search tree: {error}", first) from None
        trees.append(nodes)
    return _Given(lines.name, trees)


def _rb_trees(root: Path, mode: str) -> _Given:
    """``rbt_input``'s trees as embodia's ``[key, color, left, right]`` rows in pre-order, linked as
    written."""
    relative = _RB_INPUT.format(mode=mode)
    path = released_file(root, relative)
    if path is None:
        return _Given(relative, None)
    lines = Lines(path, root)
    trees: list[list[list[Any]]] = []
    for _, first in records(lines, _TREE, "the header 'Tree {}'"):
        items: list[Any] = []
        open_children = 1  # the places a complete pre-order still has to fill
        while open_children:
            line = lines.next(f"the rest of Tree {len(trees)}'s coloured pre-order")
            match = re.fullmatch(r"(-?\d+) ([rb])", line)
            if line == "#":
                items.append(None)
                open_children -= 1
            elif match is not None:
                items.append([int(match.group(1)), match.group(2)])
                open_children += 1
            else:
                raise lines.error(f"expected a node '<key> r|b' or '#', found {line[:60]!r}")
        try:
            tree = RedBlackTree.from_preorder(items)
        except ValueError as error:
            raise lines.error(f"Tree {len(trees)} is not a red-black tree: {error}", first) from None
        trees.append(tree.nodes())
    return _Given(lines.name, trees)


# ----------------------------------------------------------------------------- binary search tree

# each line of a traversal record, in order: the query it answers, its label, what it holds
_TRAVERSALS = (
    ("preorder", "Pre-order:", "the pre-order"),
    ("inorder", "In-order:", "the in-order"),
    ("postorder", "Post-order:", "the post-order"),
)


def _bst_query_records(root: Path, mode: str, query: str) -> Iterator[Record]:
    lines = released_lines(root, f"binary_tree/traversal/bst_traversal_{mode}.txt")
    if lines is None:
        return
    given = _bst_trees(root, mode)
    index = 0
    while not lines.done():
        first = lines.at + 1
        truths: dict[str, Any] = {}
        for name, label, what in _TRAVERSALS:
            truths[name] = int_list(lines.after(label, what), lines, what)
        truths["depth"] = _value(lines, "Depth:", "the depth")
        nodes = given.tree(index, lines, first)
        yield Record({"keys": [row[0] for row in nodes], "tree": nodes}, truths[query], lines.where(first))
        index += 1


@reads("bst.preorder")
def preorder(root: Path, mode: str) -> Iterator[Record]:
    return _bst_query_records(root, mode, "preorder")


@reads("bst.inorder")
def inorder(root: Path, mode: str) -> Iterator[Record]:
    return _bst_query_records(root, mode, "inorder")


@reads("bst.postorder")
def postorder(root: Path, mode: str) -> Iterator[Record]:
    return _bst_query_records(root, mode, "postorder")


@reads("bst.depth")
def depth(root: Path, mode: str) -> Iterator[Record]:
    return _bst_query_records(root, mode, "depth")


def _bst_update_records(root: Path, mode: str, kind: str) -> Iterator[Record]:
    lines = released_lines(root, f"binary_tree/{kind}/bst_{kind}_{mode}.txt")
    if lines is None:
        return
    given = _bst_trees(root, mode)
    label = kind.capitalize() + ":"
    index = 0
    while not lines.done():
        first = lines.at + 1
        key = _value(lines, label, f"the key to {kind}")
        pre = int_list(lines.after("Pre-order:", "the pre-order"), lines, "the pre-order")
        post = int_list(lines.after("Post-order:", "the post-order"), lines, "the post-order")
        nodes = given.tree(index, lines, first)
        data = {"keys": [row[0] for row in nodes], "tree": nodes, kind: key}
        yield Record(data, {"pre_order": pre, "post_order": post}, lines.where(first))
        index += 1


@reads("bst.insert")
def bst_insert(root: Path, mode: str) -> Iterator[Record]:
    return _bst_update_records(root, mode, "insert")


@reads("bst.remove")
def bst_remove(root: Path, mode: str) -> Iterator[Record]:
    return _bst_update_records(root, mode, "remove")


@reads("bst.compound")
def bst_compound(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"binary_tree/compound/bst_compound_{mode}.txt")
    if lines is None:
        return
    parse = _op_parser("Insert:", "Delete:")
    while not lines.done():
        first = lines.at + 1
        ops, text = ops_then_state(lines, parse, "'Insert: k', 'Delete: k'", "the final pre-order")
        yield Record({"ops": ops}, int_list(text, lines, "the final pre-order"), lines.where(first))


# ----------------------------------------------------------------------------- min-heap


@reads("heap.heapify")
def heapify(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"heap/heapify/heapify_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, _HEAP, "the header 'Heap {}'"):
        array = int_list(lines.next("the array"), lines, "the array")
        truth = int_list(lines.next("the heapified array"), lines, "the heapified array")
        yield Record({"array": array}, truth, lines.where(first))


@reads("heap.compound")
def heap_compound(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"heap/compound/compound_{mode}.txt")
    if lines is None:
        return
    parse = _op_parser("insert", "delete", delete_takes_key=False)
    for _, first in records(lines, _HEAP, "the header 'Heap {}'"):
        ops, text = ops_then_state(lines, parse, "'insert v', 'delete'", "the final heap", need_ops=False)
        yield Record({"ops": ops}, int_list(text, lines, "the final heap"), lines.where(first))


# ----------------------------------------------------------------------------- red-black tree


@reads("rb_tree.construct")
def rb_construct(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"rb_tree/construct/rbt_construct_{mode}.txt")
    if lines is None:
        return
    for _, first in records(lines, _TREE, "the header 'Tree {}'"):
        keys = int_list(lines.after("Values:", "the values"), lines, "the values")
        truth = _rb_state(lines.after("Pre-order:", "the pre-order"), lines, "the pre-order")
        yield Record({"keys": keys}, truth, lines.where(first))


def _rb_compound_records(root: Path, mode: str, relative: str, starts_given: bool) -> Iterator[Record]:
    lines = released_lines(root, relative)
    if lines is None:
        return
    given = _rb_trees(root, mode) if starts_given else None
    parse = _op_parser("Insert:", "Delete:")
    for header, first in records(lines, _TREE, "the header 'Tree {}'"):
        ops, text = ops_then_state(
            lines, parse, "'Insert: k', 'Delete: k'", "the final pre-order", "Pre-order:", need_ops=False
        )
        truth = _rb_state(text, lines, "the final pre-order")
        if given is None:
            data: dict[str, Any] = {"ops": ops}
        else:
            nodes = given.tree(int(header[1]), lines, first)
            data = {"keys": [row[0] for row in nodes], "tree": nodes, "ops": ops}
        yield Record(data, truth, lines.where(first))


@reads("rb_tree.compound")
def rb_compound(root: Path, mode: str) -> Iterator[Record]:
    return _rb_compound_records(root, mode, f"rb_tree/compound/rbt_compound_{mode}.txt", False)


@reads("rb_tree.construct_compound")
def rb_construct_compound(root: Path, mode: str) -> Iterator[Record]:
    relative = f"rb_tree/construct_compound/rbt_construct_compound_{mode}.txt"
    return _rb_compound_records(root, mode, relative, True)


# ----------------------------------------------------------------------------- B+ tree


@reads("b_plus_tree.compound")
def b_plus_tree(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"b_plus_tree/compound/compound_{mode}.txt")
    if lines is None:
        return
    parse = _op_parser("insert", "delete")
    shown = "the header 'BPlusTree {} (Order: <m>)'"
    for header, first in records(lines, r"BPlusTree (\d+) \(Order: (\d+)\)", shown):
        order = int(header.group(2))
        if order < 3:
            raise lines.error(f"the order {order} is below 3")
        ops, text = ops_then_state(lines, parse, "'insert k', 'delete k'", "the final tree", need_ops=False)
        truth = literal(text, lines, "the final tree")
        if not (isinstance(truth, list) and truth and all(is_int_list(node) for node in truth)):
            raise lines.error("the final tree is not a non-empty list of key lists")
        yield Record({"order": order, "ops": ops}, truth, lines.where(first), {"order": order})
