"""Replaying DSR instances: every truth (and question) recomputed from the instance's JSON data alone."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodia.envs.dsr import replay, replay_data
from embodia.envs.dsr.core import LENGTHS, OPERATIONS, DSRError, canonical, get_operation
from embodia.envs.dsr.structures.hierarchical import BST, RedBlackTree
from embodia.envs.dsr.suites import Group, Instance, groups, make_instance

GENERATED_SUITES = ("main", "spatial", "realistic", "code")
PER_VARIANT = 8
"""Instances per (operation, variant, length); the suite groups below replay all of theirs."""


def _round_trip(instance: Instance) -> Instance:
    """The instance as an instance file gives it back: JSON, so lists where there were tuples."""
    return Instance.from_json(json.loads(json.dumps(instance.to_json())))


def _assert_replays(instance: Instance) -> None:
    """The truth, and (but for a narrative, whose wording is drawn as the story is told and is
    not in its data) the question, rebuilt from the instance's JSON data alone."""
    loaded = _round_trip(instance)
    replayed = replay(loaded)
    assert replayed == loaded.truth, loaded.id
    assert canonical(replayed) == canonical(instance.truth), loaded.id
    if loaded.suite != "realistic":
        question = get_operation(loaded.operation).question
        assert question is not None and question(loaded.data) == instance.question, loaded.id


def test_every_operation_has_a_replay_and_a_question() -> None:
    assert len(OPERATIONS) == 35
    missing = [key for key, op in OPERATIONS.items() if op.replay is None or op.question is None]
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
def test_replay_recomputes_the_truth_of_every_operation_variant_and_length(
    key: str, variant: dict[str, Any], length: str
) -> None:
    suite = "spatial" if OPERATIONS[key].category == "spatial" else "main"
    group = Group(suite, key, (variant,))
    for index in range(PER_VARIANT):
        _assert_replays(make_instance(group, length, index, seed=7))


@pytest.mark.parametrize(
    "group",
    [pytest.param(group, id=f"{group.suite}-{group.name}") for s in GENERATED_SUITES for group in groups(s)],
)
def test_replay_recomputes_every_suite_instance(group: Group) -> None:
    """Every instance of the suites as shipped: narratives, code modes and point shapes included."""
    for length in LENGTHS:
        for index in range(30):
            _assert_replays(make_instance(group, length, index))


def test_a_narrative_replays_with_names() -> None:
    data = {
        "ops": [["insert", "Emma Jones", "09:05"], ["insert", "Liam Chen", "08:40"], ["delete", "Emma Jones"]]
    }
    assert replay_data("bst.compound", data, narrative=True) == [["Liam Chen", "08:40"]]
    queue = {"ops": [["enqueue", "Ava Lee"], ["enqueue", "Mia Hall"], ["dequeue"]], "distractors": []}
    assert replay_data("queue.compound", queue, narrative=True) == ["Mia Hall"]


# --- a given red-black tree, through its public constructors ----------------------------------


GIVEN = [[10, "b"], [5, "r"], "#", "#", [15, "r"]]
"""10 (black) with red children 5 and 15; the trailing empty children are left out."""


def test_a_red_black_tree_is_built_from_its_colored_preorder() -> None:
    tree = RedBlackTree.from_preorder(GIVEN)
    assert tree.nodes() == [[10, "b", 5, 15], [5, "r", None, None], [15, "r", None, None]]
    assert tree.nodes() == RedBlackTree([10, 5, 15]).nodes()
    # Colors as the answers write them (0 red, 1 black), words, and None for an empty child.
    same = RedBlackTree.from_preorder([[10, 1], [5, "RED"], None, None, [15, 0], None, None])
    assert same.nodes() == tree.nodes()
    assert RedBlackTree.from_nodes(tree.nodes()).nodes() == tree.nodes()
    assert RedBlackTree.from_preorder([]).nodes() == RedBlackTree.from_nodes([]).nodes() == []


def test_a_given_red_black_tree_replays_through_the_clrs_fixups() -> None:
    nodes = RedBlackTree.from_preorder(GIVEN).nodes()
    # insert 1: red uncle 15, so 5 and 15 turn black and 10 red, then the root black again;
    # delete 15: black leaf, sibling 5 has a red outer child 1 (case 4): rotate right at 10.
    data = {"tree": nodes, "ops": [["insert", 1], ["delete", 15]]}
    assert replay_data("rb_tree.construct_compound", data) == [[5, 1], [1, 1], [10, 1]]
    # The tree as given is what counts, not the keys it was drawn from.
    assert replay_data("rb_tree.construct_compound", {**data, "keys": [99]}) == [[5, 1], [1, 1], [10, 1]]


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([[10, "r"]], "root 10 is red"),
        ([[10, "b"], [5, "r"], [3, "r"]], "red node 5 has a red child"),
        ([[10, "b"], [5, "b"], "#", "#", "#"], "black heights"),
        ([[10, "b"], [15, "r"], "#", "#", [5, "r"]], "not a search tree"),
        ([[10, "b"], "#", "#", [5, "r"]], "items left"),
        ([[10, "green"]], "not a red-black color"),
    ],
)
def test_a_tree_that_breaks_the_red_black_rules_is_refused(items: list[Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RedBlackTree.from_preorder(items)


def test_red_black_rows_out_of_preorder_are_refused() -> None:
    with pytest.raises(ValueError, match="not in pre-order"):
        RedBlackTree.from_nodes([[10, "b", 5, 15], [15, "r", None, None], [5, "r", None, None]])
    with pytest.raises(ValueError, match="not reachable"):
        RedBlackTree.from_nodes([[10, "b", None, None], [5, "r", None, None]])
    with pytest.raises(DSRError, match=r"rb_tree\.construct_compound: cannot replay"):
        replay_data("rb_tree.construct_compound", {"tree": [[10, "r", None, None]], "ops": []})


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 99), unique=True, max_size=30),
    st.lists(st.tuples(st.booleans(), st.integers(0, 99)), max_size=30),
)
def test_a_rebuilt_red_black_tree_behaves_as_the_original(
    keys: list[int], ops: list[tuple[bool, int]]
) -> None:
    original = RedBlackTree(keys)
    rebuilt = RedBlackTree.from_nodes(json.loads(json.dumps(original.nodes())))
    for insert, key in ops:
        present = set(original.keys())
        for tree in (original, rebuilt):
            if not insert:
                tree.delete(key)
            elif key not in present:
                tree.insert(key)
        assert rebuilt.nodes() == original.nodes()


def test_a_bst_is_built_from_its_node_rows() -> None:
    nodes = BST([50, 30, 70, 40]).nodes()
    assert BST.from_nodes(nodes).nodes() == nodes
    with pytest.raises(ValueError, match="do not describe"):
        BST.from_nodes([[50, 70, None], [70, None, None]])
    with pytest.raises(ValueError, match="distinct"):
        BST.from_nodes([[50, None, 50], [50, None, None]])
    data = {"tree": nodes, "remove": 30}
    assert replay_data("bst.remove", data) == {"pre_order": [50, 40, 70], "post_order": [40, 70, 50]}


# --- what cannot be replayed ------------------------------------------------------------------


def test_a_missing_field_is_named_with_the_operation() -> None:
    nodes = BST([50, 30]).nodes()
    with pytest.raises(DSRError, match=r"bst\.insert: the instance data has no field 'insert'"):
        replay_data("bst.insert", {"keys": [50, 30], "tree": nodes})
    instance = make_instance(Group("main", "b_plus_tree.compound"), "short", 0)
    broken = dataclasses.replace(instance, data={"ops": instance.data["ops"]})
    with pytest.raises(DSRError, match=r"b_plus_tree\.compound: the instance data has no field 'order'"):
        replay(broken)


def test_an_operation_without_a_replay_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        OPERATIONS, "stack.compound", dataclasses.replace(OPERATIONS["stack.compound"], replay=None)
    )
    with pytest.raises(DSRError, match=r"stack\.compound has no replay"):
        replay_data("stack.compound", {"ops": []})
    with pytest.raises(DSRError, match=r"stack\.compound has no realistic narrative"):
        replay_data("stack.compound", {"ops": []}, narrative=True)
    with pytest.raises(DSRError, match="unknown DSR operation"):
        replay_data("stack.sort", {"ops": []})


def test_data_the_reference_cannot_run_is_an_error_naming_the_operation() -> None:
    with pytest.raises(DSRError, match=r"array\.access: cannot replay"):
        replay_data("array.access", {"array": [1, 2], "index": 5})
    with pytest.raises(DSRError, match=r"graph\.bfs: the instance data is a list"):
        replay_data("graph.bfs", [])  # type: ignore[arg-type]
