"""Realistic narratives: each story's truth follows its operation's reference on the story's events.

The events are read back from the story text itself: every sentence template is turned into a
regular expression, so a line's meaning (who joined, which road exists) is recovered from what
the model is shown, independently of the generator's bookkeeping.
"""

from __future__ import annotations

import json
import random
import re
from collections import deque
from typing import Any

import jsonschema
import networkx as nx
import pytest

from embodia.envs.dsr import realistic
from embodia.envs.dsr.core import OPERATIONS
from embodia.envs.dsr.structures.hierarchical import BST

SEEDS = range(40)
SIZES = (5, 12, 30)
_FIELD = re.compile(r"\{(\w+)\}")
_PROPER = r"[A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)?"  # "Emma Jones", "Ashford", "Blackpool Cove"
_GROUPS = {"time": r"\d\d:\d\d", "other": r"\d\d:\d\d"}


def _pattern(template: str) -> re.Pattern[str]:
    """``{name} joined`` -> ``(?P<name>Emma Jones) joined``, a repeated field as a back-reference."""
    out, seen, last = [], set(), 0
    for match in _FIELD.finditer(template):
        out.append(re.escape(template[last : match.start()]))
        field = match.group(1)
        out.append(f"(?P={field})" if field in seen else f"(?P<{field}>{_GROUPS.get(field, _PROPER)})")
        seen.add(field)
        last = match.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out) + "$")


def _classify(line: str, kinds: dict[str, tuple[str, ...]]) -> tuple[str, dict[str, str]]:
    found = [
        (kind, m.groupdict())
        for kind, templates in kinds.items()
        for t in templates
        if (m := _pattern(t).match(line))
    ]
    assert len({kind for kind, _ in found}) == 1, (line, found)
    return found[0]


def _body(question: str) -> tuple[list[str], str]:
    lines = question.split("\n")
    assert lines[-2] == "" and lines[-1].startswith("Q: ")
    return lines[:-2], lines[-1]


@pytest.mark.parametrize("key", list(realistic.NARRATIVES))
def test_contract(key: str) -> None:
    assert key in OPERATIONS
    assert set(realistic.NARRATIVES) == set(realistic.NARRATIVE_RULES) == set(realistic.NARRATIVE_SCHEMAS)
    assert realistic.NARRATIVE_RULES[key]
    generate = realistic.NARRATIVES[key]
    for seed in range(10):
        for size in SIZES:
            a = generate(random.Random(seed), size, {})
            assert a == generate(random.Random(seed), size, {})
            assert json.loads(json.dumps(a.truth)) == a.truth
            assert json.loads(json.dumps(a.data)) == a.data
            jsonschema.validate(a.truth, realistic.NARRATIVE_SCHEMAS[key])
            if a.steps:
                assert len(a.steps) == size and a.truth == a.steps[-1].state
                assert a.initial_state == []
    assert generate(random.Random(1), 10, {}) != generate(random.Random(2), 10, {})


def test_name_pools_disjoint() -> None:
    assert not set(realistic.FIRST_NAMES) & set(realistic.EXTRA_FIRST_NAMES)
    assert not set(realistic.SURNAMES) & set(realistic.EXTRA_SURNAMES)
    assert not set(realistic.TOWNS) & set(realistic.EXTRA_TOWNS)
    assert tuple(sorted(realistic.TOWNS)) == realistic.TOWNS and len(realistic.TOWNS) >= 30


# --- queue -------------------------------------------------------------------------------------

_QUEUE_KINDS = {
    "join": realistic._JOIN + realistic._JOIN_PREV + realistic._JOIN_EXTRA,
    "serve": realistic._SERVE + realistic._SERVE_EXTRA,
}


@pytest.mark.parametrize("size", SIZES)
def test_queue_story_events(size: int) -> None:
    for seed in SEEDS:
        problem = realistic.queue_story(random.Random(seed), size, {})
        lines, question = _body(problem.question)
        assert lines[0] in realistic._QUEUE_INTROS and "front to the back" in question
        line_queue: deque[str] = deque()
        mentioned: set[str] = set()
        for line in lines[1:]:
            kind, fields = _classify(line, _QUEUE_KINDS)
            if kind == "join":
                line_queue.append(fields["name"])
            else:
                line_queue.popleft()
            if "extra" in fields:
                mentioned.add(fields["extra"])
        assert list(line_queue) == problem.truth
        # The same from the generator's raw ops, through the reference Queue.
        ops = problem.data["ops"]
        assert len(ops) == len(lines) - 1 == size
        names = [op[1] for op in ops if op[0] == "enqueue"]
        model: deque[str] = deque()
        for op in ops:
            model.append(op[1]) if op[0] == "enqueue" else model.popleft()
        assert list(model) == problem.truth
        assert len(set(names)) == len(names)
        assert sorted(mentioned) == problem.data["distractors"]
        for extra in mentioned:
            assert extra in problem.question and extra not in problem.truth and extra not in names


def test_queue_story_has_distractors() -> None:
    stories = [realistic.queue_story(random.Random(s), 20, {}) for s in SEEDS]
    assert sum(bool(p.data["distractors"]) for p in stories) >= 35


# --- BST ---------------------------------------------------------------------------------------

_BST_KINDS = {
    "book": realistic._BOOK + realistic._BOOK_EXTRA,
    "cancel": realistic._CANCEL + realistic._CANCEL_EXTRA,
}


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


@pytest.mark.parametrize("size", SIZES)
def test_bst_story_events(size: int) -> None:
    for seed in SEEDS:
        problem = realistic.bst_story(random.Random(seed), size, {})
        lines, _ = _body(problem.question)
        assert lines[0] in realistic._BST_INTROS
        tree, booked, who = BST(), {}, {}
        extras: set[str] = set()
        other_times: set[str] = set()
        for line in lines[1:]:
            kind, fields = _classify(line, _BST_KINDS)
            if kind == "book":
                minutes = _minutes(fields["time"])
                tree.insert(minutes)
                booked[fields["name"]], who[minutes] = minutes, fields["name"]
            else:
                tree.remove(booked.pop(fields["name"]))
            extras |= {fields["extra"]} if "extra" in fields else set()
            other_times |= {fields["other"]} if "other" in fields else set()
        truth = [[who[m], f"{m // 60:02d}:{m % 60:02d}"] for m in tree.preorder()]
        assert truth == problem.truth
        times = [_minutes(t) for _, t in problem.truth]
        assert sorted(times) == BST(times).inorder()
        assert sorted(extras) == problem.data["distractors"]
        flat = json.dumps(problem.truth)
        for extra in extras:
            assert extra in problem.question and extra not in flat
        for clock in other_times:  # enquired-about times are never booked
            assert clock not in flat and all(op[-1] != clock for op in problem.data["ops"])


# --- graph -------------------------------------------------------------------------------------

_GRAPH_KINDS = {
    "road": realistic._ROAD,
    "fake": realistic._ROAD_EXTRA,
    "none": realistic._NO_ROAD,
}


@pytest.mark.parametrize("kind", ["dfs", "bfs"])
@pytest.mark.parametrize("size", SIZES)
def test_graph_story_events(kind: str, size: int) -> None:
    generate = realistic.NARRATIVES["graph.dfs"] if kind == "dfs" else realistic.graph_story("bfs")
    for seed in SEEDS:
        problem = generate(random.Random(seed), size, {})
        lines, question = _body(problem.question)
        source = problem.data["source"]
        assert lines[0] == realistic._GRAPH_INTROS[kind].format(source=source) and source in question
        towns = re.fullmatch(r"The county map shows the towns (.+) and (\w+)\.", lines[1])
        assert towns is not None
        on_map = towns.group(1).split(", ") + [towns.group(2)]
        assert sorted(on_map) == problem.data["nodes"] and len(on_map) == size
        graph = nx.Graph()
        graph.add_nodes_from(on_map)
        extras: set[str] = set()
        for line in lines[2:]:
            what, fields = _classify(line, _GRAPH_KINDS)
            if what == "road":
                graph.add_edge(fields["a"], fields["b"])
            elif what == "fake":
                assert fields["a"] in on_map and fields["extra"] not in on_map
                extras.add(fields["extra"])
            else:
                assert not graph.has_edge(fields["a"], fields["b"])
        if kind == "dfs":
            order = list(nx.dfs_preorder_nodes(graph, source, sort_neighbors=sorted))
        else:
            order = [source] + [v for _, v in nx.bfs_edges(graph, source, sort_neighbors=sorted)]
        assert order == problem.truth
        assert set(order) == nx.node_connected_component(graph, source)
        assert sorted(extras) == problem.data["distractors"]
        for extra in extras:
            assert extra in problem.question and extra not in problem.truth
        # No-road sentences never name a real edge (checked after all roads are known).
        for line in lines[2:]:
            what, fields = _classify(line, _GRAPH_KINDS)
            if what == "none":
                assert not graph.has_edge(fields["a"], fields["b"])


def test_graph_story_golden_alphabetical() -> None:
    # A hand-made instance of the mapping: node order is alphabetical order of town names.
    problem = realistic.NARRATIVES["graph.dfs"](random.Random(7), 6, {})
    edges = problem.data["edges"]
    graph: dict[str, list[str]] = {t: [] for t in problem.data["nodes"]}
    for a, b in edges:
        graph[a].append(b)
        graph[b].append(a)
    order: list[str] = []

    def visit(town: str) -> None:
        order.append(town)
        for nxt in sorted(graph[town]):
            if nxt not in order:
                visit(nxt)

    visit(problem.data["source"])
    assert order == problem.truth
    with pytest.raises(ValueError):
        realistic.graph_story("spiral")


def test_rules_mention_format() -> None:
    rules: dict[str, Any] = realistic.NARRATIVE_RULES
    assert "front to the back" in rules["queue.compound"]
    assert "[name, time]" in rules["bst.compound"] and "pre-order" in rules["bst.compound"]
    assert "alphabetically" in rules["graph.dfs"]
