"""Guiding the dungeon's player: the questions a player asks (where is the key, which way to
the stairs, how to beat a monster, ...), each answered step by step from the game state at
the second the guide speaks, and the guide's unprompted follow-ups to what happens.
"""

from __future__ import annotations

import math

import numpy as np

from embodia.envs.streams.games import commentary
from embodia.envs.streams.games.base import Asker, compass
from embodia.envs.streams.games.commentary import Candidate, Composed, Question
from embodia.envs.streams.games.dungeon.level import PASSABLE, Paths, step_towards
from embodia.envs.streams.games.dungeon.play import NUMBERS, DungeonPlay

FOLLOWUPS: dict[str, tuple[tuple[str, ...], float | None]] = {
    "pickup": (("Good, grab everything.", "Nice pickup."), 0.35),
    "door": (("Door's open. The stairs are inside.", "You're through, head for the stairs."), None),
    "stairs": (("New level. Find the key first.", "Level {level}. Look for the key."), None),
    "monster": (("{Monster} coming, face it head on.", "Careful, a {monster}. Fight it."), None),
    "damage": (("HP is low, drink a potion!", "Low health, finish it fast!"), 0.7),
    "kill": (("Nice, that's one down.", "Good kill, keep moving."), None),
    "death": (("Ouch. You respawn at the entrance.", "Down, but not out. Try again."), None),
    "potion": (("Good call, you're back to {hp}.",), None),
}
"""The guide's follow-ups to an event, by kind, with their importance (None: the event's);
damage only gets one at 4 HP or less, and picking up the key its own (the way to the door)."""


class DungeonGuide(DungeonPlay):
    """The dungeon's guidance: the player's questions and the guide's answers and follow-ups."""

    guide_persona = ("helpful game guide", "gives directions from the map", "step by step")

    def direction_to(self, time: float, target: tuple[int, int]) -> str | None:
        """Compass direction from the hero to a tile at ``time`` (None if hidden or there)."""
        hero = self.hero_at(time)
        if hero is None:
            return None
        return compass(target[1] - hero[1], target[0] - hero[0])

    def _askers(self, second: int) -> list[Asker]:
        if any(self.hero_at(second + k) is None for k in range(4)):
            return []  # between levels or respawning: nobody to guide
        level = self.level_at(second)
        askers: list[Asker] = [self._stairs_question, self._left_question, self._next_question]
        if level.key.taken > second:
            askers += [self._key_question, self._key_question]
        hero = self.hero_at(second)
        if hero is not None and any(
            abs(r - hero[0]) + abs(c - hero[1]) <= 6 for _, r, c, _ in self.monsters_at(second)
        ):
            askers += [self._monster_question, self._monster_question]
        if self.inventory_at(second)["potion"]:
            askers.append(self._potion_question)
        return askers

    def _point(self, s: int, target: str, spot: tuple[int, int], line: str) -> Composed | None:
        """``line`` with the compass direction from the hero to ``spot`` as its ``{direction}``,
        asserting that direction for ``target``; None while the hero is off the map."""
        word = self.direction_to(s, spot)
        if word is None:
            return None
        return line.format(direction=word), {"target": target, "direction": word}

    def _path_leg(self, time: float, target: tuple[int, int]) -> str | None:
        """Direction of the first few steps of the walkable path from the hero to ``target``."""
        hero = self.hero_at(time)
        if hero is None:
            return None
        level = self.level_at(time)
        passable = PASSABLE[level.grid]
        passable[level.locked_door] = True
        passable[target] = True
        dist = Paths(passable).field(target)
        here = hero
        for _ in range(5):
            nxt = step_towards(dist, here)
            if nxt is None:
                break
            here = nxt
        return compass(here[1] - hero[1], here[0] - hero[0])

    def _key_question(self, second: int, rng: np.random.Generator) -> Question:
        """Where is the key: its direction, then the first leg of the way there."""
        text = ("where is the key?", "where's the key?", "how do I find the key?")[int(rng.integers(0, 3))]

        def where(s: int) -> Composed | None:
            level = self.level_at(s)
            key = (level.key.row, level.key.col)
            if level.key.taken <= s:
                return "You've just got it! Now the locked door.", {}
            return self._point(s, "key", key, "The key is {direction} of you.")

        def leg(s: int) -> Composed | None:
            level = self.level_at(s)
            if level.key.taken <= s:
                return None
            word = self._path_leg(s, (level.key.row, level.key.col))
            if word is None:
                return None
            return f"Head {word} first, then follow the corridor.", {"target": "key", "leg": word}

        return Question(second, text, (where, leg))

    def _stairs_question(self, second: int, rng: np.random.Generator) -> Question:
        """Which way to the stairs: their direction, then the door in between."""
        text = ("which way to the stairs?", "where are the stairs?")[int(rng.integers(0, 2))]

        def stairs(s: int) -> Composed | None:
            return self._point(s, "stairs", self.level_at(s).stairs, "The stairs are {direction} of you.")

        def how(s: int) -> Composed | None:
            level = self.level_at(s)
            if level.door_open <= s:
                return "The door is open, go straight there.", {}
            if self.inventory_at(s)["key"]:
                return self._point(
                    s, "door", level.locked_door, "Use your key on the door {direction} of you."
                )
            return "They're behind a locked door. Find the key first.", {}

        return Question(second, text, (stairs, how))

    def _monster_question(self, second: int, rng: np.random.Generator) -> Question:
        """How to beat the nearest monster: where it is and how many hits it takes."""

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

    def _potion_question(self, second: int, rng: np.random.Generator) -> Question:
        """Whether to drink a potion now."""

        def drink(s: int) -> Composed | None:
            hp = int(self._hp[self._step(s)])
            if hp <= 5:
                return f"Yes, you're on {hp} HP, drink now.", {"hp": hp}
            return f"Not yet, you still have {hp} HP.", {"hp": hp}

        return Question(
            second, "should I drink a potion?", (drink, lambda s: ("Keep one for the next fight.", {}))
        )

    def _left_question(self, second: int, rng: np.random.Generator) -> Question:
        """How many monsters are left on the level, and where the nearest is."""

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
            return self._point(s, kind_, (r, c), f"The nearest, a {kind_}, is {{direction}} of you.")

        return Question(second, "how many monsters are left?", (left, nearest))

    def _next_question(self, second: int, rng: np.random.Generator) -> Question:
        """What to do next: the key, else the locked door, else the stairs."""

        def plan(s: int) -> Composed | None:
            level = self.level_at(s)
            if level.key.taken > s:
                return self._point(
                    s, "key", (level.key.row, level.key.col), "Find the key, it's {direction} of you."
                )
            if level.door_open > s:
                return self._point(s, "door", level.locked_door, "Open the locked door, {direction} of you.")
            return self._point(s, "stairs", level.stairs, "Take the stairs, {direction} of you.")

        return Question(
            second, "what should I do next?", (plan, lambda s: ("Clear any monsters on the way.", {}))
        )

    def _guide_followups(self, rng: np.random.Generator) -> list[Candidate]:
        out = []
        for event in self.events:
            if event.kind == "pickup" and event.details.get("item") == "key":
                out.append(self._followup(event, 0.8, self._door_after_key))
            elif event.kind in FOLLOWUPS and (event.kind != "damage" or event.details.get("hp", 10) <= 4):
                options, importance = FOLLOWUPS[event.kind]
                compose = commentary.from_templates(options, self._fields(event), rng)
                out.append(self._followup(event, importance or event.importance, compose))
        return out

    def _door_after_key(self, s: int, room: int) -> Composed | None:
        """The follow-up to picking up the key: where the locked door is, if it fits ``room``."""
        line = "Key's yours. The locked door is {direction}."
        composed = self._point(s, "door", self.level_at(s).locked_door, line)
        if composed is None or commentary.speech_seconds(composed[0]) > room:
            return None
        return composed
