"""Spatial structures over k-dimensional integer points: K-D heap, K-D tree, geometric graph.

Every operation takes ``variant["dim"]`` in :data:`DIMS` (default 2); K-D tree construction also
takes ``variant["distribution"]``: ``uniform`` (any dimension) or one of :data:`DISTRIBUTIONS`
(2D only), drawn by our own seeded samplers below.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from embodia.envs.dsr.core import (
    INT,
    INT_LIST,
    Op,
    Operation,
    Problem,
    Step,
    distinct_values,
    list_schema,
    op_label,
    register,
    replay,
)
from embodia.envs.dsr.structures.network import breadth_first

DIMS = (1, 2, 3, 5)
DISTRIBUTIONS = ("moons", "circles", "blobs")
"""The non-uniform point shapes of K-D tree construction, all 2D."""
THRESHOLDS = {1: 30, 2: 40, 3: 60, 5: 85}
"""Geometric-graph edge thresholds per dimension, as in the public benchmark.

With coordinates uniform over 0-99 they give edge densities of about 0.51 (1D), 0.34 (2D),
0.41 (3D) and 0.44 (5D): comparable to the p = 0.3 of the graph problems.
"""
COORD_MAX = 99
DIM_VARIANTS: tuple[Mapping[str, Any], ...] = tuple({"dim": d} for d in DIMS)

Point = list[int]
POINT_LIST = list_schema(INT_LIST)
NUMBER_POINT_LIST = list_schema(list_schema({"type": "number"}))
"""Points with any numbers: the public benchmark's geometric graphs have two-decimal coordinates."""


def dimension(variant: Mapping[str, Any]) -> int:
    dim = int(variant.get("dim", 2))
    if dim not in DIMS:
        raise ValueError(f"unsupported dimension {dim}: expected one of {DIMS}")
    return dim


def squared_norm(point: Point) -> int:
    return sum(c * c for c in point)


def squared_distance(a: Point, b: Point) -> int:
    return sum((x - y) * (x - y) for x, y in zip(a, b, strict=True))


def uniform_points(rng: random.Random, count: int, dim: int) -> list[Point]:
    """``count`` distinct points with integer coordinates in 0-99."""
    if dim == 1:
        return [[v] for v in distinct_values(rng, count)]
    seen: set[tuple[int, ...]] = set()
    points: list[Point] = []
    while len(points) < count:
        point = [rng.randint(0, COORD_MAX) for _ in range(dim)]
        if tuple(point) not in seen:
            seen.add(tuple(point))
            points.append(point)
    return points


# --- K-D heap -------------------------------------------------------------------------------


class KDHeap:
    """A binary min-heap in array form of (priority point, label) elements.

    Elements are compared by the Euclidean norm of the priority point only (exactly, via the
    squared norm), strictly: two elements of equal norm never swap, as in the textbook sift and
    the public benchmark. Labels need not be distinct. The canonical state is the list of labels
    in array order.
    """

    def __init__(self) -> None:
        self.items: list[tuple[Point, int]] = []

    @staticmethod
    def key(item: tuple[Point, int]) -> int:
        return squared_norm(item[0])

    def _less(self, i: int, j: int) -> bool:
        return self.key(self.items[i]) < self.key(self.items[j])

    def _swap(self, i: int, j: int) -> None:
        self.items[i], self.items[j] = self.items[j], self.items[i]

    def insert(self, point: Point, label: int) -> None:
        self.items.append((list(point), label))
        i = len(self.items) - 1
        while i > 0 and self._less(i, (i - 1) // 2):
            self._swap(i, (i - 1) // 2)
            i = (i - 1) // 2

    def delete(self) -> tuple[Point, int]:
        """Extract the minimum: the last element replaces the root, then bubbles down."""
        self._swap(0, len(self.items) - 1)
        top = self.items.pop()
        i, n = 0, len(self.items)
        while True:
            left, right = 2 * i + 1, 2 * i + 2
            smallest = i
            # Left is tested first and right must be strictly smaller to win: ties go left.
            if left < n and self._less(left, smallest):
                smallest = left
            if right < n and self._less(right, smallest):
                smallest = right
            if smallest == i:
                return top
            self._swap(i, smallest)
            i = smallest

    def __len__(self) -> int:
        return len(self.items)

    def state(self) -> list[int]:
        return [label for _, label in self.items]


def _point_text(point: Point) -> str:
    return "[" + ", ".join(str(c) for c in point) + "]"


def _kd_heap_label(op: Op) -> str:
    """``(insert, ([3, 4], 17))``, ``(delete)``."""
    return op_label("insert", f"({_point_text(op[1])}, {op[2]})") if op[0] == "insert" else op_label(*op)


def _run_kd_heap(data: Mapping[str, Any]) -> tuple[KDHeap, tuple[Step, ...]]:
    """The K-D heap after ``data["ops"]`` (the points carry the dimension), with the ops' steps."""
    heap = KDHeap()
    _, steps = replay(heap, data["ops"], label=_kd_heap_label)
    return heap, steps


def _replay_kd_heap(data: Mapping[str, Any]) -> list[int]:
    return _run_kd_heap(data)[0].state()


def _question_kd_heap(data: Mapping[str, Any]) -> str:
    dim = data["dim"]
    labels = ", ".join(_kd_heap_label(op) for op in data["ops"])
    return (
        f"You are given an empty {dim}-dimensional K-D heap initially. Each inserted element is "
        "(priority, label) with a priority point in "
        f"{dim} dimension{'s' if dim > 1 else ''}. Q: What is the state of the heap after the following "
        f"operations: {labels}?"
    )


def _kd_heap_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    dim = dimension(variant)
    labels_pool = distinct_values(rng, size)  # at most `size` inserts, each with its own label
    held = 0
    ops: list[list[Any]] = []
    for _ in range(size):
        if held == 0 or rng.random() < 0.7:
            point = [rng.randint(0, COORD_MAX) for _ in range(dim)]
            ops.append(["insert", point, labels_pool.pop()])
            held += 1
        else:
            ops.append(["delete"])
            held -= 1
    data = {"dim": dim, "ops": ops}
    heap, steps = _run_kd_heap(data)
    return Problem(_question_kd_heap(data), heap.state(), data, steps, [])


# --- K-D tree -------------------------------------------------------------------------------


class KDNode:
    def __init__(self, point: Point, axis: int, left: KDNode | None, right: KDNode | None) -> None:
        self.point = point
        self.axis = axis
        self.left = left
        self.right = right


class KDTree:
    """A balanced K-D tree built at once from a point list.

    At depth d the split axis is d mod k. The points of a subtree are sorted by that axis, stably:
    points tied on it keep the order they were given in (the public benchmark's prompt: "keep the
    original order"; a subtree's points come in its parent's sorted order). The element at index
    len // 2 (the upper middle for even counts) becomes the node; the points before it form the
    left subtree, those after it the right. The canonical state is the pre-order list of points.
    """

    def __init__(self, points: list[Point]) -> None:
        self.dim = len(points[0]) if points else 0
        self.root = self._build([list(p) for p in points], 0)

    def _build(self, points: list[Point], depth: int) -> KDNode | None:
        if not points:
            return None
        axis = depth % self.dim
        ordered = sorted(points, key=lambda p: p[axis])  # stable: ties keep the given order
        middle = len(ordered) // 2
        left = self._build(ordered[:middle], depth + 1)
        right = self._build(ordered[middle + 1 :], depth + 1)
        return KDNode(ordered[middle], axis, left, right)

    def preorder(self) -> list[Point]:
        out: list[Point] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node is not None:
                out.append(list(node.point))
                stack.append(node.right)
                stack.append(node.left)
        return out

    def state(self) -> list[Point]:
        return self.preorder()


def _to_grid(x: float, low: float, high: float) -> int:
    """Map x from [low, high] onto the integer grid 0-99 (clamped)."""
    value = round((x - low) / (high - low) * COORD_MAX)
    return min(COORD_MAX, max(0, value))


def _moon(rng: random.Random, index: int) -> Point:
    # Two interleaving half circles, as in the classic "two moons" toy set, noise 0.05.
    t = rng.uniform(0.0, math.pi)
    if index % 2 == 0:
        x, y = math.cos(t), math.sin(t)
    else:
        x, y = 1.0 - math.cos(t), 0.5 - math.sin(t)
    x, y = x + rng.gauss(0.0, 0.05), y + rng.gauss(0.0, 0.05)
    return [_to_grid(x, -1.2, 2.2), _to_grid(y, -0.7, 1.2)]


def _circle(rng: random.Random, index: int) -> Point:
    # Two concentric circles, the inner one half the outer radius, noise 0.05.
    radius = 1.0 if index % 2 == 0 else 0.5
    t = rng.uniform(0.0, 2.0 * math.pi)
    x = radius * math.cos(t) + rng.gauss(0.0, 0.05)
    y = radius * math.sin(t) + rng.gauss(0.0, 0.05)
    return [_to_grid(x, -1.2, 1.2), _to_grid(y, -1.2, 1.2)]


def _blob_sampler(rng: random.Random) -> Callable[[random.Random, int], Point]:
    # Three isotropic Gaussian blobs (std 7 grid units) with centres uniform in [20, 79]^2.
    centres = [(rng.uniform(20.0, 79.0), rng.uniform(20.0, 79.0)) for _ in range(3)]

    def sample(r: random.Random, index: int) -> Point:
        cx, cy = centres[index % 3]
        return [_to_grid(r.gauss(cx, 7.0), 0, COORD_MAX), _to_grid(r.gauss(cy, 7.0), 0, COORD_MAX)]

    return sample


def shaped_points(rng: random.Random, count: int, distribution: str) -> list[Point]:
    """``count`` distinct 2D integer points in 0-99 of a non-uniform shape (moons, circles, blobs).

    Points alternate between the shape's parts (moon, ring or blob) so the parts are balanced;
    a point landing on an already used grid cell is redrawn.
    """
    sampler: Callable[[random.Random, int], Point]
    if distribution == "moons":
        sampler = _moon
    elif distribution == "circles":
        sampler = _circle
    elif distribution == "blobs":
        sampler = _blob_sampler(rng)
    else:
        raise ValueError(f"unknown distribution {distribution!r}: expected one of {DISTRIBUTIONS}")
    seen: set[tuple[int, int]] = set()
    points: list[Point] = []
    for _ in range(1000 * count):
        if len(points) == count:
            return points
        point = sampler(rng, len(points))
        if (point[0], point[1]) not in seen:
            seen.add((point[0], point[1]))
            points.append(point)
    if len(points) == count:
        return points
    raise RuntimeError(f"could not draw {count} distinct {distribution} points")


def kd_tree_points(rng: random.Random, size: int, variant: Mapping[str, Any]) -> list[Point]:
    distribution = str(variant.get("distribution", "uniform"))
    if distribution == "uniform":
        return uniform_points(rng, size, dimension(variant))
    if dimension(variant) != 2:
        raise ValueError(f"the {distribution} distribution is 2D only")
    return shaped_points(rng, size, distribution)


def _replay_kd_tree(data: Mapping[str, Any]) -> list[Point]:
    return KDTree(data["points"]).state()


def _question_kd_tree(data: Mapping[str, Any]) -> str:
    points = data["points"]
    return (
        f"Construct a K-D tree from the following {len(points[0])}-dimensional points: {points}. "
        "Q: What is the pre-order traversal of the tree?"
    )


def _kd_tree_construct(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    points = kd_tree_points(rng, size, variant)
    distribution = str(variant.get("distribution", "uniform"))
    data = {"dim": len(points[0]), "distribution": distribution, "points": points}
    return Problem(_question_kd_tree(data), _replay_kd_tree(data), data)


# --- Geometric graph -----------------------------------------------------------------------


class GeometricGraph:
    """Nodes are points 0..n-1; an edge joins i and j iff their Euclidean distance < threshold.

    Squared distances are compared with the squared threshold: exactly for embodia's integer
    points, in floating point for the public benchmark's two-decimal ones. The edge weight is
    the distance.
    """

    def __init__(self, points: list[Point], threshold: int) -> None:
        self.points = [list(p) for p in points]
        self.threshold = threshold
        n = len(self.points)
        limit = threshold * threshold
        self.adjacency: list[list[int]] = [[] for _ in range(n)]
        self.weight2: dict[tuple[int, int], int] = {}
        for i in range(n):
            for j in range(i + 1, n):
                d2 = squared_distance(self.points[i], self.points[j])
                if d2 < limit:
                    self.adjacency[i].append(j)
                    self.adjacency[j].append(i)
                    self.weight2[(i, j)] = d2

    def edges(self) -> list[list[int]]:
        return [[i, j] for i, j in sorted(self.weight2)]

    def _w2(self, i: int, j: int) -> int:
        return self.weight2[(i, j) if i < j else (j, i)]

    def bfs(self, source: int) -> list[int]:
        """Node indices in BFS visit order, each node's neighbours by (distance, index)."""
        return breadth_first(
            source, lambda node: sorted(self.adjacency[node], key=lambda j: (self._w2(node, j), j))
        )

    def state(self) -> list[list[int]]:
        return self.edges()


def _geom_given(data: Mapping[str, Any]) -> str:
    """What both geometric-graph questions state first: ``data["points"]`` and ``data["threshold"]``."""
    points = data["points"]
    return (
        f"You are given the following {len(points[0])}-dimensional points; node i is the i-th point, "
        f"counting from 0: {points}. The threshold for creating an edge is {data['threshold']}."
    )


def _question_geom_construct(data: Mapping[str, Any]) -> str:
    return _geom_given(data) + " Q: What are the edges of the geometric graph?"


def _question_geom_bfs(data: Mapping[str, Any]) -> str:
    return (
        _geom_given(data)
        + f" Q: What is the breadth-first search order starting from node {data['source']}, the point "
        f"{data['points'][data['source']]}?"
    )


def _geometric_graph(data: Mapping[str, Any]) -> GeometricGraph:
    return GeometricGraph(data["points"], data["threshold"])


def _replay_geom_construct(data: Mapping[str, Any]) -> list[list[int]]:
    return _geometric_graph(data).edges()


def _replay_geom_bfs(data: Mapping[str, Any]) -> list[Point]:
    """The BFS visit order from node ``data["source"]``, each node written as its point."""
    graph = _geometric_graph(data)
    return [list(graph.points[i]) for i in graph.bfs(data["source"])]


def _geom_construct(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    dim = dimension(variant)
    points = uniform_points(rng, size, dim)
    data = {"dim": dim, "points": points, "threshold": THRESHOLDS[dim]}
    return Problem(_question_geom_construct(data), _replay_geom_construct(data), data)


def _geom_bfs(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    dim = dimension(variant)
    points = uniform_points(rng, size, dim)
    source = rng.randrange(size)
    data = {"dim": dim, "points": points, "threshold": THRESHOLDS[dim], "source": source}
    return Problem(_question_geom_bfs(data), _replay_geom_bfs(data), data)


_GEOM_DESCRIPTION = (
    "A random geometric graph is built from a list of points: node i is the i-th point (counting from "
    "0), and two nodes are joined by an undirected edge if and only if the Euclidean distance between "
    "their points, sqrt(sum over the coordinates of (a_c - b_c)^2), is strictly less than the given "
    "threshold. The edge's weight is that distance. "
)

register(
    Operation(
        structure="kd_heap",
        name="compound",
        category="spatial",
        display="K-D heap",
        description=(
            "A K-D heap is a binary min-heap stored as an array whose elements are (priority, label) "
            "pairs, the priority being a point in k dimensions. An element's key is the Euclidean norm "
            "of its priority point (its distance to the origin); the smallest key sits at the root, and "
            "the children of index i are at 2i+1 and 2i+2. (insert, (p, label)) appends the element at "
            "the end of the array and swaps it with its parent while its key is smaller than the "
            "parent's. (delete) removes the root: the last element of the array is moved to the root, "
            "then swapped with its smaller child while that child's key is smaller than its own."
        ),
        rules=(
            "Compare elements by the norm alone: an element moves only past one whose norm is strictly "
            "larger (up) or strictly smaller (down), so elements of equal norm never swap. When "
            "bubbling down, if both children are equally small prefer the left child. Give the final "
            "heap as the flat list of the elements' labels in array order (index 0 first); do not "
            "include the priorities."
        ),
        answer_schema=INT_LIST,
        generate=_kd_heap_compound,
        replay=_replay_kd_heap,
        question=_question_kd_heap,
        variants=DIM_VARIANTS,
    ),
    Operation(
        structure="kd_tree",
        name="construct",
        category="spatial",
        display="K-D tree",
        description=(
            "A K-D tree is a binary space-partitioning tree over points in k dimensions. It is built "
            "recursively from the whole point set: the node at depth d splits on axis d mod k (the "
            "first coordinate at the root, then the second, and so on, cycling back to the first after "
            "the last). The points of the current subset are sorted by that axis and the median point "
            "becomes the node; the points before it in the sorted order build the left subtree and the "
            "points after it the right subtree, each with the next axis."
        ),
        rules=(
            "For an even number of points the median is the upper of the two middle points: the point "
            "at index len // 2 of the sorted subset (0-based), e.g. the median of [1, 2] is 2 and of "
            "[3, 4, 6, 8] is 6. Points tied on the split axis keep their order in the given data (the "
            "sort is stable; a subtree's points are in the order its parent sorted them). Give the "
            "pre-order traversal (node, then left "
            "subtree, then right subtree) as a list of points, each written like the input."
        ),
        answer_schema=POINT_LIST,
        generate=_kd_tree_construct,
        replay=_replay_kd_tree,
        question=_question_kd_tree,
        variants=DIM_VARIANTS,
    ),
    Operation(
        structure="geom_graph",
        name="construct",
        category="spatial",
        display="geometric graph",
        description=_GEOM_DESCRIPTION,
        rules=(
            "Give the final answer as the list of all edges [i, j] with i < j, using node indices, sorted "
            "by i and then by j."
        ),
        answer_schema=list_schema({"type": "array", "items": INT, "minItems": 2, "maxItems": 2}),
        generate=_geom_construct,
        replay=_replay_geom_construct,
        question=_question_geom_construct,
        variants=DIM_VARIANTS,
    ),
    Operation(
        structure="geom_graph",
        name="bfs",
        category="spatial",
        display="geometric graph",
        description=_GEOM_DESCRIPTION
        + (
            "Breadth-first search starts at the source node: mark it visited and put it in a first-in "
            "first-out queue. Repeatedly take the node at the front of the queue and, for each of its "
            "neighbours not yet visited, mark it visited and add it to the back of the queue."
        ),
        rules=(
            "When a node has several unvisited neighbours, visit them in increasing order of edge weight "
            "(distance), ties by the smaller node index. Only nodes reachable from the source are "
            "visited. Give the final answer as the list of visited nodes in visit order, each node "
            "written as its point (its original coordinates), starting with the source."
        ),
        answer_schema=NUMBER_POINT_LIST,
        generate=_geom_bfs,
        replay=_replay_geom_bfs,
        question=_question_geom_bfs,
        variants=DIM_VARIANTS,
    ),
)
