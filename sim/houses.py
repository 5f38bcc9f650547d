"""Procedural houses v2: ``procedural:seed=N,floors=F[,rooms=K]`` (F = 1 or 2, K = 6..20).

The floor plan is made by recursive subdivision, the way architectural layout generators
start: a footprint (a rectangle, or an L where a corner is cut away) is crossed by a
corridor spine and a few branch corridors, some of which end blind; what the corridors
leave are blocks, and each block is split in two, again and again along its longer side at
a random ratio, until the rooms it was given are made. A split of an L-shaped block gives
L-shaped rooms. Then:

- the largest room becomes the living room and a neighbour its kitchen, with most of the
  wall between them gone (an open plan);
- every room gets a doorway (0.8-1.4 m wide) to a corridor it touches, or else to a
  neighbour already reachable, and a few neighbours get a second door (loops);
- rooms are furnished with the first generation's items (:mod:`embodia.sim.procedural`):
  what says what a room is first (a kitchen's counter, a bedroom's bed), on any wall of its
  real outline, then the centre table, free-standing shelves and plants in the middle of
  large rooms that block sight lines, and the optional items;
- a two-floor house has a straight staircase (18 risers of 0.15 m) beside the spine, under
  an opening in the upper slab, landing on the upper floor's corridor.

All of it is drawn from one ``numpy.random.Generator`` seeded by the seed, so a spec always
gives the same mesh. The old spec, ``procedural:seed=N[,rooms=K]`` without ``floors``, keeps
making the first generation's houses. As there, the plan is laid out z-up (u, v; height w)
and turned into Habitat's y-up frame at the end (world x = u, world z = -v).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodia.errors import SceneError
from embodia.sim.procedural import (
    DOOR_HEIGHT,
    FURNITURE,
    ROOM_TYPES,
    SLAB,
    WALL_HEIGHT,
    WALL_THICKNESS,
    Part,
    _centre_table,
    _extrude,
    _footprint,
    _place,
    _put,
    _Room,
    _transform,
    box_mesh,
    house_scene,
)
from embodia.sim.scene import CATEGORIES, PROCEDURAL_PREFIX, Region, Scene

MIN_ROOMS, MAX_ROOMS = 6, 20
FLOORS = (1, 2)
STOREY = WALL_HEIGHT + SLAB
"""Height of the upper floor above the ground floor, m."""
RISERS = 18
RISE = STOREY / RISERS
TREAD = 0.28
STAIR_WIDTH = 1.1
STAIR_LENGTH = RISERS * TREAD
STAIR_HEADROOM_RUN = 1.5
"""The first metres of the flight stay under the upper slab (the steps there are low enough
for the agent's 1.5 m); the opening covers the rest."""
ROOM_AREA = 14.0
"""Mean room area the footprint is sized for, m2."""
MIN_SIDE = 2.2
"""Narrowest a room may be, m."""
CORRIDOR = (1.2, 1.6)
DOOR_WIDTHS = (0.8, 1.4)
_CAT = {name: i for i, name in enumerate(CATEGORIES)}
_KINDS = ("bedroom", "bathroom", "bedroom", "office", "dining", "bedroom", "bathroom", "office")


@dataclass
class _PlanRoom:
    kind: str
    shape: Any
    """A shapely polygon: the room's interior, wall centre lines included."""
    doors: list[Any] = field(default_factory=list)
    """Door zones kept clear of furniture."""


@dataclass
class _Floor:
    rooms: list[_PlanRoom]
    corridors: Any
    doors: list[Any]
    """Rectangles cut through walls."""
    open_walls: list[Any]
    """Wall stretches removed whole (the open plan)."""
    hole: Any | None = None
    """Where the slab under this floor is open (the stairwell seen from above)."""


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, 2])  # a stream of its own: v1 houses keep theirs


def _footprint_polygon(rng: np.random.Generator, rooms: int) -> Any:
    from shapely.geometry import box

    area = rooms * ROOM_AREA * 1.3  # corridors take about a quarter
    aspect = float(rng.uniform(1.2, 1.8))
    cut = rng.random() < 0.5
    if cut:
        area *= 1.15
    width = math.sqrt(area * aspect)
    depth = area / width
    outline = box(0.0, 0.0, width, depth)
    if cut:  # an L: one corner away
        cw, cd = width * float(rng.uniform(0.25, 0.38)), depth * float(rng.uniform(0.3, 0.42))
        corner = int(rng.integers(4))
        u0 = 0.0 if corner in (0, 3) else width - cw
        v0 = 0.0 if corner in (0, 1) else depth - cd
        outline = outline.difference(box(u0, v0, u0 + cw, v0 + cd))
    return outline


def _spine(rng: np.random.Generator, outline: Any, min_length: float) -> tuple[float, float, float, float]:
    """The main corridor along u: (u0, v0, u1, v1). It stops short of one end wall (rooms
    across its end) or of both."""
    u_lo, v_lo, u_hi, v_hi = outline.bounds
    width = float(rng.uniform(*CORRIDOR))
    v0 = float(rng.uniform(v_lo + 0.38 * (v_hi - v_lo), v_lo + 0.62 * (v_hi - v_lo) - width))
    start = u_lo if rng.random() < 0.5 else u_lo + float(rng.uniform(2.5, 4.0))
    end = max(u_hi - float(rng.uniform(2.5, 4.0)), min(u_hi, start + min_length))
    return start, v0, end, v0 + width


def _corridors(
    rng: np.random.Generator,
    outline: Any,
    rooms: int,
    spine: tuple[float, float, float, float],
    keep_clear: tuple[float, float] | None,
) -> Any:
    """The spine and its branches (perpendicular, most ending blind short of the outer wall);
    no branch leaves the spine's upper side within ``keep_clear`` (the stairwell's u range)."""
    from shapely.geometry import box
    from shapely.ops import unary_union

    _, v_lo, _, v_hi = outline.bounds
    start, v0, end, v1 = spine
    width = v1 - v0
    parts = [box(*spine)]
    for _ in range(1 + rooms // 7):
        if end - start < 5.0 + width:
            break
        u = float(rng.uniform(start + 2.5, end - 2.5 - width))
        up = rng.random() < 0.5
        if up and keep_clear is not None and u + width > keep_clear[0] and u < keep_clear[1]:
            up = False
        reach = float(rng.uniform(0.45, 0.9))
        if up:
            parts.append(box(u, v1, u + width, v1 + reach * (v_hi - v1)))
        else:
            parts.append(box(u, v0 - reach * (v0 - v_lo), u + width, v0))
    return unary_union(parts).intersection(outline)


def _opened(shape: Any) -> Any:
    """``shape`` without its parts narrower than :data:`MIN_SIDE` (a morphological opening):
    a strip an agent could not turn round in is left solid, not made part of a room."""
    half = MIN_SIDE / 2 - 0.01
    return shape.buffer(-half, join_style="mitre").buffer(half, join_style="mitre").intersection(shape)


def _wide_enough(shape: Any) -> bool:
    """Whether a room could be made of ``shape``: no part of it narrower than MIN_SIDE."""
    return bool(not shape.is_empty and _opened(shape).area >= 0.97 * shape.area)


def _components(shape: Any) -> list[Any]:
    """The polygons of a shape, slivers (under 0.5 m2, left as solid wall) dropped."""
    return [g for g in getattr(shape, "geoms", [shape]) if g.geom_type == "Polygon" and g.area >= 0.5]


def _halve(rng: np.random.Generator, shape: Any, count: int) -> list[Any] | None:
    """One cut of ``shape`` across its longer side (the other side when that keeps failing)
    into 2..``count`` pieces wide enough for rooms; None when no cut works."""
    from shapely.geometry import box

    u0, v0, u1, v1 = shape.bounds
    along_u = (u1 - u0) >= (v1 - v0)
    for attempt in range(16):
        ratio = float(rng.uniform(0.3, 0.7))
        if along_u != (attempt >= 8):
            cut = u0 + ratio * (u1 - u0)
            halves = box(u0, v0, cut, v1), box(cut, v0, u1, v1)
        else:
            cut = v0 + ratio * (v1 - v0)
            halves = box(u0, v0, u1, cut), box(u0, cut, u1, v1)
        pieces = [q for half in halves for q in _components(_opened(shape.intersection(half)))]
        # no sliver: one between a room and its corridor would wall the room off
        if 2 <= len(pieces) <= count and sum(q.area for q in pieces) >= 0.995 * shape.area:
            return pieces
    return None


def _split(rng: np.random.Generator, shape: Any, count: int) -> list[Any]:
    """``shape`` cut into ``count`` rooms (fewer where it is too small): recursive halving
    along the longer side at a random ratio; a cut that leaves a block in several pieces
    (across a corridor's end) shares the rooms among them by area."""
    if count <= 1:
        return [shape]
    pieces = _halve(rng, shape, count)
    if pieces is None:
        return [shape]
    total = sum(q.area for q in pieces)
    shares = [max(1, round(count * q.area / total)) for q in pieces]
    while sum(shares) > count:
        shares[int(np.argmax(shares))] -= 1
    shares[int(np.argmax([q.area for q in pieces]))] += count - sum(shares)
    return [room for q, n in zip(pieces, shares, strict=True) for room in _split(rng, q, n)]


def _rooms(rng: np.random.Generator, blocks: list[Any], count: int) -> list[Any]:
    """``count`` rooms from the blocks (fewer only when none is left big enough to halve):
    rooms shared among the blocks by area, then the largest rooms halved until there are
    enough."""
    total = sum(b.area for b in blocks)
    shapes: list[Any] = []
    for block in blocks:
        shapes += _split(rng, block, max(1, round(count * block.area / total)))
    pieces_of = [_components(_opened(s)) for s in shapes]
    shapes = [max(pieces, key=lambda g: g.area) for pieces in pieces_of if pieces]
    stuck: set[int] = set()
    while len(shapes) < count:
        candidates = [i for i in range(len(shapes)) if i not in stuck and shapes[i].area >= 2.5 * MIN_SIDE**2]
        if not candidates:
            break
        largest = max(candidates, key=lambda i: shapes[i].area)
        pieces = _halve(rng, shapes[largest], 2)
        if pieces is None:
            stuck.add(largest)
            continue
        shapes[largest : largest + 1] = pieces
        stuck = set()
    return shapes


def _blocks(outline: Any, corridors: Any) -> list[Any]:
    """What the corridors leave of the footprint, less strips too narrow for a room."""
    rest = _opened(outline.difference(corridors))
    return [g for g in _components(rest) if g.area > 4.0]


def _shared_edge(a: Any, b: Any) -> Any:
    """The stretch of boundary two touching polygons share (a line, maybe empty)."""
    return a.boundary.intersection(b.buffer(0.01))


def _longest_line(edge: Any) -> Any:
    """The longest straight piece of a shared boundary (None: none)."""
    from shapely.geometry import LineString
    from shapely.ops import linemerge

    lines = [g for g in getattr(edge, "geoms", [edge]) if isinstance(g, LineString) and g.length > 0]
    if not lines:
        return None
    merged = linemerge(lines) if len(lines) > 1 else lines[0]
    pieces = list(getattr(merged, "geoms", [merged]))
    return max(pieces, key=lambda g: g.length)


def _door(rng: np.random.Generator, edge: Any, margin: float = 0.25) -> tuple[Any, Any] | None:
    """A doorway on ``edge``: the rectangle cut through the wall and the zone kept clear."""
    from shapely.geometry import LineString, box

    line = _longest_line(edge)
    if line is None:
        return None
    if len(line.coords) > 2:  # a bent stretch: its longest straight segment
        coords = list(line.coords)
        line = LineString(max(zip(coords[:-1], coords[1:], strict=True), key=lambda ab: math.dist(*ab)))
    width = float(rng.uniform(*DOOR_WIDTHS))
    if line.length < width + 2 * margin:
        width = line.length - 2 * margin
        if width < 0.75:
            return None
    (ua, va), (ub, vb) = line.coords[0], line.coords[-1]
    t = float(rng.uniform(margin + width / 2, line.length - margin - width / 2)) / line.length
    cu, cv = ua + t * (ub - ua), va + t * (vb - va)
    t2 = WALL_THICKNESS
    if abs(ub - ua) >= abs(vb - va):  # a wall along u
        cut = box(cu - width / 2, cv - t2, cu + width / 2, cv + t2)
        zone = box(cu - width / 2 - 0.2, cv - 1.1, cu + width / 2 + 0.2, cv + 1.1)
    else:
        cut = box(cu - t2, cv - width / 2, cu + t2, cv + width / 2)
        zone = box(cu - 1.1, cv - width / 2 - 0.2, cu + 1.1, cv + width / 2 + 0.2)
    return cut, zone


def _floor_plan(
    rng: np.random.Generator, outline: Any, rooms: int, corridors: Any, stairwell: Any | None
) -> _Floor:
    """One floor: rooms cut from what the corridors leave, their kinds and doors (none onto
    the ``stairwell``: the side of a flight, or the opening over it)."""
    from shapely.ops import substring

    # a room keeps no strip narrower than MIN_SIDE (left solid): a door onto one would lead
    # nowhere the agent fits
    shapes = _rooms(rng, _blocks(outline, corridors), rooms)
    shapes.sort(key=lambda s: -s.area)
    plan = [_PlanRoom(_KINDS[i % len(_KINDS)], s) for i, s in enumerate(shapes)]
    open_walls: list[Any] = []
    pair: set[int] = set()
    if len(plan) >= 2:
        plan[0].kind = "living"
        for index, room in enumerate(plan[1:], start=1):
            edge = _longest_line(_shared_edge(plan[0].shape, room.shape))
            if edge is not None and edge.length > 2.0:
                room.kind = "kitchen"
                pair = {0, index}
                # most of the wall between them goes: an open plan, 0.6 m stubs left at its ends
                opening = substring(edge, 0.6, edge.length - 0.6)
                open_walls.append(opening.buffer(WALL_THICKNESS, cap_style="flat"))
                clear = opening.buffer(1.1, cap_style="flat")  # no furniture across the opening
                plan[0].doors.append(clear)
                room.doors.append(clear)
                break
    doors: list[Any] = []
    reached: set[int] = set()

    def reach(index: int) -> None:
        reached.add(index)
        if index in pair:  # the open plan joins them
            reached.update(pair)

    def connect(a: _PlanRoom, b: _PlanRoom | None, edge: Any) -> bool:
        door = _door(rng, edge)
        if door is None:
            return False
        doors.append(door[0])
        a.doors.append(door[1])
        if b is not None:
            b.doors.append(door[1])
        return True

    for index, room in enumerate(plan):
        edge = _shared_edge(room.shape, corridors)
        if stairwell is not None:
            edge = edge.difference(stairwell.buffer(0.3))
        if edge.length > 1.3 and connect(room, None, edge):
            reach(index)
    # rooms without a corridor: a door to a neighbour that is reached, until all are
    for _ in range(len(plan)):
        for index, room in enumerate(plan):
            if index in reached:
                continue
            for other in sorted(reached):
                edge = _shared_edge(room.shape, plan[other].shape)
                if edge.length > 1.3 and connect(room, plan[other], edge):
                    reach(index)
                    break
    for a in range(len(plan)):  # a few loops
        for b in range(a + 1, len(plan)):
            if {a, b} == pair:
                continue
            edge = _shared_edge(plan[a].shape, plan[b].shape)
            if edge.length > 2.0 and rng.random() < 0.15:
                connect(plan[a], plan[b], edge)
    return _Floor(plan, corridors, doors, open_walls)


def _check(seed: int, floors: int, rooms: int | None) -> None:
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise SceneError(f"procedural seed must be a non-negative integer, got {seed!r}")
    if floors not in FLOORS:
        raise SceneError(f"procedural houses have 1 or 2 floors, got {floors}")
    if rooms is not None and not MIN_ROOMS <= rooms <= MAX_ROOMS:
        raise SceneError(f"procedural houses with floors= have {MIN_ROOMS}..{MAX_ROOMS} rooms, got {rooms}")


@dataclass
class HousePlan:
    """A v2 house before it is built: its footprint, each floor's plan and the stairwell."""

    outline: Any
    floors: list[_Floor]
    stairwell: Any | None
    """The flight's footprint (two floors only)."""

    @property
    def rooms(self) -> list[_PlanRoom]:
        return [room for floor in self.floors for room in floor.rooms]


def plan_house(seed: int, floors: int = 1, rooms: int | None = None) -> tuple[HousePlan, np.random.Generator]:
    """The floor plans of the v2 house for ``seed``, and the random stream, which then
    furnishes it (:func:`generate_house_v2`)."""
    from shapely.geometry import box

    _check(seed, floors, rooms)
    rng = _rng(seed)
    count = int(rng.integers(10, MAX_ROOMS + 1)) if rooms is None else rooms
    per_floor = [count] if floors == 1 else [math.ceil(count / 2), count // 2]
    outline = _footprint_polygon(rng, max(max(per_floor), 7 if floors == 2 else 0))
    stair_run = STAIR_LENGTH + 2.5 if floors == 2 else 0.0
    spine = _spine(rng, outline, stair_run)
    stairwell = hole = landing = foot = None
    keep_clear = None
    if floors == 2:
        u0, _, u1, v1 = spine
        first = float(rng.uniform(u0 + 0.5, max(u0 + 0.5, u1 - STAIR_LENGTH - 1.3)))
        stairwell = box(first, v1, first + STAIR_LENGTH, v1 + STAIR_WIDTH)
        foot = box(first - 1.2, v1, first, v1 + STAIR_WIDTH)  # room to step onto the flight
        landing = box(first + STAIR_LENGTH, v1, first + STAIR_LENGTH + 1.2, v1 + STAIR_WIDTH)
        hole = box(first + STAIR_HEADROOM_RUN, v1, first + STAIR_LENGTH, v1 + STAIR_WIDTH)
        keep_clear = (first - 1.3, first + STAIR_LENGTH + 1.3)
    plans: list[_Floor] = []
    for level, rooms_here in enumerate(per_floor):
        corridors = _corridors(rng, outline, rooms_here, spine, keep_clear)
        if stairwell is not None:
            extra = stairwell.union(landing if level == 1 else foot)
            corridors = corridors.union(extra).intersection(outline)
        plan = _floor_plan(rng, outline, rooms_here, corridors, stairwell)
        plan.hole = hole if level == 1 else None
        plans.append(plan)
    return HousePlan(outline, plans, stairwell), rng


def generate_house_v2(seed: int, floors: int = 1, rooms: int | None = None) -> Scene:
    """The v2 house for ``seed``: ``floors`` storeys, ``rooms`` rooms in all (drawn from
    10-20 when None), split between the floors."""
    house, rng = plan_house(seed, floors, rooms)
    plans, stairwell = house.floors, house.stairwell
    outline = house.outline
    parts: list[Part] = []
    instance = 1
    t = WALL_THICKNESS
    shell = outline.buffer(t / 2, join_style="mitre")
    for level, plan in enumerate(plans):
        base = level * STOREY
        instance = _floor_parts(rng, parts, instance, plan, shell, base, level == len(plans) - 1)
    if stairwell is not None:
        u0, v0, _, v1 = stairwell.bounds
        for step in range(RISERS):
            parts.append(
                (
                    *box_mesh(u0 + step * TREAD, v0, 0.0, u0 + (step + 1) * TREAD, v1, (step + 1) * RISE),
                    _CAT["floor"],
                    instance,
                )
            )
        instance += 1

    rooms_arg = "" if rooms is None else f",rooms={rooms}"
    regions = [
        # plan (u, v) -> world (x, z) = (u, -v)
        Region(room.kind, level * STOREY, tuple((float(u), float(-v)) for u, v in room.shape.exterior.coords))
        for level, plan in enumerate(plans)
        for room in plan.rooms
    ]
    source = f"{PROCEDURAL_PREFIX}seed={seed},floors={floors}{rooms_arg}"
    return house_scene(parts, f"house2_{seed:04d}", source, regions)


def _floor_parts(
    rng: np.random.Generator,
    parts: list[Part],
    instance: int,
    plan: _Floor,
    shell: Any,
    base: float,
    top: bool,
) -> int:
    """The meshes of one storey (the slab under it, walls, lintels, furniture; the roof over
    the top one) appended to ``parts``; returns the next instance id."""
    from shapely.ops import unary_union

    t = WALL_THICKNESS
    slab = shell if plan.hole is None else shell.difference(plan.hole)
    if base == 0.0:
        layers = [(-SLAB, 0.0, "floor")]
    else:  # the slab between storeys: ceiling below, floor above
        layers = [(base - SLAB, base - SLAB / 2, "ceiling"), (base - SLAB / 2, base, "floor")]
    for z0, z1, category in layers:
        for verts, faces in _extrude(slab, z0, z1):
            parts.append((verts, faces, _CAT[category], instance))
    instance += 1
    interiors = [r.shape.buffer(-t / 2, join_style="mitre") for r in plan.rooms]
    corridors = getattr(plan.corridors, "geoms", [plan.corridors])
    interiors += [c.buffer(-t / 2, join_style="mitre") for c in corridors]
    solid = shell.difference(unary_union(interiors))
    walls = solid.difference(unary_union([*plan.doors, *plan.open_walls]))
    for verts, faces in _extrude(walls, base, base + WALL_HEIGHT):
        parts.append((verts, faces, _CAT["wall"], instance))
    instance += 1
    for door in plan.doors:  # the lintel over each doorway, as thick as its wall
        for verts, faces in _extrude(
            door.intersection(solid).buffer(0), base + DOOR_HEIGHT, base + WALL_HEIGHT
        ):
            parts.append((verts, faces, _CAT["wall"], instance))
        instance += 1
    if top:
        for verts, faces in _extrude(shell, base + WALL_HEIGHT, base + WALL_HEIGHT + SLAB):
            parts.append((verts, faces, _CAT["ceiling"], instance))
        instance += 1
    for room in plan.rooms:
        u0, v0, u1, v1 = room.shape.bounds
        spec = _Room(room.kind, u0, v0, u1, v1, shape=room.shape)
        for obj in _furnish_room(rng, spec, room.doors):
            for (verts, faces), category in obj:
                parts.append((verts + [0.0, 0.0, base], faces, _CAT[category], instance))
            instance += 1
    return instance


def _furnish_room(rng: np.random.Generator, room: _Room, door_zones: list[Any]) -> list[list[Any]]:
    """Furniture of one room, each inner list one object instance. The items that say what
    the room is (a kitchen's counter and refrigerator, a bedroom's bed, a living room's sofa)
    go first, on the room's own walls, so that a room's kind can always be told from what is
    in it; then the centre table, the clutter of a large room, and the optional items."""
    required, optional, centre_table = ROOM_TYPES[room.kind]
    blocked: list[Any] = list(door_zones)
    objects: list[list[Any]] = []
    for name in required:
        full = FURNITURE[name]
        # where the full size fits no wall, a smaller one (a single bed, a short counter)
        for item in (full, dataclasses.replace(full, width=max(0.6 * full.width, min(full.width, 0.9)))):
            spot = _wall_spot(rng, room.shape, item, blocked)
            if spot is not None:
                objects += _put(name, spot, blocked, item)
                break
    if centre_table:
        objects += _centre_table(rng, room, blocked)
    objects += _clutter(rng, room, blocked)
    for name in optional:
        if rng.random() < 0.6:
            spot = _wall_spot(rng, room.shape, FURNITURE[name], blocked)
            if spot is not None:
                objects += _put(name, spot, blocked)
    return objects


def _wall_spot(
    rng: np.random.Generator, outline: Any, item: Any, blocked: list[Any]
) -> tuple[float, float, float] | None:
    """(u, v, angle) with the item's back against a wall of a room's ``outline``, clear of
    ``blocked``: every wall (an L has six) is tried, in random order, at positions 0.1 m
    apart in random order. None where nothing fits."""
    from shapely import affinity
    from shapely.geometry import box
    from shapely.geometry.polygon import orient

    inner = orient(outline.buffer(-WALL_THICKNESS / 2 - 0.02, join_style="mitre"), 1.0)
    if inner.is_empty or inner.geom_type != "Polygon":
        return None
    footprint = box(-item.width / 2, -item.depth / 2, item.width / 2, item.depth / 2)
    corners = np.asarray(inner.exterior.coords)
    for k in rng.permutation(len(corners) - 1):
        start, end = corners[k], corners[k + 1]
        length = float(np.hypot(*(end - start)))
        if length < item.width:
            continue
        along = (end - start) / length
        outward = np.array([along[1], -along[0]])  # right of a counter-clockwise boundary
        # the item's back (local +y) turned onto the outward normal
        angle = math.atan2(-outward[0], outward[1])
        offsets = np.arange(item.width / 2, length - item.width / 2 + 1e-9, 0.1)
        for t in rng.permutation(offsets):
            u, v = start + along * t - outward * (item.depth / 2 + 0.005)
            placed = affinity.translate(
                affinity.rotate(footprint, angle, origin=(0, 0), use_radians=True), u, v
            )
            if inner.contains(placed) and not any(placed.intersects(b) for b in blocked):
                return float(u), float(v), angle
    return None


def _clutter(rng: np.random.Generator, room: _Room, blocked: list[Any]) -> list[list[Any]]:
    """Free-standing shelves and plants in the middle of a large room, which block sight lines
    across it; ``blocked`` gains their footprints."""
    area = room.shape.area if room.shape is not None else (room.u1 - room.u0) * (room.v1 - room.v0)
    objects: list[list[Any]] = []
    for _ in range(int(area // 16)):
        item = FURNITURE["shelf" if rng.random() < 0.6 else "plant"]
        spot = _place(rng, room, item, blocked, against_wall=False)
        if spot is None:
            continue
        u, v, angle = spot
        objects.append(_transform(item.build(item.width, item.depth), u, v, angle))
        blocked.append(_footprint(item, u, v, angle, 0.6))
    return objects
