"""The arena as played: five-a-side football, simulated play by play.

The simulation is a *script* of plays (kick-off, dribbles, passes, interceptions, tackles,
shots and their outcome: goal, save, off the post, wide), written as ball keyframes in a
Python loop over plays (a few thousand for two hours), then turned into every player's
position at every 10 Hz tick in one vectorised pass: each player holds a formation spot that
follows the ball, wanders a little, and is pulled onto the ball while he has it or is about to
(a receiver runs onto a pass, a tackler closes in). Shot outcomes land on whole seconds, so
the 2-fps chunk of the second a caster calls them shows their onset from its first frame.

Matches last ``MATCH_SECONDS`` of game clock; the score resets at each new kick-off. In
lulls a broadcast stat card (possession, shots, touches) comes up, which is what a caster's
colour commentary talks about. :class:`ArenaPlay` simulates the matches at construction and
gives the state at any time (``positions_at``, ``ball_at``, ``score_at``, ...); drawing and
guidance build on it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.games.base import WHITE, Colour, GameEvent, ProceduralGame

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

GOLD: Colour = (250, 200, 40)
CYAN: Colour = (40, 200, 235)
ORANGE: Colour = (255, 120, 30)
SILVER: Colour = (225, 225, 225)
MAGENTA: Colour = (210, 40, 130)
YELLOW: Colour = (255, 230, 0)


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


class ArenaPlay(ProceduralGame):
    """The arena's simulation and its state at any time; subclasses draw and guide it."""

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
