"""``dungeon``: a tile-grid crawler. A hero explores rooms under a fog of war, fights the
monsters that wake up, picks up potions, gold, a sword, a shield and the key, unlocks the
door to the stairs room and goes down a level.

Each level is generated from the seed as it is reached (:mod:`.level`); the hero's run through
them is simulated once, at construction (:mod:`.play`), any frame is one tile-atlas gather
(:mod:`.render`), and the guidance scenario's answers read the stored state (:mod:`.guide`).
:mod:`.game` puts them together as :class:`DungeonGame`.
"""

from embodia.envs.streams.games.dungeon.game import DungeonGame
from embodia.envs.streams.games.dungeon.level import ITEM_TILES, MONSTER_TILES, Item, Level, Monster, Room
from embodia.envs.streams.games.dungeon.play import MAX_HP, RESPAWN_STEPS, STEP, TRANSITION_STEPS

__all__ = [
    "ITEM_TILES",
    "MAX_HP",
    "MONSTER_TILES",
    "RESPAWN_STEPS",
    "STEP",
    "TRANSITION_STEPS",
    "DungeonGame",
    "Item",
    "Level",
    "Monster",
    "Room",
]
