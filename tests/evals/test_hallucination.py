"""The hallucination evaluation: captioned scenes with exact objects, the caption pass over a real
(tiny) VLM, and the runner end to end with resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embodia.evals.hallucination import (
    HallucinationEvalSettings,
    PopeCounts,
    pope_questions,
    run_hallucination_eval,
)
from embodia.evals.hallucination_data import (
    BAND,
    CAPTION_PROMPT,
    CAPTION_SOURCES,
    COLUMNS,
    MIN_NAMED_PIXELS,
    SCENE_SIDE,
    caption_records,
    caption_source,
    fold,
    simulator_objects,
)
from embodia.perception.hallucination.mentions import HallucinationError

CLEVR = CAPTION_SOURCES["clevr"]
SIMULATOR = CAPTION_SOURCES["simulator"]

SCENE = [
    {"id": 0, "colour": "blue", "shape": "sphere", "size": "small", "x": 60, "y": 50},
    {"id": 1, "colour": "red", "shape": "cube", "size": "large", "x": 20, "y": 40},
]


def test_captions_list_objects_left_to_right_and_label_mentions() -> None:
    caption = CLEVR.caption(SCENE)
    assert caption == "There are two objects: a red cube and a blue sphere."
    assert CLEVR.caption(SCENE[:1]) == "There is one object: a blue sphere."
    said = "There are three objects: a red cube, a grey cylinder and a red cube."
    labelled = CLEVR.label_mentions(said, CLEVR.keys(SCENE))
    assert [(m.text, m.hallucinated) for m in labelled] == [
        ("red cube", False),
        ("grey cylinder", True),
        ("red cube", False),
    ]
    assert said[labelled[1].start : labelled[1].end] == "grey cylinder"
    # Post-hoc removal rewrites the caption over the mentions that remain.
    assert CLEVR.caption_without(said, [labelled[1]]) == "There are two objects: a red cube and a red cube."
    assert CLEVR.caption_without(said, labelled) == "There are no objects."
    assert CLEVR.find_mentions("a red one and a cube") == []
    assert len(CLEVR.vocabulary) == 8 * 3 and ("red", "cube") in CLEVR.vocabulary
    with pytest.raises(HallucinationError, match="unknown caption source 'coco'; known: simulator, clevr"):
        caption_source("coco")


def test_simulator_captions_name_furniture_by_the_render_s_semantics() -> None:
    furniture = simulator_objects()
    assert "bed" in furniture and "wall" not in furniture and "door" not in furniture
    # A tiny object is in the scene (a mention of it is real) but the caption does not name it.
    objects = [
        {"id": 0, "category": "sink", "pixels": 12, "x": 5.0, "named": False},
        {"id": 1, "category": "toilet", "pixels": 300, "x": 40.0, "named": True},
        {"id": 2, "category": "bathtub", "pixels": 900, "x": 20.0, "named": True},
    ]
    assert SIMULATOR.caption(objects) == "There are two objects: a bathtub and a toilet."
    said = "There are three objects: a bathtub, a sink and a bed."
    labels = [(m.key, m.hallucinated) for m in SIMULATOR.label_mentions(said, SIMULATOR.keys(objects))]
    assert labels == [(("bathtub",), False), (("sink",), False), (("bed",), True)]
    assert [m.key for m in SIMULATOR.find_mentions("two beds and a tables.")] == [("bed",), ("table",)]
    assert [m.key for m in SIMULATOR.find_mentions("a bedside tvstand")] == []

    strip = np.arange(8 * 16).reshape(8, 16)
    np.testing.assert_array_equal(fold(strip), np.concatenate([strip[:, :8], strip[:, 8:]], axis=0))

    scenes = [SIMULATOR.scene(4, i) for i in range(24)]
    image, objects = scenes[5]
    again, same = SIMULATOR.scene(4, 5)
    np.testing.assert_array_equal(image, again)
    assert objects == same
    side = BAND[1] - BAND[0]
    assert image.shape == (2 * side, 2 * side, 3) and image.dtype == np.uint8
    named = set()
    for _, objects in scenes:
        assert [o["x"] for o in objects] == sorted(o["x"] for o in objects)
        for obj in objects:
            assert obj["category"] in furniture and obj["pixels"] > 0
            assert obj["named"] == (obj["pixels"] >= MIN_NAMED_PIXELS)
        caption = SIMULATOR.caption(objects)
        assert [m.key[0] for m in SIMULATOR.find_mentions(caption)] == [
            o["category"] for o in objects if o["named"]
        ]
        named |= {o["category"] for o in objects if o["named"]}
    # views differ: many kinds of furniture over two houses' rooms
    assert len(named) >= 6


def test_clevr_scenes_are_seeded_one_object_per_column() -> None:
    image, objects = CLEVR.scene(3, 7)
    again, same = CLEVR.scene(3, 7)
    assert image.shape == (SCENE_SIDE, SCENE_SIDE, 3) and image.dtype == np.uint8
    np.testing.assert_array_equal(image, again)
    assert objects == same
    width = SCENE_SIDE / COLUMNS
    columns = [int(o["x"] // width) for o in objects]
    assert columns == sorted(set(columns))
    counts = {len(CLEVR.scene(0, i)[1]) for i in range(40)}
    assert counts == {1, 2, 3}


def test_caption_records_write_their_images(tmp_path: Path) -> None:
    for source in (CLEVR, SIMULATOR):
        records = caption_records(source, tmp_path / source.name, 5, 3)
        assert [r["messages"][0]["content"] for r in records] == [CAPTION_PROMPT] * 3
        for record in records:
            assert (tmp_path / source.name / record["images"][0]).is_file()
            assert record["messages"][1]["content"] == source.caption(record["objects"])


def test_pope_questions_pair_present_objects_with_absent_ones() -> None:
    objects = [["red", "cube"], ["blue", "sphere"]]
    rng = np.random.default_rng(0)
    probe_scenes = [{("grey", "cylinder")}] * 9 + [{("green", "cube")}] * 5 + [{("red", "cube")}] * 50
    counts = PopeCounts.of(probe_scenes)
    popular = pope_questions(objects, "popular", CLEVR.vocabulary, counts, rng)
    assert popular[:2] == [(("blue", "sphere"), True), (("red", "cube"), True)]
    assert [key for key, present in popular if not present] == [("grey", "cylinder"), ("green", "cube")]
    for key, present in pope_questions(objects, "adversarial", CLEVR.vocabulary, counts, rng):
        if not present:
            assert key[0] in ("red", "blue") or key[1] in ("cube", "sphere")
    assert sum(not p for _, p in pope_questions(objects, "random", CLEVR.vocabulary, counts, rng)) == 2
    # Single-word objects: the adversarial ones are those seen most often beside the present ones.
    rooms = (
        [{("toilet",), ("sink",), ("bathtub",)}] * 4
        + [{("bed",), ("cabinet",)}] * 6
        + [{("sink",), ("counter",)}]
    )
    counts = PopeCounts.of(rooms)
    assert counts.together[frozenset({("toilet",), ("sink",)})] == 4
    asked = pope_questions([["toilet"]], "adversarial", SIMULATOR.vocabulary, counts, rng)
    assert asked == [(("toilet",), True), (("bathtub",), False)]
    asked = pope_questions([["sink"], ["toilet"]], "adversarial", SIMULATOR.vocabulary, counts, rng)
    assert [key for key, present in asked if not present] == [("bathtub",), ("counter",)]


def test_caption_pass_finds_the_spans_of_a_llava_style_model(tiny_vlm_dir: Path) -> None:
    import torch

    from embodia.evals.hallucination import load_captioner
    from embodia.perception.hallucination.detectors import (
        INSLEN_WEIGHTS,
        InsLenConfig,
        inslen_grid,
        inslen_grid_parts,
        inslen_layer_grid,
        inslen_scores,
        inslen_search_grid,
        token_signals,
    )
    from embodia.perception.hallucination.signals import caption_pass, run_sequence, sequence_inputs

    processor, model = load_captioner(f"hf:{tiny_vlm_dir}")
    image, _ = CLEVR.scene(0, 0)
    caption = "There are two objects: a red cube and a blue sphere."
    mentions = CLEVR.find_mentions(caption)
    scored = caption_pass(model, processor, image, CAPTION_PROMPT, caption, mentions, attentions=True)
    tokenizer = processor.tokenizer
    assert scored.image.numel() == 16  # 4 x 4 patches of the tiny CLIP tower
    instruction = tokenizer.decode(scored.input_ids[scored.instruction])
    assert instruction.startswith(CAPTION_PROMPT) and instruction.rstrip().endswith("assistant")
    assert tokenizer.decode(scored.input_ids[scored.caption_start :]) == caption
    assert [tokenizer.decode(scored.input_ids[t]).strip() for t in scored.mention_tokens] == [
        "red cube",
        "blue sphere",
    ]
    layers = model.config.text_config.num_hidden_layers
    assert scored.hidden.shape[:2] == (layers + 1, scored.input_ids.numel())
    assert scored.attentions is not None and scored.attentions.shape[0] == layers
    # Each query's attention is a distribution.
    np.testing.assert_allclose(scored.attentions.sum(-1).numpy(), 1.0, atol=1e-4)
    assert len(inslen_scores(scored)) == 2 and all(np.isfinite(inslen_scores(scored)))
    # A batch of equal-length sequences over one image: each row as its own pass
    inputs, prompt_ids, _ = sequence_inputs(processor, image, CAPTION_PROMPT, [])
    words = scored.input_ids[scored.caption_start :].tolist()  # ordinary text tokens
    rows = torch.stack([torch.cat([prompt_ids, torch.tensor(words[i : i + 3])]) for i in range(3)])
    batched = run_sequence(model, inputs, rows).logits
    for row, logits in zip(rows, batched, strict=True):
        np.testing.assert_allclose(
            logits.numpy(), run_sequence(model, inputs, row).logits[0].numpy(), atol=1e-4
        )
    # The search scores every choice of layers and λ at once, each as inslen_scores would.
    assert len(inslen_layer_grid(layers)) == 2 * (layers + 1) ** 2
    choices = inslen_search_grid(layers)
    assert len(choices) == 2 * (layers + 1) ** 2 * len(INSLEN_WEIGHTS) and ((2, 2, 1), 0.4) in choices
    grid = inslen_grid(scored, InsLenConfig(), choices)
    assert grid[choices.index(((2, 2, 1), 0.4))] == pytest.approx(inslen_scores(scored))
    for weight in (0.0, 1.0):
        assert grid[choices.index(((2, 2, 1), weight))] == pytest.approx(
            inslen_scores(scored, InsLenConfig(weight=weight))
        )
    # Each part is combined over a mention's tokens as the score is: min by default.
    parts = inslen_grid_parts(scored, InsLenConfig(), [(2, 2, 1)])[0]
    assert [p.score for p in parts] == pytest.approx(inslen_scores(scored))
    for mention, tokens in zip(parts, scored.mention_tokens, strict=True):
        assert len(tokens) > 1 and -1 <= mention.local <= 1 and 0 <= mention.lens_weight <= 1
        assert -1 <= mention.calibrated_local <= 1
    assert grid[choices.index(((0, 1, 2), 0.4))] == pytest.approx(inslen_scores(scored, layers=(0, 1, 2)))
    with pytest.raises(HallucinationError, match="outside the model's 0..2"):
        inslen_scores(scored, layers=(3, 2, 1))
    rows = token_signals(scored)
    assert [r.shape[0] for r in rows] == [len(t) for t in scored.mention_tokens]
    with pytest.raises(HallucinationError, match="H x W x 3"):
        caption_pass(model, processor, image[..., 0], CAPTION_PROMPT, caption, mentions)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model": "openai:http://x"}, "hf:DIR"),
        ({"detectors": ("inslen", "glsim")}, "unknown detector 'glsim'"),
        ({"captions": 1}, "captions"),
        ({"num_beams": 1}, "num_beams"),
        ({"guidance_weight": -1.0}, "guidance_weight"),
        ({"flag_threshold": 1.0}, "flag_threshold"),
        ({"inslen_layers": "best"}, "inslen_layers must be one of reference, probe"),
        ({"source": "coco"}, "unknown caption source 'coco'"),
    ],
)
def test_settings_name_bad_values(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(HallucinationError, match=message):
        HallucinationEvalSettings(**{"model": "hf:/nowhere", **changes})


@pytest.fixture(scope="module")
def caption_model(tiny_vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny VLM after a short caption SFT: it writes captions in the scenes' grammar (and
    gets many objects wrong)."""
    from embodia.evals.backdoor import write_records
    from embodia.policies.recipes.sft import SFTSettings, run_sft

    folder = tmp_path_factory.mktemp("caption-model")
    records = write_records(
        caption_records(SIMULATOR, folder / "data", 9, 300), folder / "data" / "train.jsonl"
    )
    settings = SFTSettings(
        model=f"hf:{tiny_vlm_dir}",
        data=str(records),
        max_steps=120,
        learning_rate=1e-3,
        batch_size=16,
        logging_steps=20,
        save_steps=1000,
        seed=0,
    )
    return str(run_sft(settings, folder / "run")["policy"])


def test_guided_search_steers_away_from_the_objects_the_risk_doubts(caption_model: str) -> None:
    from embodia.evals.hallucination import load_captioner
    from embodia.perception.hallucination.decoding import greedy_caption, guided_search

    processor, model = load_captioner(caption_model)
    image, caption = next(
        (image, caption)
        for image, _ in (SIMULATOR.scene(3, i) for i in range(20))
        if SIMULATOR.find_mentions(caption := greedy_caption(model, processor, image, CAPTION_PROMPT))
    )
    named = SIMULATOR.find_mentions(caption)
    doubted = named[0].key
    scored: list[str] = []

    def risk(text: str, mentions: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        scored.append(text)
        return np.array([0.999 if m.key == doubted else 0.2 for m in mentions]), np.full(len(mentions), 0.2)

    def search(weight: float, by: Any = risk) -> Any:
        return guided_search(
            model,
            processor,
            image,
            CAPTION_PROMPT,
            SIMULATOR.find_mentions,
            by,
            num_beams=3,
            weight=weight,
            same_mentions_as=caption,
        )

    guided = search(10.0)
    said = [m.key for m in SIMULATOR.find_mentions(guided.caption)]
    assert doubted not in said and len(said) == len(named)  # at the greedy caption's length
    assert guided.expected_hallucination == pytest.approx(0.2) and guided.candidates >= 1
    # Each partial caption is scored once, when its newest token completes a mention.
    assert all(len(SIMULATOR.find_mentions(text)) >= 1 for text in scored)

    def constant(p: float, prior: float) -> Any:
        return lambda _, mentions: (np.full(len(mentions), p), np.full(len(mentions), prior))

    # weight 0 is a plain beam search: the risk changes nothing
    plain = search(0.0)
    assert plain.caption == search(0.0, constant(0.5, 0.1)).caption
    # a mention whose probability is its prior's carries no evidence, whatever the weight
    assert plain.caption == search(10.0, constant(0.3, 0.3)).caption
    with pytest.raises(HallucinationError, match="two beams"):
        guided_search(model, processor, image, CAPTION_PROMPT, SIMULATOR.find_mentions, risk, num_beams=1)


def test_the_evaluation_runs_resumes_and_reports(caption_model: str, tmp_path: Path) -> None:
    from embodia.perception.hallucination.detectors import INSLEN_WEIGHTS

    settings = HallucinationEvalSettings(
        model=caption_model,
        captions=6,
        probe_captions=8,
        guided=True,
        num_beams=2,
        max_new_tokens=40,
        inslen_layers="probe",
    )
    out = tmp_path / "run"
    summary = run_hallucination_eval(settings, out)
    records = [json.loads(line) for line in (out / "captions.jsonl").read_text().splitlines()]
    assert sorted((r["split"], r["index"]) for r in records) == sorted(
        [("probe", i) for i in range(8)] + [("test", i) for i in range(6)]
    )
    mentions = [m for r in records for m in r["mentions"]]
    assert mentions, "the caption model names objects"
    for record in records:
        truth = {tuple(o) for o in record["objects"]}
        for mention in record["mentions"]:
            assert mention["hallucinated"] == (tuple(mention["key"]) not in truth)
            assert len(mention["features"]) == len(mentions[0]["features"])
    assert (out / "haloprobe.json").is_file()
    # the 2-layer tiny VLM's choices: layers and λ
    assert all(len(m["inslen_grid"]) == 2 * 3**2 * len(INSLEN_WEIGHTS) for m in mentions)
    assert all(m["inslen_parts"]["score"] == pytest.approx(m["scores"]["inslen"]) for m in mentions)
    if "inslen" in summary["detection"]:
        assert "inslen-reference" in summary["detection"]
        parts = summary["inslen_parts_auroc"]
        assert parts["score"] == pytest.approx(summary["detection"]["inslen-reference"]["auroc"])
        chosen = summary["detection"]["inslen"]
        assert len(chosen["layers"]) == 3 and chosen["weight"] in INSLEN_WEIGHTS
    assert summary["greedy"]["captions"] == 6
    for kind in ("guided", "removed"):
        assert summary[kind]["captions"] == 6
        assert set(summary[kind]["pope"]) == {"random", "popular", "adversarial"}
    greedy = {r["index"]: r for r in records if r["split"] == "test"}
    for line in (out / "guided.jsonl").read_text().splitlines():
        row = json.loads(line)
        kept = [m.key for m in SIMULATOR.find_mentions(row["removed"])]
        named = [tuple(m["key"]) for m in greedy[row["index"]]["mentions"]]
        flagged = sum(p > settings.flag_threshold for p in row["greedy_risk"])
        assert len(kept) == len(named) - flagged and set(kept) <= set(named)
    assert summary["guided"]["mentions_equal_to_greedy"] == 1.0

    # Cut the run after five captions: a resume captions only the nine missing scenes.
    lines = (out / "captions.jsonl").read_text().splitlines(keepends=True)
    (out / "captions.jsonl").write_text("".join(lines[:5]))
    (out / "summary.json").unlink()
    (out / "guided.jsonl").write_text(
        "".join((out / "guided.jsonl").read_text().splitlines(keepends=True)[:2])
    )
    seen: list[Any] = []
    again = run_hallucination_eval(settings, out, resume=True, on_record=seen.append)
    assert len(seen) == 9
    assert again == summary
