"""Released network instances.

* ``graph/bfs/bfs_<mode>.txt`` and ``graph/dfs/dfs_<mode>.txt``: per record ``Graph i: Source = s``,
  then the visit order ``[...]``. Record i's graph is ``Graph i`` of ``graph/graph_input_<mode>.txt``
  (not repeated in the operation's file): the header, one line of node labels separated by spaces,
  then one ``u, v`` line per edge (none for a graph without edges).
* ``dsu/compound/compound_<mode>.txt``: no header; the element list ``[...]``, one ``union(x, y)``
  line per operation, then the final ``[find(x) for x in elements]``; a blank line after each record.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodia.envs.dsr.released.base import (
    Lines,
    Parse,
    Record,
    is_int_list,
    literal,
    ops_then_state,
    reads,
    records,
    released_file,
    released_lines,
)

_GRAPH = re.compile(r"Graph (\d+)")
_EDGE = re.compile(r"(-?\d+),\s*(-?\d+)")
_SOURCE = re.compile(r"Graph (\d+): Source = (-?\d+)")
_UNION = re.compile(r"union\((-?\d+),\s*(-?\d+)\)")


def _graphs(lines: Lines) -> list[tuple[list[int], list[list[int]]]]:
    """Every graph of a ``graph_input`` file, in order: (node labels, edges)."""
    graphs: list[tuple[list[int], list[list[int]]]] = []
    for _ in records(lines, _GRAPH, "the header 'Graph {}'"):
        labels = lines.next("the node labels").split()
        if not labels or not all(re.fullmatch(r"-?\d+", label) for label in labels):
            raise lines.error("expected the node labels separated by spaces")
        nodes = [int(label) for label in labels]
        edges: list[list[int]] = []
        while (peek := lines.peek()) is not None and not peek.startswith("Graph"):
            line = lines.next("an edge")
            edge = _EDGE.fullmatch(line)
            if edge is None:
                raise lines.error(f"expected an edge 'u, v', found {line[:60]!r}")
            u, v = int(edge[1]), int(edge[2])
            if u not in nodes or v not in nodes:
                raise lines.error(f"the edge {u}, {v} names a node the graph does not have")
            edges.append([u, v])
        graphs.append((nodes, edges))
    return graphs


def _traversal_records(root: Path, mode: str, kind: str) -> Iterator[Record]:
    lines = released_lines(root, f"graph/{kind}/{kind}_{mode}.txt")
    if lines is None:
        return
    graph_path = released_file(root, f"graph/graph_input_{mode}.txt")
    if graph_path is None:
        raise lines.error(f"its graphs' file graph/graph_input_{mode}.txt is absent", 1)
    graphs = _graphs(Lines(graph_path, root))
    for match, first in records(lines, _SOURCE, "'Graph {}: Source = <node>'"):
        index = int(match[1])
        if index >= len(graphs):
            raise lines.error(f"graph/graph_input_{mode}.txt has no Graph {index}")
        nodes, edges = graphs[index]
        source = int(match[2])
        if source not in nodes:
            raise lines.error(f"the source {source} is not a node of Graph {index}")
        line = lines.next("the visit order")
        truth = literal(line, lines, "the visit order")
        if not (line.startswith("[") and is_int_list(truth)):
            raise lines.error("the visit order is not a list of integers")
        data = {"nodes": list(nodes), "edges": [list(edge) for edge in edges], "source": source}
        yield Record(data, truth, lines.where(first))


@reads("graph.bfs")
def bfs(root: Path, mode: str) -> Iterator[Record]:
    return _traversal_records(root, mode, "bfs")


@reads("graph.dfs")
def dfs(root: Path, mode: str) -> Iterator[Record]:
    return _traversal_records(root, mode, "dfs")


def _union_op(lines: Lines, elements: list[int]) -> Parse:
    """Reads ``union(x, y)`` lines over ``elements``; naming any other element is an error."""

    def parse(line: str) -> list[Any] | None:
        found = _UNION.fullmatch(line)
        if found is None:
            return None
        x, y = int(found[1]), int(found[2])
        if x not in elements or y not in elements:
            raise lines.error(f"union({x}, {y}) names an element not in the initial list")
        return ["union", x, y]

    return parse


@reads("dsu.compound")
def dsu_compound(root: Path, mode: str) -> Iterator[Record]:
    lines = released_lines(root, f"dsu/compound/compound_{mode}.txt")
    if lines is None:
        return
    while not lines.done():
        line = lines.next("the element list")
        first = lines.at
        elements = literal(line, lines, "the element list")
        if not (line.startswith("[") and is_int_list(elements) and elements):
            raise lines.error("the element list is not a non-empty list of integers")

        ops, text = ops_then_state(
            lines, _union_op(lines, elements), "union(x, y)", "the final list", need_ops=False
        )
        truth = literal(text, lines, "the final list")
        if not (is_int_list(truth) and len(truth) == len(elements)):
            raise lines.error(f"the final list is not a list of {len(elements)} integers")
        yield Record({"elements": elements, "ops": ops}, truth, lines.where(first))
