"""Embodied panorama questions: determinism, pixel-level visibility, oracle and parser."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.envs.puzzles.core import PuzzleError, PuzzleInstance
from embodia.envs.puzzles.embodied import MIN_PIXELS, EmbodiedTask, oracle, simulator

TASK = EmbodiedTask()
# Medium and hard share their house per seed with nothing else; keep the set small (one house each).
INSTANCES = [TASK.generate(s, d) for d in ("medium", "hard") for s in (1, 2)]


def _of_kind(kind: str) -> PuzzleInstance:
    for inst in INSTANCES:
        if inst.facts["question"]["kind"] == kind:
            return inst
    pytest.fail(f"no {kind} question among the generated instances: pick seeds that ask one")


def test_deterministic_records_and_images() -> None:
    a = INSTANCES[0]
    b = TASK.generate(a.seed, a.difficulty)
    assert a.to_record() == b.to_record()
    assert np.array_equal(a.image, b.image)
    assert a.image.shape == (128, 256, 3) and a.image.dtype == np.uint8
    again = PuzzleInstance.from_record(a.to_record())
    assert again == a and np.array_equal(again.image, a.image)
    with pytest.raises(PuzzleError):
        TASK.generate(0, "extreme")


def test_counted_objects_appear_in_the_semantic_image() -> None:
    for inst in INSTANCES:
        semantic, instances = TASK.semantic(inst)
        cats = simulator(inst.facts["scene"]).categories
        assert inst.facts["objects"]
        for obj in inst.facts["objects"]:
            mask = (instances == obj["instance"]) & (semantic == cats.index(obj["category"]))
            assert int(mask.sum()) == obj["pixels"]
            assert -180.0 <= obj["azimuth_min"] <= 180.0 and obj["mean_depth"] > 0
        # every non-structure category pixel belongs to some listed object
        listed = {cats.index(o["category"]) for o in inst.facts["objects"]}
        structure = {cats.index(c) for c in ("void", "wall", "floor", "ceiling", "door")}
        assert set(np.unique(semantic).tolist()) <= listed | structure


def test_answers_match_the_simulator_semantics() -> None:
    for inst in INSTANCES:
        q = inst.facts["question"]
        assert oracle(inst.facts, q) == inst.answer
        semantic, instances = TASK.semantic(inst)
        cats = simulator(inst.facts["scene"]).categories
        if q["kind"] in ("count", "exists"):
            cid = cats.index(q["category"])
            ids, pixels = np.unique(instances[semantic == cid], return_counts=True)
            n = int((pixels >= MIN_PIXELS).sum())
            assert inst.answer == (n if q["kind"] == "count" else ("yes" if n else "no"))
        if q["kind"] == "relation":
            (anchor,) = [
                o for o in inst.facts["objects"] if o["category"] == q["anchor"] and o["pixels"] >= MIN_PIXELS
            ]
            cols = np.nonzero((semantic == cats.index(q["anchor"])) & (instances == anchor["instance"]))[1]
            target = [
                o for o in inst.facts["objects"] if o["category"] == inst.answer and o["pixels"] >= MIN_PIXELS
            ]
            side = [
                o
                for o in target
                if (o["azimuth_centre"] < anchor["azimuth_centre"]) == (q["relation"] == "left")
            ]
            assert side and cols.size >= MIN_PIXELS // 8


def test_checker_and_parser() -> None:
    count = _of_kind("count")
    n = count.answer
    assert TASK.score(f'{{"answer": {n}}}', count).correct
    assert TASK.score(f"Answer: {n}", count).correct
    assert not TASK.check(n + 1, count).correct and not TASK.check(n - 1, count).correct
    assert TASK.parse("", count).error == "empty reply"
    assert "no number" in str(TASK.parse("The room looks cosy.", count).error)
    assert "truncated" in str(TASK.parse('{"answer": ', count).error)
    inst = INSTANCES[0]
    facts = dict(inst.facts)
    facts["answer_type"] = "category"
    cat_inst = PuzzleInstance(inst.task, inst.difficulty, inst.seed, inst.prompt, "sofa", facts)
    assert TASK.parse("It is a couch.", cat_inst).value == "sofa"
    assert TASK.parse('{"answer": "chairs"}', cat_inst).value == "chair"
    assert "names no object category" in str(TASK.parse("Answer: a spaceship", cat_inst).error)
    facts["answer_type"] = "yesno"
    yn = PuzzleInstance(inst.task, inst.difficulty, inst.seed, inst.prompt, "yes", facts)
    assert TASK.parse("Yes, there is.", yn).value == "yes"
    assert "is not yes or no" in str(TASK.parse("maybe", yn).error)
