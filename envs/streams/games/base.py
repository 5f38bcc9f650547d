"""What every procedural game shares: on-screen overlays, text drawing, and the
:class:`ProceduralGame` base that turns a simulated game into a ``FrameSource`` with
ground-truth annotations (its event and script records, from
:mod:`~embodia.envs.streams.games.events`, are re-exported here).

A game simulates itself once, at construction, into compact numpy arrays plus an event log;
``frames_at`` only *renders* the stored state, so rendering any second is cheap and random
access, and a 2-hour game costs a few MB whatever the frame size. Text is rasterised once per
distinct string (an LRU cache), because PIL's text drawing is the slowest part of a frame.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFont

from embodia.core.limits import MAX_STREAM_SECONDS, check_image_size, check_seed
from embodia.envs.streams.core import SCENARIOS, TAGS, Annotation, Line, Scenario, StreamError
from embodia.envs.streams.games import commentary
from embodia.envs.streams.games.commentary import Candidate, Composer, Question
from embodia.envs.streams.games.events import GameEvent, ScriptLine, label_second

DATASET_NAME = "embodia-procedural"
NATIVE_SIZE = (144, 256)
"""(H, W) every game draws at; other sizes are a nearest-neighbour resample of it."""
HISTORY_SECONDS = 60
"""How far back an annotation's textual ``history`` reaches (the reference's 60 s)."""

Colour = tuple[int, int, int]
Frame = NDArray[np.uint8]
Asker = Callable[[int, np.random.Generator], Question]
"""Asks one kind of guidance question at a second (its wording drawn from the generator)."""
WHITE: Colour = (255, 255, 255)
CARD_BLUE: Colour = (90, 110, 235)
"""The stat / recap card's colour (its flash, top bar and title)."""

COMPASS = ("east", "north-east", "north", "north-west", "west", "south-west", "south", "south-east")
SCREEN_WORDS = {
    "east": "right",
    "north-east": "up-right",
    "north": "up",
    "north-west": "up-left",
    "west": "left",
    "south-west": "down-left",
    "south": "down",
    "south-east": "down-right",
}
"""The compass as screen words (north is up), for games where "north" sounds odd."""


def compass(dx: float, dy: float) -> str | None:
    """Eight-way direction of a screen offset (``dy`` grows downwards, so north is up);
    None when there is no offset."""
    if abs(dx) < 1e-9 and abs(dy) < 1e-9:
        return None
    sector = round(math.atan2(-dy, dx) / (math.pi / 4)) % 8
    return COMPASS[sector]


# ---------------------------------------------------------------- overlays


@dataclass(frozen=True)
class Overlay:
    """Something drawn over the scene for a while: a banner, a feed line, a card, a flash."""

    slot: str
    start: float
    end: float
    text: str = ""
    colour: Colour = (255, 255, 255)


class OverlayTrack:
    """Overlays per slot, at most one showing per slot (the latest started); looked up by
    binary search so a 2-hour track costs nothing per frame."""

    def __init__(self) -> None:
        self._pending: dict[str, list[Overlay]] = {}
        self._starts: dict[str, NDArray[np.float64]] = {}
        self._items: dict[str, list[Overlay]] = {}

    def add(
        self, slot: str, start: float, end: float, text: str = "", colour: Colour = (255, 255, 255)
    ) -> None:
        if end > start:
            self._pending.setdefault(slot, []).append(Overlay(slot, start, end, text, colour))

    def freeze(self) -> None:
        """Sort each slot and cut every overlay off where the next one starts."""
        for slot, items in self._pending.items():
            items = sorted(items, key=lambda o: o.start)
            cut = [
                Overlay(
                    o.slot,
                    o.start,
                    min(o.end, items[i + 1].start) if i + 1 < len(items) else o.end,
                    o.text,
                    o.colour,
                )
                for i, o in enumerate(items)
            ]
            self._items[slot] = [o for o in cut if o.end > o.start]
            self._starts[slot] = np.asarray([o.start for o in self._items[slot]], np.float64)
        self._pending = {}

    def active(self, slot: str, time: float) -> Overlay | None:
        starts = self._starts.get(slot)
        if starts is None or not len(starts):
            return None
        index = int(np.searchsorted(starts, time + 1e-9, side="right")) - 1
        if index < 0:
            return None
        item = self._items[slot][index]
        return item if time < item.end - 1e-9 else None

    def all(self, slot: str) -> list[Overlay]:
        return list(self._items.get(slot, ()))


# ---------------------------------------------------------------- drawing


@lru_cache(maxsize=1)
def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default()


@lru_cache(maxsize=2048)
def text_mask(text: str, scale: int = 1) -> NDArray[np.bool_]:
    """The pixels of ``text`` in PIL's default font, cached: a clock string or a banner is
    rasterised once, not once per frame (bounded, so a 2-hour clock keeps memory flat)."""
    font = _font()
    left, _, right, _ = (int(v) for v in font.getbbox(text or " "))
    _, top, _, bottom = (int(v) for v in font.getbbox("Ag"))
    height = max(1, bottom - top + 1)
    width = max(1, right - left + 1)
    image = Image.new("L", (width, height))
    ImageDraw.Draw(image).text((-left, -top), text, fill=255, font=font)
    mask = np.asarray(image) >= 110
    if scale > 1:
        mask = mask.repeat(scale, axis=0).repeat(scale, axis=1)
    mask.setflags(write=False)
    return mask


def draw_text(
    image: Frame, text: str, y: int, x: int, colour: Colour, scale: int = 1, align: str = "center"
) -> int:
    """Draw ``text`` with its vertical centre at row ``y``; ``x`` is its centre, left or
    right edge as ``align`` says. Clipped to the image; returns the text's width."""
    mask = text_mask(text, scale)
    h, w = mask.shape
    top = y - h // 2
    left = x - w // 2 if align == "center" else (x if align == "left" else x - w)
    rows, cols = image.shape[:2]
    y0, x0 = max(top, 0), max(left, 0)
    y1, x1 = min(top + h, rows), min(left + w, cols)
    if y1 > y0 and x1 > x0:
        region = image[y0:y1, x0:x1]
        region[mask[y0 - top : y1 - top, x0 - left : x1 - left]] = colour
    return w


def fill_box(image: Frame, y0: int, y1: int, x0: int, x1: int, colour: Colour) -> None:
    image[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = colour


def blend(
    image: Frame, colour: Colour, alpha: float, rows: slice = slice(None), cols: slice = slice(None)
) -> None:
    """Mix ``colour`` into (part of) the image in place, in integer arithmetic (exact and
    reproducible, and about 3x faster than floats)."""
    a = int(round(alpha * 256))
    region = image[rows, cols]
    mixed = (region.astype(np.uint16) * (256 - a) + np.asarray(colour, np.uint16) * a) >> 8
    region[...] = mixed.astype(np.uint8)


def disc(radius: float) -> NDArray[np.bool_]:
    size = int(math.ceil(radius * 2))
    c = (size - 1) / 2
    yy, xx = np.mgrid[:size, :size]
    return np.asarray((yy - c) ** 2 + (xx - c) ** 2 <= radius**2 + 0.25)


def stamp(image: Frame, mask: NDArray[np.bool_], cy: int, cx: int, colour: Colour) -> None:
    """Paint ``mask`` centred at (cy, cx), clipped to the image."""
    h, w = mask.shape
    top, left = cy - h // 2, cx - w // 2
    rows, cols = image.shape[:2]
    y0, x0, y1, x1 = max(top, 0), max(left, 0), min(top + h, rows), min(left + w, cols)
    if y1 > y0 and x1 > x0:
        image[y0:y1, x0:x1][mask[y0 - top : y1 - top, x0 - left : x1 - left]] = colour


def draw_card(image: Frame, card: Overlay, top: int, left: int, right: int) -> None:
    """A ``title|stat`` card: a dark panel 36 rows high under a bar of the card's colour, the
    title in that colour over the stat in white, both centred."""
    title, stat = card.text.split("|")
    centre = (left + right) // 2
    blend(image, (14, 22, 60), 0.8, rows=slice(top, top + 36), cols=slice(left, right))
    fill_box(image, top, top + 3, left, right, card.colour)
    draw_text(image, title, top + 11, centre, card.colour)
    draw_text(image, stat, top + 25, centre, WHITE)


def draw_feed(
    image: Frame,
    feed: Overlay,
    rows: tuple[int, int],
    left: int,
    bar: int,
    background: Colour,
    text_colour: Colour,
) -> None:
    """A feed line: a box over ``rows`` from ``left`` as wide as its text, opened by a bar
    ``bar`` pixels wide in the feed's colour, the text left-aligned after it."""
    top, bottom = rows
    text_left = left + bar + 4
    width = int(text_mask(feed.text).shape[1])
    fill_box(image, top, bottom, left, text_left + width + 5, background)
    fill_box(image, top, bottom, left, left + bar, feed.colour)
    draw_text(image, feed.text, (top + bottom) // 2, text_left, text_colour, align="left")


def clock_text(seconds: float) -> str:
    whole = max(0, int(seconds))
    return f"{whole // 60:02d}:{whole % 60:02d}"


# ---------------------------------------------------------------- the game base


class ProceduralGame(ABC):
    """A seeded game simulated at construction; a ``FrameSource`` with a ground-truth writer.

    Subclasses fill ``events`` and ``overlays`` in :meth:`_simulate`, draw the stored state
    in :meth:`_render` and read the HUD in :meth:`_hud`, and write commentary from their
    event log in :meth:`_script` (see :mod:`embodia.envs.streams.games.commentary`).
    """

    name: str = "game"
    """The game's name (``make_game``'s); a plain attribute, as ``FrameSource`` wants."""
    caster: ClassVar[str] = "CASTER"
    co_caster: ClassVar[str] = "SPEAKER_1"
    guide: ClassVar[str] = "GUIDE"
    hud_rows: ClassVar[int] = 14
    """Rows at the top of a native frame that hold the HUD bar (the onset flash spares it)."""
    solo_persona: ClassVar[tuple[str, ...]] = ()
    """The caster as the solo scenario's ``active_speaker.persona`` describes him."""
    co_commentary_persona: ClassVar[tuple[str, ...]] = (
        "play-by-play caster",
        "takes turns with the analyst",
        "short lines",
    )
    """The main caster as the co-commentary scenario describes him."""
    guide_persona: ClassVar[tuple[str, ...]] = ()
    """The guide as the guidance scenario describes him."""

    def __init__(self, seed: int = 0, duration: float = 120.0, size: tuple[int, int] | None = None) -> None:
        # Bounded before the game is simulated: its event log and frames grow with both.
        check_seed(f"{self.name}: seed", int(seed) if isinstance(seed, np.integer) else seed, StreamError)
        if not (isinstance(duration, int | float) and 1.0 <= duration <= MAX_STREAM_SECONDS):
            raise StreamError(
                f"{self.name}: duration must be 1..{MAX_STREAM_SECONDS} seconds, got {duration!r}"
            )
        if size is None:
            size = NATIVE_SIZE
        if len(size) != 2 or any(not isinstance(v, int | np.integer) or v < 8 for v in size):
            raise StreamError(f"{self.name}: size must be (height, width) of at least 8 pixels, got {size!r}")
        check_image_size(f"{self.name}: frame size", int(size[0]), int(size[1]), StreamError)
        self.seed = int(seed)
        self.duration = float(duration)
        self.size: tuple[int, int] = (int(size[0]), int(size[1]))
        self.events: list[GameEvent] = []
        self.overlays = OverlayTrack()
        self._scripts: dict[str, list[ScriptLine]] = {}
        if self.size == NATIVE_SIZE:
            self._resample: tuple[NDArray[np.intp], NDArray[np.intp]] | None = None
        else:
            rows = (np.arange(self.size[0]) * NATIVE_SIZE[0]) // self.size[0]
            cols = (np.arange(self.size[1]) * NATIVE_SIZE[1]) // self.size[1]
            self._resample = (rows, cols)
        self._simulate()
        self.events = sorted((e for e in self.events if e.time < self.duration), key=lambda e: e.time)
        self.overlays.freeze()

    # -- FrameSource

    @property
    def video_path(self) -> str:
        return f"procedural://{self.name}?seed={self.seed}"

    def frames_at(self, times: Sequence[float]) -> list[Frame]:
        out = []
        for t in times:
            frame = self._render(self._clamp(float(t)))
            if self._resample is not None:
                # two 1-D takes: several times faster than one 2-D fancy index
                frame = np.take(np.take(frame, self._resample[0], axis=0), self._resample[1], axis=1)
            out.append(frame)
        return out

    def hud_at(self, time: float) -> dict[str, Any]:
        return self._hud(self._clamp(float(time)))

    def _clamp(self, time: float) -> float:
        return min(max(time, 0.0), self.duration)

    # -- ground truth

    def script(self, scenario: str) -> list[ScriptLine]:
        """The whole game's ground-truth lines for a scenario (cached), in start order."""
        if scenario not in SCENARIOS:
            raise StreamError(f"unknown scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")
        if scenario not in self._scripts:
            lines = self._script(scenario)
            limit = int(math.floor(self.duration))
            kept = [s for s in lines if s.line.start < limit]
            self._scripts[scenario] = sorted(kept, key=lambda s: (s.line.start, s.line.speaker))
        return self._scripts[scenario]

    def annotation(self, scenario: str = "solo", begin: int = 0, end: int | None = None) -> Annotation:
        """The reference's record for the clip ``[begin, end)`` of this game: the lines that
        start inside it, their ends cut at the clip's end, and the 60 s before as history."""
        limit = int(math.floor(self.duration))
        end = limit if end is None else int(end)
        if not 0 <= begin < end <= limit:
            raise StreamError(
                f"{self.name}: clip [{begin}, {end}) must lie inside [0, {limit}] with begin < end"
            )
        script = self.script(scenario)
        lines = [
            Line(s.line.role, s.line.speaker, s.line.start, min(s.line.end, end), s.line.text)
            for s in script
            if begin <= s.line.start < end
        ]
        history = "\n".join(
            f"[{s.line.speaker}]: {s.line.text}"
            for s in script
            if begin - HISTORY_SECONDS <= s.line.start < begin
        )
        speaker = self.guide if scenario == "guidance" else self.caster
        persona = {
            "solo": self.solo_persona,
            "co-commentary": self.co_commentary_persona,
            "guidance": self.guide_persona,
        }[scenario]
        tag = TAGS[scenario]  # type: ignore[index]
        return Annotation(
            video_path=self.video_path,
            video_begin=begin,
            video_end=end,
            video_duration=limit,
            active_speaker={"name": speaker, "persona": list(persona)},
            annotations=lines,
            metadata={"tag": tag, "dataset_name": DATASET_NAME, "game": self.name, "seed": self.seed},
            history=history,
        )

    # -- for subclasses

    @abstractmethod
    def _simulate(self) -> None: ...

    @abstractmethod
    def _render(self, time: float) -> Frame: ...

    @abstractmethod
    def _hud(self, time: float) -> dict[str, Any]: ...

    # What a game's casters say (its template tables) and how they share the work.
    calls: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    reactions: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    reaction_chance: ClassVar[Mapping[str, float]] = {}
    default_reaction_chance: ClassVar[float] = 0.3
    co_share: ClassVar[Mapping[str, float]] = {}
    """The chance the co-caster, not the main caster, calls an event of a kind (default 0.15)."""
    script_stream: ClassVar[int] = 0
    """Seeds the script's random stream apart from the simulation's."""

    def _fields(self, event: GameEvent) -> dict[str, Any]:
        return {"actor": event.actor, **event.details}

    def _script(self, scenario: Scenario) -> list[ScriptLine]:
        rng = np.random.default_rng([self.seed, self.script_stream, SCENARIOS.index(scenario)])
        if scenario == "solo":
            return commentary.solo(self.events, self.calls, self._fields, rng, self.caster)
        if scenario == "co-commentary":
            return commentary.co_commentary(
                self.events,
                self.calls,
                self.reactions,
                self._fields,
                rng,
                self.caster,
                self.co_caster,
                co_share=lambda e: self.co_share.get(e.kind, 0.15),
                react=lambda e: self.reaction_chance.get(e.kind, self.default_reaction_chance),
            )
        return commentary.guidance(self._questions(rng), self._guide_followups(rng), self.guide)

    question_gap: ClassVar[tuple[int, int]] = (12, 22)
    """Seconds between one guidance question and the next: drawn from ``[low, high)``."""

    def _questions(self, rng: np.random.Generator) -> list[Question]:
        """The player's guidance questions with the guide's grounded answers: the first 5 to
        11 s in, then one every ``question_gap`` seconds, drawn from those that make sense
        then (3 s later when none does)."""
        out = []
        second = int(rng.integers(5, 12))
        limit = int(self.duration) - 4
        while second < limit:
            askers = self._askers(second)
            if not askers:
                second += 3
                continue
            ask = askers[int(rng.integers(0, len(askers)))]
            out.append(ask(second, rng))
            second += int(rng.integers(*self.question_gap))
        return out

    @abstractmethod
    def _askers(self, second: int) -> Sequence[Asker]:
        """The questions the player may ask at ``second`` (one listed twice is twice as
        likely); empty when there is nobody to guide."""

    @abstractmethod
    def _guide_followups(self, rng: np.random.Generator) -> list[Candidate]:
        """The guide's unprompted follow-ups as the player progresses."""

    def _followup(self, event: GameEvent, importance: float, compose: Composer) -> Candidate:
        """A guide's line about ``event``, in the event's window."""
        first, last = commentary.event_window(event)
        return Candidate(first, last, importance, self.guide, "assistant", compose, event, purpose="followup")

    # -- shared events and overlays

    def _add_event(
        self,
        time: float,
        kind: str,
        actor: str,
        importance: float,
        flash: Colour | None = None,
        **details: Any,
    ) -> GameEvent:
        """Log an event; with a ``flash`` colour, tint the frames from it to the end of the
        second a line about it may start in (see :meth:`_flash`)."""
        event = GameEvent(round(time, 4), kind, actor, details, importance)
        self.events.append(event)
        if flash is not None:
            self.overlays.add("flash", event.time, label_second(event.time) + 1.0, colour=flash)
        return event

    def _hud_overlays(self, time: float) -> dict[str, str | None]:
        """The HUD readout of the banner (a ``title|subtitle`` one as one line), the feed line
        and the card (``title: stat``) showing at ``time``; None where none shows."""
        banner = self.overlays.active("banner", time)
        feed = self.overlays.active("feed", time)
        card = self.overlays.active("card", time)
        return {
            "banner": banner.text.replace("|", " ").strip() if banner else None,
            "feed": feed.text if feed else None,
            "card": card.text.replace("|", ": ") if card else None,
        }

    def _lulls(
        self, lead: float, room: float, every: int, blocked: Sequence[tuple[float, float]]
    ) -> list[float]:
        """Whole seconds for cards in the lulls of play: from ``lead`` s after a notable event
        (importance 0.4 or more), every ``every`` s while ``room`` s remain before the next
        one, none inside a ``blocked`` span (ends included)."""
        notable = [e.time for e in self.events if e.importance >= 0.4] + [self.duration]
        times = []
        previous = 0.0
        for moment in notable:
            t = math.ceil(previous + lead)
            while t + room <= moment:
                if not any(lo <= t <= hi for lo, hi in blocked):
                    times.append(float(t))
                t += every
            previous = moment
        return times

    def _add_card(self, time: float, actor: str, title: str, stat: str, /, **details: Any) -> GameEvent:
        """A ``card`` event and the card showing ``title`` over ``stat`` for 4 s after it (they
        are positional-only, so the event's ``details`` may carry them too)."""
        event = self._add_event(time, "card", actor, 0.35, CARD_BLUE, **details)
        self.overlays.add("card", event.time, event.time + 4.0, f"{title}|{stat}", CARD_BLUE)
        return event

    # -- shared drawing of overlays

    def _flash(self, image: Frame, time: float, alpha: float = 0.35) -> None:
        """The onset cue: a full-frame tint from an event until the end of the second a line
        about it may start in, so the labelled chunk looks unlike its neighbours."""
        flash = self.overlays.active("flash", time)
        if flash is not None:
            blend(image, flash.colour, alpha, rows=slice(self.hud_rows, None))
