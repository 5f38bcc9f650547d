"""What an exploration instruction asks for, as semantic categories the map can see.

"explore the bedroom first" -> {bed}; "find the kitchen and map it" -> {counter,
refrigerator}; "go back to the room with the sofa" -> {sofa}. Room words map to the objects
that define the room (as the procedural houses furnish them), object words to themselves
(with the scene vocabulary's synonyms). The heuristic policy ranks regions by these, and
tells other rooms by what they hold (:func:`room_of`: a room with a bed is a bedroom), so it
does not explore them while it looks for the one asked for; a VLM policy reads the
instruction itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from embodia.sim.scene import category_from_name

ROOM_OBJECTS: dict[str, tuple[str, ...]] = {
    "bedroom": ("bed",),
    "kitchen": ("counter", "refrigerator"),
    "bathroom": ("toilet", "bathtub", "sink"),
    "toilet": ("toilet",),
    "living room": ("sofa", "tv"),
    "lounge": ("sofa", "tv"),
    "dining room": ("table", "chair"),
    "office": ("desk",),
    "study": ("desk", "shelf"),
}


ROOM_NAMES: dict[str, str] = {"lounge": "living room", "study": "office", "toilet": "bathroom"}
"""Other words for a room of :data:`ROOM_OBJECTS`, as the room they name."""

ROOM_SIGNS: tuple[tuple[str, str], ...] = (
    ("bed", "bedroom"),
    ("toilet", "bathroom"),
    ("bathtub", "bathroom"),
    ("counter", "kitchen"),
    ("refrigerator", "kitchen"),
    ("tv", "living room"),
    ("desk", "office"),
    ("sofa", "living room"),
)
"""Objects that say which room holds them, the surest first: a room with a bed and a desk
is a bedroom, one with a desk and a sofa an office. Tables, chairs, sinks and cabinets
stand in many kinds of room and say nothing."""

ROOMS_HOLDING: dict[str, frozenset[str]] = {
    "bed": frozenset({"bedroom"}),
    "toilet": frozenset({"bathroom"}),
    "bathtub": frozenset({"bathroom"}),
    "desk": frozenset({"office", "bedroom"}),
    "tv": frozenset({"living room", "bedroom"}),
    "sofa": frozenset({"living room", "office", "bedroom"}),
    "counter": frozenset({"kitchen"}),
    "refrigerator": frozenset({"kitchen"}),
}
"""The rooms each object of :data:`ROOM_SIGNS` may stand in (a desk in an office or a
bedroom): where one is seen, the room around it is one of these."""

OPEN_PLAN = frozenset({"living room", "kitchen", "dining room"})
"""Rooms that often share one open space, so that what says one of them is there does not
say the others are not."""


def open_plan_signs(rooms: frozenset[str]) -> frozenset[str]:
    """Objects that say a room sharing an open plan with one of ``rooms`` is near (a sofa
    while the kitchen is asked for): where one of them stands, the room asked for is likely
    in sight."""
    if not rooms & OPEN_PLAN:
        return frozenset()
    return frozenset(sign for sign, room in ROOM_SIGNS if room in OPEN_PLAN - rooms)


def foreign_signs(rooms: frozenset[str]) -> frozenset[str]:
    """Objects that stand only in rooms other than ``rooms`` and those sharing an open plan
    with them (:data:`ROOMS_HOLDING`; a bed, a toilet or a desk while the kitchen is asked
    for, not a sofa): the room around one need not be searched for ``rooms``. None without
    rooms to search for."""
    if not rooms:
        return frozenset()
    wanted = rooms | (OPEN_PLAN if rooms & OPEN_PLAN else frozenset())
    return frozenset(name for name, holding in ROOMS_HOLDING.items() if not holding & wanted)


def other_room(categories: Iterable[str], rooms: frozenset[str], open_plan: bool = True) -> bool:
    """Whether objects seen together say they are in a room other than ``rooms`` (a bed
    while the kitchen is asked for); with ``open_plan``, never for a room that may share an
    open plan with one of ``rooms`` (a sofa while the kitchen is asked for)."""
    kind = room_of(categories)
    if not rooms or kind is None or kind in rooms:
        return False
    return not (open_plan and kind in OPEN_PLAN and rooms & OPEN_PLAN)


REGION_WORDS: dict[str, str] = {
    "living": "living room",
    "kitchen": "kitchen",
    "bedroom": "bedroom",
    "bathroom": "bathroom",
    "dining": "dining room",
    "office": "office",
}
"""A scene region's kind (``Region.kind``) as an instruction names the room."""


def room_first_instruction(kind: str) -> str:
    """The instruction "explore the ROOM first" for a region kind of :data:`REGION_WORDS`."""
    if kind not in REGION_WORDS:
        raise ValueError(f"no instruction words for a {kind!r} room: expected one of {sorted(REGION_WORDS)}")
    return f"explore the {REGION_WORDS[kind]} first"


def instruction_categories(instruction: str, categories: Sequence[str]) -> frozenset[str]:
    """Categories (names from ``categories``) that an instruction is about."""
    text = " " + re.sub(r"[^a-z ]+", " ", instruction.lower()) + " "
    wanted: set[str] = set()
    for room, objects in ROOM_OBJECTS.items():
        if f" {room} " in text or f" {room}s " in text:
            wanted.update(objects)
    known = set(categories) - {"void", "wall", "floor", "ceiling", "door"}
    for word in text.split():
        for candidate in (word, word[:-1] if word.endswith("s") else word):
            name = category_from_name(candidate)
            if name in known:
                wanted.add(name)
    return frozenset(w for w in wanted if w in known)


def instruction_rooms(instruction: str) -> frozenset[str]:
    """The rooms (names of :data:`ROOM_OBJECTS`, synonyms resolved) an instruction names."""
    text = " " + re.sub(r"[^a-z ]+", " ", instruction.lower()) + " "
    named = {room for room in ROOM_OBJECTS if f" {room} " in text or f" {room}s " in text}
    return frozenset(ROOM_NAMES.get(room, room) for room in named)


def room_of(categories: Iterable[str]) -> str | None:
    """The room that objects seen together say they are in (:data:`ROOM_SIGNS`, surest
    first); None when none of them says."""
    held = set(categories)
    return next((room for sign, room in ROOM_SIGNS if sign in held), None)
