"""Seeded procedural houses: ``procedural:seed=N[,rooms=K]``.

A house is a corridor with rooms on both sides. The floor plan is built with shapely
(room rectangles, walls as the house outline minus room interiors and doorways) and
extruded with trimesh; furniture from :data:`FURNITURE` is placed per room type against
walls or around tables, kept clear of doorways. Everything is drawn from one
``numpy.random.Generator`` seeded by ``seed``, so a seed always gives the same mesh, byte
for byte. The plan is laid out z-up (plan u, v; height w) and rotated into Habitat's y-up
frame at the end, so world x = u and world z = -v.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.errors import SceneError
from embodia.sim.geometry import Z_UP_TO_Y_UP
from embodia.sim.scene import CATEGORIES, PROCEDURAL_PREFIX, Region, Scene, concatenate

WALL_HEIGHT = 2.6
WALL_THICKNESS = 0.12
DOOR_WIDTH = 0.9
DOOR_HEIGHT = 2.1
SLAB = 0.1
MIN_ROOMS, MAX_ROOMS = 2, 8

Part = tuple[NDArray[np.float64], NDArray[np.int64], int, int]
"""(vertices, faces, category id, instance id) in the z-up plan frame."""


def parse_procedural_spec(spec: str) -> dict[str, int]:
    """``"procedural:seed=3,rooms=5"`` -> ``{"seed": 3, "rooms": 5}`` (rooms optional);
    ``floors=F`` asks for a v2 house (:mod:`embodia.sim.houses`, 6..20 rooms)."""
    body = spec[len(PROCEDURAL_PREFIX) :] if spec.startswith(PROCEDURAL_PREFIX) else spec
    expected = "expected procedural:seed=N[,rooms=K][,floors=F]"
    params: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in ("seed", "rooms", "floors"):
            raise SceneError(f"invalid procedural spec {spec!r}: {expected}")
        try:
            params[key.strip()] = int(value)
        except ValueError:
            raise SceneError(f"invalid procedural spec {spec!r}: {key.strip()} must be an integer") from None
    if "seed" not in params:
        raise SceneError(f"invalid procedural spec {spec!r}: seed=N is required")
    rooms = params.get("rooms")
    low, high = (6, 20) if "floors" in params else (MIN_ROOMS, MAX_ROOMS)
    if rooms is not None and not low <= rooms <= high:
        raise SceneError(f"invalid procedural spec {spec!r}: rooms must be in {low}..{high}")
    if params.get("floors", 1) not in (1, 2):
        raise SceneError(f"invalid procedural spec {spec!r}: floors must be 1 or 2")
    return params


# ------------------------------------------------------------------ primitives


def box_mesh(
    x0: float, y0: float, z0: float, x1: float, y1: float, z1: float
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Axis-aligned box (outward winding) in the local z-up frame."""
    v = np.array([[x, y, z] for z in (z0, z1) for y in (y0, y1) for x in (x0, x1)], dtype=np.float64)
    f = np.array(
        [
            [0, 2, 1], [1, 2, 3],  # bottom
            [4, 5, 6], [5, 7, 6],  # top
            [0, 1, 4], [1, 5, 4],  # -y
            [2, 6, 3], [3, 6, 7],  # +y
            [0, 4, 2], [2, 4, 6],  # -x
            [1, 3, 5], [3, 7, 5],  # +x
        ],
        dtype=np.int64,
    )  # fmt: skip
    return v, f


def _cylinder(
    cx: float, cy: float, z0: float, z1: float, radius: float, sections: int = 16
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    import trimesh

    mesh = trimesh.creation.cylinder(radius=radius, height=z1 - z0, sections=sections)
    v = np.asarray(mesh.vertices, dtype=np.float64) + [cx, cy, (z0 + z1) / 2.0]
    return v, np.asarray(mesh.faces, dtype=np.int64)


def _sphere(cx: float, cy: float, cz: float, radius: float) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    import trimesh

    mesh = trimesh.creation.icosphere(subdivisions=1, radius=radius)
    return np.asarray(mesh.vertices, dtype=np.float64) + [cx, cy, cz], np.asarray(mesh.faces, dtype=np.int64)


def _extrude(polygon: object, z0: float, z1: float) -> list[tuple[NDArray[np.float64], NDArray[np.int64]]]:
    import trimesh

    geoms = getattr(polygon, "geoms", [polygon])
    out = []
    for geom in geoms:
        if geom.is_empty or geom.area < 1e-6:
            continue
        mesh = trimesh.creation.extrude_polygon(geom, height=z1 - z0)
        out.append(
            (
                np.asarray(mesh.vertices, dtype=np.float64) + [0.0, 0.0, z0],
                np.asarray(mesh.faces, dtype=np.int64),
            )
        )
    return out


# ------------------------------------------------------------------ furniture
# Each builder returns boxes in a local frame: footprint centred on the origin, width along
# local x, depth along local y, the back (the side that goes against a wall) at +y.

Piece = tuple[tuple[NDArray[np.float64], NDArray[np.int64]], str]


@dataclass(frozen=True)
class Furniture:
    width: float
    depth: float
    build: Callable[[float, float], list[Piece]]


def _legs(w: float, d: float, z: float, leg: float, category: str) -> list[Piece]:
    hw, hd = w / 2 - leg, d / 2 - leg
    return [
        (box_mesh(x - leg / 2, y - leg / 2, 0.0, x + leg / 2, y + leg / 2, z), category)
        for x in (-hw, hw)
        for y in (-hd, hd)
    ]


def _table(height: float, category: str) -> Callable[[float, float], list[Piece]]:
    def build(w: float, d: float) -> list[Piece]:
        top = (box_mesh(-w / 2, -d / 2, height - 0.04, w / 2, d / 2, height), category)
        return [top, *_legs(w, d, height - 0.04, 0.05, category)]

    return build


def _chair(w: float, d: float) -> list[Piece]:
    seat = (box_mesh(-w / 2, -d / 2, 0.42, w / 2, d / 2, 0.47), "chair")
    back = (box_mesh(-w / 2, d / 2 - 0.05, 0.47, w / 2, d / 2, 0.95), "chair")
    return [seat, back, *_legs(w, d, 0.42, 0.04, "chair")]


def _bed(w: float, d: float) -> list[Piece]:
    return [
        (box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2 - 0.08, 0.5), "bed"),
        (box_mesh(-w / 2, d / 2 - 0.08, 0.0, w / 2, d / 2, 1.05), "bed"),
        (box_mesh(-w / 2 + 0.15, d / 2 - 0.5, 0.5, w / 2 - 0.15, d / 2 - 0.12, 0.62), "bed"),
    ]


def _sofa(w: float, d: float) -> list[Piece]:
    return [
        (box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2, 0.45), "sofa"),
        (box_mesh(-w / 2, d / 2 - 0.2, 0.45, w / 2, d / 2, 0.85), "sofa"),
        (box_mesh(-w / 2, -d / 2, 0.45, -w / 2 + 0.18, d / 2 - 0.2, 0.65), "sofa"),
        (box_mesh(w / 2 - 0.18, -d / 2, 0.45, w / 2, d / 2 - 0.2, 0.65), "sofa"),
    ]


def _block(height: float, category: str) -> Callable[[float, float], list[Piece]]:
    def build(w: float, d: float) -> list[Piece]:
        return [(box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2, height), category)]

    return build


def _tv(w: float, d: float) -> list[Piece]:
    return [
        (box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2, 0.5), "cabinet"),
        (box_mesh(-w / 2 + 0.1, d / 2 - 0.12, 0.55, w / 2 - 0.1, d / 2 - 0.05, 1.25), "tv"),
        (box_mesh(-0.1, d / 2 - 0.2, 0.5, 0.1, d / 2 - 0.1, 0.55), "tv"),
    ]


def _toilet(w: float, d: float) -> list[Piece]:
    return [
        (_cylinder(0.0, -0.05, 0.0, 0.42, w / 2 - 0.02), "toilet"),
        (box_mesh(-w / 2, d / 2 - 0.2, 0.0, w / 2, d / 2, 0.8), "toilet"),
    ]


def _sink(w: float, d: float) -> list[Piece]:
    return [
        (box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2, 0.8), "cabinet"),
        (box_mesh(-w / 2 + 0.05, -d / 2 + 0.05, 0.8, w / 2 - 0.05, d / 2 - 0.05, 0.88), "sink"),
    ]


def _kitchen_counter(w: float, d: float) -> list[Piece]:
    return [
        (box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2, 0.9), "counter"),
        (box_mesh(-0.35, -d / 2 + 0.08, 0.9, 0.35, d / 2 - 0.1, 0.95), "sink"),
    ]


def _plant(w: float, d: float) -> list[Piece]:
    r = min(w, d) / 2
    return [
        (_cylinder(0.0, 0.0, 0.0, 0.4, r * 0.55), "plant"),
        (_sphere(0.0, 0.0, 0.85, r), "plant"),
    ]


def _bathtub(w: float, d: float) -> list[Piece]:
    return [
        (box_mesh(-w / 2, -d / 2, 0.0, w / 2, d / 2, 0.12), "bathtub"),
        (box_mesh(-w / 2, -d / 2, 0.12, w / 2, -d / 2 + 0.08, 0.58), "bathtub"),
        (box_mesh(-w / 2, d / 2 - 0.08, 0.12, w / 2, d / 2, 0.58), "bathtub"),
        (box_mesh(-w / 2, -d / 2 + 0.08, 0.12, -w / 2 + 0.08, d / 2 - 0.08, 0.58), "bathtub"),
        (box_mesh(w / 2 - 0.08, -d / 2 + 0.08, 0.12, w / 2, d / 2 - 0.08, 0.58), "bathtub"),
    ]


FURNITURE: dict[str, Furniture] = {
    "bed": Furniture(1.6, 2.05, _bed),
    "sofa": Furniture(2.0, 0.9, _sofa),
    "chair": Furniture(0.48, 0.48, _chair),
    "dining_table": Furniture(1.4, 0.9, _table(0.75, "table")),
    "coffee_table": Furniture(1.0, 0.55, _table(0.45, "table")),
    "desk": Furniture(1.2, 0.6, _table(0.75, "desk")),
    "cabinet": Furniture(1.0, 0.5, _block(0.9, "cabinet")),
    "wardrobe": Furniture(1.2, 0.6, _block(2.0, "cabinet")),
    "toilet": Furniture(0.42, 0.68, _toilet),
    "sink": Furniture(0.6, 0.48, _sink),
    "tv": Furniture(1.3, 0.45, _tv),
    "plant": Furniture(0.45, 0.45, _plant),
    "bathtub": Furniture(1.7, 0.75, _bathtub),
    "shelf": Furniture(0.9, 0.35, _block(1.8, "shelf")),
    "counter": Furniture(2.2, 0.6, _kitchen_counter),
    "refrigerator": Furniture(0.7, 0.7, _block(1.8, "refrigerator")),
}

# Per room type: items against walls (required first, then optional ones drawn with p=0.6)
# and whether a table with chairs stands in the middle.
ROOM_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "living": (("sofa", "tv"), ("shelf", "plant", "cabinet", "plant"), False),
    "bedroom": (("bed", "wardrobe"), ("desk", "plant", "cabinet"), False),
    "kitchen": (("counter", "refrigerator"), ("cabinet", "plant"), True),
    "bathroom": (("toilet", "sink"), ("bathtub", "plant"), False),
    "dining": (("cabinet",), ("plant", "shelf", "plant"), True),
    "office": (("desk", "shelf"), ("cabinet", "plant", "sofa"), False),
}
_ROOM_ORDER = ("living", "kitchen", "bedroom", "bathroom", "bedroom", "dining", "office", "bedroom")


@dataclass
class _Room:
    kind: str
    u0: float
    v0: float
    u1: float
    v1: float
    shape: Any | None = None
    """The room's outline when it is not the rectangle (v2 houses' L-shaped rooms)."""


def _room_plan(
    rng: np.random.Generator, n_rooms: int
) -> tuple[list[_Room], tuple[float, float, float, float]]:
    """Rooms along both sides of a corridor; returns rooms and the corridor rectangle."""
    kinds = list(_ROOM_ORDER[:n_rooms])
    order = rng.permutation(len(kinds))
    kinds = [kinds[i] for i in order]
    corridor_width = float(rng.uniform(1.3, 1.7))
    n_north = math.ceil(n_rooms / 2)
    rows = [kinds[:n_north], kinds[n_north:]]
    rooms: list[_Room] = []
    lengths = []
    for side, row in enumerate(rows):
        u = 0.0
        for kind in row:
            width = float(rng.uniform(3.2, 4.8))
            depth = float(rng.uniform(3.2, 4.6))
            if side == 0:
                rooms.append(_Room(kind, u, corridor_width, u + width, corridor_width + depth))
            else:
                rooms.append(_Room(kind, u, -depth, u + width, 0.0))
            u += width
        lengths.append(u)
    return rooms, (0.0, 0.0, max(lengths), corridor_width)


def _place(
    rng: np.random.Generator,
    room: _Room,
    item: Furniture,
    blocked: list[object],
    against_wall: bool = True,
) -> tuple[float, float, float] | None:
    """Find (u, v, angle) for an item in a room, clear of ``blocked`` footprints."""
    from shapely import affinity
    from shapely.geometry import box

    outline = room.shape if room.shape is not None else box(room.u0, room.v0, room.u1, room.v1)
    inner = outline.buffer(-WALL_THICKNESS / 2 - 0.02)
    iu0, iv0, iu1, iv1 = inner.bounds
    footprint = box(-item.width / 2, -item.depth / 2, item.width / 2, item.depth / 2)
    for _ in range(40):
        if against_wall:
            side = int(rng.integers(4))
            # Back (+y local) against the wall: angle turns local +y to the wall's outward normal.
            angle, (lo, hi) = [
                (math.pi, (iu0, iu1)),  # south wall (v = iv0), back points -v
                (math.pi / 2, (iv0, iv1)),  # east wall (u = iu1), back points +u
                (0.0, (iu0, iu1)),  # north wall (v = iv1), back points +v
                (-math.pi / 2, (iv0, iv1)),  # west wall (u = iu0), back points -u
            ][side]
            half = item.width / 2
            if hi - lo < 2 * half:
                continue
            t = float(rng.uniform(lo + half, hi - half))
            u, v = [
                (t, iv0 + item.depth / 2),
                (iu1 - item.depth / 2, t),
                (t, iv1 - item.depth / 2),
                (iu0 + item.depth / 2, t),
            ][side]
        else:
            angle = float(rng.choice([0.0, math.pi / 2]))
            u = float(rng.uniform(iu0 + 1.2, iu1 - 1.2)) if iu1 - iu0 > 2.4 else (iu0 + iu1) / 2
            v = float(rng.uniform(iv0 + 1.2, iv1 - 1.2)) if iv1 - iv0 > 2.4 else (iv0 + iv1) / 2
        placed = affinity.translate(affinity.rotate(footprint, angle, origin=(0, 0), use_radians=True), u, v)
        if not inner.contains(placed):
            continue
        if any(placed.intersects(b) for b in blocked):
            continue
        return u, v, angle
    return None


def _transform(pieces: list[Piece], u: float, v: float, angle: float) -> list[Piece]:
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return [((verts @ rot.T + [u, v, 0.0], faces), cat) for (verts, faces), cat in pieces]


def _footprint(item: Furniture, u: float, v: float, angle: float, margin: float) -> object:
    from shapely import affinity
    from shapely.geometry import box

    fp = box(
        -item.width / 2 - margin,
        -item.depth / 2 - margin,
        item.width / 2 + margin,
        item.depth / 2 + margin,
    )
    return affinity.translate(affinity.rotate(fp, angle, origin=(0, 0), use_radians=True), u, v)


def _furnish(rng: np.random.Generator, room: _Room, door_zones: list[object]) -> list[list[Piece]]:
    """Furniture of one room; each inner list is one object instance."""
    required, optional, centre_table = ROOM_TYPES[room.kind]
    names = list(required) + [n for n in optional if rng.random() < 0.6]
    blocked: list[object] = list(door_zones)
    objects: list[list[Piece]] = []
    if centre_table:
        objects += _centre_table(rng, room, blocked)
    for name in names:
        spot = _place(rng, room, FURNITURE[name], blocked)
        if spot is not None:
            objects += _put(name, spot, blocked)
    return objects


def _centre_table(rng: np.random.Generator, room: _Room, blocked: list[object]) -> list[list[Piece]]:
    """A dining table with 2-4 chairs in the middle of a room, if one fits clear of
    ``blocked`` (which gains its footprint)."""
    table = FURNITURE["dining_table"]
    spot = _place(rng, room, table, blocked, against_wall=False)
    if spot is None:
        return []
    u, v, angle = spot
    objects = [_transform(table.build(table.width, table.depth), u, v, angle)]
    chair = FURNITURE["chair"]
    # Chairs on the two long sides, facing the table (their backs away from it).
    offsets = [(-0.35, 1), (0.35, 1), (-0.35, -1), (0.35, -1)]
    for dx, side in offsets[: int(rng.integers(2, 5))]:
        dy = side * (table.depth / 2 + 0.2)
        c, s = math.cos(angle), math.sin(angle)
        cu, cv = u + c * dx - s * dy, v + s * dx + c * dy
        chair_angle = angle if side > 0 else angle + math.pi
        objects.append(_transform(chair.build(chair.width, chair.depth), cu, cv, chair_angle))
    blocked.append(_footprint(table, u, v, angle, 0.75))
    return objects


def _put(
    name: str, spot: tuple[float, float, float], blocked: list[object], item: Furniture | None = None
) -> list[list[Piece]]:
    """The item ``name`` (``FURNITURE[name]`` or a resized ``item``) built at ``spot``
    (u, v, angle), a desk with its chair; ``blocked`` gains its footprint."""
    item = FURNITURE[name] if item is None else item
    u, v, angle = spot
    objects = [_transform(item.build(item.width, item.depth), u, v, angle)]
    blocked.append(_footprint(item, u, v, angle, 0.3))
    if name == "desk":
        chair = FURNITURE["chair"]
        c, s = math.cos(angle), math.sin(angle)
        dy = -(item.depth / 2 + 0.1)
        objects.append(_transform(chair.build(chair.width, chair.depth), u - s * dy, v + c * dy, angle))
    return objects


def generate_house(seed: int, rooms: int | None = None) -> Scene:
    """Generate the procedural house for ``seed`` (2-8 rooms; drawn from the seed if None)."""
    from shapely.geometry import box
    from shapely.ops import unary_union

    if not isinstance(seed, int | np.integer) or seed < 0:
        raise SceneError(f"procedural seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    n_rooms = int(rng.integers(3, 7)) if rooms is None else rooms
    if not MIN_ROOMS <= n_rooms <= MAX_ROOMS:
        raise SceneError(f"procedural houses have {MIN_ROOMS}..{MAX_ROOMS} rooms, got {n_rooms}")
    room_list, corridor = _room_plan(rng, n_rooms)
    t = WALL_THICKNESS
    cells = [box(r.u0, r.v0, r.u1, r.v1) for r in room_list] + [box(*corridor)]
    outline = unary_union(cells).buffer(t / 2, join_style="mitre")
    interiors = [c.buffer(-t / 2, join_style="mitre") for c in cells]

    doors: list[tuple[float, float, float, float]] = []  # (u0, v0, u1, v1) cut through walls
    door_zones: dict[int, list[object]] = {i: [] for i in range(len(room_list))}
    corridor_v1 = corridor[3]
    for i, room in enumerate(room_list):
        hi = min(room.u1, corridor[2]) - 0.25 - DOOR_WIDTH / 2
        lo = room.u0 + 0.25 + DOOR_WIDTH / 2
        du = float(rng.uniform(lo, hi)) if hi > lo else (room.u0 + min(room.u1, corridor[2])) / 2
        wall_v = corridor_v1 if room.v0 >= corridor_v1 - 1e-9 else 0.0
        doors.append((du - DOOR_WIDTH / 2, wall_v - t, du + DOOR_WIDTH / 2, wall_v + t))
        door_zones[i].append(
            box(du - DOOR_WIDTH / 2 - 0.2, wall_v - 1.1, du + DOOR_WIDTH / 2 + 0.2, wall_v + 1.1)
        )
    # Some neighbouring rooms on the same side also get a connecting door (loops in the plan).
    for i, (a, b) in enumerate(zip(room_list, room_list[1:], strict=False)):
        same_side = (a.v0 >= corridor_v1 - 1e-9) == (b.v0 >= corridor_v1 - 1e-9)
        if not same_side or abs(a.u1 - b.u0) > 1e-9 or rng.random() > 0.35:
            continue
        v_lo, v_hi = max(a.v0, b.v0) + 0.6 + DOOR_WIDTH / 2, min(a.v1, b.v1) - 0.6 - DOOR_WIDTH / 2
        if v_hi <= v_lo:
            continue
        dv = float(rng.uniform(v_lo, v_hi))
        doors.append((a.u1 - t, dv - DOOR_WIDTH / 2, a.u1 + t, dv + DOOR_WIDTH / 2))
        zone = box(a.u1 - 1.1, dv - DOOR_WIDTH / 2 - 0.2, a.u1 + 1.1, dv + DOOR_WIDTH / 2 + 0.2)
        door_zones[i].append(zone)
        door_zones[i + 1].append(zone)

    walls = outline.difference(unary_union(interiors + [box(*d) for d in doors]))
    cat = {name: i for i, name in enumerate(CATEGORIES)}
    parts: list[Part] = []
    instance = 1
    for verts, faces in _extrude(walls, 0.0, WALL_HEIGHT):
        parts.append((verts, faces, cat["wall"], instance))
        instance += 1
    for u0, v0, u1, v1 in doors:
        # Lintel over the doorway, as thick as the wall it sits in.
        lintel = box(u0, v0, u1, v1).intersection(outline.difference(unary_union(interiors)).buffer(0))
        for verts, faces in _extrude(lintel, DOOR_HEIGHT, WALL_HEIGHT):
            parts.append((verts, faces, cat["wall"], instance))
        instance += 1
    for verts, faces in _extrude(outline, -SLAB, 0.0):
        parts.append((verts, faces, cat["floor"], instance))
    instance += 1
    for verts, faces in _extrude(outline, WALL_HEIGHT, WALL_HEIGHT + SLAB):
        parts.append((verts, faces, cat["ceiling"], instance))
    instance += 1
    for i, room in enumerate(room_list):
        for obj in _furnish(rng, room, door_zones[i]):
            for (verts, faces), category in obj:
                parts.append((verts, faces, cat[category], instance))
            instance += 1

    rooms_arg = "" if rooms is None else f",rooms={rooms}"
    return house_scene(parts, f"house_{seed:04d}", f"{PROCEDURAL_PREFIX}seed={seed}{rooms_arg}")


def house_scene(parts: list[Part], name: str, source: str, regions: Sequence[Region] = ()) -> Scene:
    """A house's parts, laid out z-up in the plan frame, as a y-up scene."""
    rotated = [(v @ Z_UP_TO_Y_UP.T, f, c, k) for v, f, c, k in parts]
    return concatenate(rotated, categories=CATEGORIES, name=name, source=source, regions=regions)
