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
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from embodia.envs.sim.geometry import Z_UP_TO_Y_UP, rotation_from_up_front
from embodia.errors import SceneError, read_text_file

logger = logging.getLogger(__name__)

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
    )


# ---------------------------------------------------------------------- loading

UpAxis = Literal["auto", "y", "z"]
UP_AXES: tuple[UpAxis, ...] = ("auto", "y", "z")


def load_scene(spec: str | Path | Scene, up: UpAxis = "auto") -> Scene:
    """Load a scene from a spec (file path or ``procedural:seed=N[,rooms=K]``)."""
    if isinstance(spec, Scene):
        return spec
    text = str(spec)
    if text.startswith(PROCEDURAL_PREFIX):
        from embodia.envs.sim.procedural import generate_house, parse_procedural_spec

        return generate_house(**parse_procedural_spec(text))
    return load_mesh_file(Path(text), up=up)


FLOOR_NORMAL_MIN = 0.95
"""A face counts as floor when its unit normal's up component is at least this (about 18 degrees)."""
FLOOR_BIN_M = 0.25
"""Height band (m) whose upward-facing area is one candidate floor."""
UP_UNCERTAIN_RATIO = 0.8
"""The detection is uncertain when the smaller candidate floor is at least this share of the larger."""
_UP_ROTATIONS: dict[str, NDArray[np.float64]] = {"y": np.eye(3), "z": Z_UP_TO_Y_UP}


def _stage_rotation(path: Path) -> NDArray[np.float64] | None:
    """The rotation a stage config beside ``path`` declares, or None when none says ``up``."""
    config = stage_config_path(path)
    if not config.is_file():
        return None
    try:
        stage = json.loads(read_text_file(config, SceneError))
    except json.JSONDecodeError as exc:
        raise SceneError(f"{config.name} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(stage, dict) or "up" not in stage:
        return None
    front = stage.get("front")
    if front is None:
        # habitat-sim derives front from up when only up is given.
        front = [0, 1, 0] if np.allclose(stage["up"], [0, 0, 1]) else [0, 0, -1]
    try:
        return rotation_from_up_front(stage["up"], front)
    except ValueError as exc:
        raise SceneError(f"{config.name}: {exc}") from None


def floor_area(vertices: NDArray[np.floating], faces: NDArray[np.integer]) -> float:
    """Largest upward-facing horizontal area (m2) in one :data:`FLOOR_BIN_M` height band of the
    mesh's lower half, with +y up: the ground floor of a building standing upright."""
    tri = np.asarray(vertices, dtype=np.float64)[np.asarray(faces, dtype=np.int64)]
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    double_area = np.linalg.norm(cross, axis=1)
    upward = cross[:, 1] >= FLOOR_NORMAL_MIN * np.maximum(double_area, 1e-12)
    if not upward.any():
        return 0.0
    heights = tri[upward, :, 1].mean(axis=1)
    bottom, top = float(tri[:, :, 1].min()), float(tri[:, :, 1].max())
    lower = heights <= bottom + 0.5 * (top - bottom) + FLOOR_BIN_M
    if not lower.any():
        return 0.0
    bins = np.floor((heights[lower] - bottom) / FLOOR_BIN_M).astype(np.int64)
    return float(0.5 * np.bincount(bins, weights=double_area[upward][lower]).max())


def detect_up_axis(
    vertices: NDArray[np.floating], faces: NDArray[np.integer], default: Literal["y", "z"], name: str = "mesh"
) -> Literal["y", "z"]:
    """The file up axis (y or z) under which the mesh has the larger floor (:func:`floor_area`);
    ``default`` when the two floors are within :data:`UP_UNCERTAIN_RATIO`, with a warning."""
    areas = {axis: floor_area(vertices @ rotation.T, faces) for axis, rotation in _UP_ROTATIONS.items()}
    best: Literal["y", "z"] = "y" if areas["y"] > areas["z"] else "z"
    other = "z" if best == "y" else "y"
    if areas[best] <= 0.0 or areas[other] >= UP_UNCERTAIN_RATIO * areas[best]:
        logger.warning(
            "%s: cannot tell its up axis (floor %.1f m2 if y-up, %.1f m2 if z-up): taking %s-up; "
            'pass --up y or --up z (or a stage config with "up") to choose',
            name,
            areas["y"],
            areas["z"],
            default,
        )
        return default
    logger.info(
        "%s: detected %s-up (floor %.1f m2 if y-up, %.1f m2 if z-up)", name, best, areas["y"], areas["z"]
    )
    return best


def _read_sidecar(path: Path) -> tuple[dict[str, str], dict[int, str]]:
    sidecar = semantic_sidecar_path(path)
    if not sidecar.is_file():
        return {}, {}
    try:
        data = json.loads(read_text_file(sidecar, SceneError))
        nodes = {str(k): str(v) for k, v in data.get("node_categories", {}).items()}
        objects = {int(k): str(v) for k, v in data.get("object_categories", {}).items()}
    except (json.JSONDecodeError, AttributeError, ValueError) as exc:
        raise SceneError(f"{sidecar.name} is not a valid semantic sidecar: {exc}") from None
    return nodes, objects


def _material_name(mesh: Any) -> str:
    material = getattr(getattr(mesh, "visual", None), "material", None)
    return str(getattr(material, "name", "") or "")


def _ply_object_ids(mesh: Any) -> NDArray[np.int64] | None:
    raw = mesh.metadata.get("_ply_raw") if isinstance(mesh.metadata, dict) else None
    if not raw or "face" not in raw:
        return None
    face_data = raw["face"].get("data")
    names = getattr(getattr(face_data, "dtype", None), "names", None) or ()
    if "object_id" not in names:
        return None
    ids: NDArray[np.int64] = np.asarray(face_data["object_id"], dtype=np.int64).reshape(-1)
    return ids


def load_mesh_file(path: Path, up: UpAxis = "auto") -> Scene:
    """Load a mesh file into a labelled y-up :class:`Scene` (``up``: see the module docstring)."""
    if up not in UP_AXES:
        raise SceneError(f"invalid up axis {up!r}: expected one of {', '.join(UP_AXES)}")
    if not path.exists():
        raise SceneError(f"scene file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in MESH_EXTENSIONS:
        raise SceneError(
            f"unsupported scene format {suffix or path.name!r}: expected one of "
            f"{', '.join(MESH_EXTENSIONS)} or procedural:seed=N"
        )
    import trimesh

    try:
        loaded: Any = trimesh.load(str(path), force="scene", process=False)
    except Exception as exc:  # trimesh raises many types for corrupt files
        raise SceneError(f"cannot read {path.name}: {exc}") from None
    node_labels, object_labels = _read_sidecar(path)
    categories = list(CATEGORIES)

    def category_index(label: str) -> int:
        if label not in categories:
            categories.append(label)
        return categories.index(label)

    parts: list[tuple[NDArray[np.floating], NDArray[np.integer], NDArray[np.int32], NDArray[np.int32]]] = []
    for instance, node in enumerate(loaded.graph.nodes_geometry, start=1):
        transform, geom_name = loaded.graph[node]
        mesh = loaded.geometry.get(geom_name)
        if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
            continue
        vertices = trimesh.transform_points(np.asarray(mesh.vertices, dtype=np.float64), transform)
        faces = np.asarray(mesh.faces, dtype=np.int64)
        if np.linalg.det(transform[:3, :3]) < 0:
            faces = faces[:, ::-1]  # a mirroring node transform flips the winding
        names = [str(node), str(geom_name), _material_name(mesh)]
        label = next((node_labels[n] for n in names if n in node_labels), None)
        if label is None:
            label = next((c for c in map(category_from_name, names) if c), "void")
        face_cat = np.full(len(faces), category_index(label), dtype=np.int32)
        face_inst = np.full(len(faces), instance, dtype=np.int32)
        object_ids = _ply_object_ids(mesh)
        if object_ids is not None and len(object_ids) == len(faces):
            face_inst = object_ids.astype(np.int32)
            for oid in np.unique(object_ids):
                if int(oid) in object_labels:
                    face_cat[object_ids == oid] = category_index(object_labels[int(oid)])
        parts.append((vertices, faces, face_cat, face_inst))
    if not parts:
        raise SceneError(f"{path.name} contains no triangle meshes")
    vertices = np.concatenate([p[0] for p in parts])
    offsets = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    faces = np.concatenate([p[1] + o for p, o in zip(parts, offsets, strict=True)])
    rotation = _UP_ROTATIONS[up] if up != "auto" else _stage_rotation(path)
    if rotation is None:
        default: Literal["y", "z"] = "y" if suffix == ".obj" else "z"
        rotation = _UP_ROTATIONS[detect_up_axis(vertices, faces, default, name=path.name)]
    vertices = vertices @ rotation.T
    return Scene(
        vertices=vertices.astype(np.float32),
        faces=faces.astype(np.int32),
        face_category=np.concatenate([p[2] for p in parts]),
        face_instance=np.concatenate([p[3] for p in parts]),
        categories=categories,
        name=path.stem,
        source=str(path),
    )
