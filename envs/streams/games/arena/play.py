"""``arena``: top-down five-a-side football, simulated play by play and rendered with numpy.

The simulation is a *script* of plays (kick-off, dribbles, passes, interceptions, tackles,
shots and their outcome: goal, save, off the post, wide), written as ball keyframes in a
Python loop over plays (a few thousand for two hours), then turned into every player's
position at every 10 Hz tick in one vectorised pass: each player holds a formation spot that
follows the ball, wanders a little, and is pulled onto the ball while he has it or is about to
(a receiver runs onto a pass, a tackler closes in). Shot outcomes land on whole seconds, so
the 2-fps chunk of the second a caster calls them shows their onset from its first frame.

Matches last ``MATCH_SECONDS`` of game clock; the score resets at each new kick-off. In
lulls a broadcast stat card (possession, shots, touches) comes up, which is what a caster's
colour commentary talks about.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.games import commentary
from embodia.envs.streams.games.base import (
    SCREEN_WORDS,
    WHITE,
    Colour,
    Frame,
    GameEvent,
    ProceduralGame,
    clock_text,
    compass,
    disc,
    draw_card,
    draw_feed,
    draw_text,
    fill_box,
    stamp,
)
from embodia.envs.streams.games.commentary import Candidate, Composed, Question

TICK_HZ = 10
MATCH_SECONDS = 180
PER_TEAM = 5
"""Players per team; index 0 is the keeper."""
YOU = 3
"""The player (team 0, a forward) whom the guidance scenario's user controls; marked on screen."""
GOAL_Y = (24.0, 36.0)
BASE = np.array([[3.0, 30.0], [22.0, 17.0], [22.0, 43.0], [42.0, 21.0], [42.0, 39.0]])
"""Formation of the team attacking to the right, ball on the centre spot."""

TEAM_NAMES = (
    "Wolves", "Falcons", "Comets", "Tigers", "Rovers", "Titans",
    "Vipers", "Otters", "Ravens", "Mariners", "Hornets", "Bears",
)  # fmt: skip
SHORT = {
    "Wolves": "WOL", "Falcons": "FAL", "Comets": "COM", "Tigers": "TIG", "Rovers": "ROV", "Titans": "TTN",
    "Vipers": "VIP", "Otters": "OTR", "Ravens": "RAV", "Mariners": "MAR", "Hornets": "HOR", "Bears": "BRS",
}  # fmt: skip
SURNAMES = (
    "Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski",
    "Brennan", "Ferreira", "Ito", "Mensah", "Duarte", "Varga", "Quinn", "Petrov",
    "Achebe", "Larsen", "Costa", "Ruiz", "Kaur", "Nakamura", "Osei", "Dumont",
)  # fmt: skip
KITS: tuple[Colour, ...] = (
    (214, 48, 49), (41, 98, 255), (255, 140, 0), (142, 68, 173),
    (240, 240, 240), (30, 30, 34), (255, 105, 180),
)  # fmt: skip
KEEPER_KITS: tuple[Colour, Colour] = ((250, 250, 120), (120, 250, 250))

GOLD: Colour = (250, 200, 40)
CYAN: Colour = (40, 200, 235)
ORANGE: Colour = (255, 120, 30)
SILVER: Colour = (225, 225, 225)
MAGENTA: Colour = (210, 40, 130)
INK: Colour = (18, 18, 28)
HUD_BG: Colour = (12, 14, 30)
YELLOW: Colour = (255, 230, 0)

HUD_ROWS = 14
SX, SY = 2.36, 2.03
"""Pixels per field unit (the field is 100 x 60 units)."""
OX, OY = 10, 18
"""Pixel of field point (0, 0)."""

SCREEN_PHRASE = {
    "right": "to your right",
    "up-right": "up to your right",
    "up": "straight up",
    "up-left": "up to your left",
    "left": "to your left",
    "down-left": "down to your left",
    "down": "straight down",
    "down-right": "down to your right",
}

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


def _anchor(team: int, index: int, bx: Any, by: Any, attack: Any) -> tuple[Any, Any]:
    """A player's formation spot for a ball at (bx, by) (scalars or arrays); ``attack`` is 1
    while his team has the ball."""
    d = 1.0 if team == 0 else -1.0
    base_x = BASE[index, 0] if team == 0 else 100.0 - BASE[index, 0]
    base_y = BASE[index, 1]
    if index == 0:
        return base_x + 0.0 * bx, np.clip(30.0 + 0.3 * (by - 30.0), 25.0, 35.0)
    x = base_x + 0.55 * (bx - 50.0) + d * (10.0 * attack - 4.0)
    y = base_y + 0.25 * (by - 30.0)
    return np.clip(x, 3.0, 97.0), np.clip(y, 4.0, 56.0)


def _trailing_mean(values: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    padded = np.concatenate([np.repeat(values[:1], window - 1, axis=0), values])
    sums = np.cumsum(padded, axis=0)
    sums[window:] = sums[window:] - sums[:-window]
    return sums[window - 1 :] / window


class _Plays:
    """The play-by-play loop's state: ball keyframes and the running match."""

    def __init__(self) -> None:
        self.ticks: list[int] = []
        self.xs: list[float] = []
        self.ys: list[float] = []
        self.carriers: list[int] = []

    def key(self, tick: int, x: float, y: float, carrier: int) -> int:
        if self.ticks and tick <= self.ticks[-1]:
            tick = self.ticks[-1] + 1
        self.ticks.append(tick)
        self.xs.append(float(x))
        self.ys.append(float(y))
        self.carriers.append(carrier)
        return tick

    @property
    def ball(self) -> tuple[float, float]:
        return self.xs[-1], self.ys[-1]


class ArenaGame(ProceduralGame):
    """Five-a-side football with a score HUD, a match clock, banners, a ticker and stat cards."""

    name = "arena"
    hud_rows: ClassVar[int] = HUD_ROWS
    calls = CALLS
    reactions = REACTIONS
    reaction_chance = REACTION_CHANCE
    default_reaction_chance = 0.35
    co_share = CO_SHARE
    script_stream = 2
    question_gap = (13, 24)
    personas: ClassVar[dict[str, list[str]]] = {
        "solo": ["professional play-by-play football caster", "energetic", "short lines"],
        "co-commentary": ["play-by-play caster", "takes turns with the analyst", "short lines"],
        "guidance": ["coach in the player's ear", "concrete", "step by step"],
    }

    # -- simulation

    def _simulate(self) -> None:
        rng = np.random.default_rng([self.seed, 1])
        teams = rng.choice(len(TEAM_NAMES), 2, replace=False)
        self.teams: tuple[str, str] = (TEAM_NAMES[int(teams[0])], TEAM_NAMES[int(teams[1])])
        kits = rng.choice(len(KITS), 2, replace=False)
        self.kits: tuple[Colour, Colour] = (KITS[int(kits[0])], KITS[int(kits[1])])
        self.players: list[str] = [
            SURNAMES[int(i)] for i in rng.choice(len(SURNAMES), 2 * PER_TEAM, replace=False)
        ]
        self.you = YOU
        wander = rng.uniform(0.0, 1.0, (4, 2 * PER_TEAM))
        end_tick = int(math.ceil(self.duration * TICK_HZ)) + TICK_HZ
        plays = _Plays()
        self._score_times: list[float] = [0.0]
        self._scores: list[tuple[int, int]] = [(0, 0)]
        self._match_starts: list[float] = [0.0]
        self._loop(rng, plays, end_tick)
        self._vectorise(plays, end_tick, wander)
        self._add_cards(rng)
        self._background = self._draw_pitch()
        self._player_disc = disc(2.6)
        self._ball_disc = disc(1.6)
        self._ball_rim = disc(2.2)
        self._marker = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 0], [0, 0, 1, 0, 0]], bool)

    def _team(self, pid: int) -> int:
        return pid // PER_TEAM

    def _nearest(self, team: int, x: float, y: float, attack: float, pick: float = 0.0) -> int:
        """The outfield player of ``team`` whose spot is nearest (x, y), or with ``pick`` >= 0.6
        the second nearest (so the same defender does not make every tackle)."""
        spots = []
        for index in range(1, PER_TEAM):
            ax, ay = _anchor(team, index, x, y, attack)
            spots.append((math.hypot(float(ax) - x, float(ay) - y), team * PER_TEAM + index))
        spots.sort()
        return spots[1 if pick >= 0.6 else 0][1]

    def _loop(self, rng: np.random.Generator, plays: _Plays, end_tick: int) -> None:
        score = [0, 0]
        match = 1
        match_end = MATCH_SECONDS * TICK_HZ
        t = 0
        carrier = self._kickoff(plays, 0, 0, first=True, match=1)
        t = plays.ticks[-1]
        while t < end_tick:
            team = self._team(carrier)
            bx, by = plays.ball
            if t >= match_end:
                t = int(math.ceil(t / TICK_HZ)) * TICK_HZ
                plays.key(t, bx, by, carrier)
                a, b = score
                result = self._result(a, b)
                self._event(
                    t, "full_time", "", 0.9, MAGENTA, banner=(f"FULL TIME  {a}-{b}", 4.0),
                    score=f"{a}-{b}", result=result, match=match,
                )  # fmt: skip
                restart = t + 8 * TICK_HZ
                plays.key(restart - 1, bx, by, -1)
                match += 1
                score = [0, 0]
                match_end = restart + MATCH_SECONDS * TICK_HZ
                self._match_starts.append(restart / TICK_HZ)
                self._score_times.append(restart / TICK_HZ)
                self._scores.append((0, 0))
                carrier = self._kickoff(plays, restart, (match - 1) % 2, first=True, match=match)
                t = plays.ticks[-1]
                continue
            index = carrier % PER_TEAM
            if index == 0:
                hold = int(rng.integers(8, 16))
                t = plays.key(t + hold, bx, by, carrier)
                receiver = team * PER_TEAM + int(rng.integers(1, 3))
                carrier, t = self._pass(rng, plays, t, carrier, receiver)
                continue
            d = 1.0 if team == 0 else -1.0
            goal_x = 100.0 if team == 0 else 0.0
            dist = math.hypot(goal_x - bx, 30.0 - by)
            p_shoot = 0.0 if dist > 38 else 0.65 if dist < 14 else 0.45 if dist < 24 else 0.25
            r = rng.random()
            if r < p_shoot:
                carrier, t = self._shot(rng, plays, t, carrier, dist, score)
            elif r < p_shoot + (1.0 - p_shoot) * 0.5:
                mates = [team * PER_TEAM + i for i in range(1, PER_TEAM) if team * PER_TEAM + i != carrier]
                weights = np.array([2.0 if m == YOU else 1.0 for m in mates])
                receiver = mates[int(rng.choice(len(mates), p=weights / weights.sum()))]
                carrier, t = self._pass(rng, plays, t, carrier, receiver)
            else:
                duration = int(rng.integers(6, 16))
                nx = float(np.clip(bx + d * rng.uniform(6.0, 15.0), 4.0, 96.0))
                ny = float(np.clip(by + rng.uniform(-7.0, 7.0) + 0.15 * (30.0 - by), 5.0, 55.0))
                challenge = rng.random()
                if challenge < 0.2:
                    tackler = self._nearest(1 - team, nx, ny, 0.0, pick=rng.random())
                    plays.key(t + duration - 1, nx, ny, carrier)
                    t = plays.key(t + duration, nx, ny, tackler)
                    self._event(
                        t, "tackle", self.players[tackler], 0.5, self.kits[1 - team],
                        feed=(f"TACKLE  {self.players[tackler].upper()}", self.kits[1 - team]),
                        victim=self.players[carrier], team=self.teams[1 - team],
                        pid=tackler, victim_pid=carrier,
                    )  # fmt: skip
                    carrier = tackler
                elif challenge < 0.27:
                    fouler = self._nearest(1 - team, nx, ny, 0.0, pick=rng.random())
                    t = plays.key(t + duration, nx, ny, carrier)
                    booked = rng.random() < 0.35
                    self._event(
                        t, "booking" if booked else "foul", self.players[fouler],
                        0.65 if booked else 0.45, YELLOW,
                        banner=(f"YELLOW CARD  {self.players[fouler].upper()}", 2.5) if booked else None,
                        feed=None if booked else (f"FOUL  {self.players[fouler].upper()}", YELLOW),
                        victim=self.players[carrier], team=self.teams[1 - team],
                        pid=fouler, victim_pid=carrier,
                    )  # fmt: skip
                    t = plays.key(t + 20, nx, ny, carrier)
                else:
                    t = plays.key(t + duration, nx, ny, carrier)
        plays.key(max(end_tick, plays.ticks[-1]) + 1, *plays.ball, carrier)
        self._score_times.append(math.inf)

    def _result(self, a: int, b: int) -> str:
        if a == b:
            return f"It ends level, {a}-{b}."
        winner = self.teams[0] if a > b else self.teams[1]
        return f"The {winner} win it {max(a, b)}-{min(a, b)}."

    def _event(
        self,
        tick: int,
        kind: str,
        actor: str,
        importance: float,
        flash: Colour | None,
        banner: tuple[str, float] | None = None,
        feed: tuple[str, Colour] | None = None,
        **details: Any,
    ) -> GameEvent:
        event = self._add_event(tick / TICK_HZ, kind, actor, importance, flash, **details)
        if banner is not None:
            self.overlays.add("banner", event.time, event.time + banner[1], banner[0], flash or GOLD)
        if feed is not None:
            self.overlays.add("feed", event.time, event.time + 2.5, feed[0], feed[1])
        return event

    def _kickoff(self, plays: _Plays, tick: int, team: int, first: bool, match: int) -> int:
        kicker = team * PER_TEAM + 4
        tick = plays.key(tick, 50.0, 30.0, kicker)
        kind = "match_start" if first else "kickoff"
        self._event(
            tick, kind, self.players[kicker], 0.45 if first else 0.4, WHITE,
            banner=(f"MATCH {match}", 2.0) if first else None,
            feed=None if first else ("KICK-OFF", self.kits[team]),
            team=self.teams[team], opponent=self.teams[1 - team], match=match, pid=kicker,
        )  # fmt: skip
        plays.key(tick + 10, 50.0, 30.0, kicker)
        return kicker

    def _pass(
        self, rng: np.random.Generator, plays: _Plays, t: int, carrier: int, receiver: int
    ) -> tuple[int, int]:
        team = self._team(carrier)
        d = 1.0 if team == 0 else -1.0
        bx, by = plays.ball
        ax, ay = _anchor(team, receiver % PER_TEAM, bx, by, 1.0)
        rx = float(np.clip(float(ax) + d * rng.uniform(0.0, 6.0), 3.0, 97.0))
        ry = float(np.clip(float(ay) + rng.uniform(-3.0, 3.0), 4.0, 56.0))
        dist = math.hypot(rx - bx, ry - by)
        flight = max(4, int(round(dist / 3.0)))
        if rng.random() < (0.2 if dist > 30 else 0.13):
            frac = rng.uniform(0.35, 0.75)
            ix, iy = bx + frac * (rx - bx), by + frac * (ry - by)
            cutter = self._nearest(1 - team, ix, iy, 0.0)
            t = plays.key(t + max(3, int(flight * frac)), ix, iy, cutter)
            self._event(
                t, "interception", self.players[cutter], 0.45, self.kits[1 - team],
                feed=(f"INTERCEPTED  {self.players[cutter].upper()}", self.kits[1 - team]),
                passer=self.players[carrier], team=self.teams[1 - team], pid=cutter, passer_pid=carrier,
            )  # fmt: skip
            return cutter, t
        self._event(
            t, "pass", self.players[carrier], 0.15, None,
            receiver=self.players[receiver], team=self.teams[team], pid=carrier, receiver_pid=receiver,
        )  # fmt: skip
        return receiver, plays.key(t + flight, rx, ry, receiver)

    def _shot(
        self, rng: np.random.Generator, plays: _Plays, t: int, shooter: int, dist: float, score: list[int]
    ) -> tuple[int, int]:
        team = self._team(shooter)
        opp = 1 - team
        d = 1.0 if team == 0 else -1.0
        goal_x = 100.0 if team == 0 else 0.0
        keeper = opp * PER_TEAM
        arrive = int(math.ceil((t + max(5.0, dist / 4.0)) / TICK_HZ)) * TICK_HZ
        name = self.players[shooter]
        common: dict[str, Any] = {"team": self.teams[team], "opponent": self.teams[opp], "pid": shooter}
        self._event(
            t, "shot", name, 0.55, self.kits[team], feed=(f"SHOT  {name.upper()}", self.kits[team]),
            distance=round(dist), **common,
        )  # fmt: skip
        p_goal = 0.42 if dist < 15 else 0.28 if dist < 24 else 0.15
        r = rng.random()
        if r < p_goal:
            tx, ty = goal_x + d * 2.5, rng.uniform(25.5, 34.5)
            arrive = plays.key(arrive, tx, ty, -1)
            score[team] += 1
            a, b = score
            self._score_times.append(arrive / TICK_HZ)
            self._scores.append((a, b))
            lead = self._lead_line(team, a, b)
            self._event(
                arrive, "goal", name, 1.0, GOLD, banner=(f"GOAL!  {self.teams[team].upper()}", 3.0),
                score=f"{a}-{b}", score_line=lead, **common,
            )  # fmt: skip
            plays.key(arrive + 49, tx, ty, -1)
            kicker = self._kickoff(plays, arrive + 50, opp, first=False, match=len(self._match_starts))
            return kicker, plays.ticks[-1]
        r = (r - p_goal) / (1.0 - p_goal)
        if r < 0.5:
            ty = float(np.clip(rng.uniform(26.0, 34.0), 25.0, 35.0))
            arrive = plays.key(arrive, goal_x - d * 1.5, ty, keeper)
            self._event(
                arrive, "save", self.players[keeper], 0.7, CYAN,
                banner=(f"SAVE!  {self.players[keeper].upper()}", 2.0), shooter=name,
                team=self.teams[opp], opponent=self.teams[team], pid=keeper, shooter_pid=shooter,
            )  # fmt: skip
            return keeper, arrive
        if r < 0.68:
            side = 1.0 if rng.random() < 0.5 else -1.0
            arrive = plays.key(arrive, goal_x, 30.0 + side * 6.0, -1)
            self._event(arrive, "post", name, 0.8, ORANGE, banner=("OFF THE POST!", 2.0), **common)
            rx = goal_x - d * rng.uniform(8.0, 16.0)
            ry = float(np.clip(30.0 + side * rng.uniform(8.0, 16.0), 5.0, 55.0))
            picker = self._nearest(int(rng.random() < 0.5), rx, ry, 0.5)
            return picker, plays.key(arrive + 8, rx, ry, picker)
        ty = GOAL_Y[0] - rng.uniform(1.5, 5.0) if rng.random() < 0.5 else GOAL_Y[1] + rng.uniform(1.5, 5.0)
        arrive = plays.key(arrive, goal_x + d * 2.0, ty, -1)
        self._event(arrive, "miss", name, 0.6, SILVER, banner=("SO CLOSE!", 2.0), **common)
        plays.key(arrive + 19, goal_x + d * 2.0, ty, -1)
        return keeper, plays.key(arrive + 20, goal_x - d * 5.0, 30.0, keeper)

    def _lead_line(self, team: int, a: int, b: int) -> str:
        if a == b:
            return f"All square at {a}-{b}."
        leader = self.teams[0] if a > b else self.teams[1]
        verb = "lead" if (a > b) == (team == 0) else "still lead"
        return f"The {leader} {verb} {max(a, b)}-{min(a, b)}."

    def _vectorise(self, plays: _Plays, end_tick: int, wander: NDArray[np.float64]) -> None:
        kt = np.asarray(plays.ticks)
        n_ticks = int(kt[-1]) + 1
        ticks = np.arange(n_ticks, dtype=np.float64)
        ball = np.stack([np.interp(ticks, kt, plays.xs), np.interp(ticks, kt, plays.ys)], axis=1)
        carriers = np.asarray(plays.carriers)
        teams_of = np.where(carriers >= 0, carriers // PER_TEAM, -1)
        seg_team = np.where(teams_of[1:] >= 0, teams_of[1:], teams_of[:-1])
        possession = np.repeat(seg_team, np.diff(kt))
        possession = np.concatenate([possession, possession[-1:]])
        weight = np.zeros((n_ticks, 2 * PER_TEAM))
        for j in range(len(kt) - 1):
            a, b = int(kt[j]), int(kt[j + 1])
            c0, c1 = int(carriers[j]), int(carriers[j + 1])
            if c0 >= 0 and c0 == c1:
                weight[a : b + 1, c0] = 1.0
                continue
            if c0 >= 0:
                span = min(8, n_ticks - a)
                weight[a : a + span, c0] = np.maximum(
                    weight[a : a + span, c0], np.linspace(1.0, 0.0, 8)[:span]
                )
            if c1 >= 0:
                lo = max(0, b - 10)
                weight[lo : b + 1, c1] = np.maximum(weight[lo : b + 1, c1], np.linspace(0.0, 1.0, b + 1 - lo))
        smooth = _trailing_mean(ball, 12)
        attack = [_trailing_mean((possession == k).astype(np.float64), 15) for k in (0, 1)]
        pos = np.empty((n_ticks, 2 * PER_TEAM, 2))
        seconds = ticks / TICK_HZ
        for pid in range(2 * PER_TEAM):
            team, index = divmod(pid, PER_TEAM)
            ax, ay = _anchor(team, index, smooth[:, 0], smooth[:, 1], attack[team])
            amp = 0.6 if index == 0 else 2.2
            period, phase = 4.0 + 7.0 * wander[0, pid], 2 * math.pi * wander[1, pid]
            nx = amp * np.sin(2 * math.pi * seconds / period + phase)
            period, phase = 4.0 + 7.0 * wander[2, pid], 2 * math.pi * wander[3, pid]
            ny = amp * np.sin(2 * math.pi * seconds / period + phase)
            w = weight[:, pid]
            pos[:, pid, 0] = (ax + nx) * (1 - w) + ball[:, 0] * w
            pos[:, pid, 1] = (ay + ny) * (1 - w) + ball[:, 1] * w
        self._pos = pos.astype(np.float32)
        self._ball = ball.astype(np.float32)
        self._possession = possession.astype(np.int8)
        self._n_ticks = n_ticks

    def _add_cards(self, rng: np.random.Generator) -> None:
        """Stat cards in the lulls of play, for colour commentary to talk about."""
        breaks = [(e.time - 1, e.time + 8.0) for e in self.events if e.kind == "full_time"]
        possession = self._possession
        counts = np.cumsum(np.stack([possession == 0, possession == 1], axis=1), axis=0)
        shots = [e for e in self.events if e.kind == "shot"]
        touches = [e for e in self.events if e.kind == "pass"]
        for t in self._lulls(3.0, 5.0, 8, breaks):
            self._card(rng, t, counts, shots, touches)

    def _card(
        self,
        rng: np.random.Generator,
        t: float,
        counts: NDArray[np.int64],
        shots: list[GameEvent],
        touches: list[GameEvent],
    ) -> None:
        start = self._match_start(t)
        lo, hi = int(start * TICK_HZ), min(int(t * TICK_HZ), len(counts) - 1)
        held = counts[hi] - (counts[lo - 1] if lo > 0 else 0)
        total = max(1, int(held.sum()))
        pa = int(round(100 * held[0] / total))
        a_name, b_name = self.teams
        kind = int(rng.integers(0, 3))
        if kind == 0:
            leader = a_name if pa >= 50 else b_name
            title, stat = "POSSESSION", f"{SHORT[a_name]} {pa}%  -  {100 - pa}% {SHORT[b_name]}"
            line = f"The {leader} have had {max(pa, 100 - pa)}% of the ball."
            short = f"possession {pa}-{100 - pa}."
        elif kind == 1:
            sa = sum(1 for e in shots if start <= e.time <= t and e.details["team"] == a_name)
            sb = sum(1 for e in shots if start <= e.time <= t and e.details["team"] == b_name)
            leader = a_name if sa >= sb else b_name
            title, stat = "SHOTS", f"{SHORT[a_name]} {sa}  -  {sb} {SHORT[b_name]}"
            line = f"{sa} shots to {sb} so far in this one."
            short = f"{sa} shots to {sb}."
        else:
            tally: dict[str, int] = {}
            for e in touches:
                if start <= e.time <= t:
                    tally[e.actor] = tally.get(e.actor, 0) + 1
            best = max(sorted(tally), key=lambda k: tally[k]) if tally else self.players[YOU]
            n = tally.get(best, 0)
            leader = self.teams[self.players.index(best) // PER_TEAM]
            title, stat = "MOST PASSES", f"{best.upper()}  {n}"
            line = f"{best} has made {n} passes, pulling the strings."
            short = f"{best}, {n} passes already."
        self._add_card(
            t, leader, title, stat, title=title, stat=stat, card_line=line, card_short=short, leader=leader
        )

    # -- state readers

    def _tick(self, time: float) -> int:
        return min(self._n_ticks - 1, max(0, int(math.floor(time * TICK_HZ + 1e-6))))

    def positions_at(self, time: float) -> NDArray[np.float32]:
        """Field positions (x right, y down; 100 x 60 units) of the ten players at ``time``:
        ids 0-4 are the first team (0 the keeper), 5-9 the second."""
        return self._pos[self._tick(time)]

    def ball_at(self, time: float) -> NDArray[np.float32]:
        return self._ball[self._tick(time)]

    def carrier_at(self, time: float) -> int:
        """Who is on the ball (-1 when it is loose or in flight)."""
        i = self._tick(time)
        d = np.hypot(*(self._pos[i] - self._ball[i]).T)
        best = int(np.argmin(d))
        return best if d[best] < 0.5 else -1

    def _match_start(self, time: float) -> float:
        index = int(np.searchsorted(np.asarray(self._match_starts), time + 1e-9, side="right")) - 1
        return self._match_starts[max(index, 0)]

    def score_at(self, time: float) -> tuple[int, int]:
        index = int(np.searchsorted(np.asarray(self._score_times), time + 1e-9, side="right")) - 1
        return self._scores[max(index, 0)]

    def _hud(self, time: float) -> dict[str, Any]:
        a, b = self.score_at(time)
        start = self._match_start(time)
        return {
            "teams": list(self.teams),
            "score": [a, b],
            "clock": clock_text(min(time - start, MATCH_SECONDS)),
            "match": len([s for s in self._match_starts if s <= time + 1e-9]),
            **self._hud_overlays(time),
        }

    # -- drawing

    def _draw_pitch(self) -> Frame:
        h, w = 144, 256
        image = np.zeros((h, w, 3), np.uint8)
        image[:] = (38, 120, 52)
        for k in range(0, w, 24):
            if (k // 24) % 2:
                image[HUD_ROWS:, k : k + 24] = (44, 132, 58)
        line: Colour = (220, 235, 220)

        def px(x: float) -> int:
            return int(round(OX + x * SX))

        def py(y: float) -> int:
            return int(round(OY + y * SY))

        x0, x1, y0, y1 = px(0), px(100), py(0), py(60)
        image[y0, x0 : x1 + 1] = line
        image[y1, x0 : x1 + 1] = line
        image[y0 : y1 + 1, x0] = line
        image[y0 : y1 + 1, x1] = line
        image[y0 : y1 + 1, px(50)] = line
        yy, xx = np.mgrid[:h, :w]
        ring = np.abs(np.hypot((xx - px(50)) / SX, (yy - py(30)) / SY) - 9.0) < 0.45
        image[ring] = line
        for gx, sign in ((0.0, 1.0), (100.0, -1.0)):
            bx0, bx1 = sorted((px(gx), px(gx + sign * 14)))
            image[py(16), bx0 : bx1 + 1] = line
            image[py(44), bx0 : bx1 + 1] = line
            image[py(16) : py(44) + 1, px(gx + sign * 14)] = line
            nx0, nx1 = sorted((px(gx), px(gx - sign * 3.5)))
            image[py(GOAL_Y[0]) : py(GOAL_Y[1]) + 1, nx0 : nx1 + 1] = (70, 78, 72)
            image[py(GOAL_Y[0]) : py(GOAL_Y[1]) + 1 : 2, nx0 : nx1 + 1] = (120, 128, 122)
            for gy in GOAL_Y:
                image[py(gy) - 1 : py(gy) + 2, nx0 : nx1 + 1] = WHITE
        image[:HUD_ROWS] = HUD_BG
        return image

    def _render(self, time: float) -> Frame:
        image = self._background.copy()
        i = self._tick(time)
        pos, ball = self._pos[i], self._ball[i]
        xs = np.rint(OX + pos[:, 0] * SX).astype(int)
        ys = np.rint(OY + pos[:, 1] * SY).astype(int)
        for pid in range(2 * PER_TEAM):
            team, index = divmod(pid, PER_TEAM)
            colour = KEEPER_KITS[team] if index == 0 else self.kits[team]
            stamp(image, self._player_disc, int(ys[pid]), int(xs[pid]), colour)
        stamp(image, self._marker, int(ys[YOU]) - 5, int(xs[YOU]), YELLOW)
        bx, by = int(round(OX + float(ball[0]) * SX)), int(round(OY + float(ball[1]) * SY))
        stamp(image, self._ball_rim, by, bx, INK)
        stamp(image, self._ball_disc, by, bx, WHITE)
        self._flash(image, time)
        card = self.overlays.active("card", time)
        if card is not None:
            draw_card(image, card, 98, 36, 220)
        feed = self.overlays.active("feed", time)
        if feed is not None:
            draw_feed(image, feed, (122, 139), 4, 5, (15, 15, 25), WHITE)
        banner = self.overlays.active("banner", time)
        if banner is not None:
            fill_box(image, 52, 90, 0, 256, banner.colour)
            fill_box(image, 52, 54, 0, 256, WHITE)
            fill_box(image, 88, 90, 0, 256, WHITE)
            draw_text(image, banner.text, 71, 128, INK, scale=2)
        self._draw_hud(image, time)
        return image

    def _draw_hud(self, image: Frame, time: float) -> None:
        a, b = self.score_at(time)
        fill_box(image, 2, 12, 4, 10, self.kits[0])
        draw_text(image, SHORT[self.teams[0]], 7, 13, WHITE, align="left")
        draw_text(image, f"{a} - {b}", 7, 66, YELLOW)
        draw_text(image, SHORT[self.teams[1]], 7, 119, WHITE, align="right")
        fill_box(image, 2, 12, 122, 128, self.kits[1])
        start = self._match_start(time)
        draw_text(image, clock_text(min(time - start, MATCH_SECONDS)), 7, 250, WHITE, align="right")

    # -- ground truth

    # -- guidance

    def direction_to(self, time: float, target: int) -> str:
        """Screen direction (``up``, ``down-left``, ...) from the user's player to ``target``
        (a player id, or -1 for the ball) at ``time``."""
        pos = self.positions_at(time)
        there = self.ball_at(time) if target < 0 else pos[target]
        offset = there - pos[YOU]
        return SCREEN_WORDS[compass(float(offset[0]), float(offset[1])) or "north"]

    def _open_mate(self, time: float) -> int:
        pos = self.positions_at(time)
        mates = [pid for pid in range(1, PER_TEAM) if pid != YOU]
        space = [float(np.min(np.hypot(*(pos[PER_TEAM:] - pos[m]).T))) for m in mates]
        return mates[int(np.argmax(space))]

    def _question_kinds(self, second: int) -> tuple[str, ...]:
        return ("pass", "ball", "shoot", "time", "mark")

    def _question(self, kind: str, second: int, rng: np.random.Generator) -> Question:
        if kind == "pass":
            text = ("who should I pass to?", "who's open?", "where do I pass?")[int(rng.integers(0, 3))]

            def first(s: int) -> Composed:
                mate = self._open_mate(s)
                word = self.direction_to(s, mate)
                return f"Pass to {self.players[mate]}, open {SCREEN_PHRASE[word]}.", {
                    "target": mate,
                    "direction": word,
                }

            def second_step(s: int) -> Composed:
                return "Then make a run toward goal.", {}

            return Question(second, text, (first, second_step))
        if kind == "ball":

            def where(s: int) -> Composed:
                holder = self.carrier_at(s)
                if holder == YOU:
                    return "You have it! Look up.", {"target": -1, "direction": None}
                word = self.direction_to(s, -1)
                who = f"{self.players[holder]} has it" if holder >= 0 else "It's loose"
                return f"{who}, {SCREEN_PHRASE[word]}.", {"target": -1, "direction": word}

            def then(s: int) -> Composed:
                holder = self.carrier_at(s)
                if holder >= PER_TEAM:
                    return f"Press {self.players[holder]} now!", {}
                return "Get into space and call for it.", {}

            return Question(second, "where is the ball?", (where, then))
        if kind == "shoot":

            def shoot(s: int) -> Composed:
                x, y = (float(v) for v in self.positions_at(s)[YOU])
                dist = math.hypot(100.0 - x, 30.0 - y)
                if dist < 25:
                    return "Yes, you're in range, hit it low.", {"distance": dist}
                return f"No, you're {round(dist / 2)} metres out. Get closer.", {"distance": dist}

            return Question(second, "should I shoot?", (shoot, lambda s: ("Aim for the far post.", {})))
        if kind == "time":

            def left(s: int) -> Composed:
                remaining = max(0, int(MATCH_SECONDS - (s - self._match_start(s))))
                return f"{remaining // 60} minutes {remaining % 60} seconds left.", {"remaining": remaining}

            def plan(s: int) -> Composed:
                a, b = self.score_at(s)
                if a > b:
                    return f"We lead {a}-{b}, keep it tight.", {}
                if a < b:
                    return f"We're down {a}-{b}, push forward.", {}
                return f"Level at {a}-{b}, go for it.", {}

            return Question(second, "how long is left?", (left, plan))

        def mark(s: int) -> Composed:
            pos = self.positions_at(s)
            opponents = list(range(PER_TEAM + 1, 2 * PER_TEAM))
            near = opponents[int(np.argmin([float(np.hypot(*(pos[o] - pos[YOU]))) for o in opponents]))]
            word = self.direction_to(s, near)
            return f"Mark {self.players[near]}, {SCREEN_PHRASE[word]}.", {"target": near, "direction": word}

        return Question(
            second, "who should I mark?", (mark, lambda s: ("Stay between him and our goal.", {}))
        )

    def _guide_followups(self, rng: np.random.Generator) -> list[Candidate]:
        out = []
        for event in self.events:
            details = event.details
            options: tuple[str, ...] = ()
            importance = event.importance
            if event.kind == "pass" and details.get("receiver_pid") == YOU:
                options, importance = ("Ball's coming to you, look up!", "It's yours, turn and go!"), 0.5
            elif event.kind == "pass" and details.get("pid") == YOU:
                options, importance = ("Nice pass, now move.", "Good ball, find space."), 0.35
            elif event.kind == "tackle" and details.get("pid") == YOU:
                options = ("Great tackle, go!", "Won it! Drive forward.")
            elif event.kind == "tackle" and details.get("victim_pid") == YOU:
                options = ("You lost it, track back!", "Get back and press!")
            elif event.kind == "goal" and details.get("team") == self.teams[0]:
                options = ("Goal! Great work, back to shape.", "Yes! Keep that up.")
            elif event.kind == "goal":
                options = ("Unlucky. Reset and press high.", "Heads up, we go again.")
            elif event.kind in ("save", "post", "miss") and details.get("pid") == YOU:
                options = ("Good effort, keep shooting.", "Close! Next one goes in.")
            elif event.kind in ("save", "post", "miss") and details.get("team") == self.teams[0]:
                options, importance = ("Good chance, keep pressing.", "So close, stay on them."), 0.5
            elif event.kind == "full_time":
                options = ("Full time. Well played.", "That's the match. Good effort.")
            elif event.kind in ("kickoff", "match_start"):
                options, importance = ("Kick-off, hold your position.", "Here we go, stay wide."), 0.3
            if options:
                out.append(self._followup(event, importance, commentary.from_templates(options, {}, rng)))
        return out
