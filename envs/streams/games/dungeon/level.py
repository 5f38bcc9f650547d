"""The dungeon's levels: the tiles and monsters they are made of, one level's map with its
rooms, items and monsters (:class:`Level`), how a level is generated from the seed as it is
reached (:func:`generate`: 2 x 4 rooms on a 16 x 32 grid, joined by a spanning tree of
corridors; the stairs room is a leaf behind the one locked door), and walking distances over
its map (:class:`Paths`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

ROWS, COLS, TILE = 16, 32, 8
MAX_MONSTERS = 8

# tile ids
VOID, FLOOR, WALL, CORRIDOR, DOOR, LOCKED, STAIRS, FOG, HERO = range(9)
MONSTER_TILES = {"rat": 9, "goblin": 10, "skeleton": 11, "orc": 12, "slime": 13}
ITEM_TILES = {"key": 14, "potion": 15, "gold": 16, "sword": 17, "shield": 18}
BURST, SPARKLE = 19, 20
N_TILES = 21
PASSABLE = np.zeros(N_TILES, bool)
PASSABLE[[FLOOR, CORRIDOR, DOOR, STAIRS]] = True

MONSTERS: dict[str, tuple[int, int, float]] = {
    "rat": (1, 1, 0.5),
    "slime": (2, 1, 0.5),
    "goblin": (2, 1, 0.6),
    "skeleton": (3, 2, 0.5),
    "orc": (4, 2, 0.55),
}
"""kind -> (hp, damage, chance to hit)."""
DEPTH_MONSTERS = (("rat", "slime", "goblin"), ("goblin", "skeleton", "slime"), ("skeleton", "orc", "goblin"))
LEVEL_NAMES = (
    "The Damp Cellars", "Fungal Caves", "The Old Crypts", "Sunken Halls", "Ember Vaults",
    "The Bone Pits", "Mirror Mines", "Frost Tunnels", "The Deep Library", "Ash Warrens",
)  # fmt: skip


@dataclass
class Room:
    top: int
    left: int
    bottom: int
    right: int
    """Wall rectangle, inclusive."""

    @property
    def centre(self) -> tuple[int, int]:
        return (self.top + self.bottom) // 2, (self.left + self.right) // 2

    def interior(self) -> list[tuple[int, int]]:
        return [(r, c) for r in range(self.top + 1, self.bottom) for c in range(self.left + 1, self.right)]


@dataclass
class Item:
    row: int
    col: int
    kind: str
    amount: int = 1
    taken: float = math.inf


@dataclass
class Monster:
    kind: str
    row: int
    col: int
    hp: int
    slot: int
    damage: int = 1
    awake: bool = False
    alive: bool = True
    ready: int = 0
    """Step at which it may next act."""


@dataclass
class Level:
    """One level's map and what happened to it (reveal, door and pick-up times)."""

    number: int
    name: str
    start: float
    grid: NDArray[np.uint8]
    rooms: list[Room]
    room_of: NDArray[np.int8]
    entrance: tuple[int, int]
    stairs: tuple[int, int]
    locked_door: tuple[int, int]
    stairs_room: int
    items: list[Item]
    monsters: list[Monster]
    reveal: NDArray[np.float32] = field(default_factory=lambda: np.full((ROWS, COLS), np.inf, np.float32))
    door_open: float = math.inf
    kills: list[tuple[float, int, int]] = field(default_factory=list)

    @property
    def key(self) -> Item:
        return next(i for i in self.items if i.kind == "key")


class Paths:
    """Walking distances on one map, by BFS over its walkable tiles only (a compact
    adjacency list), cached per source: the hero asks "how far / which way" thousands of
    times per level, from a few dozen tiles."""

    def __init__(self, passable: NDArray[np.bool_]) -> None:
        self.cells = np.flatnonzero(passable.ravel())
        self.index = np.full(ROWS * COLS, -1, np.int64)
        self.index[self.cells] = np.arange(len(self.cells))
        grid = self.index.reshape(ROWS, COLS)
        rows, cols = [], []
        for a, b in ((grid[:, :-1], grid[:, 1:]), (grid[:-1, :], grid[1:, :])):
            both = (a >= 0) & (b >= 0)
            rows.append(a[both])
            cols.append(b[both])
        self.neighbours: list[list[int]] = [[] for _ in range(len(self.cells))]
        for a, b in zip(np.concatenate(rows).tolist(), np.concatenate(cols).tolist(), strict=True):
            self.neighbours[a].append(b)
            self.neighbours[b].append(a)
        self._cache: dict[tuple[int, int], NDArray[np.int16]] = {}

    def _row(self, i: int) -> NDArray[np.int32]:
        neighbours = self.neighbours
        dist = [-1] * len(neighbours)
        dist[i] = 0
        frontier, d = [i], 0
        while frontier:
            d += 1
            ahead = []
            for u in frontier:
                for v in neighbours[u]:
                    if dist[v] < 0:
                        dist[v] = d
                        ahead.append(v)
            frontier = ahead
        return np.asarray(dist, np.int32)

    def field(self, source: tuple[int, int]) -> NDArray[np.int16]:
        """Steps from ``source`` to every tile (-1 where unreachable); a source that is not
        walkable itself (a locked door) is reached through its walkable neighbours."""
        cached = self._cache.get(source)
        if cached is not None:
            return cached
        out = np.full(ROWS * COLS, -1, np.int16)
        r, c = source
        i = int(self.index[r * COLS + c])
        if i >= 0:
            out[self.cells] = self._row(i)
        else:
            best: NDArray[np.int32] | None = None
            for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= nr < ROWS and 0 <= nc < COLS and self.index[nr * COLS + nc] >= 0:
                    row = self._row(int(self.index[nr * COLS + nc]))
                    row = np.where(row >= 0, row + 1, -1)
                    best = (
                        row if best is None else np.where((best < 0) | ((row >= 0) & (row < best)), row, best)
                    )
            if best is not None:
                out[self.cells] = best
            out[r * COLS + c] = 0
        field = out.reshape(ROWS, COLS)
        field.setflags(write=False)
        self._cache[source] = field
        return field


def step_towards(dist: NDArray[np.int16], here: tuple[int, int]) -> tuple[int, int] | None:
    """The neighbour one step nearer the BFS source, or None at the source/unreachable."""
    r, c = here
    d = int(dist[r, c])
    if d <= 0:
        return None
    for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if 0 <= nr < ROWS and 0 <= nc < COLS and dist[nr, nc] == d - 1:
            return nr, nc
    return None


def generate(rng: np.random.Generator, number: int, start: float) -> Level:
    """A level: 2 x 4 rooms joined by a random spanning tree (plus a loop or two), the stairs
    room a leaf of it behind the locked door, the key elsewhere."""
    grid = np.full((ROWS, COLS), VOID, np.uint8)
    room_of = np.full((ROWS, COLS), -1, np.int8)
    rooms: list[Room] = []
    for cell in range(8):
        ci, cj = divmod(cell, 4)
        height, width = int(rng.integers(5, 7)), int(rng.integers(5, 7))
        top = 8 * ci + 1 + int(rng.integers(0, 7 - height))
        left = 8 * cj + 1 + int(rng.integers(0, 7 - width))
        room = Room(top, left, top + height - 1, left + width - 1)
        rooms.append(room)
        grid[room.top : room.bottom + 1, room.left : room.right + 1] = WALL
        grid[room.top + 1 : room.bottom, room.left + 1 : room.right] = FLOOR
        room_of[room.top : room.bottom + 1, room.left : room.right + 1] = cell
    neighbours = {
        cell: [
            n
            for n in (cell - 4, cell + 4, cell - 1 if cell % 4 else -1, cell + 1 if cell % 4 < 3 else -1)
            if 0 <= n < 8
        ]
        for cell in range(8)
    }
    entrance_room = int(rng.integers(0, 8))
    seen, edges, stack = {entrance_room}, [], [entrance_room]
    while stack:
        here = stack[-1]
        options = [n for n in neighbours[here] if n not in seen]
        if not options:
            stack.pop()
            continue
        nxt = options[int(rng.integers(0, len(options)))]
        edges.append((here, nxt))
        seen.add(nxt)
        stack.append(nxt)
    degree = {cell: sum(cell in e for e in edges) for cell in range(8)}
    leaves = [cell for cell in range(8) if degree[cell] == 1 and cell != entrance_room]
    stairs_room = leaves[int(rng.integers(0, len(leaves)))]
    extra = [
        (a, b)
        for a in range(8)
        for b in neighbours[a]
        if a < b and (a, b) not in edges and (b, a) not in edges and stairs_room not in (a, b)
    ]
    for index in rng.permutation(len(extra))[: int(rng.integers(1, 3))]:
        edges.append(extra[int(index)])
    locked_door = (0, 0)
    for a, b in edges:
        door_a, door_b = corridor(grid, rooms[a], rooms[b], rng)
        if stairs_room == a:
            locked_door = door_a
        elif stairs_room == b:
            locked_door = door_b
    grid[locked_door] = LOCKED
    entrance = rooms[entrance_room].centre
    stairs_cells = rooms[stairs_room].interior()
    stairs = stairs_cells[int(rng.integers(0, len(stairs_cells)))]
    grid[stairs] = STAIRS
    occupied = {entrance, stairs}
    items: list[Item] = []
    monsters: list[Monster] = []

    def free_cell(room: Room) -> tuple[int, int] | None:
        cells = [p for p in room.interior() if p not in occupied]
        if not cells:
            return None
        chosen = cells[int(rng.integers(0, len(cells)))]
        occupied.add(chosen)
        return chosen

    key_rooms = [r for r in range(8) if r not in (stairs_room, entrance_room)]
    key_room = key_rooms[int(rng.integers(0, len(key_rooms)))]
    key_cell = free_cell(rooms[key_room])
    assert key_cell is not None
    items.append(Item(*key_cell, "key"))
    kinds = DEPTH_MONSTERS[min(number - 1, len(DEPTH_MONSTERS) - 1)]
    for index, room in enumerate(rooms):
        for kind, chance in (("potion", 0.15), ("gold", 0.45), ("sword", 0.1), ("shield", 0.1)):
            if rng.random() < chance and (spot := free_cell(room)) is not None:
                amount = int(rng.integers(5, 30)) if kind == "gold" else 1
                items.append(Item(*spot, kind, amount))
        if index == entrance_room:
            continue
        for _ in range(int(rng.choice(3, p=[0.3, 0.45, 0.25]))):
            if len(monsters) < MAX_MONSTERS and (spot := free_cell(room)) is not None:
                kind = kinds[int(rng.integers(0, len(kinds)))]
                hp, damage, _ = MONSTERS[kind]
                tougher = (number - 1) // 6  # deeper levels breed tougher monsters
                hp, damage = min(hp + tougher, 8), min(damage + tougher // 3, 3)
                monsters.append(Monster(kind, *spot, hp, len(monsters), damage))
    name = LEVEL_NAMES[(number - 1 + int(rng.integers(0, 3))) % len(LEVEL_NAMES)]
    return Level(
        number, name, start, grid, rooms, room_of, entrance, stairs, locked_door, stairs_room, items, monsters
    )


def corridor(
    grid: NDArray[np.uint8], a: Room, b: Room, rng: np.random.Generator
) -> tuple[tuple[int, int], ...]:
    """Carve an L-shaped corridor between two neighbouring rooms; returns their two doors."""
    horizontal = abs(a.centre[1] - b.centre[1]) > abs(a.centre[0] - b.centre[0])
    if horizontal:
        first, second = (a, b) if a.left < b.left else (b, a)
        ra = int(rng.integers(first.top + 1, first.bottom))
        rb = int(rng.integers(second.top + 1, second.bottom))
        door1, door2 = (ra, first.right), (rb, second.left)
        mid = int(rng.integers(first.right + 1, second.left))
        cells = [(ra, c) for c in range(first.right + 1, mid + 1)]
        cells += [(r, mid) for r in range(min(ra, rb), max(ra, rb) + 1)]
        cells += [(rb, c) for c in range(mid, second.left)]
    else:
        first, second = (a, b) if a.top < b.top else (b, a)
        ca = int(rng.integers(first.left + 1, first.right))
        cb = int(rng.integers(second.left + 1, second.right))
        door1, door2 = (first.bottom, ca), (second.top, cb)
        mid = int(rng.integers(first.bottom + 1, second.top))
        cells = [(r, ca) for r in range(first.bottom + 1, mid + 1)]
        cells += [(mid, c) for c in range(min(ca, cb), max(ca, cb) + 1)]
        cells += [(r, cb) for r in range(mid, second.top)]
    for cell in cells:
        if grid[cell] == VOID:
            grid[cell] = CORRIDOR
    grid[door1] = DOOR
    grid[door2] = DOOR
    return (door1, door2) if first is a else (door2, door1)
