"""Reading free text about CLEVR-like scenes: a question into the query the oracle answers,
an answer's colour, shape or size, and the objects an answer asserts (the hallucination probe).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embodia.envs.puzzles.clevr_scene import COLOURS, RELATION_WORDS, oracle, phrase, referents, select
from embodia.envs.puzzles.core import Parsed
from embodia.envs.puzzles.scene_questions import (
    Reading,
    content_words,
    lookup,
    negated,
    parse_count,
    parse_free,
    parse_yes_no,
    split_relation,
    tokens,
)

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
_GENERIC_NOUNS: dict[str, str] = {w: "" for w in ("object", "thing", "item", "one", "shape")} | {
    "anything": "",
    "something": "",
}
"""Nouns that name no shape ("the red one", "anything left of the cube")."""
# "can" is also the verb ("I can see"), so a bare "can" is not read as a cylinder mention.
_BARE_SHAPE_WORDS = frozenset(_SHAPE_WORDS) - {"can", "cans"}
_SCENE_WORDS = frozenset(
    {"scene", "image", "picture", "photo", "view", "everything", "objects", "things", "whole", "entire"}
)


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


# --------------------------------------------------------------------------- answers


def _vocab_hits(text: str, vocab: Mapping[str, str]) -> list[str]:
    return sorted({vocab[t] for t in tokens(text) if t in vocab})


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
        f" {RELATION_WORDS[str(query.get('relation'))]} the {phrase(query['anchor'])}"
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
