"""The ``dungeon`` game: its casters' lines and the class that puts the dungeon together
(:class:`DungeonGame`: simulated in :mod:`.play` over levels from :mod:`.level`, drawn by
:mod:`.render`, guided by :mod:`.guide`).
"""

from __future__ import annotations

from embodia.envs.streams.games.dungeon.guide import DungeonGuide
from embodia.envs.streams.games.dungeon.render import DungeonView

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


class DungeonGame(DungeonView, DungeonGuide):
    """A grid dungeon crawler with an HP / level / items HUD, a kill feed, and banners."""

    name = "dungeon"
    calls = CALLS
    reactions = REACTIONS
    reaction_chance = REACTION_CHANCE
    co_share = CO_SHARE
    script_stream = 12
    solo_persona = ("live dungeon-run caster", "excited", "short lines")
