"""The fusion baselines: average and max-abs by hand, the Laplacian pyramid's exact
reconstruction and its fusion rule."""

from __future__ import annotations

import numpy as np
import pytest

from embodia.perception.fusion import baselines
from embodia.perception.fusion.errors import FusionError


def test_average_and_max_abs_by_hand() -> None:
    a = np.array([[1.0, -5.0], [2.0, 7.0]])
    b = np.array([[-2.0, 3.0], [2.0, 0.0]])
    assert np.array_equal(baselines.average_fusion(a, b), [[-0.5, -1.0], [2.0, 3.5]])
    # larger magnitude wins, A on a tie
    assert np.array_equal(baselines.max_abs_fusion(a, b), [[-2.0, -5.0], [2.0, 7.0]])
    assert np.array_equal(baselines.max_abs_choice(np.array([-3.0]), np.array([3.0])), [-3.0])


@pytest.mark.parametrize("shape", [(64, 64), (37, 50), (9, 8)])
def test_the_laplacian_pyramid_rebuilds_its_image_exactly(shape: tuple[int, int]) -> None:
    image = np.random.default_rng(0).uniform(0, 255, shape)
    levels = baselines.pyramid_levels(shape, 4)
    pyramid = baselines.laplacian_pyramid(image, levels)
    assert len(pyramid) == levels + 1
    assert np.allclose(baselines.reconstruct_laplacian(pyramid), image, atol=1e-9)
    # each level halves the size (rounding up)
    assert [p.shape[0] for p in pyramid] == [-(-shape[0] // 2**k) for k in range(levels + 1)]


def test_pyramid_levels_stop_before_the_base_gets_tiny() -> None:
    assert baselines.pyramid_levels((256, 256), 4) == 4
    assert baselines.pyramid_levels((16, 40), 4) == 2  # 16 -> 8 -> 4
    assert baselines.pyramid_levels((7, 100), 4) == 0


def test_laplacian_fusion_averages_the_base_and_keeps_the_stronger_detail() -> None:
    image = np.random.default_rng(1).uniform(0, 255, (32, 32))
    assert np.allclose(baselines.laplacian_fusion(image, image), image)
    # constants have no detail: only the base's average remains
    assert np.allclose(baselines.laplacian_fusion(np.full((32, 32), 10.0), np.full((32, 32), 30.0)), 20.0)
    # against a flat source, every detail coefficient is the textured one's; the bases average
    levels = baselines.pyramid_levels(image.shape, 4)
    pyramid = baselines.laplacian_pyramid(image, levels)
    expected = baselines.reconstruct_laplacian([*pyramid[:-1], (pyramid[-1] + 100.0) / 2])
    assert np.allclose(baselines.laplacian_fusion(image, np.full((32, 32), 100.0)), expected)
    # and the choice is per coefficient: where B's detail is larger, B's is kept
    other = np.random.default_rng(2).uniform(0, 255, (32, 32))
    mine = baselines.laplacian_pyramid(other, levels)
    chosen = [np.where(np.abs(x) >= np.abs(y), x, y) for x, y in zip(pyramid[:-1], mine[:-1], strict=True)]
    expected = baselines.reconstruct_laplacian([*chosen, (pyramid[-1] + mine[-1]) / 2])
    assert np.allclose(baselines.laplacian_fusion(image, other), expected)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(FusionError, match="levels must be a whole number >= 1"):
        baselines.laplacian_fusion(np.ones((8, 8)), np.ones((8, 8)), levels=0)
    with pytest.raises(FusionError, match="differ in size"):
        baselines.average_fusion(np.ones((8, 8)), np.ones((8, 9)))
    with pytest.raises(FusionError, match="2-D grayscale"):
        baselines.max_abs_fusion(np.ones(8), np.ones(8))
