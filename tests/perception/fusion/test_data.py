"""The generated fusion pairs: reproducible, split by source, in 0-255, with what each modality
is meant to show."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.perception.fusion.data import HELD_OUT_PHOTOS, HELD_OUT_SCENE_SEED, TRAIN_PHOTOS, fusion_pairs
from embodia.perception.fusion.errors import FusionError


@pytest.mark.parametrize("kind", ["ir_vis", "medical"])
def test_pairs_are_reproducible_and_in_range(kind: str) -> None:
    first = fusion_pairs(kind, 3, 48, seed=4)
    again = fusion_pairs(kind, 3, 48, seed=4)
    other = fusion_pairs(kind, 3, 48, seed=5)
    for pair, same, different in zip(first, again, other, strict=True):
        assert pair.kind == kind and pair.a.shape == pair.b.shape == (48, 48)
        assert pair.a.dtype == np.float32 and pair.a.min() >= 0 and pair.a.max() <= 255
        assert np.array_equal(pair.a, same.a) and np.array_equal(pair.b, same.b)
        assert not np.array_equal(pair.a, different.a)
        assert not np.allclose(pair.a, pair.b, atol=20)  # two modalities, not one image twice


def test_infrared_visible_pairs_split_by_photograph_and_show_hot_targets() -> None:
    train = fusion_pairs("ir_vis", len(TRAIN_PHOTOS), 64, split="train")
    test = fusion_pairs("ir_vis", 4, 64, split="test")
    assert [pair.source for pair in train] == list(TRAIN_PHOTOS)
    assert {pair.source for pair in test} <= set(HELD_OUT_PHOTOS)
    for pair in train + test:
        # the hottest infrared pixels (the targets) are far above the infrared scene around them
        assert np.percentile(pair.a, 99.5) > np.median(pair.a) + 60


def test_medical_pairs_keep_bone_in_b_and_soft_tissue_in_a() -> None:
    for pair in fusion_pairs("medical", 2, 64, split="test"):
        bone = pair.b > 200
        assert bone.any() and pair.a[bone].mean() < 150  # the skull is dim in A
        tissue = (pair.a > 100) & ~bone
        assert tissue.any() and pair.b[tissue].mean() < pair.a[tissue].mean() - 50


def test_simulator_pairs_are_luminance_and_inverse_depth_from_held_out_houses() -> None:
    (pair,) = fusion_pairs("sim_depth", 1, 32, split="test")
    assert pair.kind == "sim_depth" and pair.a.shape == (32, 32)
    assert pair.source.startswith(f"procedural:seed={HELD_OUT_SCENE_SEED} ")
    assert pair.b.max() == pytest.approx(255.0)  # the nearest surface seen is the brightest
    assert pair.b.min() >= 0 and pair.a.std() > 0


def test_bad_requests_are_named() -> None:
    with pytest.raises(FusionError, match="unknown pair kind 'thermal'"):
        fusion_pairs("thermal", 1, 48)
    with pytest.raises(FusionError, match="size must be a whole number in 32..1024, got 16"):
        fusion_pairs("ir_vis", 1, 16)
    with pytest.raises(FusionError, match="count must be a whole number >= 1"):
        fusion_pairs("ir_vis", 0, 48)
    with pytest.raises(FusionError, match="split must be train or test"):
        fusion_pairs("ir_vis", 1, 48, split="val")  # type: ignore[arg-type]
