"""Scenes: a labelled triangle mesh in the Habitat world frame, and how to load one.

A scene spec is either a mesh file (``.glb .gltf .ply .obj``) or ``procedural:seed=N[,rooms=K]``.
Files are rotated into the y-up Habitat frame on load. ``up="y"`` / ``up="z"`` says the file's
up axis outright. With ``up="auto"`` a ``<stem>.stage_config.json`` beside the mesh with
``"up"`` / ``"front"`` decides, as in habitat-sim; without one the up axis is detected (see
:func:`detect_up_axis`): Habitat scans (MP3D/HM3D/Gibson/Replica) are z-up, glTF's own
convention (what Blender exports) is y-up, and the orientation with the larger floor wins.
When the two are too close to call, the format's habitat default is kept (z-up for
``.glb/.gltf/.ply``, y-up for ``.obj``) and a warning names it and the ``up`` override.

Semantic labels come from node, geometry or material names matched against
:data:`CATEGORIES` (``"bed_003"`` -> bed, ``"couch"`` -> sofa), from PLY ``object_id`` face
properties, and from a sidecar ``<stem>.semantic.json``::

    {"node_categories": {"Cube.002": "table"}, "object_categories": {"12": "chair"}}
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.errors import SceneError

MESH_EXTENSIONS = (".glb", ".gltf", ".ply", ".obj")
PROCEDURAL_PREFIX = "procedural:"

CATEGORIES: tuple[str, ...] = (
    "void",
    "wall",
    "floor",
    "ceiling",
    "door",
    "bed",
    "sofa",
    "chair",
    "table",
    "cabinet",
    "toilet",
    "sink",
    "tv",
    "plant",
    "bathtub",
    "shelf",
    "counter",
    "desk",
    "refrigerator",
    "object",
)
"""Built-in category vocabulary; semantic id = index. Scenes may append more."""

_SYNONYMS: dict[str, str] = {
    "couch": "sofa",
    "armchair": "chair",
    "stool": "chair",
    "seat": "chair",
    "tv_monitor": "tv",
    "television": "tv",
    "monitor": "tv",
    "tub": "bathtub",
    "bath": "bathtub",
    "potted_plant": "plant",
    "flower": "plant",
    "dresser": "cabinet",
    "wardrobe": "cabinet",
    "drawer": "cabinet",
    "nightstand": "cabinet",
    "cupboard": "cabinet",
    "bookshelf": "shelf",
    "bookcase": "shelf",
    "shelving": "shelf",
    "countertop": "counter",
    "kitchen_counter": "counter",
    "fridge": "refrigerator",
    "washbasin": "sink",
    "basin": "sink",
    "doorway": "door",
    "floors": "floor",
    "ground": "floor",
    "walls": "wall",
}

# Albedo per built-in category; other names get a colour derived from their hash.
_ALBEDO: dict[str, tuple[int, int, int]] = {
    "void": (0, 0, 0),
    "wall": (214, 208, 196),
    "floor": (150, 111, 76),
    "ceiling": (240, 240, 236),
    "door": (120, 84, 52),
    "bed": (70, 110, 180),
    "sofa": (180, 70, 60),
    "chair": (200, 150, 60),
    "table": (110, 70, 40),
    "cabinet": (160, 130, 100),
    "toilet": (235, 235, 240),
    "sink": (190, 200, 210),
    "tv": (30, 30, 35),
    "plant": (60, 150, 60),
    "bathtub": (220, 230, 235),
    "shelf": (130, 95, 60),
    "counter": (120, 120, 125),
    "desk": (90, 60, 40),
    "refrigerator": (215, 220, 225),
    "object": (150, 150, 150),
}


def category_from_name(name: str) -> str | None:
    """Map a node / material name to a built-in category, or None when nothing matches."""
    tokens = [t for t in re.split(r"[^a-z]+", name.lower()) if t]
    candidates = ["_".join(tokens[i : i + 2]) for i in range(len(tokens) - 1)] + tokens
    for token in candidates:
        if token in _SYNONYMS:
            return _SYNONYMS[token]
        if token in CATEGORIES and token not in ("void", "object"):
            return token
    return None


def category_albedo(name: str) -> tuple[int, int, int]:
    """RGB albedo used to shade a category."""
    if name in _ALBEDO:
        return _ALBEDO[name]
    digest = hashlib.sha256(name.encode()).digest()
    return (64 + digest[0] % 160, 64 + digest[1] % 160, 64 + digest[2] % 160)


@dataclass(frozen=True)
class Region:
    """A room of a scene, where the scene knows its rooms (procedural v2 houses): its kind
    (``living``, ``kitchen``, ``bedroom``, ...), the height of its floor and its outline."""

    kind: str
    floor_height: float
    outline: tuple[tuple[float, float], ...]
    """The room's polygon in plan, (x, z) world points, wall centre lines included."""

    def contains(self, points: NDArray[np.floating]) -> NDArray[np.bool_]:
        """Whether each (..., 3) world point lies in the room's outline (height ignored)."""
        from matplotlib.path import Path as PolygonPath

        p = np.asarray(points, dtype=np.float64)
        flat = p.reshape(-1, 3)[:, [0, 2]]
        inside = PolygonPath(np.asarray(self.outline)).contains_points(flat)
        result: NDArray[np.bool_] = inside.reshape(p.shape[:-1])
        return result


@dataclass(eq=False)
class Scene:
    """A triangle mesh in the Habitat frame (y-up, metres) with per-face labels."""

    vertices: NDArray[np.float32]
    """(N, 3) world coordinates."""
    faces: NDArray[np.int32]
    """(M, 3) vertex indices."""
    face_category: NDArray[np.int32]
    """(M,) category id per face, indexing :attr:`categories`."""
    face_instance: NDArray[np.int32]
    """(M,) object instance id per face (0 = none)."""
    categories: list[str] = field(default_factory=lambda: list(CATEGORIES))
    name: str = "scene"
    source: str = ""
    """The spec the scene was loaded from (a path or ``procedural:...``)."""
    regions: list[Region] = field(default_factory=list)
    """Its rooms, where it knows them (procedural v2 houses); empty otherwise."""

    def __post_init__(self) -> None:
        self.vertices = np.ascontiguousarray(self.vertices, dtype=np.float32)
        self.faces = np.ascontiguousarray(self.faces, dtype=np.int32)
        self.face_category = np.ascontiguousarray(self.face_category, dtype=np.int32)
        self.face_instance = np.ascontiguousarray(self.face_instance, dtype=np.int32)
        m = len(self.faces)
        if self.vertices.ndim != 2 or self.vertices.shape[1] != 3:
            raise SceneError(f"scene {self.name!r}: vertices must have shape (N, 3)")
        if self.faces.ndim != 2 or self.faces.shape[1] != 3 or m == 0:
            raise SceneError(f"scene {self.name!r} has no triangles")
        if self.face_category.shape != (m,) or self.face_instance.shape != (m,):
            raise SceneError(f"scene {self.name!r}: one label per face is required")
        if self.faces.min() < 0 or self.faces.max() >= len(self.vertices):
            raise SceneError(f"scene {self.name!r}: face indices out of range")
        if not np.all(np.isfinite(self.vertices)):
            raise SceneError(f"scene {self.name!r}: vertices must be finite")
        if self.face_category.min() < 0 or self.face_category.max() >= len(self.categories):
            raise SceneError(f"scene {self.name!r}: face category ids out of range")

    @property
    def bounds(self) -> NDArray[np.float32]:
        """(2, 3) axis-aligned min / max corners."""
        return np.stack([self.vertices.min(axis=0), self.vertices.max(axis=0)])

    @cached_property
    def face_normals(self) -> NDArray[np.float32]:
        """Unit normals from the winding (zero for degenerate faces)."""
        tri = self.vertices[self.faces].astype(np.float64)
        n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        norm = np.linalg.norm(n, axis=1, keepdims=True)
        return (n / np.maximum(norm, 1e-12)).astype(np.float32)

    @cached_property
    def face_areas(self) -> NDArray[np.float64]:
        tri = self.vertices[self.faces].astype(np.float64)
        return 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)

    def category_id(self, name: str) -> int:
        try:
            return self.categories.index(name)
        except ValueError:
            raise SceneError(f"scene {self.name!r} has no category {name!r}") from None

    def present_categories(self) -> dict[str, float]:
        """Surface area (m2) of each category that appears in the mesh."""
        areas = np.bincount(self.face_category, weights=self.face_areas, minlength=len(self.categories))
        return {self.categories[i]: float(a) for i, a in enumerate(areas) if a > 0}

    def mesh_hash(self) -> str:
        """SHA-256 over geometry and labels: equal hashes mean identical scenes."""
        h = hashlib.sha256()
        for array in (self.vertices, self.faces, self.face_category, self.face_instance):
            h.update(np.ascontiguousarray(array).tobytes())
        h.update("\n".join(self.categories).encode())
        return h.hexdigest()

    # ------------------------------------------------------------------ export

    def to_trimesh_scene(self) -> Any:
        """A trimesh scene graph with one node per (instance, category), named ``cat_NNN``."""
        import trimesh
        from trimesh.visual.material import PBRMaterial

        graph = trimesh.Scene()
        keys = np.stack([self.face_instance, self.face_category], axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        for index, (instance, category) in enumerate(unique):
            face_ids = np.flatnonzero(inverse.reshape(-1) == index)
            used, remapped = np.unique(self.faces[face_ids], return_inverse=True)
            name = self.categories[int(category)]
            albedo = category_albedo(name)
            mesh = trimesh.Trimesh(
                vertices=self.vertices[used],
                faces=remapped.reshape(-1, 3),
                process=False,
            )
            mesh.visual = trimesh.visual.TextureVisuals(
                material=PBRMaterial(name=name, baseColorFactor=[*albedo, 255], metallicFactor=0.0)
            )
            node = f"{name}_{int(instance):03d}"
            graph.add_geometry(mesh, node_name=node, geom_name=node)
        return graph

    def to_glb(self) -> bytes:
        """Binary glTF of :meth:`to_trimesh_scene` (deterministic for a given scene)."""
        data: bytes = self.to_trimesh_scene().export(file_type="glb")
        return data

    def export(self, path: str | Path) -> Path:
        """Write the scene as ``.glb`` (y-up, labelled nodes) plus a stage config beside it."""
        path = Path(path)
        if path.suffix.lower() != ".glb":
            raise SceneError(f"can only export .glb, got {path.name}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.to_glb())
        stage = {"render_asset": path.name, "up": [0, 1, 0], "front": [0, 0, -1]}
        stage_config_path(path).write_text(json.dumps(stage, indent=2) + "\n")
        return path


def stage_config_path(mesh_path: Path) -> Path:
    return mesh_path.with_name(mesh_path.name.rsplit(".", 1)[0] + ".stage_config.json")


def semantic_sidecar_path(mesh_path: Path) -> Path:
    return mesh_path.with_name(mesh_path.name.rsplit(".", 1)[0] + ".semantic.json")


def concatenate(
    parts: Sequence[tuple[NDArray[np.floating], NDArray[np.integer], int, int]],
    categories: Sequence[str] = CATEGORIES,
    name: str = "scene",
    source: str = "",
    regions: Sequence[Region] = (),
) -> Scene:
    """Build a scene from ``(vertices, faces, category_id, instance_id)`` parts."""
    vertices, faces, cats, insts = [], [], [], []
    offset = 0
    for v, f, category, instance in parts:
        vertices.append(np.asarray(v, dtype=np.float64))
        faces.append(np.asarray(f, dtype=np.int64) + offset)
        cats.append(np.full(len(f), category, dtype=np.int32))
        insts.append(np.full(len(f), instance, dtype=np.int32))
        offset += len(v)
    if not faces:
        raise SceneError(f"scene {name!r} has no triangles")
    return Scene(
        vertices=np.concatenate(vertices).astype(np.float32),
        faces=np.concatenate(faces).astype(np.int32),
        face_category=np.concatenate(cats),
        face_instance=np.concatenate(insts),
        categories=list(categories),
        name=name,
        source=source,
        regions=list(regions),
    )
