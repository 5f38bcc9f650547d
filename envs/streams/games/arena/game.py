"""The ``arena`` game: its casters' lines and the class that puts the arena together
(:class:`ArenaGame`: simulated in :mod:`.play`, drawn by :mod:`.render`, coached by
:mod:`.guide`).
"""

from __future__ import annotations

from embodia.envs.streams.games.arena.guide import ArenaGuide
from embodia.envs.streams.games.arena.render import ArenaView

CALLS: dict[str, tuple[str, ...]] = {
    "goal": (
        "GOAL! {actor} scores for the {team}!",
        "{actor} buries it! {score_line}",
        "What a finish from {actor}! {score_line}",
        "It's in! {actor}, and the {team} celebrate!",
        "{actor} fires home! {score_line}",
    ),
    "shot": (
        "{actor} shoots!",
        "{actor} lets fly!",
        "Strike from {actor}!",
        "{actor} pulls the trigger!",
        "Shot, {actor}!",
    ),
    "save": (
        "Great save by {actor}!",
        "{actor} gets a glove to {shooter}'s shot!",
        "Denied! {actor} keeps it out.",
        "{shooter} forces a fine stop from {actor}.",
        "Brilliant reflexes from {actor}!",
    ),
    "post": (
        "Off the post! {actor} so close!",
        "{actor} hits the woodwork!",
        "The post saves the {opponent}!",
        "Clang! {actor} rattles the frame!",
    ),
    "miss": (
        "{actor} fires just wide.",
        "Inches wide from {actor}!",
        "{actor} drags it past the post.",
        "So close from {actor}! Goal kick.",
    ),
    "tackle": (
        "Strong tackle by {actor} on {victim}.",
        "{actor} wins it back for the {team}.",
        "Lovely challenge from {actor}.",
        "{actor} dispossesses {victim}.",
        "{victim} loses it to {actor}.",
    ),
    "interception": (
        "{actor} reads it and intercepts.",
        "Cut out by {actor}.",
        "{actor} steps in, {team} ball.",
        "Pass picked off by {actor}.",
    ),
    "foul": (
        "Foul by {actor} on {victim}.",
        "{actor} brings down {victim}, free kick.",
        "Clumsy from {actor}, that's a foul.",
    ),
    "booking": (
        "Yellow card for {actor}!",
        "{actor} goes into the book.",
        "The referee books {actor} for that.",
    ),
    "kickoff": (
        "We're back underway, {team} kick off.",
        "The {team} restart from the centre.",
        "And we go again, {team} to kick off.",
    ),
    "match_start": (
        "Match {match} is underway!",
        "Here we go, {team} kick off match {match}.",
        "We're off! {team} against {opponent}.",
    ),
    "full_time": (
        "Full time! {result}",
        "That's the final whistle. {result}",
        "It's all over! {result}",
    ),
    "card": (
        "{card_line}",
        "Look at this: {card_short}",
        "{card_line} Telling numbers.",
    ),
}
REACTIONS: dict[str, tuple[str, ...]] = {
    "goal": (
        "Clinical. The defence was all over the place.",
        "You can't give {actor} that much space.",
        "That's been coming, to be fair.",
        "Composed finish, picked his spot.",
    ),
    "save": (
        "Superb positioning from {actor} there.",
        "{shooter} will feel he should have scored.",
        "Strong hands, no rebound.",
    ),
    "post": (
        "Half a yard the other way and it's in.",
        "Unlucky, that deserved a goal.",
        "The {opponent} got away with one.",
    ),
    "miss": (
        "He had to hit the target there.",
        "Snatched at it a little.",
        "Good build-up, poor finish.",
    ),
    "tackle": (
        "Timed that perfectly.",
        "That's the energy the {team} need.",
        "Clean, all ball.",
    ),
    "interception": ("Good reading of the game.", "Sloppy pass, punished.", "Anticipation, that."),
    "booking": ("Can't argue with that one.", "He'll have to be careful now.", "Cynical, and he knew it."),
    "foul": ("Late, and he knows it.", "Naive challenge, that."),
    "full_time": ("Deserved on the balance of play.", "What a match that was."),
    "card": ("The numbers back up what we're seeing.", "The {leader} are controlling the tempo."),
    "kickoff": ("They need a response here.", "Big moment to regroup."),
}
REACTION_CHANCE = {
    "goal": 0.9, "save": 0.6, "post": 0.7, "miss": 0.5, "full_time": 0.8, "card": 0.4, "booking": 0.6,
}  # fmt: skip
CO_SHARE = {"card": 0.5, "tackle": 0.3, "interception": 0.3, "kickoff": 0.3, "foul": 0.3}


class ArenaGame(ArenaView, ArenaGuide):
    """Five-a-side football with a score HUD, a match clock, banners, a ticker and stat cards."""

    name = "arena"
    calls = CALLS
    reactions = REACTIONS
    reaction_chance = REACTION_CHANCE
    default_reaction_chance = 0.35
    co_share = CO_SHARE
    script_stream = 2
    solo_persona = ("professional play-by-play football caster", "energetic", "short lines")
