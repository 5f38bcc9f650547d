"""Two-modality image pairs for fusion, made here (nothing downloaded).

Three kinds, each a pair of 0-255 grayscale float32 images of one size:

- ``ir_vis`` (infrared-visible style): the visible image is one of scikit-image's bundled
  photographs (a random crop), darkened under a "night" shadow; the infrared image is that
  scene blurred and intensity-remapped (a loose thermal correlate, sometimes inverted) plus
  hot Gaussian targets, some of them inside the shadow where the visible image barely shows
  anything. Training and held-out pairs use different photographs (:data:`TRAIN_PHOTOS`,
  :data:`HELD_OUT_PHOTOS`).
- ``medical`` (MRI/CT style): the Shepp-Logan phantom, rotated and cropped at random; A
  remaps its tissue intensities (soft tissue contrast, a dim skull, lesions only A shows), B
  keeps the bone bright, the soft tissue faint and adds the phantom's edges. Both splits
  use the one phantom; held-out pairs differ in their random draws.
- ``sim_depth`` (RGB + depth from the simulator): a pinhole view rendered by the embedded
  simulator in a procedural house at a random navigable point and heading; A is the RGB
  image's luminance, B its inverse depth (near is bright). Training and held-out pairs come
  from different houses (:data:`HELD_OUT_SCENE_SEED` onwards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np

from embodia.perception.fusion.errors import FusionError

PairKind = Literal["ir_vis", "medical", "sim_depth"]
PAIR_KINDS: tuple[PairKind, ...] = ("ir_vis", "medical", "sim_depth")
Split = Literal["train", "test"]

TRAIN_PHOTOS = ("astronaut", "coffee", "chelsea", "coins", "brick", "grass", "gravel", "cell", "clock")
"""scikit-image photographs the training infrared-visible pairs are made from."""
HELD_OUT_PHOTOS = ("camera", "rocket", "moon")
"""Photographs only held-out pairs use."""
HELD_OUT_SCENE_SEED = 1000
"""Procedural houses from this seed on are held out; training uses seeds below it."""
MIN_PAIR_SIDE = 32


@dataclass(frozen=True)
class FusionPair:
    """Two registered images of one scene (0-255 float32, one size) and where they came from."""

    a: np.ndarray
    b: np.ndarray
    kind: PairKind
    source: str
    """What the pair was made from (a photograph's name, the phantom, a house and pose)."""


# --------------------------------------------------------------------------- helpers


@cache
def _photo(name: str) -> np.ndarray:
    """A bundled scikit-image photograph as grayscale in [0, 1]."""
    from skimage import data
    from skimage.color import rgb2gray

    image = np.asarray(getattr(data, name)())
    if image.ndim == 3:
        image = rgb2gray(image[..., :3])
    elif image.dtype != np.float64:
        image = image / 255.0
    return np.asarray(image, dtype=np.float64)


def _random_crop(rng: np.random.Generator, image: np.ndarray, size: int, smallest: float = 0.5) -> np.ndarray:
    """A random square crop of ``image`` (``smallest`` to all of its shorter side), resized to
    ``size`` x ``size``."""
    from skimage.transform import resize

    height, width = image.shape
    side = int(rng.uniform(smallest, 1.0) * min(height, width))
    top = int(rng.integers(0, height - side + 1))
    left = int(rng.integers(0, width - side + 1))
    crop = image[top : top + side, left : left + side]
    return np.asarray(resize(crop, (size, size), anti_aliasing=True))


def _gaussian_blobs(
    rng: np.random.Generator, size: int, count: int, sigma: tuple[float, float]
) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """``count`` elliptical Gaussian bumps of peak 1 on a ``size`` square, and their centres."""
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float64)
    total = np.zeros((size, size))
    centres = []
    for _ in range(count):
        y, x = rng.uniform(0.1, 0.9, size=2) * size
        sy, sx = rng.uniform(*sigma, size=2) * size
        total = np.maximum(total, np.exp(-(((rows - y) / sy) ** 2 + ((cols - x) / sx) ** 2) / 2))
        centres.append((y, x))
    return total, centres


def _to_255(image: np.ndarray, rng: np.random.Generator, noise: float = 0.01) -> np.ndarray:
    noisy = image + rng.normal(0.0, noise, size=image.shape)
    return np.asarray(np.clip(noisy, 0.0, 1.0) * 255.0, dtype=np.float32)


# --------------------------------------------------------------------------- the kinds


def ir_vis_pair(rng: np.random.Generator, size: int, photo: str) -> FusionPair:
    """An infrared-visible-style pair made from the photograph ``photo`` (module docstring)."""
    from scipy.ndimage import gaussian_filter

    scene = _random_crop(rng, _photo(photo), size)
    targets, centres = _gaussian_blobs(rng, size, int(rng.integers(2, 6)), (0.03, 0.09))
    shadow_centre = centres[int(rng.integers(len(centres)))]
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float64)
    reach = rng.uniform(0.15, 0.3) * size
    shadow = np.exp(-((rows - shadow_centre[0]) ** 2 + (cols - shadow_centre[1]) ** 2) / (2 * reach**2))
    visible = scene * (1.0 - 0.8 * shadow)
    thermal = gaussian_filter(scene, rng.uniform(1.5, 3.5))
    if rng.random() < 0.3:
        thermal = 1.0 - thermal
    thermal = rng.uniform(0.1, 0.25) + rng.uniform(0.2, 0.4) * thermal
    infrared = np.maximum(thermal, rng.uniform(0.7, 0.95) * targets)
    return FusionPair(_to_255(infrared, rng), _to_255(visible, rng), "ir_vis", photo)


def medical_pair(rng: np.random.Generator, size: int) -> FusionPair:
    """An MRI/CT-style pair from the Shepp-Logan phantom (module docstring)."""
    from scipy.ndimage import gaussian_filter, sobel
    from skimage.data import shepp_logan_phantom
    from skimage.transform import rotate

    phantom = rotate(shepp_logan_phantom(), rng.uniform(0, 360), order=0, mode="constant")
    phantom = _random_crop(rng, phantom, size, smallest=0.75)
    levels = [0.0, 0.05, 0.15, 0.25, 0.35, 0.7, 1.0]
    mapped = [
        0.0,
        rng.uniform(0.3, 0.45),
        rng.uniform(0.45, 0.6),
        rng.uniform(0.6, 0.8),
        rng.uniform(0.8, 1.0),
        0.5,
        rng.uniform(0.2, 0.4),
    ]
    mri = np.interp(phantom, levels, mapped)
    inside = phantom > 0.15
    lesions, _ = _gaussian_blobs(rng, size, int(rng.integers(1, 4)), (0.02, 0.05))
    mri = np.clip(mri + rng.choice([-0.3, 0.3]) * lesions * inside, 0.0, 1.0)
    mri = gaussian_filter(mri, 0.7)
    edges = np.hypot(sobel(phantom, axis=0), sobel(phantom, axis=1))
    edges = edges / max(float(edges.max()), 1e-9)
    bone = phantom > 0.7
    ct = np.clip(np.where(bone, 1.0, 0.25 * phantom) + 0.5 * edges * ~bone, 0.0, 1.0)
    return FusionPair(_to_255(mri, rng, 0.005), _to_255(ct, rng, 0.005), "medical", "shepp_logan_phantom")


def sim_depth_pairs(
    scene_seeds: list[int], per_scene: int, size: int, rng: np.random.Generator
) -> list[FusionPair]:
    """``per_scene`` RGB-luminance + inverse-depth pairs from each procedural house of
    ``scene_seeds``: pinhole views (90 degrees) at random navigable points and headings."""
    from embodia.sim import Pose
    from embodia.sim.backends import make_simulator

    simulator = make_simulator("embedded")
    pairs = []
    try:
        for scene_seed in scene_seeds:
            scene = f"procedural:seed={scene_seed}"
            simulator.reset(scene)
            floor = simulator.topdown(0.1)
            rows, cols = np.nonzero(floor.navigable)
            for _ in range(per_scene):
                pick = int(rng.integers(rows.size))
                point = floor.from_grid(rows[pick], cols[pick])
                pose = Pose.from_array(point, float(rng.uniform(-np.pi, np.pi)))
                simulator.reset(scene, pose)
                frame = simulator.pinhole(size, size, 90.0)
                rgb = frame["rgb"].astype(np.float64) / 255.0
                luminance = rgb @ np.array([0.299, 0.587, 0.114])
                depth = frame["depth"].astype(np.float64)
                hit = depth > 0
                inverse = np.where(hit, 1.0 / np.maximum(depth, 1e-3), 0.0)
                if hit.any():
                    near, far = float(inverse[hit].max()), float(inverse[hit].min())
                    inverse = np.where(hit, (inverse - far) / max(near - far, 1e-9), 0.0)
                source = f"procedural:seed={scene_seed} at {pose.position[0]:.2f},{pose.position[2]:.2f}"
                pairs.append(
                    FusionPair(
                        np.asarray(luminance * 255.0, dtype=np.float32),
                        np.asarray(inverse * 255.0, dtype=np.float32),
                        "sim_depth",
                        source,
                    )
                )
    finally:
        simulator.close()
    return pairs


# --------------------------------------------------------------------------- sets


def fusion_pairs(
    kind: str, count: int, size: int, *, split: Split = "train", seed: int = 0
) -> list[FusionPair]:
    """``count`` pairs of ``kind`` at ``size`` x ``size`` pixels from the ``split`` (training
    or held-out sources, module docstring), drawn from ``seed``: the same arguments give the
    same pairs."""
    if kind not in PAIR_KINDS:
        raise FusionError(f"unknown pair kind {kind!r}: expected one of {', '.join(PAIR_KINDS)}")
    if split not in ("train", "test"):
        raise FusionError(f"split must be train or test, got {split!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise FusionError(f"count must be a whole number >= 1, got {count!r}")
    if isinstance(size, bool) or not isinstance(size, int) or not MIN_PAIR_SIDE <= size <= 1024:
        raise FusionError(f"size must be a whole number in {MIN_PAIR_SIDE}..1024, got {size!r}")
    rng = np.random.default_rng([seed, PAIR_KINDS.index(kind), 0 if split == "train" else 1])
    if kind == "sim_depth":
        first = 0 if split == "train" else HELD_OUT_SCENE_SEED
        houses = max(1, min(count, 4))
        per_house = -(-count // houses)
        seeds = [first + seed * 17 + house for house in range(houses)]
        return sim_depth_pairs(seeds, per_house, size, rng)[:count]
    make: Callable[[int], FusionPair]
    if kind == "ir_vis":
        photos = TRAIN_PHOTOS if split == "train" else HELD_OUT_PHOTOS
        make = lambda index: ir_vis_pair(rng, size, photos[index % len(photos)])  # noqa: E731
    else:
        make = lambda index: medical_pair(rng, size)  # noqa: E731
    return [make(index) for index in range(count)]
