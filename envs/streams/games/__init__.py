"""Procedural games embodia renders itself: seeded, reproducible, with an event log that
writes their ground-truth commentary (``make_game("arena", seed=3)``)."""

from __future__ import annotations

from embodia.envs.streams.core import StreamError
from embodia.envs.streams.games.arena import ArenaGame
from embodia.envs.streams.games.base import (
    DATASET_NAME,
    NATIVE_SIZE,
    GameEvent,
    ProceduralGame,
    ScriptLine,
    compass,
    label_second,
)
from embodia.envs.streams.games.dungeon import DungeonGame

GAMES: dict[str, type[ProceduralGame]] = {"arena": ArenaGame, "dungeon": DungeonGame}


def make_game(
    name: str, seed: int = 0, duration: float = 120.0, size: tuple[int, int] | None = None
) -> ProceduralGame:
    """A game by name; ``size`` is (height, width) of its frames (default ``NATIVE_SIZE``)."""
    if name not in GAMES:
        raise StreamError(f"unknown game {name!r}: known games are {', '.join(sorted(GAMES))}")
    return GAMES[name](seed=seed, duration=duration, size=size)


__all__ = [
    "DATASET_NAME",
    "GAMES",
    "NATIVE_SIZE",
    "ArenaGame",
    "DungeonGame",
    "GameEvent",
    "ProceduralGame",
    "ScriptLine",
    "compass",
    "label_second",
    "make_game",
]
