"""The habitat_sim backend: :class:`HabitatSimulator` over ``habitat_sim.Simulator``.

It implements :class:`~embodia.sim.protocol.Simulator` with habitat-sim's renderer and
navmesh::

    sim = HabitatSimulator()                  # needs habitat_sim (conda) and a GPU/EGL
    sim.reset("data/scene_datasets/.../scene.glb")
    pano = sim.panorama(512, 1024)            # rgb, radial range, category ids, pose

habitat_sim is imported when a simulator is constructed, never at module import, so the
numpy functions here (equirect depth conversion, semantic lookup, island masks) are usable
and tested without it. Differences from habitat-sim's raw outputs that this module hides:

* habitat's equirectangular depth is per-cube-face planar depth; panoramas here carry radial
  range (:func:`cube_depth_to_radial_range`).
* semantic images hold habitat instance ids; here they hold category ids indexing
  :attr:`HabitatSimulator.categories` (:func:`category_lookup_table`).
* the navmesh is rebuilt from :class:`~embodia.sim.protocol.SimConfig`, and
  ``move_forward`` does not slide along walls, so ``collided`` means "stopped short".
"""

from __future__ import annotations

import importlib
import logging
import math
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import ndimage

from embodia.errors import BackendUnavailableError, EmbodiaError, PoseError, SceneError
from embodia.sim import protocol
from embodia.sim.backend import SimulatorBase, check_action, loaded
from embodia.sim.geometry import equirect_directions, quaternion_to_yaw, yaw_to_quaternion
from embodia.sim.scene import CATEGORIES, PROCEDURAL_PREFIX, Scene, category_from_name

logger = logging.getLogger(__name__)

INSTALL_HINT = "habitat_sim is not installed: conda install habitat-sim headless -c conda-forge -c aihabitat"

# habitat-sim's default far plane (metres); depth at or beyond it means nothing was hit.
_FAR_PLANE = 1000.0
# Category names habitat datasets use for "no label"; they map to our void (id 0).
_VOID_NAMES = frozenset({"", "void", "unknown", "unlabeled", "unlabelled", "none", "background"})
# Points sampled on the largest island to choose a default start (the most open one).
_START_SAMPLES = 64

SensorKey = tuple[Any, ...]


def import_habitat_sim() -> Any:
    """Import ``habitat_sim`` (and the submodules used here) or explain how to install it."""
    try:
        import habitat_sim
        import habitat_sim.agent
        import habitat_sim.nav
    except ImportError as exc:
        raise BackendUnavailableError(INSTALL_HINT) from exc
    return habitat_sim


# --------------------------------------------------------------------------- pure numpy


@lru_cache(maxsize=16)
def _cube_axis_scale(height: int, width: int) -> NDArray[np.float32]:
    directions = equirect_directions(height, width, dtype=np.float64)
    scale = 1.0 / np.max(np.abs(directions), axis=-1)
    scale.setflags(write=False)
    return scale.astype(np.float32)


def cube_depth_to_radial_range(depth: ArrayLike, height: int, width: int) -> NDArray[np.float32]:
    """Convert habitat's equirect depth (cube-face planar depth) to radial range.

    habitat-sim renders an equirectangular image from a cubemap and copies each face's
    planar depth, i.e. the distance along that face's axis. For a unit pixel direction ``d``
    the face axis is the largest component, so ``range = depth / max(|dx|, |dy|, |dz|)``.

    Args:
        depth: (H, W) planar depth in metres, 0 where nothing was hit.
        height: Panorama rows.
        width: Panorama columns.

    Returns:
        (H, W) float32 radial range; 0 stays 0, non-finite or negative values become 0.
    """
    d = np.asarray(depth, dtype=np.float32)
    if d.shape != (height, width):
        raise ValueError(f"depth has shape {d.shape}, expected ({height}, {width})")
    valid = np.isfinite(d) & (d > 0)
    out = np.where(valid, d, np.float32(0.0)) * _cube_axis_scale(height, width)
    return out.astype(np.float32, copy=False)


def canonical_category(name: str | None) -> str:
    """Our category name for a habitat category name (``void`` for unlabelled ones)."""
    text = (name or "").strip()
    if text.lower() in _VOID_NAMES:
        return "void"
    return category_from_name(text) or text.lower()


def category_lookup_table(
    objects: Iterable[tuple[int, str | None]], base: Iterable[str] = CATEGORIES
) -> tuple[NDArray[np.int32], list[str]]:
    """Build the instance-id -> category-id table of a semantic scene.

    Args:
        objects: ``(semantic_id, category_name)`` per semantic object; names go through
            :func:`canonical_category`, unknown ones are appended to the vocabulary.
        base: Starting vocabulary; ``base[0]`` must be ``void``.

    Returns:
        ``(table, categories)`` with ``table[instance_id] = category_id`` (0 where unknown).
    """
    categories = list(base)
    if not categories or categories[0] != "void":
        raise ValueError("a category vocabulary starts with 'void'")
    index = {name: i for i, name in enumerate(categories)}
    pairs: list[tuple[int, int]] = []
    for semantic_id, name in objects:
        if semantic_id < 0:
            continue
        label = canonical_category(name)
        if label not in index:
            index[label] = len(categories)
            categories.append(label)
        pairs.append((int(semantic_id), index[label]))
    size = 1 + max((sid for sid, _ in pairs), default=0)
    table = np.zeros(size, dtype=np.int32)
    for semantic_id, category_id in pairs:
        table[semantic_id] = category_id
    return table, categories


def instance_to_category(instance_ids: ArrayLike, table: NDArray[np.int32]) -> NDArray[np.int32]:
    """Map an image of habitat instance ids to category ids; ids outside ``table`` -> 0."""
    ids = np.asarray(instance_ids).astype(np.int64, copy=False)
    inside = (ids >= 0) & (ids < len(table))
    return np.where(inside, table[np.where(inside, ids, 0)], 0).astype(np.int32)


FLOOR_SAMPLES = 400
"""Navigable points sampled to find the floors of a habitat island."""


def floor_heights(samples: Iterable[float], agent_height: float, bin_m: float = 0.1) -> list[float]:
    """Floor heights among the heights of points sampled on a navmesh: the most sampled
    0.1 m level, then again among the levels at least ``agent_height`` away from those taken,
    as long as a level holds a tenth of the samples of the most sampled one (stairs and ramps
    between floors hold few). Lowest first."""
    heights = np.asarray(list(samples), dtype=np.float64)
    if len(heights) == 0:
        return []
    bins = np.round(heights / bin_m).astype(np.int64)
    levels, counts = np.unique(bins, return_counts=True)
    taken: list[float] = []
    for index in np.argsort(-counts, kind="stable"):
        if counts[index] < 0.1 * counts.max():
            break
        level = float(np.median(heights[bins == levels[index]]))
        if all(abs(level - other) >= agent_height for other in taken):
            taken.append(level)
    return sorted(taken)


def island_mask(view: ArrayLike, row: int, col: int, island: int | None = None) -> NDArray[np.bool_]:
    """Cells of one navigable island in a top-down view.

    Args:
        view: Either an island-index image (-1 = not navigable) as from
            ``get_topdown_island_view``, with ``island`` given, or a boolean navigability
            image, in which case the 4-connected component holding (row, col) is kept.
        row: Agent's row.
        col: Agent's column.
        island: Island index to keep from an island-index image.
    """
    grid = np.asarray(view)
    if island is not None:
        return np.asarray(grid == island, dtype=np.bool_)
    mask = grid.astype(bool)
    if not (0 <= row < mask.shape[0] and 0 <= col < mask.shape[1]) or not mask[row, col]:
        # The agent's own cell can miss the sampled grid by a fraction of a cell: keep the
        # component nearest to it instead of returning nothing.
        if not mask.any():
            return mask
        cells = np.argwhere(mask)
        nearest = np.argmin(np.hypot(cells[:, 0] - row, cells[:, 1] - col))
        row, col = (int(v) for v in cells[nearest])
    labels, _ = ndimage.label(mask)
    return np.asarray(labels == labels[row, col], dtype=np.bool_)


def _vec3(value: Any) -> NDArray[np.float64]:
    """A habitat/magnum 3-vector (or anything indexable) as a float64 array."""
    return np.array([float(value[0]), float(value[1]), float(value[2])], dtype=np.float64)


def _quaternion_wxyz(rotation: Any) -> NDArray[np.float64]:
    """(w, x, y, z) of a numpy-quaternion, a magnum quaternion or habitat's (x, y, z, w) list."""
    if hasattr(rotation, "w"):
        return np.array([rotation.w, rotation.x, rotation.y, rotation.z], dtype=np.float64)
    if hasattr(rotation, "scalar"):
        vector = rotation.vector
        return np.array([rotation.scalar, vector[0], vector[1], vector[2]], dtype=np.float64)
    x, y, z, w = (float(v) for v in np.asarray(rotation, dtype=np.float64).reshape(4))
    return np.array([w, x, y, z], dtype=np.float64)


# --------------------------------------------------------------------------- simulator


class HabitatSimulator(SimulatorBase):
    """habitat_sim behind the embodia :class:`~embodia.sim.protocol.Simulator` protocol.

    One agent carries the sensors of the last observation kind asked for (an equirect or a
    pinhole RGB/depth/semantic triple at one resolution); asking for another kind or
    resolution reconfigures the agent's sensors, which keeps the scene, navmesh and pose.
    """

    def __init__(
        self,
        config: protocol.SimConfig | None = None,
        *,
        gpu_device_id: int = 0,
        scene_dataset_config_file: str = "default",
    ) -> None:
        """Create the backend; the habitat simulator itself starts at the first reset.

        Args:
            config: Agent and sensor settings.
            gpu_device_id: CUDA device habitat renders on.
            scene_dataset_config_file: A ``.scene_dataset_config.json`` whose scene names
                ``reset`` may then take, or ``"default"`` for plain mesh files.

        Raises:
            BackendUnavailableError: habitat_sim is not installed.
        """
        self._hs = import_habitat_sim()
        # magnum ships with habitat_sim; its vectors and angles are what the bindings take.
        self._mn = importlib.import_module("magnum")
        self.config = config or protocol.SimConfig()
        self.gpu_device_id = int(gpu_device_id)
        self.scene_dataset_config_file = scene_dataset_config_file
        self._sim: Any = None
        self._sim_cfg: Any = None
        self._scene_id: str | None = None
        self._sensor_key: SensorKey = ("panorama", 512, 1024)
        self._pose: protocol.Pose | None = None
        self._island = -1
        self._categories: list[str] = list(CATEGORIES)
        self._semantic_table = np.zeros(1, dtype=np.int32)
        self._topdown: dict[tuple[float, int, float], protocol.TopDownMap] = {}
        self._exports: tempfile.TemporaryDirectory[str] | None = None

    # ------------------------------------------------------------------ state

    @property
    def sim(self) -> Any:
        """The underlying ``habitat_sim.Simulator`` (after the first reset)."""
        return loaded(self._sim)

    @property
    def categories(self) -> list[str]:
        loaded(self._sim)
        return list(self._categories)

    def reset(
        self, scene: protocol.SceneSpec | Scene, start_pose: protocol.Pose | None = None
    ) -> protocol.Pose:
        """Load ``scene`` (kept when unchanged) and place the agent.

        Without ``start_pose`` the agent starts at the most open of a fixed-seed sample of
        points on the largest navmesh island, facing -z. A start pose off the navmesh is
        snapped onto it.
        """
        scene_id = self._scene_id_of(scene)
        if self._sim is None or scene_id != self._scene_id:
            self._load(scene_id)
        if start_pose is None:
            position = self._default_start()
            yaw = 0.0
        else:
            position = np.asarray(start_pose.position, dtype=np.float64)
            if not self.sim.pathfinder.is_navigable(self._mn_vec(position)):
                position = _vec3(self.sim.pathfinder.snap_point(self._mn_vec(position)))
            if not np.all(np.isfinite(position)):
                raise PoseError(f"start pose {start_pose.position} cannot be snapped onto the navmesh")
            yaw = start_pose.yaw
        self._island = int(self.sim.pathfinder.get_island(self._mn_vec(position)))
        self._topdown = {}
        self._place(position, yaw)
        return self.pose

    def close(self) -> None:
        """Release habitat's simulator, GL context and exported scene files."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._sim_cfg = self._scene_id = self._pose = None
        self._topdown = {}
        if self._exports is not None:
            self._exports.cleanup()
            self._exports = None

    # ------------------------------------------------------------------ actions

    def step(self, action: protocol.Action) -> protocol.StepResult:
        """Apply one primitive action; ``move_forward`` stops short at obstacles (no sliding)."""
        check_action(action)
        agent = self.sim.get_agent(0)
        collided = bool(agent.act(action))
        state = agent.get_state()
        yaw = math.remainder(quaternion_to_yaw(_quaternion_wxyz(state.rotation)), 2 * math.pi)
        self._pose = protocol.Pose.from_array(_vec3(state.position), yaw)
        return protocol.StepResult(self._pose, collided=collided and action == "move_forward")

    def _stand(self, position: NDArray[np.float64], yaw: float) -> None:
        """The agent is placed where a walk ends with ``set_state``, snapped onto the navmesh."""
        if not self.is_navigable(position):
            snapped = self.snap_point(position)
            if np.all(np.isfinite(snapped)):
                position = snapped
        self._place(position, yaw)

    # ------------------------------------------------------------------ sensors

    def panorama(self, height: int = 512, width: int = 1024) -> protocol.Panorama:
        """Equirectangular RGB, radial range (m, 0 = miss) and category ids."""
        height, width = _resolution(height, width)
        obs = self._observe(("panorama", height, width))
        depth = cube_depth_to_radial_range(_depth(obs["depth"]), height, width)
        return protocol.Panorama(rgb=obs["rgb"], depth=depth, semantic=obs["semantic"], pose=self.pose)

    def panorama_at(self, pose: protocol.Pose, height: int = 512, width: int = 1024) -> protocol.Panorama:
        """The panorama seen from ``pose``: the agent is placed there for the render and put
        back (habitat renders from the agent's state)."""
        here = self.pose
        self._place(np.asarray(pose.position, dtype=np.float64), pose.yaw)
        try:
            view = self.panorama(height, width)
        finally:
            self._place(np.asarray(here.position, dtype=np.float64), here.yaw)
        return protocol.Panorama(rgb=view["rgb"], depth=view["depth"], semantic=view["semantic"], pose=pose)

    def pinhole(self, height: int = 256, width: int = 256, hfov_deg: float = 90.0) -> protocol.PinholeFrame:
        """Perspective RGB, planar depth (m, 0 = miss) and category ids along the heading."""
        height, width = _resolution(height, width)
        if not 0.0 < hfov_deg < 180.0:
            raise EmbodiaError(f"hfov must be in (0, 180) degrees, got {hfov_deg}")
        obs = self._observe(("pinhole", height, width, float(hfov_deg)))
        return protocol.PinholeFrame(
            rgb=obs["rgb"],
            depth=_depth(obs["depth"]),
            semantic=obs["semantic"],
            pose=self.pose,
            hfov_deg=float(hfov_deg),
        )

    # ------------------------------------------------------------------ navigation

    def is_navigable(self, point: ArrayLike) -> bool:
        """Whether the agent can stand at ``point`` on its own island."""
        p = np.asarray(point, dtype=np.float64).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            return False
        pathfinder = self.sim.pathfinder
        if not pathfinder.is_navigable(self._mn_vec(p)):
            return False
        return self._island < 0 or int(pathfinder.get_island(self._mn_vec(p))) == self._island

    def snap_point(self, point: ArrayLike) -> NDArray[np.float64]:
        """Nearest navmesh point on the agent's island; NaNs if there is none."""
        p = np.asarray(point, dtype=np.float64).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            return np.full(3, np.nan)
        snapped = _vec3(self.sim.pathfinder.snap_point(self._mn_vec(p), island_index=self._island))
        return snapped if np.all(np.isfinite(snapped)) else np.full(3, np.nan)

    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> protocol.ShortestPath:
        """habitat's navmesh shortest path (start and end are snapped by habitat)."""
        a = np.asarray(start, dtype=np.float64).reshape(-1)
        b = np.asarray(end, dtype=np.float64).reshape(-1)
        none = protocol.ShortestPath(np.empty((0, 3), dtype=np.float64), math.inf)
        if a.shape != (3,) or b.shape != (3,) or not np.all(np.isfinite(np.r_[a, b])):
            return none
        request = self._hs.ShortestPath()
        request.requested_start = self._mn_vec(a)
        request.requested_end = self._mn_vec(b)
        if not self.sim.pathfinder.find_path(request) or len(request.points) == 0:
            return none
        points = np.array([_vec3(p) for p in request.points], dtype=np.float64).reshape(-1, 3)
        distance = float(request.geodesic_distance)
        if not math.isfinite(distance):
            return none
        return protocol.ShortestPath(points, distance)

    def _topdown_map(self, resolution: float) -> protocol.TopDownMap:
        """The agent's navmesh island sliced at its floor height, at ``resolution``."""
        return self._slice(resolution, float(self.pose.position[1]))

    def _floor_maps(self, resolution: float) -> list[protocol.TopDownMap]:
        """The island sliced at each floor's height. habitat's navmesh has no floors: their
        heights come from points sampled on the island (:func:`floor_heights`)."""
        pathfinder = self.sim.pathfinder
        island = self._island if self._island >= 0 else -1
        samples = [
            float(_vec3(pathfinder.get_random_navigable_point(island_index=island))[1])
            for _ in range(FLOOR_SAMPLES)
        ]
        return [
            self._slice(resolution, height) for height in floor_heights(samples, self.config.agent_height)
        ]

    def _slice(self, resolution: float, height: float) -> protocol.TopDownMap:
        """The agent's island in habitat's top-down view at ``height``.

        habitat samples cell (r, c) at ``lower_bound + (c, r) * resolution`` in (x, z); the
        origin is shifted by half a cell so those samples are cell centres here.
        """
        key = (float(resolution), self._island, round(height, 3))
        if key not in self._topdown:
            pathfinder = self.sim.pathfinder
            lower, _ = pathfinder.get_bounds()
            origin = (float(lower[0]) - resolution / 2, float(lower[2]) - resolution / 2)
            row = math.floor((self.pose.position[2] - origin[1]) / resolution)
            col = math.floor((self.pose.position[0] - origin[0]) / resolution)
            if hasattr(pathfinder, "get_topdown_island_view") and self._island >= 0:
                view = pathfinder.get_topdown_island_view(resolution, height)
                navigable = island_mask(view, row, col, island=self._island)
            else:
                navigable = island_mask(pathfinder.get_topdown_view(resolution, height), row, col)
            self._topdown[key] = protocol.TopDownMap(
                navigable=navigable,
                origin=origin,
                resolution=float(resolution),
                floor_height=float(height),
                extra={"backend": "habitat_sim", "island": self._island},
            )
        return self._topdown[key]

    # ------------------------------------------------------------------ internals

    def _mn_vec(self, p: NDArray[np.float64]) -> Any:
        return self._mn.Vector3(float(p[0]), float(p[1]), float(p[2]))

    def _scene_id_of(self, scene: protocol.SceneSpec | Scene) -> str:
        """What habitat loads for a spec: a mesh path, a dataset scene name or an export."""
        if isinstance(scene, Scene):
            return self._export(scene)
        text = str(scene)
        if text.startswith(PROCEDURAL_PREFIX):
            from embodia.sim.loading import load_scene

            return self._export(load_scene(text))
        path = Path(text)
        if path.is_file():
            return str(path.resolve())
        if self.scene_dataset_config_file != "default":
            return text  # a scene name inside the configured dataset
        raise SceneError(f"scene file not found: {path}")

    def _export(self, scene: Scene) -> str:
        """Write an embodia scene as a y-up .glb (+ stage config) habitat can load."""
        if self._exports is None:
            self._exports = tempfile.TemporaryDirectory(prefix="embodia-habitat-")
        path = Path(self._exports.name) / f"{scene.name}-{scene.mesh_hash()[:16]}.glb"
        if not path.is_file():
            scene.export(path)
        return str(path)

    def _load(self, scene_id: str) -> None:
        hs = self._hs
        sim_cfg = hs.SimulatorConfiguration()
        sim_cfg.scene_id = scene_id
        sim_cfg.scene_dataset_config_file = self.scene_dataset_config_file
        sim_cfg.enable_physics = False
        sim_cfg.gpu_device_id = self.gpu_device_id
        # The protocol's collided means "stopped short", which needs no sliding along walls.
        sim_cfg.allow_sliding = False
        sim_cfg.random_seed = 0
        cfg = hs.Configuration(sim_cfg, [self._agent_config(self._sensor_key)])
        try:
            if self._sim is None:
                self._sim = hs.Simulator(cfg)
            else:
                self._sim.reconfigure(cfg)
        except (RuntimeError, ValueError) as exc:
            raise SceneError(f"habitat_sim cannot load {scene_id}: {exc}") from None
        self._sim_cfg = sim_cfg
        self._scene_id = scene_id
        self._recompute_navmesh()
        self._load_semantics()
        logger.info(
            "habitat loaded %s: navigable %.1f m2 in %d islands, %d categories",
            scene_id,
            float(self._sim.pathfinder.navigable_area),
            int(self._sim.pathfinder.num_islands),
            len(self._categories),
        )

    def _navmesh_settings(self) -> Any:
        settings = self._hs.nav.NavMeshSettings()
        settings.set_defaults()
        settings.agent_height = self.config.agent_height
        settings.agent_radius = self.config.agent_radius
        settings.agent_max_climb = self.config.max_climb
        settings.agent_max_slope = self.config.max_slope_deg
        settings.cell_size = self.config.nav_resolution
        return settings

    def _recompute_navmesh(self) -> None:
        settings = self._navmesh_settings()
        pathfinder = self.sim.pathfinder
        if pathfinder.is_loaded and pathfinder.nav_mesh_settings == settings:
            return
        built = self.sim.recompute_navmesh(pathfinder, settings)
        if not built or not self.sim.pathfinder.is_loaded or self.sim.pathfinder.num_islands < 1:
            raise SceneError(f"habitat_sim could not build a navmesh for {self._scene_id}")

    def _load_semantics(self) -> None:
        semantic_scene = getattr(self.sim, "semantic_scene", None)
        objects: list[tuple[int, str | None]] = []
        for obj in getattr(semantic_scene, "objects", None) or ():
            if obj is None:
                continue
            semantic_id = getattr(obj, "semantic_id", None)
            if semantic_id is None:
                # Older datasets only give ids of the form <level>_<region>_<object>.
                try:
                    semantic_id = int(str(obj.id).rsplit("_", 1)[-1])
                except ValueError:
                    continue
            category = obj.category
            objects.append((int(semantic_id), None if category is None else category.name()))
        self._semantic_table, self._categories = category_lookup_table(objects)

    def _default_start(self) -> NDArray[np.float64]:
        pathfinder = self.sim.pathfinder
        islands = range(int(pathfinder.num_islands))
        if not islands:
            raise SceneError(f"the navmesh of {self._scene_id} has no islands")
        largest = max(islands, key=lambda i: float(pathfinder.island_area(i)))
        pathfinder.seed(0)
        best, best_clearance = None, -math.inf
        for _ in range(_START_SAMPLES):
            p = _vec3(pathfinder.get_random_navigable_point(island_index=largest))
            if not np.all(np.isfinite(p)):
                continue
            clearance = float(pathfinder.distance_to_closest_obstacle(self._mn_vec(p), 2.0))
            if clearance > best_clearance:
                best, best_clearance = p, clearance
        if best is None:
            raise SceneError(f"no navigable start point found in {self._scene_id}")
        return best

    def _place(self, position: NDArray[np.float64], yaw: float) -> None:
        """Put the agent at a floor point and heading (habitat's state is the floor point)."""
        import quaternion

        state = self._hs.agent.AgentState()
        state.position = np.asarray(position, dtype=np.float32)
        state.rotation = quaternion.quaternion(*yaw_to_quaternion(yaw))
        self.sim.get_agent(0).set_state(state)
        self._pose = protocol.Pose.from_array(position, math.remainder(yaw, 2 * math.pi))

    def _agent_config(self, key: SensorKey) -> Any:
        hs = self._hs
        c = self.config
        agent_cfg = hs.agent.AgentConfiguration()
        agent_cfg.height = c.agent_height
        agent_cfg.radius = c.agent_radius
        agent_cfg.sensor_specifications = self._sensor_specs(key)
        spec, actuation = hs.agent.ActionSpec, hs.agent.ActuationSpec
        agent_cfg.action_space = {
            "move_forward": spec("move_forward", actuation(amount=c.forward_step)),
            "turn_left": spec("turn_left", actuation(amount=c.turn_angle_deg)),
            "turn_right": spec("turn_right", actuation(amount=c.turn_angle_deg)),
        }
        return agent_cfg

    def _sensor_specs(self, key: SensorKey) -> list[Any]:
        hs = self._hs
        kind, height, width = key[0], key[1], key[2]
        types = {
            "rgb": hs.SensorType.COLOR,
            "depth": hs.SensorType.DEPTH,
            "semantic": hs.SensorType.SEMANTIC,
        }
        specs = []
        for modality, sensor_type in types.items():
            if kind == "panorama":
                spec = hs.EquirectangularSensorSpec()
            else:
                spec = hs.CameraSensorSpec()
                spec.sensor_subtype = hs.SensorSubType.PINHOLE
                spec.hfov = self._mn.Deg(float(key[3]))
            spec.uuid = f"embodia_{kind}_{modality}"
            spec.sensor_type = sensor_type
            spec.resolution = [int(height), int(width)]  # rows first
            spec.position = [0.0, float(self.config.sensor_height), 0.0]
            if modality != "rgb":
                spec.channels = 1
            specs.append(spec)
        return specs

    def _use_sensors(self, key: SensorKey) -> None:
        """Give the agent the sensors of ``key``, keeping scene, navmesh and pose."""
        if key == self._sensor_key:
            return
        pose = self.pose
        cfg = self._hs.Configuration(self._sim_cfg, [self._agent_config(key)])
        # Same backend config: habitat keeps the loaded scene and only rebuilds the agent.
        self.sim.reconfigure(cfg)
        self._sensor_key = key
        self._recompute_navmesh()
        self._place(pose.array, pose.yaw)

    def _observe(self, key: SensorKey) -> dict[str, Any]:
        self._use_sensors(key)
        raw = self.sim.get_sensor_observations()
        kind, height, width = key[0], key[1], key[2]
        rgba = np.asarray(raw[f"embodia_{kind}_rgb"])
        depth = np.asarray(raw[f"embodia_{kind}_depth"])
        semantic = raw.get(f"embodia_{kind}_semantic")
        if semantic is None:
            category = np.zeros((height, width), dtype=np.int32)
        else:
            category = instance_to_category(np.asarray(semantic), self._semantic_table)
        return {
            # Observations are views into habitat's buffers: copy before the next render.
            "rgb": np.array(rgba[..., :3], dtype=np.uint8, copy=True),
            "depth": np.array(depth, dtype=np.float32, copy=True).reshape(height, width),
            "semantic": category.reshape(height, width),
        }


def _resolution(height: int, width: int) -> tuple[int, int]:
    if int(height) != height or int(width) != width or height < 1 or width < 1:
        raise EmbodiaError(f"image size must be positive integers, got {height}x{width}")
    return int(height), int(width)


def _depth(depth: NDArray[np.float32]) -> NDArray[np.float32]:
    """0 for pixels habitat left at the far plane, non-finite or negative."""
    d = np.asarray(depth, dtype=np.float32)
    bad = ~np.isfinite(d) | (d <= 0) | (d >= _FAR_PLANE * (1 - 1e-6))
    return np.where(bad, np.float32(0.0), d).astype(np.float32, copy=False)
