"""habitat backend: pure conversions checked with numbers, the backend's wiring against a small
stand-in for habitat_sim (an analytic box room), and the real conformance suite where
habitat_sim imports."""

from __future__ import annotations

import inspect
import math
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scenes import analytic_box_range, box_room, shared_scene

from embodia.errors import BackendUnavailableError
from embodia.sim.conformance import WORLDS, check_multilevel, check_simulator
from embodia.sim.geometry import (
    equirect_directions,
    forward_vector,
    pinhole_directions,
    quaternion_to_yaw,
    yaw_matrix,
    yaw_to_quaternion,
)
from embodia.sim.habitat import is_habitat_available
from embodia.sim.habitat.simulator import (
    INSTALL_HINT,
    HabitatSimulator,
    canonical_category,
    category_lookup_table,
    cube_depth_to_radial_range,
    instance_to_category,
    island_mask,
)
from embodia.sim.motion import primitive_step_count, walk_budget
from embodia.sim.protocol import Pose, Simulator

ROOM = (6.0, 2.5, 4.0)  # W, H, D of the stand-in's box room

# --------------------------------------------------------------------------- cube depth


def _face_planar_depth(camera: np.ndarray, directions: np.ndarray, size: tuple[float, float, float]):
    """What a cubemap face reports: the hit point's offset along the face's own axis."""
    radial, _ = analytic_box_range(camera, directions, size)
    hit = directions * radial[:, None]
    face = np.argmax(np.abs(directions), axis=1)
    axis = np.zeros_like(directions)
    axis[np.arange(len(face)), face] = np.sign(directions[np.arange(len(face)), face])
    return np.sum(hit * axis, axis=1), radial


def test_cube_face_depth_converts_to_analytic_radial_range() -> None:
    h, w = 64, 128
    camera = np.array([2.3, 1.5, 1.7])
    d = equirect_directions(h, w, dtype=np.float64).reshape(-1, 3)
    planar, radial = _face_planar_depth(camera, d, ROOM)
    converted = cube_depth_to_radial_range(planar.reshape(h, w).astype(np.float32), h, w)
    assert converted.dtype == np.float32 and converted.shape == (h, w)
    assert np.abs(converted.reshape(-1) - radial).max() < 1e-4
    # Planar depth read as range is up to sqrt(3) too short near cube corners: the
    # conversion matters.
    assert (radial / planar).max() > 1.6


def test_converted_floor_pixels_back_project_onto_the_floor() -> None:
    h, w = 96, 192
    camera = np.array([3.0, 1.5, 2.0])
    d = equirect_directions(h, w, dtype=np.float64).reshape(-1, 3)
    planar, _ = _face_planar_depth(camera, d, ROOM)
    rng = cube_depth_to_radial_range(planar.reshape(h, w), h, w).reshape(-1)
    y = camera[1] + rng * d[:, 1]
    _, axis = analytic_box_range(camera, d, ROOM)
    floor = (axis == 1) & (d[:, 1] < 0)
    assert floor.sum() > 1000
    assert np.abs(y[floor]).max() < 1e-4


def test_cube_depth_keeps_misses_and_rejects_bad_shapes() -> None:
    depth = np.full((8, 16), 2.0, dtype=np.float32)
    depth[0, 0], depth[1, 1], depth[2, 2] = 0.0, np.nan, -1.0
    out = cube_depth_to_radial_range(depth, 8, 16)
    assert out[0, 0] == 0 and out[1, 1] == 0 and out[2, 2] == 0
    assert np.all(out[3:] >= 2.0)  # range >= planar depth everywhere
    with pytest.raises(ValueError, match="expected"):
        cube_depth_to_radial_range(depth, 16, 8)


# --------------------------------------------------------------------------- semantics


def test_instance_ids_map_to_categories() -> None:
    table = np.array([0, 5, 7], dtype=np.int32)
    ids = np.array([[0, 1], [2, 9], [2**32 - 1, 1]], dtype=np.uint32)
    out = instance_to_category(ids, table)
    assert out.dtype == np.int32 and out.tolist() == [[0, 5], [7, 0], [0, 5]]


def test_category_table_uses_the_shared_vocabulary() -> None:
    objects = [(1, "chair"), (3, "Couch"), (4, "bookshelf"), (6, "Weird Thing"), (7, None), (8, "unknown")]
    table, categories = category_lookup_table(objects)
    assert categories[0] == "void" and categories[-1] == "weird thing"
    assert len(table) == 9
    assert categories[table[1]] == "chair"
    assert categories[table[3]] == "sofa"  # synonym of the embedded vocabulary
    assert categories[table[4]] == "shelf"
    assert table[6] == len(categories) - 1
    assert table[0] == table[2] == table[5] == table[7] == table[8] == 0
    assert canonical_category("  ") == "void"


def test_island_mask_from_island_view_and_from_a_bool_view() -> None:
    view = np.array([[0, 0, -1, 1], [0, -1, -1, 1], [-1, -1, 1, 1]])
    assert island_mask(view, 0, 0, island=1).sum() == 4
    navigable = view >= 0
    assert island_mask(navigable, 0, 0).sum() == 3
    assert island_mask(navigable, 2, 3).sum() == 4
    # An agent cell just off the grid keeps the nearest component.
    assert island_mask(navigable, -1, 0).sum() == 3


# --------------------------------------------------------------------------- step counts


def test_primitive_step_count_on_hand_computed_polylines() -> None:
    ahead_then_right = [[0, 0, 0], [0, 0, -1], [1, 0, -1]]
    assert primitive_step_count(ahead_then_right, 0.0, 0.25, 30.0) == (4 + 3 + 4, pytest.approx(-math.pi / 2))
    # 0.3 m costs two forward steps (the last one short); 0.75 m exactly three.
    assert primitive_step_count([[0, 0, 0], [0, 0, -0.3]], 0.0, 0.25, 30.0)[0] == 2
    assert primitive_step_count([[0, 0, 0], [0, 0, -0.75]], 0.0, 0.25, 30.0)[0] == 3
    # Turning around: 180 deg = 6 turns of 30 deg, then 2 m.
    steps, yaw = primitive_step_count([[0, 0, 0], [0, 0, 2]], 0.0, 0.25, 30.0)
    assert steps == 6 + 8 and abs(abs(yaw) - math.pi) < 1e-12
    # Headings wrap: from 170 deg to -170 deg is a 20 deg turn, 2 turns of 10 deg.
    start = math.radians(170.0)
    target = forward_vector(math.radians(-170.0))
    assert primitive_step_count([[0, 0, 0], target.tolist()], start, 0.25, 10.0)[0] == 2 + 4
    # Height changes are free; repeated points are free; a single point costs nothing.
    assert primitive_step_count([[0, 0, 0], [0, 0.2, 0], [0, 0.2, -0.5]], 0.0, 0.25, 30.0)[0] == 2
    assert primitive_step_count([[1, 0, 1]], 0.7, 0.25, 30.0) == (0, 0.7)


def test_walk_budget_stops_where_the_budget_says() -> None:
    path = [[0, 0, 0], [0, 0, -1], [1, 0, -1]]
    pos, yaw, steps, dist, reached = walk_budget(path, 0.0, 0.25, 30.0, max_steps=2)
    assert (steps, reached) == (2, False) and np.allclose(pos, [0, 0, -0.5]) and dist == pytest.approx(0.5)
    # 4 forward + 3 turns + 1 forward = 8: the agent has turned right and made one step.
    pos, yaw, steps, dist, _ = walk_budget(path, 0.0, 0.25, 30.0, max_steps=8)
    assert steps == 8 and np.allclose(pos, [0.25, 0, -1]) and yaw == pytest.approx(-math.pi / 2)
    # A bend whose turns do not fit is not started.
    pos, yaw, steps, _, _ = walk_budget(path, 0.0, 0.25, 30.0, max_steps=6)
    assert steps == 4 and np.allclose(pos, [0, 0, -1]) and yaw == 0.0
    pos, _, steps, dist, reached = walk_budget(path, 0.0, 0.25, 30.0, max_steps=0)
    assert (steps, dist, reached) == (0, 0.0, False) and np.allclose(pos, path[0])
    total, _ = primitive_step_count(path, 0.0, 0.25, 30.0)
    assert walk_budget(path, 0.0, 0.25, 30.0, max_steps=total)[4]
    with pytest.raises(ValueError, match="forward_step"):
        walk_budget(path, 0.0, 0.0, 30.0)


# --------------------------------------------------------------------------- stand-in habitat_sim


class _Quaternion:
    def __init__(self, w: float, x: float, y: float, z: float) -> None:
        self.w, self.x, self.y, self.z = w, x, y, z


class _CameraSpec:
    equirect = False

    def __init__(self) -> None:
        self.channels, self.hfov = 4, 90.0


class _EquirectSpec(_CameraSpec):
    equirect = True


class _ShortestPath:
    def __init__(self) -> None:
        self.points: list[np.ndarray] = []
        self.geodesic_distance = math.inf


class _NavMeshSettings:
    def set_defaults(self) -> None:
        self.agent_radius, self.agent_height, self.cell_size = 0.1, 1.5, 0.05

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other)


class _PathFinder:
    def __init__(self) -> None:
        self.is_loaded = False
        self.nav_mesh_settings: Any = None
        self.num_islands = 1
        self._rng = np.random.default_rng(0)

    @property
    def r(self) -> float:
        return float(self.nav_mesh_settings.agent_radius)

    def _inside(self, p: np.ndarray) -> bool:
        r = self.r
        return bool(r <= p[0] <= ROOM[0] - r and r <= p[2] <= ROOM[2] - r)

    def is_navigable(self, p: Any, max_y_delta: float = 0.5) -> bool:
        p = np.asarray(p, dtype=np.float64)
        return self._inside(p) and abs(p[1]) <= max_y_delta

    def snap_point(self, p: Any, island_index: int = -1) -> np.ndarray:
        p = np.asarray(p, dtype=np.float64)
        r = self.r
        return np.array([np.clip(p[0], r, ROOM[0] - r), 0.0, np.clip(p[2], r, ROOM[2] - r)])

    def get_island(self, p: Any) -> int:
        return 0

    def island_area(self, i: int = -1) -> float:
        return (ROOM[0] - 2 * self.r) * (ROOM[2] - 2 * self.r)

    @property
    def navigable_area(self) -> float:
        return self.island_area()

    def seed(self, n: int) -> None:
        self._rng = np.random.default_rng(n)

    def get_random_navigable_point(self, max_tries: int = 10, island_index: int = -1) -> np.ndarray:
        r = self.r
        return np.array([self._rng.uniform(r, ROOM[0] - r), 0.0, self._rng.uniform(r, ROOM[2] - r)])

    def distance_to_closest_obstacle(self, p: Any, max_search_radius: float = 2.0) -> float:
        p = np.asarray(p)
        r = self.r
        gap = min(p[0] - r, ROOM[0] - r - p[0], p[2] - r, ROOM[2] - r - p[2])
        return float(min(gap, max_search_radius))

    def find_path(self, request: _ShortestPath) -> bool:
        a = self.snap_point(request.requested_start)
        b = self.snap_point(request.requested_end)
        request.points = [a, b]  # the room is convex
        request.geodesic_distance = float(np.linalg.norm(b - a))
        return True

    def get_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        r = self.r
        return np.array([r, 0.0, r]), np.array([ROOM[0] - r, 0.0, ROOM[2] - r])

    def get_topdown_island_view(self, mpp: float, height: float, eps: float = 0.5) -> np.ndarray:
        lower, upper = self.get_bounds()
        cols = int((upper[0] - lower[0]) / mpp) + 1
        rows = int((upper[2] - lower[2]) / mpp) + 1
        x = lower[0] + np.arange(cols) * mpp  # habitat samples at lower + index * mpp
        z = lower[2] + np.arange(rows) * mpp
        inside = (z[:, None] <= upper[2] + 1e-9) & (x[None, :] <= upper[0] + 1e-9)
        return np.where(inside, 0, -1)


class _Agent:
    def __init__(self, cfg: Any, pathfinder: _PathFinder) -> None:
        self.cfg, self.pf = cfg, pathfinder
        self.position, self.yaw = np.array([0.5, 0.0, 0.5]), 1.0  # as after a random start

    def set_state(self, state: Any) -> None:
        assert isinstance(state.rotation, _Quaternion), "habitat reads arrays as (x, y, z, w)"
        q = state.rotation
        self.position = np.asarray(state.position, dtype=np.float64)
        self.yaw = quaternion_to_yaw([q.w, q.x, q.y, q.z])

    def get_state(self) -> Any:
        q = yaw_to_quaternion(self.yaw)
        return types.SimpleNamespace(position=self.position.astype(np.float32), rotation=_Quaternion(*q))

    def act(self, action: str) -> bool:
        amount = self.cfg.action_space[action].actuation.amount
        if action != "move_forward":
            self.yaw += math.radians(amount) * (1 if action == "turn_left" else -1)
            return False
        target = self.position + amount * forward_vector(self.yaw)
        if self.pf._inside(target):
            self.position = target
            return False
        for t in np.linspace(1.0, 0.0, 201):  # no sliding: stop at the last free point
            p = self.position + t * (target - self.position)
            if self.pf._inside(p):
                self.position = p
                break
        return True


class _HabitatSimulator:
    def __init__(self, cfg: Any) -> None:
        self.pathfinder = _PathFinder()
        self.reconfigures = 0
        self.semantic_scene = types.SimpleNamespace(
            objects=[
                types.SimpleNamespace(
                    semantic_id=i, id=f"0_0_{i}", category=types.SimpleNamespace(name=lambda n=n: n)
                )
                for i, n in ((1, "floor"), (2, "wall"), (3, "ceiling"))
            ]
        )
        self._configure(cfg)

    def _configure(self, cfg: Any) -> None:
        self.cfg = cfg
        self.agent = _Agent(cfg.agents[0], self.pathfinder)

    def reconfigure(self, cfg: Any) -> None:
        self.reconfigures += 1
        self._configure(cfg)

    def recompute_navmesh(self, pathfinder: _PathFinder, settings: Any) -> bool:
        pathfinder.nav_mesh_settings, pathfinder.is_loaded = settings, True
        return True

    def get_agent(self, i: int) -> _Agent:
        return self.agent

    def close(self) -> None:
        self.closed = True

    def get_sensor_observations(self) -> dict[str, np.ndarray]:
        out = {}
        for spec in self.cfg.agents[0].sensor_specifications:
            h, w = spec.resolution
            if spec.equirect:
                cam_dirs = equirect_directions(h, w, dtype=np.float64).reshape(-1, 3)
            else:
                cam_dirs = pinhole_directions(h, w, spec.hfov, dtype=np.float64).reshape(-1, 3)
            dirs = cam_dirs @ yaw_matrix(self.agent.yaw).T
            camera = self.agent.position + np.asarray(spec.position)
            t, axis = analytic_box_range(camera, dirs, ROOM)
            if spec.sensor_type == "depth":
                # Unit pinhole rays have unit optical depth: t is planar depth already.
                planar = t * np.abs(cam_dirs).max(axis=1) if spec.equirect else t
                out[spec.uuid] = planar.reshape(h, w).astype(np.float32)
            elif spec.sensor_type == "semantic":
                up = dirs[np.arange(len(t)), 1] > 0
                ids = np.where(axis == 1, np.where(up, 3, 1), 2).astype(np.uint32)
                out[spec.uuid] = ids.reshape(h, w)
            else:
                rgba = np.full((h * w, 4), 255, dtype=np.uint8)
                rgba[:, :3] = (40 * (axis[:, None] + 1)).astype(np.uint8)
                out[spec.uuid] = rgba.reshape(h, w, 4)
        return out


def _fake_modules() -> dict[str, types.ModuleType]:
    """Just enough of habitat_sim / magnum / quaternion for the backend, over a box room.

    The room is ``ROOM`` with its floor at y = 0; the navmesh is the floor shrunk by the agent
    radius (one island); equirect depth is per-cube-face planar depth, as habitat's is.
    """
    magnum = types.ModuleType("magnum")
    magnum.Vector3 = lambda x, y, z: np.array([x, y, z], dtype=np.float64)  # type: ignore[attr-defined]
    magnum.Deg = float  # type: ignore[attr-defined]
    quaternion = types.ModuleType("quaternion")
    quaternion.quaternion = _Quaternion  # type: ignore[attr-defined]
    hs = types.ModuleType("habitat_sim")
    agent_mod = types.ModuleType("habitat_sim.agent")
    nav_mod = types.ModuleType("habitat_sim.nav")
    hs.agent, hs.nav = agent_mod, nav_mod  # type: ignore[attr-defined]
    hs.SensorType = types.SimpleNamespace(COLOR="color", DEPTH="depth", SEMANTIC="semantic")  # type: ignore[attr-defined]
    hs.SensorSubType = types.SimpleNamespace(PINHOLE="pinhole")  # type: ignore[attr-defined]
    hs.CameraSensorSpec, hs.EquirectangularSensorSpec = _CameraSpec, _EquirectSpec  # type: ignore[attr-defined]
    hs.SimulatorConfiguration = types.SimpleNamespace  # type: ignore[attr-defined]
    hs.Configuration = lambda sim_cfg, agents: types.SimpleNamespace(sim_cfg=sim_cfg, agents=agents)  # type: ignore[attr-defined]
    hs.ShortestPath = _ShortestPath  # type: ignore[attr-defined]
    nav_mod.NavMeshSettings = _NavMeshSettings  # type: ignore[attr-defined]
    agent_mod.AgentConfiguration = types.SimpleNamespace  # type: ignore[attr-defined]
    agent_mod.ActionSpec = lambda name, actuation: types.SimpleNamespace(name=name, actuation=actuation)  # type: ignore[attr-defined]
    agent_mod.ActuationSpec = lambda amount: types.SimpleNamespace(amount=amount)  # type: ignore[attr-defined]
    agent_mod.AgentState = types.SimpleNamespace  # type: ignore[attr-defined]
    hs.Simulator = _HabitatSimulator  # type: ignore[attr-defined]
    return {
        "habitat_sim": hs,
        "habitat_sim.agent": agent_mod,
        "habitat_sim.nav": nav_mod,
        "magnum": magnum,
        "quaternion": quaternion,
    }


@pytest.fixture()
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name, module in _fake_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    scene = tmp_path / "room.glb"
    scene.write_bytes(b"")  # the stand-in never reads it
    return scene


def test_backend_passes_the_conformance_suite_on_the_stand_in(stand_in: Path) -> None:
    sim = HabitatSimulator()
    check_simulator(sim, stand_in)
    assert isinstance(sim, Simulator)


def test_stand_in_observations_carry_categories_and_radial_range(stand_in: Path) -> None:
    sim = HabitatSimulator()
    pose = sim.reset(stand_in, Pose((2.3, 0.0, 1.7), math.radians(37.0)))
    assert pose.position == (2.3, 0.0, 1.7)
    pano = sim.panorama(48, 96)
    camera = sim.pose.sensor_position(sim.config.sensor_height)
    dirs = equirect_directions(48, 96, dtype=np.float64).reshape(-1, 3) @ yaw_matrix(pose.yaw).T
    expected, axis = analytic_box_range(camera, dirs, ROOM)
    assert np.abs(pano["depth"].reshape(-1) - expected).max() < 1e-3
    names = np.array(sim.categories)[pano["semantic"].reshape(-1)]
    assert set(names[axis != 1]) == {"wall"} and set(names[(axis == 1) & (dirs[:, 1] < 0)]) == {"floor"}
    assert pano["rgb"].shape == (48, 96, 3) and pano["rgb"].flags.c_contiguous


def test_stand_in_sensor_sets_are_rebuilt_only_on_change(stand_in: Path) -> None:
    sim = HabitatSimulator()
    sim.reset(stand_in)
    fake = sim.sim
    sim.panorama(512, 1024)  # the set the agent starts with
    assert fake.reconfigures == 0
    sim.pinhole(32, 32, 60.0)
    sim.pinhole(32, 32, 60.0)
    assert fake.reconfigures == 1
    before = sim.pose
    sim.panorama(16, 32)
    assert fake.reconfigures == 2 and sim.pose == before  # the pose survives a rebuild
    assert np.allclose(fake.agent.position, before.position)


def test_stand_in_goto_topdown_and_scene_objects(stand_in: Path) -> None:
    sim = HabitatSimulator()
    sim.reset(stand_in, Pose((1.0, 0.0, 2.0), math.pi / 2))  # facing -x
    part = sim.goto([5.0, 0.0, 2.0], max_steps=10)
    assert (part.steps, part.reached) == (10, False)  # 6 turns, then 4 of 16 forward steps
    assert sim.pose.position[0] == pytest.approx(2.0)
    top = sim.topdown(0.1)
    # One cell per habitat sample: the navmesh (the room less the radius) sampled every 0.1 m.
    span_x, span_z = (ROOM[0] - 0.1) - 0.1, (ROOM[2] - 0.1) - 0.1
    assert top.navigable.shape == (int(span_z / 0.1) + 1, int(span_x / 0.1) + 1)
    assert top.navigable.all()
    assert np.allclose(top.from_grid(0, 0)[[0, 2]], [0.1, 0.1])
    # one floor (every sampled navigable point is at y = 0): its map is the top-down one
    floors = sim.floor_maps(0.1)
    assert len(floors) == 1 and np.array_equal(floors[0].navigable, top.navigable)
    # A start off the navmesh is snapped onto it.
    assert sim.reset(stand_in, Pose((-3.0, 0.0, 2.0))).position == (0.1, 0.0, 2.0)
    # An embodia Scene is exported to a .glb habitat can load.
    scene_id = sim._scene_id_of(box_room(3.0, 3.0))
    assert scene_id.endswith(".glb") and Path(scene_id).is_file()
    sim.close()
    assert not Path(scene_id).exists()


# --------------------------------------------------------------------------- real habitat_sim


def test_protocol_signatures_match() -> None:
    names = (
        "reset",
        "step",
        "goto",
        "panorama",
        "pinhole",
        "is_navigable",
        "snap_point",
        "topdown",
        "floor_maps",
    )
    for name in names:
        ours = inspect.signature(getattr(HabitatSimulator, name)).parameters
        theirs = inspect.signature(getattr(Simulator, name)).parameters
        assert [(p.name, p.default) for p in ours.values()] == [
            (p.name, p.default) for p in theirs.values()
        ], name


def test_importing_the_package_does_not_import_habitat_sim() -> None:
    if is_habitat_available():
        pytest.skip("habitat_sim is installed here; another module may have imported it")
    import embodia.sim.habitat as package

    assert "habitat_sim" not in sys.modules
    assert package.HabitatSimulator is HabitatSimulator


@pytest.mark.skipif(is_habitat_available(), reason="habitat_sim is installed here")
def test_missing_habitat_gives_the_install_hint() -> None:
    with pytest.raises(BackendUnavailableError) as info:
        HabitatSimulator()
    assert str(info.value) == INSTALL_HINT
    assert "conda install habitat-sim headless -c conda-forge -c aihabitat" in str(info.value)


@pytest.mark.habitat
def test_habitat_conformance(tmp_path: Path) -> None:
    pytest.importorskip(
        "habitat_sim",
        reason=(
            "habitat_sim is not installed (conda-only); "
            "the habitat backend's conformance suite runs where it imports"
        ),
    )
    check_simulator(HabitatSimulator(), shared_scene("simple_room.glb"))
    # the multi-level worlds, exported for a backend that loads files
    files = {name: str(world().export(tmp_path / f"{name}.glb")) for name, world in WORLDS.items()}
    check_multilevel(HabitatSimulator(), files)
