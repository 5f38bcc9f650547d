"""Captioned scenes whose objects are known exactly, for measuring object hallucination.

Two **caption sources** (:data:`CAPTION_SOURCES`), each a :class:`CaptionSource`:

- ``simulator`` (:func:`simulator_scene`): a panorama of the embedded simulator, taken at a
  random navigable point of a procedural house, its objects read from the render's exact
  per-pixel semantics. The band around the horizon (where furniture stands) is folded into a
  square: the panorama's left half on top, its right half below, so a VLM's square input
  keeps all of it. An object is a furniture category ("bed"): the caption names those
  covering at least ``MIN_NAMED_PIXELS`` pixels; a mention is **real** when the category
  shows in the image at all, **hallucinated** otherwise. Hallucinations here come the way
  they come in photographs: from what usually stands together (a bathroom's toilet, sink and
  bathtub) more than from what is seen.
- ``clevr`` (:func:`clevr_scene`): CLEVR-like objects (the puzzle scenes of
  :mod:`embodia.envs.puzzles.clevr_scene`) in a ``SCENE_SIDE``-pixel square,
  ``MIN_OBJECTS``-``MAX_OBJECTS`` large ones, one per column. An object is a (colour, shape)
  pair.

**The captions** (:meth:`CaptionSource.caption`): "There are 3 objects: a red cube, a blue
sphere and a grey cylinder." — the named objects left to right (panorama: by azimuth), each
once. A mention's *key* is a tuple of words (``("red", "cube")``, ``("bed",)``), comparable
with the scene's keys (the CHAIR sense of an object).

**Records** (:func:`caption_records`): chat records (``messages``, ``images`` relative to the
records' folder) for the SFT recipe, each with its scene's ``objects``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, cast

import numpy as np

from embodia.envs.puzzles.clevr_scene import COLOURS, SHAPES, SIZES, render_scene
from embodia.envs.puzzles.embodied import STRUCTURE
from embodia.perception.hallucination.mentions import HallucinationError, Mention

CAPTION_PROMPT = "Describe the image in detail."
"""The request every caption answers (the wording of the CHAIR evaluations)."""
NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

Key = tuple[str, ...]
Scene = tuple[np.ndarray, list[dict[str, Any]]]


def listing(keys: Sequence[Key]) -> str:
    """The caption naming ``keys`` in order (module docstring)."""
    items = ["a " + " ".join(key) for key in keys]
    if len(items) >= len(NUMBER_WORDS):
        raise HallucinationError(f"a caption names at most {len(NUMBER_WORDS) - 1} objects; got {len(items)}")
    if not items:
        return "There are no objects."
    if len(items) == 1:
        return f"There is one object: {items[0]}."
    return (
        f"There are {NUMBER_WORDS[len(items)]} objects: " + ", ".join(items[:-1]) + " and " + items[-1] + "."
    )


@dataclass(frozen=True)
class CaptionSource:
    """Where captioned scenes come from and how their captions read (module docstring)."""

    name: str
    render: Callable[[int, int], Scene]
    """``(seed, index) -> (RGB image, objects)``: scene ``index`` of the set ``seed``."""
    fields: tuple[str, ...]
    """The object fields that make its key, in caption word order."""
    values: tuple[tuple[str, ...], ...]
    """Each field's possible words."""

    def scene(self, seed: int, index: int) -> Scene:
        return self.render(seed, index)

    @cached_property
    def vocabulary(self) -> list[Key]:
        """Every key a caption can name (POPE's pool of absent objects)."""
        keys: list[Key] = [()]
        for words in self.values:
            keys = [key + (word,) for key in keys for word in words]
        return keys

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        words = [
            f"(?P<f{i}>" + "|".join(map(re.escape, sorted(w, key=len, reverse=True))) + ")"
            for i, w in enumerate(self.values)
        ]
        return re.compile(r"\b" + r"\s+".join(words) + r"s?\b")

    def key(self, obj: Mapping[str, Any]) -> Key:
        return tuple(str(obj[field]) for field in self.fields)

    def keys(self, objects: Iterable[Mapping[str, Any]]) -> set[Key]:
        """The keys of everything in the scene (what a mention may name without hallucinating)."""
        return {self.key(o) for o in objects}

    def caption(self, objects: Sequence[Mapping[str, Any]]) -> str:
        """The reference caption: the objects marked ``named`` (all by default), left to right."""
        named = sorted((o for o in objects if o.get("named", True)), key=lambda o: (o["x"], o["id"]))
        return listing([self.key(o) for o in named])

    def find_mentions(self, caption: str) -> list[Mention]:
        """The mentions of ``caption`` in order, with their character spans."""
        return [
            Mention(
                text=match.group(0),
                start=match.start(),
                end=match.end(),
                key=tuple(match.group(f"f{i}") for i in range(len(self.fields))),
            )
            for match in self._pattern.finditer(caption)
        ]

    def label_mentions(self, caption: str, present: Iterable[Sequence[str]]) -> list[Mention]:
        """The mentions of ``caption``, each labelled ``hallucinated`` unless its key is among
        ``present`` (keys, or a scene's objects through :meth:`keys`)."""
        keys = {tuple(k) for k in present}
        return [m.labelled(m.key not in keys) for m in self.find_mentions(caption)]

    def caption_without(self, caption: str, flagged: Sequence[Mention]) -> str:
        """``caption`` rewritten in the caption grammar over the mentions that remain once the
        ``flagged`` ones are dropped (post-hoc removal's constrained edit, for this format)."""
        drop = {(m.start, m.end) for m in flagged}
        kept = [m.key for m in self.find_mentions(caption) if (m.start, m.end) not in drop]
        return listing([cast(Key, key) for key in kept])  # this source's mentions carry its keys


# --------------------------------------------------------------------------- CLEVR-like scenes

SCENE_SIDE = 120
"""Pixels of a CLEVR scene's side (a crop of the puzzle renderer's 320x240 canvas)."""
MIN_OBJECTS, MAX_OBJECTS = 1, 3
COLUMNS = 3
"""A CLEVR scene's columns: each holds at most one object."""


def clevr_scene(seed: int, index: int) -> Scene:
    """CLEVR scene ``index`` of the set ``seed``: its RGB image (``SCENE_SIDE`` square) and its
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


# --------------------------------------------------------------------------- simulator panoramas

PANORAMA_HEIGHT = 96
"""Rows of the rendered panorama (180 degrees of elevation; its width is twice that)."""
BAND = (40, 88)
"""The panorama rows kept: 15 degrees above the horizon to 75 below, where furniture stands
(seen from the simulator's sensor height)."""
MIN_NAMED_PIXELS = 40
"""An object the reference caption names covers at least this many pixels of the folded
image (a few pixels of a far cabinet are in the scene, but no captioner can be asked to name
them)."""
VIEWS_PER_HOUSE = 20
"""Panoramas taken in each procedural house (a house takes about a second to build)."""
NOT_OBJECTS = STRUCTURE | {"object"}
"""Categories a caption does not name: the house's structure, and unlabelled clutter."""


def simulator_objects() -> tuple[str, ...]:
    """The furniture categories a simulator caption can name."""
    from embodia.sim.scene import CATEGORIES

    return tuple(c for c in CATEGORIES if c not in NOT_OBJECTS)


@lru_cache(maxsize=2)
def _house(seed: int) -> Any:
    from embodia.sim.simulator import EmbeddedSimulator

    simulator = EmbeddedSimulator()
    simulator.reset(f"procedural:seed={seed}")
    return simulator


def fold(panorama: np.ndarray) -> np.ndarray:
    """A (H, 2H, ...) strip as a (2H, H, ...) image: left half on top of the right half."""
    half = panorama.shape[1] // 2
    return np.concatenate([panorama[:, :half], panorama[:, half : 2 * half]], axis=0)


def simulator_scene(seed: int, index: int) -> Scene:
    """Simulator scene ``index`` of the set ``seed`` (module docstring): the folded panorama
    (a square of ``BAND`` rows' height) and its objects (``category``, ``pixels``, ``x`` the
    median column in the panorama, ``named``), one per category that shows."""
    from embodia.sim.protocol import Pose

    house = (seed * 1_000_003 + index // VIEWS_PER_HOUSE) % 2**31
    simulator = _house(house)
    rng = np.random.default_rng([seed, index])
    rows, cols = np.nonzero(simulator.nav.island)
    cell = int(rng.integers(len(rows)))
    pose = Pose.from_array(
        simulator.nav.cell_centre(rows[cell], cols[cell]), float(rng.uniform(-np.pi, np.pi))
    )
    panorama = simulator.panorama_at(pose, PANORAMA_HEIGHT, 2 * PANORAMA_HEIGHT)
    top, bottom = BAND
    if 2 * (bottom - top) != PANORAMA_HEIGHT:
        raise HallucinationError(f"BAND {BAND} must span half the panorama's {PANORAMA_HEIGHT} rows")
    rgb, semantic = panorama["rgb"][top:bottom], panorama["semantic"][top:bottom]
    categories = simulator.categories
    objects: list[dict[str, Any]] = []
    for category_id in np.unique(semantic):
        category = categories[int(category_id)]
        if category in NOT_OBJECTS:
            continue
        columns = np.nonzero(semantic == category_id)[1]
        objects.append(
            {
                "category": category,
                "pixels": int(columns.size),
                "x": float(np.median(columns)),
                "named": int(columns.size) >= MIN_NAMED_PIXELS,
            }
        )
    objects.sort(key=lambda o: o["x"])
    for i, obj in enumerate(objects):
        obj["id"] = i
    return np.ascontiguousarray(fold(rgb)), objects


CAPTION_SOURCES: dict[str, CaptionSource] = {
    "simulator": CaptionSource("simulator", simulator_scene, ("category",), (simulator_objects(),)),
    "clevr": CaptionSource("clevr", clevr_scene, ("colour", "shape"), (tuple(COLOURS), tuple(SHAPES))),
}


def caption_source(name: str) -> CaptionSource:
    if name not in CAPTION_SOURCES:
        raise HallucinationError(f"unknown caption source {name!r}; known: {', '.join(CAPTION_SOURCES)}")
    return CAPTION_SOURCES[name]


def caption_records(source: CaptionSource, folder: Path, seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` caption records of the set ``seed``, their images written as PNG files in
    ``folder`` (paths in the records relative to it); each also carries its scene's
    ``objects``."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for index in range(count):
        image, objects = source.scene(seed, index)
        name = f"{seed}-{index}.png"
        Image.fromarray(image).save(folder / name)
        records.append(
            {
                "messages": [
                    {"role": "user", "content": CAPTION_PROMPT},
                    {"role": "assistant", "content": source.caption(objects)},
                ],
                "images": [name],
                "objects": objects,
            }
        )
    return records
