"""Coaching the arena's player (``YOU``, a forward of the first team): the questions a player
asks (who to pass to, where the ball is, whether to shoot, ...), each answered step by step from
the match at the second the coach speaks, and the coach's unprompted follow-ups to play.
"""

from __future__ import annotations

import math

import numpy as np

from embodia.envs.streams.games import commentary
from embodia.envs.streams.games.arena.play import MATCH_SECONDS, PER_TEAM, YOU, ArenaPlay
from embodia.envs.streams.games.base import SCREEN_WORDS, Asker, compass
from embodia.envs.streams.games.commentary import Candidate, Composed, Question

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


class ArenaGuide(ArenaPlay):
    """The arena's guidance: the player's questions and the coach's answers and follow-ups."""

    question_gap = (13, 24)
    guide_persona = ("coach in the player's ear", "concrete", "step by step")

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

    def _askers(self, second: int) -> tuple[Asker, ...]:
        return (
            self._pass_question,
            self._ball_question,
            self._shoot_question,
            self._time_question,
            self._mark_question,
        )

    def _pass_question(self, second: int, rng: np.random.Generator) -> Question:
        """Who to pass to: the open team-mate and where he is, then the run to make."""
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

    def _ball_question(self, second: int, rng: np.random.Generator) -> Question:
        """Where the ball is and who has it, then what to do about it."""

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

    def _shoot_question(self, second: int, rng: np.random.Generator) -> Question:
        """Whether to shoot from where the player stands."""

        def shoot(s: int) -> Composed:
            x, y = (float(v) for v in self.positions_at(s)[YOU])
            dist = math.hypot(100.0 - x, 30.0 - y)
            if dist < 25:
                return "Yes, you're in range, hit it low.", {"distance": dist}
            return f"No, you're {round(dist / 2)} metres out. Get closer.", {"distance": dist}

        return Question(second, "should I shoot?", (shoot, lambda s: ("Aim for the far post.", {})))

    def _time_question(self, second: int, rng: np.random.Generator) -> Question:
        """How long is left in the match, then what the score asks for."""

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

    def _mark_question(self, second: int, rng: np.random.Generator) -> Question:
        """Who to mark: the nearest opponent and where he is."""

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
