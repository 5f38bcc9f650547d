"""Procedural games: reproducible per seed, events visible in their frames and HUD, and ground
truth that is causal, paced like a caster, and (for guidance) true to the game state."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from functools import cache
from typing import Any

import numpy as np
import pytest

from embodia.envs.streams.core import SCENARIOS, TAGS, Annotation, Stream, StreamError
from embodia.envs.streams.games import (
    GAMES,
    NATIVE_SIZE,
    GameEvent,
    ProceduralGame,
    compass,
    label_second,
    make_game,
)
from embodia.envs.streams.games.arena import GOLD, SCREEN_PHRASE, YOU, ArenaGame
from embodia.envs.streams.games.base import SCREEN_WORDS
from embodia.envs.streams.games.commentary import MAX_WORDS
from embodia.envs.streams.games.dungeon import ITEM_TILES, MAX_HP, RESPAWN_STEPS, STEP, DungeonGame
from embodia.envs.streams.sources import open_stream

NAMES = sorted(GAMES)
SLOTS = ("banner", "feed", "card", "flash", "fade")


@cache
def game(name: str, seed: int = 0, duration: float = 300.0) -> ProceduralGame:
    """Games are immutable once built, so tests share them."""
    return make_game(name, seed=seed, duration=duration)


def test_make_game_knows_its_games_and_rejects_others() -> None:
    assert set(GAMES) == {"arena", "dungeon"}
    with pytest.raises(StreamError, match="arena, dungeon"):
        make_game("chess")
    with pytest.raises(StreamError):
        make_game("arena", duration=0.0)
    with pytest.raises(StreamError):
        make_game("arena", size=(2, 2))


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_game_other_seed_other_game(name: str) -> None:
    first, second = make_game(name, seed=3, duration=60), make_game(name, seed=3, duration=60)
    times = [0.0, 7.5, 21.0, 33.3, 59.5]
    assert all(
        a.tobytes() == b.tobytes()
        for a, b in zip(first.frames_at(times), second.frames_at(times), strict=True)
    )
    assert first.events == second.events and first.events
    for scenario in SCENARIOS:
        assert first.annotation(scenario).to_record() == second.annotation(scenario).to_record()
    other = make_game(name, seed=4, duration=60)
    assert other.events != first.events
    assert any(
        a.tobytes() != b.tobytes()
        for a, b in zip(first.frames_at(times), other.frames_at(times), strict=True)
    )


@pytest.mark.parametrize("name", NAMES)
def test_frames_are_rgb_at_the_asked_size_and_the_hud_is_plain_data(name: str) -> None:
    g = game(name)
    assert g.size == NATIVE_SIZE == (144, 256) and g.name == name and g.duration == 300.0
    (frame,) = g.frames_at([12.5])
    assert frame.shape == (144, 256, 3) and frame.dtype == np.uint8
    small = make_game(name, seed=0, duration=300.0, size=(72, 96))
    (little,) = small.frames_at([12.5])
    assert little.shape == (72, 96, 3)
    assert small.hud_at(12.5) == g.hud_at(12.5)
    hud = g.hud_at(100.0)
    json.dumps(hud)
    assert {"clock", "banner"} <= set(hud)
    # times past either end are clamped, not errors
    assert g.frames_at([-1.0])[0].shape == g.frames_at([1e9])[0].shape


def test_events_are_frozen_records() -> None:
    event = game("arena").events[0]
    assert isinstance(event, GameEvent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.time = 3.0  # type: ignore[misc]


def _arena_with_goal() -> tuple[ArenaGame, GameEvent]:
    for seed in range(10):
        g = game("arena", seed)
        goals = [e for e in g.events if e.kind == "goal" and e.time > 5]
        if goals:
            assert isinstance(g, ArenaGame)
            return g, goals[0]
    raise AssertionError("no goal in ten 5-minute games")


def _banner_share(frame: np.ndarray, colour: tuple[int, int, int]) -> float:
    band = frame[56:86]
    return float(np.all(band == np.asarray(colour, np.uint8), axis=-1).mean())


def test_a_goal_shows_its_banner_and_the_score_steps_exactly_then() -> None:
    g, goal = _arena_with_goal()
    team = g.teams.index(goal.details["team"])
    before, at = g.hud_at(goal.time - 0.1)["score"], g.hud_at(goal.time)["score"]
    assert at[team] == before[team] + 1 and at[1 - team] == before[1 - team]
    assert g.hud_at(goal.time)["banner"].startswith("GOAL")
    assert g.hud_at(goal.time - 0.1)["banner"] is None or not g.hud_at(goal.time - 0.1)["banner"].startswith(
        "GOAL"
    )
    frame_at, frame_later = g.frames_at([goal.time, goal.time + 2.0])
    assert _banner_share(frame_at, GOLD) > 0.5 and _banner_share(frame_later, GOLD) > 0.5
    assert _banner_share(g.frames_at([goal.time - 0.1])[0], GOLD) < 0.05
    # a goal happens on a whole second, so the labelled chunk shows it from its first frame
    assert goal.time == int(goal.time)


@pytest.mark.parametrize("name", NAMES)
def test_quiet_seconds_look_quiet(name: str) -> None:
    g = game(name)
    quiet = [
        s
        for s in range(5, 300)
        if not any(g.overlays.active(slot, s + k / 2) for slot in SLOTS for k in range(2))
    ]
    assert len(quiet) >= 10
    for second in quiet[:10]:
        hud = g.hud_at(second + 0.5)
        assert hud["banner"] is None and hud["feed"] is None and hud["card"] is None
        for frame in g.frames_at([second, second + 0.5]):
            assert _banner_share(frame, GOLD) < 0.01


def test_a_dungeon_pickup_takes_the_item_off_the_map_and_puts_it_on_the_hud() -> None:
    g = game("dungeon")
    assert isinstance(g, DungeonGame)
    checked = 0
    for event in [e for e in g.events if e.kind == "pickup"][:12]:
        level = g.level_at(event.time)
        item = next(i for i in level.items if i.taken == event.time)
        tile = ITEM_TILES[item.kind]
        if g.hero_at(event.time - STEP) is None:
            continue  # picked up on the level's first step, under the fade-in
        assert g.tiles_at(event.time - STEP)[item.row, item.col] == tile
        assert g.hero_at(event.time) == (item.row, item.col)
        assert all(g.tiles_at(event.time + k * STEP)[item.row, item.col] != tile for k in range(6))
        before, after = g.hud_at(event.time - STEP), g.hud_at(event.time)
        if item.kind == "gold":
            assert after["gold"] == before["gold"] + item.amount
        elif item.kind in ("sword", "shield") and item.kind in before["items"]:
            assert item.kind in after["items"]
        else:
            assert after["items"].count(item.kind) == before["items"].count(item.kind) + 1
        assert after["feed"].startswith("+")
        if not any(g.overlays.active(slot, event.time - STEP) for slot in SLOTS):
            y, x = 16 + item.row * 8, item.col * 8
            frame = g.frames_at([event.time - STEP])[0]
            assert np.array_equal(frame[y : y + 8, x : x + 8], g._atlas[tile])
        checked += 1
    assert checked >= 5


def test_dungeon_damage_tints_the_screen_and_stairs_change_the_level() -> None:
    g = game("dungeon")
    assert isinstance(g, DungeonGame)
    hits = [e for e in g.events if e.kind == "damage"]
    assert hits
    for hit in hits[:5]:
        assert g.hud_at(hit.time)["hp"] == hit.details["hp"] < g.hud_at(hit.time - STEP)["hp"]
        red = g.frames_at([hit.time])[0][16:].astype(int)
        assert red[..., 0].mean() > red[..., 1].mean() + 40
    stairs = [e for e in g.events if e.kind == "stairs"]
    assert stairs
    for event in stairs[:3]:
        assert (
            g.hud_at(event.time)["level"]
            == g.hud_at(event.time - STEP)["level"] + 1
            == event.details["level"]
        )
        assert g.hud_at(event.time)["banner"].startswith(f"LEVEL {event.details['level']}")
        frame = g.frames_at([event.time + 0.5])[0].astype(int)
        assert frame[16:50].mean() < 40  # the transition fades the old level out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_annotations_round_trip_and_carry_the_reference_fields(name: str, scenario: str) -> None:
    g = game(name)
    annotation = g.annotation(scenario)
    record = annotation.to_record()
    assert Annotation.from_record(json.loads(json.dumps(record))) == annotation
    assert record["video_path"] == f"procedural://{name}?seed=0"
    assert record["metadata"]["tag"] == TAGS[scenario]  # type: ignore[index]
    assert record["metadata"]["dataset_name"] == "embodia-procedural"
    assert (annotation.video_begin, annotation.video_end, annotation.video_duration) == (0, 300, 300)
    assert annotation.own_lines() and annotation.scenario == scenario
    assert all(len(line.text.split()) <= MAX_WORDS for line in annotation.annotations)
    assert all(1 <= line.end - line.start <= 4 for line in annotation.own_lines())
    clip = g.annotation(scenario, begin=100, end=160)
    assert all(100 <= line.start < 160 and line.end <= 160 for line in clip.annotations)
    assert clip.history and clip.video_begin == 100
    with pytest.raises(StreamError):
        g.annotation(scenario, begin=50, end=50)
    with pytest.raises(StreamError):
        g.annotation(scenario, end=301)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lines_start_when_their_event_first_shows_and_the_pace_is_a_casters(name: str, scenario: str) -> None:
    rates = []
    for seed in range(2):
        g = game(name, seed)
        for scripted in g.script(scenario):
            if scripted.cause is None:
                continue
            start, t = scripted.line.start, scripted.cause.time
            # at or after the event: a frame of chunk `start` (start, start + 0.5) shows it ...
            assert t <= start + 0.5 + 1e-9 and start >= label_second(t)
            # ... and a call comes no later than the second after it (a reaction follows its call)
            if scripted.purpose in ("call", "followup"):
                assert start <= math.floor(t) + 1
            else:
                assert scripted.purpose == "reaction" and start <= math.floor(t) + 6
        rates.append(len(g.annotation(scenario).label()) / 300)
    low = 0.15 if scenario == "co-commentary" else 0.18
    assert all(low <= rate <= 0.42 for rate in rates), rates


@pytest.mark.parametrize("name", NAMES)
def test_commented_events_are_on_screen_in_the_chunk_of_their_line(name: str) -> None:
    g = game(name)
    scripted = [s for s in g.script("solo") if s.cause is not None]
    shown = [
        any(g.overlays.active(slot, s.line.start + k / 2) for slot in SLOTS for k in range(2))
        for s in scripted
    ]
    assert np.mean(shown) > 0.95


@pytest.mark.parametrize("name", NAMES)
def test_co_casters_take_turns(name: str) -> None:
    for seed in range(2):
        annotation = game(name, seed).annotation("co-commentary")
        mine, theirs = annotation.own_lines(), annotation.other_lines()
        assert mine and theirs
        assert {line.speaker for line in theirs} == {"SPEAKER_1"} and {line.role for line in theirs} == {
            "user"
        }
        assert not {line.start for line in mine} & {line.start for line in theirs}
        for a in mine:
            for b in theirs:
                assert min(a.end, b.end) - max(a.start, b.start) <= 1
        # the co-caster both calls events and reacts to the main caster's calls
        reactions = [b for b in theirs if any(a.end == b.start for a in mine)]
        assert reactions and len(reactions) < len(theirs)


@pytest.mark.parametrize("name", NAMES)
def test_guidance_answers_follow_each_query_within_three_seconds(name: str) -> None:
    g = game(name)
    annotation = g.annotation("guidance")
    queries, answers = annotation.queries(), annotation.own_lines()
    assert len(queries) >= 10 and annotation.speaker == "GUIDE"
    assert all(q.role == "user" and q.speaker == "user" for q in queries)
    for query in queries:
        first = [a for a in answers if query.start < a.start <= query.start + 3]
        assert first, query
        assert not [a for a in answers if a.start == query.start]
    record = annotation.to_record()
    assert all("query" in a for a in record["annotations"] if a["speaker"] == "user")


def _directions_said(g: Any) -> list[tuple[Any, Any, str]]:
    """The guidance lines of a game's script that point a way: (line, its target, the direction said)."""
    return [
        (scripted, scripted.facts.get("target"), scripted.facts["direction"])
        for scripted in g.script("guidance")
        if scripted.facts.get("direction") is not None
    ]


def test_dungeon_guidance_points_the_true_way() -> None:
    g = game("dungeon")
    assert isinstance(g, DungeonGame)
    checked = 0
    for scripted, target, said in _directions_said(g):
        if target not in ("key", "stairs", "door"):
            continue
        second = scripted.line.start
        level, hero = g.level_at(second), g.hero_at(second)
        assert hero is not None
        spot = {
            "key": (level.key.row, level.key.col),
            "stairs": level.stairs,
            "door": level.locked_door,
        }[target]
        truth = compass(spot[1] - hero[1], spot[0] - hero[0])
        assert said == truth
        assert re.search(rf"\b{truth}\b", scripted.line.text), scripted.line.text
        checked += 1
    assert checked >= 8


def test_arena_guidance_points_the_true_way() -> None:
    g = game("arena")
    assert isinstance(g, ArenaGame)
    checked = 0
    for scripted, target, said in _directions_said(g):
        second = scripted.line.start
        pos = g.positions_at(second)
        there = g.ball_at(second) if target == -1 else pos[target]
        offset = there - pos[YOU]
        truth = SCREEN_WORDS[compass(float(offset[0]), float(offset[1])) or "north"]
        assert said == truth and SCREEN_PHRASE[truth] in scripted.line.text
        if isinstance(target, int) and target >= 0:
            assert g.players[target] in scripted.line.text
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("name", NAMES)
def test_streams_chunk_a_game_at_two_fps(name: str) -> None:
    g = make_game(name, seed=1, duration=40)
    stream = Stream(g, g.annotation("solo"))
    chunks = list(stream.chunks())
    assert len(chunks) == 40
    assert all(len(c.frames) == 2 and c.frames[0].shape == (144, 256, 3) for c in chunks)
    assert chunks[5].frame_times == (5.0, 5.5) and chunks[5].hud == g.hud_at(5.5)
    assert set(stream.label) <= set(range(40))
    guided = open_stream(f"procedural:{name},seed=1,duration=40", "guidance")
    assert any(c.query for c in guided.chunks())


@pytest.mark.parametrize("name", NAMES)
def test_a_two_hour_game_builds_in_seconds(name: str) -> None:
    started = time.perf_counter()
    g = make_game(name, seed=5, duration=7200.0)
    elapsed = time.perf_counter() - started
    assert elapsed < 5.0, elapsed
    assert g.events[-1].time < 7200.0 and g.events[-1].time > 7000.0
    assert len(g.frames_at([7199.5])) == 1


def test_a_dungeon_death_shows_its_banner_and_the_hero_respawns_at_the_entrance() -> None:
    g = make_game("dungeon", seed=2, duration=2400)  # monsters grow tougher level by level
    assert isinstance(g, DungeonGame)
    death = next(e for e in g.events if e.kind == "death")
    assert g.hud_at(death.time)["banner"] == "YOU DIED"
    assert g.hero_at(death.time + 0.5) is None
    back = death.time + RESPAWN_STEPS * STEP
    assert g.hero_at(back) == g.level_at(back).entrance and g.hud_at(back)["hp"] == MAX_HP
