"""The dungeon as played: a hero, an explorer AI stepping at 2 Hz, goes through the levels as
they are generated. Each step he fights the awake monster next to him (or drinks a potion on
low health), else walks: towards an awake monster close by, else the nearest visible item,
else the nearest unexplored room, else the locked door with the key, else the stairs.

:class:`DungeonPlay` simulates the run at construction and keeps per step only a few numbers
(hero tile, HP, inventory, monster tiles), per level its map and the time each tile was
revealed, so two hours cost well under a megabyte; its readers (``level_at``, ``hero_at``,
``inventory_at``, ...) give the state at any time. Drawing and guidance build on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.games.base import WHITE, Colour, GameEvent, ProceduralGame
from embodia.envs.streams.games.dungeon.level import (
    COLS,
    CORRIDOR,
    DOOR,
    FLOOR,
    LOCKED,
    MAX_MONSTERS,
    MONSTERS,
    PASSABLE,
    ROWS,
    Item,
    Level,
    Monster,
    Paths,
    generate,
    step_towards,
)

STEP = 0.5
"""Seconds per simulation step (the hero moves one tile or swings once a step)."""
MAX_HP = 10
TRANSITION_STEPS = 3
"""Steps between taking the stairs and the next level appearing (the fade)."""
RESPAWN_STEPS = 6
HEROES = ("Ayla", "Bram", "Cora", "Dain", "Esme", "Finn", "Greta", "Hale", "Ivo", "Juno")
NUMBERS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight")

RED: Colour = (225, 30, 30)
YELLOW: Colour = (255, 220, 60)
EVENT_COLOURS: dict[str, Colour] = {
    "stairs": WHITE,
    "room": (120, 170, 255),
    "monster": (255, 130, 20),
    "damage": RED,
    "kill": (170, 60, 255),
    "pickup": YELLOW,
    "potion": (60, 230, 90),
    "door": (230, 150, 60),
    "death": (120, 0, 10),
}
"""The colour of each kind of event's onset flash and of its feed line."""


@dataclass
class _Visit:
    """The hero on the level being played: where he is and heads for, what he has seen."""

    level: Level
    index: int
    """The level's index in ``DungeonPlay.levels``."""
    step: int
    start: int
    """The step the hero entered the level."""
    pos: tuple[int, int]
    last_pos: tuple[int, int]
    hp: int
    inv: dict[str, int]
    """keys, potions, gold, sword, shield, kills: carried from level to level."""
    combat_ready: int
    """The step the hero may next swing."""
    room_of: list[list[int]]
    loot: dict[tuple[int, int], Item]
    passable: NDArray[np.bool_]
    paths: Paths
    explored: set[int]
    goal: tuple[int, int] | None = None
    goal_kind: str = ""
    dist: NDArray[np.int16] | None = None
    """Walking distances to ``goal``."""
    reveal: list[float] = field(default_factory=lambda: [math.inf] * (ROWS * COLS))
    """When each tile (row-major) was first seen."""


class DungeonPlay(ProceduralGame):
    """The dungeon's simulation and its state at any time; subclasses draw and guide it."""

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
        level = generate(rng, 1, 0.0)
        while True:
            self.levels.append(level)
            step, hp = self._play(rng, level, step, n_steps, hp, inv)
            if step >= n_steps:
                break
            level = generate(rng, len(self.levels) + 1, (step + TRANSITION_STEPS) * STEP)
            event = self._event(step, "stairs", 0.9, level=level.number, level_name=level.name)
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

    def _event(self, step: int, kind: str, importance: float, **details: Any) -> GameEvent:
        return self._add_event(step * STEP, kind, self.hero, importance, EVENT_COLOURS[kind], **details)

    def _feed(self, step: int, kind: str, text: str) -> None:
        """A feed line about an event of ``kind``, in its colour, for 3 s."""
        self.overlays.add("feed", step * STEP, step * STEP + 3.0, text, EVENT_COLOURS[kind])

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
        pos = level.entrance
        now = step * STEP
        visit = _Visit(
            level=level,
            index=len(self.levels) - 1,
            step=step,
            start=step,
            pos=pos,
            last_pos=pos,
            hp=hp,
            inv=inv,
            combat_ready=step,
            room_of=level.room_of.tolist(),
            loot={(i.row, i.col): i for i in level.items},
            passable=PASSABLE[level.grid],
            paths=Paths(PASSABLE[level.grid]),
            explored={int(level.room_of[pos])},
        )
        self._reveal_room(visit, visit.room_of[pos[0]][pos[1]], now)
        self._reveal_near(visit, pos, now)
        step, hp = self._play_level(rng, visit, n_steps)
        level.reveal = np.asarray(visit.reveal, np.float32).reshape(ROWS, COLS)
        return step, hp

    def _play_level(self, rng: np.random.Generator, visit: _Visit, n_steps: int) -> tuple[int, int]:
        """The hero's steps on the level, each: wake the monsters of his room, fight (or drink)
        or else walk, see what he reached, then the monsters act. Returns (step, hp) on the
        stairs or at the end of the game."""
        level = visit.level
        while visit.step < n_steps:
            now = visit.step * STEP
            if visit.step - visit.start > 600:  # a safety valve: never stuck on a level
                return visit.step, visit.hp
            alive = [m for m in level.monsters if m.alive]
            # Planning ignores monsters: one in the way is woken and fought, not walked round.
            here = visit.room_of[visit.pos[0]][visit.pos[1]]
            for m in alive:
                if not m.awake and here >= 0 and visit.room_of[m.row][m.col] == here:
                    self._wake(visit.step, m)
            # walking pace: two tiles every three steps, so the run has lulls
            if not self._fight(visit, alive) and visit.step % 3 != 2:
                self._walk(visit, alive, now)
            self._look_around(visit, now)
            self._pick_up(visit, now)
            if visit.pos == level.stairs and level.door_open <= now:
                self._record(visit.step, visit.pos, visit.hp, visit.inv, visit.index, alive)
                return visit.step + 1, visit.hp
            self._monsters_act(rng, visit, alive, n_steps)
            if visit.step >= n_steps:
                break
            self._record(visit.step, visit.pos, visit.hp, visit.inv, visit.index, alive)
            visit.step += 1
        return visit.step, visit.hp

    def _fight(self, visit: _Visit, alive: list[Monster]) -> bool:
        """Drink a potion on low health, else strike an awake monster next to the hero (or
        wait for the next swing); False when the hero is free to walk."""
        step, pos, inv = visit.step, visit.pos, visit.inv
        adjacent = [m for m in alive if m.awake and abs(m.row - pos[0]) + abs(m.col - pos[1]) == 1]
        if visit.hp <= 5 and inv["potion"] > 0:
            inv["potion"] -= 1
            visit.hp = min(MAX_HP, visit.hp + 5)
            self._event(step, "potion", 0.5, hp=visit.hp)
            self._feed(step, "potion", "HEALED +5")
            return True
        if adjacent and step >= visit.combat_ready:
            target = adjacent[0]
            target.hp -= 1 + inv["sword"]
            visit.combat_ready = step + 1
            if target.hp <= 0:
                target.alive = False
                inv["kills"] += 1
                visit.level.kills.append((step * STEP, target.row, target.col))
                self._event(step, "kill", 0.6, monster=target.kind, Monster=target.kind.capitalize())
                self._feed(step, "kill", f"YOU SLEW THE {target.kind.upper()}")
        return bool(adjacent)

    def _walk(self, visit: _Visit, alive: list[Monster], now: float) -> None:
        """One tile towards the nearest awake monster within reach, else towards the goal."""
        if not self._chase(visit, alive):
            self._head_for_goal(visit, alive, now)
        if visit.goal is not None and visit.pos == visit.goal:
            visit.goal = visit.dist = None

    def _chase(self, visit: _Visit, alive: list[Monster]) -> bool:
        """Step towards the nearest awake monster within 6 tiles (stopping next to it); False
        when there is none, or it is out of reach."""
        pos = visit.pos
        awake = [m for m in alive if m.awake and abs(m.row - pos[0]) + abs(m.col - pos[1]) <= 6]
        if not awake:
            return False
        nearest = min(awake, key=lambda m: abs(m.row - pos[0]) + abs(m.col - pos[1]))
        nxt = step_towards(visit.paths.field((nearest.row, nearest.col)), pos)
        if nxt is None:
            return False  # out of reach: carry on exploring
        if nxt != (nearest.row, nearest.col):
            visit.pos = nxt
        visit.goal = visit.dist = None
        return True

    def _head_for_goal(self, visit: _Visit, alive: list[Monster], now: float) -> None:
        """Choose a goal if there is none, then step towards it (a monster in the way is woken
        instead; next to the locked door with the key, unlock it)."""
        if visit.goal is None or visit.dist is None:
            visit.goal, visit.goal_kind = self._choose_goal(visit, now)
            visit.dist = visit.paths.field(visit.goal) if visit.goal is not None else None
        if visit.goal is None or visit.dist is None:
            return
        pos, lock = visit.pos, visit.level.locked_door
        if visit.goal_kind == "door" and abs(lock[0] - pos[0]) + abs(lock[1] - pos[1]) == 1:
            self._unlock(visit, now)
            return
        nxt = step_towards(visit.dist, pos)
        blocker = next((m for m in alive if m.alive and (m.row, m.col) == nxt), None)
        if nxt is None or not visit.passable[nxt]:
            visit.goal = visit.dist = None
        elif blocker is not None:
            if not blocker.awake:
                self._wake(visit.step, blocker)
        else:
            visit.pos = nxt

    def _unlock(self, visit: _Visit, now: float) -> None:
        """Open the locked door with the key: the stairs room is walkable from now on."""
        level = visit.level
        level.grid[level.locked_door] = DOOR
        visit.passable = PASSABLE[level.grid]
        visit.paths = Paths(visit.passable)
        level.door_open = now
        visit.inv["key"] = 0
        self._event(visit.step, "door", 0.65)
        self._feed(visit.step, "door", "DOOR UNLOCKED")
        visit.goal = visit.dist = None

    def _look_around(self, visit: _Visit, now: float) -> None:
        """Reveal the tiles around the hero, and a room he first steps into (its event)."""
        pos = visit.pos
        if pos != visit.last_pos:
            self._reveal_near(visit, pos, now)
            visit.last_pos = pos
        room = visit.room_of[pos[0]][pos[1]]
        if room >= 0 and room not in visit.explored:
            visit.explored.add(room)
            self._reveal_room(visit, room, now)
            self._room_event(visit.level, room, visit.step)

    def _pick_up(self, visit: _Visit, now: float) -> None:
        """Take the item on the hero's tile, if any is left there."""
        step, inv = visit.step, visit.inv
        item = visit.loot.get(visit.pos)
        if item is None or not math.isinf(item.taken):
            return
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
        importance = {"key": 0.75, "sword": 0.6, "shield": 0.6, "potion": 0.45, "gold": 0.4}[item.kind]
        self._event(
            step, "pickup", importance, item=item.kind, item_phrase=phrase,
            Item_phrase=phrase[0].upper() + phrase[1:], amount=item.amount, gold=inv["gold"],
        )  # fmt: skip
        self._feed(step, "pickup", f"+ {phrase.upper()}")
        visit.goal = visit.dist = None

    def _monsters_act(
        self, rng: np.random.Generator, visit: _Visit, alive: list[Monster], n_steps: int
    ) -> None:
        """Each awake monster whose turn it is strikes the hero next to it, or walks closer."""
        for m in alive:
            if not m.alive or not m.awake or visit.step < m.ready:
                continue
            adjacent_now = abs(m.row - visit.pos[0]) + abs(m.col - visit.pos[1]) == 1
            m.ready = visit.step + (1 if adjacent_now else 2)  # strikes every step, walks every other
            if not adjacent_now:
                self._monster_step(visit.level, m, visit.pos, alive)
                continue
            damage, chance = m.damage, MONSTERS[m.kind][2]
            if rng.random() < chance:
                amount = max(1, damage - visit.inv["shield"]) if damage > 1 else 1
                visit.hp -= amount
                self._event(
                    visit.step, "damage", 0.4 + (0.3 if visit.hp <= 4 else 0.0),
                    monster=m.kind, Monster=m.kind.capitalize(), amount=amount, hp=max(visit.hp, 0),
                )  # fmt: skip
                if visit.hp <= 0:
                    self._die(visit, m, alive, n_steps)
                    break

    def _die(self, visit: _Visit, killer: Monster, alive: list[Monster], n_steps: int) -> None:
        """The hero falls: a banner, a few steps off the map, then back at the entrance at full
        health with every monster asleep again."""
        died = self._event(visit.step, "death", 1.0, monster=killer.kind)
        self.overlays.add("banner", died.time, died.time + 3.0, "YOU DIED|", RED)
        for s in range(visit.step, min(visit.step + RESPAWN_STEPS, n_steps)):
            self._record(s, None, 0, visit.inv, visit.index, alive)
        visit.step += RESPAWN_STEPS
        visit.hp, visit.pos = MAX_HP, visit.level.entrance
        for other in alive:
            other.awake = False
        visit.goal = visit.dist = None

    def _wake(self, step: int, m: Monster) -> None:
        m.awake = True
        m.ready = step + 2
        self._event(step, "monster", 0.5, monster=m.kind, Monster=m.kind.capitalize())
        self._feed(step, "monster", f"A {m.kind.upper()} ATTACKS!")

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

    def _choose_goal(self, visit: _Visit, now: float) -> tuple[tuple[int, int] | None, str]:
        """Where the hero heads next, and why: ``item``, ``room``, ``door`` or ``stairs``."""
        level, pos, inv, explored = visit.level, visit.pos, visit.inv, visit.explored
        reach = visit.paths.field(pos)
        items = [
            (int(reach[i.row, i.col]), i.row, i.col)
            for i in level.items
            if math.isinf(i.taken) and visit.reveal[i.row * COLS + i.col] <= now and reach[i.row, i.col] > 0
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

    def _reveal_room(self, visit: _Visit, room: int, now: float) -> None:
        r = visit.level.rooms[room]
        reveal = visit.reveal
        for row in range(r.top, r.bottom + 1):
            for col in range(r.left, r.right + 1):
                if reveal[row * COLS + col] > now:
                    reveal[row * COLS + col] = now

    def _reveal_near(self, visit: _Visit, pos: tuple[int, int], now: float) -> None:
        reveal = visit.reveal
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
        self._event(step, "room", 0.45 if inside or loot else 0.35, room_note=note, monsters=len(inside))

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
