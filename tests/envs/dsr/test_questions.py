"""Every operation's question rebuilt from an instance's JSON data alone, word for word as its
generator writes it: what ``embodia dsr import`` poses a released instance with.

The realistic suite is left out: a narrative's wording (intros, templates, distractor sentences)
is drawn as the story is told and is not in its data, so no function of the data rebuilds it;
``Operation.question`` is the operation's own wording, which the main, spatial and code suites use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from embodia.envs.dsr.core import LENGTHS, OPERATIONS, get_operation
from embodia.envs.dsr.structures.red_black import RedBlackTree
from embodia.envs.dsr.suites import Group, Instance, groups, make_instance

REBUILT_SUITES = ("main", "spatial", "code")
PER_VARIANT = 4
"""Instances per (operation, variant, length); the suite groups below check all of theirs."""


def _round_trip(instance: Instance) -> Instance:
    """The instance as an instance file gives it back: JSON, so lists where there were tuples."""
    return Instance.from_json(json.loads(json.dumps(instance.to_json())))


def _assert_rebuilt(instance: Instance) -> None:
    loaded = _round_trip(instance)
    question = get_operation(loaded.operation).question
    assert question is not None, loaded.operation
    assert question(loaded.data) == loaded.question == instance.question, loaded.id


def test_every_operation_has_a_question_and_a_replay() -> None:
    assert len(OPERATIONS) == 35
    missing = [key for key, op in OPERATIONS.items() if op.question is None or op.replay is None]
    assert missing == []


@pytest.mark.parametrize(
    ("key", "variant", "length"),
    [
        pytest.param(key, variant, length, id=f"{key}-{json.dumps(dict(variant))}-{length}")
        for key, operation in OPERATIONS.items()
        for variant in operation.variants
        for length in LENGTHS
    ],
)
def test_the_question_of_every_operation_variant_and_length_is_rebuilt(
    key: str, variant: dict[str, Any], length: str
) -> None:
    suite = "spatial" if OPERATIONS[key].category == "spatial" else "main"
    group = Group(suite, key, (variant,))
    for index in range(PER_VARIANT):
        _assert_rebuilt(make_instance(group, length, index, seed=5))


@pytest.mark.parametrize(
    "group",
    [pytest.param(group, id=f"{group.suite}-{group.name}") for s in REBUILT_SUITES for group in groups(s)],
)
def test_the_question_of_every_suite_instance_is_rebuilt(group: Group) -> None:
    """Every instance of the suites as shipped: point shapes and code modes included."""
    for length in LENGTHS:
        for index in range(30):
            _assert_rebuilt(make_instance(group, length, index))


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
