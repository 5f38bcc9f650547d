"""Open3D ray casting over a :class:`~embodia.sim.scene.Scene` (BVH built once).

One scene holds one Open3D geometry, so Open3D's primitive ids index ``scene.faces``
directly; misses come back as ``len(scene.faces)``, which lets callers gather per-face
tables that carry one extra "miss" row at the end.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.sim.scene import Scene

THREADS_VARIABLE = "OMP_NUM_THREADS"


def default_threads() -> int:
    """Threads for Open3D's ray casting: ``OMP_NUM_THREADS`` when it is set to a positive
    number (a Ray worker gets the CPUs it reserves), else 0, which Open3D reads as every core.
    Open3D itself ignores the variable, so without this a process meant to use one core (one
    of several workers on a machine) would cast on all of them."""
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 0


class Raycaster:
    """Casts rays and answers distance queries against one scene's triangles, on ``nthreads``
    threads (None: :func:`default_threads`)."""

    def __init__(self, scene: Scene, nthreads: int | None = None) -> None:
        import open3d as o3d

        self._o3d = o3d
        self.scene = scene
        self.nthreads = default_threads() if nthreads is None else nthreads
        self.miss_id = len(scene.faces)
        self._raycasting = o3d.t.geometry.RaycastingScene()
        self._raycasting.add_triangles(
            o3d.core.Tensor.from_numpy(np.ascontiguousarray(scene.vertices, dtype=np.float32)),
            o3d.core.Tensor.from_numpy(np.ascontiguousarray(scene.faces, dtype=np.uint32)),
        )

    def cast_raw(self, rays: NDArray[np.float32]) -> dict[str, Any]:
        """Open3D's ``cast_rays`` on an (..., 6) float32 array, results as Open3D tensors."""
        tensor = self._o3d.core.Tensor.from_numpy(np.ascontiguousarray(rays, dtype=np.float32))
        result: dict[str, Any] = self._raycasting.cast_rays(tensor, nthreads=self.nthreads)
        return result

    def cast(
        self, rays: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], NDArray[np.uint32], NDArray[np.float32]]:
        """Cast (..., 6) rays; returns ``t_hit`` (inf on miss), face ids (miss = ``miss_id``)
        and hit face normals (as stored, not flipped towards the ray)."""
        result = self.cast_raw(rays)
        t_hit = result["t_hit"].numpy()
        prim = result["primitive_ids"].numpy()  # uint32; misses are 2**32 - 1
        np.minimum(prim, np.uint32(self.miss_id), out=prim)
        normals = result["primitive_normals"].numpy()
        return t_hit, prim, normals

    def cast_from(
        self, origins: NDArray[np.floating], directions: NDArray[np.floating]
    ) -> tuple[NDArray[np.float32], NDArray[np.uint32], NDArray[np.float32]]:
        """Cast rays given origins (broadcast) and directions (..., 3)."""
        d = np.asarray(directions, dtype=np.float32)
        o = np.broadcast_to(np.asarray(origins, dtype=np.float32), d.shape)
        return self.cast(np.concatenate([o, d], axis=-1))

    def all_hits(
        self, origins: NDArray[np.floating], direction: NDArray[np.floating]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
        """Every surface each ray (``origins`` (n, 3), one ``direction``) crosses, not only the
        first: the ray's index, the distance along it and the face, per hit, in no set order."""
        o = np.asarray(origins, dtype=np.float32).reshape(-1, 3)
        d = np.broadcast_to(np.asarray(direction, dtype=np.float32), o.shape)
        tensor = self._o3d.core.Tensor.from_numpy(np.ascontiguousarray(np.concatenate([o, d], axis=-1)))
        result = self._raycasting.list_intersections(tensor, nthreads=self.nthreads)
        return (
            result["ray_ids"].numpy().astype(np.int64),
            result["t_hit"].numpy().astype(np.float64),
            result["primitive_ids"].numpy().astype(np.int64),
        )

    def distance(self, points: NDArray[np.floating]) -> NDArray[np.float32]:
        """Unsigned distance from each point (..., 3) to the nearest triangle."""
        p = np.ascontiguousarray(points, dtype=np.float32)
        tensor = self._o3d.core.Tensor.from_numpy(p.reshape(-1, 3))
        out = self._raycasting.compute_distance(tensor, nthreads=self.nthreads).numpy()
        result: NDArray[np.float32] = out.reshape(p.shape[:-1])
        return result
