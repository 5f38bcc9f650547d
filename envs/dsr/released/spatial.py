"""Released spatial instances; one folder per dimension (variant ``{"dim": k}``).

* ``kd_heap/compound_<k>d/compound_<mode>.txt``: ``Heap i, Dimension: k``, then ``insert (label,
  [priority point])`` / ``delete`` lines, then the labels in array order ``[...]``.
* ``kd_tree/construct_<k>d/construct_<mode>.txt`` (uniform points) and
  ``kd_tree/construct_{moon,circle,blob}/construct_<mode>.txt`` (2D shapes, variant
  ``{"dim": 2, "distribution": "moons" | "circles" | "blobs"}``): ``Tree i``, ``Points: [...]``,
  ``Traversal: [...]`` (pre-order).
* ``geom_graph/construct_<k>d/construct_<mode>.txt``: ``Graph i``, ``Nodes: [...]`` (points with two
  decimals), ``Threshold: t``, ``From: <point>``, ``BFS: [...]``; this is geom_graph.bfs. The edges of
  geom_graph.construct are those of record i in ``construct_<mode>_graph.json`` beside it (a list of
  ``{"nodes": [...], "edges": [[point, point], ...]}``), written here as sorted index pairs; without
  that file there are no construct records. The public graph joins points at distance <= t.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import (
    Lines,
    Parse,
    Record,
    is_int,
    is_int_list,
    literal,
    ops_then_state,
    reads,
    records,
    released_file,
    released_lines,
)
from embodia.envs.dsr.structures.spatial import DIMS, DISTRIBUTIONS

_HEAP_HEADER = re.compile(r"Heap (\d+), Dimension: (\d+)")
_INSERT = re.compile(r"insert \((-?\d+), (\[.*\])\)")
_TREE_HEADER = re.compile(r"Tree (\d+)")
_GRAPH_HEADER = re.compile(r"Graph (\d+)")

_SHAPE_FOLDERS = {"moons": "moon", "circles": "circle", "blobs": "blob"}
"""embodia's name of each 2D point shape, and the public folder's (``construct_<folder>``)."""


def _is_number(value: Any) -> bool:
    return is_int(value) or isinstance(value, float)


def _point(value: Any, dim: int, number: bool = False) -> bool:
    """Whether ``value`` is a point of ``dim`` integer (or, with ``number``, any numeric) coordinates."""
    check = _is_number if number else is_int
    return isinstance(value, list) and len(value) == dim and all(check(c) for c in value)


def _points(value: Any, dim: int, number: bool = False) -> bool:
    return isinstance(value, list) and all(_point(p, dim, number) for p in value)


def _kd_heap_op(lines: Lines, dim: int) -> Parse:
    """Reads one record's ``insert (label, [priority point])`` and ``delete`` lines; a delete on an
    empty heap is an error."""
    held = 0

    def parse(line: str) -> list[Any] | None:
        nonlocal held
        if line == "delete":
            if held == 0:
                raise lines.error("a delete on an empty heap")
            held -= 1
            return ["delete"]
        insert = _INSERT.fullmatch(line)
        if insert is None:
            return None
        point = literal(insert[2], lines, "the priority")
        if not _point(point, dim):
            raise lines.error(f"the priority is not a point of {dim} integers")
        held += 1
        return ["insert", point, int(insert[1])]

    return parse


@reads("kd_heap.compound")
def kd_heap(root: Path, mode: str) -> Iterator[Record]:
    for dim in DIMS:
        lines = released_lines(root, f"kd_heap/compound_{dim}d/compound_{mode}.txt")
        if lines is None:
            continue
        for match, first in records(lines, _HEAP_HEADER, f"the header 'Heap {{}}, Dimension: {dim}'"):
            if int(match[2]) != dim:
                raise lines.error(f"a heap of dimension {match[2]} in the folder of dimension {dim}")
            ops, text = ops_then_state(
                lines,
                _kd_heap_op(lines, dim),
                "'insert (label, [priority])', 'delete'",
                "the final labels",
                need_ops=False,
            )
            truth = literal(text, lines, "the final labels")
            if not is_int_list(truth):
                raise lines.error("the final labels are not a list of integers")
            yield Record({"dim": dim, "ops": ops}, truth, lines.where(first), {"dim": dim})


def _kd_tree_records(path: Path, root: Path, dim: int, distribution: str) -> Iterator[Record]:
    lines = Lines(path, root)
    variant: dict[str, Any] = {"dim": dim}
    if distribution != "uniform":
        variant["distribution"] = distribution
    for _, first in records(lines, _TREE_HEADER, "the header 'Tree {}'"):
        points = literal(lines.after("Points:", "the points"), lines, "the points")
        if not (points and _points(points, dim)):
            raise lines.error(f"the points are not a non-empty list of points of {dim} integers")
        truth = literal(lines.after("Traversal:", "the pre-order traversal"), lines, "the traversal")
        if not _points(truth, dim):
            raise lines.error(f"the traversal is not a list of points of {dim} integers")
        data = {"dim": dim, "distribution": distribution, "points": points}
        yield Record(data, truth, lines.where(first), dict(variant))


@reads("kd_tree.construct")
def kd_tree(root: Path, mode: str) -> Iterator[Record]:
    for dim in DIMS:
        path = released_file(root, f"kd_tree/construct_{dim}d/construct_{mode}.txt")
        if path is not None:
            yield from _kd_tree_records(path, root, dim, "uniform")
    for distribution in DISTRIBUTIONS:
        path = released_file(root, f"kd_tree/construct_{_SHAPE_FOLDERS[distribution]}/construct_{mode}.txt")
        if path is not None:
            yield from _kd_tree_records(path, root, 2, distribution)


def _geom_records(lines: Lines, dim: int) -> Iterator[tuple[dict[str, Any], list[Any], int]]:
    """(data of geom_graph.bfs, the BFS line's points, first line) per record of a geom_graph file."""
    for _, first in records(lines, _GRAPH_HEADER, "the header 'Graph {}'"):
        points = literal(lines.after("Nodes:", "the points"), lines, "the points")
        if not (points and _points(points, dim, number=True)):
            raise lines.error(f"the points are not a non-empty list of points of {dim} numbers")
        threshold = literal(lines.after("Threshold:", "the threshold"), lines, "the threshold")
        if not (_is_number(threshold) and threshold > 0):
            raise lines.error("the threshold is not a positive number")
        start = literal(lines.after("From:", "the start point"), lines, "the start point")
        if start not in points:
            raise lines.error("the start point is not one of the points")
        order = literal(lines.after("BFS:", "the breadth-first order"), lines, "the breadth-first order")
        if not _points(order, dim, number=True):
            raise lines.error(f"the breadth-first order is not a list of points of {dim} numbers")
        data = {"dim": dim, "points": points, "threshold": threshold, "source": points.index(start)}
        yield data, order, first


@reads("geom_graph.bfs")
def geom_bfs(root: Path, mode: str) -> Iterator[Record]:
    for dim in DIMS:
        path = released_file(root, f"geom_graph/construct_{dim}d/construct_{mode}.txt")
        if path is None:
            continue
        lines = Lines(path, root)
        for data, order, first in _geom_records(lines, dim):
            yield Record(data, order, lines.where(first), {"dim": dim})


def _graph_json(path: Path, lines: Lines) -> list[Any]:
    try:
        graphs = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise lines.error(f"{path.name} beside it is not JSON ({error})", 1) from None
    if not isinstance(graphs, list):
        raise lines.error(f"{path.name} beside it is not a list of graphs", 1)
    return graphs


def _index_edges(graph: Any, points: list[Any], lines: Lines, where: str, first: int) -> list[list[int]]:
    """The edges of one ``_graph.json`` entry as sorted ``[i, j]`` index pairs (a point's index is its
    first position in the record's points, the public graph's nodes being the distinct points)."""
    index: dict[tuple[Any, ...], int] = {}
    for i, point in enumerate(points):
        index.setdefault(tuple(point), i)
    if not (isinstance(graph, dict) and isinstance(graph.get("edges"), list)):
        raise lines.error(f"{where} is not an object with a list of edges", first)
    if graph.get("nodes") != [list(point) for point in index]:
        raise lines.error(f"{where} lists other nodes than this record's points", first)
    edges = []
    for edge in graph["edges"]:
        dim = len(points[0])
        if not (_points(edge, dim, number=True) and len(edge) == 2 and all(tuple(p) in index for p in edge)):
            raise lines.error(f"{where} has an edge {str(edge)[:60]} that is not a pair of its points", first)
        edges.append(sorted(index[tuple(p)] for p in edge))
    return sorted(edges)


@reads("geom_graph.construct")
def geom_construct(root: Path, mode: str) -> Iterator[Record]:
    for dim in DIMS:
        folder = f"geom_graph/construct_{dim}d"
        path = released_file(root, f"{folder}/construct_{mode}.txt")
        json_path = released_file(root, f"{folder}/construct_{mode}_graph.json")
        if path is None or json_path is None:
            continue
        lines = Lines(path, root)
        graphs = _graph_json(json_path, lines)
        count = 0
        for data, _, first in _geom_records(lines, dim):
            where = f"entry {count} of {json_path.name}"
            if count >= len(graphs):
                raise lines.error(f"{json_path.name} has no entry {count} for this record", first)
            truth = _index_edges(graphs[count], data["points"], lines, where, first)
            construct = {key: data[key] for key in ("dim", "points", "threshold")}
            yield Record(construct, truth, lines.where(first), {"dim": dim})
            count += 1
        if count != len(graphs):
            raise lines.error(f"{json_path.name} has {len(graphs)} graphs for {count} records", 1)
