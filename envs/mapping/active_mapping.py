"""Active-mapping gymnasium environments (semantics: ``docs/mapping.md``).

- ``embodia/ActiveMapping-v0`` (:class:`ActiveMappingEnv`): primitive actions
  (0 ``move_forward``, 1 ``turn_left``, 2 ``turn_right``);
- ``embodia/ActiveMappingWaypoint-v0`` (:class:`ActiveMappingWaypointEnv`): one action picks
  a waypoint (a candidate number, or a panorama pixel) that is back-projected and walked to
  with ``simulator.goto``; its path spends primitive steps from the same budget.

After every observation the panorama is fused into the env's :class:`BEVMap`; the reward is
the newly covered explorable area (m2, :mod:`embodia.envs.mapping.measures`). Episodes truncate when
the step budget is spent and terminate when every explorable cell has been observed.
The simulator, the map and the coverage tracker stay reachable as ``env.unwrapped.simulator``,
``.bev`` and ``.coverage`` for agents and recorders.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypeVar

import gymnasium
import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray
from PIL import Image

from embodia.envs.mapping.measures import (
    COVERAGE_RESOLUTION,
    CoverageTracker,
    ExplorableArea,
    StepOutcome,
    floor_of,
)
from embodia.errors import EmbodiaError
from embodia.perception.bev import OCCUPIED, BEVConfig, BEVMap
from embodia.perception.bev_image import bev_image
from embodia.perception.waypoints import (
    Waypoint,
    WaypointCandidate,
    WaypointConfig,
    WaypointRejection,
    back_project,
    choose_candidate,
    draw_candidates,
    plan_to_point,
    propose_candidates,
)
from embodia.sim.motion import walk_budget
from embodia.sim.procedural import MAX_ROOMS, MIN_ROOMS
from embodia.sim.protocol import ACTIONS, Panorama, Pose, SceneSpec, SimConfig, Simulator
from embodia.sim.scene import CATEGORIES, Scene
from embodia.sim.simulator import EmbeddedSimulator

logger = logging.getLogger(__name__)

Observation = dict[str, Any]
"""Observation dict: name -> array (see each env's docstring for the keys)."""
ActT = TypeVar("ActT")
SimulatorFactory = Callable[[SimConfig], Simulator]
"""Builds the simulator an env runs on from its :class:`SimConfig` (default: embedded)."""

_RESET_OPTIONS = frozenset({"scene", "start_pose"})
_PAD_COLOUR = (40, 40, 40)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _horizontal_distance(a: Pose, b: Pose) -> float:
    return math.hypot(a.position[0] - b.position[0], a.position[2] - b.position[2])


@dataclass(frozen=True)
class MappingEnvConfig:
    """What an active-mapping env is built from: the keywords ``gymnasium.make`` passes to
    either id (the waypoint env takes ``action_type``, ``waypoint_config`` and
    ``observe_while_walking`` besides). Checked when made: a bad value is a ValueError naming it.
    """

    panorama_height: int = 128
    panorama_width: int = 256
    bev_size: int = 128
    """Side of the observation's map crop, in cells."""
    max_steps: int = 500
    """The episode's budget of primitive steps."""
    rooms: int = 4
    """Rooms of the procedural house drawn when no scene is given."""
    scene: SceneSpec | Scene | None = None
    """The scene every reset loads (unless its options name one); None: a seeded procedural house."""
    sim_config: SimConfig | None = None
    """None: ``SimConfig()``."""
    bev_config: BEVConfig | None = None
    """None: ``BEVConfig`` at the simulator's sensor height."""
    simulator_factory: SimulatorFactory | None = None
    """None: the embedded simulator."""
    categories: Sequence[str] = CATEGORIES
    """Semantic categories the observation space declares (0 is void)."""
    coverage_resolution: float = COVERAGE_RESOLUTION

    def __post_init__(self) -> None:
        for name in ("panorama_height", "panorama_width", "bev_size", "max_steps", "rooms"):
            object.__setattr__(self, name, _positive_int(name, getattr(self, name)))
        if not MIN_ROOMS <= self.rooms <= MAX_ROOMS:
            raise ValueError(f"rooms must be in {MIN_ROOMS}..{MAX_ROOMS}, got {self.rooms}")
        if len(self.categories) < 1:
            raise ValueError("categories must name at least category 0 (void)")

    def with_options(self, env: str, options: Mapping[str, Any]) -> MappingEnvConfig:
        """This config with the keywords an env was given beside it; a keyword that is no
        field is the TypeError ``env``'s constructor would raise for it."""
        fields_ = {f.name for f in fields(self)}
        for name in options:
            if name not in fields_:
                raise TypeError(f"{env}.__init__() got an unexpected keyword argument {name!r}")
        return replace(self, **options) if options else self


class _MappingEnv(gymnasium.Env[Observation, ActT]):
    """What both active-mapping envs share: scene choice, observation, measures, render."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self, render_mode: str | None = None, *, config: MappingEnvConfig | None = None, **options: Any
    ) -> None:
        """``config`` (default: :class:`MappingEnvConfig`'s defaults) with ``options``, its
        fields given as keywords (as ``gymnasium.make`` passes them), in its place."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported: "
                f"use one of {self.metadata['render_modes']} or None"
            )
        self.render_mode = render_mode
        self.config = config = (config or MappingEnvConfig()).with_options(type(self).__name__, options)
        self.panorama_height, self.panorama_width = config.panorama_height, config.panorama_width
        self.bev_size, self.max_steps, self.rooms = config.bev_size, config.max_steps, config.rooms
        self.sim_config = config.sim_config or SimConfig()
        self.bev_config = config.bev_config or BEVConfig.for_agent(self.sim_config)
        if not math.isclose(self.bev_config.sensor_height, self.sim_config.sensor_height):
            raise ValueError(
                f"bev_config.sensor_height {self.bev_config.sensor_height} differs from the simulator's "
                f"sensor_height {self.sim_config.sensor_height}: the map would misplace every hit"
            )
        self.scene = config.scene
        self.declared_categories = list(config.categories)
        factory: SimulatorFactory = config.simulator_factory or EmbeddedSimulator
        self.simulator: Simulator = factory(self.sim_config)
        self.coverage = CoverageTracker(budget=self.max_steps, resolution=config.coverage_resolution)
        self.bev = BEVMap(self.declared_categories, self.bev_config)
        """The map of the floor the agent is on (see :attr:`bevs`)."""
        self.bevs: dict[int, BEVMap] = {}
        """The agent's map of each floor it has been on, by floor index (lowest 0)."""
        self._floor_heights: list[float] = [0.0]
        self._categories: list[str] = list(self.declared_categories)
        self.scene_name = ""
        self._panorama: Panorama | None = None
        self._done = False

        h, w, n = self.panorama_height, self.panorama_width, len(self.declared_categories)
        self._observation_parts: dict[str, spaces.Space[Any]] = {
            "rgb": spaces.Box(0, 255, (h, w, 3), np.uint8),
            # Radial range in metres, 0 = no hit; unbounded because scenes are.
            "depth": spaces.Box(0.0, np.inf, (h, w), np.float32),
            "semantic": spaces.Box(0, n - 1, (h, w), np.int32),
            "pose": spaces.Box(-np.inf, np.inf, (4,), np.float32),
            "bev": spaces.Box(0, OCCUPIED, (self.bev_size, self.bev_size), np.uint8),
        }
        self.observation_space = spaces.Dict(self._observation_parts)

    # ------------------------------------------------------------------ reset

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Load a scene (``options["scene"]``, the constructor's ``scene``, else a seeded
        procedural house) and observe once; ``options["start_pose"]`` places the agent."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - _RESET_OPTIONS
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}: expected {sorted(_RESET_OPTIONS)}")
        scene = options.get("scene", self.scene)
        if scene is None:
            # Drawn from np_random so that reset(seed=s) always gives the same house.
            scene = f"procedural:seed={int(self.np_random.integers(2**31 - 1))},rooms={self.rooms}"
        start_pose = options.get("start_pose")
        if start_pose is not None and not isinstance(start_pose, Pose):
            raise ValueError(f"options['start_pose'] must be a Pose, got {type(start_pose).__name__}")
        pose = self.simulator.reset(scene, start_pose)
        categories = self.simulator.categories
        if len(categories) > len(self.declared_categories):
            raise EmbodiaError(
                f"scene {scene} has {len(categories)} semantic categories but the observation space "
                f"declares {len(self.declared_categories)}: pass categories= with all of them"
            )
        self.scene_name = scene.name if isinstance(scene, Scene) else str(scene)
        explorable = ExplorableArea.of(self.simulator, self.coverage.resolution)
        self._floor_heights = explorable.heights
        self._categories = categories
        self.bevs = {}
        self._use_floor(pose)
        self._observe()
        self.coverage.reset(explorable, pose, self.bevs)
        self._done = False
        self._after_reset()
        logger.debug("reset on %s: explorable %.2f m2", self.scene_name, self.coverage.explorable.area_m2)
        return self._observation(), self._info()

    def _after_reset(self) -> None:
        """Hook for per-episode state of subclasses."""

    # ------------------------------------------------------------------ helpers

    def _use_floor(self, pose: Pose) -> BEVMap:
        """Make the map of the floor ``pose`` stands on the current one (``self.bev``): one
        map per floor, each with heights measured from its own floor, so that the floor below
        never shows through as obstacles or holes in the map above."""
        floor = floor_of(self._floor_heights, pose.position[1], self.simulator.config.max_climb)
        if floor not in self.bevs:
            self.bevs[floor] = BEVMap(self._categories, self.bev_config)
        self.bev = self.bevs[floor]
        return self.bev

    def _observe(self) -> None:
        """Render the panorama at the current pose and fuse it into its floor's map."""
        self._panorama = self.simulator.panorama(self.panorama_height, self.panorama_width)
        self._use_floor(self._panorama["pose"]).integrate(self._panorama)

    @property
    def panorama(self) -> Panorama:
        """The latest panorama (the one the current observation shows)."""
        if self._panorama is None:
            raise EmbodiaError("the env has not been reset: call reset() first")
        return self._panorama

    def _observation(self) -> Observation:
        pano = self.panorama
        pose = pano["pose"]
        return {
            "rgb": np.array(pano["rgb"], dtype=np.uint8),
            "depth": np.array(pano["depth"], dtype=np.float32),
            "semantic": np.array(pano["semantic"], dtype=np.int32),
            "pose": np.array([*pose.position, pose.yaw], dtype=np.float32),
            "bev": self.bev.crop(pose.position, self.bev_size),
        }

    def _info(self) -> dict[str, Any]:
        metrics = self.coverage.metrics()
        info: dict[str, Any] = {
            "coverage_m2": float(metrics["coverage_m2"]),
            "coverage_ratio": float(metrics["coverage_ratio"]),
            "coverage_auc": float(metrics["coverage_auc"]),
            "path_length": float(metrics["path_length"]),
            "collisions": int(metrics["collisions"]),
            "steps": int(metrics["steps"]),
            "explorable_m2": float(metrics["explorable_m2"]),
            "scene": self.scene_name,
        }
        return info

    def _check_step(self, action: object, check_action: bool = True) -> None:
        if self._panorama is None:
            raise EmbodiaError("the env has not been reset: call reset() first")
        if self._done:
            raise EmbodiaError("the episode is over (terminated or truncated): call reset() first")
        if check_action and not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in the action space {self.action_space}")

    @property
    def remaining_steps(self) -> int:
        return self.max_steps - self.coverage.steps.count

    def _finish(self, covered_before: float) -> tuple[float, bool, bool]:
        """Reward, terminated, truncated after an action; closes the decision."""
        self.coverage.end_decision()
        reward = self.coverage.coverage_m2.get_metric() - covered_before
        terminated = self.coverage.fully_covered
        truncated = not terminated and self.coverage.steps.count >= self.max_steps
        self._done = terminated or truncated
        return float(reward), terminated, truncated

    # ------------------------------------------------------------------ render

    def _panorama_picture(self) -> NDArray[np.uint8]:
        return np.asarray(self.panorama["rgb"], dtype=np.uint8)

    def render(self) -> NDArray[np.uint8] | None:
        """``rgb_array``: the panorama and, right of it, the BEV picture (agent, trajectory)."""
        if self.render_mode is None:
            return None
        left = self._panorama_picture()
        side = left.shape[0]
        pose = self.simulator.pose
        picture = bev_image(self.bev, agent=pose, trajectory=self.bev.trajectory)
        # Fit the map into a side x side square, aspect kept, so every frame has one size.
        scale = side / max(picture.shape[:2])
        size = (max(1, round(picture.shape[1] * scale)), max(1, round(picture.shape[0] * scale)))
        fitted = Image.fromarray(picture).resize(size, Image.Resampling.NEAREST)
        square = Image.new("RGB", (side, side), _PAD_COLOUR)
        square.paste(fitted, ((side - size[0]) // 2, (side - size[1]) // 2))
        return np.concatenate([left, np.asarray(square, dtype=np.uint8)], axis=1)

    def close(self) -> None:
        self.simulator.close()
        self._panorama = None


class ActiveMappingEnv(_MappingEnv[np.int64]):
    """``embodia/ActiveMapping-v0``: map a scene with primitive actions.

    Observation: ``rgb`` (H, W, 3) uint8, ``depth`` (H, W) float32 radial range, ``semantic``
    (H, W) int32 category ids, ``pose`` [x, y, z, yaw] float32, ``bev`` (S, S) uint8 crop of
    the map centred on the agent (rows +z, columns +x: "up" is -z; 0 unknown, 1 free,
    2 occupied). Action: Discrete(3), 0 ``move_forward``, 1 ``turn_left``, 2 ``turn_right``.
    """

    def __init__(
        self, render_mode: str | None = None, *, config: MappingEnvConfig | None = None, **options: Any
    ) -> None:
        super().__init__(render_mode, config=config, **options)
        self.action_space = spaces.Discrete(len(ACTIONS))

    def step(self, action: int | np.integer) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        self._check_step(action)
        covered_before = self.coverage.coverage_m2.get_metric()
        start = self.simulator.pose
        result = self.simulator.step(ACTIONS[int(action)])
        self._observe()
        moved = _horizontal_distance(start, result.pose)
        self.coverage.update(StepOutcome(result.pose, result.collided, moved, self.bevs))
        reward, terminated, truncated = self._finish(covered_before)
        return self._observation(), reward, terminated, truncated, self._info()


WaypointAction = int | np.integer | NDArray[np.integer] | Sequence[int]
"""A candidate number (``action_type="index"``) or a (row, col) pixel (``"pixel"``)."""
ActionType = Literal["index", "pixel"]


class ActiveMappingWaypointEnv(_MappingEnv[Any]):
    """``embodia/ActiveMappingWaypoint-v0``: map a scene by choosing waypoints.

    ``action_type="index"``: Discrete(K), a candidate number (K = ``max_candidates``);
    ``action_type="pixel"``: MultiDiscrete([H, W]), a panorama pixel (row, col).
    The observation adds ``candidates`` (K, 2) int32 (row, col; -1 where absent) and
    ``candidate_mask`` MultiBinary(K).

    A chosen waypoint is back-projected (:func:`~embodia.perception.waypoints.back_project`)
    and walked to with ``simulator.goto(target, max_steps=remaining budget)``. Its steps count
    against the budget: the steps inside the walk observe nothing (coverage carries its
    previous value), the panorama at the end updates the map. A walk the budget cuts short
    spends the whole rest of the budget (the episode truncates); any walk spends at least
    one step. A rejected choice (``WaypointRejection``) costs one step, leaves the agent in
    place and is reported as ``info["rejection"] = {"reason", "message"}``, counted in
    ``info["rejections"]``.
    """

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        action_type: ActionType = "index",
        waypoint_config: WaypointConfig | None = None,
        observe_while_walking: bool = True,
        config: MappingEnvConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(render_mode, config=config, **options)
        if action_type not in ("index", "pixel"):
            raise ValueError(f"action_type must be 'index' or 'pixel', got {action_type!r}")
        self.action_type: ActionType = action_type
        self.observe_while_walking = bool(observe_while_walking)
        self.waypoint_config = waypoint_config or WaypointConfig(sensor_height=self.sim_config.sensor_height)
        if not math.isclose(self.waypoint_config.sensor_height, self.sim_config.sensor_height):
            raise ValueError(
                f"waypoint_config.sensor_height {self.waypoint_config.sensor_height} differs from the "
                f"simulator's sensor_height {self.sim_config.sensor_height}"
            )
        k = self.waypoint_config.max_candidates
        h, w = self.panorama_height, self.panorama_width
        # Typed Any: the space is Discrete or MultiDiscrete depending on action_type.
        self.action_space: spaces.Space[Any] = (
            spaces.Discrete(k) if action_type == "index" else spaces.MultiDiscrete([h, w])
        )
        self._observation_parts.update(
            {
                "candidates": spaces.Box(
                    np.full((k, 2), -1, dtype=np.int32),
                    np.tile(np.array([h - 1, w - 1], dtype=np.int32), (k, 1)),
                    (k, 2),
                    np.int32,
                ),
                "candidate_mask": spaces.MultiBinary(k),
                # What each candidate would reveal: the unknown BEV area within the sensing radius
                # of its floor point and in view from it (the waypoint proposer's own estimate).
                "candidate_gain_m2": spaces.Box(0.0, np.inf, (k,), np.float32),
            }
        )
        self.observation_space = spaces.Dict(self._observation_parts)
        self.candidates: list[WaypointCandidate] = []
        self.rejections = 0
        self._last_action: dict[str, Any] = self._action_report(None, 0, False)

    # ------------------------------------------------------------------ episode

    def _after_reset(self) -> None:
        self.rejections = 0
        self._last_action = self._action_report(None, 0, False)
        self._propose()

    def _propose(self) -> None:
        self.candidates = propose_candidates(self.panorama, self.bev, self.waypoint_config, self.simulator)

    def _observation(self) -> Observation:
        obs = super()._observation()
        k = self.waypoint_config.max_candidates
        pixels = np.full((k, 2), -1, dtype=np.int32)
        mask = np.zeros(k, dtype=np.int8)
        gains = np.zeros(k, dtype=np.float32)
        for candidate in self.candidates:
            pixels[candidate.index] = (candidate.row, candidate.col)
            mask[candidate.index] = 1
            gains[candidate.index] = max(candidate.gain_m2, 0.0)
        obs["candidates"] = pixels
        obs["candidate_mask"] = mask
        obs["candidate_gain_m2"] = gains
        return obs

    @staticmethod
    def _action_report(rejection: WaypointRejection | None, steps: int, reached: bool) -> dict[str, Any]:
        reported = None if rejection is None else {"reason": rejection.reason, "message": rejection.message}
        return {
            "rejection": reported,
            "action_steps": steps,
            "reached": reached,
        }

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), **self._last_action, "rejections": self.rejections}

    # ------------------------------------------------------------------ step

    def _plan(self, action: WaypointAction) -> Waypoint | WaypointRejection:
        if self.action_type == "index":
            return choose_candidate(
                self.candidates,
                int(np.asarray(action).item()),
                self.panorama,
                self.simulator,
                self.waypoint_config,
            )
        row, col = (int(v) for v in np.asarray(action).reshape(2))
        return back_project(self.panorama, row, col, self.simulator, self.waypoint_config)

    def _walk(self, waypoint: Waypoint) -> tuple[int, bool]:
        """Execute a waypoint within the remaining budget; returns (steps spent, reached)."""
        remaining = self.remaining_steps
        start = self.simulator.pose
        result = self.simulator.goto(waypoint.target, max_steps=remaining)
        cut_by_budget = waypoint.steps > remaining
        # At least one step per decision, so that no action sequence can stall the clock.
        spent = remaining if cut_by_budget else max(result.steps, 1)
        if not result.reached and not cut_by_budget:
            logger.warning("goto towards %s stopped short within the budget", waypoint.target.tolist())
        config = self.simulator.config
        travelled = 0.0
        for k in range(1, spent):
            # Poses along the path (goto itself reports only the end): same step accounting.
            position, yaw, _, distance, _ = walk_budget(
                waypoint.path.points, start.yaw, config.forward_step, config.turn_angle_deg, k
            )
            pose = Pose.from_array(position, yaw)
            moved = distance > travelled
            if self.observe_while_walking and moved:
                # The camera keeps recording while the agent walks (a turn in place shows
                # the same 360-degree panorama, so only moves add a view).
                self._use_floor(pose).integrate(
                    self.simulator.panorama_at(pose, self.panorama_height, self.panorama_width)
                )
                self.coverage.update(StepOutcome(pose, distance=distance - travelled, bev=self.bevs))
            else:
                self._use_floor(pose).record_pose(pose)
                self.coverage.update(StepOutcome(pose, distance=distance - travelled))
            travelled = distance
        self._observe()
        self.coverage.update(
            StepOutcome(result.pose, distance=max(result.distance - travelled, 0.0), bev=self.bevs)
        )
        return spent, result.reached

    def step(self, action: WaypointAction) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        self._check_step(action)
        return self._execute(self._plan(action))

    def step_to_point(self, point: ArrayLike) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Walk to a world floor point instead of a pixel (e.g. backtracking to a place the
        panorama does not show); same budget, coverage and rejection rules as :meth:`step`."""
        self._check_step(None, check_action=False)
        return self._execute(plan_to_point(self.simulator, point, self.waypoint_config))

    def _execute(
        self, plan: Waypoint | WaypointRejection
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        covered_before = self.coverage.coverage_m2.get_metric()
        if isinstance(plan, WaypointRejection):
            self.rejections += 1
            self.coverage.update(StepOutcome(self.simulator.pose))
            self._last_action = self._action_report(plan, 1, False)
            logger.debug("waypoint rejected (%s): %s", plan.reason, plan.message)
        else:
            spent, reached = self._walk(plan)
            self._propose()
            self._last_action = self._action_report(None, spent, reached)
        reward, terminated, truncated = self._finish(covered_before)
        return self._observation(), reward, terminated, truncated, self._info()

    # ------------------------------------------------------------------ render

    def _panorama_picture(self) -> NDArray[np.uint8]:
        return draw_candidates(np.asarray(self.panorama["rgb"], dtype=np.uint8), self.candidates)
