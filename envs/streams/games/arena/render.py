"""Drawing the arena: the pitch (drawn once), the players, the ball and the user's marker over
it, the overlays (onset flash, stat card, feed line, banner) and the score bar, with the HUD's
plain-data readout.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.games.arena.play import (
    GOAL_Y,
    MATCH_SECONDS,
    PER_TEAM,
    SHORT,
    YELLOW,
    YOU,
    ArenaPlay,
)
from embodia.envs.streams.games.base import (
    WHITE,
    Colour,
    Frame,
    clock_text,
    disc,
    draw_card,
    draw_feed,
    draw_text,
    fill_box,
    stamp,
)

KEEPER_KITS: tuple[Colour, Colour] = ((250, 250, 120), (120, 250, 250))
INK: Colour = (18, 18, 28)
HUD_BG: Colour = (12, 14, 30)
HUD_ROWS = 14
SX, SY = 2.36, 2.03
"""Pixels per field unit (the field is 100 x 60 units)."""
OX, OY = 10, 18
"""Pixel of field point (0, 0)."""


def draw_pitch() -> Frame:
    """The pitch and the empty score bar, which every frame starts from."""
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


class ArenaView(ArenaPlay):
    """The arena's frames and HUD."""

    hud_rows: ClassVar[int] = HUD_ROWS
    _background: ClassVar[Frame] = draw_pitch()
    _player_disc: ClassVar[NDArray[np.bool_]] = disc(2.6)
    _ball_disc: ClassVar[NDArray[np.bool_]] = disc(1.6)
    _ball_rim: ClassVar[NDArray[np.bool_]] = disc(2.2)
    _marker: ClassVar[NDArray[np.bool_]] = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 0], [0, 0, 1, 0, 0]], bool)

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
