"""Drawing the dungeon: the tile atlas (every frame is one gather ``atlas[tiles_at(t)]``),
the overlays over the map (onset flash, level fade, recap card, feed line, banner) and the
HUD bar (HP, level, items, gold, clock), with its plain-data readout.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.games.base import (
    WHITE,
    Colour,
    Frame,
    blend,
    clock_text,
    draw_card,
    draw_feed,
    draw_text,
    fill_box,
)
from embodia.envs.streams.games.dungeon.level import (
    BURST,
    COLS,
    CORRIDOR,
    DOOR,
    FLOOR,
    FOG,
    HERO,
    ITEM_TILES,
    LOCKED,
    MONSTER_TILES,
    N_TILES,
    PASSABLE,
    ROWS,
    SPARKLE,
    STAIRS,
    TILE,
    VOID,
    WALL,
    Level,
)
from embodia.envs.streams.games.dungeon.play import MAX_HP, YELLOW, DungeonPlay

HUD_ROWS = 16
HUD_BG: Colour = (14, 12, 22)


def _sprite(pattern: str, palette: dict[str, Colour], base: NDArray[np.uint8]) -> NDArray[np.uint8]:
    tile = base.copy()
    for r, row in enumerate(pattern.split()):
        for c, ch in enumerate(row):
            if ch in palette:
                tile[r, c] = palette[ch]
    return tile


def tile_atlas() -> NDArray[np.uint8]:
    """The tile atlas, ``(N_TILES, 8, 8, 3)``: every frame is ``atlas[tile_grid]``."""
    atlas = np.zeros((N_TILES, TILE, TILE, 3), np.uint8)
    floor = np.full((TILE, TILE, 3), (52, 50, 62), np.uint8)
    floor[::4, ::4] = (70, 68, 82)
    floor[2::4, 2::4] = (62, 60, 74)
    corridor = np.full((TILE, TILE, 3), (40, 38, 46), np.uint8)
    corridor[1::3, 1::3] = (54, 52, 60)
    atlas[VOID] = (12, 10, 16)
    atlas[FLOOR] = floor
    atlas[CORRIDOR] = corridor
    wall = np.full((TILE, TILE, 3), (132, 94, 64), np.uint8)
    wall[3, :] = wall[7, :] = (80, 56, 40)
    wall[:3, 3] = wall[4:7, 7] = (80, 56, 40)
    atlas[WALL] = wall
    door = np.full((TILE, TILE, 3), (150, 90, 30), np.uint8)
    door[:, 0] = door[:, 7] = door[0, :] = (90, 50, 20)
    door[4, 5] = (240, 220, 120)
    atlas[DOOR] = door
    locked = door.copy()
    locked[2:6, 2:6] = (255, 215, 0)
    locked[3:5, 3:5] = (60, 40, 0)
    atlas[LOCKED] = locked
    stairs = floor.copy()
    for r in range(TILE):
        stairs[r, : TILE - r] = (200, 200, 210) if r % 2 == 0 else (110, 110, 125)
    atlas[STAIRS] = stairs
    atlas[FOG] = (2, 2, 6)
    atlas[HERO] = _sprite(
        "..aaaa.. ..asSa.. ...ss... .bbbbbb. s.bbbb.s ..bbbb.. ..b..b.. .bb..bb.",
        {"a": (250, 210, 80), "s": (240, 190, 150), "S": (20, 20, 20), "b": (40, 210, 255)},
        floor,
    )
    blob = "..xxxx.. .xxxxxx. xxexxexx xxxxxxxx xxxxxxxx x.xxxx.x x..xx..x ........"
    colours = {
        "rat": (165, 120, 80),
        "slime": (120, 255, 120),
        "goblin": (40, 170, 40),
        "skeleton": (235, 235, 225),
        "orc": (190, 60, 40),
    }
    for kind, tile in MONSTER_TILES.items():
        atlas[tile] = _sprite(blob, {"x": colours[kind], "e": (255, 30, 30)}, floor)
    atlas[ITEM_TILES["key"]] = _sprite(
        "........ .yyy.... .y.y.... .yyyyyyy .....y.y ........ ........ ........", {"y": (255, 215, 0)}, floor
    )
    atlas[ITEM_TILES["potion"]] = _sprite(
        "...ww... ...ww... ..rrrr.. .rrrrrr. .rrRrrr. .rrrrrr. ..rrrr.. ........",
        {"w": (230, 230, 230), "r": (235, 40, 110), "R": (255, 170, 200)},
        floor,
    )
    atlas[ITEM_TILES["gold"]] = _sprite(
        "........ ..gggg.. .gGGGGg. .gGggGg. .gGggGg. .gGGGGg. ..gggg.. ........",
        {"g": (200, 150, 0), "G": (255, 215, 40)},
        floor,
    )
    atlas[ITEM_TILES["sword"]] = _sprite(
        "......ss .....ss. ....ss.. ...ss... h.ss.... .hs..... .hh..... h..h....",
        {"s": (220, 225, 240), "h": (150, 90, 30)},
        floor,
    )
    atlas[ITEM_TILES["shield"]] = _sprite(
        ".bbbbbb. .bBBBBb. .bBwwBb. .bBwwBb. .bBBBBb. ..bBBb.. ...bb... ........",
        {"b": (40, 60, 200), "B": (80, 120, 255), "w": (240, 240, 240)},
        floor,
    )
    atlas[BURST] = _sprite(
        "m..m..m. .m.m.m.. ..mMm... mmMWMmm. ..mMm... .m.m.m.. m..m..m. ........",
        {"m": (200, 60, 255), "M": (255, 140, 255), "W": (255, 255, 255)},
        floor,
    )
    atlas[SPARKLE] = _sprite(
        "...y.... ...y.... yyyWyyy. ...y.... ...y.... ......y. .....yWy ......y.",
        {"y": (255, 230, 80), "W": (255, 255, 255)},
        floor,
    )
    atlas.setflags(write=False)
    return atlas


class DungeonView(DungeonPlay):
    """The dungeon's frames and HUD."""

    hud_rows: ClassVar[int] = HUD_ROWS
    _atlas: ClassVar[NDArray[np.uint8]] = tile_atlas()

    def _hud(self, time: float) -> dict[str, Any]:
        step = self._step(time)
        inv = self.inventory_at(time)
        items = ["key"] * inv["key"] + ["potion"] * inv["potion"]
        items += [name for name in ("sword", "shield") if inv[name]]
        return {
            "hp": int(self._hp[step]),
            "max_hp": MAX_HP,
            "level": self.level_at(time).number,
            "items": items,
            "gold": inv["gold"],
            "kills": inv["kills"],
            "clock": clock_text(time),
            **self._hud_overlays(time),
        }

    # -- drawing

    def _render(self, time: float) -> Frame:
        image = np.empty((HUD_ROWS + ROWS * TILE, COLS * TILE, 3), np.uint8)
        tiles = self._atlas[self.tiles_at(time)]
        image[HUD_ROWS:] = tiles.transpose(0, 2, 1, 3, 4).reshape(ROWS * TILE, COLS * TILE, 3)
        self._flash(image, time, alpha=0.4)
        fade = self.overlays.active("fade", time)
        if fade is not None:
            blend(image, (0, 0, 0), 0.85, rows=slice(HUD_ROWS, None))
        card = self.overlays.active("card", time)
        if card is not None:
            draw_card(image, card, 100, 40, 216)
        feed = self.overlays.active("feed", time)
        if feed is not None:
            draw_feed(image, feed, (124, 140), 3, 4, (10, 8, 16), feed.colour)
        banner = self.overlays.active("banner", time)
        if banner is not None:
            title, subtitle = banner.text.split("|")
            fill_box(image, 50, 96, 0, 256, (8, 6, 14))
            fill_box(image, 50, 52, 0, 256, banner.colour)
            fill_box(image, 94, 96, 0, 256, banner.colour)
            draw_text(image, title, 68 if subtitle else 73, 128, banner.colour, scale=2)
            if subtitle:
                draw_text(image, subtitle, 86, 128, WHITE)
        self._draw_hud(image, time)
        return image

    def _draw_hud(self, image: Frame, time: float) -> None:
        step = self._step(time)
        image[:HUD_ROWS] = HUD_BG
        hp = int(self._hp[step])
        draw_text(image, "HP", 8, 3, WHITE, align="left")
        fill_box(image, 4, 12, 20, 72, (60, 16, 20))
        fill_box(image, 5, 11, 21, 21 + 5 * max(hp, 0), (230, 40, 50))
        draw_text(image, f"LV {self.level_at(time).number}", 8, 78, WHITE, align="left")
        inv = self.inventory_at(time)
        x = 108
        for name in ("key", "potion", "sword", "shield"):
            if inv[name]:
                image[4:12, x : x + 8] = self._atlas[ITEM_TILES[name]]
                x += 9
                if name == "potion" and inv[name] > 1:
                    x += draw_text(image, f"x{inv[name]}", 8, x, WHITE, align="left") + 2
        image[4:12, 172:180] = self._atlas[ITEM_TILES["gold"]]
        draw_text(image, str(inv["gold"]), 8, 182, YELLOW, align="left")
        draw_text(image, clock_text(time), 8, 252, WHITE, align="right")

    # -- what the map shows

    def tiles_at(self, time: float) -> NDArray[np.uint8]:
        """The tile ids drawn at ``time`` (fog, items, monsters and the hero included)."""
        step = self._step(time)
        level = self.levels[int(self._level_index[step])]
        grid = level.grid.copy()
        r, c = level.locked_door
        grid[r, c] = DOOR if level.door_open <= time else LOCKED
        for item in level.items:
            if item.taken > time:
                grid[item.row, item.col] = ITEM_TILES[item.kind]
        cells = self._monster_cells[step]
        for m in level.monsters:
            mr, mc = int(cells[m.slot, 0]), int(cells[m.slot, 1])
            if mr >= 0:
                grid[mr, mc] = MONSTER_TILES[m.kind]
        for when, kr, kc in level.kills:
            if when <= time < when + 1.0:
                grid[kr, kc] = BURST
        grid[level.reveal > time] = FOG
        hero = self.hero_at(time)
        if hero is not None:
            grid[hero] = HERO
            for when, pr, pc in self._pickups(level):
                if when <= time < when + 1.0:
                    for dr, dc in ((-1, -1), (-1, 1), (1, -1), (1, 1)):
                        y, x = pr + dr, pc + dc
                        if 0 <= y < ROWS and 0 <= x < COLS and PASSABLE[grid[y, x]]:
                            grid[y, x] = SPARKLE
        return grid

    def _pickups(self, level: Level) -> list[tuple[float, int, int]]:
        return [(i.taken, i.row, i.col) for i in level.items if not math.isinf(i.taken)]
