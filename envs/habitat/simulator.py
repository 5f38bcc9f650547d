"""The simulator protocol over ``habitat_sim`` (written against habitat-sim 0.3.x's API).

habitat's equirectangular depth sensor copies per-cube-face planar depth, not radial
range (habitat-sim #1131 / #1953, habitat-lab #517); :func:`cube_depth_to_radial_range`
converts it so both backends return radial range.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.envs.sim.geometry import equirect_directions, quaternion_to_yaw, yaw_to_quaternion
from embodia.envs.sim.motion import walk_budget
from embodia.envs.sim.protocol import (
    ACTIONS,
    Action,
    GotoResult,
    Panorama,
    PinholeFrame,
    Pose,
    SceneSpec,
    ShortestPath,
    SimConfig,
    StepResult,
    TopDownMap,
)
from embodia.envs.sim.scene import CATEGORIES, Scene
from embodia.errors import BackendUnavailableError, EmbodiaError, SceneError

INSTALL_HINT = "habitat_sim is not installed: conda install habitat-sim headless -c conda-forge -c aihabitat"


def cube_depth_to_radial_range(depth: NDArray[np.floating], height: int, width: int) -> NDArray[np.float32]:
    """Per-cube-face planar depth of an equirect image -> radial range (0 stays 0)."""
    d = equirect_directions(height, width, dtype=np.float64)
    scale = np.abs(d).max(axis=-1)
    return (np.asarray(depth, dtype=np.float64) / scale).astype(np.float32)


def instance_to_category(instances: NDArray[np.integer], table: NDArray[np.int32]) -> NDArray[np.int32]:
    """Map habitat semantic instance ids to category ids; unknown ids become 0 (void)."""
    ids = np.asarray(instances, dtype=np.int64)
    inside = (ids >= 0) & (ids < len(table))
    out = np.zeros(ids.shape, dtype=np.int32)
    out[inside] = table[ids[inside]]
    return out


def _import_habitat() -> Any:
    try:
        import habitat_sim
    except ImportError:
        raise BackendUnavailableError(INSTALL_HINT) from None
    return habitat_sim


class HabitatSimulator:
    """:class:`~embodia.envs.sim.protocol.Simulator` on habitat_sim."""

    def __init__(self, config: SimConfig | None = None, *, gpu_device_id: int = 0) -> None:
        self._hs = _import_habitat()
        self.config = config or SimConfig()
        self.gpu_device_id = gpu_device_id
        self._sim: Any = None
        self._scene_id: str | None = None
        self._sensors: tuple[int, int, int, int, float] = (512, 1024, 256, 256, 90.0)
        self._categories: list[str] = list(CATEGORIES)
        self._category_of_instance = np.zeros(1, dtype=np.int32)

    # ------------------------------------------------------------------ configuration

    def _configuration(self, scene_id: str) -> Any:
        hs = self._hs
        ph, pw, ih, iw, hfov = self._sensors
        sim_cfg = hs.SimulatorConfiguration()
        sim_cfg.scene_id = scene_id
        sim_cfg.enable_physics = False
        sim_cfg.gpu_device_id = self.gpu_device_id
        specs = []
        for kind, uuid in (
            (hs.SensorType.COLOR, "rgb"),
            (hs.SensorType.DEPTH, "depth"),
            (hs.SensorType.SEMANTIC, "semantic"),
        ):
            pano = hs.EquirectangularSensorSpec()
            pano.uuid, pano.sensor_type, pano.resolution = f"equirect_{uuid}", kind, [ph, pw]
            pano.position = [0.0, self.config.sensor_height, 0.0]
            pin = hs.CameraSensorSpec()
            pin.uuid, pin.sensor_type, pin.resolution = f"pinhole_{uuid}", kind, [ih, iw]
            pin.sensor_subtype = hs.SensorSubType.PINHOLE
            pin.position = [0.0, self.config.sensor_height, 0.0]
            pin.hfov = hfov
            specs += [pano, pin]
        act = hs.agent.ActuationSpec
        action_space = {
            "move_forward": hs.agent.ActionSpec("move_forward", act(amount=self.config.forward_step)),
            "turn_left": hs.agent.ActionSpec("turn_left", act(amount=self.config.turn_angle_deg)),
            "turn_right": hs.agent.ActionSpec("turn_right", act(amount=self.config.turn_angle_deg)),
        }
        agent_cfg = hs.agent.AgentConfiguration(
            height=self.config.agent_height,
            radius=self.config.agent_radius,
            sensor_specifications=specs,
            action_space=action_space,
        )
        return hs.Configuration(sim_cfg, [agent_cfg])

    def _ensure_sensors(self, sensors: tuple[int, int, int, int, float]) -> None:
        if sensors != self._sensors and self._scene_id is not None:
            pose = self.pose
            self._sensors = sensors
            self._sim.reconfigure(self._configuration(self._scene_id))
            self._recompute_navmesh()
            self._set_pose(pose)

    def _recompute_navmesh(self) -> None:
        settings = self._hs.NavMeshSettings()
        settings.set_defaults()
        settings.agent_radius = self.config.agent_radius
        settings.agent_height = self.config.agent_height
        settings.agent_max_climb = self.config.max_climb
        settings.agent_max_slope = self.config.max_slope_deg
        settings.cell_size = self.config.nav_resolution
        self._sim.recompute_navmesh(self._sim.pathfinder, settings)

    def _load_semantics(self) -> None:
        semantic_scene = self._sim.semantic_scene
        objects = [o for o in getattr(semantic_scene, "objects", []) if o is not None]
        self._categories = list(CATEGORIES)
        size = max([int(o.semantic_id) for o in objects] + [0]) + 1
        table = np.zeros(size, dtype=np.int32)
        for obj in objects:
            name = obj.category.name() if obj.category is not None else ""
            if name:
                if name not in self._categories:
                    self._categories.append(name)
                table[int(obj.semantic_id)] = self._categories.index(name)
        self._category_of_instance = table

    # ------------------------------------------------------------------ protocol

    @property
    def pose(self) -> Pose:
        if self._sim is None:
            raise EmbodiaError("the simulator has no scene: call reset(scene) first")
        state = self._sim.get_agent(0).get_state()
        q = state.rotation
        return Pose.from_array(state.position, quaternion_to_yaw([q.w, q.x, q.y, q.z]))

    @property
    def categories(self) -> list[str]:
        return list(self._categories)

    def _set_pose(self, pose: Pose) -> None:
        import quaternion

        state = self._hs.AgentState()
        state.position = np.asarray(pose.position, dtype=np.float32)
        state.rotation = quaternion.from_float_array(yaw_to_quaternion(pose.yaw))
        self._sim.get_agent(0).set_state(state)

    def reset(self, scene: SceneSpec | Scene, start_pose: Pose | None = None) -> Pose:
        if isinstance(scene, Scene):
            raise SceneError("the habitat backend loads scene files; export the Scene to .glb first")
        path = Path(str(scene))
        if not path.exists():
            raise SceneError(f"scene file not found: {path}")
        scene_id = str(path.resolve())
        if scene_id != self._scene_id:
            cfg = self._configuration(scene_id)
            if self._sim is None:
                self._sim = self._hs.Simulator(cfg)
            else:
                self._sim.reconfigure(cfg)
            self._scene_id = scene_id
            self._recompute_navmesh()
            self._load_semantics()
        self._sim.pathfinder.seed(0)
        if start_pose is None:
            start = Pose.from_array(self._sim.pathfinder.get_random_navigable_point(), 0.0)
        else:
            start = Pose.from_array(self.snap_point(start_pose.position), start_pose.yaw)
        self._set_pose(start)
        return self.pose

    def step(self, action: Action) -> StepResult:
        if action not in ACTIONS:
            raise EmbodiaError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        self._sim.step(action)
        return StepResult(self.pose, collided=bool(self._sim.previous_step_collided))

    def goto(self, point: ArrayLike, max_steps: int | None = None) -> GotoResult:
        pose = self.pose
        path = self.shortest_path(pose.position, point)
        if not path.found:
            return GotoResult(pose, steps=0, reached=False, distance=0.0)
        position, yaw, steps, distance, reached = walk_budget(
            path.points, pose.yaw, self.config.forward_step, self.config.turn_angle_deg, max_steps
        )
        self._set_pose(Pose.from_array(self.snap_point(position), yaw))
        return GotoResult(self.pose, steps=steps, reached=reached, distance=distance)

    def panorama(self, height: int = 512, width: int = 1024) -> Panorama:
        self._ensure_sensors((height, width, *self._sensors[2:]))
        obs = self._sim.get_sensor_observations()
        return Panorama(
            rgb=np.ascontiguousarray(obs["equirect_rgb"][..., :3], dtype=np.uint8),
            depth=cube_depth_to_radial_range(obs["equirect_depth"], height, width),
            semantic=instance_to_category(obs["equirect_semantic"], self._category_of_instance),
            pose=self.pose,
        )

    def pinhole(self, height: int = 256, width: int = 256, hfov_deg: float = 90.0) -> PinholeFrame:
        self._ensure_sensors((*self._sensors[:2], height, width, hfov_deg))
        obs = self._sim.get_sensor_observations()
        return PinholeFrame(
            rgb=np.ascontiguousarray(obs["pinhole_rgb"][..., :3], dtype=np.uint8),
            depth=np.asarray(obs["pinhole_depth"], dtype=np.float32),
            semantic=instance_to_category(obs["pinhole_semantic"], self._category_of_instance),
            pose=self.pose,
            hfov_deg=hfov_deg,
        )

    def is_navigable(self, point: ArrayLike) -> bool:
        return bool(self._sim.pathfinder.is_navigable(np.asarray(point, dtype=np.float32)))

    def snap_point(self, point: ArrayLike) -> NDArray[np.float64]:
        return np.asarray(
            self._sim.pathfinder.snap_point(np.asarray(point, dtype=np.float32)), dtype=np.float64
        )

    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> ShortestPath:
        request = self._hs.ShortestPath()
        request.requested_start = self.snap_point(start).astype(np.float32)
        request.requested_end = self.snap_point(end).astype(np.float32)
        if not self._sim.pathfinder.find_path(request) or len(request.points) == 0:
            return ShortestPath(np.empty((0, 3)), math.inf)
        return ShortestPath(np.asarray(request.points, dtype=np.float64), float(request.geodesic_distance))

    def geodesic_distance(self, start: ArrayLike, end: ArrayLike) -> float:
        return self.shortest_path(start, end).geodesic_distance

    def topdown(self, resolution: float = 0.05) -> TopDownMap:
        pose = self.pose
        grid = np.asarray(self._sim.pathfinder.get_topdown_view(resolution, pose.position[1]), dtype=bool)
        lower, _ = self._sim.pathfinder.get_bounds()
        return TopDownMap(
            navigable=grid,
            origin=(float(lower[0]), float(lower[2])),
            resolution=resolution,
            floor_height=pose.position[1],
        )

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
        self._sim = None
        self._scene_id = None
