"""CLEVR-like scenes: the scene graph, its exact oracle, the template wording of queries and
descriptions, seeded generation of scenes and questions, and rendering.

The conventions (image coordinates, the relation margin, unique referents) are those of
:mod:`embodia.envs.puzzles.clevr`, which holds the tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles.core import PuzzleError
from embodia.envs.puzzles.scene_questions import compare_counts

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

OBJECT_COUNTS: dict[str, tuple[int, int]] = {"easy": (3, 4), "medium": (5, 7), "hard": (8, 10)}
QUESTION_KINDS: dict[str, tuple[str, ...]] = {
    "easy": ("count", "exists", "attribute"),
    "medium": ("count", "exists", "attribute", "compare", "relation"),
    "hard": ("count", "attribute", "compare", "relation", "relation"),
}

RELATION_WORDS: dict[str, str] = {
    "left": "left of",
    "right": "right of",
    "front": "in front of",
    "behind": "behind",
}

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


def in_relation(facts: Mapping[str, Any], anchor: Obj, relation: str) -> list[Obj]:
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
    return [o for o in in_relation(facts, anchors[0], str(query.get("relation"))) if matches(o, filters)]


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


def left_to_right(objects: Sequence[Obj]) -> list[Obj]:
    return sorted(objects, key=lambda o: (o["x"], o["id"]))


def full_phrase(obj: Mapping[str, Any]) -> str:
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
        where = f" {RELATION_WORDS[relation]} the {phrase(query['anchor'])}"
    elif "target" in query:
        found, filters, where = select(facts, query["target"]), query["target"], ""
    else:
        objects = left_to_right(facts["objects"])
        if not objects:
            return "There are no objects."
        items = _listing([full_phrase(o) for o in objects])
        if len(objects) == 1:
            return f"There is 1 object: {items}."
        return f"There are {len(objects)} objects. From left to right: {items}."
    if isinstance(found, str):
        return found
    if not found:
        return "none"
    found = left_to_right(found)
    if len(found) == 1:
        return f"The {phrase(filters)}{where} is {full_phrase(found[0])}."
    return f"The {phrase(filters, plural=True)}{where} are {_listing([full_phrase(o) for o in found])}."


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
            rel = RELATION_WORDS[query["relation"]]
            return f"Describe the object {rel} the {phrase(query['anchor'])}: its size, colour and shape."
        if "target" in query:
            return f"Describe the {phrase(query['target'])}: its size, colour and shape."
        return "Describe the scene: every object with its size, colour and shape, from left to right."
    what = {"colour": "What colour", "shape": "What shape", "size": "What size"}[query["attribute"]]
    if kind == "attribute":
        return f"{what} is the {phrase(query['target'])}?"
    return f"{what} is the object {RELATION_WORDS[query['relation']]} the {phrase(query['anchor'])}?"


# --------------------------------------------------------------------------- generation


def draw_scene(rng: np.random.Generator, n: int) -> list[Obj]:
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


def random_filters(rng: np.random.Generator, objects: Sequence[Obj], hard: bool) -> dict[str, str]:
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


def draw_query(
    rng: np.random.Generator, facts: Mapping[str, Any], kind: str, hard: bool
) -> dict[str, Any] | None:
    objects: list[Obj] = facts["objects"]
    if kind in ("count", "exists"):
        return {"kind": kind, "filters": random_filters(rng, objects, hard)}
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
        located = unique_relation(rng, facts, order)
        if located is None:
            return None
        attribute = str(rng.choice(["shape", "colour"]))
        return {"kind": "relation", **located, "attribute": attribute}
    raise PuzzleError(f"unknown question kind {kind!r}")


def unique_relation(
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
            if len(in_relation(facts, objects[i], rel)) == 1:
                return {"anchor": anchor, "relation": rel}
    return None


def answer_type_of(query: Mapping[str, Any]) -> str:
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
