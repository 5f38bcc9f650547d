"""``dungeon``: a tile-grid crawler. A hero explores rooms under a fog of war, fights the
monsters that wake up, picks up potions, gold, a sword, a shield and the key, unlocks the
door to the stairs room and goes down a level.

Each level is generated from the seed as it is reached (2 x 4 rooms on a 16 x 32 grid,
joined by a spanning tree of corridors; the stairs room is a leaf behind the one locked door).
The hero is an explorer AI stepping at 4 Hz: nearest visible item, else nearest unexplored
room, else the locked door with the key, else the stairs; awake monsters are fought first.
Per step only a few numbers are stored (hero tile, HP, inventory, monster tiles), per level
its map and the time each tile was revealed, so two hours cost well under a megabyte and any
frame is one tile-atlas gather.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.games import commentary
from embodia.envs.streams.games.base import (
    WHITE,
    Colour,
    Frame,
    GameEvent,
    ProceduralGame,
    blend,
    clock_text,
    compass,
    draw_card,
    draw_feed,
    draw_text,
    fill_box,
)
from embodia.envs.streams.games.commentary import Candidate, Composed, Question

STEP = 0.5
"""Seconds per simulation step (the hero moves one tile or swings once a step)."""
ROWS, COLS, TILE = 16, 32, 8
HUD_ROWS = 16
MAX_HP = 10
MAX_MONSTERS = 8
TRANSITION_STEPS = 3
"""Steps between taking the stairs and the next level appearing (the fade)."""
RESPAWN_STEPS = 6

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
HEROES = ("Ayla", "Bram", "Cora", "Dain", "Esme", "Finn", "Greta", "Hale", "Ivo", "Juno")
LEVEL_NAMES = (
    "The Damp Cellars", "Fungal Caves", "The Old Crypts", "Sunken Halls", "Ember Vaults",
    "The Bone Pits", "Mirror Mines", "Frost Tunnels", "The Deep Library", "Ash Warrens",
)  # fmt: skip
NUMBERS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight")

RED: Colour = (225, 30, 30)
ORANGE: Colour = (255, 130, 20)
PURPLE: Colour = (170, 60, 255)
YELLOW: Colour = (255, 220, 60)
GREEN: Colour = (60, 230, 90)
BROWN: Colour = (230, 150, 60)
SKY: Colour = (120, 170, 255)
DARK_RED: Colour = (120, 0, 10)
HUD_BG: Colour = (14, 12, 22)

CALLS: dict[str, tuple[str, ...]] = {
    "room": (
        "{actor} pushes into a new room. {room_note}",
        "New room. {room_note}",
        "Into the next chamber. {room_note}",
        "{actor} reveals another room. {room_note}",
    ),
    "monster": (
        "A {monster} spots {actor}!",
        "Here comes a {monster}!",
        "{Monster} on the attack!",
        "Heads up, a {monster} wakes up.",
    ),
    "damage": (
        "The {monster} hits for {amount}, {hp} HP left.",
        "Ouch, {amount} damage from the {monster}.",
        "{actor} takes a hit, down to {hp}.",
        "That hurt, {hp} HP left.",
    ),
    "kill": (
        "{actor} slays the {monster}!",
        "{Monster} down!",
        "Clean kill on the {monster}.",
        "That's the {monster} dealt with.",
    ),
    "pickup": (
        "{actor} picks up {item_phrase}.",
        "{Item_phrase}, nice find.",
        "Grabbed {item_phrase}!",
    ),
    "potion": (
        "{actor} drinks a potion, back to {hp}.",
        "Quick heal, {hp} HP now.",
        "Potion down, {actor} recovers.",
    ),
    "door": (
        "The locked door swings open!",
        "Key in, door unlocked!",
        "{actor} opens the way to the stairs.",
    ),
    "stairs": (
        "Down the stairs to level {level}!",
        "Level {level}, {level_name}!",
        "{actor} descends to level {level}.",
    ),
    "death": ("{actor} has fallen!", "Oh no, down goes {actor}!", "The {monster} finishes {actor} off!"),
    "card": ("{card_line}", "Quick look: {card_short}"),
}
REACTIONS: dict[str, tuple[str, ...]] = {
    "kill": ("Textbook. Hit and hold the tile.", "That {monster} never stood a chance.", "Efficient work."),
    "damage": ("Needs to be careful now.", "That's a chunk of health gone.", "Getting risky."),
    "pickup": ("Every bit helps down here.", "Smart to grab that."),
    "door": ("Now the real descent begins.", "Good route planning."),
    "stairs": ("Deeper means nastier monsters.", "Clean level, that."),
    "death": ("Pushed too far on low health.", "A harsh lesson."),
    "monster": ("Watch the health bar here.", "This could get messy."),
    "card": ("A steady run so far.", "Solid numbers."),
}
REACTION_CHANCE = {"death": 0.9, "stairs": 0.7, "door": 0.6, "kill": 0.45, "card": 0.5}
CO_SHARE = {"card": 0.5, "room": 0.3, "pickup": 0.25, "damage": 0.25}


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


def _sprite(pattern: str, palette: dict[str, Colour], base: NDArray[np.uint8]) -> NDArray[np.uint8]:
    tile = base.copy()
    for r, row in enumerate(pattern.split()):
        for c, ch in enumerate(row):
            if ch in palette:
                tile[r, c] = palette[ch]
    return tile


def _atlas() -> NDArray[np.uint8]:
    """The tile atlas, ``(N_TILES, 8, 8, 3)``: every frame is ``atlas[tile_grid]``."""
    atlas = np.zeros((N_TILES, TILE, TILE, 3), np.uint8)
    floor = np.full((TILE, TILE, 3), (52, 50, 62), np.uint8)
    floor[::4, ::4] = (70, 68, 82)
    floor[2::4, 2::4] = (62, 60, 74)
    corridor = np.full((TILE, TILE, 3), (40, 38, 46), np.uint8)
    corridor[1::3, 1::3] = (54, 52, 60)
    atlas[VOID] = (12, 10, 16)
    atlas[FLOOR] = floor
    atlas[CORRIDOR] = corridor
    wall = np.full((TILE, TILE, 3), (132, 94, 64), np.uint8)
    wall[3, :] = wall[7, :] = (80, 56, 40)
    wall[:3, 3] = wall[4:7, 7] = (80, 56, 40)
    atlas[WALL] = wall
    door = np.full((TILE, TILE, 3), (150, 90, 30), np.uint8)
    door[:, 0] = door[:, 7] = door[0, :] = (90, 50, 20)
    door[4, 5] = (240, 220, 120)
    atlas[DOOR] = door
    locked = door.copy()
    locked[2:6, 2:6] = (255, 215, 0)
    locked[3:5, 3:5] = (60, 40, 0)
    atlas[LOCKED] = locked
    stairs = floor.copy()
    for r in range(TILE):
        stairs[r, : TILE - r] = (200, 200, 210) if r % 2 == 0 else (110, 110, 125)
    atlas[STAIRS] = stairs
    atlas[FOG] = (2, 2, 6)
    atlas[HERO] = _sprite(
        "..aaaa.. ..asSa.. ...ss... .bbbbbb. s.bbbb.s ..bbbb.. ..b..b.. .bb..bb.",
        {"a": (250, 210, 80), "s": (240, 190, 150), "S": (20, 20, 20), "b": (40, 210, 255)},
        floor,
    )
    blob = "..xxxx.. .xxxxxx. xxexxexx xxxxxxxx xxxxxxxx x.xxxx.x x..xx..x ........"
    colours = {
        "rat": (165, 120, 80),
        "slime": (120, 255, 120),
        "goblin": (40, 170, 40),
        "skeleton": (235, 235, 225),
        "orc": (190, 60, 40),
    }
    for kind, tile in MONSTER_TILES.items():
        atlas[tile] = _sprite(blob, {"x": colours[kind], "e": (255, 30, 30)}, floor)
    atlas[ITEM_TILES["key"]] = _sprite(
        "........ .yyy.... .y.y.... .yyyyyyy .....y.y ........ ........ ........", {"y": (255, 215, 0)}, floor
    )
    atlas[ITEM_TILES["potion"]] = _sprite(
        "...ww... ...ww... ..rrrr.. .rrrrrr. .rrRrrr. .rrrrrr. ..rrrr.. ........",
        {"w": (230, 230, 230), "r": (235, 40, 110), "R": (255, 170, 200)},
        floor,
    )
    atlas[ITEM_TILES["gold"]] = _sprite(
        "........ ..gggg.. .gGGGGg. .gGggGg. .gGggGg. .gGGGGg. ..gggg.. ........",
        {"g": (200, 150, 0), "G": (255, 215, 40)},
        floor,
    )
    atlas[ITEM_TILES["sword"]] = _sprite(
        "......ss .....ss. ....ss.. ...ss... h.ss.... .hs..... .hh..... h..h....",
        {"s": (220, 225, 240), "h": (150, 90, 30)},
        floor,
    )
    atlas[ITEM_TILES["shield"]] = _sprite(
        ".bbbbbb. .bBBBBb. .bBwwBb. .bBwwBb. .bBBBBb. ..bBBb.. ...bb... ........",
        {"b": (40, 60, 200), "B": (80, 120, 255), "w": (240, 240, 240)},
        floor,
    )
    atlas[BURST] = _sprite(
        "m..m..m. .m.m.m.. ..mMm... mmMWMmm. ..mMm... .m.m.m.. m..m..m. ........",
        {"m": (200, 60, 255), "M": (255, 140, 255), "W": (255, 255, 255)},
        floor,
    )
    atlas[SPARKLE] = _sprite(
        "...y.... ...y.... yyyWyyy. ...y.... ...y.... ......y. .....yWy ......y.",
        {"y": (255, 230, 80), "W": (255, 255, 255)},
        floor,
    )
    return atlas


class _Paths:
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


def _step_towards(dist: NDArray[np.int16], here: tuple[int, int]) -> tuple[int, int] | None:
    """The neighbour one step nearer the BFS source, or None at the source/unreachable."""
    r, c = here
    d = int(dist[r, c])
    if d <= 0:
        return None
    for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if 0 <= nr < ROWS and 0 <= nc < COLS and dist[nr, nc] == d - 1:
            return nr, nc
    return None


def _generate(rng: np.random.Generator, number: int, start: float) -> Level:
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
        door_a, door_b = _corridor(grid, rooms[a], rooms[b], rng)
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


def _corridor(
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


class DungeonGame(ProceduralGame):
    """A grid dungeon crawler with an HP / level / items HUD, a kill feed, and banners."""

    name = "dungeon"
    hud_rows: ClassVar[int] = HUD_ROWS
    calls = CALLS
    reactions = REACTIONS
    reaction_chance = REACTION_CHANCE
    default_reaction_chance = 0.3
    co_share = CO_SHARE
    script_stream = 12
    personas: ClassVar[dict[str, list[str]]] = {
        "solo": ["live dungeon-run caster", "excited", "short lines"],
        "co-commentary": ["play-by-play caster", "takes turns with the analyst", "short lines"],
        "guidance": ["helpful game guide", "gives directions from the map", "step by step"],
    }

    # -- simulation

    def _simulate(self) -> None:
        rng = np.random.default_rng([self.seed, 11])
        self.hero = HEROES[int(rng.integers(0, len(HEROES)))]
        n_steps = int(math.ceil(self.duration / STEP)) + 4
        self._n_steps = n_steps
        # The run writes plain lists (cheap per step), packed into small arrays afterwards.
        self._log: list[tuple[int, int, int, int, tuple[int, ...], tuple[tuple[int, int, int, int], ...]]] = [
            (-1, -1, 0, 0, (0,) * 6, ())
        ] * n_steps
        self.levels: list[Level] = []
        self._atlas = _atlas()
        self._run(rng, n_steps)
        self._row = np.asarray([e[0] for e in self._log], np.int8)
        self._col = np.asarray([e[1] for e in self._log], np.int8)
        self._hp = np.asarray([e[2] for e in self._log], np.int8)
        self._level_index = np.asarray([e[3] for e in self._log], np.int16)
        self._inventory = np.asarray([e[4] for e in self._log], np.int16)
        """keys, potions, gold, sword, shield, kills per step."""
        self._monster_cells = np.full((n_steps, MAX_MONSTERS, 3), -1, np.int8)
        """(row, col, hp) of each monster slot of the current level per step; -1 when dead."""
        for step, entry in enumerate(self._log):
            for slot, r, c, hp in entry[5]:
                self._monster_cells[step, slot] = (r, c, hp)
        del self._log
        self._add_cards(rng)

    def _run(self, rng: np.random.Generator, n_steps: int) -> None:
        hp = MAX_HP
        inv = {"key": 0, "potion": 0, "gold": 0, "sword": 0, "shield": 0, "kills": 0}
        step = 0
        level = _generate(rng, 1, 0.0)
        while True:
            self.levels.append(level)
            step, hp = self._play(rng, level, step, n_steps, hp, inv)
            if step >= n_steps:
                break
            level = _generate(rng, len(self.levels) + 1, (step + TRANSITION_STEPS) * STEP)
            event = self._event(step, "stairs", 0.9, WHITE, level=level.number, level_name=level.name)
            t = event.time
            self.overlays.add("fade", t, t + TRANSITION_STEPS * STEP, colour=(0, 0, 0))
            self.overlays.add(
                "banner", t, t + 3.0, f"LEVEL {level.number}|{level.name.upper()}", (235, 235, 245)
            )
            hp = min(MAX_HP, hp + 3)
            inv["key"] = 0
            for s in range(step, min(step + TRANSITION_STEPS, n_steps)):
                self._record(s, None, hp, inv, len(self.levels), [])
            step += TRANSITION_STEPS

    def _event(
        self, step: int, kind: str, importance: float, flash: Colour | None, **details: Any
    ) -> GameEvent:
        return self._add_event(step * STEP, kind, self.hero, importance, flash, **details)

    def _feed(self, step: int, text: str, colour: Colour) -> None:
        self.overlays.add("feed", step * STEP, step * STEP + 3.0, text, colour)

    def _record(
        self,
        step: int,
        pos: tuple[int, int] | None,
        hp: int,
        inv: dict[str, int],
        level: int,
        monsters: list[Monster],
    ) -> None:
        r, c = pos if pos is not None else (-1, -1)
        items = (inv["key"], inv["potion"], inv["gold"], inv["sword"], inv["shield"], inv["kills"])
        cells = tuple((m.slot, m.row, m.col, m.hp) for m in monsters if m.alive)
        self._log[step] = (r, c, hp, level, items, cells)

    def _play(
        self, rng: np.random.Generator, level: Level, step: int, n_steps: int, hp: int, inv: dict[str, int]
    ) -> tuple[int, int]:
        """Run the hero through one level; returns (step the stairs are taken, hp)."""
        try:
            return self._play_level(rng, level, step, n_steps, hp, inv)
        finally:
            level.reveal = np.asarray(self._reveal, np.float32).reshape(ROWS, COLS)

    def _play_level(
        self, rng: np.random.Generator, level: Level, step: int, n_steps: int, hp: int, inv: dict[str, int]
    ) -> tuple[int, int]:
        index = len(self.levels) - 1
        pos = level.entrance
        now = step * STEP
        self._reveal = [math.inf] * (ROWS * COLS)
        room_of = level.room_of.tolist()
        loot = {(i.row, i.col): i for i in level.items}
        passable = PASSABLE[level.grid]
        self._reveal_room(level, room_of[pos[0]][pos[1]], now)
        self._reveal_near(level, pos, now)
        goal: tuple[int, int] | None = None
        goal_kind = ""
        paths = _Paths(PASSABLE[level.grid])
        last_pos = pos
        dist: NDArray[np.int16] | None = None
        explored = {int(level.room_of[pos])}
        combat_ready = step
        level_start = step
        while step < n_steps:
            now = step * STEP
            if step - level_start > 600:  # a safety valve: never stuck on a level
                return step, hp
            alive = [m for m in level.monsters if m.alive]
            # Planning ignores monsters: one in the way is woken and fought, not walked round.
            here = room_of[pos[0]][pos[1]]
            for m in alive:
                if not m.awake and here >= 0 and room_of[m.row][m.col] == here:
                    m.awake = True
                    m.ready = step + 2
                    self._wake(step, m)
            adjacent = [m for m in alive if m.awake and abs(m.row - pos[0]) + abs(m.col - pos[1]) == 1]
            acted = False
            if hp <= 5 and inv["potion"] > 0:
                inv["potion"] -= 1
                hp = min(MAX_HP, hp + 5)
                self._event(step, "potion", 0.5, GREEN, hp=hp)
                self._feed(step, "HEALED +5", GREEN)
                acted = True
            elif adjacent and step >= combat_ready:
                target = adjacent[0]
                target.hp -= 1 + inv["sword"]
                combat_ready = step + 1
                acted = True
                if target.hp <= 0:
                    target.alive = False
                    inv["kills"] += 1
                    level.kills.append((now, target.row, target.col))
                    self._event(
                        step, "kill", 0.6, PURPLE, monster=target.kind, Monster=target.kind.capitalize()
                    )
                    self._feed(step, f"YOU SLEW THE {target.kind.upper()}", PURPLE)
            elif adjacent:
                acted = True
            if not acted and step % 3 == 2:
                acted = True  # walking pace: two tiles every three steps, so the run has lulls
            if not acted:
                awake = [m for m in alive if m.awake and abs(m.row - pos[0]) + abs(m.col - pos[1]) <= 6]
                if awake:
                    nearest = min(awake, key=lambda m: abs(m.row - pos[0]) + abs(m.col - pos[1]))
                    chase = paths.field((nearest.row, nearest.col))
                    nxt = _step_towards(chase, pos)
                    if nxt is None:
                        awake = []  # out of reach: carry on exploring
                    else:
                        if nxt != (nearest.row, nearest.col):
                            pos = nxt
                        goal = dist = None
                if not awake:
                    if goal is None or dist is None:
                        goal, goal_kind = self._choose_goal(level, pos, paths, inv, explored, now)
                        dist = paths.field(goal) if goal is not None else None
                    if goal is not None and dist is not None:
                        lock = level.locked_door
                        if goal_kind == "door" and abs(lock[0] - pos[0]) + abs(lock[1] - pos[1]) == 1:
                            level.grid[lock] = DOOR
                            passable = PASSABLE[level.grid]
                            paths = _Paths(passable)
                            level.door_open = now
                            inv["key"] = 0
                            self._event(step, "door", 0.65, BROWN)
                            self._feed(step, "DOOR UNLOCKED", BROWN)
                            goal = dist = None
                        else:
                            nxt = _step_towards(dist, pos)
                            blocker = next((m for m in alive if m.alive and (m.row, m.col) == nxt), None)
                            if nxt is None or not passable[nxt]:
                                goal = dist = None
                            elif blocker is not None:
                                if not blocker.awake:
                                    blocker.awake = True
                                    blocker.ready = step + 2
                                    self._wake(step, blocker)
                            else:
                                pos = nxt
                    if goal is not None and pos == goal:
                        goal = dist = None
            if pos != last_pos:
                self._reveal_near(level, pos, now)
                last_pos = pos
            room = room_of[pos[0]][pos[1]]
            if room >= 0 and room not in explored:
                explored.add(room)
                self._reveal_room(level, room, now)
                self._room_event(level, room, step)
            item = loot.get(pos)
            if item is not None and math.isinf(item.taken):
                item.taken = now
                inv[item.kind] += item.amount if item.kind == "gold" else 1
                if item.kind in ("sword", "shield"):
                    inv[item.kind] = 1
                phrase = {
                    "key": "the key",
                    "potion": "a potion",
                    "gold": f"{item.amount} gold",
                    "sword": "a sword",
                    "shield": "a shield",
                }[item.kind]
                importance = {"key": 0.75, "sword": 0.6, "shield": 0.6, "potion": 0.45, "gold": 0.4}[
                    item.kind
                ]
                self._event(
                    step, "pickup", importance, YELLOW, item=item.kind, item_phrase=phrase,
                    Item_phrase=phrase[0].upper() + phrase[1:], amount=item.amount, gold=inv["gold"],
                )  # fmt: skip
                self._feed(step, f"+ {phrase.upper()}", YELLOW)
                goal = dist = None
            if pos == level.stairs and level.door_open <= now:
                self._record(step, pos, hp, inv, index, alive)
                return step + 1, hp
            # monsters act
            for m in alive:
                if not m.alive or not m.awake or step < m.ready:
                    continue
                adjacent_now = abs(m.row - pos[0]) + abs(m.col - pos[1]) == 1
                m.ready = step + (1 if adjacent_now else 2)  # strikes every step, walks every other
                if adjacent_now:
                    damage, chance = m.damage, MONSTERS[m.kind][2]
                    if rng.random() < chance:
                        amount = max(1, damage - inv["shield"]) if damage > 1 else 1
                        hp -= amount
                        self._event(
                            step, "damage", 0.4 + (0.3 if hp <= 4 else 0.0), RED,
                            monster=m.kind, Monster=m.kind.capitalize(), amount=amount, hp=max(hp, 0),
                        )  # fmt: skip
                        if hp <= 0:
                            died = self._event(step, "death", 1.0, DARK_RED, monster=m.kind)
                            self.overlays.add("banner", died.time, died.time + 3.0, "YOU DIED|", RED)
                            for s in range(step, min(step + RESPAWN_STEPS, n_steps)):
                                self._record(s, None, 0, inv, index, alive)
                            step += RESPAWN_STEPS
                            hp, pos = MAX_HP, level.entrance
                            for other in alive:
                                other.awake = False
                            goal = dist = None
                            break
                else:
                    self._monster_step(level, m, pos, alive)
            if step >= n_steps:
                break
            self._record(step, pos, hp, inv, index, alive)
            step += 1
        return step, hp

    def _wake(self, step: int, m: Monster) -> None:
        self._event(step, "monster", 0.5, ORANGE, monster=m.kind, Monster=m.kind.capitalize())
        self._feed(step, f"A {m.kind.upper()} ATTACKS!", ORANGE)

    def _monster_step(self, level: Level, m: Monster, hero: tuple[int, int], alive: list[Monster]) -> None:
        here = abs(m.row - hero[0]) + abs(m.col - hero[1])
        options = []
        for nr, nc in ((m.row - 1, m.col), (m.row + 1, m.col), (m.row, m.col - 1), (m.row, m.col + 1)):
            if not (0 <= nr < ROWS and 0 <= nc < COLS) or (nr, nc) == hero:
                continue
            tile = level.grid[nr, nc]
            if tile not in (FLOOR, CORRIDOR, DOOR) or any(
                o.alive and (o.row, o.col) == (nr, nc) for o in alive
            ):
                continue
            d = abs(nr - hero[0]) + abs(nc - hero[1])
            if d < here:
                options.append((d, nr, nc))
        if options:
            _, m.row, m.col = min(options)

    def _choose_goal(
        self,
        level: Level,
        pos: tuple[int, int],
        paths: _Paths,
        inv: dict[str, int],
        explored: set[int],
        now: float,
    ) -> tuple[tuple[int, int] | None, str]:
        reach = paths.field(pos)
        items = [
            (int(reach[i.row, i.col]), i.row, i.col)
            for i in level.items
            if math.isinf(i.taken) and self._reveal[i.row * COLS + i.col] <= now and reach[i.row, i.col] > 0
        ]
        if items:
            _, r, c = min(items)
            return (r, c), "item"
        rooms = []
        for index, room in enumerate(level.rooms):
            if index in explored:
                continue
            cells = [(int(reach[p]), p) for p in room.interior() if reach[p] > 0]
            if cells:
                rooms.append(min(cells))
        if rooms:
            return min(rooms)[1], "room"
        if level.grid[level.locked_door] == LOCKED and inv["key"]:
            r, c = level.locked_door
            outside = [
                (int(reach[p]), p)
                for p in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
                if 0 <= p[0] < ROWS
                and 0 <= p[1] < COLS
                and reach[p] >= 0
                and level.room_of[p] != level.stairs_room
            ]
            if outside:
                best = min(outside)[1]
                return (best if best != pos else level.locked_door), "door"
        if reach[level.stairs] > 0:
            return level.stairs, "stairs"
        if level.grid[level.locked_door] == LOCKED and inv["key"]:
            return level.locked_door, "door"
        return None, ""

    def _reveal_room(self, level: Level, room: int, now: float) -> None:
        r = level.rooms[room]
        reveal = self._reveal
        for row in range(r.top, r.bottom + 1):
            for col in range(r.left, r.right + 1):
                if reveal[row * COLS + col] > now:
                    reveal[row * COLS + col] = now

    def _reveal_near(self, level: Level, pos: tuple[int, int], now: float) -> None:
        reveal = self._reveal
        for row in range(max(pos[0] - 1, 0), min(pos[0] + 2, ROWS)):
            for col in range(max(pos[1] - 1, 0), min(pos[1] + 2, COLS)):
                if reveal[row * COLS + col] > now:
                    reveal[row * COLS + col] = now

    def _room_event(self, level: Level, room: int, step: int) -> None:
        r = level.rooms[room]
        inside = [
            m for m in level.monsters if m.alive and r.top < m.row < r.bottom and r.left < m.col < r.right
        ]
        loot = [
            i
            for i in level.items
            if math.isinf(i.taken) and r.top < i.row < r.bottom and r.left < i.col < r.right
        ]
        if inside:
            kinds = sorted({m.kind for m in inside})
            what = f"{kinds[0]}s" if len(inside) > 1 and len(kinds) == 1 else "monsters"
            note = (
                f"A {inside[0].kind} inside!"
                if len(inside) == 1
                else f"{NUMBERS[len(inside)]} {what} inside!"
            )
        elif room == level.stairs_room:
            note = "There are the stairs!"
        elif any(i.kind == "key" for i in loot):
            note = "The key is in here!"
        elif loot:
            note = "Some loot in here."
        else:
            note = "Looks empty."
        self._event(step, "room", 0.45 if inside or loot else 0.35, SKY, room_note=note, monsters=len(inside))

    def _add_cards(self, rng: np.random.Generator) -> None:
        """A recap card in the lulls, which colour commentary talks about."""
        blocked = [(e.time - 1, e.time + 4) for e in self.events if e.kind in ("stairs", "death")]
        for t in self._lulls(4.0, 6.0, 9, blocked):
            self._card(rng, t)

    def _card(self, rng: np.random.Generator, t: float) -> None:
        step = self._step(t)
        level = self.levels[int(self._level_index[step])]
        inv = self.inventory_at(t)
        kills, gold, potions = inv["kills"], inv["gold"], inv["potion"]
        unexplored = sum(1 for room in level.rooms if level.reveal[room.centre] > t)
        kind = int(rng.integers(0, 3))
        if kind == 0:
            title, stat = "RUN SO FAR", f"KILLS {kills}   GOLD {gold}"
            line, short = f"{kills} kills and {gold} gold so far.", f"{kills} kills, {gold} gold."
        elif kind == 1:
            rooms = "room" if unexplored == 1 else "rooms"
            title, stat = f"LEVEL {level.number}", f"{unexplored} {rooms.upper()} UNEXPLORED"
            line = f"{NUMBERS[unexplored] if unexplored < 9 else unexplored} {rooms} still unexplored here."
            short = f"{unexplored} {rooms} to go."
        else:
            hp = int(self._hp[step])
            title, stat = "HEALTH", f"HP {hp}/{MAX_HP}   POTIONS {potions}"
            line, short = f"{self.hero} on {hp} HP with {potions} potions.", f"{hp} HP, {potions} potions."
        self._add_card(t, self.hero, title, stat, card_line=line, card_short=short)

    # -- state readers

    def _step(self, time: float) -> int:
        return min(self._n_steps - 1, max(0, int(math.floor(time / STEP + 1e-6))))

    def level_at(self, time: float) -> Level:
        return self.levels[int(self._level_index[self._step(time)])]

    def hero_at(self, time: float) -> tuple[int, int] | None:
        """The hero's tile (row, col) at ``time``; None while between levels or respawning."""
        step = self._step(time)
        if self._row[step] < 0:
            return None
        return int(self._row[step]), int(self._col[step])

    def inventory_at(self, time: float) -> dict[str, int]:
        keys, potions, gold, sword, shield, kills = (int(v) for v in self._inventory[self._step(time)])
        return {
            "key": keys,
            "potion": potions,
            "gold": gold,
            "sword": sword,
            "shield": shield,
            "kills": kills,
        }

    def monsters_at(self, time: float) -> list[tuple[str, int, int, int]]:
        """(kind, row, col, hp) of the monsters alive on the current level at ``time``."""
        step = self._step(time)
        level = self.levels[int(self._level_index[step])]
        out = []
        for m in level.monsters:
            r, c, hp = (int(v) for v in self._monster_cells[step, m.slot])
            if r >= 0:
                out.append((m.kind, r, c, hp))
        return out

    def nearest_monster_at(self, time: float) -> tuple[str, int, int, int] | None:
        """(kind, row, col, hp) of the living monster fewest tiles from the hero at ``time``
        (as the crow flies); None when there is none, or no hero."""
        hero = self.hero_at(time)
        alive = self.monsters_at(time)
        if hero is None or not alive:
            return None
        return min(alive, key=lambda m: abs(m[1] - hero[0]) + abs(m[2] - hero[1]))

    def tiles_at(self, time: float) -> NDArray[np.uint8]:
        """The tile ids drawn at ``time`` (fog, items, monsters and the hero included)."""
        step = self._step(time)
        level = self.levels[int(self._level_index[step])]
        grid = level.grid.copy()
        r, c = level.locked_door
        grid[r, c] = DOOR if level.door_open <= time else LOCKED
        for item in level.items:
            if item.taken > time:
                grid[item.row, item.col] = ITEM_TILES[item.kind]
        cells = self._monster_cells[step]
        for m in level.monsters:
            mr, mc = int(cells[m.slot, 0]), int(cells[m.slot, 1])
            if mr >= 0:
                grid[mr, mc] = MONSTER_TILES[m.kind]
        for when, kr, kc in level.kills:
            if when <= time < when + 1.0:
                grid[kr, kc] = BURST
        grid[level.reveal > time] = FOG
        hero = self.hero_at(time)
        if hero is not None:
            grid[hero] = HERO
            for when, pr, pc in self._pickups(level):
                if when <= time < when + 1.0:
                    for dr, dc in ((-1, -1), (-1, 1), (1, -1), (1, 1)):
                        y, x = pr + dr, pc + dc
                        if 0 <= y < ROWS and 0 <= x < COLS and PASSABLE[grid[y, x]]:
                            grid[y, x] = SPARKLE
        return grid

    def _pickups(self, level: Level) -> list[tuple[float, int, int]]:
        return [(i.taken, i.row, i.col) for i in level.items if not math.isinf(i.taken)]

    def _hud(self, time: float) -> dict[str, Any]:
        step = self._step(time)
        inv = self.inventory_at(time)
        items = ["key"] * inv["key"] + ["potion"] * inv["potion"]
        items += [name for name in ("sword", "shield") if inv[name]]
        return {
            "hp": int(self._hp[step]),
            "max_hp": MAX_HP,
            "level": self.level_at(time).number,
            "items": items,
            "gold": inv["gold"],
            "kills": inv["kills"],
            "clock": clock_text(time),
            **self._hud_overlays(time),
        }

    # -- drawing

    def _render(self, time: float) -> Frame:
        image = np.empty((HUD_ROWS + ROWS * TILE, COLS * TILE, 3), np.uint8)
        tiles = self._atlas[self.tiles_at(time)]
        image[HUD_ROWS:] = tiles.transpose(0, 2, 1, 3, 4).reshape(ROWS * TILE, COLS * TILE, 3)
        self._flash(image, time, alpha=0.4)
        fade = self.overlays.active("fade", time)
        if fade is not None:
            blend(image, (0, 0, 0), 0.85, rows=slice(HUD_ROWS, None))
        card = self.overlays.active("card", time)
        if card is not None:
            draw_card(image, card, 100, 40, 216)
        feed = self.overlays.active("feed", time)
        if feed is not None:
            draw_feed(image, feed, (124, 140), 3, 4, (10, 8, 16), feed.colour)
        banner = self.overlays.active("banner", time)
        if banner is not None:
            title, subtitle = banner.text.split("|")
            fill_box(image, 50, 96, 0, 256, (8, 6, 14))
            fill_box(image, 50, 52, 0, 256, banner.colour)
            fill_box(image, 94, 96, 0, 256, banner.colour)
            draw_text(image, title, 68 if subtitle else 73, 128, banner.colour, scale=2)
            if subtitle:
                draw_text(image, subtitle, 86, 128, WHITE)
        self._draw_hud(image, time)
        return image

    def _draw_hud(self, image: Frame, time: float) -> None:
        step = self._step(time)
        image[:HUD_ROWS] = HUD_BG
        hp = int(self._hp[step])
        draw_text(image, "HP", 8, 3, WHITE, align="left")
        fill_box(image, 4, 12, 20, 72, (60, 16, 20))
        fill_box(image, 5, 11, 21, 21 + 5 * max(hp, 0), (230, 40, 50))
        draw_text(image, f"LV {self.level_at(time).number}", 8, 78, WHITE, align="left")
        inv = self.inventory_at(time)
        x = 108
        for name in ("key", "potion", "sword", "shield"):
            if inv[name]:
                image[4:12, x : x + 8] = self._atlas[ITEM_TILES[name]]
                x += 9
                if name == "potion" and inv[name] > 1:
                    x += draw_text(image, f"x{inv[name]}", 8, x, WHITE, align="left") + 2
        image[4:12, 172:180] = self._atlas[ITEM_TILES["gold"]]
        draw_text(image, str(inv["gold"]), 8, 182, YELLOW, align="left")
        draw_text(image, clock_text(time), 8, 252, WHITE, align="right")

    # -- ground truth

    # -- guidance

    def direction_to(self, time: float, target: tuple[int, int]) -> str | None:
        """Compass direction from the hero to a tile at ``time`` (None if hidden or there)."""
        hero = self.hero_at(time)
        if hero is None:
            return None
        return compass(target[1] - hero[1], target[0] - hero[0])

    def _question_kinds(self, second: int) -> list[str]:
        if any(self.hero_at(second + k) is None for k in range(4)):
            return []  # between levels or respawning: nobody to guide
        level = self.level_at(second)
        kinds = ["stairs", "left", "next"]
        if level.key.taken > second:
            kinds += ["key", "key"]
        hero = self.hero_at(second)
        if hero is not None and any(
            abs(r - hero[0]) + abs(c - hero[1]) <= 6 for _, r, c, _ in self.monsters_at(second)
        ):
            kinds += ["monster", "monster"]
        if self.inventory_at(second)["potion"]:
            kinds.append("potion")
        return kinds

    def _path_leg(self, time: float, target: tuple[int, int]) -> str | None:
        """Direction of the first few steps of the walkable path from the hero to ``target``."""
        hero = self.hero_at(time)
        if hero is None:
            return None
        level = self.level_at(time)
        passable = PASSABLE[level.grid]
        passable[level.locked_door] = True
        passable[target] = True
        dist = _Paths(passable).field(target)
        here = hero
        for _ in range(5):
            nxt = _step_towards(dist, here)
            if nxt is None:
                break
            here = nxt
        return compass(here[1] - hero[1], here[0] - hero[0])

    def _question(self, kind: str, second: int, rng: np.random.Generator) -> Question:
        if kind == "key":
            text = ("where is the key?", "where's the key?", "how do I find the key?")[
                int(rng.integers(0, 3))
            ]

            def where(s: int) -> Composed | None:
                level = self.level_at(s)
                key = (level.key.row, level.key.col)
                if level.key.taken <= s:
                    return "You've just got it! Now the locked door.", {}
                word = self.direction_to(s, key)
                if word is None:
                    return None
                return f"The key is {word} of you.", {"target": "key", "direction": word}

            def leg(s: int) -> Composed | None:
                level = self.level_at(s)
                if level.key.taken <= s:
                    return None
                word = self._path_leg(s, (level.key.row, level.key.col))
                if word is None:
                    return None
                return f"Head {word} first, then follow the corridor.", {"target": "key", "leg": word}

            return Question(second, text, (where, leg))
        if kind == "stairs":
            text = ("which way to the stairs?", "where are the stairs?")[int(rng.integers(0, 2))]

            def stairs(s: int) -> Composed | None:
                level = self.level_at(s)
                word = self.direction_to(s, level.stairs)
                if word is None:
                    return None
                return f"The stairs are {word} of you.", {"target": "stairs", "direction": word}

            def how(s: int) -> Composed | None:
                level = self.level_at(s)
                if level.door_open <= s:
                    return "The door is open, go straight there.", {}
                if self.inventory_at(s)["key"]:
                    word = self.direction_to(s, level.locked_door)
                    if word is None:
                        return None
                    return f"Use your key on the door {word} of you.", {"target": "door", "direction": word}
                return "They're behind a locked door. Find the key first.", {}

            return Question(second, text, (stairs, how))
        if kind == "monster":

            def beat(s: int) -> Composed | None:
                nearest = self.nearest_monster_at(s)
                if nearest is None:
                    return None
                kind_, r, c, hp = nearest
                hits = math.ceil(hp / (1 + self.inventory_at(s)["sword"]))
                word = self.direction_to(s, (r, c))
                if word is None:
                    return None
                times = "once" if hits == 1 else f"{NUMBERS[min(hits, 8)].lower()} times"
                return f"The {kind_} is {word} of you. Hit it {times}.", {
                    "target": kind_,
                    "direction": word,
                    "hits": hits,
                }

            def tip(s: int) -> Composed | None:
                inv = self.inventory_at(s)
                if inv["potion"]:
                    return "Drink a potion if you drop below four.", {}
                return "Stand your ground and keep swinging.", {}

            return Question(second, "how do I beat this monster?", (beat, tip))
        if kind == "potion":

            def drink(s: int) -> Composed | None:
                hp = int(self._hp[self._step(s)])
                if hp <= 5:
                    return f"Yes, you're on {hp} HP, drink now.", {"hp": hp}
                return f"Not yet, you still have {hp} HP.", {"hp": hp}

            return Question(
                second, "should I drink a potion?", (drink, lambda s: ("Keep one for the next fight.", {}))
            )
        if kind == "left":

            def left(s: int) -> Composed | None:
                n = len(self.monsters_at(s))
                if n == 0:
                    return "None left, the level is clear.", {"left": 0}
                noun = "monster" if n == 1 else "monsters"
                return f"{NUMBERS[n]} {noun} left on this level.", {"left": n}

            def nearest(s: int) -> Composed | None:
                monster = self.nearest_monster_at(s)
                if monster is None:
                    return None
                kind_, r, c, _ = monster
                word = self.direction_to(s, (r, c))
                if word is None:
                    return None
                return f"The nearest, a {kind_}, is {word} of you.", {"target": kind_, "direction": word}

            return Question(second, "how many monsters are left?", (left, nearest))

        def plan(s: int) -> Composed | None:
            level = self.level_at(s)
            if level.key.taken > s:
                word = self.direction_to(s, (level.key.row, level.key.col))
                if word is None:
                    return None
                return f"Find the key, it's {word} of you.", {"target": "key", "direction": word}
            if level.door_open > s:
                word = self.direction_to(s, level.locked_door)
                if word is None:
                    return None
                return f"Open the locked door, {word} of you.", {"target": "door", "direction": word}
            word = self.direction_to(s, level.stairs)
            if word is None:
                return None
            return f"Take the stairs, {word} of you.", {"target": "stairs", "direction": word}

        return Question(
            second, "what should I do next?", (plan, lambda s: ("Clear any monsters on the way.", {}))
        )

    def _guide_followups(self, rng: np.random.Generator) -> list[Candidate]:
        out = []
        for event in self.events:
            d = event.details
            importance = event.importance
            options: tuple[str, ...] = ()
            dynamic = None
            if event.kind == "pickup" and d.get("item") == "key":

                def door_line(s: int, room: int) -> Composed | None:
                    level = self.level_at(s)
                    word = self.direction_to(s, level.locked_door)
                    if word is None:
                        return None
                    text = f"Key's yours. The locked door is {word}."
                    if commentary.speech_seconds(text) > room:
                        return None
                    return text, {"target": "door", "direction": word}

                dynamic = door_line
                importance = 0.8
            elif event.kind == "pickup":
                options, importance = ("Good, grab everything.", "Nice pickup."), 0.35
            elif event.kind == "door":
                options = ("Door's open. The stairs are inside.", "You're through, head for the stairs.")
            elif event.kind == "stairs":
                options = ("New level. Find the key first.", "Level {level}. Look for the key.")
            elif event.kind == "monster":
                options = ("{Monster} coming, face it head on.", "Careful, a {monster}. Fight it.")
            elif event.kind == "damage" and d.get("hp", 10) <= 4:
                options, importance = ("HP is low, drink a potion!", "Low health, finish it fast!"), 0.7
            elif event.kind == "kill":
                options = ("Nice, that's one down.", "Good kill, keep moving.")
            elif event.kind == "death":
                options = ("Ouch. You respawn at the entrance.", "Down, but not out. Try again.")
            elif event.kind == "potion":
                options = ("Good call, you're back to {hp}.",)
            if dynamic is not None:
                out.append(self._followup(event, importance, dynamic))
            elif options:
                compose = commentary.from_templates(options, self._fields(event), rng)
                out.append(self._followup(event, importance, compose))
        return out
