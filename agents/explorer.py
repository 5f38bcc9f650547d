"""Depth-first active mapping over a topological tree (the zero-shot 360-BEV + VLM explorer).

The scene is decomposed into explorable regions (``perception.regions``). Inside the
current region the agent proposes waypoint candidates in the panorama
(``perception.waypoints``), a policy picks one (heuristic: information gain and distance;
a VLM: the panorama with numbered markers, the BEV picture and the instruction), the pixel
is back-projected and walked to. Every visited waypoint becomes a tree node under its
region; a region whose informative waypoints are used up is closed and the agent backtracks
to the deepest open ancestor region. When the tree has no open region left it falls back to
the nearest frontier of its map, and stops when there is none.

The graph: each decision is observe -> map -> regions -> propose -> select -> navigate ->
update_tree, then the next decision or END. State holds only small things (ids, numbers, the
tree as node-link JSON and a log of the env actions taken), so it checkpoints in about a
millisecond; the env, the map, the
region tracker and the policy are run-scoped dependencies in the runtime context. A killed
run resumes from its checkpoint: the env is rebuilt by replaying the logged actions (the
simulator is deterministic), then the graph carries on from its last finished node.
"""

from __future__ import annotations

import json
import logging
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypedDict

import networkx as nx
import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from numpy.typing import NDArray
from scipy import ndimage

from embodia.agents.explorer_schema import (
    AttemptRecord,
    Candidate,
    Choice,
    EnvAction,
    ExplorerEvent,
    ExplorerProgress,
    HeuristicChoice,
    PointChoice,
    VLMChoice,
)
from embodia.agents.instructions import (
    foreign_signs,
    instruction_categories,
    instruction_rooms,
    open_plan_signs,
    other_room,
    room_of,
)
from embodia.agents.runtime import RunRecorder, emit
from embodia.core.chat import Message, Policy
from embodia.core.parsing import AskRecord
from embodia.core.tool_calls import ToolChoice
from embodia.perception.bev import BEVMap, FrontierSegment
from embodia.perception.planning import DistanceField, distance_field
from embodia.perception.regions import Region, RegionTracker
from embodia.perception.waypoints import (
    WaypointCandidate,
    draw_candidates,
    pixel_to_world,
    propose_candidates,
)
from embodia.tools.base import ToolResult

if TYPE_CHECKING:
    from embodia.envs.mapping.active_mapping import ActiveMappingWaypointEnv

logger = logging.getLogger(__name__)

ROOT = "root"
STAIRS_RISE_M = 0.5
"""A frontier this far above or below the agent's feet lies on a flight of stairs."""


@dataclass(frozen=True)
class ExplorerConfig:
    """How the depth-first explorer decides."""

    min_gain_m2: float = 1.0
    """A candidate is informative when it would reveal at least this much unknown area."""
    instruction_bonus_m2: float = 6.0
    """Score bonus for a candidate inside a region holding what the instruction asks for."""
    min_target_cells: int = 4
    """Map cells an object the instruction asks for must cover before the agent walks to it."""
    min_target_pixels: int = 12
    """Panorama pixels it must cover, where the map does not show it (beyond its range)."""
    around_pixels: int = 6
    """How far around such a blob, in panorama pixels, the image is read for what says its
    room (a counter beside a table)."""
    target_reach_m: float = 1.5
    """An object this close to the agent, or to one already walked to, is not sought."""
    beside_candidates: int = 2000
    """Navigable cells, nearest first, tried for one in plain sight of an object sought
    (2000 cells of 5 cm: open floor within about 1.3 m)."""
    foreign_reach_m: float = 5.0
    """A point in plain sight of an object that stands only in rooms not asked for (a bed or
    a desk while the kitchen is) and this close to it lies in such a room, which a told
    explorer skips (rooms are 3-5 m)."""
    around_rays: int = 90
    """Rays cast on the map to see what stands around an object sighted (4 degrees apart)."""
    around_min_rays: int = 2
    """Rays that must hit a category for it to count as standing around the object, so that
    a glimpse through a doorway of the next room does not."""
    region_bonus_m2: float = 2.0
    """Score bonus for staying inside the current region (depth first)."""
    max_region_visits: int = 3
    """Backtracks into one region before it is closed for good."""
    tried_radius_m: float = 1.0
    """A frontier this close to one already walked to is not walked to again."""
    stairs_weight: float = 3.0
    """How many times a frontier on a flight of stairs (leading to another floor) counts."""
    stairs_lead_cap: float = 4.0
    """The most a stairs frontier's weight is scaled by how much more of this floor is mapped
    than of the floor it leads to (and the inverse, the least)."""
    stairs_known_radius_m: float = 1.0
    """Around a stairs frontier, how far the map of the floor it leads to is looked up for
    ground it already knows (which the frontier does not open)."""
    walk_horizon_m: float = 6.0
    """A walk to a farther frontier stops this far along the map's path, and the agent
    decides again from there."""
    max_retries: int = 2
    """Re-asks of a VLM whose reply could not be parsed."""
    max_tokens: int = 256
    """Longest VLM reply, in tokens."""
    tool_choice: ToolChoice = "required"
    """How the VLM must use its tools: ``required`` makes every reply a call (backends that can
    decode it under the tools' schemas do), ``auto`` lets it answer in text too."""


class DecisionInput(TypedDict, total=False):
    """What a decision starts from: the whole state but the event log."""

    decision: int
    tree: dict[str, Any]
    """The topological tree as networkx node-link data."""
    current_node: str
    current_region: int
    candidates: list[Candidate]
    choice: Choice
    frontiers: int
    measures: dict[str, Any]
    done: bool


class ExplorerState(DecisionInput, total=False):
    events: Annotated[list[ExplorerEvent], operator.add]
    """Env actions and region-tracker updates in order: what a resume replays. Nodes return
    only their new events and the reducer appends them. The decision subgraph does not take
    the log as input (``DecisionInput``), so it hands back just the decision's own events,
    which the loop's reducer appends once."""


@dataclass
class ExplorerContext:
    """Run-scoped dependencies of one exploration episode."""

    env: ActiveMappingWaypointEnv
    """The unwrapped env (pixel actions)."""
    policy: Policy | None
    """A chat policy for VLM selection, or None for the heuristic policy."""
    instruction: str
    recorder: RunRecorder | None
    config: ExplorerConfig = field(default_factory=ExplorerConfig)
    tracker: RegionTracker = field(default_factory=RegionTracker)
    regions: list[Region] = field(default_factory=list)
    labels: NDArray[np.int32] | None = None
    last_info: dict[str, Any] = field(default_factory=dict)
    on_frame: Callable[[ActiveMappingWaypointEnv], None] | None = None
    """Called with the env after every navigation (video frames)."""
    check_record: Callable[[dict[str, Any]], None] | None = None
    """Called with each decision record once it is written; an error it raises ends the run
    (the runner's limit on decisions that fell back)."""

    @property
    def targets(self) -> frozenset[str]:
        return instruction_categories(self.instruction, self.env.simulator.categories)

    @property
    def rooms(self) -> frozenset[str]:
        """The rooms the instruction names ("bedroom", "kitchen", ...)."""
        return instruction_rooms(self.instruction)

    @property
    def room_signs(self) -> bool:
        """Whether the instruction's objects say their room (:data:`ROOM_SIGNS`: a bed, a
        refrigerator), unlike a dining room's tables and chairs, which offices hold too."""
        return any(room_of([name]) in self.rooms for name in self.targets)

    @property
    def beacons(self) -> frozenset[str]:
        """Objects of rooms that share an open plan with the instructed ones (a sofa when
        the kitchen is asked for): sought when nothing of the room itself is in view."""
        known = set(self.env.simulator.categories)
        return frozenset(name for name in open_plan_signs(self.rooms) if name in known) - self.targets

    @property
    def foreign(self) -> frozenset[str]:
        """Objects that stand only in rooms the instruction does not name (a bed or a desk when
        the kitchen is asked for, not a sofa): the rooms around them are not searched."""
        known = set(self.env.simulator.categories)
        return frozenset(name for name in foreign_signs(self.rooms) if name in known)


# ---------------------------------------------------------------------- tree helpers


def _tree(state: ExplorerState) -> nx.DiGraph:
    data = state.get("tree")
    if not data:
        graph = nx.DiGraph()
        graph.add_node(ROOT, kind="root")
        return graph
    return nx.node_link_graph(data, directed=True, edges="edges")


def _tree_data(graph: nx.DiGraph) -> dict[str, Any]:
    data: dict[str, Any] = nx.node_link_data(graph, edges="edges")
    return data


def _region_node(region_id: int) -> str:
    return f"region-{region_id}"


def _label_at(context: ExplorerContext, point: NDArray[np.float64]) -> int:
    bev = context.env.bev
    if context.labels is None:
        return -1
    row, col = bev.to_grid(point)
    if not bev.inside(row, col):
        return -1
    return int(context.labels[int(row), int(col)])


# ---------------------------------------------------------------------- nodes


def _report(progress: ExplorerProgress) -> None:
    """Emit a progress event (through here, so that each is checked against its type)."""
    emit(progress)


def observe(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    env = runtime.context.env
    info = env._info()
    runtime.context.last_info = info
    pose = env.simulator.pose
    _report(
        {
            "event": "observe",
            "decision": state.get("decision", 0) + 1,  # the decision starting, as in the records
            "steps": info["steps"],
            "coverage_ratio": info["coverage_ratio"],
            "pose": [*pose.position, pose.yaw],
        }
    )
    return {"measures": {k: info[k] for k in ("coverage_m2", "coverage_ratio", "coverage_auc", "steps")}}


def map_update(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    """The env fused the latest panorama already; here the map's frontiers are counted."""
    return {"frontiers": len(runtime.context.env.bev.frontiers())}


def regions(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    context = runtime.context
    context.regions = context.tracker.update(context.env.bev)
    context.labels = context.tracker.label_image(context.env.bev)
    position = np.asarray(context.env.simulator.pose.position, dtype=np.float64)
    here = _label_at(context, position)
    tree = _tree(state)
    parent_region = state.get("current_region", -1)
    parent = (
        _region_node(parent_region)
        if parent_region >= 0 and tree.has_node(_region_node(parent_region))
        else ROOT
    )
    for region in context.regions:
        node = _region_node(region.id)
        if not tree.has_node(node):
            # Regions are discovered from the one the agent stands in: they hang below it.
            tree.add_node(
                node,
                kind="region",
                region=region.id,
                status="open",
                visits=0,
                centroid=[round(float(v), 3) for v in region.centroid],
            )
            tree.add_edge(parent, node)
        tree.nodes[node]["categories"] = [name for name, _ in region.categories]
        tree.nodes[node]["area_m2"] = round(region.area_m2, 3)
    current = here if here >= 0 else parent_region
    return {"events": [{"kind": "update"}], "tree": _tree_data(tree), "current_region": current}


def propose(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    context = runtime.context
    env = context.env
    candidates: list[WaypointCandidate] = propose_candidates(
        env.panorama, env.bev, env.waypoint_config, env.simulator
    )
    env.candidates = candidates  # what the env draws and what a VLM is shown
    listed: list[Candidate] = []
    for c in candidates:
        listed.append(
            {
                "index": c.index,
                "row": c.row,
                "col": c.col,
                "point": [round(float(v), 4) for v in c.point],
                "gain_m2": round(c.gain_m2, 4),
                "distance": round(c.distance, 4),
                "region": _label_at(context, c.point),
            }
        )
    return {"candidates": listed}


def _region_categories(context: ExplorerContext, region_id: int) -> list[str]:
    for region in context.regions:
        if region.id == region_id:
            return [name for name, _ in region.categories]
    return []


def _region_has_target(context: ExplorerContext, region_id: int) -> bool:
    targets = context.targets
    if not targets or region_id < 0:
        return False
    held = _region_categories(context, region_id)
    return any(name in targets for name in held) and not _other_room(context, held)


def _other_room(context: ExplorerContext, categories: Sequence[str], open_plan: bool = True) -> bool:
    """Whether what a region holds says it is a room other than those the instruction names
    (a bed: a bedroom, while the instruction asks for the kitchen); see
    :func:`~embodia.agents.instructions.other_room` for ``open_plan``."""
    return other_room(categories, context.rooms, open_plan)


def _heuristic_pick(state: ExplorerState, context: ExplorerContext) -> HeuristicChoice | None:
    """Best informative candidate: gain - distance, plus depth-first and instruction bonuses;
    told to explore a room first, none in a room seen to be another (:func:`_foreign_rooms`)."""
    cfg = context.config
    current = state.get("current_region", -1)
    foreign = _foreign_rooms(context)
    best: tuple[float, Candidate] | None = None
    for c in state.get("candidates", []):
        if c["gain_m2"] < cfg.min_gain_m2 or foreign(np.asarray(c["point"], dtype=np.float64)):
            continue
        score = c["gain_m2"] - context.env.waypoint_config.distance_weight * c["distance"]
        if c["region"] == current and current >= 0:
            score += cfg.region_bonus_m2
        if _region_has_target(context, c["region"]):
            score += cfg.instruction_bonus_m2
        if best is None or score > best[0]:
            best = (score, c)
    if best is None:
        return None
    return {
        "kind": "pixel",
        "row": best[1]["row"],
        "col": best[1]["col"],
        "index": best[1]["index"],
        "score": round(best[0], 4),
        "by": "heuristic",
    }


def _vlm_pick(state: ExplorerState, context: ExplorerContext) -> VLMChoice | None:
    """Ask the VLM, which answers with native tool calls (offered with
    ``ExplorerConfig.tool_choice``): ``goto_waypoint`` ends the decision (the navigate node
    walks there); ``describe_map``, ``look`` and ``recall`` are answered (a look's view goes
    with the next request as an image) and the model asked again. A reply without a call
    that names a waypoint ("Answer: 3") counts as ``goto_waypoint(3)``. A call that fails
    validation is answered with its error and counted, and the model asked again."""
    from embodia.core.parsing import ParseFailure, ask, parse_choice
    from embodia.perception.bev_image import bev_image
    from embodia.tools.exploration import exploration_tools

    informative = [c for c in state.get("candidates", []) if c["gain_m2"] >= context.config.min_gain_m2]
    if not informative:
        return None
    env = context.env
    panorama = draw_candidates(np.asarray(env.panorama["rgb"], dtype=np.uint8), env.candidates)
    top_down = bev_image(
        env.bev,
        frontiers=env.bev.frontiers(),
        regions=context.regions,
        agent=env.simulator.pose,
        trajectory=env.bev.trajectory,
    )
    tools = exploration_tools(env, context.regions, walk=lambda c: {"walking_to": c.index})

    def settles(result: ToolResult) -> int | None:
        return int(result.value["walking_to"]) if result.tool == "goto_waypoint" else None

    def parse(text: str) -> int | ParseFailure:
        index = parse_choice(text, len(env.candidates))
        if isinstance(index, ParseFailure):
            return ParseFailure(f"no tool call, and {index.reason}")
        return index

    numbers = ", ".join(str(c["index"]) for c in informative)
    instruction = context.instruction or "map the whole house"
    messages: list[Message] = [
        {
            "role": "system",
            "content": "You control a robot that maps houses. Act by calling the tools: look around "
            "or ask about the map if you need to, then walk to a waypoint with goto_waypoint.",
        },
        {
            "role": "user",
            "content": f"Instruction: {instruction}\nImage 1: a 360-degree panorama with "
            f"numbered waypoints on the floor. Image 2: the map so far (grey unknown, light free, dark "
            f"walls, cyan frontiers, red the robot). Waypoints that reveal new space: {numbers}. "
            f"Which waypoint next?",
        },
    ]
    assert context.policy is not None
    number = state.get("decision", 0) + 1

    def stream(attempt: int, piece: str) -> None:
        _report({"event": "token", "decision": number, "attempt": attempt, "text": piece})

    decision = ask(
        context.policy,
        messages,
        [panorama, top_down],
        parse,
        default=max(informative, key=lambda c: c["gain_m2"])["index"],
        max_retries=context.config.max_retries,
        max_tokens=context.config.max_tokens,
        format_hint="one tool call: goto_waypoint with the waypoint's index",
        on_text=stream,
        tools=tools.schemas(),
        tool_choice=context.config.tool_choice,
        on_calls=lambda calls: tools.answer(calls, settles),
    )
    chosen = next((c for c in state["candidates"] if c["index"] == decision.value), informative[0])
    _report(
        {
            "event": "select",
            "decision": number,
            "index": chosen["index"],
            "fallback": decision.fallback,
            "replies": [_shown(a) for a in decision.attempts],
            "tool_errors": tools.errors,
        }
    )
    return {
        "kind": "pixel",
        "row": chosen["row"],
        "col": chosen["col"],
        "index": chosen["index"],
        "by": "vlm",
        "fallback": decision.fallback,
        "prompt": messages[-1]["content"],
        "tool_calls": tools.calls,
        "tool_errors": tools.errors,
        "attempts": [_attempt_record(a) for a in decision.attempts],
    }


def _shown(attempt: AskRecord) -> str:
    """A reply as a person reads it: its text, then each call as ``name({...})``."""
    calls = [f"{c['name']}({json.dumps(c['arguments'])})" for c in attempt.tool_calls]
    return " ".join([attempt.reply, *calls]).strip()


def _attempt_record(attempt: AskRecord) -> AttemptRecord:
    record: AttemptRecord = {
        "reply": attempt.reply,
        "failure": attempt.failure,
        "tool_result": attempt.follow_up,
        "latency_s": round(attempt.latency_s, 4),
    }
    if attempt.reply_chars is not None:  # only when the reply was cut to max_reply_chars
        record["reply_chars"] = attempt.reply_chars
    if attempt.tool_calls:
        record["calls"] = [dict(call) for call in attempt.tool_calls]
    return record


def backtrack_order(tree: nx.DiGraph, node: str, targets: frozenset[str]) -> list[str]:
    """The open regions to walk back to, best first: the open ancestors of ``node`` from the
    deepest up, then the other open regions deepest first, ties in the tree's insertion order
    (never set order, which follows the per-process string hash and would make a resumed run
    diverge from the original); regions holding an instruction's categories go first."""
    open_regions = [
        n for n, d in tree.nodes(data=True) if d.get("kind") == "region" and d.get("status") == "open"
    ]
    if tree.has_node(node):
        ancestors = [a for a in nx.shortest_path(tree, ROOT, node)[::-1] if a in open_regions]
    else:
        ancestors = []
    others = [n for n in open_regions if n not in ancestors]
    order = ancestors + sorted(others, key=lambda n: -nx.shortest_path_length(tree, ROOT, n))
    if targets:
        order.sort(key=lambda n: not any(c in targets for c in tree.nodes[n].get("categories", [])))
    return order


def _backtrack(state: ExplorerState, context: ExplorerContext, tree: nx.DiGraph) -> PointChoice | None:
    """Close the current region and walk to a frontier elsewhere: the one with the most
    frontier per metre of path on the map, where the frontiers of open ancestor regions
    (depth first) and of regions holding what the instruction asks for count double; a
    region walked back to too often is closed, as is one with nothing left to see."""
    cfg = context.config
    current = state.get("current_region", -1)
    node = _region_node(current)
    if tree.has_node(node):
        tree.nodes[node]["status"] = "closed"
    order = backtrack_order(tree, node, context.targets)
    ancestors = set(nx.shortest_path(tree, ROOT, node)) if tree.has_node(node) else set()
    by_id = {region.id: region for region in context.regions}
    position = np.asarray(context.env.simulator.pose.position, dtype=np.float64)
    fresh = _untried(context, tree, position)
    options: list[tuple[FrontierSegment, str | None, float]] = []
    in_regions: set[tuple[float, float]] = set()
    for region_node in order:
        data = tree.nodes[region_node]
        region = by_id.get(int(data["region"]))
        segments = [] if region is None else [f for f in region.frontiers if fresh(f.target)]
        if data.get("visits", 0) >= cfg.max_region_visits or not segments:
            data["status"] = "closed"
            continue
        weight = (2.0 if region_node in ancestors else 1.0) * (
            2.0 if _region_has_target(context, int(data["region"])) else 1.0
        )
        for segment in segments:
            options.append((segment, region_node, weight))
            in_regions.add((float(segment.target[0]), float(segment.target[2])))
    for segment in context.env.bev.frontiers():
        if fresh(segment.target) and (float(segment.target[0]), float(segment.target[2])) not in in_regions:
            options.append((segment, None, 1.0))
    # Told to explore a room first: not into rooms seen to be others while any frontier is
    # left outside them (a room may be reached only through another).
    foreign = _foreign_rooms(context)
    elsewhere = [option for option in options if not foreign(option[0].target)]
    options = elsewhere or options
    if not options:
        return None
    field = _map_paths(context, position)
    cost = [_path_cost(context, field, position, segment.target) for segment, _, _ in options]
    value = [
        w * seg.size * _floor_weight(context, seg) / (1.0 + c)
        for (seg, _, w), c in zip(options, cost, strict=True)
    ]
    best, into, _ = options[int(np.argmax(value))]
    goal = _along_path(context, field, best.target)
    if goal is None:
        # The frontier itself: remember it was walked to, and that its region was revisited.
        goal = best.target
        tree.graph["tried"].append([round(float(v), 4) for v in goal])
        if into is not None:
            data = tree.nodes[into]
            data["visits"] = int(data.get("visits", 0)) + 1
    choice: PointChoice = {
        "kind": "point",
        "point": [round(float(v), 4) for v in goal],
        "by": "frontier" if into is None else "backtrack",
    }
    if into is not None:
        choice["to"] = into
    return choice


def _untried(
    context: ExplorerContext, tree: nx.DiGraph, position: NDArray[np.float64]
) -> Callable[[NDArray[np.float64]], bool]:
    """Whether a frontier spot is worth walking to: not where the agent stands, nor near a
    spot walked to already (the tree's ``tried`` list): a frontier still there after the walk
    cannot be seen past from where the agent can stand (a gap under furniture, a sliver
    behind a door)."""
    tried = [np.asarray(p, dtype=np.float64) for p in tree.graph.setdefault("tried", [])]
    radius = context.config.tried_radius_m

    def fresh(target: NDArray[np.float64]) -> bool:
        return _flat_distance(target, position) > 0.5 and all(
            _flat_distance(target, p) > radius for p in tried
        )

    return fresh


def _floor_weight(context: ExplorerContext, segment: FrontierSegment) -> float:
    """A frontier up or down a flight of stairs opens a whole floor, not the few cells of it
    seen from below: it counts as much as ``stairs_weight`` frontiers of this floor, times
    how much more of this floor is mapped than of the floor it leads to (at most
    ``stairs_lead_cap``, at least its inverse). So the agent climbs once this floor is largely
    mapped and the next barely seen, and stays up until the new floor is mapped as well.
    The rise is taken from this floor's level, not the agent's height: halfway up a flight,
    the floor it came from is still its floor, not another to go back to. Where the map of
    the floor it leads to already knows the ground around the frontier (the flight walked
    down, seen again from above), it opens only what is unknown there."""
    cfg = context.config
    here = context.env.bev
    rise = float(segment.target[1]) - here.floor_height
    if abs(rise) <= STAIRS_RISE_M:
        return 1.0
    beyond = [
        bev
        for bev in context.env.bevs.values()
        if bev is not here and (bev.floor_height - here.floor_height) * rise > 0
    ]
    there = min(beyond, key=lambda bev: abs(bev.floor_height - here.floor_height)) if beyond else None
    mapped_there = there.explored_area_m2 if there is not None else 0.0
    lead = here.explored_area_m2 / max(mapped_there, 1.0)
    unknown = 1.0 if there is None else 1.0 - _known_share(there, segment.target, cfg.stairs_known_radius_m)
    return cfg.stairs_weight * min(max(lead, 1.0 / cfg.stairs_lead_cap), cfg.stairs_lead_cap) * unknown


def _known_share(bev: BEVMap, point: NDArray[np.float64], radius: float) -> float:
    """Share of a map's cells within ``radius`` of a point (flat distance) that it has
    explored; cells outside its grid count as unknown."""
    res = bev.config.resolution
    span = int(np.ceil(radius / res))
    row, col = (int(v) for v in bev.to_grid(point))
    rows, cols = np.mgrid[row - span : row + span + 1, col - span : col + span + 1]
    disc = np.hypot(rows - row, cols - col) * res <= radius
    rows, cols = rows[disc], cols[disc]
    inside = bev.inside(rows, cols)
    explored = bev.explored
    return float(explored[rows[inside], cols[inside]].sum()) / float(disc.sum())


def _ray_samples(
    mask: NDArray[np.bool_], cell: Sequence[float], rays: int, along: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.int64], NDArray[np.int64]]:
    """``mask`` sampled along ``rays`` rays cast evenly round from a (row, col) grid point, at
    the distances ``along`` (cells): the (rays, len(along)) samples, False outside the grid,
    and the sampled rows and columns."""
    angles = np.linspace(0.0, 2.0 * np.pi, rays, endpoint=False)
    rows = np.rint(cell[0] + np.outer(np.sin(angles), along)).astype(np.int64)
    cols = np.rint(cell[1] + np.outer(np.cos(angles), along)).astype(np.int64)
    inside = (rows >= 0) & (rows < mask.shape[0]) & (cols >= 0) & (cols < mask.shape[1])
    samples = np.zeros(rows.shape, dtype=bool)
    samples[inside] = mask[rows[inside], cols[inside]]
    return samples, rows, cols


def _map_paths(context: ExplorerContext, position: NDArray[np.float64]) -> DistanceField | None:
    """Shortest paths on the agent's own map from ``position`` (None: off the map)."""
    bev = context.env.bev
    row, col = bev.to_grid(position)
    if not bev.inside(row, col):
        return None
    traversable = bev.traversable(context.env.simulator.config.agent_radius)
    start = (int(row), int(col))
    traversable[start] = True
    return distance_field(traversable, start, bev.config.resolution)


def _path_cost(
    context: ExplorerContext,
    field: DistanceField | None,
    position: NDArray[np.float64],
    target: NDArray[np.float64],
) -> float:
    """Metres of path on the map to ``target``; where the map knows no way, twice the
    straight-line distance (the map may not show the way yet)."""
    bev = context.env.bev
    r, c = bev.to_grid(target)
    walked = float(field.cost[int(r), int(c)]) if field is not None and bev.inside(r, c) else math.inf
    return walked if math.isfinite(walked) else 2.0 * _flat_distance(target, position)


def _along_path(
    context: ExplorerContext, field: DistanceField | None, target: NDArray[np.float64]
) -> NDArray[np.float64] | None:
    """The point ``walk_horizon_m`` along the map's path to a farther ``target`` (None: the
    target is within the horizon, or the map knows no way). A long walk is cut there so that
    the next decision uses what the walk revealed, as a frontier agent replans as it goes."""
    bev = context.env.bev
    r, c = bev.to_grid(target)
    if field is None or not bev.inside(r, c) or field.cost[int(r), int(c)] <= context.config.walk_horizon_m:
        return None
    cells = field.path_to(int(r), int(c))
    if len(cells) < 2:
        return None
    steps = np.hypot(*np.diff(cells, axis=0).T) * bev.config.resolution
    along = np.concatenate([[0.0], np.cumsum(steps)])
    k = int(np.searchsorted(along, context.config.walk_horizon_m))
    point: NDArray[np.float64] = bev.from_grid(*cells[min(k, len(cells) - 1)])
    return point


def _flat_distance(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    return float(np.hypot(a[0] - b[0], a[2] - b[2]))


def _foreign_rooms(context: ExplorerContext) -> Callable[[NDArray[np.float64]], bool]:
    """Whether a world point lies in a room seen to be one the instruction does not name: in
    plain sight on the map (no occupied cell between) of a cluster of objects that stand only
    in other rooms (:attr:`ExplorerContext.foreign`) and within ``foreign_reach_m`` of it.
    The panorama sees a room from its doorway, so the agent need not walk in to tell a
    bedroom; a sofa does not count while the kitchen is asked for, as a living room may be
    open to the kitchen. Never true for an untold explorer."""
    signs = context.foreign
    if not signs:
        return lambda point: False
    bev = context.env.bev
    cells = _target_cells(context, signs)
    clusters = _largest_blobs(cells, context.config.min_target_cells, connected=2)
    blocked = bev.occupied & ~cells
    reach = context.config.foreign_reach_m
    centres = [(bev.from_grid(*cluster.mean(axis=0)), cluster.mean(axis=0)) for cluster in clusters]

    def foreign(point: NDArray[np.float64]) -> bool:
        row, col = bev.to_grid(point)
        return any(
            _flat_distance(point, centre) <= reach and in_sight(blocked, grid, (float(row), float(col)))
            for centre, grid in centres
        )

    return foreign


def in_sight(blocked: NDArray[np.bool_], start: Sequence[float], end: Sequence[float]) -> bool:
    """Whether the straight line between two (row, col) grid points crosses no ``blocked``
    cell (the line's cells sampled at half-cell steps; outside the grid counts as clear)."""
    a, b = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    n = max(int(np.ceil(2.0 * float(np.abs(b - a).max()))), 1) + 1
    rows, cols = np.rint(np.linspace(a, b, n)).astype(np.int64).T
    inside = (rows >= 0) & (rows < blocked.shape[0]) & (cols >= 0) & (cols < blocked.shape[1])
    return not bool(blocked[rows[inside], cols[inside]].any())


def _target_cells(context: ExplorerContext, targets: frozenset[str]) -> NDArray[np.bool_]:
    """Occupied map cells whose category is one of ``targets`` (by majority vote)."""
    bev = context.env.bev
    names = context.env.simulator.categories
    label, confidence = bev.semantic_map()
    ids = [names.index(t) for t in targets]
    wanted: NDArray[np.bool_] = np.isin(label, ids) & (confidence >= 0.5) & bev.occupied
    return wanted


def _seek_target(context: ExplorerContext, tree: nx.DiGraph) -> PointChoice | None:
    """Walk to an object the instruction asks for, once the agent has seen one it has not
    yet been near: to the reachable floor in sight of the largest such cluster on the map,
    else towards the largest such blob in the panorama (which sees farther than the map
    keeps); where none is in view, to a beacon of the room (:attr:`ExplorerContext.beacons`)
    the same way, until an object that says the room (:attr:`ExplorerContext.room_signs`)
    has been walked to (the tree's ``found``). The room around it is then explored first,
    depth first, by the region bonus. Each object is sought once (the tree's ``sought``
    list), so one that cannot be reached is not chased again."""
    if not context.targets:
        return None
    sought = tree.graph.setdefault("sought", [])
    for beacon, targets in ((False, context.targets), (True, context.beacons)):
        if beacon and tree.graph.get("found"):
            # An object that says the room (a refrigerator, not a chair a dining room shares
            # with offices) was walked to: the room is there, and a beacon leads away.
            return None
        found = _sighting(context, targets, [np.asarray(p, dtype=np.float64) for p in sought])
        if found is not None:
            centre, goal = found
            sought.append([round(float(v), 4) for v in centre])
            tree.graph["found"] = tree.graph.get("found", False) or (not beacon and context.room_signs)
            return {"kind": "point", "point": [round(float(v), 4) for v in goal], "by": "instruction"}
    return None


def _sighting(
    context: ExplorerContext, targets: frozenset[str], sought: list[NDArray[np.float64]]
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """(the object's centre, where to walk) for the best ``targets`` object in view that is
    neither near the agent nor sought already; None when there is none."""
    cfg = context.config
    if not targets:
        return None
    position = np.asarray(context.env.simulator.pose.position, dtype=np.float64)

    def new(centre: NDArray[np.float64]) -> bool:
        return all(_flat_distance(p, centre) >= cfg.target_reach_m for p in [position, *sought])

    # A room asked for by objects that other rooms hold too (a dining room's table and
    # chairs) is not where they stand beside what says another room, open to it or not: a
    # table at a counter is the kitchen's.
    open_plan = targets != context.targets or context.room_signs

    def elsewhere(centre: NDArray[np.float64]) -> bool:
        return _other_room(context, sorted(_seen_around(context, centre, targets)), open_plan)

    for centre in _target_clusters(context, targets):
        if new(centre):
            beside = _floor_beside(context, centre, targets)
            # a desk in a bedroom is not the office's, nor a sofa beside a desk the living room's
            if (
                beside is not None
                and not _other_room(context, _region_categories(context, _label_at(context, beside)))
                and not elsewhere(centre)
            ):
                return centre, beside
    for centre, around in _target_blobs(context, targets):
        if new(centre) and not elsewhere(centre) and not _other_room(context, around, open_plan):
            # Beyond the map: the floor short of it towards the agent; the simulator snaps
            # the point onto navigable floor when the agent walks there.
            away = np.asarray(centre - position, dtype=np.float64)
            away[1] = 0.0
            length = max(float(np.linalg.norm(away)), 1e-9)
            goal = centre - away * (cfg.target_reach_m / 2) / length
            goal[1] = position[1]
            return centre, goal
    return None


def _seen_around(context: ExplorerContext, centre: NDArray[np.float64], skip: frozenset[str]) -> set[str]:
    """Categories the map shows in plain sight of a point, within ``foreign_reach_m``: the
    first occupied cell (``skip`` categories seen through) along each of ``around_rays``
    rays, counted when at least ``around_min_rays`` rays hit it. What stands in one room
    with an object, unlike a region's categories, which gather the rooms around a corridor;
    a category glimpsed through a doorway takes few rays."""
    cfg = context.config
    bev = context.env.bev
    names = context.env.simulator.categories
    label, confidence = bev.semantic_map()
    label = np.where(confidence >= 0.5, label, 0)
    blocked = bev.occupied & ~np.isin(label, [names.index(name) for name in skip])
    cell = [float(v) for v in bev.to_grid(centre)]
    along = np.arange(0.0, cfg.foreign_reach_m / bev.config.resolution, 0.5)
    hit, rows, cols = _ray_samples(blocked, cell, cfg.around_rays, along)
    rays = np.nonzero(hit.any(axis=1))[0]
    first = hit[rays].argmax(axis=1)
    seen, counts = np.unique(label[rows[rays, first], cols[rays, first]], return_counts=True)
    return {names[int(k)] for k, n in zip(seen, counts, strict=True) if n >= cfg.around_min_rays}


def _largest_blobs(mask: NDArray[np.bool_], min_size: int, connected: int = 1) -> list[NDArray[np.int64]]:
    """The (N, 2) cells of each connected blob of ``mask`` with at least ``min_size`` cells,
    largest first (``connected``: 1 for 4-, 2 for 8-connectivity)."""
    blobs, n = ndimage.label(mask, structure=ndimage.generate_binary_structure(2, connected))
    sizes = ndimage.sum_labels(mask, blobs, np.arange(1, n + 1))
    return [np.argwhere(blobs == k + 1) for k in np.argsort(-sizes, kind="stable") if sizes[k] >= min_size]


def _target_clusters(context: ExplorerContext, targets: frozenset[str]) -> list[NDArray[np.float64]]:
    """Centres of the map's clusters of ``targets`` objects, largest first."""
    bev = context.env.bev
    clusters = _largest_blobs(_target_cells(context, targets), context.config.min_target_cells, connected=2)
    return [bev.from_grid(*cells.mean(axis=0)) for cells in clusters]


def _target_blobs(
    context: ExplorerContext, targets: frozenset[str]
) -> list[tuple[NDArray[np.float64], list[str]]]:
    """The panorama's blobs of ``targets`` objects, largest first: each one's world point
    (median of its pixels' hits) and the categories seen around it in the image (at least
    ``min_target_pixels`` pixels within ``around_pixels`` of it), which say its room where
    the map does not reach."""
    env = context.env
    cfg = context.config
    panorama = env.panorama
    names = env.simulator.categories
    semantic = np.asarray(panorama["semantic"])
    mask = np.isin(semantic, [names.index(t) for t in targets]) & (np.asarray(panorama["depth"]) > 0)
    height = env.sim_config.sensor_height
    found = []
    for pixels in _largest_blobs(mask, cfg.min_target_pixels):
        pick = np.linspace(0, len(pixels) - 1, min(len(pixels), 16)).astype(int)
        hits = [pixel_to_world(panorama, int(pixels[i, 0]), int(pixels[i, 1]), height) for i in pick]
        blob = np.zeros(mask.shape, dtype=bool)
        blob[pixels[:, 0], pixels[:, 1]] = True
        ring = ndimage.binary_dilation(blob, iterations=cfg.around_pixels) & ~mask
        ids, counts = np.unique(semantic[ring], return_counts=True)
        around = [names[int(k)] for k, n in zip(ids, counts, strict=True) if n >= cfg.min_target_pixels]
        found.append((np.median(np.asarray(hits), axis=0), around))
    return found


def _floor_beside(
    context: ExplorerContext, centre: NDArray[np.float64], seen_through: frozenset[str] = frozenset()
) -> NDArray[np.float64] | None:
    """The navigable map cell nearest a point that has it in plain sight (no occupied cell
    between, ``seen_through`` categories aside: the object's own cells), else the nearest
    one; None when the map has none. The nearest cell alone may lie behind a wall, in the
    next room, from where the object is not seen and its room not entered."""
    bev = context.env.bev
    navigable = bev.navigable(context.env.simulator.config.agent_radius)
    if not navigable.any():
        return None
    rows, cols = np.nonzero(navigable)
    points = bev.from_grid(rows, cols)
    order = np.argsort(np.hypot(*(points - centre).T[[0, 2]]), kind="stable")
    blocked = bev.occupied & ~_target_cells(context, seen_through) if seen_through else bev.occupied
    grid = [float(v) for v in bev.to_grid(centre)]
    for k in order[: context.config.beside_candidates]:
        if in_sight(blocked, grid, (float(rows[k]), float(cols[k]))):
            return np.asarray(points[k], dtype=np.float64)
    return np.asarray(points[order[0]], dtype=np.float64)


def select(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    context = runtime.context
    tree = _tree(state)
    pick: Choice | None = (
        _vlm_pick(state, context)
        if context.policy is not None
        else _seek_target(context, tree) or _heuristic_pick(state, context)
    )
    if pick is None:
        pick = _backtrack(state, context, tree) or {"kind": "stop", "by": "done"}
    return {"choice": pick, "tree": _tree_data(tree)}


def navigate(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    context = runtime.context
    env = context.env
    choice = state["choice"]
    if choice["kind"] == "stop":
        return {"done": True}
    event: EnvAction
    if choice["kind"] == "pixel":
        event = {"kind": "pixel", "row": int(choice["row"]), "col": int(choice["col"])}
    else:
        event = {"kind": "point", "point": [float(v) for v in choice["point"]]}
    _, reward, terminated, truncated, info = apply_event(env, event)
    context.last_info = info
    decision = state.get("decision", 0) + 1
    record = {
        "decision": decision,
        "choice": {k: v for k, v in choice.items() if k != "attempts"},
        "attempts": choice["attempts"] if choice["by"] == "vlm" else [],
        "reward": round(float(reward), 6),
        "rejection": info.get("rejection"),
        "pose": [round(float(v), 6) for v in (*env.simulator.pose.position, env.simulator.pose.yaw)],
        **{
            k: info[k]
            for k in ("coverage_m2", "coverage_ratio", "coverage_auc", "path_length", "collisions", "steps")
        },
        "region": state.get("current_region", -1),
    }
    if context.recorder is not None:
        context.recorder.write(record)
    if context.check_record is not None:
        # After the write, so a decision that ends the run is on record too. The run ends
        # inside the decision: its checkpoint is not saved, and a resume makes it again.
        context.check_record(record)
    if context.on_frame is not None:
        context.on_frame(env)
    _report(
        {
            "event": "navigate",
            "decision": decision,
            "steps": info["steps"],
            "coverage_ratio": info["coverage_ratio"],
        }
    )
    return {
        "events": [event],
        "decision": decision,
        "done": bool(terminated or truncated),
    }


def update_tree(state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState:
    if state.get("done") and state["choice"]["kind"] == "stop":
        return {}
    env = runtime.context.env
    tree = _tree(state)
    region = state.get("current_region", -1)
    parent = _region_node(region) if tree.has_node(_region_node(region)) else ROOT
    node = f"waypoint-{state['decision']}"
    position = [round(float(v), 4) for v in env.simulator.pose.position]
    tree.add_node(
        node, kind="waypoint", position=position, decision=state["decision"], by=state["choice"]["by"]
    )
    tree.add_edge(parent, node)
    return {"tree": _tree_data(tree), "current_node": node}


def _continue(state: ExplorerState) -> Literal["decision", "__end__"]:
    return "__end__" if state.get("done") else "decision"


class Node(Protocol):
    """A node of the decision graph: it returns what it changes of the state."""

    def __call__(self, state: ExplorerState, runtime: Runtime[ExplorerContext]) -> ExplorerState: ...


DECISION_NODES = ("observe", "map", "regions", "propose", "select", "navigate", "update_tree")


def build_decision_graph(
    wrap: Callable[[Node], Node] | None = None,
) -> StateGraph[ExplorerState, ExplorerContext, DecisionInput, ExplorerState]:
    """One decision: observe -> map -> regions -> propose -> select -> navigate -> update_tree.

    ``wrap`` decorates every node (the benchmark times the nodes' own work with it).
    """
    step = StateGraph(ExplorerState, context_schema=ExplorerContext, input_schema=DecisionInput)
    chain = [
        ("observe", observe),
        ("map", map_update),
        ("regions", regions),
        ("propose", propose),
        ("select", select),
        ("navigate", navigate),
        ("update_tree", update_tree),
    ]
    for name, node in chain:
        step.add_node(name, wrap(node) if wrap else node)
    step.add_edge(START, chain[0][0])
    for (a, _), (b, _) in zip(chain, chain[1:], strict=False):
        step.add_edge(a, b)
    step.add_edge(chain[-1][0], END)
    return step


def build_explorer_graph(
    wrap: Callable[[Node], Node] | None = None,
) -> StateGraph[ExplorerState, ExplorerContext, ExplorerState, ExplorerState]:
    """Decisions in a loop until done. A decision runs as a subgraph that does not checkpoint
    its inner steps; the loop checkpoints once per decision, so the runtime's cost per
    decision is one SQLite write."""
    builder = StateGraph(ExplorerState, context_schema=ExplorerContext)
    builder.add_node("decision", build_decision_graph(wrap).compile(checkpointer=False))
    builder.add_edge(START, "decision")
    builder.add_conditional_edges("decision", _continue, ["decision", END])
    return builder


def apply_event(
    env: ActiveMappingWaypointEnv, event: EnvAction
) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Execute one logged env action (the same path for a live run and a resume replay)."""
    if event["kind"] == "pixel":
        return env.step(np.array([event["row"], event["col"]], dtype=np.int64))
    return env.step_to_point(np.asarray(event["point"], dtype=np.float64))


def replay(context: ExplorerContext, events: Sequence[ExplorerEvent]) -> None:
    """Bring a freshly reset env and region tracker to where the logged events left them."""
    for event in events:
        if event["kind"] == "update":
            context.regions = context.tracker.update(context.env.bev)
            context.labels = context.tracker.label_image(context.env.bev)
        else:
            _, _, _, _, info = apply_event(context.env, event)
            context.last_info = info
            if context.on_frame is not None:
                context.on_frame(context.env)


def tree_of(state: ExplorerState) -> nx.DiGraph:
    return _tree(state)
