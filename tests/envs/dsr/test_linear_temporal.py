"""Array, stack, queue, priority queue (Fibonacci heap), skip list: invariants, golden cases, generators."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodia.envs.dsr.core import LENGTHS, OPERATIONS, canonical
from embodia.envs.dsr.structures import linear, temporal
from embodia.envs.dsr.structures.linear import Array
from embodia.envs.dsr.structures.temporal import FibonacciHeap, Queue, SkipList, Stack, apply_pq_op

CATEGORIES = {
    "linear": ("array.access", "array.delete", "array.insert", "array.reverse", "array.search"),
    "temporal": ("stack.compound", "queue.compound", "priority_queue.compound", "skip_list.compound"),
}
KEYS = tuple(key for keys in CATEGORIES.values() for key in keys)
SETTINGS = settings(max_examples=100, deadline=None)


def test_modules_register_their_operations() -> None:
    assert linear.Array is Array and temporal.SkipList is SkipList
    for category, keys in CATEGORIES.items():
        for key in keys:
            assert OPERATIONS[key].category == category
    for key in KEYS:
        operation = OPERATIONS[key]
        assert operation.description and operation.rules
        if not key.startswith(("stack", "queue")):
            assert "final_answer" in operation.rules


# ------------------------------------------------------------------------------------------ array


def test_array_golden_reference_instance() -> None:
    # The reference's first short array, with duplicates: first-occurrence rules matter.
    items = [65, 65, 64, 8, 0]
    assert Array(items).access(2) == 64
    assert Array(items).search(65) == 0
    assert Array(items).search(8) == 3
    assert Array(items).search(99) == -1
    deleted = Array(items)
    deleted.delete(65)
    assert deleted.state() == [65, 64, 8, 0]
    inserted = Array(items)
    inserted.insert(2, 2)
    assert inserted.state() == [65, 65, 2, 64, 8, 0]
    inserted.insert(0, 7)
    assert inserted.state() == [7, 65, 65, 2, 64, 8, 0]
    reversed_ = Array(items)
    reversed_.reverse()
    assert reversed_.state() == [0, 8, 64, 65, 65]
    assert items == [65, 65, 64, 8, 0]  # the input list is never mutated


@SETTINGS
@given(st.lists(st.integers(0, 9), min_size=1, max_size=30), st.data())
def test_array_matches_python_list(items: list[int], data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(items) - 1))
    value = data.draw(st.integers(0, 12))
    assert Array(items).access(index) == items[index]
    expected_search = next((i for i, item in enumerate(items) if item == value), -1)
    assert Array(items).search(value) == expected_search
    deleted = Array(items)
    deleted.delete(value)
    expected = list(items)
    if expected_search >= 0:
        expected = items[:expected_search] + items[expected_search + 1 :]
    assert deleted.state() == expected
    inserted = Array(items)
    inserted.insert(index, value)
    assert inserted.state()[index] == value and len(inserted.state()) == len(items) + 1
    assert inserted.state()[:index] + inserted.state()[index + 1 :] == items
    reversed_ = Array(items)
    reversed_.reverse()
    assert reversed_.state() == items[::-1]


@pytest.mark.parametrize("name", ["access", "delete", "insert", "reverse", "search"])
def test_array_problems_follow_their_data(name: str) -> None:
    operation = OPERATIONS[f"array.{name}"]
    for seed in range(60):
        size = random.Random(seed).randint(5, 30)
        problem = operation.generate(random.Random(seed), size, {})
        items = problem.data["array"]
        assert len(items) == size and all(0 <= item <= 99 for item in items)
        assert str(items) in problem.question
        assert problem.steps == () and problem.initial_state is None
        if name == "access":
            assert problem.truth == items[problem.data["index"]]
        elif name == "search":
            assert problem.data["value"] in items  # always present, as in the reference
            assert problem.truth == items.index(problem.data["value"])
        elif name == "delete":
            expected = list(items)
            expected.remove(problem.data["value"])
            assert problem.truth == expected
        elif name == "insert":
            expected = list(items)
            expected.insert(problem.data["index"], problem.data["value"])
            assert problem.truth == expected
            assert 0 <= problem.data["index"] < size
        else:
            assert problem.truth == items[::-1]


def test_array_pool_makes_duplicates_common() -> None:
    # Arrays are drawn from a 10/20/30-value pool like the reference, so most have repeated values.
    problems = [OPERATIONS["array.search"].generate(random.Random(s), 25, {}) for s in range(40)]
    assert sum(len(set(p.data["array"])) < len(p.data["array"]) for p in problems) > 30


# ----------------------------------------------------------------------------------- stack, queue

_PUSH_POP = st.lists(st.one_of(st.integers(0, 99), st.none()), max_size=40)


@SETTINGS
@given(_PUSH_POP)
def test_stack_and_queue_match_list_models(ops: list[int | None]) -> None:
    stack, queue = Stack(), Queue()
    stack_model: list[int] = []
    queue_model: list[int] = []
    for op in ops:
        if op is None:
            if stack_model:
                assert stack.pop() == stack_model.pop()
                assert queue.dequeue() == queue_model.pop(0)
        else:
            stack.push(op)
            queue.enqueue(op)
            stack_model.append(op)
            queue_model.append(op)
        assert stack.state() == stack_model and queue.state() == queue_model


def test_stack_and_queue_golden() -> None:
    stack, queue = Stack(), Queue()
    for value in (82, 90, 42):
        stack.push(value)
        queue.enqueue(value)
    stack.pop()
    queue.dequeue()
    stack.push(7)
    queue.enqueue(7)
    assert stack.state() == [82, 90, 7]
    assert queue.state() == [90, 42, 7]


# --------------------------------------------------------------------------------- priority queue


def _heap(*ops: list[Any], consolidate: bool = True) -> FibonacciHeap:
    heap = FibonacciHeap(consolidate=consolidate)
    for op in ops:
        apply_pq_op(heap, op)
    return heap


def _inserts(*pairs: tuple[int, int]) -> list[list[Any]]:
    return [["insert", value, priority] for value, priority in pairs]


# Eight nodes (value v, priority 10*v) and a sacrificial max (9, 99) deleted right away. Consolidating
# roots [1..8] front to back links 1 under 2, 3 under 4, then 2 under 4 (degree-1 tie), 5 under 6, 7
# under 8, 6 under 8, 4 under 8 (degree-2 tie): one binomial tree 8 -> [7, 6 -> [5], 4 -> [3, 2 -> [1]]].
_BINOMIAL = [*_inserts(*((v, 10 * v) for v in range(1, 9)), (9, 99)), ["delete"]]


def test_pq_golden_consolidation_with_degree_ties() -> None:
    heap = _heap(*_BINOMIAL)
    assert heap.levels() == [
        [[8, 80]],
        [[7, 70], [6, 60], [4, 40]],
        [[5, 50], [3, 30], [2, 20]],
        [[1, 10]],
    ]
    assert heap.state() == [[8, 80], [7, 70], [6, 60], [4, 40], [5, 50], [3, 30], [2, 20], [1, 10]]


def test_pq_golden_level_order_is_not_sorted_order() -> None:
    # Roots [1, 2, 3, 4] after deleting 5: 1 under 2, 3 under 4, then the degree-1 tie 4[3] vs 2[1]:
    # 2 (50) outranks 4 (40), so 4 becomes 2's last child. Depth 1 = {1 (10), 4 (40)}, depth 2 = {3 (30)}.
    heap = _heap(*_inserts((1, 10), (2, 50), (3, 30), (4, 40), (5, 60)), ["delete"])
    assert heap.state() == [[2, 50], [4, 40], [1, 10], [3, 30]]


def test_pq_golden_priority_ties_break_by_larger_value() -> None:
    # Delete picks the larger value among equal priorities ...
    assert _heap(*_inserts((7, 20), (8, 20)), ["delete"]).state() == [[7, 20]]
    # ... linking makes the smaller value the child ...
    heap = _heap(*_inserts((7, 20), (8, 20), (9, 99)), ["delete"])
    assert heap.levels() == [[[8, 20]], [[7, 20]]]
    # ... and the output lists equal priorities by larger value first.
    assert _heap(*_inserts((3, 5), (4, 5), (1, 5))).state() == [[4, 5], [3, 5], [1, 5]]


def test_pq_golden_cascading_cut() -> None:
    heap = _heap(*_BINOMIAL, ["raise_key", 3, 50])
    # 3 now outranks its parent 4: cut to the root list; 4 (not a root) gets marked.
    assert heap.nodes[4].mark
    assert heap.state() == [[8, 80], [3, 50], [7, 70], [6, 60], [4, 40], [5, 50], [2, 20], [1, 10]]
    apply_pq_op(heap, ["raise_key", 2, 45])
    # 2 is cut from 4 (taking 1 along); 4 is marked, so it is cut too; its parent 8 is a root: stop.
    assert [root.value for root in heap.roots] == [8, 3, 2, 4]
    assert not heap.nodes[4].mark
    assert heap.state() == [[8, 80], [3, 50], [2, 45], [4, 40], [7, 70], [6, 60], [1, 10], [5, 50]]
    apply_pq_op(heap, ["delete"])
    # Roots [3, 2[1], 4, 7, 6[5]]: 3 takes the slot 0; 2[1] slot 1; 4 links under 3 (50 > 40), then 3[4]
    # meets 2[1] at degree 1 and 2 becomes 3's second child; 7 slot 0; 6[5] slot 1. By degree: 7, 6, 3.
    assert [root.value for root in heap.roots] == [7, 6, 3]
    assert heap.state() == [[7, 70], [6, 60], [3, 50], [5, 50], [2, 45], [4, 40], [1, 10]]
    apply_pq_op(heap, ["delete"])
    assert heap.state() == [[6, 60], [3, 50], [5, 50], [2, 45], [4, 40], [1, 10]]


def test_pq_golden_raise_key_without_violation_stays() -> None:
    heap = _heap(*_BINOMIAL, ["raise_key", 1, 15])  # 15 < parent 2's 20: no cut, no mark
    assert heap.nodes[1].parent is heap.nodes[2] and not heap.nodes[2].mark
    heap = _heap(*_BINOMIAL, ["raise_key", 8, 99])  # a root: nothing to cut
    assert heap.state()[0] == [8, 99] and len(heap.roots) == 1


def test_pq_golden_decrease_key_cuts_outranking_children() -> None:
    heap = _heap(*_BINOMIAL, ["decrease_key", 4, 15])
    # Both children 3 (30) and 2 (20) now outrank 4 (15): cut in child order; 4 stays under 8, unmarked.
    assert [root.value for root in heap.roots] == [8, 3, 2]
    assert heap.nodes[4].parent is heap.nodes[8] and not heap.nodes[4].mark
    assert heap.state() == [[8, 80], [3, 30], [2, 20], [7, 70], [6, 60], [4, 15], [1, 10], [5, 50]]
    heap = _heap(*_BINOMIAL, ["decrease_key", 4, 25])  # only 3 (30) outranks 25; 2 (20) stays
    assert heap.state() == [[8, 80], [3, 30], [7, 70], [6, 60], [4, 25], [5, 50], [2, 20], [1, 10]]


def test_pq_without_consolidation_reproduces_the_reference_truth() -> None:
    # The reference's first short instance; its stub heap never links, so the truth is a sorted list.
    ops: list[list[Any]] = [
        ["insert", 33, 72],
        ["delete"],
        ["insert", 37, 64],
        ["raise_key", 37, 88],
        ["insert", 85, 82],
        ["insert", 80, 62],
    ]
    assert _heap(*ops, consolidate=False).state() == [[37, 88], [85, 82], [80, 62]]
    assert _heap(*ops).state() == [[37, 88], [85, 82], [80, 62]]


_PQ_ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "delete", "raise_key", "decrease_key"]), st.integers(0, 99)
    ),
    max_size=40,
)


def _check_forest(heap: FibonacciHeap) -> None:
    seen = 0
    stack: list[tuple[Any, Any]] = [(root, None) for root in heap.roots]
    while stack:
        node, parent = stack.pop()
        seen += 1
        assert node.parent is parent
        if parent is None:
            assert not node.mark  # marks only matter below the roots
        else:
            assert parent.priority >= node.priority and parent.rank() > node.rank()
        stack.extend((child, node) for child in node.children)
    assert seen == len(heap.nodes)


@SETTINGS
@given(_PQ_ACTIONS, st.booleans())
def test_pq_matches_dict_model(actions: list[tuple[str, int]], consolidate: bool) -> None:
    heap = FibonacciHeap(consolidate=consolidate)
    model: dict[int, int] = {}
    next_value = 0
    for kind, number in actions:
        if kind == "insert" or not model:
            heap.insert(next_value, number)
            model[next_value] = number
            next_value += 1
        elif kind == "delete":
            top = max(model, key=lambda v: (model[v], v))
            assert heap.extract_max() == [top, model.pop(top)]
            if consolidate:  # right after consolidation every root has its own degree
                degrees = [len(root.children) for root in heap.roots]
                assert degrees == sorted(set(degrees))
        else:
            value = sorted(model)[number % len(model)]
            new = (
                min(99, model[value] + number % 30)
                if kind == "raise_key"
                else max(0, model[value] - number % 30)
            )
            apply_pq_op(heap, [kind, value, new])
            model[value] = new
        _check_forest(heap)
        state = heap.state()
        assert sorted(map(tuple, state)) == sorted(model.items())
        for level in heap.levels():
            assert level == sorted(level, key=lambda pair: (pair[1], pair[0]), reverse=True)
        if not consolidate:  # the reference's semantics: one flat sorted list
            assert state == sorted(([v, p] for v, p in model.items()), key=lambda x: (-x[1], -x[0]))


def test_pq_rejects_wrong_direction_and_duplicates() -> None:
    heap = _heap(*_inserts((1, 10)))
    with pytest.raises(ValueError):
        heap.raise_key(1, 5)
    with pytest.raises(ValueError):
        heap.decrease_key(1, 50)
    with pytest.raises(ValueError):
        heap.insert(1, 3)
    apply_pq_op(heap, ["delete"])
    with pytest.raises(IndexError):
        heap.extract_max()


def test_pq_generated_ops_are_valid() -> None:
    operation = OPERATIONS["priority_queue.compound"]
    for seed in range(100):
        problem = operation.generate(random.Random(seed), 30, {})
        present: dict[int, int] = {}
        for op in problem.data["ops"]:
            if op[0] == "insert":
                assert op[1] not in present and 0 <= op[2] <= 99
                present[op[1]] = op[2]
            elif op[0] == "delete":
                assert present
                present.pop(max(present, key=lambda v: (present[v], v)))
            else:
                assert op[1] in present
                assert op[2] >= present[op[1]] if op[0] == "raise_key" else op[2] <= present[op[1]]
                present[op[1]] = op[2]
        assert sorted(map(tuple, problem.truth)) == sorted(present.items())


# ------------------------------------------------------------------------------------- skip list


def _skip(max_level: int, *ops: list[Any]) -> SkipList:
    skip = SkipList(max_level)
    for op in ops:
        if op[0] == "insert":
            skip.insert(op[1], op[2])
        else:
            skip.delete(op[1])
    return skip


def test_skip_list_golden_reference_instances() -> None:
    # The reference's short instances 0 and 2 (max level 3), hand-checked.
    skip = _skip(3, ["insert", 77, [0.2391, 0.3462, 0.3111, 0.5204]], ["insert", 1, [0.8068]])
    assert skip.state() == [[77], [77], [77], [1, 77]]
    skip.delete(77)
    assert skip.state() == [[1]]  # the emptied upper levels disappear
    skip.delete(1)
    assert skip.state() == [[]]  # level 0 always stays
    skip.insert(79, [0.9187])
    assert skip.state() == [[79]]
    skip = _skip(
        3,
        ["insert", 6, [0.6479]],
        ["insert", 23, [0.5216]],
        ["insert", 25, [0.7909]],
        ["delete", 23],
        ["insert", 37, [0.2603, 0.9955]],
        ["insert", 15, [0.1118, 0.0080, 0.6408]],
        ["insert", 90, [0.4531, 0.4410, 0.8680]],
    )
    assert skip.state() == [[15, 90], [15, 37, 90], [6, 15, 25, 37, 90]]


def test_skip_list_golden_promotion_boundaries() -> None:
    # Four coins below 0.5 with max level 3: three promotions, the fourth coin is read at the top and ignored.
    assert _skip(3, ["insert", 79, [0.0911, 0.1942, 0.2896, 0.0672]]).state() == [[79]] * 4
    # 0.5 itself does not promote; a later low coin is never reached.
    assert _skip(3, ["insert", 5, [0.5, 0.1]]).state() == [[5]]
    assert _skip(3, ["insert", 5, [0.4999, 0.5]]).state() == [[5], [5]]
    # Re-inserting a present key changes nothing, whatever coins are given.
    skip = _skip(3, ["insert", 72, [0.3251, 0.1690, 0.5454]], ["insert", 72, []])
    assert skip.state() == [[72], [72], [72]]
    assert not skip.insert(72, [0.1, 0.1, 0.1])
    # Deleting an absent key changes nothing.
    assert not skip.delete(3) and skip.state() == [[72], [72], [72]]


@SETTINGS
@given(
    st.integers(1, 7),
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 20), st.lists(st.floats(0, 0.9999), min_size=1, max_size=9)),
        max_size=40,
    ),
)
def test_skip_list_matches_sorted_model(max_level: int, actions: list[tuple[bool, int, list[float]]]) -> None:
    skip = SkipList(max_level)
    heights: dict[int, int] = {}
    for is_insert, key, coins in actions:
        if is_insert:
            if key not in heights:
                # Independent model of the promotion rule: count the leading coins < 0.5, capped.
                leading = next((i for i, coin in enumerate(coins) if coin >= 0.5), len(coins))
                heights[key] = min(leading, max_level)
            skip.insert(key, coins)
        else:
            heights.pop(key, None)
            skip.delete(key)
        state = skip.state()
        assert state[-1] == sorted(heights)
        assert state == [[]] or all(state)  # no empty level except an empty level 0
        for upper, lower in zip(state, state[1:], strict=False):
            assert set(upper) <= set(lower)
        for level in state:
            assert level == sorted(level)
        top = max(heights.values(), default=0)
        assert len(state) == top + 1
        for depth, level in enumerate(reversed(state)):
            assert level == sorted(k for k, h in heights.items() if h >= depth)
        assert all((key in skip) for key in heights)


def test_skip_list_generated_coins_follow_the_reference_draw() -> None:
    operation = OPERATIONS["skip_list.compound"]
    for size, max_level in ((7, 3), (15, 5), (25, 7)):
        for seed in range(40):
            problem = operation.generate(random.Random(seed), size, {})
            assert problem.data["max_level"] == max_level
            assert f"max level {max_level}" in problem.question
            present: set[int] = set()
            for op in problem.data["ops"]:
                if op[0] == "delete":
                    assert op[1] in present
                    present.discard(op[1])
                    continue
                coins = op[2]
                if op[1] in present:
                    assert coins == []
                    continue
                present.add(op[1])
                assert coins and all(round(c, 4) == c for c in coins)
                low = [c < 0.5 for c in coins]
                # Every coin but the last promotes; the last stops (>= 0.5) or is read at the max level.
                assert all(low[:-1]) and len(coins) - 1 <= max_level
                assert not low[-1] or len(coins) - 1 == max_level
            assert problem.truth[-1] == sorted(present)


# ------------------------------------------------------------------------------------ generators


@pytest.mark.parametrize("key", KEYS)
def test_generate_is_deterministic_and_json_clean(key: str) -> None:
    operation = OPERATIONS[key]
    for length, (low, high) in LENGTHS.items():
        for seed in range(10):
            size = random.Random(f"{length}{seed}").randint(low, high)
            first = operation.generate(random.Random(seed), size, {})
            assert first == operation.generate(random.Random(seed), size, {})
            assert json.loads(json.dumps(first.truth)) == first.truth
            assert json.loads(json.dumps(first.data)) == first.data
            assert canonical(first.truth) == canonical(json.loads(json.dumps(first.truth)))
            if key.endswith("compound"):
                assert len(first.steps) == len(first.data["ops"]) == size
                assert first.truth == first.steps[-1].state
                assert json.loads(json.dumps([s.state for s in first.steps])) == [
                    s.state for s in first.steps
                ]
                assert first.initial_state == ([[]] if key.startswith("skip_list") else [])
                for step in first.steps:
                    assert step.label in first.question


def test_generate_is_fast() -> None:
    start = time.perf_counter()
    for key in KEYS:
        for seed in range(90):
            OPERATIONS[key].generate(random.Random(seed), 21 + seed % 10, {})
    assert (time.perf_counter() - start) / (90 * len(KEYS)) < 0.002
