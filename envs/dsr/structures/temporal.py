"""Temporal structures: stack, queue, priority queue (Fibonacci-heap semantics), skip list."""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from embodia.envs.dsr.core import (
    INT_LIST,
    Generator,
    Operation,
    Problem,
    Question,
    Replay,
    Step,
    empty_question,
    from_empty,
    list_schema,
    op_label,
    push_pop_ops,
    register,
    replay,
)


class _Line:
    """Values kept in the order they were added; the canonical state is the list, oldest first."""

    def __init__(self) -> None:
        self.items: deque[int] = deque()

    def state(self) -> list[int]:
        return list(self.items)


class Stack(_Line):
    """A LIFO stack; the canonical state is the list bottom to top."""

    def push(self, value: int) -> None:
        self.items.append(value)

    def pop(self) -> int:
        return self.items.pop()


class Queue(_Line):
    """A FIFO queue; the canonical state is the list front to back."""

    def enqueue(self, value: int) -> None:
        self.items.append(value)

    def dequeue(self) -> int:
        return self.items.popleft()


def _compound(
    structure: str,
    display: str,
    description: str,
    rules: str,
    answer_schema: dict[str, Any],
    generate: Generator,
    replay: Replay,
    question: Question,
) -> Operation:
    """The one operation each temporal structure has: a run of mixed updates, then its final state."""
    return Operation(
        structure=structure,
        name="compound",
        category="temporal",
        display=display,
        description=description,
        rules=rules,
        answer_schema=answer_schema,
        generate=generate,
        replay=replay,
        question=question,
    )


def _line_compound(structure: str, add: str, remove: str, make: type[_Line], description: str) -> Operation:
    """The compound operation of a stack or queue: ``add`` w.p. 0.7 (always when empty), else ``remove``."""
    question = empty_question(structure, f"the state of the {structure}")

    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
        ops = push_pop_ops(rng, size, add, remove, lambda draw: draw >= 0.7)
        return from_empty(make(), ops, question, [])

    def replay_line(data: Mapping[str, Any]) -> list[int]:
        line = make()
        replay(line, data["ops"])
        return line.state()

    order = "from the bottom to the top" if structure == "stack" else "from the front to the back"
    rules = f"Give the final {structure} as a list of its elements {order}."
    return _compound(structure, structure, description, rules, INT_LIST, generate, replay_line, question)


register(
    _line_compound(
        "stack",
        "push",
        "pop",
        Stack,
        "A stack is a last-in, first-out collection. (push, x) puts x on top of the stack; "
        "(pop) removes the element on top.",
    ),
    _line_compound(
        "queue",
        "enqueue",
        "dequeue",
        Queue,
        "A queue is a first-in, first-out collection. (enqueue, x) adds x at the back of the "
        "queue; (dequeue) removes the element at the front.",
    ),
)


# ---------------------------------------------------------------------------------------------
# Priority queue: a max Fibonacci heap with fully specified (deterministic) tie-breaks.
# ---------------------------------------------------------------------------------------------


class _FibNode:
    __slots__ = ("children", "mark", "parent", "priority", "value")

    def __init__(self, value: int, priority: int) -> None:
        self.value = value
        self.priority = priority
        self.parent: _FibNode | None = None
        self.children: list[_FibNode] = []
        self.mark = False

    def rank(self) -> tuple[int, int]:
        """The heap order: higher priority first, ties by larger value (values are distinct)."""
        return (self.priority, self.value)


class FibonacciHeap:
    """A max Fibonacci heap of distinct values; the state is the level-order list of ``[value, priority]``.

    Every choice a textbook leaves open is fixed (see ``_PQ_RULES``): the root list is an ordered
    list that new roots join at the end, consolidation scans it front to back and rebuilds it by
    increasing degree, the lower-ranked root of a link becomes the last child of the other.
    ``consolidate=False`` never links trees, which reproduces the public benchmark's generator (its
    heap is a stub without consolidation, so every node stays a root and its level order is simply
    all pairs sorted by descending (priority, value)).
    """

    def __init__(self, consolidate: bool = True) -> None:
        self.consolidate = consolidate
        self.roots: list[_FibNode] = []
        self.nodes: dict[int, _FibNode] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def insert(self, value: int, priority: int) -> None:
        if value in self.nodes:
            raise ValueError(f"value {value} is already in the priority queue")
        node = _FibNode(value, priority)
        self.nodes[value] = node
        self.roots.append(node)

    def extract_max(self) -> list[int]:
        """Remove the top root, promote its children to roots, consolidate; returns ``[value, priority]``."""
        if not self.roots:
            raise IndexError("extract_max from an empty priority queue")
        top = max(self.roots, key=_FibNode.rank)
        self.roots.remove(top)
        for child in top.children:
            child.parent = None
            child.mark = False
            self.roots.append(child)
        top.children = []
        del self.nodes[top.value]
        if self.consolidate:
            self._consolidate()
        return [top.value, top.priority]

    def raise_key(self, value: int, priority: int) -> None:
        node = self.nodes[value]
        if priority < node.priority:
            raise ValueError(f"raise_key to {priority} below the current priority {node.priority}")
        node.priority = priority
        parent = node.parent
        if parent is not None and node.rank() > parent.rank():
            self._cut(node, parent)
            self._cascading_cut(parent)

    def decrease_key(self, value: int, priority: int) -> None:
        node = self.nodes[value]
        if priority > node.priority:
            raise ValueError(f"decrease_key to {priority} above the current priority {node.priority}")
        node.priority = priority
        # Only children can now violate the heap order; they move to the root list (no marks, no cascade).
        for child in list(node.children):
            if child.rank() > node.rank():
                self._cut(child, node)

    def _cut(self, node: _FibNode, parent: _FibNode) -> None:
        parent.children.remove(node)
        node.parent = None
        node.mark = False
        self.roots.append(node)

    def _cascading_cut(self, node: _FibNode) -> None:
        parent = node.parent
        while parent is not None:
            if not node.mark:
                node.mark = True
                return
            self._cut(node, parent)
            node, parent = parent, parent.parent

    def _consolidate(self) -> None:
        by_degree: dict[int, _FibNode] = {}
        for root in list(self.roots):
            tree = root
            degree = len(tree.children)
            while degree in by_degree:
                other = by_degree.pop(degree)
                if other.rank() > tree.rank():
                    tree, other = other, tree
                other.parent = tree
                other.mark = False
                tree.children.append(other)
                degree += 1
            by_degree[degree] = tree
        self.roots = [by_degree[degree] for degree in sorted(by_degree)]

    def levels(self) -> list[list[list[int]]]:
        """The forest by depth (roots first), each depth sorted by descending (priority, value)."""
        out: list[list[list[int]]] = []
        level = self.roots
        while level:
            level = sorted(level, key=_FibNode.rank, reverse=True)
            out.append([[node.value, node.priority] for node in level])
            level = [child for node in level for child in node.children]
        return out

    def state(self) -> list[list[int]]:
        return [pair for level in self.levels() for pair in level]


def _pq_ops(rng: random.Random, size: int) -> list[list[Any]]:
    """The reference's mix: insert when empty or w.p. 0.5, else delete / raise_key / decrease_key evenly."""
    pool = list(range(100))
    rng.shuffle(pool)
    present: dict[int, int] = {}  # value -> priority, in insertion order (deterministic choice)
    ops: list[list[Any]] = []
    for _ in range(size):
        kind = (
            "insert"
            if not present or rng.random() < 0.5
            else rng.choice(("delete", "raise_key", "decrease_key"))
        )
        if kind == "insert":
            value, priority = pool.pop(), rng.randint(0, 99)
            present[value] = priority
            ops.append(["insert", value, priority])
        elif kind == "delete":
            top = max(present, key=lambda v: (present[v], v))
            del present[top]
            ops.append(["delete"])
        else:
            value = rng.choice(list(present))
            step = rng.randint(1, 50)
            new = min(99, present[value] + step) if kind == "raise_key" else max(0, present[value] - step)
            present[value] = new
            ops.append([kind, value, new])
    return ops


def apply_pq_op(heap: FibonacciHeap, op: list[Any]) -> None:
    if op[0] == "insert":
        heap.insert(op[1], op[2])
    elif op[0] == "delete":
        heap.extract_max()
    elif op[0] == "raise_key":
        heap.raise_key(op[1], op[2])
    elif op[0] == "decrease_key":
        heap.decrease_key(op[1], op[2])
    else:
        raise ValueError(f"unknown priority queue operation {op[0]!r}")


def _benchmark_heap() -> FibonacciHeap:
    """The public benchmark's heap never consolidates (see FibonacciHeap): its truth is what
    scores compare on."""
    return FibonacciHeap(consolidate=False)


def _replay_pq(data: Mapping[str, Any]) -> list[list[int]]:
    heap = _benchmark_heap()
    replay(heap, data["ops"], apply=lambda op: apply_pq_op(heap, op))
    return heap.state()


_question_pq = empty_question("priority queue", "the state of the priority queue")


def _pq_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    ops = _pq_ops(rng, size)
    heap = _benchmark_heap()
    return from_empty(
        heap,
        ops,
        _question_pq,
        [],
        apply=lambda op: apply_pq_op(heap, op),
    )


_PQ_DESCRIPTION = (
    "A max priority queue stores items as (value, priority) pairs and always serves the item of highest "
    "priority. It is a Fibonacci heap in which consolidation is deferred: every item stays a root of the "
    "forest, so the level order of the forest is all items from highest to lowest priority. An item "
    "outranks another if its priority is larger, or if the priorities are equal and its value is larger. "
    "The operations are: (insert, v, p) adds the item (v, p); (delete) removes the item that outranks all "
    "others (extract-max); (raise_key, v, p) sets the priority of v to p (at least its old priority); "
    "(decrease_key, v, p) sets the priority of v to p (at most its old priority)."
)

_PQ_RULES = (
    "Values are distinct. Ties in priority are broken by the larger value, both when choosing the item to "
    "delete and when ordering the output. final_answer is the level order of the forest as a flat list of "
    "[value, priority] pairs, from highest to lowest priority (ties: larger value first). An empty queue "
    "is []."
)

# ---------------------------------------------------------------------------------------------
# Skip list with the promotion coins given in the question.
# ---------------------------------------------------------------------------------------------


class _SkipNode:
    __slots__ = ("forward", "key")

    def __init__(self, key: int, height: int) -> None:
        self.key = key
        self.forward: list[_SkipNode | None] = [None] * (height + 1)


class SkipList:
    """A skip list with levels 0..max_level whose promotions follow given coin values.

    The state lists the levels from the highest non-empty one down to level 0, each sorted; level 0
    is always present, so an empty skip list is ``[[]]`` (as in the reference).
    """

    def __init__(self, max_level: int) -> None:
        self.max_level = max_level
        self.head = _SkipNode(-1, max_level)

    @staticmethod
    def height(coins: list[float], max_level: int) -> int:
        """Promote once per coin < 0.5 while below ``max_level``; the first other coin ends it."""
        level = 0
        for coin in coins:
            if coin < 0.5 and level < max_level:
                level += 1
            else:
                break
        return level

    def _predecessors(self, key: int) -> list[_SkipNode]:
        """For each level, the last node with a key below ``key`` (the head when none)."""
        update = [self.head] * (self.max_level + 1)
        node = self.head
        for level in range(self.max_level, -1, -1):
            nxt = node.forward[level]
            while nxt is not None and nxt.key < key:
                node, nxt = nxt, nxt.forward[level]
            update[level] = node
        return update

    def __contains__(self, key: int) -> bool:
        nxt = self._predecessors(key)[0].forward[0]
        return nxt is not None and nxt.key == key

    def insert(self, key: int, coins: list[float]) -> bool:
        """Insert ``key`` with the height ``coins`` give; False (no change) when already present."""
        update = self._predecessors(key)
        nxt = update[0].forward[0]
        if nxt is not None and nxt.key == key:
            return False
        height = self.height(coins, self.max_level)
        node = _SkipNode(key, height)
        for level in range(height + 1):
            node.forward[level] = update[level].forward[level]
            update[level].forward[level] = node
        return True

    def delete(self, key: int) -> bool:
        update = self._predecessors(key)
        node = update[0].forward[0]
        if node is None or node.key != key:
            return False
        for level in range(len(node.forward)):
            update[level].forward[level] = node.forward[level]
        return True

    def level(self, level: int) -> list[int]:
        keys = []
        node = self.head.forward[level]
        while node is not None:
            keys.append(node.key)
            node = node.forward[level]
        return keys

    def state(self) -> list[list[int]]:
        levels = [self.level(level) for level in range(self.max_level, -1, -1)]
        while len(levels) > 1 and not levels[0]:
            levels.pop(0)
        return levels


def skip_max_level(size: int) -> int:
    """The reference's max level per length level: 3 (short), 5 (medium), 7 (long)."""
    return 3 if size <= 10 else 5 if size <= 20 else 7


def _coins(rng: random.Random, max_level: int) -> list[float]:
    """Coins as the reference draws them (4 decimals): until one is >= 0.5 or a coin is drawn at max level."""
    coins: list[float] = []
    level = 0
    while True:
        coin = round(rng.random(), 4)
        coins.append(coin)
        if coin < 0.5 and level < max_level:
            level += 1
        else:
            return coins


def _skip_label(op: list[Any]) -> str:
    if op[0] == "insert":
        return f"(insert, {op[1]}, [{', '.join(f'{coin:.4f}' for coin in op[2])}])"
    return op_label(*op)


def _run_skip(data: Mapping[str, Any]) -> tuple[SkipList, tuple[Step, ...]]:
    """The skip list of ``data["max_level"]`` after ``data["ops"]``, with the ops' steps."""
    skip = SkipList(data["max_level"])
    _, steps = replay(skip, data["ops"], label=_skip_label)
    return skip, steps


def _question_skip(data: Mapping[str, Any]) -> str:
    labels = ", ".join(_skip_label(op) for op in data["ops"])
    return (
        f"You are given an empty skip list with max level {data['max_level']}. Each (insert, value, [p1, "
        "p2, ...]) lists the level generation probabilities of that insert. Q: What is the final state of "
        f"the skip list after the following operations: {labels}?"
    )


def _replay_skip(data: Mapping[str, Any]) -> list[list[int]]:
    return _run_skip(data)[0].state()


def _skip_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    max_level = skip_max_level(size)
    present: list[int] = []  # the keys in the list, sorted (its level 0)
    ops: list[list[Any]] = []
    for _ in range(size):
        if not present or rng.random() >= 0.3:
            # Values may repeat, as in the reference: re-inserting a present key is a no-op without coins.
            key = rng.randint(0, 99)
            coins = [] if key in present else _coins(rng, max_level)
            ops.append(["insert", key, coins])
            if key not in present:
                bisect.insort(present, key)
        else:
            key = rng.choice(present)
            ops.append(["delete", key])
            present.remove(key)
    data = {"max_level": max_level, "ops": ops}
    skip, steps = _run_skip(data)
    return Problem(_question_skip(data), skip.state(), data, steps, [[]])


_SKIP_DESCRIPTION = (
    "A skip list keeps its keys in several sorted linked lists called levels. Level 0, the bottom, holds "
    "every key; each higher level holds a subset of the level below it, so searches can skip ahead on high "
    "levels and drop down. Levels are numbered 0 up to the given max level. The operations are:\n"
    "1. (insert, x, [p1, p2, ...]): search down from the top level for the position of x; if x is already "
    "present nothing changes. Otherwise put x into level 0 at its sorted position; then read the given "
    "probabilities in order: while the next probability is below 0.5 and x's highest level is below the max "
    "level, promote x to the next level up (insert it there at its sorted position). The first probability "
    "of 0.5 or more ends the promotion, and a probability read once x is at the max level is ignored.\n"
    "2. (delete, x): find x starting from the top level and unlink it from every level it is in; deleting "
    "a key that is not present changes nothing."
)

_SKIP_RULES = (
    "A probability promotes only if it is strictly below 0.5 (0.5 itself does not) and the node is below "
    "the max level. Re-inserting a key that is already present changes nothing (no probabilities are listed "
    "for it). final_answer is a list of levels from the highest non-empty level down to level 0, each level "
    "a list of its keys in increasing order. Empty levels above the highest non-empty one are not included, "
    "but level 0 is always included, so an empty skip list is [[]]."
)

register(
    _compound(
        "priority_queue",
        "priority queue",
        _PQ_DESCRIPTION,
        _PQ_RULES,
        list_schema({**INT_LIST, "minItems": 2, "maxItems": 2}),
        _pq_compound,
        _replay_pq,
        _question_pq,
    ),
    _compound(
        "skip_list",
        "skip list",
        _SKIP_DESCRIPTION,
        _SKIP_RULES,
        list_schema(INT_LIST),
        _skip_compound,
        _replay_skip,
        _question_skip,
    ),
)
