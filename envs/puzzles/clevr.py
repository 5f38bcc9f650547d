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

from embodia.envs.puzzles import core
from embodia.envs.puzzles.clevr_scene import (
    COLOURS,
    HEIGHT,
    OBJECT_COUNTS,
    QUESTION_KINDS,
    SHAPES,
    SIZES,
    WIDTH,
    answer_type_of,
    describe,
    draw_query,
    draw_scene,
    left_to_right,
    matches,
    oracle,
    question_text,
    random_filters,
    referents,
    related,
    relations,
    render_scene,
    select,
    unique_relation,
)
from embodia.envs.puzzles.clevr_text import (
    hallucinated_objects,
    mentioned_objects,
    parse_attribute,
    parse_question,
)
from embodia.envs.puzzles.scene_questions import (
    check_count_prefix,
    check_exists_prefix,
    count_answer,
    count_steps,
    exact_check,
    exists_steps,
    parse_count,
    parse_yes_no,
    yes_no_answer,
)

ROUGE_L_THRESHOLD = 0.5
"""ROUGE-L F1 from which a free-text description counts as correct (``clevr-describe``)."""


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
        return _object_steps(left_to_right(facts["objects"]))
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
        return steps + _object_steps(left_to_right(found))
    return [*steps, *_object_steps(found), {"answer": oracle(facts, query)}]


# --------------------------------------------------------------------------- task


def _example_answer(query: Mapping[str, Any]) -> Any:
    """The value of the prompt's answer-format example: fixed per answer type, so the
    example never depends on the truth."""
    answer_type = answer_type_of(query)
    if answer_type == "text":
        if "anchor" in query:
            return "The object left of the small cube is a large green cylinder."
        return "There are 2 objects. From left to right: a small red cube and a large blue sphere."
    return {"count": 3, "yesno": "yes", "colour": "red", "shape": "cube", "size": "small"}[answer_type]


class ClevrTask(core.SceneGraphTask):
    """Questions about a CLEVR-like scene; difficulty sets object count and question mix."""

    name = "clevr"
    oracle = staticmethod(oracle)
    parse_question = staticmethod(parse_question)
    hallucinated_objects = staticmethod(hallucinated_objects)

    def generate(self, seed: int, difficulty: str = "medium") -> core.PuzzleInstance:
        seed, rng = self._seeded_generator(seed, difficulty, 0xC1E)
        lo, hi = OBJECT_COUNTS[difficulty]
        objects = draw_scene(rng, int(rng.integers(lo, hi + 1)))
        facts: dict[str, Any] = {"width": WIDTH, "height": HEIGHT, "objects": objects}
        facts["relations"] = relations(objects)
        query = self._question(rng, facts, difficulty)
        answer = oracle(facts, query)
        facts["question"] = query
        facts["answer_type"] = answer_type_of(query)
        question = question_text(query)
        facts["question_text"] = question
        example = json.dumps({"answer": _example_answer(query)})
        prompt = (
            "The image shows a scene of simple objects (cubes, spheres, cylinders; small or large; "
            f"{', '.join(COLOURS)}). Left/right refer to the image x axis, behind/in front of to "
            f"the image y axis (behind = higher up).\n{question}\n{core.answer_format_note(example)}"
        )
        return self._instance(seed, difficulty, prompt, answer, facts)

    def _question(
        self, rng: np.random.Generator, facts: Mapping[str, Any], difficulty: str
    ) -> dict[str, Any]:
        """The question about a new scene: a kind drawn from the difficulty's mix (a count
        question when eight draws find no unique referent)."""
        kinds = QUESTION_KINDS[difficulty]
        for _ in range(8):
            query = draw_query(rng, facts, str(kinds[int(rng.integers(len(kinds)))]), difficulty == "hard")
            if query is not None:
                return query
        return {"kind": "count", "filters": random_filters(rng, facts["objects"], False)}

    def render(self, instance: core.PuzzleInstance) -> np.ndarray:
        return render_scene(instance.facts)

    def parse(self, reply: str, instance: core.PuzzleInstance) -> core.Parsed:
        raw = core.find_answer(reply, ("answer", "count", "colour", "color", "shape", "size"))
        if not raw.ok:
            return raw
        value = raw.value
        kind = instance.facts["answer_type"]
        if kind == "count":
            return count_answer(value)
        if kind == "yesno":
            return yes_no_answer(value)
        return parse_attribute(str(value), kind)

    def check(self, value: Any, instance: core.PuzzleInstance) -> core.Verdict:
        return exact_check(value, instance.answer)

    def steps(self, instance: core.PuzzleInstance) -> list[Any]:
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

    def check_step(self, prefix: Sequence[Any], instance: core.PuzzleInstance) -> bool:
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
            located = unique_relation(rng, facts, order)
            if located is not None:
                return {"kind": "describe", **located}
        return {"kind": "describe"}

    def parse(self, reply: str, instance: core.PuzzleInstance) -> core.Parsed:
        raw = core.find_answer(reply, ("answer", "description"))
        if not raw.ok:
            return raw
        value = raw.value
        text = (" ".join(str(v) for v in value) if isinstance(value, list) else str(value)).strip()
        return core.Parsed(text) if text else core.Parsed.fail("empty description")

    def check(self, value: Any, instance: core.PuzzleInstance) -> core.Verdict:
        from embodia.core.scores import rouge_l

        score = rouge_l(str(value), str(instance.answer))
        correct = score >= ROUGE_L_THRESHOLD
        bound = "at least" if correct else "below"
        return core.Verdict(
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
    "parse_attribute",
    "parse_count",
    "parse_question",
    "parse_yes_no",
    "question_steps",
    "question_text",
    "referents",
    "related",
    "relations",
    "render_scene",
    "select",
]
