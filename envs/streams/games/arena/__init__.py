"""``arena``: top-down five-a-side football, simulated play by play (:mod:`.play`), rendered
with numpy (:mod:`.render`), with a coach for the guidance scenario (:mod:`.guide`);
:mod:`.game` puts them together as :class:`ArenaGame`.
"""

from embodia.envs.streams.games.arena.game import ArenaGame
from embodia.envs.streams.games.arena.guide import SCREEN_PHRASE
from embodia.envs.streams.games.arena.play import GOLD, MATCH_SECONDS, PER_TEAM, TICK_HZ, YOU

__all__ = ["GOLD", "MATCH_SECONDS", "PER_TEAM", "SCREEN_PHRASE", "TICK_HZ", "YOU", "ArenaGame"]
