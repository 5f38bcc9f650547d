"""Network (graph BFS/DFS, DSU) and spatial (K-D heap, K-D tree, geometric graph) references."""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodia.envs.dsr.core import OPERATIONS
from embodia.envs.dsr.structures import network, spatial
from embodia.envs.dsr.structures.network import DSU, Graph
from embodia.envs.dsr.structures.spatial import GeometricGraph, KDHeap, KDNode, KDTree

KEYS = (
    "graph.bfs",
    "graph.dfs",
    "dsu.compound",
    "kd_heap.compound",
    "kd_tree.construct",
    "geom_graph.construct",
    "geom_graph.bfs",
)
SPATIAL = ("kd_heap.compound", "kd_tree.construct", "geom_graph.construct", "geom_graph.bfs")
FAST = settings(max_examples=100, deadline=None)


# --- generic generate() contract -------------------------------------------------------------


def _cases() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    for key in KEYS:
        for variant in OPERATIONS[key].variants:
            cases.append((key, dict(variant)))
    cases += [("kd_tree.construct", {"dim": 2, "distribution": d}) for d in spatial.DISTRIBUTIONS]
    cases.append(("kd_tree.construct", {"distribution": "uniform", "dim": 3}))
    return cases


@pytest.mark.parametrize(("key", "variant"), _cases())
@pytest.mark.parametrize("size", [5, 17, 30])
def test_generate_contract(key: str, variant: dict[str, Any], size: int) -> None:
    op = OPERATIONS[key]
    for seed in range(5):
        a = op.generate(random.Random(seed), size, variant)
        b = op.generate(random.Random(seed), size, variant)
        assert a == b
        assert json.loads(json.dumps(a.truth)) == a.truth
        assert json.loads(json.dumps(a.data)) == a.data
        assert a.question.startswith(("Q:", "You are", "The initial", "Construct"))
        if a.steps:
            assert len(a.steps) == size
            assert a.truth == a.steps[-1].state
            for step in a.steps:
                assert json.loads(json.dumps(step.state)) == step.state
        if "dim" in a.data:
            assert a.data["dim"] == variant.get("dim", 2)


def test_registration() -> None:
    for key in KEYS:
        op = OPERATIONS[key]
        assert op.category == ("spatial" if key in SPATIAL else "network")
        assert op.description and op.rules
    for key in SPATIAL:
        assert OPERATIONS[key].variants == tuple({"dim": d} for d in (1, 2, 3, 5))
    assert spatial.DIMS == (1, 2, 3, 5)
    assert spatial.DISTRIBUTIONS == ("moons", "circles", "blobs")


# --- graph BFS / DFS -------------------------------------------------------------------------


@st.composite
def graphs(draw: st.DrawFn) -> tuple[Graph, int]:
    nodes = draw(st.lists(st.integers(0, 99), min_size=1, max_size=15, unique=True))
    pairs = list(itertools.combinations(nodes, 2))
    edges = draw(st.lists(st.sampled_from(pairs), max_size=40)) if pairs else []
    return Graph(nodes, [list(e) for e in edges]), draw(st.sampled_from(nodes))


def _nx(graph: Graph) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(graph.nodes)
    g.add_edges_from(graph.edges)
    return g


@FAST
@given(graphs())
def test_traversals_match_networkx(case: tuple[Graph, int]) -> None:
    graph, source = case
    g = _nx(graph)
    bfs = [source] + [v for _, v in nx.bfs_edges(g, source, sort_neighbors=sorted)]
    dfs = list(nx.dfs_preorder_nodes(g, source, sort_neighbors=sorted))
    assert graph.bfs(source) == bfs
    assert graph.dfs(source) == dfs
    component = nx.node_connected_component(g, source)
    for order in (graph.bfs(source), graph.dfs(source)):
        assert order[0] == source
        assert len(order) == len(set(order)) and set(order) == component


def test_traversal_golden() -> None:
    # A 5-cycle 5-3-7-1-9-5 plus an isolated node 4 (never reached).
    graph = Graph([5, 3, 9, 1, 7, 4], [[5, 9], [5, 3], [3, 7], [9, 1], [1, 7]])
    assert graph.bfs(5) == [5, 3, 9, 7, 1]
    assert graph.dfs(5) == [5, 3, 7, 1, 9]
    assert graph.bfs(4) == [4] == graph.dfs(4)
    # DFS goes deep through the smallest neighbour before trying the next one.
    star = Graph([0, 1, 2, 3], [[0, 2], [0, 1], [1, 3]])
    assert star.dfs(0) == [0, 1, 3, 2]
    assert star.bfs(0) == [0, 1, 2, 3]


def test_graph_generation() -> None:
    for seed in range(50):
        problem = OPERATIONS["graph.bfs"].generate(random.Random(seed), 12, {})
        nodes, edges = problem.data["nodes"], problem.data["edges"]
        assert len(nodes) == 12 == len(set(nodes)) and all(0 <= v <= 99 for v in nodes)
        assert all(u != v and u in nodes and v in nodes for u, v in edges)
        assert len({frozenset(e) for e in edges}) == len(edges)
        assert problem.truth == Graph(nodes, edges).bfs(problem.data["source"])
        assert f"({edges[0][0]}, {edges[0][1]})" in problem.question if edges else True


# --- DSU -------------------------------------------------------------------------------------


class NaiveSets:
    """Partition model: a list of Python sets merged on union."""

    def __init__(self, elements: list[int]) -> None:
        self.sets = [{x} for x in elements]

    def union(self, x: int, y: int) -> None:
        a = next(s for s in self.sets if x in s)
        b = next(s for s in self.sets if y in s)
        if a is not b:
            a |= b
            self.sets.remove(b)

    def partition(self) -> set[frozenset[int]]:
        return {frozenset(s) for s in self.sets}


@st.composite
def dsu_cases(draw: st.DrawFn) -> tuple[list[int], list[tuple[str, int, int]]]:
    elements = draw(st.lists(st.integers(0, 99), min_size=1, max_size=20, unique=True))
    item = st.sampled_from(elements)
    ops = draw(st.lists(st.tuples(st.sampled_from(["union", "union", "find"]), item, item), max_size=40))
    return elements, ops


@FAST
@given(dsu_cases())
def test_dsu_invariants(case: tuple[list[int], list[tuple[str, int, int]]]) -> None:
    elements, ops = case
    dsu, model = DSU(elements), NaiveSets(elements)
    for kind, x, y in ops:
        if kind == "find":
            before = dsu.state()
            root = dsu.find(x)
            assert dsu.parent[x] == root  # full path compression
            assert dsu.state() == before  # compression never moves a root
            continue
        rx, ry = dsu.root(x), dsu.root(y)
        ranks = dict(dsu.rank)
        dsu.union(x, y)
        model.union(x, y)
        if rx != ry:
            if ranks[rx] == ranks[ry]:
                assert dsu.parent[ry] == rx and dsu.rank[rx] == ranks[rx] + 1
            elif ranks[rx] > ranks[ry]:
                assert dsu.parent[ry] == rx and dsu.rank == ranks
            else:
                assert dsu.parent[rx] == ry and dsu.rank == ranks
        else:
            assert dsu.rank == ranks
        for v in elements:
            if dsu.parent[v] != v:
                assert dsu.rank[dsu.parent[v]] > dsu.rank[v]
    state = dsu.state()
    for v in elements:
        root = dsu.find(v)
        assert dsu.parent[root] == root
        assert dsu.find(root) == root == dsu.find(v)
    assert [dsu.find(v) for v in elements] == state
    groups: dict[int, set[int]] = {}
    for v, root in zip(elements, state, strict=True):
        groups.setdefault(root, set()).add(v)
    assert {frozenset(s) for s in groups.values()} == model.partition()


def test_dsu_golden() -> None:
    dsu = DSU([10, 20, 30, 40, 50, 60])
    expected = [
        ((20, 10), [20, 20, 30, 40, 50, 60]),  # equal ranks: y's root 10 goes under x's root 20
        ((30, 40), [20, 20, 30, 30, 50, 60]),
        ((50, 10), [20, 20, 30, 30, 20, 60]),  # rank 0 root 50 goes under the rank 1 root 20
        ((40, 50), [30, 30, 30, 30, 30, 60]),  # roots 30 and 20 both rank 1: 20 under 30
        ((60, 60), [30, 30, 30, 30, 30, 60]),  # no-op
        ((60, 10), [30, 30, 30, 30, 30, 30]),
    ]
    for (x, y), state in expected:
        dsu.union(x, y)
        assert dsu.state() == state
    assert dsu.rank[30] == 2
    # 10 hung under 20 under 30 until find(10) (in union(60, 10)) compressed its path.
    assert dsu.parent[10] == 30 and dsu.parent[50] == 20


def test_dsu_generation() -> None:
    problem = OPERATIONS["dsu.compound"].generate(random.Random(3), 8, {})
    elements = problem.data["elements"]
    assert 9 <= len(elements) <= 16 and len(set(elements)) == len(elements)
    assert problem.initial_state == elements
    dsu = DSU(elements)
    for op in problem.data["ops"]:
        assert op[0] == "union"
        dsu.union(op[1], op[2])
    assert dsu.state() == problem.truth
    assert problem.steps[0].label.startswith("(union, ")


# --- K-D heap --------------------------------------------------------------------------------


@st.composite
def heap_ops(draw: st.DrawFn) -> tuple[int, list[Any]]:
    dim = draw(st.sampled_from(spatial.DIMS))
    point = st.lists(st.integers(0, 9), min_size=dim, max_size=dim)  # small range: many norm ties
    ops = draw(st.lists(st.one_of(st.tuples(point), st.none()), max_size=40))
    return dim, ops


@FAST
@given(heap_ops())
def test_kd_heap_matches_sorted_model(case: tuple[int, list[Any]]) -> None:
    _, ops = case
    heap = KDHeap()
    model: list[tuple[list[int], int]] = []
    label = 0
    for op in ops:
        if op is None:
            if not model:
                continue
            top = heap.delete()
            assert KDHeap.key(top) == min(map(KDHeap.key, model))  # a smallest norm; which one is the sift's
            model.remove(top)
        else:
            heap.insert(op[0], label)
            model.append((op[0], label))
            label += 1
        keys = [KDHeap.key(item) for item in heap.items]
        assert all(keys[(i - 1) // 2] <= keys[i] for i in range(1, len(keys)))
        assert sorted(heap.state()) == sorted(lbl for _, lbl in model)


def test_kd_heap_golden() -> None:
    heap = KDHeap()
    for point, label in [([5], 10), ([3], 11), ([8], 12), ([1], 13)]:
        heap.insert(point, label)
    assert heap.state() == [13, 11, 12, 10]
    assert heap.delete() == ([1], 13)
    assert heap.state() == [11, 10, 12]
    # Norm 5 three times: equal norms never swap, up or down.
    heap = KDHeap()
    heap.insert([3, 4], 1)
    heap.insert([5, 0], 2)
    assert heap.state() == [1, 2]
    heap.insert([0, 5], 3)
    assert heap.state() == [1, 2, 3]
    assert heap.delete() == ([3, 4], 1)
    assert heap.state() == [3, 2]  # the last element moved to the root stays: its child is not smaller
    # The same point twice, and a repeated label: insertion order stands, labels need not differ.
    heap = KDHeap()
    heap.insert([1, 1], 5)
    heap.insert([1, 1], 4)
    assert heap.state() == [5, 4]
    heap = KDHeap()
    heap.insert([2, 0], 7)
    heap.insert([1, 0], 7)
    assert heap.state() == [7, 7] and heap.delete() == ([1, 0], 7) and heap.items == [([2, 0], 7)]
    # Bubble-down swaps with the smaller child: [1 | 3, 2 | 4] by norm; the moved norm 4 goes right.
    heap = KDHeap()
    for point, label in [([1, 0], 1), ([4, 0], 2), ([2, 0], 3), ([3, 0], 4)]:
        heap.insert(point, label)
    assert heap.state() == [1, 4, 3, 2]
    heap.delete()
    assert heap.state() == [3, 4, 2]


def test_kd_heap_generation() -> None:
    for dim in spatial.DIMS:
        problem = OPERATIONS["kd_heap.compound"].generate(random.Random(dim), 25, {"dim": dim})
        heap = KDHeap()
        for op in problem.data["ops"]:
            if op[0] == "insert":
                assert len(op[1]) == dim and all(0 <= c <= 99 for c in op[1])
                heap.insert(op[1], op[2])
            else:
                heap.delete()
        assert heap.state() == problem.truth
        inserted = [op[2] for op in problem.data["ops"] if op[0] == "insert"]
        assert len(inserted) == len(set(inserted))


# --- K-D tree --------------------------------------------------------------------------------


@st.composite
def point_sets(draw: st.DrawFn) -> list[list[int]]:
    dim = draw(st.sampled_from(spatial.DIMS))
    point = st.lists(st.integers(0, 12), min_size=dim, max_size=dim)  # small range: axis ties
    return draw(st.lists(point, min_size=1, max_size=30, unique_by=tuple))


def _subtree(node: KDNode | None) -> list[list[int]]:
    if node is None:
        return []
    return [node.point, *_subtree(node.left), *_subtree(node.right)]


@FAST
@given(point_sets())
def test_kd_tree_invariants(points: list[list[int]]) -> None:
    tree = KDTree(points)
    order = tree.preorder()
    assert sorted(order) == sorted(points)
    assert order == _subtree(tree.root)
    stack: list[tuple[KDNode | None, int]] = [(tree.root, 0)]
    while stack:
        node, depth = stack.pop()
        if node is None:
            continue
        axis = depth % len(points[0])
        assert node.axis == axis
        left, right = _subtree(node.left), _subtree(node.right)
        assert all(p[axis] <= node.point[axis] for p in left)
        assert all(p[axis] >= node.point[axis] for p in right)
        n = len(left) + len(right) + 1
        assert len(left) == n // 2 and len(right) == n - n // 2 - 1  # upper median
        stack += [(node.left, depth + 1), (node.right, depth + 1)]


def test_kd_tree_golden() -> None:
    # x-sorted: [2,3] [4,7] [5,4] [7,2] [8,1] [9,6] -> index 3 = [7, 2] (upper middle).
    points = [[2, 3], [5, 4], [9, 6], [4, 7], [8, 1], [7, 2]]
    assert KDTree(points).preorder() == [[7, 2], [5, 4], [2, 3], [4, 7], [9, 6], [8, 1]]
    # Ties on x keep the given order (a stable sort): [2,2] [5,1] [5,9] [5,3] -> [5, 9].
    points = [[5, 1], [5, 9], [5, 3], [2, 2]]
    assert KDTree(points).preorder() == [[5, 9], [2, 2], [5, 1], [5, 3]]
    # A subtree's ties keep its parent's sorted order, not the input's: the left subset is
    # [2,5] [4,5] in x order (though [4,5] came first), tied on y -> its median is [4, 5].
    points = [[4, 5], [2, 5], [6, 0], [7, 1], [9, 9]]
    assert KDTree(points).preorder() == [[6, 0], [4, 5], [2, 5], [9, 9], [7, 1]]
    assert KDTree([[4], [1], [3], [2]]).preorder() == [[3], [2], [1], [4]]
    # 3D: the depth-2 subset {[3,3,5], [4,2,2]} splits on z.
    points = [[1, 5, 9], [2, 4, 1], [3, 3, 5], [4, 2, 2], [5, 1, 8], [6, 6, 6], [7, 7, 3], [8, 0, 4]]
    expected = [[5, 1, 8], [2, 4, 1], [3, 3, 5], [4, 2, 2], [1, 5, 9], [6, 6, 6], [8, 0, 4], [7, 7, 3]]
    assert KDTree(points).preorder() == expected


@pytest.mark.parametrize("distribution", spatial.DISTRIBUTIONS)
def test_distributions(distribution: str) -> None:
    for seed in range(20):
        for size in (5, 30):
            points = spatial.shaped_points(random.Random(seed), size, distribution)
            assert points == spatial.shaped_points(random.Random(seed), size, distribution)
            assert len(points) == size == len({tuple(p) for p in points})
            assert all(len(p) == 2 and all(isinstance(c, int) and 0 <= c <= 99 for c in p) for p in points)
    problem = OPERATIONS["kd_tree.construct"].generate(random.Random(0), 20, {"distribution": distribution})
    assert problem.data["distribution"] == distribution and problem.data["dim"] == 2
    assert problem.truth == KDTree(problem.data["points"]).preorder()
    with pytest.raises(ValueError):
        OPERATIONS["kd_tree.construct"].generate(
            random.Random(0), 10, {"distribution": distribution, "dim": 3}
        )


def test_shapes_differ() -> None:
    # Circles leave the centre empty; moons and blobs are not uniform either (coarse sanity check).
    points = spatial.shaped_points(random.Random(1), 200, "circles")
    assert not any(math.dist(p, (49.5, 49.5)) < 10 for p in points)
    with pytest.raises(ValueError):
        spatial.shaped_points(random.Random(1), 5, "spiral")


# --- geometric graph ------------------------------------------------------------------------


@st.composite
def geom_cases(draw: st.DrawFn) -> tuple[list[list[int]], int, int]:
    dim = draw(st.sampled_from(spatial.DIMS))
    point = st.lists(st.integers(0, 40), min_size=dim, max_size=dim)
    points = draw(st.lists(point, min_size=1, max_size=20, unique_by=tuple))
    return points, spatial.THRESHOLDS[dim], draw(st.integers(0, len(points) - 1))


@FAST
@given(geom_cases())
def test_geom_graph_vs_brute_force(case: tuple[list[list[int]], int, int]) -> None:
    points, threshold, source = case
    graph = GeometricGraph(points, threshold)
    brute = [
        [i, j]
        for i, j in itertools.combinations(range(len(points)), 2)
        if math.dist(points[i], points[j]) < threshold
    ]
    assert graph.edges() == brute
    # networkx BFS over a digraph whose successor lists are inserted in (distance, index) order.
    digraph = nx.DiGraph()
    digraph.add_nodes_from(range(len(points)))
    for u in range(len(points)):
        nbrs = [v for v in range(len(points)) if [min(u, v), max(u, v)] in brute]
        for v in sorted(nbrs, key=lambda v: (math.dist(points[u], points[v]), v)):
            digraph.add_edge(u, v)
    order = graph.bfs(source)
    assert order == [source] + [v for _, v in nx.bfs_edges(digraph, source)]
    undirected = nx.Graph(brute)
    undirected.add_nodes_from(range(len(points)))
    assert set(order) == nx.node_connected_component(undirected, source) and len(order) == len(set(order))
    hops = nx.single_source_shortest_path_length(undirected, source)
    assert [hops[v] for v in order] == sorted(hops[v] for v in order)


def test_geom_graph_golden() -> None:
    points = [[0], [10], [50], [25], [90]]
    graph = GeometricGraph(points, 30)
    assert graph.edges() == [[0, 1], [0, 3], [1, 3], [2, 3]]
    # From [25]: [10] at 15, then [0] and [50] both at 25 -> smaller index (0) first.
    assert graph.bfs(3) == [3, 1, 0, 2]
    # Distance exactly 40 is no edge (strict <); [30, 40] is 30.02 from [0, 39], [24, 32] is 25.
    graph = GeometricGraph([[0, 0], [30, 40], [24, 32], [0, 39]], 40)
    assert graph.edges() == [[0, 3], [1, 2], [1, 3], [2, 3]]
    assert graph.bfs(0) == [0, 3, 2, 1]


def test_geom_generation() -> None:
    for dim in spatial.DIMS:
        problem = OPERATIONS["geom_graph.bfs"].generate(random.Random(dim), 20, {"dim": dim})
        points, source = problem.data["points"], problem.data["source"]
        assert problem.data["threshold"] == spatial.THRESHOLDS[dim]
        graph = GeometricGraph(points, spatial.THRESHOLDS[dim])
        assert problem.truth == [points[i] for i in graph.bfs(source)]
        assert problem.truth[0] == points[source]
        construct = OPERATIONS["geom_graph.construct"].generate(random.Random(dim), 20, {"dim": dim})
        assert construct.truth == GeometricGraph(construct.data["points"], spatial.THRESHOLDS[dim]).edges()
    with pytest.raises(ValueError):
        OPERATIONS["geom_graph.bfs"].generate(random.Random(0), 5, {"dim": 4})


def test_network_module_constants() -> None:
    assert network.EDGE_PROBABILITY == 0.3
