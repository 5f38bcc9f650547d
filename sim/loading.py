"""Loading a scene from a spec: a mesh file (``.glb .gltf .ply .obj``, with an optional
habitat stage config and semantic sidecar beside it) or ``procedural:seed=N[,rooms=K]``.

Kept apart from :mod:`embodia.sim.scene` because it dispatches to
:mod:`embodia.sim.procedural`, which builds on :class:`~embodia.sim.scene.Scene`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from embodia.errors import SceneError, read_text_file
from embodia.sim.geometry import Z_UP_TO_Y_UP, rotation_from_up_front
from embodia.sim.procedural import generate_house, parse_procedural_spec
from embodia.sim.scene import (
    CATEGORIES,
    MESH_EXTENSIONS,
    PROCEDURAL_PREFIX,
    Scene,
    category_from_name,
    semantic_sidecar_path,
    stage_config_path,
)

logger = logging.getLogger(__name__)

UpAxis = Literal["auto", "y", "z"]
UP_AXES: tuple[UpAxis, ...] = ("auto", "y", "z")


def load_scene(spec: str | Path | Scene, up: UpAxis = "auto") -> Scene:
    """Load a scene from a spec (file path or ``procedural:seed=N[,rooms=K]``)."""
    if isinstance(spec, Scene):
        return spec
    text = str(spec)
    if text.startswith(PROCEDURAL_PREFIX):
        params = parse_procedural_spec(text)
        if "floors" in params:
            from embodia.sim.houses import generate_house_v2

            return generate_house_v2(**params)
        return generate_house(**params)
    return load_mesh_file(Path(text), up=up)


FLOOR_NORMAL_MIN = 0.95
"""A face counts as floor when its unit normal's up component is at least this (about 18 degrees)."""
FLOOR_BIN_M = 0.25
"""Height band (m) whose upward-facing area is one candidate floor."""
UP_UNCERTAIN_RATIO = 0.8
"""The detection is uncertain when the smaller candidate floor is at least this share of the larger."""
_UP_ROTATIONS: dict[str, NDArray[np.float64]] = {"y": np.eye(3), "z": Z_UP_TO_Y_UP}


@dataclass(frozen=True)
class StagePlacement:
    """How a habitat stage config (``NAME.stage_config.json`` beside the mesh) places the mesh
    in embodia's y-up metres, applied in this order, as habitat-sim builds the stage:

    1. ``units_to_meters`` (a number, default 1): the mesh's units to metres;
    2. ``up`` and ``front`` (3-vectors in the mesh's own axes): the rotation that makes them
       +y and -z (only ``up``: habitat-sim's default front for it); absent, the up axis is
       detected (or given by ``--up``, which also overrides these);
    3. ``scale`` (a 3-vector along the world axes x, y up, z; default 1, 1, 1);
    4. ``origin`` (a 3-vector, default 0): where the stage's origin lies in the world.
    """

    rotation: NDArray[np.float64] | None = None
    units_to_meters: float = 1.0
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def apply(self, vertices: NDArray[np.float64], rotation: NDArray[np.float64]) -> NDArray[np.float64]:
        placed: NDArray[np.float64] = (vertices * self.units_to_meters) @ rotation.T * np.asarray(
            self.scale
        ) + np.asarray(self.origin)
        return placed

    @property
    def mirrors(self) -> bool:
        """Whether the scale flips the winding (an odd number of negative factors)."""
        return bool(np.prod(np.sign(self.scale)) < 0)


def _vector(
    stage: dict[str, Any], key: str, default: tuple[float, float, float], config: Path
) -> tuple[float, float, float]:
    value = stage.get(key, default)
    try:
        x, y, z = (float(v) for v in value)
    except (TypeError, ValueError):
        raise SceneError(f"{config.name}: {key!r} must be 3 numbers, got {value!r}") from None
    if not all(np.isfinite([x, y, z])):
        raise SceneError(f"{config.name}: {key!r} must be finite, got {value!r}")
    return x, y, z


def stage_placement(path: Path) -> StagePlacement:
    """What the stage config beside ``path`` says (:class:`StagePlacement`); the identity,
    with no rotation, when there is none."""
    config = stage_config_path(path)
    if not config.is_file():
        return StagePlacement()
    try:
        stage = json.loads(read_text_file(config, SceneError))
    except json.JSONDecodeError as exc:
        raise SceneError(f"{config.name} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(stage, dict):
        raise SceneError(f"{config.name} must hold a JSON object")
    rotation = None
    if "up" in stage:
        front = stage.get("front")
        if front is None:
            # habitat-sim derives front from up when only up is given.
            front = [0, 1, 0] if np.allclose(stage["up"], [0, 0, 1]) else [0, 0, -1]
        try:
            rotation = rotation_from_up_front(stage["up"], front)
        except ValueError as exc:
            raise SceneError(f"{config.name}: {exc}") from None
    units = stage.get("units_to_meters", 1.0)
    if (
        isinstance(units, bool)
        or not isinstance(units, int | float)
        or not (np.isfinite(units) and units > 0)
    ):
        raise SceneError(f"{config.name}: 'units_to_meters' must be a positive number, got {units!r}")
    scale = _vector(stage, "scale", (1.0, 1.0, 1.0), config)
    if 0.0 in scale:
        raise SceneError(f"{config.name}: 'scale' cannot be 0 along an axis, got {list(scale)}")
    return StagePlacement(rotation, float(units), scale, _vector(stage, "origin", (0.0, 0.0, 0.0), config))


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
    placement = stage_placement(path)
    rotation = _UP_ROTATIONS[up] if up != "auto" else placement.rotation
    if rotation is None:
        default: Literal["y", "z"] = "y" if suffix == ".obj" else "z"
        rotation = _UP_ROTATIONS[detect_up_axis(vertices, faces, default, name=path.name)]
    vertices = placement.apply(vertices, rotation)
    if placement.mirrors:
        faces = faces[:, ::-1]
    return Scene(
        vertices=vertices.astype(np.float32),
        faces=faces.astype(np.int32),
        face_category=np.concatenate([p[2] for p in parts]),
        face_instance=np.concatenate([p[3] for p in parts]),
        categories=categories,
        name=path.stem,
        source=str(path),
    )
