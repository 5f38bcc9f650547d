"""The depth-first explorer: graph shape, tree bookkeeping, instructions, VLM path, crash-safe resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import get_args, get_type_hints

import gymnasium
import networkx as nx
import numpy as np
import pytest
from scenes import box_room

from embodia.agents import explorer_schema as schema
from embodia.agents.explorer import (
    ROOT,
    ExplorerConfig,
    ExplorerContext,
    _floor_beside,
    _floor_weight,
    _seek_target,
    _target_cells,
    backtrack_order,
    build_decision_graph,
    build_explorer_graph,
    in_sight,
    map_update,
    navigate,
    observe,
    propose,
    regions,
    select,
    tree_of,
    update_tree,
)
from embodia.agents.instructions import (
    foreign_signs,
    instruction_categories,
    instruction_rooms,
    open_plan_signs,
    other_room,
    room_of,
)
from embodia.core.tool_calls import parse_tool_calls
from embodia.envs.mapping.measures import RegionCoverage
from embodia.evals.explore import ExploreSettings, run_exploration
from embodia.perception.bev import BEVMap
from embodia.perception.waypoints import world_to_pixel
from embodia.sim import CATEGORIES, Pose

SCENE = "procedural:seed=3,rooms=3"
MEASURES = ("coverage_m2", "coverage_ratio", "coverage_auc", "path_length", "collisions", "steps")


def _settings(**overrides: object) -> ExploreSettings:
    base = dict(agent="dfs", scene=SCENE, steps=150, panorama_height=48, panorama_width=96, video=False)
    base.update(overrides)
    return ExploreSettings(**base)  # type: ignore[arg-type]


def _decisions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


CHOICES = {
    "heuristic": schema.HeuristicChoice,
    "vlm": schema.VLMChoice,
    "backtrack": schema.PointChoice,
    "frontier": schema.PointChoice,
    "instruction": schema.PointChoice,
    "done": schema.StopChoice,
}
PROGRESS = {
    "observe": schema.ObserveProgress,
    "token": schema.TokenProgress,
    "select": schema.SelectProgress,
    "navigate": schema.NavigateProgress,
}


def _declares(typed: type, keys: set[str]) -> bool:
    """Whether a dict with ``keys`` is what the TypedDict ``typed`` describes."""
    required: frozenset[str] = typed.__required_keys__  # type: ignore[attr-defined]
    optional: frozenset[str] = typed.__optional_keys__  # type: ignore[attr-defined]
    return required <= keys <= required | optional


def _check_schema(records: list[dict], events: list[dict] = ()) -> None:  # type: ignore[assignment]
    """Every record's choice and attempts, and every progress event, are as the schema says."""
    for record in records:
        choice = CHOICES[record["choice"]["by"]]
        assert (record["choice"]["kind"],) == get_args(get_type_hints(choice)["kind"])
        # a VLM choice's attempts are written beside it, not in it
        assert _declares(
            choice, set(record["choice"]) | ({"attempts"} if choice is schema.VLMChoice else set())
        )
        assert all(_declares(schema.AttemptRecord, set(a)) for a in record["attempts"])
    for event in events:
        assert _declares(PROGRESS[event["event"]], set(event)), event


def test_graph_has_the_decision_chain() -> None:
    inner = build_decision_graph().compile().get_graph()
    edges = {(e.source, e.target) for e in inner.edges}
    chain = [
        "__start__",
        "observe",
        "map",
        "regions",
        "propose",
        "select",
        "navigate",
        "update_tree",
        "__end__",
    ]
    assert set(zip(chain, chain[1:], strict=False)) <= edges
    outer = build_explorer_graph().compile().get_graph()
    assert {(e.source, e.target) for e in outer.edges} >= {("decision", "decision"), ("decision", "__end__")}


def test_run_writes_tree_and_decisions(tmp_path: Path) -> None:
    summary = run_exploration(_settings(), tmp_path)
    for name in ("tree.json", "tree.png", "bev.png", "coverage.png", "episodes.jsonl", "summary.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    tree = nx.node_link_graph(json.loads((tmp_path / "tree.json").read_text()), directed=True, edges="edges")
    assert nx.is_tree(tree)
    waypoints = [n for n, d in tree.nodes(data=True) if d.get("kind") == "waypoint"]
    assert len(waypoints) == summary["decisions"] == len(_decisions(tmp_path))
    for node in waypoints:  # every visited waypoint hangs under a region (or the root)
        (parent,) = tree.predecessors(node)
        assert tree.nodes[parent]["kind"] in ("region", "root")
    assert summary["coverage_ratio"] > 0.6
    records = _decisions(tmp_path)
    assert all(r["choice"]["by"] in ("heuristic", "backtrack", "frontier") for r in records)
    _check_schema(records)
    assert records[-1]["steps"] == summary["steps"]


def test_the_checkpoint_logs_each_action_once(tmp_path: Path) -> None:
    # The event log has a reducer: each decision appends its own events, exactly once.
    from embodia.agents.runtime import run_config, sqlite_checkpointer
    from embodia.core.runs import read_config

    out = tmp_path / "run"
    run_exploration(_settings(steps=60), out)
    with sqlite_checkpointer(out / "checkpoint.sqlite") as saver:
        graph = build_explorer_graph().compile(checkpointer=saver)
        config = run_config(read_config(out)["run_id"])
        events = graph.get_state(config).values["events"]  # type: ignore[arg-type]
    actions = [e for e in events if e["kind"] != "update"]
    records = _decisions(out)
    assert len(actions) == len(records)
    for action, record in zip(actions, records, strict=True):
        if action["kind"] == "pixel":
            assert [action["row"], action["col"]] == [record["choice"]["row"], record["choice"]["col"]]
        else:
            assert action["point"] == pytest.approx(record["choice"]["point"])
    assert sum(e["kind"] == "update" for e in events) >= len(records)  # one per decision observed


def test_instruction_names_the_categories_to_seek() -> None:
    assert instruction_categories("explore the bedroom first", CATEGORIES) == {"bed"}
    assert instruction_categories("find the kitchen and map it", CATEGORIES) == {"counter", "refrigerator"}
    assert instruction_categories("go back to the room with the sofa", CATEGORIES) == {"sofa"}
    assert instruction_categories("map everything", CATEGORIES) == frozenset()


def test_rooms_are_told_by_what_they_hold() -> None:
    assert instruction_rooms("explore the lounge first") == {"living room"}
    assert instruction_rooms("map the study and the kitchen") == {"office", "kitchen"}
    assert instruction_rooms("go to the sofa") == frozenset()
    assert room_of(["desk", "bed", "chair"]) == "bedroom"  # a bed says more than a desk
    assert room_of(["sofa", "desk"]) == "office" and room_of(["table", "chair", "sink"]) is None
    office = frozenset({"office"})
    assert other_room(["bed", "desk"], office)  # a desk in a bedroom is not the office's
    assert not other_room(["desk", "chair"], office) and not other_room(["table"], office)
    # a living room does not rule out the kitchen: the two often share one open space
    assert not other_room(["sofa", "tv"], frozenset({"kitchen"}))
    assert other_room(["toilet"], frozenset({"kitchen"})) and not other_room(["toilet"], frozenset())
    # what to walk to while nothing of the room asked for is in view
    assert open_plan_signs(frozenset({"kitchen"})) == {"tv", "sofa"}
    assert open_plan_signs(frozenset({"living room"})) == {"counter", "refrigerator"}
    assert open_plan_signs(frozenset({"bedroom"})) == frozenset()
    # rooms a told explorer skips: where an object stands that no room asked for (nor one
    # open to it) holds; a desk may be a bedroom's, a TV too, a sofa a living room's
    assert foreign_signs(frozenset({"kitchen"})) == {"bed", "toilet", "bathtub", "desk"}
    assert foreign_signs(frozenset({"bedroom"})) == {"toilet", "bathtub", "counter", "refrigerator"}
    assert foreign_signs(frozenset({"office"})) == {
        "bed",
        "toilet",
        "bathtub",
        "tv",
        "counter",
        "refrigerator",
    }
    assert foreign_signs(frozenset({"bathroom"})) == {"bed", "desk", "tv", "sofa", "counter", "refrigerator"}
    assert foreign_signs(frozenset()) == frozenset()


def test_sight_lines_through_doorways_not_walls() -> None:
    walls = np.zeros((20, 20), dtype=bool)
    walls[:, 10] = True
    walls[8:12, 10] = False  # a doorway
    assert in_sight(walls, (9.0, 2.0), (10.0, 17.0))  # through the doorway
    assert not in_sight(walls, (2.0, 2.0), (2.0, 17.0))  # through the wall
    assert in_sight(walls, (2.0, 2.0), (2.0, 30.0)) is False and in_sight(walls, (2.0, 2.0), (5.0, 8.0))


def _room_steps(scene: str, room_kind: str, instruction: str, steps: int) -> tuple[int | None, list[str]]:
    """Steps until the house's one ``room_kind`` room is 90% observed (None: not within
    ``steps``), with the heuristic explorer told ``instruction``, and how it chose."""
    env = gymnasium.make(
        "embodia/ActiveMappingWaypoint-v0",
        max_steps=steps,
        action_type="pixel",
        panorama_height=128,
        panorama_width=256,
    )
    env.reset(seed=0, options={"scene": scene})
    mapping = env.unwrapped
    (room,) = [r for r in mapping.simulator.scene.regions if r.kind == room_kind]
    watch = RegionCoverage(room)
    mapping.coverage.track(watch, mapping.bevs)
    context = ExplorerContext(env=mapping, policy=None, instruction=instruction, recorder=None)
    runtime = SimpleNamespace(context=context)
    state: dict = {"decision": 0, "events": []}
    chosen = []
    while not state.get("done") and watch.get_metric() < 0.9:
        for node in (observe, map_update, regions, propose, select, navigate, update_tree):
            update = node(state, runtime)  # type: ignore[arg-type]
            state["events"] += update.pop("events", [])
            state.update(update)
        chosen.append(state["choice"]["by"])
    env.close()
    return watch.steps_until(0.9), chosen


def test_told_to_explore_a_room_first_the_explorer_walks_to_what_it_saw_of_it() -> None:
    # House 1005's kitchen is glimpsed early; untold, the depth-first order gets there late.
    scene = "procedural:seed=1005,floors=1"
    told, chosen = _room_steps(scene, "kitchen", "explore the kitchen first", 150)
    untold, _ = _room_steps(scene, "kitchen", "", 150)
    assert told is not None and told <= 60 and "instruction" in chosen
    assert untold is None  # not within 150 steps


def test_backtrack_order_is_deepest_first_with_ties_in_tree_order() -> None:
    # root -> r0 -> r1 -> r2 (current, closed); eight open siblings hang under the root, and
    # one more under r0. Ties must keep insertion order in every process whatever the hash.
    tree = nx.DiGraph()
    tree.add_node(ROOT, kind="root")

    def region(name: str, parent: str, status: str = "open", categories: tuple[str, ...] = ()) -> None:
        tree.add_node(name, kind="region", status=status, categories=list(categories))
        tree.add_edge(parent, name)

    region("region-0", ROOT)
    region("region-1", "region-0", status="closed")
    region("region-2", "region-1", status="closed")
    siblings = [f"region-{i}" for i in (17, 3, 11, 5, 13, 7, 9, 15)]
    for name in siblings:
        region(name, ROOT, categories=("bed",) if name == "region-13" else ())
    region("region-20", "region-0")
    order = backtrack_order(tree, "region-2", frozenset())
    assert order == ["region-0", "region-20", *siblings]
    steered = backtrack_order(tree, "region-2", frozenset({"bed"}))
    assert steered == ["region-13", "region-0", "region-20", *[s for s in siblings if s != "region-13"]]


def test_vlm_policy_is_asked_and_bad_replies_are_re_asked(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    lines = ["I am not sure.", '{"choice": 1}', "Answer: 0", '```json\n{"choice": 2}\n```']
    replies.write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    out = tmp_path / "run"
    # tool_choice auto: a reply may answer in text, which is read for a waypoint's number
    run_exploration(_settings(steps=40, policy=f"scripted:{replies}?loop=true", tool_choice="auto"), out)
    records = [r for r in _decisions(out) if r["choice"]["by"] == "vlm"]
    assert records, "the scripted VLM was never asked"
    first = records[0]
    assert [a["failure"] is None for a in first["attempts"]] == [False, True]  # re-asked once
    assert "Instruction:" in first["choice"]["prompt"]


def _call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_vlm_acts_through_native_tool_calls_and_its_replies_stream(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    lines = [
        _call("describe_map", {}),  # information: answered, and asked again for free
        _call("recall", {"category": "bed"}) + _call("look", {"direction_deg": 90}),  # two questions
        _call("goto_waypoint", {"index": "two"}),  # against the schema: answered with the error
        "Sure. " + _call("goto_waypoint", {"index": 0}),
        "I do not know.",  # required: a reply without a call is an unreadable call
    ]
    replies.write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    out = tmp_path / "run"
    events: list[dict] = []
    summary = run_exploration(
        _settings(steps=40, policy=f"scripted:{replies}?loop=true"), out, on_event=events.append
    )
    records = [r for r in _decisions(out) if r["choice"]["by"] == "vlm"]
    assert records, "the scripted VLM was never asked"
    first = records[0]
    described, looked, invalid, valid = first["attempts"]
    assert [a["reply"] for a in first["attempts"]] == ["", "", "", "Sure."]  # the calls are apart
    (describe,) = described["calls"]
    assert describe["name"] == "describe_map" and "coverage_percent" in describe["result"]
    assert described["failure"] is None and "coverage_percent" in described["tool_result"]
    recall, look = looked["calls"]
    assert recall["arguments"] == {"category": "bed"} and "regions" in recall["result"]
    assert look["result"].startswith("the next image is the view 90 degrees clockwise")
    assert "index" in invalid["failure"] and "index" in invalid["calls"][0]["error"]
    assert valid["failure"] is None and valid["calls"][0]["result"] == {"walking_to": 0}
    assert [c["id"] for a in first["attempts"] for c in a["calls"]] == [
        "call_0_0",
        "call_1_0",
        "call_1_1",
        "call_2_0",
        "call_3_0",
    ]
    assert not first["choice"]["fallback"] and first["choice"]["index"] == 0
    assert (first["choice"]["tool_calls"], first["choice"]["tool_errors"]) == (5, 1)
    _check_schema(_decisions(out), events)
    # The tokens of each reply reach the caller as they stream, and add up to the reply.
    tokens = [e for e in events if e["event"] == "token" and e["decision"] == first["decision"]]
    for attempt, line in enumerate(lines[:4]):
        assert "".join(e["text"] for e in tokens if e["attempt"] == attempt) == line
    # Events from inside the decision subgraph reach the caller: one navigate per record.
    navigated = [e["decision"] for e in events if e["event"] == "navigate"]
    assert navigated == [r["decision"] for r in _decisions(out)]
    observed = [e["decision"] for e in events if e["event"] == "observe"]
    assert observed[: len(navigated)] == navigated  # both number the decision in progress
    # The second decision starts at the fifth line: no call, so an unreadable one, counted.
    second = records[1]
    assert second["attempts"][0]["calls"][0]["error"] == "the reply holds no complete call"
    assert summary["vlm"]["tool_errors"] >= 2


def test_a_real_vlm_sees_both_pictures_and_its_replies_stream(tmp_path: Path) -> None:
    import gymnasium

    import embodia.envs  # noqa: F401
    from embodia.agents.explorer import ExplorerConfig, ExplorerContext
    from embodia.agents.runtime import RunRecorder, run_config, stream_run
    from embodia.policies.hf import HFPolicy
    from embodia.policies.tiny_models import build_tiny_vlm

    class Watched(HFPolicy):  # the real model, with each request's images noted
        shapes: list[list[tuple[int, ...]]] = []

        def complete(self, messages, images=(), **kwargs):  # type: ignore[no-untyped-def]
            self.shapes.append([image.shape for image in images])
            return super().complete(messages, images, **kwargs)

    vlm = Watched(build_tiny_vlm(tmp_path / "vlm"))
    env = gymnasium.make(
        "embodia/ActiveMappingWaypoint-v0",
        panorama_height=48,
        panorama_width=96,
        max_steps=40,
        action_type="pixel",
    )
    env.reset(seed=0, options={"scene": SCENE})
    recorder = RunRecorder(tmp_path / "episodes.jsonl")
    context = ExplorerContext(
        env=env.unwrapped,
        policy=vlm,
        instruction="explore the bedroom first",
        recorder=recorder,
        config=ExplorerConfig(max_retries=1, max_tokens=96),
    )
    events: list[dict] = []
    stream_run(
        build_explorer_graph().compile(),
        {"decision": 0, "events": []},
        run_config("vlm"),
        context,
        events.append,
    )
    recorder.close()
    env.close()
    records = [r for r in _decisions(tmp_path) if r["choice"]["by"] == "vlm"]
    assert records, "the VLM was never asked"
    # Every request carried the marked panorama and the BEV picture, then the views the
    # decision's looks so far showed.
    from embodia.tools.exploration import LOOK_SIZE

    asked = iter(vlm.shapes)
    for record in records:
        looks = 0
        for attempt in record["attempts"]:
            shapes = next(asked)
            assert shapes[0] == (48, 96, 3) and shapes[1][2] == 3
            assert shapes[2:] == [(LOOK_SIZE, LOOK_SIZE, 3)] * looks
            looks += sum(c["name"] == "look" for c in attempt["calls"])
    tokens = [e["data"] for e in events if e["type"] == "custom" and e["data"]["event"] == "token"]
    for record in records:
        for attempt, entry in enumerate(record["attempts"]):
            streamed = "".join(
                t["text"] for t in tokens if t["decision"] == record["decision"] and t["attempt"] == attempt
            )
            # the reply streamed whole; the record keeps its text apart from its calls
            content, calls = parse_tool_calls(streamed)
            assert (content, [c.arguments for c in calls]) == (
                entry["reply"],
                [c["arguments"] for c in entry["calls"]],
            )
        answered = any(a["failure"] is None and a["tool_result"] is None for a in record["attempts"])
        assert record["choice"]["fallback"] == (not answered)
    # Every reply was one native call, decoded under the tools' schemas: random weights, and
    # every call valid, the waypoint one of those drawn.
    calls = [c for r in records for a in r["attempts"] for c in a["calls"]]
    assert calls and all("error" not in c for c in calls), calls
    assert {c["name"] for c in calls} <= {"goto_waypoint", "describe_map", "look", "recall"}
    assert any(not r["choice"]["fallback"] for r in records)


def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    whole = run_exploration(_settings(), tmp_path / "whole")
    killed = tmp_path / "killed"
    code = (
        "import sys; from pathlib import Path;"
        "from embodia.evals.explore import ExploreSettings, run_exploration;"
        f"run_exploration(ExploreSettings(agent='dfs', scene={SCENE!r}, steps=150, panorama_height=48, "
        "panorama_width=96, video=False), Path(sys.argv[1]))"
    )
    # A hash seed of its own, so nothing the run decides may follow set or dict-of-str order.
    hash_seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(killed)], env={**os.environ, "PYTHONHASHSEED": hash_seed}
    )
    deadline = time.monotonic() + 120
    log = killed / "episodes.jsonl"
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 4:
            break
        if process.poll() is not None:
            pytest.fail("the run ended before it could be killed")
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "summary.json").exists()
    resumed = run_exploration(_settings(), killed, resume=True)
    assert _decisions(killed) == _decisions(tmp_path / "whole")
    for key in (*MEASURES, "decisions"):
        assert resumed[key] == whole[key], key


def test_an_instructed_object_beyond_the_maps_range_is_sought_from_the_panorama() -> None:
    # A 12 m hall with a bed at its far end, 10 m away: beyond the map's 5 m range, in view.
    bed = ((10.4, 0.0, 0.6), (11.9, 0.5, 2.4), "bed")
    env = gymnasium.make(
        "embodia/ActiveMappingWaypoint-v0", action_type="pixel", panorama_height=128, panorama_width=256
    )
    env.reset(
        seed=0, options={"scene": box_room(12.0, 3.0, extra=[bed]), "start_pose": Pose((1.0, 0.0, 1.5))}
    )
    context = ExplorerContext(
        env=env.unwrapped, policy=None, instruction="explore the bedroom first", recorder=None
    )
    tree = tree_of({})
    assert not _target_cells(context, context.targets).any()  # not on the map
    choice = _seek_target(context, tree)
    assert choice is not None and choice["by"] == "instruction"
    assert 8.5 < choice["point"][0] < 10.4 and abs(choice["point"][2] - 1.5) < 1.0
    assert _seek_target(context, tree) is None  # sought once
    untold = ExplorerContext(env=env.unwrapped, policy=None, instruction="", recorder=None)
    assert _seek_target(untold, tree_of({})) is None
    env.close()


DRAWN = {"#": "wall", "K": "counter", "S": "sofa", "C": "chair", "D": "desk"}
"""What a drawn map's letters stand for ('.' floor, ' ' unknown)."""


def _drawn_context(drawing: list[str], instruction: str, at: tuple[float, float]) -> ExplorerContext:
    """A told explorer's context on a map drawn in characters of 0.2 m (:data:`DRAWN`), row 0
    at z = 0, with the agent at world ``at`` (x, z) and an empty panorama."""
    bev = BEVMap(list(CATEGORIES))
    cells = round(0.2 / bev.config.resolution)
    rows, cols = len(drawing) * cells, max(map(len, drawing)) * cells
    bev.ensure_covers((0.0, cols * bev.config.resolution), (0.0, rows * bev.config.resolution))
    for r, line in enumerate(drawing):
        for c, mark in enumerate(line):
            row, col = bev.to_grid((c * 0.2 + 0.1, 0.0, r * 0.2 + 0.1))
            block = (
                slice(int(row) - cells // 2, int(row) + cells // 2),
                slice(int(col) - cells // 2, int(col) + cells // 2),
            )
            if mark == ".":
                bev.free_count[block] = 1.0
            elif mark in DRAWN:
                bev.occupied_count[block] = 10.0
                bev.obstacle_semantic_count[(*block, CATEGORIES.index(DRAWN[mark]))] = 10
    pose = Pose((at[0], 0.0, at[1]))
    panorama = {
        "semantic": np.zeros((64, 128), dtype=np.int32),
        "depth": np.zeros((64, 128), dtype=np.float32),
        "pose": pose,
    }
    simulator = SimpleNamespace(
        pose=pose, categories=list(CATEGORIES), config=SimpleNamespace(agent_radius=0.1)
    )
    env = SimpleNamespace(
        bev=bev, simulator=simulator, panorama=panorama, sim_config=SimpleNamespace(sensor_height=1.25)
    )
    return ExplorerContext(env=env, policy=None, instruction=instruction, recorder=None)  # type: ignore[arg-type]


def _paint(context: ExplorerContext, point: tuple[float, float, float], category: str) -> None:
    """Show an object at a world point in the context's panorama: 5 x 5 pixels of its category
    at the point's range."""
    panorama = context.env.panorama
    pose = panorama["pose"]
    row, col = world_to_pixel(point, pose, 64, 128, sensor_height=1.25)
    block = (slice(round(row) - 2, round(row) + 3), slice(round(col) - 2, round(col) + 3))
    panorama["semantic"][block] = CATEGORIES.index(category)
    panorama["depth"][block] = np.linalg.norm(np.subtract(point, pose.sensor_position(1.25)))


def test_the_floor_beside_an_object_is_on_its_side_of_the_wall() -> None:
    # A counter against a wall, seen through the doorway at the top; the floor beside it
    # is still unknown, the corridor behind the wall is mapped and nearer.
    drawing = [
        "..........  ....",
        "....#     ......",
        "....#KK   ......",
        "....#KK   ......",
        "....#     ......",
        "....#     ......",
    ]
    context = _drawn_context(drawing, "explore the kitchen first", at=(0.3, 0.1))
    centre = np.array([1.2, 0.0, 0.6])  # the counter's middle
    beside = _floor_beside(context, centre, context.targets)
    assert beside is not None and beside[0] > 1.0  # east of the wall (x 0.8-1.0), in sight
    nearest = _floor_beside(context, centre)  # the counter itself hides every cell
    assert nearest is not None and nearest[0] < 0.8  # the corridor, behind the wall


def test_beacons_lead_to_the_room_until_an_object_that_says_the_room_is_found() -> None:
    # A sofa (the living room, open to the kitchen) far off and a counter near; told the
    # kitchen, the agent walks to the counter, then, beside it, not on to the sofa.
    wide = "." * 40
    drawing = [wide, "..KK" + "." * 32 + "SS..", wide]
    context = _drawn_context(drawing, "explore the kitchen first", at=(3.0, 0.5))
    tree = tree_of({})
    first = _seek_target(context, tree)
    assert first is not None and first["point"][0] < 1.5  # the counter
    context.env.simulator.pose = Pose((0.7, 0.0, 0.5))  # beside it
    assert _seek_target(context, tree) is None  # the room is here: no beacon
    beacon = _seek_target(context, tree_of({}))
    assert beacon is not None and beacon["point"][0] > 6.0  # nothing found yet: the sofa
    # A dining room's chairs stand in offices too: one walked to does not stop the beacons.
    drawing[1] = drawing[1].replace("KK", "CC")
    dining = _drawn_context(drawing, "explore the dining room first", at=(3.0, 0.5))
    tree = tree_of({})
    chair = _seek_target(dining, tree)
    assert chair is not None and chair["point"][0] < 1.5
    dining.env.simulator.pose = Pose((0.7, 0.0, 0.5))
    beacon = _seek_target(dining, tree)
    assert beacon is not None and beacon["point"][0] > 6.0  # on to the sofa


def test_a_target_seen_beside_a_sure_sign_of_another_room_is_not_sought() -> None:
    # Told the dining room: a chair the panorama sees at a desk (too little of it on the map
    # to count there) is an office's; one at a table is sought.
    drawing = ["." * 20, "..DD" + "." * 16, "." * 20]
    context = _drawn_context(drawing, "explore the dining room first", at=(3.0, 0.5))
    _paint(context, (0.9, 0.4, 0.3), "chair")
    assert _seek_target(context, tree_of({})) is None
    drawing[1] = drawing[1].replace("DD", "..")
    context = _drawn_context(drawing, "explore the dining room first", at=(3.0, 0.5))
    _paint(context, (0.9, 0.4, 0.3), "chair")
    choice = _seek_target(context, tree_of({}))
    assert choice is not None and abs(choice["point"][0] - 0.9) < 0.8


def test_a_dining_table_is_not_sought_beside_what_says_the_kitchen() -> None:
    # A table the panorama sees beyond the map: beside a counter in the image it is the
    # kitchen's (tables and chairs say no room, so the open plan does not excuse it), and
    # the agent heads for the counter as a beacon (a kitchen may be open to the dining
    # room), not the table; alone, the table is the dining room's.
    drawing = ["." * 20, "." * 20, "." * 20]
    context = _drawn_context(drawing, "explore the dining room first", at=(3.0, 0.3))
    _paint(context, (9.0, 0.4, 0.3), "table")
    _paint(context, (9.0, 0.4, 2.0), "counter")
    beacon = _seek_target(context, tree_of({}))
    assert beacon is not None and beacon["point"][2] > 1.2
    context = _drawn_context(drawing, "explore the dining room first", at=(3.0, 0.3))
    _paint(context, (9.0, 0.4, 0.3), "table")
    choice = _seek_target(context, tree_of({}))
    assert choice is not None and choice["point"][0] > 7.0 and choice["point"][2] < 1.2
    # a counter beside a sofa still leads to the kitchen: both say their rooms, open plan
    kitchen = _drawn_context(drawing, "explore the kitchen first", at=(3.0, 0.3))
    _paint(kitchen, (9.0, 0.4, 0.3), "counter")
    _paint(kitchen, (9.0, 0.4, 2.0), "sofa")
    assert _seek_target(kitchen, tree_of({})) is not None


def _floor_map(height: float, mapped_m2: float) -> BEVMap:
    """A floor's map with ``mapped_m2`` of floor seen, at ``height``."""
    bev = BEVMap(CATEGORIES)
    bev.ensure_covers((0.0, 20.0), (0.0, 20.0))
    bev.floor_height = height
    bev.free_count.flat[: round(mapped_m2 / bev.config.resolution**2)] = 1.0
    return bev


def _weight(here: BEVMap, floors: list[BEVMap], frontier_y: float) -> float:
    env = SimpleNamespace(bev=here, bevs=dict(enumerate(floors)))
    context = SimpleNamespace(env=env, config=ExplorerConfig())
    return _floor_weight(context, SimpleNamespace(target=np.array([5.0, frontier_y, 5.0])))  # type: ignore[arg-type]


def test_stairs_count_by_how_much_more_of_this_floor_is_mapped() -> None:
    ground, upper = _floor_map(0.0, 100.0), _floor_map(2.8, 0.0)
    assert ground.explored_area_m2 == pytest.approx(100.0)
    # a frontier on this floor counts once
    assert _weight(ground, [ground, upper], 0.1) == 1.0
    # up the flight to a floor not yet seen: stairs_weight (3) times the cap (4)
    assert _weight(ground, [ground], 1.4) == pytest.approx(12.0)
    assert _weight(ground, [ground, upper], 1.4) == pytest.approx(12.0)
    # to a floor half as much mapped as this one: 3 x 2
    assert _weight(ground, [ground, _floor_map(2.8, 50.0)], 1.4) == pytest.approx(6.0)
    # back down from a floor barely mapped to one mapped well: 3 x 1/4, so the agent stays up
    fresh = _floor_map(2.8, 10.0)
    assert _weight(fresh, [ground, fresh], 1.4) == pytest.approx(0.75)
    # the rise is from the map's floor, not the agent: halfway up the flight, with the ground
    # floor's map still its map, the ground floor's frontiers are its own
    assert _weight(ground, [ground, upper], 0.0) == 1.0
    # down a flight to ground the floor below has mapped already (walked up, seen from
    # above): it opens only what is unknown around it there
    assert _weight(fresh, [ground, fresh], 1.4) == pytest.approx(0.75)  # nothing known at (5, 5)
    row, col = ground.to_grid((5.0, 0.0, 5.0))
    ground.free_count[int(row) - 30 : int(row) + 31, int(col) - 30 : int(col) + 31] = 1.0
    assert ground.explored_area_m2 > 100.0
    assert _weight(fresh, [ground, fresh], 1.4) < 0.1
    ground.free_count[int(row) :, :] = 0.0  # half the ground around it unknown again
    assert 0.3 < _weight(fresh, [ground, fresh], 1.4) < 0.45
