"""Questions rebuilt from released-style data by hand: what ``embodia dsr import`` poses a
released instance with. (``test_replay.py`` checks every generated instance's question and truth
rebuilt from its JSON data.)"""

from __future__ import annotations

from typing import Any

from embodia.envs.dsr.core import get_operation
from embodia.envs.dsr.structures.red_black import RedBlackTree


def _ask(operation: str, data: dict[str, Any]) -> str:
    question = get_operation(operation).question
    assert question is not None
    return question(data)


def test_questions_from_data_as_a_released_reader_writes_it() -> None:
    assert _ask("stack.compound", {"ops": [["push", 3], ["pop"]]}) == (
        "You are given an empty stack initially. Q: What is the state of the stack after the following "
        "operations: (push, 3), (pop)?"
    )
    assert _ask("b_plus_tree.compound", {"order": 4, "ops": [["insert", 7]]}).startswith(
        "You are given an empty B+ tree of order 4 initially."
    )
    # a repeated skip-list insert draws no probabilities; the others are written with four decimals
    skip = {"max_level": 3, "ops": [["insert", 5, [0.25, 0.5]], ["insert", 5, []], ["delete", 5]]}
    assert "(insert, 5, [0.2500, 0.5000]), (insert, 5, []), (delete, 5)?" in _ask("skip_list.compound", skip)
    assert "(add, (4, 9)), (remove, 4)?" in _ask(
        "hashmap.compound", {"buckets": 10, "ops": [["add", 4, 9], ["remove", 4]]}
    )
    tree = [[10, 5, None], [5, None, None]]
    assert _ask("bst.remove", {"keys": [10, 5], "tree": tree, "remove": 5}) == (
        "You are given a binary search tree. The root node is Node 10. Node 10's left child is Node 5. "
        "Q: What are the pre-order and post-order traversals of the tree after removing the node with "
        "value 5?"
    )
    given = RedBlackTree([10, 5]).nodes()
    assert _ask("rb_tree.construct_compound", {"tree": given, "ops": [["delete", 5]]}) == (
        "You are given the following red-black tree. The root is 10 (black). 10's left child is 5 (red), "
        "and its right child is none. 5's left child is none, and its right child is none. Q: What is the "
        "state of the red-black tree after the following operations: (delete, 5)?"
    )
    graph = {"nodes": [1, 2], "edges": [[1, 2]], "source": 2}
    assert _ask("graph.dfs", graph) == (
        "Q: The graph consists of nodes [1, 2], and edges [(1, 2)]. What is the depth-first search path "
        "starting from node 2?"
    )
    # the released geometric graphs write their points with two decimals
    points = {"dim": 1, "points": [[1.5], [3.25]], "threshold": 30, "source": 1}
    assert _ask("geom_graph.bfs", points).endswith("starting from node 1, the point [3.25]?")
