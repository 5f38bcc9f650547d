"""``benchmarks/perception.py --quick``: the hallucination study, fusion, tokenizer and adapter
measures run end to end and print their keys."""

from __future__ import annotations

import pytest
from benchmark_runs import run_benchmark


@pytest.mark.slow
def test_quick_perception_run_prints_every_key() -> None:
    # --quick takes about a minute on a quiet 2-core machine, three with one other busy process
    result = run_benchmark("perception", "--quick")
    # the captioner learns the caption grammar from scratch
    assert result["train_loss_last"] < result["train_loss_first"] / 4
    for key in ("inslen_auroc", "haloprobe_auroc", "attention_auroc", "haloprobe_prior_auroc"):
        assert 0 <= result[key] <= 1, key
    for kind in ("greedy", "guided", "removed"):
        assert 0 <= result[f"{kind}_chair_i"] <= 1 and 0 <= result[f"{kind}_chair_s"] <= 1, kind
        assert 0 <= result[f"{kind}_pope_adversarial_acc"] <= 1, kind
    # guided decoding competes at the greedy caption's length; removal only shortens
    assert result["guided_mentions"] == result["greedy_mentions"]
    assert result["removed_mentions"] <= result["greedy_mentions"]
    for key in (
        "inslen_captions_per_s",
        "haloprobe_captions_per_s",
        "fusion_512_ms",
        "tokenizer_encode_images_per_s",
        "tokenizer_decode_images_per_s",
        "maa_frozen_images_per_s",
        "maa_adapted_images_per_s",
    ):
        assert result[key] > 0, key
