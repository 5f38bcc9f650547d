"""The embedded CPU simulator: Open3D ray casting plus a navigable grid.

It implements :class:`~embodia.sim.protocol.Simulator` and is the default backend::

    sim = EmbeddedSimulator()
    sim.reset("procedural:seed=0,rooms=5")
    pano = sim.panorama(512, 1024)          # rgb, radial depth, semantic, pose
    sim.step("turn_left"); sim.step("move_forward")
    sim.goto([3.0, 0.0, -2.0])              # follows the shortest path, counts steps
"""

from __future__ import annotations

import logging
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodia.errors import PoseError
from embodia.sim import protocol
from embodia.sim.backend import SimulatorBase, check_action, loaded
from embodia.sim.geometry import forward_vector
from embodia.sim.loading import UpAxis, load_scene
from embodia.sim.navigation import NavGrid
from embodia.sim.raycast import Raycaster
from embodia.sim.render import Renderer
from embodia.sim.scene import Scene

logger = logging.getLogger(__name__)


class EmbeddedSimulator(SimulatorBase):
    """CPU simulator over a labelled triangle mesh (see the module docstring)."""

    def __init__(self, config: protocol.SimConfig | None = None, *, up: UpAxis = "auto") -> None:
        self.config = config or protocol.SimConfig()
        self.up: UpAxis = up
        self._scene: Scene | None = None
        self._scene_key: object = None
        self._renderer: Renderer | None = None
        self._nav: NavGrid | None = None
        self._grids: dict[float, NavGrid] = {}
        """Navigation grids at other resolutions (top-down maps), for the loaded scene."""
        self._pose: protocol.Pose | None = None

    # ------------------------------------------------------------------ state

    @property
    def scene(self) -> Scene:
        return loaded(self._scene)

    @property
    def nav(self) -> NavGrid:
        return loaded(self._nav)

    @property
    def renderer(self) -> Renderer:
        return loaded(self._renderer)

    @property
    def categories(self) -> list[str]:
        return list(self.scene.categories)

    def reset(
        self, scene: protocol.SceneSpec | Scene, start_pose: protocol.Pose | None = None
    ) -> protocol.Pose:
        """Load ``scene`` (kept when the spec is unchanged) and place the agent.

        Without ``start_pose`` the agent starts at the most open point of the largest
        island, facing -z. A start pose off the island is snapped onto it.
        """
        key: object = scene if isinstance(scene, Scene) else str(scene)
        same_scene = key is self._scene_key or (isinstance(key, str) and key == self._scene_key)
        if not same_scene:
            loaded = load_scene(scene, up=self.up)
            raycaster = Raycaster(loaded)
            nav = NavGrid.build(
                raycaster, self.config, start=None if start_pose is None else start_pose.position
            )
            self._scene, self._scene_key = loaded, key
            self._renderer = Renderer(loaded, raycaster)
            self._nav = nav
            self._grids = {}
            logger.info(
                "loaded scene %s: %d faces, navigable %.1f m2",
                loaded.name,
                len(loaded.faces),
                nav.navigable_area,
            )
        elif start_pose is not None and not self.nav.on_island(np.asarray(start_pose.position)):
            # Same scene, but the start may lie on another island or floor: rebuild for it.
            self._nav = NavGrid.build(self.renderer.raycaster, self.config, start=start_pose.position)
            self._grids = {}
        if start_pose is None:
            position = self.nav.most_open_point()
            yaw = 0.0
        else:
            position = self.nav.snap_point(start_pose.position)
            if not np.all(np.isfinite(position)):
                raise PoseError(f"start pose {start_pose.position} cannot be snapped onto the floor")
            yaw = start_pose.yaw
        self._pose = protocol.Pose.from_array(position, yaw)
        return self._pose

    def close(self) -> None:
        self._scene = self._renderer = self._nav = self._scene_key = None
        self._pose = None
        self._grids = {}

    # ------------------------------------------------------------------ actions

    def step(self, action: protocol.Action) -> protocol.StepResult:
        """Apply one primitive action; ``move_forward`` stops short at obstacles (no sliding)."""
        pose = self.pose
        check_action(action)
        if action == "turn_left" or action == "turn_right":
            sign = 1.0 if action == "turn_left" else -1.0
            yaw = math.remainder(pose.yaw + sign * math.radians(self.config.turn_angle_deg), 2 * math.pi)
            self._pose = protocol.Pose(pose.position, yaw)
            return protocol.StepResult(self._pose, collided=False)
        start = pose.array
        target = start + self.config.forward_step * forward_vector(pose.yaw)
        fraction = self.nav.free_fraction(start, target)
        end = start + fraction * (target - start)
        end[1] = self.nav.floor_at(end) if self.nav.on_island(end) else start[1]
        self._pose = protocol.Pose.from_array(end, pose.yaw)
        return protocol.StepResult(self._pose, collided=fraction < 1.0)

    def _stand(self, position: NDArray[np.float64], yaw: float) -> None:
        if self.nav.on_island(position):
            position[1] = self.nav.floor_at(position)
        self._pose = protocol.Pose.from_array(position, yaw)

    # ------------------------------------------------------------------ sensors

    def _sensor(self) -> NDArray[np.float64]:
        return self.pose.sensor_position(self.config.sensor_height)

    def panorama(self, height: int = 512, width: int = 1024) -> protocol.Panorama:
        """Equirectangular RGB, radial range (m, 0 = miss) and category ids."""
        frame = self.renderer.panorama(self._sensor(), self.pose.yaw, height, width)
        return protocol.Panorama(rgb=frame.rgb, depth=frame.depth, semantic=frame.semantic, pose=self.pose)

    def panorama_at(self, pose: protocol.Pose, height: int = 512, width: int = 1024) -> protocol.Panorama:
        """The panorama seen from ``pose``; the agent stays where it is."""
        frame = self.renderer.panorama(
            pose.sensor_position(self.config.sensor_height), pose.yaw, height, width
        )
        return protocol.Panorama(rgb=frame.rgb, depth=frame.depth, semantic=frame.semantic, pose=pose)

    def pinhole(self, height: int = 256, width: int = 256, hfov_deg: float = 90.0) -> protocol.PinholeFrame:
        """Perspective RGB, planar depth (m, 0 = miss) and category ids along the heading."""
        frame = self.renderer.pinhole(self._sensor(), self.pose.yaw, height, width, hfov_deg)
        return protocol.PinholeFrame(
            rgb=frame.rgb,
            depth=frame.depth,
            semantic=frame.semantic,
            pose=self.pose,
            hfov_deg=hfov_deg,
        )

    # ------------------------------------------------------------------ navigation

    def is_navigable(self, point: ArrayLike) -> bool:
        return self.nav.is_navigable(point)

    def snap_point(self, point: ArrayLike) -> NDArray[np.float64]:
        return self.nav.snap_point(point)

    def shortest_path(self, start: ArrayLike, end: ArrayLike) -> protocol.ShortestPath:
        return self.nav.shortest_path(start, end)

    def _nav_at(self, resolution: float) -> NavGrid:
        """The navigation grid at ``resolution`` (the simulator's own, or one built for it)."""
        if math.isclose(resolution, self.nav.resolution):
            return self.nav
        if resolution not in self._grids:
            self._grids[resolution] = NavGrid.build(
                self.renderer.raycaster, self.config, resolution, start=self.pose.position
            )
        return self._grids[resolution]

    def _topdown_map(self, resolution: float) -> protocol.TopDownMap:
        """Ground-truth navigable island of the agent's floor at ``resolution`` (explorable
        area in m2)."""
        nav = self._nav_at(resolution)
        return nav.floor_map(max(0, nav.floor_of(self.pose.array)))

    def _floor_maps(self, resolution: float) -> list[protocol.TopDownMap]:
        nav = self._nav_at(resolution)
        return [nav.floor_map(floor) for floor in range(len(nav.floors))]
