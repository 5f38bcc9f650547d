"""``arena``: top-down five-a-side football (see :mod:`.play`)."""

from embodia.envs.streams.games.arena.play import GOLD, SCREEN_PHRASE, YOU, ArenaGame

__all__ = ["GOLD", "SCREEN_PHRASE", "YOU", "ArenaGame"]
