"""Captioned scenes whose objects are known exactly, for measuring object hallucination.

**The scenes** (:func:`caption_scene`): CLEVR-like objects (the puzzle scenes of
:mod:`embodia.envs.puzzles.clevr_scene`) placed in a ``SCENE_SIDE``-pixel square so they stay
large once a VLM's image processor shrinks the picture; ``MIN_OBJECTS``-``MAX_OBJECTS``
objects, none hiding another.

**The captions** (:func:`caption_text`): "There are 3 objects: a red cube, a blue sphere and a
grey cylinder." — the objects left to right, each as colour and shape. An *object* in the
CHAIR sense is a (colour, shape) pair: a mention is **real** when the scene holds an object
of that colour and shape, **hallucinated** otherwise (:func:`label_mentions`).

**Records** (:func:`caption_records`): chat records (``messages``, ``images`` relative to the
records' folder) for the SFT recipe, each with its scene's ``objects``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodia.envs.puzzles.clevr_scene import COLOURS, SHAPES, SIZES, render_scene
from embodia.perception.hallucination.mentions import Mention

SCENE_SIDE = 120
"""Pixels of a scene's side (a crop of the puzzle renderer's 320x240 canvas)."""
MIN_OBJECTS, MAX_OBJECTS = 1, 3
COLUMNS = 3
"""A scene's columns: each holds at most one object."""
CAPTION_PROMPT = "Describe the image in detail."
"""The request every caption answers (the wording of the CHAIR evaluations)."""
NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six")
_MENTION = re.compile(r"\b(?P<colour>" + "|".join(COLOURS) + r")\s+(?P<shape>" + "|".join(SHAPES) + r")s?\b")


def caption_scene(seed: int, index: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Scene ``index`` of the set ``seed``: its RGB image (``SCENE_SIDE`` square) and its
    objects (``colour``, ``shape``, ``size``, ``x``, ``y``), one per column of ``COLUMNS``
    (so left-to-right order is plain to see), at a random height."""
    rng = np.random.default_rng([seed, index])
    count = int(rng.integers(MIN_OBJECTS, MAX_OBJECTS + 1))
    columns = sorted(rng.choice(COLUMNS, size=count, replace=False).tolist())
    width = SCENE_SIDE / COLUMNS
    objects: list[dict[str, Any]] = []
    for column in columns:
        size = "large"  # small objects shrink to a few pixels in a VLM's input: shape unreadable
        half = SIZES[size]
        x = int(width * (column + 0.5) + rng.integers(-3, 4))
        y = int(rng.integers(half + 2, SCENE_SIDE - half - 6))
        colour, shape = str(rng.choice(list(COLOURS))), str(rng.choice(SHAPES))
        objects.append({"id": len(objects), "colour": colour, "shape": shape, "size": size, "x": x, "y": y})
    image = render_scene({"objects": objects})[:SCENE_SIDE, :SCENE_SIDE]
    return np.ascontiguousarray(image), objects


def caption_text(objects: Sequence[Mapping[str, Any]]) -> str:
    """The reference caption of a scene (module docstring)."""
    ordered = sorted(objects, key=lambda o: (o["x"], o["id"]))
    items = [f"a {o['colour']} {o['shape']}" for o in ordered]
    if not items:
        return "There are no objects."
    if len(items) == 1:
        return f"There is one object: {items[0]}."
    listing = ", ".join(items[:-1]) + " and " + items[-1]
    return f"There are {NUMBER_WORDS[len(items)]} objects: {listing}."


def find_mentions(caption: str) -> list[Mention]:
    """The (colour, shape) mentions of ``caption`` in order, with their character spans."""
    return [
        Mention(
            text=match.group(0),
            start=match.start(),
            end=match.end(),
            key=(match.group("colour"), match.group("shape")),
        )
        for match in _MENTION.finditer(caption)
    ]


def scene_objects(objects: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """The scene's objects as CHAIR keys: (colour, shape) pairs."""
    return {(str(o["colour"]), str(o["shape"])) for o in objects}


def label_mentions(caption: str, objects: Sequence[Mapping[str, Any]]) -> list[Mention]:
    """The mentions of ``caption``, each labelled ``hallucinated`` against the scene."""
    present = scene_objects(objects)
    return [m.labelled(m.key not in present) for m in find_mentions(caption)]


def caption_without(caption: str, flagged: Sequence[Mention]) -> str:
    """``caption`` rewritten in the caption grammar over the mentions that remain once the
    ``flagged`` ones are dropped (post-hoc removal's constrained edit, for this caption format)."""
    drop = {(m.start, m.end) for m in flagged}
    kept = [match for match in _MENTION.finditer(caption) if (match.start(), match.end()) not in drop]
    return caption_text(
        [
            {"colour": m.group("colour"), "shape": m.group("shape"), "x": i, "id": i}
            for i, m in enumerate(kept)
        ]
    )


def caption_records(folder: Path, seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` caption records of the set ``seed``, their images written as PNG files in
    ``folder`` (paths in the records relative to it); each also carries its scene's
    ``objects``."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for index in range(count):
        image, objects = caption_scene(seed, index)
        name = f"{seed}-{index}.png"
        Image.fromarray(image).save(folder / name)
        records.append(
            {
                "messages": [
                    {"role": "user", "content": CAPTION_PROMPT},
                    {"role": "assistant", "content": caption_text(objects)},
                ],
                "images": [name],
                "objects": objects,
            }
        )
    return records
