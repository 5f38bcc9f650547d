"""Network structures: undirected graph (BFS, DFS) and disjoint set union (union by rank)."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from embodia.envs.dsr.core import (
    INT_LIST,
    Generator,
    Operation,
    Problem,
    Question,
    Replay,
    Step,
    distinct_values,
    op_label,
    operation_maker,
    register,
    replay,
)

EDGE_PROBABILITY = 0.3
"""Erdős–Rényi edge probability of the graph problems, as in the public benchmark."""


def breadth_first(source: int, neighbours: Callable[[int], Iterable[int]]) -> list[int]:
    """Visit order of breadth-first search from ``source``, each node's ``neighbours`` taken in the
    order given; a node is visited when it is first discovered."""
    order = [source]
    seen = {source}
    frontier = deque([source])
    while frontier:
        node = frontier.popleft()
        for other in neighbours(node):
            if other not in seen:
                seen.add(other)
                order.append(other)
                frontier.append(other)
    return order


class Graph:
    """An undirected simple graph on integer labels; traversals visit the smallest neighbour first."""

    def __init__(self, nodes: list[int], edges: list[list[int]]) -> None:
        self.nodes = list(nodes)
        self.adjacency: dict[int, set[int]] = {node: set() for node in self.nodes}
        self.edges: list[list[int]] = []
        for u, v in edges:
            self.add_edge(u, v)

    def add_edge(self, u: int, v: int) -> None:
        if u == v or v in self.adjacency[u]:
            return
        self.adjacency[u].add(v)
        self.adjacency[v].add(u)
        self.edges.append([u, v])

    def neighbours(self, node: int) -> list[int]:
        return sorted(self.adjacency[node])

    def bfs(self, source: int) -> list[int]:
        """Visit order of breadth-first search; a node is visited when it is first discovered."""
        return breadth_first(source, self.neighbours)

    def dfs(self, source: int) -> list[int]:
        """Pre-order of recursive depth-first search (an explicit stack of neighbour iterators)."""
        order = [source]
        seen = {source}
        stack = [iter(self.neighbours(source))]
        while stack:
            for other in stack[-1]:
                if other not in seen:
                    seen.add(other)
                    order.append(other)
                    stack.append(iter(self.neighbours(other)))
                    break
            else:
                stack.pop()
        return order

    def state(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "edges": [list(edge) for edge in self.edges]}


def random_graph(rng: random.Random, size: int, p: float = EDGE_PROBABILITY) -> Graph:
    """G(size, p) over distinct labels 0-99, edges listed in the order the pairs are drawn.

    Disconnected graphs are kept, as in the public benchmark: a traversal covers only the
    source's component.
    """
    nodes = distinct_values(rng, size)
    edges = [[nodes[i], nodes[j]] for i in range(size) for j in range(i + 1, size) if rng.random() < p]
    return Graph(nodes, edges)


def _edge_text(edges: list[list[int]]) -> str:
    return "[" + ", ".join(f"({u}, {v})" for u, v in edges) + "]"


Traversal = Literal["bfs", "dfs"]


def traversal_replay(kind: Traversal) -> Replay:
    """The visit order of ``kind`` over the graph of ``data["nodes"]`` and ``data["edges"]`` from
    ``data["source"]``; any sortable labels (the realistic towns are names)."""

    def replay(data: Mapping[str, Any]) -> list[Any]:
        graph = Graph(data["nodes"], data["edges"])
        return graph.bfs(data["source"]) if kind == "bfs" else graph.dfs(data["source"])

    return replay


def traversal_question(kind: Traversal) -> Question:
    """The question of a ``kind`` traversal of the graph of ``data["nodes"]`` and ``data["edges"]``
    (stated as given) from ``data["source"]``."""
    search = "breadth-first" if kind == "bfs" else "depth-first"

    def question(data: Mapping[str, Any]) -> str:
        return (
            f"Q: The graph consists of nodes {data['nodes']}, and edges {_edge_text(data['edges'])}. "
            f"What is the {search} search path starting from node {data['source']}?"
        )

    return question


def _traversal(kind: Traversal) -> Generator:
    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
        graph = random_graph(rng, size)
        source = rng.choice(graph.nodes)
        data = {**graph.state(), "source": source}
        return Problem(traversal_question(kind)(data), traversal_replay(kind)(data), data)

    return generate


class DSU:
    """Disjoint set union over a fixed element list: union by rank, find with full path compression."""

    def __init__(self, elements: list[int]) -> None:
        self.elements = list(elements)
        self.parent = {x: x for x in self.elements}
        self.rank = dict.fromkeys(self.elements, 0)

    def root(self, x: int) -> int:
        """The root of x's tree, without compressing (a read-only view for ``state``)."""
        while self.parent[x] != x:
            x = self.parent[x]
        return x

    def find(self, x: int) -> int:
        root = self.root(x)
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, x: int, y: int) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx == ry:
            return
        if self.rank[rx] < self.rank[ry]:
            self.parent[rx] = ry
        elif self.rank[rx] > self.rank[ry]:
            self.parent[ry] = rx
        else:
            self.parent[ry] = rx
            self.rank[rx] += 1

    def state(self) -> list[int]:
        """``[find(x) for x in elements]``; compression never changes a root, so it is skipped."""
        return [self.root(x) for x in self.elements]


def _run_dsu(data: Mapping[str, Any]) -> tuple[DSU, tuple[Step, ...]]:
    """The DSU of ``data["elements"]`` after ``data["ops"]``, with the ops' steps."""
    dsu = DSU(data["elements"])
    _, steps = replay(dsu, data["ops"])
    return dsu, steps


def _question_dsu(data: Mapping[str, Any]) -> str:
    labels = ", ".join(op_label(*op) for op in data["ops"])
    return (
        f"The initial list of elements is {data['elements']}; each element starts as its own set with rank "
        f"0. Q: What is the final state of the DSU after the following operations: {labels}?"
    )


def _replay_dsu(data: Mapping[str, Any]) -> list[int]:
    return _run_dsu(data)[0].state()


def _dsu_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    # The public generator draws about twice as many elements as unions (10-19 elements for 5-10).
    elements = distinct_values(rng, rng.randint(size + 1, 2 * size))
    # Both arguments drawn independently, as in the public generator: union(x, x) is a no-op.
    ops: list[list[Any]] = [["union", rng.choice(elements), rng.choice(elements)] for _ in range(size)]
    data = {"elements": elements, "ops": ops}
    dsu, steps = _run_dsu(data)
    return Problem(_question_dsu(data), dsu.state(), data, steps, elements)


_GRAPH_DESCRIPTION = (
    "A graph consists of nodes and undirected edges; each edge (u, v) connects u and v both ways. "
)
_TRAVERSAL_RULES = (
    "Whenever a node has several unvisited neighbours, visit them in increasing order of their value "
    "(smallest first). Only nodes reachable from the source are visited. Give the final answer as the "
    "list of nodes in the order they are visited, starting with the source."
)

_graph_operation = operation_maker("graph", "network", "graph", _GRAPH_DESCRIPTION)

register(
    _graph_operation(
        "bfs",
        (
            "Breadth-first search starts at the source: mark it visited and put it in a first-in "
            "first-out queue. Repeatedly take the node at the front of the queue and, for each of its "
            "neighbours not yet visited, mark it visited (this is when it is visited) and add it to the "
            "back of the queue. So all nodes at distance 1 from the source are visited before those at "
            "distance 2, and so on."
        ),
        rules=_TRAVERSAL_RULES,
        answer_schema=INT_LIST,
        generate=_traversal("bfs"),
        replay=traversal_replay("bfs"),
        question=traversal_question("bfs"),
    ),
    _graph_operation(
        "dfs",
        (
            "Depth-first search is recursive: visiting a node marks it visited and then, for each of "
            "its neighbours in turn, visits that neighbour if it is not yet visited (going as deep as "
            "possible before moving on to the next neighbour). The search starts by visiting the source; "
            "the answer is the pre-order, the order in which nodes are first visited."
        ),
        rules=_TRAVERSAL_RULES,
        answer_schema=INT_LIST,
        generate=_traversal("dfs"),
        replay=traversal_replay("dfs"),
        question=traversal_question("dfs"),
    ),
    Operation(
        structure="dsu",
        name="compound",
        category="network",
        display="disjoint set union (DSU)",
        description=(
            "A disjoint set union (DSU) keeps a partition of the elements into disjoint sets, each "
            "stored as a tree of parent pointers whose root represents the set. Initially every "
            "element is its own parent (a set of its own) with rank 0. find(x) follows parent pointers "
            "from x up to the root and returns it, then points every node on that path directly at "
            "the root (path compression). (union, x, y) computes rx = find(x) and ry = find(y); if they "
            "are equal nothing changes. Otherwise the root with the higher rank becomes the parent of "
            "the other (ranks unchanged); if the ranks are equal, ry is attached under rx and the rank "
            "of rx grows by 1. The rank is an upper bound on the height of a root's tree."
        ),
        rules=(
            "On equal ranks the root of x's set becomes the parent (x is the first argument of union). "
            "Give the final state as the list [find(x) for x in the initial list], in the order of the "
            "initial list."
        ),
        answer_schema=INT_LIST,
        generate=_dsu_compound,
        replay=_replay_dsu,
        question=_question_dsu,
    ),
)
