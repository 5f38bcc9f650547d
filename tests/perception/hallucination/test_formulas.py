"""The hallucination measures and detector formulas on hand-made numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from embodia.core.scores import ScoreInputError, auroc, average_precision, fpr_at_tpr
from embodia.perception.hallucination.detectors import (
    AttentionConfig,
    InsLenConfig,
    attention_scores,
    combine,
    inslen_token_parts,
)
from embodia.perception.hallucination.mentions import HallucinationError, Mention, repeated, token_spans
from embodia.perception.hallucination.metrics import chair, detection_scores, pope
from embodia.perception.hallucination.signals import CaptionPass, image_token_id, layer_index


def test_ranking_scores_match_hand_counts() -> None:
    real, fake = [0.9, 0.8, 0.4], [0.5, 0.4, 0.1]
    # Pairs won: 3 + 3 + (1 and a tie) = 7.5 of 9.
    assert auroc(real, fake) == pytest.approx(7.5 / 9)
    # Thresholds 0.9 (P 1, R 1/3), 0.8 (P 1, R 2/3), 0.5 (no new positive), 0.4 (P 3/5, R 1).
    assert average_precision(real, fake) == pytest.approx(1 / 3 + 1 / 3 + 1 / 3 * 3 / 5)
    # Recall reaches 0.95 only at 0.4, where two of three negatives pass.
    assert fpr_at_tpr(real, fake) == pytest.approx(2 / 3)
    assert auroc([1, 2], [3, 4]) == 0.0 and auroc([3, 4], [1, 2]) == 1.0
    assert auroc([1, 1], [1, 1]) == 0.5
    with pytest.raises(ScoreInputError, match="both classes"):
        auroc([1.0], [])
    with pytest.raises(ScoreInputError, match="NaN"):
        auroc([math.nan], [1.0])


def test_detection_scores_take_real_mentions_as_positive() -> None:
    scores = [0.9, 0.2, 0.8, 0.1]
    hallucinated = [False, True, False, True]
    measured = detection_scores(scores, hallucinated)
    assert measured["auroc"] == 1.0 and measured["aupr"] == 1.0 and measured["fpr95"] == 0.0
    assert (measured["real"], measured["hallucinated"]) == (2, 2)
    flipped = detection_scores([-s for s in scores], hallucinated)
    assert flipped["auroc"] == 0.0


def _mention(key: tuple[str, str], hallucinated: bool) -> Mention:
    return Mention(text=" ".join(key), start=0, end=1, key=key, hallucinated=hallucinated)


def test_chair_counts_captions_mentions_and_recall() -> None:
    red, blue, grey = ("red", "cube"), ("blue", "sphere"), ("grey", "cylinder")
    captions = [
        ([_mention(red, False), _mention(grey, True)], {red, blue}),
        ([_mention(blue, False)], {blue}),
        ([_mention(grey, True), _mention(red, True)], {blue}),
    ]
    measured = chair(captions)
    assert measured["chair_s"] == pytest.approx(2 / 3)
    assert measured["chair_i"] == pytest.approx(3 / 5)
    assert measured["recall"] == pytest.approx(2 / 4)  # red (1st), blue (2nd) of 4 objects
    assert measured["mentions_per_caption"] == pytest.approx(5 / 3)
    with pytest.raises(HallucinationError, match="labelled"):
        chair([([Mention("x", 0, 1, "x")], set())])


def test_pope_counts_yes_answers() -> None:
    answers = [True, True, False, False, True]
    present = [True, False, False, True, True]
    measured = pope(answers, present)
    assert measured["accuracy"] == pytest.approx(3 / 5)
    assert measured["precision"] == pytest.approx(2 / 3)
    assert measured["recall"] == pytest.approx(2 / 3)
    assert measured["yes_ratio"] == pytest.approx(3 / 5)


def test_token_spans_map_mentions_to_overlapping_tokens() -> None:
    # "a red cube and a blue sphere" in byte-level BPE pieces with their leading spaces:
    # "a", " red", " c", "ube", " and", ...
    offsets = [(0, 1), (1, 5), (5, 7), (7, 10), (10, 14), (14, 16), (16, 21), (21, 28)]
    mentions = [
        Mention("red cube", 2, 10, ("red", "cube")),
        Mention("blue sphere", 17, 28, ("blue", "sphere")),
    ]
    assert token_spans(offsets, mentions) == [[1, 2, 3], [6, 7]]
    with pytest.raises(HallucinationError, match="no caption token covers"):
        token_spans(offsets[:2], [mentions[1]])
    assert repeated([mentions[0], mentions[1], mentions[0]]) == [False, False, True]


def test_combine_and_layer_fractions() -> None:
    assert combine([0.3, 0.1, 0.5], "min") == 0.1
    assert combine([0.3, 0.1, 0.5], "first") == 0.3
    assert combine([0.3, 0.1, 0.5], "mean") == pytest.approx(0.3)
    with pytest.raises(HallucinationError, match="aggregate"):
        combine([0.1], "max")
    # The reference's layers 24, 32 and 22 of LLaVA-1.5's 32, carried to a 2-layer model.
    assert [layer_index(f, 32) for f in (24 / 32, 32 / 32, 22 / 32)] == [24, 32, 22]
    assert [layer_index(f, 2) for f in (24 / 32, 32 / 32, 22 / 32)] == [2, 2, 1]


def test_inslen_parts_by_hand() -> None:
    config = InsLenConfig(top_k=2, context_num=2, bias=2.0, weight=0.4)
    obj = torch.tensor([1.0, 0.0])
    image_states = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    image_probs = torch.tensor([0.5, 0.1, 0.3])  # top 2: states 0 (cos 1) and 2 (cos 1/sqrt 2)
    instruction_states = torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 4.0]])
    instruction_probs = torch.tensor([0.2, 0.6, 0.1])  # top 2: states 1 and 0, mean (2, 0)
    parts = inslen_token_parts(obj, image_states, image_probs, instruction_states, instruction_probs, config)
    local = (1 + 1 / math.sqrt(2)) / 2
    assert parts.local == pytest.approx(local)
    assert parts.lens_weight == pytest.approx(0.6)
    assert parts.calibrated_local == pytest.approx(0.6 * local)
    # d = |(1, 0) - (2, 0)| / |(1, 0)| = 1; CCS = (2 - 1) * mean(0.6, 0.2).
    assert parts.context_consistency == pytest.approx(0.4)
    assert parts.score == pytest.approx(0.6 * 0.6 * local + 0.4 * 0.4)
    # top_k larger than the image's token count uses them all.
    wide = inslen_token_parts(
        obj, image_states, image_probs, instruction_states, instruction_probs, InsLenConfig(top_k=32)
    )
    assert wide.local == pytest.approx((1 + 0 + 1 / math.sqrt(2)) / 3)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("image_layer", 1.5, "fraction of the depth"),
        ("top_k", 0, "top_k"),
        ("weight", -0.1, "weight"),
        ("aggregate", "max", "aggregate"),
    ],
)
def test_inslen_config_names_bad_values(field: str, value: object, message: str) -> None:
    with pytest.raises(HallucinationError, match=message):
        InsLenConfig(**{field: value})  # type: ignore[arg-type]


def test_attention_scores_sum_image_attention_of_the_predicting_state() -> None:
    layers, heads, length = 2, 2, 6
    attentions = torch.zeros(layers, heads, length, length)
    # Image tokens at 1 and 2; the mention's tokens at 4 and 5 are predicted from 3 and 4.
    attentions[0, 0, 3, 1], attentions[0, 1, 3, 2], attentions[1, 0, 3, 1] = 0.2, 0.1, 0.3
    attentions[:, :, 4, 0] = 1.0  # state 4 looks at no image token
    caption = CaptionPass(
        input_ids=torch.arange(length),
        image=torch.tensor([1, 2]),
        instruction=torch.tensor([3]),
        caption_start=4,
        hidden=torch.zeros(layers + 1, length, 2),
        logits=torch.zeros(length, 8),
        attentions=attentions,
        mention_tokens=[[4], [4, 5]],
        lm_head=torch.nn.Identity(),
    )
    assert attention_scores(caption, AttentionConfig(0, 1, "first")) == pytest.approx([0.6, 0.6])
    assert attention_scores(caption, AttentionConfig(0, 1, "min")) == pytest.approx([0.6, 0.0])
    # Only the first of the two layers.
    assert attention_scores(caption, AttentionConfig(0, 0.4, "first")) == pytest.approx([0.3, 0.3])
    # The reference's layers 4-17 of 32, carried to 2 and to 32 layers.
    assert list(AttentionConfig().layers(2)) == [0, 1]
    assert list(AttentionConfig().layers(32)) == list(range(4, 18))


def test_image_token_id_names_an_unsupported_architecture() -> None:
    class TextOnly:
        pass

    with pytest.raises(HallucinationError, match="TextOnly has no image token id"):
        image_token_id(TextOnly())


def test_mention_features_need_tokens() -> None:
    from embodia.perception.hallucination.haloprobe import mention_features

    assert mention_features(np.array([[1.0, 4.0], [3.0, 2.0]])).tolist() == [2.0, 3.0, 1.0, 2.0]
    with pytest.raises(HallucinationError, match="tokens, signals"):
        mention_features(np.zeros((0, 3)))
