"""``dungeon``: a tile-grid crawler (see :mod:`.level`)."""

from embodia.envs.streams.games.dungeon.level import (
    ITEM_TILES,
    MAX_HP,
    RESPAWN_STEPS,
    STEP,
    DungeonGame,
)

__all__ = ["ITEM_TILES", "MAX_HP", "RESPAWN_STEPS", "STEP", "DungeonGame"]
