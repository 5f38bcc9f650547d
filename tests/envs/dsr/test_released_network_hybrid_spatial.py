"""Released network, hybrid and spatial instance files, hand-written here in each public layout: the
records' data (as embodia's generators write it), truths, sources and variants; truths reproduced by
replay; the tie rules of kd_tree and kd_heap; malformed files named by file and line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from embodia.envs.dsr import released
from embodia.envs.dsr.core import canonical
from embodia.envs.dsr.released import ReleasedFormatError
from embodia.envs.dsr.released.base import Record
from embodia.envs.dsr.replay import replay_data

OPERATIONS = (
    "graph.bfs",
    "graph.dfs",
    "dsu.compound",
    "lru_cache.cache",
    "bloom_filter.compound",
    "dawg.compound",
    "kd_heap.compound",
    "kd_tree.construct",
    "geom_graph.bfs",
    "geom_graph.construct",
)


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.lstrip("\n"))
    return path


def _read(root: Path, operation: str, mode: str = "easy") -> list[Record]:
    return list(released.READERS[operation](root, mode))


def _replays(operation: str, records: list[Record]) -> None:
    for record in records:
        assert canonical(replay_data(operation, record.data)) == canonical(record.truth), record.source


def _fails(root: Path, operation: str, where: str, message: str = "") -> None:
    with pytest.raises(ReleasedFormatError, match=re.escape(where) + ".*" + message):
        _read(root, operation)


def test_every_operation_has_a_reader_and_reads_nothing_without_its_file(tmp_path: Path) -> None:
    for operation in OPERATIONS:
        assert _read(tmp_path, operation) == [], operation


# --- network ----------------------------------------------------------------------------------

GRAPHS = """
Graph 0
1 2 3 4
1, 2
1, 3
2, 4
Graph 1
8 6
"""


def test_graph_traversals_take_each_graph_from_the_input_file(tmp_path: Path) -> None:
    _write(tmp_path, "graph/graph_input_easy.txt", GRAPHS)
    # trailing spaces after the source, as the public files have them
    _write(
        tmp_path, "graph/bfs/bfs_easy.txt", "Graph 0: Source = 1 \n[1, 2, 3, 4]\nGraph 1: Source = 6 \n[6]\n"
    )
    _write(tmp_path, "graph/dfs/dfs_easy.txt", "Graph 0: Source = 1 \n[1, 2, 4, 3]\n")
    bfs, dfs = _read(tmp_path, "graph.bfs"), _read(tmp_path, "graph.dfs")
    assert [(r.data, r.truth, r.source, r.variant) for r in bfs] == [
        (
            {"nodes": [1, 2, 3, 4], "edges": [[1, 2], [1, 3], [2, 4]], "source": 1},
            [1, 2, 3, 4],
            "graph/bfs/bfs_easy.txt:1",
            {},
        ),
        ({"nodes": [8, 6], "edges": [], "source": 6}, [6], "graph/bfs/bfs_easy.txt:3", {}),
    ]
    assert [(r.data["source"], r.truth, r.source) for r in dfs] == [
        (1, [1, 2, 4, 3], "graph/dfs/dfs_easy.txt:1")
    ]
    _replays("graph.bfs", bfs)
    _replays("graph.dfs", dfs)
    assert _read(tmp_path, "graph.bfs", "medium") == []


def test_graph_files_not_in_the_layout(tmp_path: Path) -> None:
    _write(tmp_path, "graph/bfs/bfs_easy.txt", "Graph 0: Source = 1\n[1]\n")
    _fails(tmp_path, "graph.bfs", "graph/bfs/bfs_easy.txt:1", "graph_input_easy.txt is absent")
    _write(tmp_path, "graph/graph_input_easy.txt", GRAPHS)
    _write(
        tmp_path, "graph/bfs/bfs_easy.txt", "Graph 0: Source = 1\n[1, 2, 3, 4]\nGraph 2: Source = 6\n[6]\n"
    )
    _fails(tmp_path, "graph.bfs", "graph/bfs/bfs_easy.txt:3", "expected 'Graph 1: Source = <node>'")
    _write(tmp_path, "graph/bfs/bfs_easy.txt", "Graph 0: Source = 5\n[5]\n")
    _fails(tmp_path, "graph.bfs", "graph/bfs/bfs_easy.txt:1", "not a node of Graph 0")
    _write(tmp_path, "graph/bfs/bfs_easy.txt", "Graph 0: Source = 1\n1, 2, 3\n")
    _fails(tmp_path, "graph.bfs", "graph/bfs/bfs_easy.txt:2", "not a list of integers")
    _write(
        tmp_path,
        "graph/bfs/bfs_easy.txt",
        "Graph 0: Source = 1\n[1]\nGraph 1: Source = 6\n[6]\nGraph 2: Source = 6\n[6]\n",
    )
    _fails(tmp_path, "graph.bfs", "graph/bfs/bfs_easy.txt:5", "has no Graph 2")
    _write(tmp_path, "graph/graph_input_easy.txt", "Graph 0\n1 2\n1, 3\n")
    _fails(tmp_path, "graph.bfs", "graph/graph_input_easy.txt:3", "names a node the graph does not have")
    _write(tmp_path, "graph/graph_input_easy.txt", "Graph 0\n1, 2\n")
    _fails(tmp_path, "graph.bfs", "graph/graph_input_easy.txt:2", "node labels")
    _write(tmp_path, "graph/graph_input_easy.txt", "Graph 0\n1 2\n1 - 2\n")
    _fails(tmp_path, "graph.bfs", "graph/graph_input_easy.txt:3", "expected an edge")


DSU = """
[4, 7, 1, 9]
union(4, 7)
union(1, 9)
union(9, 7)
[1, 1, 1, 1]

[3, 5]
union(5, 5)
[3, 5]

"""


def test_dsu_records_end_with_their_final_list(tmp_path: Path) -> None:
    _write(tmp_path, "dsu/compound/compound_easy.txt", DSU)
    records = _read(tmp_path, "dsu.compound")
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"elements": [4, 7, 1, 9], "ops": [["union", 4, 7], ["union", 1, 9], ["union", 9, 7]]},
            [1, 1, 1, 1],
            "dsu/compound/compound_easy.txt:1",
        ),
        ({"elements": [3, 5], "ops": [["union", 5, 5]]}, [3, 5], "dsu/compound/compound_easy.txt:7"),
    ]
    _replays("dsu.compound", records)


def test_dsu_files_not_in_the_layout(tmp_path: Path) -> None:
    path = "dsu/compound/compound_easy.txt"
    _write(tmp_path, path, "[1, 2]\nunion(1 2)\n[1, 1]\n")
    _fails(tmp_path, "dsu.compound", f"{path}:2", "expected union")
    _write(tmp_path, path, "[1, 2]\nunion(1, 3)\n[1, 1]\n")
    _fails(tmp_path, "dsu.compound", f"{path}:2", "not in the initial list")
    _write(tmp_path, path, "[1, 2]\nunion(1, 2)\n[1]\n")
    _fails(tmp_path, "dsu.compound", f"{path}:3", "not a list of 2 integers")
    _write(tmp_path, path, "[1, 2]\nunion(1, 2)\n")
    _fails(tmp_path, "dsu.compound", f"{path}:2", "the file ends")
    _write(tmp_path, path, "union(1, 2)\n[1, 1]\n")
    _fails(tmp_path, "dsu.compound", f"{path}:1", "not a Python literal")
    _write(tmp_path, path, "1, 2\nunion(1, 2)\n[1, 1]\n")
    _fails(tmp_path, "dsu.compound", f"{path}:1", "not a non-empty list of integers")


# --- hybrid -----------------------------------------------------------------------------------


def test_lru_cache_records(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "lru_cache/cache/lru_easy.txt",
        # trailing spaces after the cache size, as the public files have them
        "LRU Cache Simulation 0, Cache Size: 2 \naccess 4\naccess 3\naccess 4\naccess 1\n"
        "Final Cache: [4, 1]\n"
        "LRU Cache Simulation 1, Cache Size: 3 \naccess 0\nFinal Cache: [0]\n",
    )
    records = _read(tmp_path, "lru_cache.cache")
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"capacity": 2, "ops": [["access", 4], ["access", 3], ["access", 4], ["access", 1]]},
            [4, 1],
            "lru_cache/cache/lru_easy.txt:1",
        ),
        ({"capacity": 3, "ops": [["access", 0]]}, [0], "lru_cache/cache/lru_easy.txt:7"),
    ]
    _replays("lru_cache.cache", records)


def test_bloom_filter_records(tmp_path: Path) -> None:
    # h("7") = 55 -> indices 15, 16, 17; h("10") = 49 * 131 + 48 = 6467 -> 7, 8, 9 (m = 20, k = 3)
    counts = [0] * 20
    for index in (7, 8, 9, 15, 16, 17):
        counts[index] = 1
    _write(
        tmp_path,
        "bloom_filter/compound/compound_easy.txt",
        f"CountingBloomFilter 0 (m: 20, k: 3)\ninsert 7\ninsert 7\ndelete 7\ninsert 10\n{counts}\n",
    )
    records = _read(tmp_path, "bloom_filter.compound")
    ops = [["insert", 7], ["insert", 7], ["delete", 7], ["insert", 10]]
    assert [(r.data, r.truth, r.source) for r in records] == [
        ({"m": 20, "k": 3, "ops": ops}, counts, "bloom_filter/compound/compound_easy.txt:1")
    ]
    _replays("bloom_filter.compound", records)


def test_dawg_records(tmp_path: Path) -> None:
    # "ab" and "cb" share their suffix node: the minimized DAWG exports "c" under the prefix "a"
    _write(
        tmp_path,
        "dawg/compound/compound_easy.txt",
        """
DAWG 0
insert ab
insert cb
delete zz
[['', 'F'], ['a', 'F'], ['ab', 'T']]
DAWG 1
insert abc
delete abc
[['', 'F']]
""",
    )
    records = _read(tmp_path, "dawg.compound")
    assert [(r.data, r.truth, r.source) for r in records] == [
        (
            {"ops": [["insert", "ab"], ["insert", "cb"], ["delete", "zz"]]},
            [["", "F"], ["a", "F"], ["ab", "T"]],
            "dawg/compound/compound_easy.txt:1",
        ),
        ({"ops": [["insert", "abc"], ["delete", "abc"]]}, [["", "F"]], "dawg/compound/compound_easy.txt:6"),
    ]
    _replays("dawg.compound", records)


def test_hybrid_files_not_in_the_layout(tmp_path: Path) -> None:
    lru = "lru_cache/cache/lru_easy.txt"
    _write(tmp_path, lru, "LRU Cache Simulation 1, Cache Size: 2\naccess 1\nFinal Cache: [1]\n")
    _fails(tmp_path, "lru_cache.cache", f"{lru}:1", "expected the header 'LRU Cache Simulation 0")
    _write(tmp_path, lru, "LRU Cache Simulation 0, Cache Size: 2\nget 1\nFinal Cache: [1]\n")
    _fails(tmp_path, "lru_cache.cache", f"{lru}:2", "expected 'access <page>' or the final cache")
    _write(tmp_path, lru, "LRU Cache Simulation 0, Cache Size: 0\naccess 1\nFinal Cache: [1]\n")
    _fails(tmp_path, "lru_cache.cache", f"{lru}:1", "not at least 1")
    bloom = "bloom_filter/compound/compound_easy.txt"
    _write(tmp_path, bloom, "CountingBloomFilter 0 (m: 4, k: 1)\ninsert 1\n[0, 1, 0]\n")
    _fails(tmp_path, "bloom_filter.compound", f"{bloom}:3", "not a list of m = 4 integers")
    _write(tmp_path, bloom, "CountingBloomFilter 0 (m: 4)\ninsert 1\n[0, 1, 0, 0]\n")
    _fails(tmp_path, "bloom_filter.compound", f"{bloom}:1", "expected the header")
    dawg = "dawg/compound/compound_easy.txt"
    _write(tmp_path, dawg, "DAWG 0\ninsert Ab\n[['', 'F']]\n")
    _fails(
        tmp_path, "dawg.compound", f"{dawg}:2", "expected 'insert <word>', 'delete <word>' or the DAWG export"
    )
    _write(tmp_path, dawg, "DAWG 0\ninsert ab\n[['', 'F'], ['a', 'X']]\n")
    _fails(tmp_path, "dawg.compound", f"{dawg}:3", "not a list of \\[prefix")
    _write(tmp_path, dawg, "DAWG 0\ninsert ab\n")
    _fails(tmp_path, "dawg.compound", f"{dawg}:2", "the file ends")


# --- spatial: K-D heap ------------------------------------------------------------------------

HEAP_1D = """
Heap 0, Dimension: 1
insert (3, [1])
insert (8, [5])
insert (7, [5])
insert (6, [9])
delete
[8, 6, 7]
"""

# Equal norms (25) never swap, and labels repeat (two 9s): comparing the points as well would put
# [3, 4] above [4, 3] and answer differently.
HEAP_2D = """
Heap 0, Dimension: 2
insert (9, [4, 3])
insert (1, [3, 4])
insert (9, [0, 5])
insert (4, [1, 1])
delete
[1, 9, 9]
Heap 1, Dimension: 2
insert (2, [4, 3])
insert (2, [3, 4])
[2, 2]
"""


def test_kd_heap_reads_each_dimension_folder_in_turn(tmp_path: Path) -> None:
    _write(tmp_path, "kd_heap/compound_2d/compound_easy.txt", HEAP_2D)
    _write(tmp_path, "kd_heap/compound_1d/compound_easy.txt", HEAP_1D)
    records = _read(tmp_path, "kd_heap.compound")
    assert [(r.source, r.variant, r.truth) for r in records] == [
        ("kd_heap/compound_1d/compound_easy.txt:1", {"dim": 1}, [8, 6, 7]),
        ("kd_heap/compound_2d/compound_easy.txt:1", {"dim": 2}, [1, 9, 9]),
        ("kd_heap/compound_2d/compound_easy.txt:8", {"dim": 2}, [2, 2]),
    ]
    # the file's (label, priority) becomes embodia's [name, point, label]
    assert records[1].data == {
        "dim": 2,
        "ops": [
            ["insert", [4, 3], 9],
            ["insert", [3, 4], 1],
            ["insert", [0, 5], 9],
            ["insert", [1, 1], 4],
            ["delete"],
        ],
    }
    assert records[0].data["ops"][0] == ["insert", [1], 3]
    # a delete moving down between two equally small children takes the left one (8, not the smaller label 7)
    _replays("kd_heap.compound", records)


def test_kd_heap_files_not_in_the_layout(tmp_path: Path) -> None:
    path = "kd_heap/compound_2d/compound_easy.txt"
    _write(tmp_path, path, "Heap 0, Dimension: 3\ninsert (1, [1, 2])\n[1]\n")
    _fails(tmp_path, "kd_heap.compound", f"{path}:1", "dimension 3 in the folder of dimension 2")
    _write(tmp_path, path, "Heap 0, Dimension: 2\ninsert (1, [1])\n[1]\n")
    _fails(tmp_path, "kd_heap.compound", f"{path}:2", "not a point of 2 integers")
    _write(tmp_path, path, "Heap 0, Dimension: 2\ninsert (1, [1, 2])\ndelete\ndelete\n[]\n")
    _fails(tmp_path, "kd_heap.compound", f"{path}:4", "a delete on an empty heap")
    _write(tmp_path, path, "Heap 0, Dimension: 2\ninsert ([1, 2], 1)\n[1]\n")
    _fails(tmp_path, "kd_heap.compound", f"{path}:2", "expected 'insert \\(label, \\[priority\\]\\)'")
    _write(tmp_path, path, "Heap 0, Dimension: 2\ninsert (1, [1, 2])\n[1]\nHeap 0, Dimension: 2\n")
    _fails(tmp_path, "kd_heap.compound", f"{path}:4", "expected the header 'Heap 1, Dimension: 2'")


# --- spatial: K-D tree ------------------------------------------------------------------------


def _tree_file(*trees: tuple[list[Any], list[Any]]) -> str:
    return "".join(
        f"Tree {i}\nPoints: {points}\nTraversal: {order}\n" for i, (points, order) in enumerate(trees)
    )


def test_kd_tree_ties_keep_the_given_then_the_parents_order(tmp_path: Path) -> None:
    # Depth 0: [5, 9], [5, 1], [5, 5] tie on x and keep their given order, so the median is [5, 1]
    # (sorting whole points would pick [5, 5]).
    at_root = [[5, 9], [5, 1], [3, 4], [5, 5]]
    at_root_order = [[5, 1], [5, 9], [3, 4], [5, 5]]
    # Depth 2: [1, 20] and [1, 10] tie on x in the left subtree's y-sorted order ([1, 10] first, the
    # reverse of the given order), so [1, 20] is the node and [1, 10] its left child.
    subtree = [[1, 20], [1, 10], [2, 30], [0, 40], [0, 50], [5, 0], [7, 1], [8, 2], [9, 3], [6, 4], [7, 5]]
    subtree_order = [
        [5, 0],
        [2, 30],
        [1, 20],
        [1, 10],
        [0, 50],
        [0, 40],
        [9, 3],
        [8, 2],
        [7, 1],
        [7, 5],
        [6, 4],
    ]
    _write(
        tmp_path,
        "kd_tree/construct_2d/construct_easy.txt",
        _tree_file((at_root, at_root_order), (subtree, subtree_order)),
    )
    # duplicates in 1-D: the first 4 (in sorted order) is the node
    _write(
        tmp_path,
        "kd_tree/construct_1d/construct_easy.txt",
        _tree_file(([[4], [2], [4], [1]], [[4], [2], [1], [4]])),
    )
    # non-uniform shapes may leave 0-99: negative coordinates
    blob = ([[-6, 3], [2, -1], [0, 0]], [[0, 0], [-6, 3], [2, -1]])
    _write(tmp_path, "kd_tree/construct_blob/construct_easy.txt", _tree_file(blob))
    _write(tmp_path, "kd_tree/construct_moon/construct_easy.txt", _tree_file(([[1, 2]], [[1, 2]])))
    records = _read(tmp_path, "kd_tree.construct")
    assert [(r.source, r.variant) for r in records] == [
        ("kd_tree/construct_1d/construct_easy.txt:1", {"dim": 1}),
        ("kd_tree/construct_2d/construct_easy.txt:1", {"dim": 2}),
        ("kd_tree/construct_2d/construct_easy.txt:4", {"dim": 2}),
        ("kd_tree/construct_moon/construct_easy.txt:1", {"dim": 2, "distribution": "moons"}),
        ("kd_tree/construct_blob/construct_easy.txt:1", {"dim": 2, "distribution": "blobs"}),
    ]
    assert records[1].data == {"dim": 2, "distribution": "uniform", "points": at_root}
    assert records[1].truth == at_root_order and records[2].truth == subtree_order
    assert records[4].data == {"dim": 2, "distribution": "blobs", "points": blob[0]}
    assert records[0].data == {"dim": 1, "distribution": "uniform", "points": [[4], [2], [4], [1]]}
    _replays("kd_tree.construct", records)


def test_kd_tree_files_not_in_the_layout(tmp_path: Path) -> None:
    path = "kd_tree/construct_3d/construct_easy.txt"
    _write(tmp_path, path, "Tree 0\nPoints: [[1, 2, 3]]\n")
    _fails(tmp_path, "kd_tree.construct", f"{path}:2", "the file ends where the pre-order traversal")
    _write(tmp_path, path, "Tree 0\nPoints: [[1, 2]]\nTraversal: [[1, 2]]\n")
    _fails(tmp_path, "kd_tree.construct", f"{path}:2", "points of 3 integers")
    _write(tmp_path, path, "Tree 0\nPoints: [[1, 2, 3]]\nPreorder: [[1, 2, 3]]\n")
    _fails(tmp_path, "kd_tree.construct", f"{path}:3", "starting 'Traversal:'")
    _write(tmp_path, path, "Tree 0\nPoints: [[1, 2, 3]]\nTraversal: [[1.5, 2, 3]]\n")
    _fails(tmp_path, "kd_tree.construct", f"{path}:3", "the traversal is not a list of points")


# --- spatial: geometric graph -----------------------------------------------------------------

A, B, C, D = [0.5, 0.5], [3.5, 4.25], [10.25, 0.5], [0.5, 3.5]
# |AB| = 4.80, |AD| = 3, |BD| = 3.09 < 5; C is more than 5 from every other point
GEOM = f"""
Graph 0
Nodes: {[A, B, C, D]}
Threshold: 5
From: {A}
BFS: {[A, D, B]}
Graph 1
Nodes: [[1.0, 1.0], [2.0, 2.0]]
Threshold: 40
From: [2.0, 2.0]
BFS: [[2.0, 2.0], [1.0, 1.0]]
"""
GEOM_JSON = [
    {"nodes": [A, B, C, D], "edges": [[D, B], [A, B], [A, D]]},
    {"nodes": [[1.0, 1.0], [2.0, 2.0]], "edges": [[[1.0, 1.0], [2.0, 2.0]]]},
]


def test_geom_graph_bfs_and_construct_read_float_points(tmp_path: Path) -> None:
    _write(tmp_path, "geom_graph/construct_2d/construct_easy.txt", GEOM)
    # without its _graph.json a folder has BFS records only
    _write(
        tmp_path,
        "geom_graph/construct_1d/construct_easy.txt",
        "Graph 0\nNodes: [[3.5]]\nThreshold: 30\nFrom: [3.5]\nBFS: [[3.5]]\n",
    )
    bfs = _read(tmp_path, "geom_graph.bfs")
    assert _read(tmp_path, "geom_graph.construct") == []
    _write(tmp_path, "geom_graph/construct_2d/construct_easy_graph.json", json.dumps(GEOM_JSON))
    construct = _read(tmp_path, "geom_graph.construct")
    assert [(r.data, r.truth, r.source, r.variant) for r in bfs] == [
        (
            {"dim": 1, "points": [[3.5]], "threshold": 30, "source": 0},
            [[3.5]],
            "geom_graph/construct_1d/construct_easy.txt:1",
            {"dim": 1},
        ),
        (
            {"dim": 2, "points": [A, B, C, D], "threshold": 5, "source": 0},
            [A, D, B],
            "geom_graph/construct_2d/construct_easy.txt:1",
            {"dim": 2},
        ),
        (
            {"dim": 2, "points": [[1.0, 1.0], [2.0, 2.0]], "threshold": 40, "source": 1},
            [[2.0, 2.0], [1.0, 1.0]],
            "geom_graph/construct_2d/construct_easy.txt:6",
            {"dim": 2},
        ),
    ]
    assert [(r.data, r.truth, r.source, r.variant) for r in construct] == [
        (
            {"dim": 2, "points": [A, B, C, D], "threshold": 5},
            [[0, 1], [0, 3], [1, 3]],
            "geom_graph/construct_2d/construct_easy.txt:1",
            {"dim": 2},
        ),
        (
            {"dim": 2, "points": [[1.0, 1.0], [2.0, 2.0]], "threshold": 40},
            [[0, 1]],
            "geom_graph/construct_2d/construct_easy.txt:6",
            {"dim": 2},
        ),
    ]
    _replays("geom_graph.bfs", bfs)
    _replays("geom_graph.construct", construct)


def test_geom_graph_files_not_in_the_layout(tmp_path: Path) -> None:
    path = "geom_graph/construct_2d/construct_easy.txt"
    json_path = "geom_graph/construct_2d/construct_easy_graph.json"
    _write(tmp_path, path, GEOM.replace(f"From: {A}", "From: [9.0, 9.0]"))
    _fails(tmp_path, "geom_graph.bfs", f"{path}:4", "the start point is not one of the points")
    _write(tmp_path, path, GEOM.replace("Threshold: 5", "Threshold: five"))
    _fails(tmp_path, "geom_graph.bfs", f"{path}:3", "not a Python literal")
    _write(tmp_path, path, GEOM.replace("Nodes: [[1.0, 1.0]", "Nodes: [[1.0]"))
    _fails(tmp_path, "geom_graph.bfs", f"{path}:7", "points of 2 numbers")
    _write(tmp_path, path, GEOM)
    _write(tmp_path, json_path, json.dumps(GEOM_JSON[:1]))
    _fails(tmp_path, "geom_graph.construct", f"{path}:6", "has no entry 1")
    _write(tmp_path, json_path, json.dumps([*GEOM_JSON, GEOM_JSON[1]]))
    _fails(tmp_path, "geom_graph.construct", f"{path}:1", "has 3 graphs for 2 records")
    _write(tmp_path, json_path, json.dumps([GEOM_JSON[1], GEOM_JSON[0]]))
    _fails(
        tmp_path,
        "geom_graph.construct",
        f"{path}:1",
        "entry 0 of construct_easy_graph.json lists other nodes",
    )
    _write(tmp_path, json_path, json.dumps([{**GEOM_JSON[0], "edges": [[A, [7.0, 7.0]]]}, GEOM_JSON[1]]))
    _fails(tmp_path, "geom_graph.construct", f"{path}:1", "not a pair of its points")
    _write(tmp_path, json_path, "[{")
    _fails(tmp_path, "geom_graph.construct", f"{path}:1", "is not JSON")
