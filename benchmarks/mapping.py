"""360-BEV integration speed: does fusing one panorama cost the same in a small and a large map?

    python benchmarks/mapping.py [--quick]

The scene is an open-plan office: a 21 x 20 m hall with seeded furniture and, in one corner,
a 3.4 x 3.0 m meeting room with a door. The timed panorama (512 x 1024) is taken in the
meeting room. The small map holds what that panorama sees (~10 m2 of room plus the door's
view); the large map holds panoramas taken across the whole hall as well (~400 m2). Panoramas
are rendered beforehand, so only ``BEVMap.integrate`` is timed, on the same panorama in both
maps (its cells are already explored in both, so repeats leave each map's explored area as is).

Last line: one JSON object with integrate_ms_small, integrate_ms_large, growth_ratio
(= large / small), panoramas_per_s (= 1000 / the slower of the two) and context keys:
explored areas and grid sizes of both maps, integration times while the large map was built
(median and worst call, the worst being one that grew the grid), and the render time of one
panorama.
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
from _common import benchmark_args

from embodia.perception.bev import BEVMap
from embodia.sim import EmbeddedSimulator, Pose
from embodia.sim.procedural import box_mesh
from embodia.sim.protocol import Panorama
from embodia.sim.scene import CATEGORIES, Scene, concatenate

HALL_W, HALL_D, HEIGHT, WALL = 21.0, 20.0, 2.7, 0.2
ROOM_W, ROOM_D, DOOR = 3.4, 3.0, (1.2, 2.1)  # meeting room in the hall's (0, 0) corner
PANORAMA = (512, 1024)
POSE_SPACING = 3.0
WARMUP_ROUNDS = 5
# (category, height, width, depth) of the furniture scattered over the hall.
FURNITURE = [
    ("table", 0.75, 1.6, 0.9),
    ("sofa", 0.85, 2.0, 0.9),
    ("cabinet", 1.2, 0.8, 0.5),
    ("chair", 0.9, 0.5, 0.5),
    ("shelf", 2.0, 1.2, 0.4),
    ("counter", 0.95, 2.4, 0.6),
]

Box = tuple[tuple[float, float, float], tuple[float, float, float], str]


def office_scene(seed: int = 0) -> Scene:
    """The hall, its meeting room and seeded furniture as one labelled mesh."""
    t = WALL
    boxes: list[Box] = [
        ((-t, -t, -t), (HALL_W + t, 0.0, HALL_D + t), "floor"),
        ((-t, HEIGHT, -t), (HALL_W + t, HEIGHT + t, HALL_D + t), "ceiling"),
        ((-t, 0.0, -t), (0.0, HEIGHT, HALL_D + t), "wall"),
        ((HALL_W, 0.0, -t), (HALL_W + t, HEIGHT, HALL_D + t), "wall"),
        ((0.0, 0.0, -t), (HALL_W, HEIGHT, 0.0), "wall"),
        ((0.0, 0.0, HALL_D), (HALL_W, HEIGHT, HALL_D + t), "wall"),
        # Meeting room: a wall along x = ROOM_W and one along z = ROOM_D with a door in it.
        ((ROOM_W, 0.0, 0.0), (ROOM_W + t, HEIGHT, ROOM_D + t), "wall"),
        ((0.0, 0.0, ROOM_D), (DOOR[0], HEIGHT, ROOM_D + t), "wall"),
        ((DOOR[1], 0.0, ROOM_D), (ROOM_W, HEIGHT, ROOM_D + t), "wall"),
        ((1.2, 0.0, 0.0), (2.2, 0.75, 0.6), "table"),
    ]
    rng = np.random.default_rng(seed)
    # One piece per 3.5 m tile, jittered, clear of the meeting room and of the pose grid's
    # rows and columns so that every pose stands in the open.
    for x0 in np.arange(1.9, HALL_W - 2.0, 3.5):
        for z0 in np.arange(1.9, HALL_D - 2.0, 3.5):
            if x0 < ROOM_W + 1.5 and z0 < ROOM_D + 1.5:
                continue
            category, height, width, depth = FURNITURE[int(rng.integers(len(FURNITURE)))]
            if rng.random() < 0.5:
                width, depth = depth, width
            x, z = x0 + rng.uniform(-0.3, 0.3), z0 + rng.uniform(-0.3, 0.3)
            boxes.append(((x, 0.0, z), (x + width, height, z + depth), category))
    ids = {name: i for i, name in enumerate(CATEGORIES)}
    parts = [(*box_mesh(*lo, *hi), ids[category], i + 1) for i, (lo, hi, category) in enumerate(boxes)]
    return concatenate(parts, name="office", source="benchmarks/mapping.py:office_scene(seed=0)")


def panorama_at(sim: EmbeddedSimulator, scene: Scene, x: float, z: float) -> tuple[Panorama, float] | None:
    """A panorama from the navigable point nearest (x, z) and its render time in seconds, or
    None where no navigable point lies within 0.5 m."""
    snapped = sim.snap_point([x, 0.0, z])
    if not np.all(np.isfinite(snapped)) or np.hypot(snapped[0] - x, snapped[2] - z) > 0.5:
        return None
    sim.reset(scene, Pose.from_array(snapped))
    start = time.perf_counter()
    panorama = sim.panorama(*PANORAMA)
    return panorama, time.perf_counter() - start


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def main() -> None:
    args = benchmark_args(__doc__, "fewer repeats (under a minute)")
    repeats = 9 if args.quick else 41

    scene = office_scene()
    sim = EmbeddedSimulator()
    sim.reset(scene, Pose((ROOM_W / 2, 0.0, ROOM_D / 2)))
    timed = sim.panorama(*PANORAMA)
    render_times: list[float] = []
    tour: list[Panorama] = []
    for x in np.arange(1.5, HALL_W, POSE_SPACING):
        for z in np.arange(1.5, HALL_D, POSE_SPACING):
            rendered = panorama_at(sim, scene, float(x), float(z))
            if rendered is not None:
                tour.append(rendered[0])
                render_times.append(rendered[1])

    # Compile (or load from numba's cache) the integration kernel before anything is timed.
    BEVMap(sim.categories).integrate(timed)

    small = BEVMap(sim.categories)
    small.integrate(timed)
    large = BEVMap(sim.categories)
    tour_times = []  # includes the calls that grow the grid (a copy of every layer)
    for panorama in tour:
        start = time.perf_counter()
        large.integrate(panorama)
        tour_times.append(time.perf_counter() - start)
    large.integrate(timed)

    times: dict[str, list[float]] = {"small": [], "large": []}
    maps = {"small": small, "large": large}
    explored_before = {name: bev.explored_area_m2 for name, bev in maps.items()}
    for round_ in range(WARMUP_ROUNDS + repeats):
        # Interleaved, so drift in machine load hits both maps alike; the first rounds are
        # dropped (Open3D's worker threads still spin for a while after the last render).
        for name, bev in maps.items():
            start = time.perf_counter()
            bev.integrate(timed)
            if round_ >= WARMUP_ROUNDS:
                times[name].append(time.perf_counter() - start)
    for name, bev in maps.items():
        if bev.explored_area_m2 != explored_before[name]:
            raise RuntimeError(f"re-integrating the timed panorama changed the {name} map's explored area")

    small_ms, large_ms = median_ms(times["small"]), median_ms(times["large"])
    result = {
        "integrate_ms_small": round(small_ms, 2),
        "integrate_ms_large": round(large_ms, 2),
        "growth_ratio": round(large_ms / small_ms, 3),
        "panoramas_per_s": round(1000.0 / max(small_ms, large_ms), 1),
        "explored_m2_small": round(small.explored_area_m2, 1),
        "explored_m2_large": round(large.explored_area_m2, 1),
        "grid_cells_small": small.shape[0] * small.shape[1],
        "grid_cells_large": large.shape[0] * large.shape[1],
        "panoramas_in_large_map": len(tour) + 1,
        "panorama": f"{PANORAMA[0]}x{PANORAMA[1]}",
        "repeats": repeats,
        "tour_integrate_ms_median": round(median_ms(tour_times), 2),
        "tour_integrate_ms_max": round(max(tour_times) * 1000.0, 2),
        "render_ms": round(median_ms(render_times), 2),
        "scene": scene.source,
        "triangles": int(len(scene.faces)),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
