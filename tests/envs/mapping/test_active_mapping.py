"""ActiveMapping gymnasium envs: registration, checker, determinism, budget, rewards, rejections."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scenes import box_room, l_corridor

import embodia.envs  # noqa: F401 (registers the ids)
from embodia.envs.mapping import ENTRY_POINTS, register_envs
from embodia.envs.mapping.active_mapping import ActiveMappingEnv, ActiveMappingWaypointEnv, MappingEnvConfig
from embodia.envs.mapping.measures import recompute_coverage
from embodia.errors import EmbodiaError
from embodia.perception.bev import BEVConfig
from embodia.perception.waypoints import Waypoint, WaypointConfig, choose_candidate
from embodia.sim import EmbeddedSimulator, Pose, SimConfig

SMALL = {"panorama_height": 64, "panorama_width": 128, "bev_size": 64, "rooms": 2}
CORRIDOR_START = Pose((0.5, 0.0, 0.5), yaw=-np.pi / 2)  # in the corner, facing +x along arm A


def _rollout(env: gymnasium.Env, actions, seed: int):
    obs, info = env.reset(seed=seed)
    frames = [(obs, 0.0, False, False, info)]
    for action in actions:
        frames.append(env.step(action))
        if frames[-1][2] or frames[-1][3]:
            break
    return frames


def _assert_same(a, b):
    assert len(a) == len(b)
    for (obs_a, *rest_a), (obs_b, *rest_b) in zip(a, b, strict=True):
        assert obs_a.keys() == obs_b.keys()
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key], err_msg=key)
        assert rest_a == rest_b


# ---------------------------------------------------------------------- registration


def test_ids_are_registered_on_import_and_make_works():
    for env_id in ENTRY_POINTS:
        assert env_id in gymnasium.registry
    register_envs()  # a second registration is a no-op, not a warning or an error
    env = gymnasium.make("embodia/ActiveMapping-v0", **SMALL)
    assert isinstance(env.unwrapped, ActiveMappingEnv)
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert info["scene"].startswith("procedural:seed=") and info["scene"].endswith(",rooms=2")
    env.close()


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("embodia/ActiveMapping-v0", {}),
        ("embodia/ActiveMappingWaypoint-v0", {}),
        ("embodia/ActiveMappingWaypoint-v0", {"action_type": "pixel"}),
    ],
)
def test_env_checker_passes(env_id, kwargs):
    env = gymnasium.make(env_id, **SMALL, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # made through gymnasium.make: also checks rgb_array rendering
    # Depth and position are unbounded by nature; anything else the checker says is a failure.
    unexpected = [str(w.message) for w in caught if "infinity" not in str(w.message)]
    assert unexpected == []
    env.close()


@pytest.mark.parametrize("env_id", list(ENTRY_POINTS))
def test_seeded_rollouts_are_deterministic_and_seeds_change_the_house(env_id):
    actions = [0, 0, 1, 0, 2, 0, 0] if env_id.endswith("Mapping-v0") else [0, 3, 1, 7, 2]
    first = _rollout(gymnasium.make(env_id, **SMALL, max_steps=60), actions, seed=7)
    again = _rollout(gymnasium.make(env_id, **SMALL, max_steps=60), actions, seed=7)
    _assert_same(first, again)
    other = gymnasium.make(env_id, **SMALL, max_steps=60)
    _, info = other.reset(seed=8)
    assert info["scene"] != first[0][4]["scene"]
    assert info["explorable_m2"] != first[0][4]["explorable_m2"]


# ---------------------------------------------------------------------- primitive env


def _corridor_env(**kwargs) -> ActiveMappingEnv:
    return ActiveMappingEnv(panorama_height=64, panorama_width=128, bev_size=64, scene=l_corridor(), **kwargs)


def test_rewards_sum_to_the_coverage_gained_and_truncation_is_at_the_budget():
    env = _corridor_env(max_steps=12)
    obs, info = env.reset(seed=0, options={"start_pose": CORRIDOR_START})
    assert info["steps"] == 0 and info["coverage_m2"] > 0  # the view at reset is free
    rewards = []
    actions = [0] * 9 + [1] * 3  # nine forward steps along arm A, then turns on the spot
    for step, action in enumerate(actions, start=1):
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        assert info["steps"] == step
        assert not terminated
        assert truncated == (step == 12)
    assert min(rewards) >= 0.0 and max(rewards) > 0.0
    initial = env.coverage.initial_ratio * info["explorable_m2"]
    assert sum(rewards) == pytest.approx(info["coverage_m2"] - initial)
    assert rewards == pytest.approx(np.diff([initial, *env.coverage.area_curve]).tolist())
    assert info["coverage_m2"] == pytest.approx(info["coverage_ratio"] * info["explorable_m2"])
    assert info["coverage_auc"] == pytest.approx(np.mean(env.coverage.curve))
    assert info["path_length"] == pytest.approx(9 * 0.25)  # nine unobstructed forward steps
    assert obs["pose"][0] == pytest.approx(0.5 + 9 * 0.25, abs=1e-5)
    with pytest.raises(EmbodiaError, match="episode is over"):
        env.step(0)


def test_collisions_are_counted_and_the_bev_crop_is_agent_centred():
    env = _corridor_env(max_steps=10)
    env.reset(options={"start_pose": Pose((0.5, 0.0, 0.5), yaw=0.0)})  # facing the -z wall
    for _ in range(4):
        obs, _, _, _, info = env.step(0)
    assert info["collisions"] >= 3
    assert info["path_length"] < 0.45  # the wall is 0.5 m ahead, less the agent radius
    np.testing.assert_array_equal(obs["bev"], env.bev.crop(env.simulator.pose.position, 64))
    assert obs["bev"][32, 32] == 1  # the agent stands on observed free floor


def test_coverage_of_a_run_equals_its_recomputation():
    env = _corridor_env(max_steps=25)
    env.reset(options={"start_pose": CORRIDOR_START})
    rng = np.random.default_rng(3)
    truncated = False
    while not truncated:
        *_, truncated, _ = env.step(int(rng.choice(3, p=[0.6, 0.2, 0.2])))
    curve = recompute_coverage(
        EmbeddedSimulator(), l_corridor(), env.coverage.trajectory, (64, 128), env.bev_config
    )
    assert len(curve) == 25
    assert curve == env.coverage.curve


def test_full_coverage_terminates():
    env = ActiveMappingEnv(panorama_height=64, panorama_width=128, bev_size=32, scene=box_room(1.5, 1.5))
    _, info = env.reset(seed=0)
    assert info["coverage_ratio"] == 1.0  # a tiny room is seen whole from its centre
    _, reward, terminated, truncated, info = env.step(1)
    assert terminated and not truncated and reward == 0.0
    assert info["coverage_auc"] == 1.0


def test_render_puts_the_map_beside_the_panorama():
    env = _corridor_env(render_mode="rgb_array")
    env.reset(options={"start_pose": CORRIDOR_START})
    frame = env.render()
    assert frame is not None and frame.dtype == np.uint8 and frame.shape == (64, 128 + 64, 3)
    np.testing.assert_array_equal(frame[:, :128], env.panorama["rgb"])
    env.step(0)
    assert env.render().shape == frame.shape  # every frame has one size
    assert _corridor_env().render() is None


def test_reset_options_scene_and_simulator_factory():
    made = []

    def factory(config: SimConfig) -> EmbeddedSimulator:
        made.append(EmbeddedSimulator(config))
        return made[-1]

    env = ActiveMappingEnv(panorama_height=32, panorama_width=64, simulator_factory=factory)
    assert env.simulator is made[0]
    _, info = env.reset(options={"scene": box_room(2.0, 2.5)})
    assert info["scene"] == "box_room"
    assert info["explorable_m2"] == pytest.approx(1.8 * 2.3, rel=0.05)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"seed": 3})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"render_mode": "human"}, "render_mode"),
        ({"rooms": 1}, "rooms"),
        ({"max_steps": 0}, "max_steps"),
        ({"bev_config": BEVConfig(sensor_height=1.0)}, "sensor_height"),
    ],
)
def test_bad_construction_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ActiveMappingEnv(**kwargs)


def test_the_config_is_passed_whole_or_as_keywords():
    config = MappingEnvConfig(panorama_height=np.int64(32), panorama_width=64, bev_size=16, max_steps=7)
    assert type(config.panorama_height) is int
    env = ActiveMappingEnv(config=config, max_steps=9)  # keywords beside it replace its fields
    assert env.config == MappingEnvConfig(panorama_height=32, panorama_width=64, bev_size=16, max_steps=9)
    assert (env.panorama_height, env.max_steps, env.coverage.budget) == (32, 9, 9)
    made = gymnasium.make("embodia/ActiveMappingWaypoint-v0", panorama_height=32, panorama_width=64, rooms=3)
    assert made.unwrapped.config == MappingEnvConfig(panorama_height=32, panorama_width=64, rooms=3)
    made.close()
    with pytest.raises(ValueError, match="rooms must be in 2..8, got 9"):
        MappingEnvConfig(rooms=9)
    with pytest.raises(ValueError, match="bev_size must be a positive integer, got 2.5"):
        ActiveMappingEnv(config=config, bev_size=2.5)
    with pytest.raises(
        TypeError, match="ActiveMappingWaypointEnv.__init__\\(\\) got an unexpected keyword argument 'step'"
    ):
        gymnasium.make("embodia/ActiveMappingWaypoint-v0", step=3)


# ---------------------------------------------------------------------- waypoint env


def _waypoint_env(**kwargs) -> ActiveMappingWaypointEnv:
    return ActiveMappingWaypointEnv(
        panorama_height=64, panorama_width=128, bev_size=64, scene=l_corridor(), **kwargs
    )


def _plans(env: ActiveMappingWaypointEnv) -> list[Waypoint]:
    plans = []
    for candidate in env.candidates:
        plan = choose_candidate(
            env.candidates, candidate.index, env.panorama, env.simulator, env.waypoint_config
        )
        assert isinstance(plan, Waypoint)
        plans.append(plan)
    return plans


def test_the_observation_carries_each_candidates_estimated_gain():
    env = _waypoint_env(max_steps=200, observe_while_walking=False)
    obs, _ = env.reset(options={"start_pose": CORRIDOR_START})
    gains = obs["candidate_gain_m2"]
    assert gains.dtype == np.float32 and env.observation_space["candidate_gain_m2"].contains(gains)
    for candidate in env.candidates:
        assert gains[candidate.index] == pytest.approx(max(candidate.gain_m2, 0.0), rel=1e-6)
    absent = np.flatnonzero(obs["candidate_mask"] == 0)
    assert (gains[absent] == 0).all() and gains.max() > 0


def test_a_goto_spends_its_path_steps_and_observes_only_at_its_end():
    env = _waypoint_env(max_steps=200, observe_while_walking=False)
    obs, info = env.reset(options={"start_pose": CORRIDOR_START})
    assert obs["candidate_mask"].sum() == len(env.candidates) > 0
    plans = _plans(env)
    index = int(np.argmax([p.steps for p in plans]))
    plan = plans[index]
    c0 = env.coverage.initial_ratio
    obs, reward, terminated, truncated, info = env.step(index)
    assert info["steps"] == info["action_steps"] == plan.steps > 1
    assert info["reached"] and info["rejection"] is None
    np.testing.assert_allclose(env.simulator.pose.array, plan.target, atol=1e-9)
    curve = env.coverage.curve
    assert curve[:-1] == [c0] * (plan.steps - 1)  # the walk itself observes nothing
    assert curve[-1] > c0 and reward == pytest.approx((curve[-1] - c0) * info["explorable_m2"])
    assert info["path_length"] == pytest.approx(plan.path.geodesic_distance)
    assert env.coverage.distance_curve[-1] == pytest.approx(plan.path.geodesic_distance)
    assert not terminated and not truncated


def test_a_goto_observes_while_walking_by_default():
    env = _waypoint_env(max_steps=200)
    env.reset(options={"start_pose": CORRIDOR_START})
    plans = _plans(env)
    index = int(np.argmax([p.steps for p in plans]))
    c0 = env.coverage.initial_ratio
    _, _, _, _, info = env.step(index)
    curve = env.coverage.curve
    assert len(curve) == info["steps"] == plans[index].steps
    assert all(b >= a for a, b in zip([c0, *curve], curve, strict=False))  # coverage never drops
    assert curve[len(curve) // 2] > c0  # seen on the way, not only at the end
    observed = [step for step in env.coverage.trajectory[1:] if step.observed]
    assert len(observed) > 1


def test_a_goto_longer_than_the_budget_stops_at_the_budget():
    env = _waypoint_env(max_steps=4)
    env.reset(options={"start_pose": CORRIDOR_START})
    plans = _plans(env)
    index = int(np.argmax([p.steps for p in plans]))
    assert plans[index].steps > 4
    start = env.simulator.pose
    _, _, terminated, truncated, info = env.step(index)
    assert truncated and not terminated
    assert info["steps"] == 4 and not info["reached"]
    assert len(env.coverage.curve) == 4
    assert env.simulator.pose != start  # it walked part of the way


def test_rejections_cost_one_step_and_leave_the_agent_in_place():
    env = ActiveMappingWaypointEnv(
        panorama_height=64, panorama_width=128, bev_size=64, scene=l_corridor(), action_type="pixel"
    )
    obs0, _ = env.reset(options={"start_pose": CORRIDOR_START})
    pose = env.simulator.pose
    # Facing +x, column 32 looks left at the -z wall 0.5 m away; row 16 sees it 2 m up.
    obs, reward, terminated, truncated, info = env.step(np.array([16, 32]))
    assert info["rejection"]["reason"] == "not_floor" and "high wall" in info["rejection"]["message"]
    assert info["rejections"] == 1 and info["steps"] == 1 and reward == 0.0
    assert env.simulator.pose == pose
    for key in obs0:
        np.testing.assert_array_equal(obs[key], obs0[key])
    assert env.coverage.curve == [env.coverage.initial_ratio]
    _, _, _, _, info = env.step(np.array([0, 64]))  # straight up: the corridor has no ceiling
    assert info["rejection"]["reason"] == "no_range" and info["rejections"] == 2 and info["steps"] == 2
    # A floor pixel from the candidates is accepted in pixel mode.
    row, col = obs["candidates"][0]
    _, _, _, _, info = env.step(np.array([row, col]))
    assert info["rejection"] is None and info["rejections"] == 2 and info["steps"] > 3

    # At most one candidate per sector: with 4 sectors, numbers 4 and 5 are never shown.
    index_env = _waypoint_env(waypoint_config=WaypointConfig(sectors=4, max_candidates=6))
    obs, _ = index_env.reset(options={"start_pose": CORRIDOR_START})
    assert obs["candidate_mask"][4:].tolist() == [0, 0]
    np.testing.assert_array_equal(obs["candidates"][4:], -1)
    _, reward, _, _, info = index_env.step(5)
    assert info["rejection"]["reason"] == "no_candidate" and info["steps"] == 1 and reward == 0.0
    with pytest.raises(ValueError, match="not in the action space"):
        index_env.step(99)


def test_waypoint_run_coverage_equals_its_recomputation():
    env = _waypoint_env(max_steps=60)
    obs, _ = env.reset(options={"start_pose": CORRIDOR_START})
    truncated = terminated = False
    choice = 0
    while not (truncated or terminated):
        valid = np.flatnonzero(obs["candidate_mask"])
        obs, _, terminated, truncated, _ = env.step(int(valid[choice % len(valid)]) if len(valid) else 0)
        choice += 1
    assert sum(not s.observed for s in env.coverage.trajectory) > 0
    curve = recompute_coverage(
        EmbeddedSimulator(), l_corridor(), env.coverage.trajectory, (64, 128), env.bev_config
    )
    assert curve == env.coverage.curve


def test_register_envs_on_the_package_is_enough() -> None:
    import embodia

    gymnasium.register_envs(embodia)
    assert "embodia/ActiveMappingWaypoint-v0" in gymnasium.registry


def test_step_to_point_walks_with_the_same_accounting_as_a_pixel_action() -> None:
    env = gymnasium.make(
        "embodia/ActiveMappingWaypoint-v0", panorama_height=32, panorama_width=64, max_steps=200
    )
    env.reset(seed=0, options={"scene": "procedural:seed=1,rooms=3"})
    base = env.unwrapped
    start = np.array(base.simulator.pose.position)
    cells = np.argwhere(base.simulator.topdown(0.05).navigable)
    goal = base.simulator.topdown(0.05).from_grid(*cells[len(cells) // 3])
    expected = base.simulator.shortest_path(start, goal)
    _, _, _, _, info = base.step_to_point(goal)
    assert info["rejection"] is None and info["reached"]
    assert np.allclose(base.simulator.pose.position, base.simulator.snap_point(goal), atol=1e-6)
    assert info["path_length"] == pytest.approx(expected.geodesic_distance, rel=1e-6)
    assert info["steps"] == info["action_steps"] >= 1
    _, _, _, _, info = base.step_to_point([np.nan, 0.0, 0.0])
    assert info["rejection"]["reason"] == "off_map"
    env.close()
