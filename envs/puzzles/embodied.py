"""Questions over simulator panoramas, answered from the embedded simulator's semantics.

A procedural house is generated from the seed, the agent stands at a navigable point, and a
small equirectangular panorama (:data:`PANO_H` x :data:`PANO_W`) is rendered. The panorama's
semantic image holds category ids only, so instances come from casting the same rays and
reading each hit face's instance id (``Scene.face_instance``). An object is an (instance,
category) pair: a TV on its cabinet stand is one TV and one cabinet.

Visibility rule: an object instance (any category except structure: void, wall, floor,
ceiling, door) is *visible* when at least :data:`MIN_PIXELS` panorama pixels hit it. Count
questions are asked only about categories with no borderline instance (1 to MIN_PIXELS-1
pixels), and existence questions only about categories that are visible or have no pixel at
all, so the answer never hangs on the threshold.

Azimuth convention: panorama column = azimuth, ``az = 360 * (col + 0.5) / W - 180`` degrees,
0 = the agent's heading, negative = left. "Left of X" means a smaller column, reading the
panorama as a flat image (no wrap-around); relation questions need a unique, non-wrapping
anchor and a neighbour separated from it and from the runner-up by :data:`SEPARATION_DEG`.

:func:`oracle` answers structured queries exactly from the facts; :func:`parse_question`
reads the free question a language model asks into one; :func:`hallucinated_objects` lists
the object categories a free-text answer asserts that the panorama does not show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embodia.envs.puzzles import core
from embodia.envs.puzzles.scene_questions import (
    Reading,
    check_count_prefix,
    check_exists_prefix,
    compare_counts,
    content_words,
    count_answer,
    count_steps,
    exact_check,
    exists_steps,
    negated,
    parse_count,
    parse_free,
    parse_yes_no,
    singular_forms,
    split_relation,
    tokens,
    yes_no_answer,
)

PANO_H, PANO_W = 128, 256
MIN_PIXELS = 30
"""Pixels an instance needs in the panorama to count as visible."""
SEPARATION_DEG = 15.0
STRUCTURE: frozenset[str] = frozenset({"void", "wall", "floor", "ceiling", "door"})
ROOMS: dict[str, int] = {"easy": 3, "medium": 4, "hard": 6}
QUESTION_KINDS: dict[str, tuple[str, ...]] = {
    "easy": ("count", "exists"),
    "medium": ("count", "exists", "relation"),
    "hard": ("count", "relation", "relation"),
}
CANDIDATE_POSES = 4
_GENERIC_NOUNS = frozenset(
    {"object", "objects", "thing", "things", "item", "items", "anything", "something", "furniture"}
)
"""Nouns that name no category ("what object is left of the sofa?")."""
_MODIFIERS = frozenset(
    {"potted", "kitchen", "dining", "coffee", "side", "office", "bathroom", "bedside", "living", "book"}
)
"""Words that may precede a category noun without changing it ("dining table", "potted plant")."""

_SIMS: dict[str, Any] = {}


def simulator(spec: str) -> Any:
    """A shared :class:`EmbeddedSimulator` holding scene ``spec`` (a few are cached)."""
    from embodia.sim.simulator import EmbeddedSimulator

    if spec not in _SIMS:
        if len(_SIMS) >= 4:
            _SIMS.pop(next(iter(_SIMS)))
        sim = EmbeddedSimulator()
        sim.reset(spec)
        _SIMS[spec] = sim
    return _SIMS[spec]


def azimuth_of_column(col: float, width: int) -> float:
    """Azimuth (deg) of a panorama column centre; 0 = heading, negative = left."""
    return 360.0 * (col + 0.5) / width - 180.0


def instance_image(sim: Any, pose: Any, height: int = PANO_H, width: int = PANO_W) -> np.ndarray:
    """(H, W) instance id per pixel (0 = miss) of the panorama seen from ``pose``."""
    renderer = sim.renderer
    rays = renderer.equirect_rays(pose.sensor_position(sim.config.sensor_height), pose.yaw, height, width)
    _, prim, _ = renderer.raycaster.cast(rays)
    face_instance = np.append(sim.scene.face_instance.astype(np.int64), np.int64(0))
    return face_instance[prim.astype(np.int64)].reshape(height, width)


def _column_range(cols: np.ndarray, width: int) -> tuple[int, int, bool]:
    """(first, last, wraps) of the occupied columns, spanning the complement of the widest gap."""
    occupied = np.zeros(width, dtype=bool)
    occupied[cols] = True
    idx = np.flatnonzero(occupied)
    if len(idx) == width:
        return 0, width - 1, False
    gaps = np.diff(np.append(idx, idx[0] + width))
    k = int(np.argmax(gaps))
    first, last = int(idx[(k + 1) % len(idx)]), int(idx[k])
    return first, last, first > last


def visible_objects(sim: Any, pose: Any, height: int = PANO_H, width: int = PANO_W) -> list[dict[str, Any]]:
    """Every non-structure instance with at least one pixel, with its panorama statistics."""
    from embodia.sim.protocol import Pose

    pose = pose if isinstance(pose, Pose) else Pose.from_array(pose["position"], pose["yaw"])
    frame = sim.panorama_at(pose, height, width)
    inst = instance_image(sim, pose, height, width)
    semantic, depth = frame["semantic"], frame["depth"]
    categories = sim.categories
    out: list[dict[str, Any]] = []
    key = inst * len(categories) + semantic
    for k in np.unique(key[inst > 0]):
        iid, cat = divmod(int(k), len(categories))
        name = categories[cat]
        if name in STRUCTURE:
            continue
        mask = key == k
        rows, cols = np.nonzero(mask)
        first, last, wraps = _column_range(cols, width)
        ang = np.radians([azimuth_of_column(float(c), width) for c in cols])
        centre = math.degrees(math.atan2(float(np.sin(ang).mean()), float(np.cos(ang).mean())))
        out.append(
            {
                "instance": int(iid),
                "category": name,
                "pixels": int(mask.sum()),
                "azimuth_min": round(azimuth_of_column(first, width), 3),
                "azimuth_max": round(azimuth_of_column(last, width), 3),
                "azimuth_centre": round(centre, 3),
                "wraps": bool(wraps),
                "mean_depth": round(float(depth[mask].mean()), 4),
            }
        )
    return out


def _visible(facts: Mapping[str, Any], category: str | None = None) -> list[Mapping[str, Any]]:
    return [
        o
        for o in facts["objects"]
        if o["pixels"] >= facts["min_pixels"] and (category is None or o["category"] == category)
    ]


def _neighbour(
    facts: Mapping[str, Any], anchor: Mapping[str, Any], relation: str
) -> Mapping[str, Any] | None:
    """The well-separated nearest visible object on ``relation`` side of ``anchor``, else None."""
    sign = -1.0 if relation == "left" else 1.0
    side = [
        o
        for o in _visible(facts)
        if o is not anchor and not o["wraps"] and sign * (o["azimuth_centre"] - anchor["azimuth_centre"]) > 0
    ]
    side.sort(key=lambda o: sign * (o["azimuth_centre"] - anchor["azimuth_centre"]))
    if not side:
        return None
    near = side[0]
    edge_gap = (
        anchor["azimuth_min"] - near["azimuth_max"]
        if relation == "left"
        else near["azimuth_min"] - anchor["azimuth_max"]
    )
    if edge_gap < SEPARATION_DEG:
        return None
    runner_up = side[1] if len(side) > 1 else None
    if (
        runner_up is not None
        and abs(runner_up["azimuth_centre"] - near["azimuth_centre"]) < SEPARATION_DEG
        and runner_up["category"] != near["category"]
    ):
        return None
    return near


def oracle(facts: Mapping[str, Any], query: Mapping[str, Any]) -> Any:
    """Exact answer to a perception query over the panorama facts.

    ``{"kind": "count", "category": "chair"}`` -> visible instances; ``{"kind": "exists",
    "category"}`` -> "yes"/"no"; ``{"kind": "compare", "a": "chair", "b": "table", "op":
    "more"|"fewer"|"same"}`` -> "yes"/"no" over the visible counts; ``{"kind": "relation",
    "anchor": "bed", "relation": "left"|"right"}`` -> the category of the nearest
    well-separated object on that side, or "none"/"ambiguous"; ``{"kind": "objects"}`` -> the
    visible object records.
    """
    kind = query.get("kind")
    if kind == "count":
        return len(_visible(facts, str(query["category"])))
    if kind == "exists":
        return "yes" if _visible(facts, str(query["category"])) else "no"
    if kind == "compare":
        na, nb = len(_visible(facts, str(query["a"]))), len(_visible(facts, str(query["b"])))
        return compare_counts(na, nb, str(query.get("op", "more")))
    if kind == "objects":
        return [dict(o) for o in _visible(facts)]
    if kind == "relation":
        relation = query.get("relation", "left")
        if relation not in ("left", "right"):
            raise core.PuzzleError(f"unknown relation {relation!r}; known: left, right")
        anchors = _visible(facts, str(query["anchor"]))
        if not anchors:
            return "none"
        if len(anchors) > 1 or anchors[0]["wraps"]:
            return "ambiguous"
        near = _neighbour(facts, anchors[0], relation)
        return "none" if near is None else near["category"]
    raise core.PuzzleError(f"unknown query kind {kind!r}; known: count, exists, compare, relation, objects")


def _plural(category: str) -> str:
    return "shelves" if category == "shelf" else category + "s"


def question_text(query: Mapping[str, Any]) -> str:
    """The English question of a generated query."""
    if query["kind"] == "count":
        return f"How many {_plural(query['category'])} are visible in the panorama?"
    if query["kind"] == "exists":
        return f"Is there a {query['category']} in view?"
    if query["kind"] == "compare":
        a, b = _plural(query["a"]), _plural(query["b"])
        if query["op"] == "same":
            return f"Are there the same number of {a} and {b} in the panorama?"
        return f"Are there {query['op']} {a} than {b} in the panorama?"
    return f"What object is immediately to the {query['relation']} of the {query['anchor']} in the panorama?"


def _borderline(objects: list[dict[str, Any]], category: str, min_pixels: int) -> bool:
    return any(o["category"] == category and 0 < o["pixels"] < min_pixels for o in objects)


def _make_query(
    rng: np.random.Generator, facts: Mapping[str, Any], kind: str, categories: list[str]
) -> dict[str, Any] | None:
    objects, k = facts["objects"], facts["min_pixels"]
    visible = sorted({o["category"] for o in _visible(facts)})
    if kind == "count":
        pool = [c for c in visible if not _borderline(objects, c, k)]
        if not pool:
            return None
        return {"kind": "count", "category": pool[int(rng.integers(len(pool)))]}
    if kind == "exists":
        seen = {o["category"] for o in objects}
        absent = [c for c in categories if c not in seen and c not in STRUCTURE and c != "object"]
        present = [c for c in visible if not _borderline(objects, c, k)]
        pool = present if (rng.random() < 0.5 and present) or not absent else absent
        if not pool:
            return None
        return {"kind": "exists", "category": pool[int(rng.integers(len(pool)))]}
    options = []
    for category in visible:
        if _borderline(objects, category, k):
            continue
        for relation in ("left", "right"):
            answer = oracle(facts, {"kind": "relation", "anchor": category, "relation": relation})
            if answer not in ("none", "ambiguous"):
                options.append({"kind": "relation", "anchor": category, "relation": relation})
    if not options:
        return None
    return options[int(rng.integers(len(options)))]


def _category_word(word: str, categories: Sequence[str]) -> str | None:
    """The category ``word`` (or its singular) names, through the built-in names and synonyms
    ("couches" -> sofa, "fridge" -> refrigerator) or ``categories``; structure included."""
    from embodia.sim.scene import category_from_name

    for form in singular_forms(word):
        name = category_from_name(form) if form.isalpha() else None
        if name is None and form in categories and form not in STRUCTURE:
            name = form
        if name is not None:
            return name
    return None


def _parse_category(text: str, categories: list[str]) -> core.Parsed:
    hits = {c for c in (_category_word(w, categories) for w in tokens(text)) if c is not None}
    if not hits:
        return core.Parsed.fail(f"answer {text[:60]!r} names no object category")
    if len(hits) > 1:
        return core.Parsed.fail(f"answer {text[:60]!r} names several categories: {', '.join(sorted(hits))}")
    return core.Parsed(hits.pop())


def _vocabulary(facts: Mapping[str, Any] | None) -> list[str]:
    from embodia.sim.scene import CATEGORIES

    seen = [str(o["category"]) for o in (facts or {}).get("objects", [])]
    return list(dict.fromkeys([*CATEGORIES, *seen]))


def _phrase_category(words: Sequence[str], categories: Sequence[str]) -> str | None:
    """The one object category a noun phrase names, "" for a generic one ("object",
    "anything"), or None when a word is unknown, two categories clash, or the category is
    structure (walls, floors and doors are not objects here)."""
    named: set[str] = set()
    for word in content_words(words, _MODIFIERS):
        if word in _GENERIC_NOUNS:
            continue
        category = _category_word(word, categories)
        if category is None or category in STRUCTURE or category == "object":
            return None
        named.add(category)
    if len(named) > 1:
        return None
    return named.pop() if named else ""


def parse_question(text: str, facts: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The structured query (:func:`oracle`) a free question asks, or None when it cannot be
    mapped exactly.

    Question forms are those of :func:`~embodia.envs.puzzles.scene_questions.read_question`;
    phrases name one object category (synonyms and plurals: "couches" = sofa, "fridge" =
    refrigerator, "TVs" = tv; the categories seen in ``facts`` count too), with harmless
    modifiers ("dining table"). Count ("how many chairs are in this room?"), existence ("is
    there a bed?") and comparison ("are there more chairs than tables?") questions map to
    their kinds; "what is (the object) left of the sofa?" to a ``relation`` query. None for
    what the panorama facts cannot answer exactly: colours, shapes and sizes, the relations
    behind / in front of, structure (walls, floors, doors), a relation inside a count or
    existence question, descriptions, and any unknown word. A longer text (a task prompt) is
    read by its one sentence that asks something
    (:func:`~embodia.envs.puzzles.scene_questions.parse_free`).
    """
    categories = _vocabulary(facts)
    return parse_free(text, lambda reading: _query(reading, categories))


def _query(reading: Reading, categories: Sequence[str]) -> dict[str, Any] | None:
    """The structured query of a reading, or None when its phrases name no single category."""
    if reading.kind == "compare":
        a, b = _phrase_category(reading.subject, categories), _phrase_category(reading.other, categories)
        return {"kind": "compare", "a": a, "b": b, "op": reading.op} if a and b else None
    split = split_relation(reading.subject)
    if split is not None:
        target, relation, anchor_words = split
        anchor = _phrase_category(anchor_words, categories)
        if reading.kind != "identify" or relation not in ("left", "right") or not anchor:
            return None
        if _phrase_category(target, categories) != "":  # "which chair is left of ..." is not asked
            return None
        return {"kind": "relation", "anchor": anchor, "relation": relation}
    category = _phrase_category(reading.subject, categories)
    if reading.kind in ("count", "exists") and category:
        return {"kind": reading.kind, "category": category}
    return None


def _object_step(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"instance": int(obj["instance"]), "category": str(obj["category"])}


def question_steps(facts: Mapping[str, Any], query: Mapping[str, Any]) -> list[Any]:
    """The steps of answering ``query`` (see :meth:`EmbodiedTask.steps`)."""
    kind = query["kind"]
    if kind in ("count", "exists"):
        members = [_object_step(o) for o in _visible(facts, str(query["category"]))]
        return count_steps(members) if kind == "count" else exists_steps(members)
    if kind == "compare":
        counts = [{"count": len(_visible(facts, str(query[side])))} for side in ("a", "b")]
        return [*counts, {"answer": oracle(facts, query)}]
    answer = {"answer": oracle(facts, query)}
    anchors = _visible(facts, str(query["anchor"]))
    if len(anchors) != 1 or anchors[0]["wraps"]:
        return [answer]
    near = _neighbour(facts, anchors[0], str(query.get("relation", "left")))
    return [_object_step(anchors[0]), *([_object_step(near)] if near is not None else []), answer]


def _mentions(text: str, categories: Sequence[str]) -> list[tuple[int, str]]:
    """(word index, category) of every object category ``text`` names outside a negation."""
    words = tokens(text)
    found = [(i, _category_word(w, categories)) for i, w in enumerate(words)]
    return [
        (i, c)
        for i, c in found
        if c is not None and c not in STRUCTURE and c != "object" and not negated(words, i)
    ]


def hallucinated_objects(text: str, facts: Mapping[str, Any]) -> list[str]:
    """Object categories a free-text answer asserts that the panorama does not show.

    1. Categories it names (synonyms and plurals included) of which no panorama pixel shows
       an instance. An instance with a few pixels, below the visibility threshold, is still
       in the image, so naming it is not a hallucination. Structure words (wall, floor,
       door) and mentions after a negation ("no bed") are skipped.
    2. Through the instance's question (in ``facts``): a count above 0 or "yes" for a
       category with no pixel in view; a relation answer naming a category with no object
       on that side of the anchor ("chair right of the sofa"), unless the anchor is not
       unique.

    Not hallucinations: wrong counts of categories in view, "no" for a category in view.
    """
    shown = {str(o["category"]) for o in facts["objects"]}
    found = [c for _, c in _mentions(text, _vocabulary(facts)) if c not in shown]
    query = facts.get("question")
    if isinstance(query, Mapping):
        found += _answer_assertions(text, facts, query, shown)
    return list(dict.fromkeys(found))


def _answer_assertions(
    text: str, facts: Mapping[str, Any], query: Mapping[str, Any], shown: set[str]
) -> list[str]:
    kind = query.get("kind")
    if kind in ("count", "exists"):
        category = str(query["category"])
        parsed = parse_count(text) if kind == "count" else parse_yes_no(text)
        asserted = parsed.ok and parsed.value not in (0, "no")
        return [category] if asserted and category not in shown else []
    if kind == "relation":
        parsed = _parse_category(text, _vocabulary(facts))
        anchors = _visible(facts, str(query["anchor"]))
        if not parsed.ok or len(anchors) != 1 or anchors[0]["wraps"]:
            return []
        sign = -1.0 if query.get("relation") == "left" else 1.0
        centre = anchors[0]["azimuth_centre"]
        on_side = [
            o
            for o in facts["objects"]
            if o["category"] == parsed.value and sign * (o["azimuth_centre"] - centre) > 0
        ]
        return [] if on_side else [f"{parsed.value} {query.get('relation')} of the {query['anchor']}"]
    return []


class EmbodiedTask(core.SceneGraphTask):
    """Counting, presence and azimuth-order questions over a procedural-house panorama."""

    name = "embodied"
    oracle = staticmethod(oracle)
    parse_question = staticmethod(parse_question)
    hallucinated_objects = staticmethod(hallucinated_objects)

    def generate(self, seed: int, difficulty: str = "medium") -> core.PuzzleInstance:
        from embodia.sim.protocol import Pose

        seed, rng = self._seeded_generator(seed, difficulty, 0xE3B)
        spec = f"procedural:seed={int(seed)},rooms={ROOMS[difficulty]}"
        sim = simulator(spec)
        cells = np.argwhere(sim.nav.island)
        best: tuple[int, dict[str, Any], list[dict[str, Any]]] | None = None
        for _ in range(CANDIDATE_POSES):
            r, c = cells[int(rng.integers(len(cells)))]
            position = [float(v) for v in sim.nav.cell_centre(int(r), int(c))]
            yaw = math.radians(30.0 * int(rng.integers(12)))
            pose = {"position": position, "yaw": yaw}
            objects = visible_objects(sim, Pose.from_array(position, yaw))
            n = sum(o["pixels"] >= MIN_PIXELS for o in objects)
            if best is None or n > best[0]:
                best = (n, pose, objects)
        assert best is not None
        _, pose, objects = best
        facts: dict[str, Any] = {
            "scene": spec,
            "pose": pose,
            "height": PANO_H,
            "width": PANO_W,
            "min_pixels": MIN_PIXELS,
            "objects": objects,
        }
        kinds = QUESTION_KINDS[difficulty]
        query: dict[str, Any] | None = None
        for _ in range(6):
            query = _make_query(rng, facts, str(kinds[int(rng.integers(len(kinds)))]), sim.categories)
            if query is not None:
                break
        if query is None:
            query = {"kind": "exists", "category": "bathtub" if not _visible(facts, "bathtub") else "bed"}
        facts["question"] = query
        facts["answer_type"] = {"count": "count", "exists": "yesno"}.get(query["kind"], "category")
        question = question_text(query)
        facts["question_text"] = question
        example = {"count": '{"answer": 2}', "yesno": '{"answer": "yes"}'}.get(
            facts["answer_type"], '{"answer": "sofa"}'
        )
        prompt = (
            "The image is a 360-degree equirectangular panorama taken inside a house; the centre "
            "column looks ahead, the left edge is behind you to the left, the right edge behind you "
            "to the right. Left/right refer to columns of the image.\n"
            f"{question}\n{core.answer_format_note(example)}"
        )
        return self._instance(seed, difficulty, prompt, oracle(facts, query), facts)

    def render(self, instance: core.PuzzleInstance) -> np.ndarray:
        from embodia.sim.protocol import Pose

        facts = instance.facts
        sim = simulator(str(facts["scene"]))
        pose = Pose.from_array(facts["pose"]["position"], facts["pose"]["yaw"])
        rgb: np.ndarray = sim.panorama_at(pose, int(facts["height"]), int(facts["width"]))["rgb"]
        return rgb

    def semantic(self, instance: core.PuzzleInstance) -> tuple[np.ndarray, np.ndarray]:
        """(category ids, instance ids) of the instance's panorama, for pixel-level checks."""
        from embodia.sim.protocol import Pose

        facts = instance.facts
        sim = simulator(str(facts["scene"]))
        pose = Pose.from_array(facts["pose"]["position"], facts["pose"]["yaw"])
        h, w = int(facts["height"]), int(facts["width"])
        return sim.panorama_at(pose, h, w)["semantic"], instance_image(sim, pose, h, w)

    def parse(self, reply: str, instance: core.PuzzleInstance) -> core.Parsed:
        raw = core.find_answer(reply, ("answer", "count", "object", "category"))
        if not raw.ok:
            return raw
        value, kind = raw.value, instance.facts["answer_type"]
        if kind == "count":
            return count_answer(value)
        if kind == "yesno":
            return yes_no_answer(value)
        from embodia.sim.scene import CATEGORIES

        return _parse_category(str(value), list(CATEGORIES))

    def check(self, value: Any, instance: core.PuzzleInstance) -> core.Verdict:
        return exact_check(value, instance.answer)

    def steps(self, instance: core.PuzzleInstance) -> list[Any]:
        """The steps of the true answer, with objects as ``{"instance": id, "category": c}``
        (visible ones only, :data:`MIN_PIXELS`):

        - count: every visible instance of the category (id order), then ``{"count": n}``;
        - exists: one visible instance then ``{"answer": "yes"}``, or just ``{"answer": "no"}``;
        - relation: the anchor, the neighbour on that side, then ``{"answer": category}``
          (just ``{"answer": "none"|"ambiguous"}`` where the anchor is missing or not unique);
        - compare: ``{"count": n_a}``, ``{"count": n_b}``, then ``{"answer": "yes"|"no"}``.
        """
        return question_steps(instance.facts, instance.facts["question"])

    def check_step(self, prefix: Sequence[Any], instance: core.PuzzleInstance) -> bool:
        """Whether ``prefix`` can be continued into a correct solution. Count: visible instances
        in any order, each once, and the right count only after all of them; exists: any one
        visible instance as the witness, then "yes" (just "no" when none is visible). Relation
        and compare have a single solution, so the prefix must be one of :meth:`steps`."""
        facts = instance.facts
        query = facts["question"]
        if query["kind"] in ("count", "exists"):
            members = [_object_step(o) for o in _visible(facts, str(query["category"]))]
            check = check_count_prefix if query["kind"] == "count" else check_exists_prefix
            return check(prefix, members)
        return super().check_step(prefix, instance)


__all__ = [
    "MIN_PIXELS",
    "EmbodiedTask",
    "azimuth_of_column",
    "hallucinated_objects",
    "instance_image",
    "oracle",
    "parse_question",
    "question_steps",
    "question_text",
    "simulator",
    "visible_objects",
]
