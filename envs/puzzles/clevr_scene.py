"""CLEVR-like scenes: seeded object layouts, exact questions, an oracle and a hallucination probe.

A scene is a list of objects (shape, colour, size, x, y) on a 320x240 tabletop drawn in a
simple 2.5-D view. Spatial convention, in image coordinates: *left/right* compare ``x``
(left = smaller x), *behind/in front of* compare ``y`` (behind = smaller y, higher up in the
image). A relation holds only with a margin of :data:`MARGIN` pixels, and relation and
attribute questions are asked only when their referent is unique.

:func:`oracle` answers targeted perception queries exactly from ``facts`` (the CSMR oracle
perception module); :func:`parse_question` reads the free question a language model asks
into such a query; :func:`hallucinated_objects` lists what a free-text answer asserts that
the scene does not have.

Two tasks share the scenes: ``clevr`` (count, exists, attribute, compare and relation
questions, checked exactly) and the opt-in ``clevr-describe`` (:class:`ClevrDescribeTask`:
free-text descriptions scored by ROUGE-L F1 against a templated reference). For the same
seed and difficulty both draw the same scene.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles.core import (
    MAX_DIGITS,
    Parsed,
    PuzzleError,
    PuzzleInstance,
    PuzzleTask,
    Verdict,
    answer_format_note,
    digits_int,
    find_answer,
)
from embodia.envs.puzzles.scene_questions import (
    Reading,
    check_count_prefix,
    check_exists_prefix,
    compare_counts,
    content_words,
    count_steps,
    exists_steps,
    lookup,
    negated,
    parse_free,
    split_relation,
    tokens,
)

SHAPES: tuple[str, ...] = ("cube", "sphere", "cylinder")
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 40, 40),
    "blue": (40, 80, 210),
    "green": (40, 160, 60),
    "yellow": (230, 200, 40),
    "purple": (130, 50, 170),
    "grey": (128, 128, 128),
    "brown": (130, 80, 40),
    "cyan": (40, 200, 210),
}
SIZES: dict[str, int] = {"small": 13, "large": 22}
"""Half extent in pixels of each size."""
WIDTH, HEIGHT = 320, 240
MARGIN = 12
"""Pixels by which one object must pass another for a left/right/front/behind relation."""
RELATIONS: tuple[str, ...] = ("left", "right", "front", "behind")
ATTRIBUTES: tuple[str, ...] = ("size", "colour", "shape")
ROUGE_L_THRESHOLD = 0.5
"""ROUGE-L F1 from which a free-text description counts as correct (``clevr-describe``)."""

OBJECT_COUNTS: dict[str, tuple[int, int]] = {"easy": (3, 4), "medium": (5, 7), "hard": (8, 10)}
QUESTION_KINDS: dict[str, tuple[str, ...]] = {
    "easy": ("count", "exists", "attribute"),
    "medium": ("count", "exists", "attribute", "compare", "relation"),
    "hard": ("count", "attribute", "compare", "relation", "relation"),
}

_SHAPE_WORDS: dict[str, str] = {
    "cube": "cube",
    "cubes": "cube",
    "block": "cube",
    "blocks": "cube",
    "box": "cube",
    "boxes": "cube",
    "sphere": "sphere",
    "spheres": "sphere",
    "ball": "sphere",
    "balls": "sphere",
    "orb": "sphere",
    "cylinder": "cylinder",
    "cylinders": "cylinder",
    "can": "cylinder",
    "cans": "cylinder",
    "tube": "cylinder",
    "cuboid": "cube",
}
_COLOUR_WORDS: dict[str, str] = {c: c for c in COLOURS} | {
    "gray": "grey",
    "violet": "purple",
    "magenta": "purple",
    "turquoise": "cyan",
    "aqua": "cyan",
    "teal": "cyan",
}
_SIZE_WORDS: dict[str, str] = {
    "small": "small",
    "tiny": "small",
    "little": "small",
    "large": "large",
    "big": "large",
    "huge": "large",
}
_WORDS: dict[str, dict[str, str]] = {"shape": _SHAPE_WORDS, "colour": _COLOUR_WORDS, "size": _SIZE_WORDS}
_NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {"none": 0, "no": 0}
_YES = {"yes", "y", "true", "yeah", "yep", "correct", "affirmative"}
_NO = {"no", "n", "false", "nope", "negative", "incorrect"}
_GENERIC_NOUNS: dict[str, str] = {w: "" for w in ("object", "thing", "item", "one", "shape")} | {
    "anything": "",
    "something": "",
}
"""Nouns that name no shape ("the red one", "anything left of the cube")."""
# "can" is also the verb ("I can see"), so a bare "can" is not read as a cylinder mention.
_BARE_SHAPE_WORDS = frozenset(_SHAPE_WORDS) - {"can", "cans"}
_RELATION_WORDS: dict[str, str] = {
    "left": "left of",
    "right": "right of",
    "front": "in front of",
    "behind": "behind",
}
_SCENE_WORDS = frozenset(
    {"scene", "image", "picture", "photo", "view", "everything", "objects", "things", "whole", "entire"}
)

Obj = dict[str, Any]
Filters = Mapping[str, str]


# --------------------------------------------------------------------------- scene graph


def matches(obj: Mapping[str, Any], filters: Filters) -> bool:
    """Whether ``obj`` has every attribute value in ``filters``."""
    return all(obj.get(k) == v for k, v in filters.items())


def select(facts: Mapping[str, Any], filters: Filters) -> list[Obj]:
    """Objects of the scene matching ``filters`` (unknown keys raise)."""
    bad = [k for k in filters if k not in ATTRIBUTES]
    if bad:
        raise PuzzleError(f"unknown filter attribute(s) {', '.join(bad)}; known: {', '.join(ATTRIBUTES)}")
    return [o for o in facts["objects"] if matches(o, filters)]


def related(a: Mapping[str, Any], b: Mapping[str, Any], relation: str) -> bool:
    """Whether ``a`` is ``relation`` of ``b`` (image x for left/right, y for front/behind)."""
    if relation == "left":
        return bool(a["x"] < b["x"] - MARGIN)
    if relation == "right":
        return bool(a["x"] > b["x"] + MARGIN)
    if relation == "behind":
        return bool(a["y"] < b["y"] - MARGIN)
    if relation == "front":
        return bool(a["y"] > b["y"] + MARGIN)
    raise PuzzleError(f"unknown relation {relation!r}; known: {', '.join(RELATIONS)}")


def relations(objects: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """``relations[rel][str(b)]`` = ids of the objects that are ``rel`` of object ``b``."""
    return {
        rel: {
            str(b["id"]): [a["id"] for a in objects if a["id"] != b["id"] and related(a, b, rel)]
            for b in objects
        }
        for rel in RELATIONS
    }


def _in_relation(facts: Mapping[str, Any], anchor: Obj, relation: str) -> list[Obj]:
    return [o for o in facts["objects"] if o["id"] != anchor["id"] and related(o, anchor, relation)]


def referents(facts: Mapping[str, Any], query: Mapping[str, Any]) -> list[Obj] | str:
    """The objects ``query["filters"]`` picks out; with an ``anchor`` and a ``relation`` in
    the query, only those in that relation to the anchor, which must be unique: "none" when
    no object fits the anchor, "ambiguous" when several do."""
    filters = query.get("filters", {})
    if "anchor" not in query:
        return select(facts, filters)
    select(facts, filters)  # rejects unknown filter attributes
    anchors = select(facts, query["anchor"])
    if len(anchors) != 1:
        return "none" if not anchors else "ambiguous"
    return [o for o in _in_relation(facts, anchors[0], str(query.get("relation"))) if matches(o, filters)]


def oracle(facts: Mapping[str, Any], query: Mapping[str, Any]) -> Any:
    """Exact answer to a targeted perception query over the scene graph.

    Queries: ``{"kind": "count", "filters": {...}}`` -> int; ``{"kind": "exists", "filters"}``
    -> "yes"/"no"; ``{"kind": "attribute", "target": {...}, "attribute": "colour"}`` -> the
    value; ``{"kind": "compare", "a": {...}, "b": {...}, "op": "more"|"fewer"|"same"}`` ->
    "yes"/"no"; ``{"kind": "relation", "anchor": {...}, "relation": "left", "attribute":
    "shape"}`` -> the value for the object in that relation (optionally only among objects
    matching ``"filters"``); ``{"kind": "objects", "filters"}`` -> matching object records;
    ``{"kind": "describe"}`` -> the reference description of the scene, of the objects
    matching ``"target"``, or of the object in ``"relation"`` to ``"anchor"`` (:func:`describe`).
    Count, exists and objects queries may also name an ``anchor`` and a ``relation`` to count
    only the objects in that relation to it ("how many cubes are left of the red sphere?").
    Where a referent is missing the answer is "none" (and "ambiguous" where an anchor is not
    unique); where several objects qualify it is the sorted list of their values.
    """
    kind = query.get("kind")
    if kind in ("count", "exists", "objects"):
        found = referents(facts, query)
        if isinstance(found, str):
            return found
        if kind == "count":
            return len(found)
        if kind == "exists":
            return "yes" if found else "no"
        return [dict(o) for o in found]
    if kind == "compare":
        na, nb = len(select(facts, query["a"])), len(select(facts, query["b"]))
        return compare_counts(na, nb, str(query.get("op", "more")))
    if kind == "describe":
        return describe(facts, query)
    if kind in ("attribute", "relation"):
        attribute = query.get("attribute", "shape")
        if attribute not in ATTRIBUTES:
            raise PuzzleError(f"unknown attribute {attribute!r}; known: {', '.join(ATTRIBUTES)}")
        if kind == "attribute":
            found = select(facts, query.get("target", {}))
        else:
            located = referents(facts, {"anchor": {}, **query})
            if isinstance(located, str):
                return located
            found = located
        if not found:
            return "none"
        values = sorted({str(o[attribute]) for o in found})
        return found[0][attribute] if len(found) == 1 else values
    raise PuzzleError(
        f"unknown query kind {kind!r}; known: count, exists, attribute, compare, relation, objects, describe"
    )


# --------------------------------------------------------------------------- wording


def phrase(filters: Filters, plural: bool = False) -> str:
    """``{"size": "large", "colour": "red", "shape": "cube"}`` -> "large red cube"."""
    noun = filters.get("shape", "object")
    if plural:
        noun += "s"
    words = [filters[k] for k in ("size", "colour") if k in filters]
    return " ".join([*words, noun])


def _article(text: str) -> str:
    return ("an " if text[0] in "aeiou" else "a ") + text


def _listing(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _left_to_right(objects: Sequence[Obj]) -> list[Obj]:
    return sorted(objects, key=lambda o: (o["x"], o["id"]))


def _full_phrase(obj: Mapping[str, Any]) -> str:
    return _article(phrase({k: str(obj[k]) for k in ATTRIBUTES}))


def describe(facts: Mapping[str, Any], query: Mapping[str, Any]) -> str:
    """The reference description a ``describe`` query asks for, in a fixed template.

    - scene (no ``target`` nor ``anchor``): "There are 3 objects. From left to right: a large
      red cube, a small blue sphere and a large green cylinder." (ties in x by id);
    - ``anchor`` + ``relation``: "The object left of the red cube is a small blue sphere."
      ("The objects ... are ..." when several qualify);
    - ``target``: "The red cube is a large red cube." (likewise for several).

    "none" where the referent or the anchor is missing, "ambiguous" where the anchor is not
    unique.
    """
    if "anchor" in query:
        relation = str(query.get("relation"))
        if relation not in RELATIONS:
            raise PuzzleError(f"unknown relation {relation!r}; known: {', '.join(RELATIONS)}")
        found, filters = referents(facts, query), query.get("filters", {})
        where = f" {_RELATION_WORDS[relation]} the {phrase(query['anchor'])}"
    elif "target" in query:
        found, filters, where = select(facts, query["target"]), query["target"], ""
    else:
        objects = _left_to_right(facts["objects"])
        if not objects:
            return "There are no objects."
        items = _listing([_full_phrase(o) for o in objects])
        if len(objects) == 1:
            return f"There is 1 object: {items}."
        return f"There are {len(objects)} objects. From left to right: {items}."
    if isinstance(found, str):
        return found
    if not found:
        return "none"
    found = _left_to_right(found)
    if len(found) == 1:
        return f"The {phrase(filters)}{where} is {_full_phrase(found[0])}."
    return f"The {phrase(filters, plural=True)}{where} are {_listing([_full_phrase(o) for o in found])}."


def question_text(query: Mapping[str, Any]) -> str:
    """The English question of a generated query."""
    kind = query["kind"]
    if kind == "count":
        return f"How many {phrase(query['filters'], plural=True)} are there?"
    if kind == "exists":
        return f"Is there {_article(phrase(query['filters']))}?"
    if kind == "compare":
        a, b = phrase(query["a"], plural=True), phrase(query["b"], plural=True)
        if query["op"] == "same":
            return f"Are there the same number of {a} and {b}?"
        return f"Are there {query['op']} {a} than {b}?"
    if kind == "describe":
        if "anchor" in query:
            rel = _RELATION_WORDS[query["relation"]]
            return f"Describe the object {rel} the {phrase(query['anchor'])}: its size, colour and shape."
        if "target" in query:
            return f"Describe the {phrase(query['target'])}: its size, colour and shape."
        return "Describe the scene: every object with its size, colour and shape, from left to right."
    what = {"colour": "What colour", "shape": "What shape", "size": "What size"}[query["attribute"]]
    if kind == "attribute":
        return f"{what} is the {phrase(query['target'])}?"
    return f"{what} is the object {_RELATION_WORDS[query['relation']]} the {phrase(query['anchor'])}?"


# --------------------------------------------------------------------------- reading questions


def _description(words: Sequence[str]) -> dict[str, str] | None:
    """The filters a noun phrase's words state ("large red cubes" -> size, colour, shape), or
    None when a word is not a size, colour, shape or generic noun, or two values clash."""
    filters: dict[str, str] = {}
    for word in content_words(words, frozenset({"and", "coloured", "sized", "shaped"})):
        if lookup(word, _GENERIC_NOUNS) is not None:
            continue
        for key, vocabulary in (("size", _SIZE_WORDS), ("colour", _COLOUR_WORDS), ("shape", _SHAPE_WORDS)):
            value = lookup(word, vocabulary)
            if value is not None:
                if filters.setdefault(key, value) != value:
                    return None
                break
        else:
            return None
    return filters


def parse_question(text: str, facts: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The structured query (:func:`oracle`) a free question asks, or None when it cannot be
    mapped exactly.

    Question forms are those of :func:`~embodia.envs.puzzles.scene_questions.read_question`;
    phrases are read with this module's vocabularies: sizes (big = large, tiny/little =
    small), colours (gray = grey, violet = purple, teal = cyan, ...), shapes (ball/orb =
    sphere, block/box = cube, can/tube = cylinder), generic nouns (object, thing, item, one,
    anything), plurals, and the relations left of / right of / behind / in front of. A
    relation turns an attribute or identity question into a ``relation`` query ("what shape
    is the object left of the red cube?"; "what is left of the red cube?" asks for the
    shape) and restricts count and exists questions ("is there anything right of the green
    ball?"). "Describe the scene" / "describe the object behind the cube" give ``describe``
    queries. None for any word outside the vocabularies: materials (metal, rubber, shiny,
    matte) are not modelled in these scenes, so "how many metal things?" has no exact
    answer. ``facts`` is accepted so every task's parser is called alike; the CLEVR
    vocabulary does not depend on the scene. A longer text (a task prompt) is read by its one
    sentence that asks something (:func:`~embodia.envs.puzzles.scene_questions.parse_free`).
    """
    return parse_free(text, _query)


def _query(reading: Reading) -> dict[str, Any] | None:
    """The structured query of a reading, or None when its phrases are not CLEVR phrases."""
    if reading.kind == "compare":
        a, b = _description(reading.subject), _description(reading.other)
        if a is None or b is None:
            return None
        return {"kind": "compare", "a": a, "b": b, "op": reading.op}
    if reading.kind == "describe" and reading.subject and set(content_words(reading.subject)) <= _SCENE_WORDS:
        return {"kind": "describe"}
    split = split_relation(reading.subject)
    target = _description(split[0] if split else reading.subject)
    anchor = _description(split[2]) if split else None
    if target is None or (split and not anchor):
        return None
    located: dict[str, Any] = {"anchor": anchor, "relation": split[1]} if split else {}
    if reading.kind in ("count", "exists"):
        return {"kind": reading.kind, "filters": target, **located}
    if reading.kind == "describe":
        if split:
            return {"kind": "describe", **located, **({"filters": target} if target else {})}
        return {"kind": "describe", "target": target} if target else None
    attribute = reading.attribute or "shape"  # "what is left of X?" asks what X's neighbour is
    if split:
        query = {"kind": "relation", **located, "attribute": attribute}
        return {**query, "filters": target} if target else query
    return {"kind": "attribute", "target": target, "attribute": attribute} if target else None


# --------------------------------------------------------------------------- generation


def _scene(rng: np.random.Generator, n: int) -> list[Obj]:
    objects: list[Obj] = []
    attempts = 0
    while len(objects) < n and attempts < 2000:
        attempts += 1
        size = str(rng.choice(list(SIZES)))
        r = SIZES[size]
        x = int(rng.integers(r + 8, WIDTH - r - 8))
        y = int(rng.integers(r + 30, HEIGHT - r - 8))
        if any(
            abs(x - o["x"]) < r + SIZES[o["size"]] + 6 and abs(y - o["y"]) < r + SIZES[o["size"]] + 6
            for o in objects
        ):
            continue
        objects.append(
            {
                "id": len(objects),
                "shape": str(rng.choice(SHAPES)),
                "colour": str(rng.choice(list(COLOURS))),
                "size": size,
                "x": x,
                "y": y,
            }
        )
    return objects


def _filters(rng: np.random.Generator, obj: Mapping[str, Any], keys: Sequence[str]) -> dict[str, str]:
    return {k: str(obj[k]) for k in ATTRIBUTES if k in keys}


def _random_filters(rng: np.random.Generator, objects: Sequence[Obj], hard: bool) -> dict[str, str]:
    """Filters describing a real object or (sometimes) a plausible absent one."""
    obj = dict(objects[int(rng.integers(len(objects)))])
    if rng.random() < 0.3:
        obj["colour"] = str(rng.choice(list(COLOURS)))
    n_keys = int(rng.integers(1, 3 if hard else 2) + (1 if hard and rng.random() < 0.3 else 0))
    keys = list(rng.choice(["colour", "shape", "size"], size=min(n_keys, 3), replace=False))
    return _filters(rng, obj, [str(k) for k in keys])


def _unique_description(
    objects: Sequence[Obj], obj: Obj, exclude: str | None = None
) -> dict[str, str] | None:
    """Shortest filters (not using ``exclude``) that pick out ``obj`` alone."""
    keys = [k for k in ("colour", "shape", "size") if k != exclude]
    for subset in ([k] for k in keys):
        f = {k: str(obj[k]) for k in subset}
        if sum(matches(o, f) for o in objects) == 1:
            return f
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            f = {a: str(obj[a]), b: str(obj[b])}
            if sum(matches(o, f) for o in objects) == 1:
                return f
    if exclude is None:
        f = {k: str(obj[k]) for k in ATTRIBUTES}
        if sum(matches(o, f) for o in objects) == 1:
            return f
    return None


def _make_query(
    rng: np.random.Generator, facts: Mapping[str, Any], kind: str, hard: bool
) -> dict[str, Any] | None:
    objects: list[Obj] = facts["objects"]
    if kind in ("count", "exists"):
        return {"kind": kind, "filters": _random_filters(rng, objects, hard)}
    if kind == "compare":
        key = str(rng.choice(["shape", "colour"]))
        values = sorted({str(o[key]) for o in objects})
        if key == "shape" or len(values) < 2:
            values = list(SHAPES) if key == "shape" else values + [str(rng.choice(list(COLOURS)))]
        a, b = rng.choice(len(values), size=2, replace=False)
        op = str(rng.choice(["more", "fewer", "same"], p=[0.45, 0.35, 0.2]))
        return {"kind": "compare", "a": {key: values[int(a)]}, "b": {key: values[int(b)]}, "op": op}
    order = [int(i) for i in rng.permutation(len(objects))]
    if kind == "attribute":
        for i in order:
            attribute = str(rng.choice(["colour", "shape", "size"], p=[0.5, 0.35, 0.15]))
            target = _unique_description(objects, objects[i], exclude=attribute)
            if target is not None:
                return {"kind": "attribute", "target": target, "attribute": attribute}
        return None
    if kind == "relation":
        located = _unique_relation(rng, facts, order)
        if located is None:
            return None
        attribute = str(rng.choice(["shape", "colour"]))
        return {"kind": "relation", **located, "attribute": attribute}
    raise PuzzleError(f"unknown question kind {kind!r}")


def _unique_relation(
    rng: np.random.Generator, facts: Mapping[str, Any], order: Sequence[int]
) -> dict[str, Any] | None:
    """``{"anchor", "relation"}`` of the first object in ``order`` with a unique description
    and a relation (tried in random order) that exactly one object stands in, else None."""
    objects: list[Obj] = facts["objects"]
    for i in order:
        anchor = _unique_description(objects, objects[i])
        if anchor is None:
            continue
        for rel in [str(r) for r in rng.permutation(RELATIONS)]:
            if len(_in_relation(facts, objects[i], rel)) == 1:
                return {"anchor": anchor, "relation": rel}
    return None


def _answer_type(query: Mapping[str, Any]) -> str:
    kind = query["kind"]
    if kind == "count":
        return "count"
    if kind in ("exists", "compare"):
        return "yesno"
    if kind == "describe":
        return "text"
    return str(query["attribute"])


# --------------------------------------------------------------------------- rendering


def _shade(rgb: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    r, g, b = (int(np.clip(c * factor, 0, 255)) for c in rgb)
    return (r, g, b)


def render_scene(facts: Mapping[str, Any]) -> np.ndarray:
    """Draw the scene (back to front) as an RGB uint8 (240, 320, 3) image."""
    from PIL import Image, ImageDraw

    rows = np.linspace(150, 205, HEIGHT)[:, None, None]
    bg = np.broadcast_to(rows, (HEIGHT, WIDTH, 3)).astype(np.uint8)
    img = Image.fromarray(np.ascontiguousarray(bg))
    draw = ImageDraw.Draw(img)
    for o in sorted(facts["objects"], key=lambda o: (o["y"], o["x"])):
        x, y, r = int(o["x"]), int(o["y"]), SIZES[o["size"]]
        base = COLOURS[o["colour"]]
        draw.ellipse((x - r + 4, y + r - 4, x + r + 6, y + r + 4), fill=(110, 110, 110))  # shadow
        if o["shape"] == "sphere":
            for k in range(r, 0, -1):
                t = k / r
                off = int((1 - t) * r * 0.4)
                draw.ellipse(
                    (x - k - off, y - k - off, x + k - off, y + k - off), fill=_shade(base, 1.25 - 0.5 * t)
                )
        elif o["shape"] == "cube":
            top = r // 2
            draw.polygon(
                [
                    (x - r, y - r + top),
                    (x - r + top, y - r),
                    (x + r + top - top, y - r),
                    (x + r, y - r + top),
                ],
                fill=_shade(base, 1.3),
            )
            draw.rectangle((x - r, y - r + top, x + r, y + r), fill=base)
            draw.rectangle((x + r - top // 2, y - r + top, x + r, y + r), fill=_shade(base, 0.7))
        else:
            ry = max(3, r // 3)
            draw.rectangle((x - r, y - r + ry, x + r, y + r - ry), fill=base)
            draw.ellipse((x - r, y + r - 2 * ry, x + r, y + r), fill=base)
            draw.rectangle((x + r // 2, y - r + ry, x + r, y + r - ry), fill=_shade(base, 0.75))
            draw.ellipse((x - r, y - r, x + r, y - r + 2 * ry), fill=_shade(base, 1.3))
    return np.asarray(img, dtype=np.uint8)


# --------------------------------------------------------------------------- parsing helpers


def _vocab_hits(text: str, vocab: Mapping[str, str]) -> list[str]:
    return sorted({vocab[t] for t in tokens(text) if t in vocab})


def parse_count(text: str) -> Parsed:
    """An integer count from "3", "three", "3 objects"; fails on none or several numbers."""
    numbers = {
        digits_int(t) if t.isdigit() else _NUMBER_WORDS[t]
        for t in tokens(text)
        if t.isdigit() or t in _NUMBER_WORDS
    }
    if None in numbers:
        return Parsed.fail(f"answer {text[:60]!r} has a number of more than {MAX_DIGITS} digits")
    if len(numbers) > 1 and "no" in tokens(text):
        numbers.discard(0)
    if not numbers:
        return Parsed.fail(f"answer {text[:60]!r} has no number")
    if len(numbers) > 1:
        return Parsed.fail(f"answer {text[:60]!r} names several numbers")
    return Parsed(numbers.pop())


def parse_yes_no(text: str) -> Parsed:
    """ "yes"/"no" from yes/no variants (true/false, yeah, nope, ...)."""
    toks = set(tokens(text))
    yes, no = bool(toks & _YES), bool(toks & _NO)
    if yes == no:
        return Parsed.fail(f"answer {text[:60]!r} is not yes or no")
    return Parsed("yes" if yes else "no")


def parse_attribute(text: str, attribute: str) -> Parsed:
    """A colour/shape/size value, accepting synonyms ("ball" = sphere, "block" = cube)."""
    hits = _vocab_hits(text, _WORDS[attribute])
    if not hits:
        return Parsed.fail(f"answer {text[:60]!r} names no {attribute}")
    if len(hits) > 1:
        return Parsed.fail(f"answer {text[:60]!r} names several {attribute}s: {', '.join(hits)}")
    return Parsed(hits[0])


# --------------------------------------------------------------------------- hallucination


def mentioned_objects(text: str) -> list[tuple[str, dict[str, str]]]:
    """What ``text`` asserts exists, as (phrase, filters) pairs in order of mention.

    - an attribute-object phrase: a run of size/colour words ending in a shape word or a
      generic noun (object, thing, item, one, shape): "a purple cylinder", "the red one";
    - a bare shape word: "a cylinder" (but not "can", which is also a verb);
    - each size/colour word of a run not followed by a noun: "it is purple".

    A mention with a negation (:data:`~embodia.envs.puzzles.scene_questions.NEGATIONS`: no,
    not, don't, zero, ...) at most three words before it is skipped.
    """
    toks = tokens(text)
    out: list[tuple[str, dict[str, str]]] = []
    i = 0
    while i < len(toks):
        j, run = i, []
        while j < len(toks) and (toks[j] in _SIZE_WORDS or toks[j] in _COLOUR_WORDS):
            key = "size" if toks[j] in _SIZE_WORDS else "colour"
            run.append((toks[j], key, _WORDS[key][toks[j]]))
            j += 1
        noun = toks[j] if j < len(toks) else ""
        shape = lookup(noun, _SHAPE_WORDS) if run or noun in _BARE_SHAPE_WORDS else None
        if shape is not None or (run and lookup(noun, _GENERIC_NOUNS) is not None):
            attrs = {key: value for _, key, value in run} | ({"shape": shape} if shape else {})
            mentions = [(" ".join(toks[i : j + 1]), attrs)]
            end = j + 1
        elif run:  # no noun follows: each word says that something has it ("it is purple")
            mentions = [(word, {key: value}) for word, key, value in run]
            end = j
        else:
            i += 1
            continue
        if not negated(toks, i):
            out.extend(mentions)
        i = end
    return out


def hallucinated_objects(text: str, facts: Mapping[str, Any]) -> list[str]:
    """What a free-text answer asserts that the scene does not have, as phrases.

    1. Mentions (:func:`mentioned_objects`) that match no object: "purple cylinder" where no
       purple cylinder exists, "purple" where nothing is purple.
    2. Where ``facts`` carry the question the answer replies to (every generated instance's
       do), what the answer asserts through it:

       - a count above 0, or "yes" to an existence question, when no object fits the
         question's description: those objects are absent ("purple cylinders");
       - to an attribute or relation question, a value the asked object does not have
         ("large purple cube" for "purple" to "What colour is the large cube?" when it is
         blue; "sphere left of the red cube" when the object there is a cylinder).

    Not hallucinations (they are errors of another kind): a wrong count of objects that do
    exist, "no" for objects that exist, comparison answers, and any answer to a question
    whose anchor is not unique.
    """
    found = [p for p, attrs in mentioned_objects(text) if not select(facts, attrs)]
    query = facts.get("question")
    if isinstance(query, Mapping):
        found += _answer_assertions(text, facts, query)
    return list(dict.fromkeys(found))


def _answer_assertions(text: str, facts: Mapping[str, Any], query: Mapping[str, Any]) -> list[str]:
    """The absent things an answer asserts by replying to ``query`` (see
    :func:`hallucinated_objects`)."""
    kind = query.get("kind")
    where = (
        f" {_RELATION_WORDS[str(query.get('relation'))]} the {phrase(query['anchor'])}"
        if "anchor" in query
        else ""
    )
    if kind in ("count", "exists"):
        found = referents(facts, query)
        if isinstance(found, str) or found:
            return []
        parsed = parse_count(text) if kind == "count" else parse_yes_no(text)
        asserted = parsed.ok and parsed.value not in (0, "no")
        return [phrase(query.get("filters", {}), plural=kind == "count") + where] if asserted else []
    if kind in ("attribute", "relation"):
        attribute = str(query.get("attribute", "shape"))
        parsed, truth = parse_attribute(text, attribute), oracle(facts, query)
        if (
            not parsed.ok
            or truth == "ambiguous"
            or parsed.value in (truth if isinstance(truth, list) else [truth])
        ):
            return []
        described = query.get("target", {}) if kind == "attribute" else query.get("filters", {})
        return [phrase({**described, attribute: parsed.value}) + where]
    return []


# --------------------------------------------------------------------------- steps


def _object_steps(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, int]]:
    return [{"object": int(o["id"])} for o in objects]


def question_steps(facts: Mapping[str, Any], query: Mapping[str, Any]) -> list[Any]:
    """The steps of answering ``query`` (see :meth:`ClevrTask.steps`)."""
    kind = query["kind"]
    if kind in ("count", "exists"):
        found = referents(facts, query)
        if isinstance(found, str):
            return [{"answer": found}]
        members = _object_steps(found)
        return count_steps(members) if kind == "count" else exists_steps(members)
    if kind == "compare":
        counts = [{"count": len(select(facts, query[side]))} for side in ("a", "b")]
        return [*counts, {"answer": oracle(facts, query)}]
    if kind == "describe" and "anchor" not in query and "target" not in query:
        return _object_steps(_left_to_right(facts["objects"]))
    if "anchor" in query:
        located = referents(facts, query)
        if isinstance(located, str):
            return [{"answer": located}]
        found, steps = located, _object_steps(select(facts, query["anchor"]))
    else:
        found, steps = select(facts, query.get("target", {})), []
        if not found:
            return [{"answer": "none"}]
    if kind == "describe":
        return steps + _object_steps(_left_to_right(found))
    return [*steps, *_object_steps(found), {"answer": oracle(facts, query)}]


# --------------------------------------------------------------------------- task


def _example_answer(query: Mapping[str, Any]) -> Any:
    """The value of the prompt's answer-format example: fixed per answer type, so the
    example never depends on the truth."""
    answer_type = _answer_type(query)
    if answer_type == "text":
        if "anchor" in query:
            return "The object left of the small cube is a large green cylinder."
        return "There are 2 objects. From left to right: a small red cube and a large blue sphere."
    return {"count": 3, "yesno": "yes", "colour": "red", "shape": "cube", "size": "small"}[answer_type]


class ClevrTask(PuzzleTask):
    """Questions about a CLEVR-like scene; difficulty sets object count and question mix."""

    name = "clevr"

    def generate(self, seed: int, difficulty: str = "medium") -> PuzzleInstance:
        difficulty = self._difficulty(difficulty)
        seed = self._seed(seed)
        level = self.difficulties.index(difficulty)
        rng = np.random.default_rng([int(seed), level, 0xC1E])
        lo, hi = OBJECT_COUNTS[difficulty]
        objects = _scene(rng, int(rng.integers(lo, hi + 1)))
        facts: dict[str, Any] = {"width": WIDTH, "height": HEIGHT, "objects": objects}
        facts["relations"] = relations(objects)
        query = self._question(rng, facts, difficulty)
        answer = oracle(facts, query)
        facts["question"] = query
        facts["answer_type"] = _answer_type(query)
        question = question_text(query)
        facts["question_text"] = question
        example = json.dumps({"answer": _example_answer(query)})
        prompt = (
            "The image shows a scene of simple objects (cubes, spheres, cylinders; small or large; "
            f"{', '.join(COLOURS)}). Left/right refer to the image x axis, behind/in front of to "
            f"the image y axis (behind = higher up).\n{question}\n{answer_format_note(example)}"
        )
        return self._instance(seed, difficulty, prompt, answer, facts)

    def _question(
        self, rng: np.random.Generator, facts: Mapping[str, Any], difficulty: str
    ) -> dict[str, Any]:
        """The question about a new scene: a kind drawn from the difficulty's mix (a count
        question when eight draws find no unique referent)."""
        kinds = QUESTION_KINDS[difficulty]
        for _ in range(8):
            query = _make_query(rng, facts, str(kinds[int(rng.integers(len(kinds)))]), difficulty == "hard")
            if query is not None:
                return query
        return {"kind": "count", "filters": _random_filters(rng, facts["objects"], False)}

    def render(self, instance: PuzzleInstance) -> np.ndarray:
        return render_scene(instance.facts)

    def parse(self, reply: str, instance: PuzzleInstance) -> Parsed:
        raw = find_answer(reply, ("answer", "count", "colour", "color", "shape", "size"))
        if not raw.ok:
            return raw
        value = raw.value
        kind = instance.facts["answer_type"]
        if kind == "count":
            if isinstance(value, bool):
                return Parsed.fail(f"answer {value!r} is not a count")
            if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
                return Parsed(int(value))
            return parse_count(str(value))
        if kind == "yesno":
            if isinstance(value, bool):
                return Parsed("yes" if value else "no")
            return parse_yes_no(str(value))
        return parse_attribute(str(value), kind)

    def check(self, value: Any, instance: PuzzleInstance) -> Verdict:
        truth = instance.answer
        if value == truth:
            return Verdict(True, 1.0, "correct")
        return Verdict(False, 0.0, f"expected {truth!r}, got {value!r}")

    def steps(self, instance: PuzzleInstance) -> list[Any]:
        """The steps of the true answer, with objects as ``{"object": id}``:

        - count: every object the question picks out (id order), then ``{"count": n}``;
        - exists: one such object then ``{"answer": "yes"}``, or just ``{"answer": "no"}``;
        - attribute: the target object, then ``{"answer": value}``;
        - relation: the anchor, the object in the relation, then ``{"answer": value}``;
        - compare: ``{"count": n_a}``, ``{"count": n_b}``, then ``{"answer": "yes"|"no"}``;
        - describe: the objects described (the whole scene from left to right, or the anchor
          then the object in the relation); no answer step, as free text is scored, not
          checked.

        Where a referent is missing or an anchor is not unique the steps end in
        ``{"answer": "none"|"ambiguous"}`` at that point.
        """
        return question_steps(instance.facts, instance.facts["question"])

    def check_step(self, prefix: Sequence[Any], instance: PuzzleInstance) -> bool:
        """Whether ``prefix`` can be continued into a correct solution. Count: matching objects
        in any order, each once, and the right count only after all of them; exists: any one
        matching object as the witness, then "yes" (just "no" when none matches). The other
        kinds have a single solution, so the prefix must be one of :meth:`steps`."""
        facts = instance.facts
        query = facts["question"]
        if query["kind"] in ("count", "exists"):
            found = referents(facts, query)
            if not isinstance(found, str):
                members = _object_steps(found)
                check = check_count_prefix if query["kind"] == "count" else check_exists_prefix
                return check(prefix, members)
        return super().check_step(prefix, instance)


class ClevrDescribeTask(ClevrTask):
    """Free-text descriptions of CLEVR-like scenes, scored by ROUGE-L (the opt-in
    ``clevr-describe`` task).

    The scene is ``clevr``'s for the same seed and difficulty. The question is, with even
    odds, "Describe the scene: ..." or "Describe the object <relation> the <anchor>: ..."
    (when some object has a unique description and a relation exactly one object stands in;
    else the scene). The reference answer is :func:`describe`'s template. A reply is read
    from ``{"answer": "..."}`` (or ``"description"``), an ``Answer:`` line or the last line;
    its score is the ROUGE-L F1 against the reference (:func:`embodia.evals.live.rouge_l`),
    and it is correct when that is at least :data:`ROUGE_L_THRESHOLD`.
    """

    name = "clevr-describe"
    score_name = "rouge_l"
    """What :attr:`Verdict.score` measures; CSMR reports carry its mean as ``rouge_l``."""

    def _question(
        self, rng: np.random.Generator, facts: Mapping[str, Any], difficulty: str
    ) -> dict[str, Any]:
        if rng.random() < 0.5:
            order = [int(i) for i in rng.permutation(len(facts["objects"]))]
            located = _unique_relation(rng, facts, order)
            if located is not None:
                return {"kind": "describe", **located}
        return {"kind": "describe"}

    def parse(self, reply: str, instance: PuzzleInstance) -> Parsed:
        raw = find_answer(reply, ("answer", "description"))
        if not raw.ok:
            return raw
        value = raw.value
        text = (" ".join(str(v) for v in value) if isinstance(value, list) else str(value)).strip()
        return Parsed(text) if text else Parsed.fail("empty description")

    def check(self, value: Any, instance: PuzzleInstance) -> Verdict:
        from embodia.core.scores import rouge_l

        score = rouge_l(str(value), str(instance.answer))
        correct = score >= ROUGE_L_THRESHOLD
        bound = "at least" if correct else "below"
        return Verdict(
            correct, score, f"ROUGE-L F1 {score:.3f} against the reference ({bound} {ROUGE_L_THRESHOLD})"
        )


__all__ = [
    "COLOURS",
    "ROUGE_L_THRESHOLD",
    "SHAPES",
    "SIZES",
    "ClevrDescribeTask",
    "ClevrTask",
    "describe",
    "hallucinated_objects",
    "matches",
    "mentioned_objects",
    "oracle",
    "parse_question",
    "question_steps",
    "question_text",
    "referents",
    "relations",
    "render_scene",
    "select",
]
