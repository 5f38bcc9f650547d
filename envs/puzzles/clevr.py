"""CLEVR-like scenes: seeded object layouts, exact questions, an oracle and a hallucination probe.

A scene is a list of objects (shape, colour, size, x, y) on a 320x240 tabletop drawn in a
simple 2.5-D view. Spatial convention, in image coordinates: *left/right* compare ``x``
(left = smaller x), *behind/in front of* compare ``y`` (behind = smaller y, higher up in the
image). A relation holds only with a margin of :data:`MARGIN` pixels, and relation and
attribute questions are asked only when their referent is unique.

:func:`oracle` answers targeted perception queries exactly from ``facts`` (the CSMR oracle
perception module); :func:`hallucinated_objects` lists the attribute-object phrases of a
free-text answer that match nothing in the scene.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles.core import (
    Parsed,
    PuzzleError,
    PuzzleInstance,
    PuzzleTask,
    Verdict,
    answer_format_note,
    find_answer,
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
_NEGATIONS = {"no", "not", "without", "isn't", "aren't", "nor", "never", "none"}
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+")

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


def oracle(facts: Mapping[str, Any], query: Mapping[str, Any]) -> Any:
    """Exact answer to a targeted perception query over the scene graph.

    Queries: ``{"kind": "count", "filters": {...}}`` -> int; ``{"kind": "exists", "filters"}``
    -> "yes"/"no"; ``{"kind": "attribute", "target": {...}, "attribute": "colour"}`` -> the
    value; ``{"kind": "compare", "a": {...}, "b": {...}, "op": "more"|"fewer"|"same"}`` ->
    "yes"/"no"; ``{"kind": "relation", "anchor": {...}, "relation": "left", "attribute":
    "shape"}`` -> the value for the object in that relation; ``{"kind": "objects", "filters"}``
    -> matching object records. Where a referent is missing the answer is "none"; where
    several objects qualify it is the sorted list of their values.
    """
    kind = query.get("kind")
    if kind == "count":
        return len(select(facts, query.get("filters", {})))
    if kind == "exists":
        return "yes" if select(facts, query.get("filters", {})) else "no"
    if kind == "objects":
        return [dict(o) for o in select(facts, query.get("filters", {}))]
    if kind == "compare":
        na, nb = len(select(facts, query["a"])), len(select(facts, query["b"]))
        op = query.get("op", "more")
        if op not in ("more", "fewer", "same"):
            raise PuzzleError(f"unknown comparison {op!r}; known: more, fewer, same")
        holds = na > nb if op == "more" else na < nb if op == "fewer" else na == nb
        return "yes" if holds else "no"
    if kind in ("attribute", "relation"):
        attribute = query.get("attribute", "shape")
        if attribute not in ATTRIBUTES:
            raise PuzzleError(f"unknown attribute {attribute!r}; known: {', '.join(ATTRIBUTES)}")
        if kind == "attribute":
            found = select(facts, query.get("target", {}))
        else:
            anchors = select(facts, query.get("anchor", {}))
            if len(anchors) != 1:
                return "none" if not anchors else "ambiguous"
            found = _in_relation(facts, anchors[0], str(query.get("relation")))
        if not found:
            return "none"
        values = sorted({str(o[attribute]) for o in found})
        return found[0][attribute] if len(found) == 1 else values
    raise PuzzleError(
        f"unknown query kind {kind!r}; known: count, exists, attribute, compare, relation, objects"
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
    if kind == "attribute":
        what = {"colour": "What colour", "shape": "What shape", "size": "What size"}[query["attribute"]]
        return f"{what} is the {phrase(query['target'])}?"
    rel = {
        "left": "left of",
        "right": "right of",
        "front": "in front of",
        "behind": "behind",
    }[query["relation"]]
    what = {"colour": "What colour", "shape": "What shape", "size": "What size"}[query["attribute"]]
    return f"{what} is the object {rel} the {phrase(query['anchor'])}?"


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
        for i in order:
            anchor = _unique_description(objects, objects[i])
            if anchor is None:
                continue
            for rel in [str(r) for r in rng.permutation(RELATIONS)]:
                found = _in_relation(facts, objects[i], rel)
                if len(found) == 1:
                    attribute = str(rng.choice(["shape", "colour"]))
                    return {"kind": "relation", "anchor": anchor, "relation": rel, "attribute": attribute}
        return None
    raise PuzzleError(f"unknown question kind {kind!r}")


def _answer_type(query: Mapping[str, Any]) -> str:
    kind = query["kind"]
    if kind == "count":
        return "count"
    if kind in ("exists", "compare"):
        return "yesno"
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


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _vocab_hits(text: str, vocab: Mapping[str, str]) -> list[str]:
    return sorted({vocab[t] for t in _tokens(text) if t in vocab})


def parse_count(text: str) -> Parsed:
    """An integer count from "3", "three", "3 objects"; fails on none or several numbers."""
    numbers = {
        int(t) if t.isdigit() else _NUMBER_WORDS[t]
        for t in _tokens(text)
        if t.isdigit() or t in _NUMBER_WORDS
    }
    if len(numbers) > 1 and "no" in _tokens(text):
        numbers.discard(0)
    if not numbers:
        return Parsed.fail(f"answer {text[:60]!r} has no number")
    if len(numbers) > 1:
        return Parsed.fail(f"answer {text[:60]!r} names several numbers")
    return Parsed(numbers.pop())


def parse_yes_no(text: str) -> Parsed:
    """ "yes"/"no" from yes/no variants (true/false, yeah, nope, ...)."""
    toks = set(_tokens(text))
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
    """Attribute-object phrases asserted in ``text`` ("a purple cylinder", "the red ball").

    A phrase is a run of size/colour words ending in a shape word (or "object"/"thing"), with
    at least one attribute word; phrases right after a negation ("no", "not", ...) are skipped.
    """
    toks = _tokens(text)
    out: list[tuple[str, dict[str, str]]] = []
    i = 0
    while i < len(toks):
        j, attrs = i, {}
        while j < len(toks) and (toks[j] in _SIZE_WORDS or toks[j] in _COLOUR_WORDS):
            key = "size" if toks[j] in _SIZE_WORDS else "colour"
            attrs[key] = _WORDS[key][toks[j]]
            j += 1
        noun = toks[j] if j < len(toks) else ""
        if j > i and (noun in _SHAPE_WORDS or noun.rstrip("s") in ("object", "thing")):
            if noun in _SHAPE_WORDS:
                attrs["shape"] = _SHAPE_WORDS[noun]
            negated = any(t in _NEGATIONS for t in toks[max(0, i - 2) : i])
            if not negated:
                out.append((" ".join(toks[i : j + 1]), attrs))
            i = j + 1
        else:
            i = max(j, i + 1)
    return out


def hallucinated_objects(text: str, facts: Mapping[str, Any]) -> list[str]:
    """Phrases of :func:`mentioned_objects` that match no object of the scene."""
    return [p for p, attrs in mentioned_objects(text) if not select(facts, attrs)]


# --------------------------------------------------------------------------- task


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
        kinds = QUESTION_KINDS[difficulty]
        query: dict[str, Any] | None = None
        for _ in range(8):
            query = _make_query(rng, facts, str(kinds[int(rng.integers(len(kinds)))]), difficulty == "hard")
            if query is not None:
                break
        if query is None:
            query = {"kind": "count", "filters": _random_filters(rng, objects, False)}
        answer = oracle(facts, query)
        facts["question"] = query
        facts["answer_type"] = _answer_type(query)
        question = question_text(query)
        facts["question_text"] = question
        examples = {"count": "3", "yesno": '"yes"', "colour": '"red"', "shape": '"cube"', "size": '"small"'}
        example = '{"answer": ' + examples[facts["answer_type"]] + "}"
        prompt = (
            "The image shows a scene of simple objects (cubes, spheres, cylinders; small or large; "
            f"{', '.join(COLOURS)}). Left/right refer to the image x axis, behind/in front of to "
            f"the image y axis (behind = higher up).\n{question}\n{answer_format_note(example)}"
        )
        return self._instance(seed, difficulty, prompt, answer, facts)

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
            if isinstance(value, int | float) and float(value).is_integer():
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


__all__ = [
    "COLOURS",
    "SHAPES",
    "SIZES",
    "ClevrTask",
    "hallucinated_objects",
    "matches",
    "mentioned_objects",
    "oracle",
    "question_text",
    "relations",
    "render_scene",
    "select",
]
