"""What an exploration instruction asks for, as semantic categories the map can see.

"explore the bedroom first" -> {bed}; "find the kitchen and map it" -> {counter,
refrigerator}; "go back to the room with the sofa" -> {sofa}. Room words map to the objects
that define the room (as the procedural houses furnish them), object words to themselves
(with the scene vocabulary's synonyms). The heuristic policy ranks regions by these; a VLM
policy reads the instruction itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
