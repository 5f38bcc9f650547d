"""The rollout engine on embodia's real envs with a TrainablePolicy on the tiny models."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from embodia.core.chat import PolicyError
from embodia.policies.rollouts import (
    ChatPrompt,
    InvalidReply,
    RolloutEngine,
    RolloutError,
    RolloutSettings,
    Sample,
    TextView,
    Trajectory,
    WaypointView,
    as_trl_rollout_func,
    chat_view,
    env_reward,
    image_entropy_bits,
    json_safe,
)
from embodia.policies.trainable import TrainablePolicy

DSR = {"length": "short", "structure": "array", "operation": "array.access"}


@pytest.fixture(scope="module")
def chat(tiny_chat_lm_dir: Path) -> TrainablePolicy:
    return TrainablePolicy(tiny_chat_lm_dir, seed=0)


@pytest.fixture(scope="module")
def vlm(tiny_vlm_dir: Path) -> TrainablePolicy:
    return TrainablePolicy(tiny_vlm_dir, seed=0)


def _collect(policy: TrainablePolicy, env_id: str, seeds: list[int], **settings: Any) -> list[Trajectory]:
    options = settings.pop("env_options", {})
    policy.manual_seed(0)
    with RolloutEngine(env_id, env_options=options, settings=RolloutSettings(**settings)) as engine:
        return engine.collect(policy, seeds)


def test_dsr_groups_records_and_logprobs(chat: TrainablePolicy) -> None:
    trajectories = _collect(
        chat, "embodia/DSR-v0", [5, 9], env_options=DSR, group_size=3, num_envs=4, max_new_tokens=8
    )
    assert [(t.seed, t.group, t.member) for t in trajectories] == [
        (5, 0, 0), (5, 0, 1), (5, 0, 2), (9, 1, 0), (9, 1, 1), (9, 1, 2)
    ]  # fmt: skip
    for t in trajectories:
        assert t.ended_by == "terminated" and len(t.turns) == 1  # one question per episode
        assert t.info["id"] == t.reset_info["id"]
        assert t.total_reward == t.info["exact"] == t.turns[0].reward
        assert t.image_count == 0 and "images" not in t.to_json()
    # A group shares the seed, hence the prompt; the two groups differ.
    prompts = [tuple(t.turns[0].prompt_ids) for t in trajectories]
    assert len(set(prompts[:3])) == 1 and len(set(prompts[3:])) == 1 and prompts[0] != prompts[3]
    assert len({tuple(t.turns[0].completion_ids) for t in trajectories}) > 1
    record = json.loads(json.dumps(trajectories[0].to_json()))
    assert record["turns"][0]["text"] == trajectories[0].turns[0].text
    # The records' logprobs are the sampling policy's: completion_logps gives them back.
    turns = [t.turns[0] for t in trajectories]
    with torch.no_grad():
        scores = chat.completion_logps([t.prompt_ids for t in turns], [t.completion_ids for t in turns])
    for row, turn in enumerate(turns):
        assert torch.allclose(scores.logps[row, : len(turn.logprobs)], torch.tensor(turn.logprobs), atol=1e-4)


def test_dsr_rewards_come_from_the_env_scorer(chat: TrainablePolicy) -> None:
    """A policy that answers right gets reward 1, through the same engine and records."""

    class Oracle:
        def __init__(self) -> None:
            self.env = gymnasium.make("embodia/DSR-v0", **DSR)

        def sample(self, prompts, *, n=1, max_new_tokens=256, temperature=1.0):
            out = []
            for i, prompt in enumerate(prompts):
                for seed in range(1000):  # find the instance behind the prompt text
                    observation, _ = self.env.reset(seed=seed)
                    if observation == prompt.messages[-1]["content"]:
                        break
                answer = json.dumps({"final_answer": self.env.unwrapped.instance.truth})
                out.append(Sample(i, [1], [2], [0.0], answer, "stop"))
            return out

    with RolloutEngine("embodia/DSR-v0", env_options=DSR, settings=RolloutSettings(group_size=2)) as engine:
        trajectories = engine.collect(Oracle(), [3])
    assert [t.total_reward for t in trajectories] == [1.0, 1.0]


def test_sync_and_async_give_identical_records(chat: TrainablePolicy) -> None:
    kwargs = {"env_options": {**DSR, "structure": None, "operation": None}, "group_size": 2, "num_envs": 3}
    synced = _collect(chat, "embodia/DSR-v0", [1, 2], vectorization="sync", max_new_tokens=6, **kwargs)
    asynced = _collect(chat, "embodia/DSR-v0", [1, 2], vectorization="async", max_new_tokens=6, **kwargs)
    assert [t.to_json() for t in synced] == [t.to_json() for t in asynced]
    assert len(synced) == 4  # two waves of 3 sub-envs: the second one resets only one


def test_multi_turn_dsr_interactive(chat: TrainablePolicy) -> None:
    trajectories = _collect(
        chat,
        "embodia/DSRInteractive-v0",
        [0],
        env_options={"length": "short", "structure": "stack"},
        group_size=2,
        max_turns=3,
        max_new_tokens=6,
    )
    for t in trajectories:
        steps = t.reset_info["steps"]
        assert len(t.turns) == min(steps, 3)
        assert t.ended_by == ("terminated" if steps <= 3 else "max_turns")
        assert len(t.rewards) == len(t.turns) and t.total_reward == sum(t.rewards)
        # Each turn's prompt is the env's next observation (truth feedback: the same per group).
        assert t.turns[0].messages[-1]["content"].count("operation 1 of") == 1
        if len(t.turns) > 1:
            assert "operation 2 of" in t.turns[1].messages[-1]["content"]
    assert [turn.prompt_ids for turn in trajectories[0].turns] == [
        turn.prompt_ids for turn in trajectories[1].turns
    ]


def test_puzzle_images_reach_a_vlm_with_their_entropy(vlm: TrainablePolicy) -> None:
    options = {"task": "maze", "difficulty": "easy", "image_size": 64}
    trajectories = _collect(
        vlm, "embodia/Puzzle-v0", [4], env_options=options, group_size=2, max_new_tokens=6
    )
    env = gymnasium.make("embodia/Puzzle-v0", **options)
    observation, _ = env.reset(seed=4)
    expected = image_entropy_bits(observation["image"])
    for t in trajectories:
        assert t.image_count == 1 and t.image_entropy_bits == pytest.approx(expected)
        assert t.to_json()["images"] == {"count": 1, "entropy_bits": pytest.approx(expected)}
        assert t.turns[0].prompt_ids.count(vlm.model.config.image_token_id) == 16
        assert "correct" in t.info and t.ended_by == "terminated"


def test_puzzle_needs_a_policy_that_takes_images(chat: TrainablePolicy) -> None:
    with (
        RolloutEngine("embodia/Puzzle-v0", env_options={"image_size": 32}) as engine,
        pytest.raises(PolicyError, match="does not take images"),
    ):
        engine.collect(chat, [0])


def test_image_entropy_bits() -> None:
    assert image_entropy_bits(np.zeros((8, 8, 3), np.uint8)) == 0.0
    halves = np.zeros((8, 8, 3), np.uint8)
    halves[:4] = 255
    assert image_entropy_bits(halves) == pytest.approx(1.0)
    every_level = np.repeat(np.arange(256, dtype=np.uint8), 3).reshape(16, 16, 3)
    assert image_entropy_bits(every_level) == pytest.approx(8.0)


def test_json_safe_makes_info_plain() -> None:
    value = {
        1: np.float32(0.5),
        "a": np.arange(3),
        "big": np.zeros((10, 10)),
        "nan": float("nan"),
        "o": object(),
    }
    assert json_safe(value) == {
        "1": 0.5,
        "a": [0, 1, 2],
        "big": {"shape": [10, 10], "dtype": "float64"},
        "nan": None,
        "o": {"type": "object"},
    }


class _Echo(gymnasium.Env):  # type: ignore[type-arg]
    """A third-party text env: says a number, rewards a reply holding it, two turns."""

    def __init__(self, discrete: bool = False) -> None:
        charset = frozenset(string.printable)
        self.observation_space = spaces.Text(200, charset=charset)
        self.action_space = (
            spaces.Discrete(5) if discrete else spaces.Text(200, min_length=0, charset=charset)
        )
        self.turn = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.turn, self.target = 0, int(self.np_random.integers(5))
        return f"Say {self.target}.", {"target": self.target}

    def step(self, action):
        self.turn += 1
        reward = float(str(self.target) in str(action))
        return f"Again, say {self.target}.", reward, self.turn >= 2, False, {"turn": self.turn}


gymnasium.register("test-rollouts/Echo-v0", entry_point=_Echo)


def test_a_third_party_text_env_follows_the_generic_rule(chat: TrainablePolicy) -> None:
    trajectories = _collect(
        chat, "test-rollouts/Echo-v0", [0, 1], group_size=2, max_turns=5, max_new_tokens=4
    )
    for t in trajectories:
        assert t.ended_by == "terminated" and len(t.turns) == 2
        assert t.turns[0].messages == [{"role": "user", "content": f"Say {t.reset_info['target']}."}]
        assert t.info == {"turn": 2}
        assert t.turns[1].action == t.turns[1].text  # Text action space: the reply is the action


class _MixedInfo(_Echo):
    """An env whose info value changes type between episodes (an int, or None when the target
    is odd), as DSR's parsed answer does: gymnasium's vector env types an info array by the
    first sub-env's value."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return (
            observation,
            reward,
            terminated,
            truncated,
            {"parsed": self.target if self.target % 2 == 0 else None},
        )


gymnasium.register("test-rollouts/MixedInfo-v0", entry_point=_MixedInfo)


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_info_values_of_mixed_types_across_sub_envs(chat: TrainablePolicy, vectorization: str) -> None:
    trajectories = _collect(
        chat,
        "test-rollouts/MixedInfo-v0",
        list(range(8)),
        group_size=1,
        max_turns=2,
        max_new_tokens=2,
        vectorization=vectorization,
    )
    parsed = [t.info["parsed"] for t in trajectories]
    targets = [t.reset_info["target"] for t in trajectories]
    assert parsed == [target if target % 2 == 0 else None for target in targets]
    assert None in parsed and any(isinstance(p, int) for p in parsed)


def test_discrete_actions_are_read_from_the_reply() -> None:
    env = _Echo(discrete=True)
    view = chat_view("test-rollouts/Echo-v0", env.observation_space, env.action_space)
    assert isinstance(view, TextView)
    assert view.action("Answer: 3", "Say 3.") == 3
    invalid = view.action("no idea", "Say 3.")
    assert isinstance(invalid, InvalidReply) and invalid.reason


def test_an_invalid_reply_ends_its_episode_only(chat: TrainablePolicy) -> None:
    gymnasium.register("test-rollouts/EchoChoice-v0", entry_point=_Echo, kwargs={"discrete": True})

    class Scripted:
        """Member 0 answers a number, member 1 rambles."""

        def sample(self, prompts, *, n=1, max_new_tokens=256, temperature=1.0):
            replies = ["Answer: 2", "hmm"] if len(prompts) == 2 else ["Answer: 2"]
            return [Sample(i, [1], [2], [-0.5], r, "stop") for i, r in enumerate(replies)]

    with RolloutEngine("test-rollouts/EchoChoice-v0", settings=RolloutSettings(group_size=2)) as engine:
        good, bad = engine.collect(Scripted(), [0])
    assert good.ended_by == "terminated" and [turn.action for turn in good.turns] == [2, 2]
    assert bad.ended_by == "invalid_reply" and len(bad.turns) == 1
    assert bad.turns[0].action is None and bad.turns[0].invalid_reply and bad.total_reward == 0.0


def test_active_mapping_waypoint_picks_candidates(vlm: TrainablePolicy) -> None:
    options = {"panorama_height": 32, "panorama_width": 64, "max_steps": 40, "rooms": 2, "bev_size": 32}
    with RolloutEngine(
        "embodia/ActiveMappingWaypoint-v0",
        env_options=options,
        settings=RolloutSettings(group_size=2, max_turns=2, max_new_tokens=4),
    ) as engine:
        assert isinstance(engine.view, WaypointView)
        observation, _ = gymnasium.make("embodia/ActiveMappingWaypoint-v0", **options).reset(seed=0)
        prompt = engine.view.prompt(observation)
        shown = int(np.asarray(observation["candidate_mask"]).sum())
        assert shown >= 1 and prompt.messages[-1]["content"].count(" m away") == shown
        assert prompt.messages[-1]["content"].count(" m2 unseen around it") == shown
        assert len(prompt.images) == 1 and not np.array_equal(prompt.images[0], observation["rgb"])  # markers
        assert engine.view.action("Answer: 0", observation) == 0
        assert isinstance(engine.view.action(f"Answer: {shown}", observation), InvalidReply)
        trajectories = engine.collect(vlm, [0])
    for t in trajectories:
        assert t.image_count == len(t.turns) and t.image_entropy_bits is not None
        assert "coverage_m2" in t.info
        for turn in t.turns:
            assert (turn.action is None) == (turn.invalid_reply is not None)


def test_live_gaming_view_reads_frames_and_speech(vlm: TrainablePolicy) -> None:
    options = {"source": "procedural:arena,seed=0,duration=4", "fps": 1.0}
    trajectories = _collect(
        vlm, "embodia/LiveGaming-v0", [0], env_options=options, group_size=1, max_turns=2, max_new_tokens=4
    )
    (t,) = trajectories
    assert len(t.turns) == 2 and t.ended_by == "max_turns" and t.image_count == 2
    assert t.turns[0].messages[-1]["content"].startswith("Second 0.")
    json.dumps(t.to_json())  # the env's Chunk in info became plain JSON


def test_unreadable_and_unknown_envs_are_clear_errors() -> None:
    with pytest.raises(RolloutError, match="CartPole-v1: a chat policy cannot read its observations"):
        RolloutEngine("CartPole-v1")
    with pytest.raises(RolloutError, match="'embodia/Nope-v0' is not registered"):
        RolloutEngine("embodia/Nope-v0")
    with pytest.raises(RolloutError, match="embodia/ActiveMapping-v0: .*no text entry"):
        RolloutEngine("embodia/ActiveMapping-v0", env_options={"panorama_height": 16, "panorama_width": 32})
    with pytest.raises(RolloutError, match="cannot make embodia/DSR-v0"):
        RolloutEngine("embodia/DSR-v0", env_options={"colour": "red"})
    with pytest.raises(RolloutError, match="RolloutSettings.group_size must be a whole number >= 1"):
        RolloutSettings(group_size=0)
    with pytest.raises(RolloutError, match="vectorization"):
        RolloutSettings(vectorization="threads")  # type: ignore[arg-type]


def test_trl_rollout_func_returns_what_grpo_trainer_reads(chat: TrainablePolicy) -> None:
    settings = RolloutSettings(max_turns=1, max_new_tokens=6, num_envs=4)
    with RolloutEngine("embodia/DSR-v0", env_options=DSR, settings=settings) as engine:
        rollout = as_trl_rollout_func(engine, chat)
        output = rollout([7, 7, 7, "8", "8", "8"], None)
        with pytest.raises(RolloutError, match="runs of equal length"):
            rollout([1, 1, 2], None)
        with pytest.raises(RolloutError, match="reset seed"):
            rollout([[{"role": "user", "content": "hi"}]], None)
    assert {"prompt_ids", "completion_ids", "logprobs", "env_reward", "trajectory"} <= output.keys()
    assert all(len(output[key]) == 6 for key in output)
    for prompt, completion, logprobs in zip(
        output["prompt_ids"], output["completion_ids"], output["logprobs"], strict=True
    ):
        assert all(isinstance(i, int) for i in prompt + completion)
        assert len(logprobs) == len(completion) and all(lp <= 0 for lp in logprobs)
    assert output["prompt_ids"][0] == output["prompt_ids"][2] != output["prompt_ids"][3]
    assert [t["seed"] for t in output["trajectory"]] == [7, 7, 7, 8, 8, 8]
    assert env_reward(output["completion_ids"], output["env_reward"]) == output["env_reward"]


def test_prompt_views_are_explicit() -> None:
    env = gymnasium.make("embodia/Puzzle-v0", image_size=32)
    view = chat_view("embodia/Puzzle-v0", env.observation_space, env.action_space)
    observation, _ = env.reset(seed=0)
    prompt = view.prompt(observation)
    assert isinstance(prompt, ChatPrompt) and view.uses_images
    assert prompt.messages == ({"role": "user", "content": observation["prompt"]},)
    assert np.array_equal(prompt.images[0], observation["image"])
    assert view.action("my answer", observation) == "my answer"


def test_a_real_grpo_trainer_trains_on_the_rollout_func(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    policy = TrainablePolicy(tiny_chat_lm_dir, seed=0)
    settings = RolloutSettings(max_turns=1, max_new_tokens=6)
    seen: list[list[Any]] = []
    with RolloutEngine("embodia/DSR-v0", env_options=DSR, settings=settings) as engine:
        rollout = as_trl_rollout_func(engine, policy)

        def recorded(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            seen.append(list(prompts))
            return rollout(prompts, trainer)

        args = trl.GRPOConfig(
            output_dir=str(tmp_path / "trl"),
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=6,
            max_steps=1,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
        )
        trainer = trl.GRPOTrainer(
            model=policy.model,
            reward_funcs=[env_reward],
            args=args,
            train_dataset=datasets.Dataset.from_dict({"prompt": [str(i) for i in range(4)]}),
            processing_class=policy.tokenizer,
            rollout_func=recorded,
        )
        trainer.train()
    assert len(seen) == 1 and len(seen[0]) == 4
    assert seen[0][0] == seen[0][1] and seen[0][2] == seen[0][3]  # TRL repeats each prompt G times
    logged = trainer.state.log_history[0]
    assert logged["num_tokens"] > 0 and "rewards/env_reward/mean" in logged
