"""Hierarchical structures: binary search tree, min-heap, red-black tree, B+ tree.

Each structure has a module of its own (:mod:`.bst`, :mod:`.heap`, :mod:`.red_black`,
:mod:`.b_plus_tree`); importing this one registers their operations, in that order (the order
suites list them in), and re-exports the structures.
"""

from __future__ import annotations

from embodia.envs.dsr.core import register
from embodia.envs.dsr.structures.b_plus_tree import B_PLUS_TREE_OPERATIONS, BPlusTree, bplus_order
from embodia.envs.dsr.structures.bst import BST, BST_OPERATIONS, describe_bst
from embodia.envs.dsr.structures.heap import HEAP_OPERATIONS, MinHeap
from embodia.envs.dsr.structures.red_black import (
    BLACK,
    COLOR_CODE,
    RED,
    RED_BLACK_OPERATIONS,
    RedBlackTree,
    describe_rb,
)

register(*BST_OPERATIONS, *HEAP_OPERATIONS, *RED_BLACK_OPERATIONS, *B_PLUS_TREE_OPERATIONS)

__all__ = [
    "BLACK",
    "BST",
    "COLOR_CODE",
    "RED",
    "BPlusTree",
    "MinHeap",
    "RedBlackTree",
    "bplus_order",
    "describe_bst",
    "describe_rb",
]
