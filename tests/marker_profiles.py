"""A model's marker profile known in advance, for VOCAL's recovery test and its benchmark: a
model whose words say more than they mean ("very likely" is right 0.6 of the time)."""

from __future__ import annotations

import numpy as np

TRUE_PROFILE = {
    "almost certain": 0.82,
    "highly likely": 0.7,
    "very likely": 0.6,
    "likely": 0.55,
    "probably": 0.5,
    "about even": 0.4,
    "maybe": 0.35,
    "unlikely": 0.2,
    "highly unlikely": 0.1,
    "almost no chance": 0.05,
}


def answers(profile: dict[str, float], per_marker: int, seed: int) -> tuple[list[str], list[bool]]:
    """``per_marker`` answers carrying each marker, right with the marker's probability."""
    rng = np.random.default_rng(seed)
    markers: list[str] = []
    correct: list[bool] = []
    for marker, p in profile.items():
        markers += [marker] * per_marker
        correct += [bool(x) for x in rng.random(per_marker) < p]
    return markers, correct
