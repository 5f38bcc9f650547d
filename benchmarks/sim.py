"""Embedded simulator speed: panorama vs bare cast_rays, pinhole vs pybullet TinyRenderer, and
what building a large house and its navigation layers costs.

    python benchmarks/sim.py [--quick]

Last line: one JSON object with panorama_ms, cast_rays_ms, overhead_ratio, panoramas_per_s,
pinhole_ms, pybullet_ms, pybullet_ratio (= pybullet_ms / pinhole_ms); panoramas_per_s_v2 (the
same panorama in a one-floor v2 house, seed 1000); and for 20-room two-floor v2 houses
(``procedural:seed=S,floors=2,rooms=20``, seeds 0..N-1, medians): house_build_s (the mesh),
nav_grid_s (the layered navigation grid) and nav_build_s, the two together (issue #22's
target: under 2 s).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import benchmark_args

from embodia.sim import EmbeddedSimulator


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (BVH, caches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def pybullet_frame_ms(sim: EmbeddedSimulator, size: int, repeats: int) -> float:
    import pybullet as p
    import trimesh

    scene = sim.scene
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "scene.obj"
        trimesh.Trimesh(scene.vertices, scene.faces, process=False).export(obj)
        client = p.connect(p.DIRECT)
        try:
            shape = p.createVisualShape(p.GEOM_MESH, fileName=str(obj), physicsClientId=client)
            p.createMultiBody(baseVisualShapeIndex=shape, physicsClientId=client)
            eye = sim.pose.sensor_position(sim.config.sensor_height)
            target = eye + np.array([0.0, 0.0, -1.0])
            view = p.computeViewMatrix(eye.tolist(), target.tolist(), [0, 1, 0])
            proj = p.computeProjectionMatrixFOV(90.0, 1.0, 0.05, 50.0)

            def frame() -> object:
                return p.getCameraImage(
                    size, size, view, proj, renderer=p.ER_TINY_RENDERER, physicsClientId=client
                )

            return median_ms(frame, repeats)
        finally:
            p.disconnect(client)


def house_and_nav_s(seed: int) -> tuple[float, float]:
    """Seconds to generate a 20-room two-floor house, and to build its navigation grid."""
    from embodia.sim.houses import generate_house_v2
    from embodia.sim.navigation import NavGrid
    from embodia.sim.protocol import SimConfig
    from embodia.sim.raycast import Raycaster

    start = time.perf_counter()
    scene = generate_house_v2(seed, floors=2, rooms=20)
    built = time.perf_counter()
    NavGrid.build(Raycaster(scene), SimConfig())
    return built - start, time.perf_counter() - built


def main() -> None:
    args = benchmark_args(__doc__, "fewer repeats (under a minute)")
    repeats = 5 if args.quick else 30
    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=0,rooms=5")
    h, w = 512, 1024
    pano_ms = median_ms(lambda: sim.panorama(h, w), repeats)
    rays = sim.renderer.equirect_rays(sim.pose.sensor_position(1.5), sim.pose.yaw, h, w).copy()
    cast_ms = median_ms(lambda: sim.renderer.raycaster.cast_raw(rays), repeats)
    pin_ms = median_ms(lambda: sim.pinhole(256, 256, 90.0), repeats)
    bullet_ms = pybullet_frame_ms(sim, 256, repeats)
    large = EmbeddedSimulator()
    large.reset("procedural:seed=1000,floors=1")
    pano_v2_ms = median_ms(lambda: large.panorama(h, w), repeats)
    house_and_nav_s(0)  # warm: imports, numba
    builds = [house_and_nav_s(seed) for seed in range(3 if args.quick else 10)]
    result = {
        "scene": sim.scene.source,
        "triangles": int(len(sim.scene.faces)),
        "panorama_ms": round(pano_ms, 2),
        "cast_rays_ms": round(cast_ms, 2),
        "overhead_ratio": round(pano_ms / cast_ms, 3),
        "panoramas_per_s": round(1000.0 / pano_ms, 1),
        "pinhole_ms": round(pin_ms, 2),
        "pybullet_ms": round(bullet_ms, 2),
        "pybullet_ratio": round(bullet_ms / pin_ms, 2),
        "panoramas_per_s_v2": round(1000.0 / pano_v2_ms, 1),
        "houses": len(builds),
        "house_build_s": round(statistics.median(b[0] for b in builds), 3),
        "nav_grid_s": round(statistics.median(b[1] for b in builds), 3),
        "nav_build_s": round(statistics.median(b[0] + b[1] for b in builds), 3),
        "nav_build_s_worst": round(max(b[0] + b[1] for b in builds), 3),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
