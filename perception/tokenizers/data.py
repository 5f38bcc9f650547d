"""Training and held-out images for the bitwise tokenizer from the embedded simulator:
pinhole views of procedural houses from random navigable points and headings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from embodia.core.limits import MAX_SET_SIZE, check_image_size
from embodia.perception.tokenizers.lfq import TokenizerError

SIM_HFOV_DEG = 90.0
MIN_CONTRAST = 4.0
"""A view whose pixel values have a smaller standard deviation (a wall filling the frame) is
drawn again, up to ``POSE_TRIES`` times: such frames teach a tokenizer nothing."""
POSE_TRIES = 10


def simulator_views(
    scene_seeds: Sequence[int], views: int, height: int, width: int, seed: int = 0
) -> NDArray[np.uint8]:
    """``views`` RGB pinhole frames (views, height, width, 3), spread evenly over the
    procedural houses ``procedural:seed=S`` for ``S`` in ``scene_seeds``, each seen from a
    random navigable cell with a random heading (seeded by ``seed``); a featureless frame is
    drawn again (``MIN_CONTRAST``)."""
    from embodia.sim.protocol import Pose
    from embodia.sim.simulator import EmbeddedSimulator

    if not scene_seeds:
        raise TokenizerError("simulator_views needs at least one scene seed")
    if isinstance(views, bool) or not isinstance(views, int) or not 1 <= views <= MAX_SET_SIZE:
        raise TokenizerError(f"views must be an integer in 1..{MAX_SET_SIZE}, got {views!r}")
    check_image_size("a simulator view", height, width, TokenizerError)
    simulator = EmbeddedSimulator()
    frames: list[NDArray[np.uint8]] = []
    shares = np.array_split(np.arange(views), len(scene_seeds))
    for scene_seed, share in zip(scene_seeds, shares, strict=True):
        if not len(share):
            continue
        simulator.reset(f"procedural:seed={scene_seed}")
        rng = np.random.default_rng([seed, scene_seed])
        cells = np.argwhere(simulator.nav.island)
        for _ in share:
            for _ in range(POSE_TRIES):
                row, col = cells[rng.integers(len(cells))]
                pose = Pose.from_array(simulator.nav.cell_centre(row, col), float(rng.uniform(-np.pi, np.pi)))
                rgb = simulator.renderer.pinhole(
                    pose.sensor_position(simulator.config.sensor_height),
                    pose.yaw,
                    height,
                    width,
                    SIM_HFOV_DEG,
                ).rgb
                if float(rgb.std()) >= MIN_CONTRAST:
                    break
            frames.append(rgb)
    simulator.close()
    return np.stack(frames)
