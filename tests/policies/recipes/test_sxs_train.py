"""SxS training (``policies/recipes/sxs_train.py``): the content-latency numbers and reward by
hand, the env's prompt equal to the SFT records' own, the trainer's ``env/`` metrics, and a
tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium
import pytest

pytest.importorskip("torch")

from embodia.policies.recipes import sxs_train as st
from embodia.policies.recipes.grpo_trainer import env_metrics
from embodia.policies.recipes.sxs_data import make_item, sft_records
from embodia.policies.rollout_views import chat_view

SOURCE = "dsr:queue.compound"


@pytest.fixture(scope="module")
def item() -> Any:
    return make_item(SOURCE, 3, "short", 0)


def _final(item: Any) -> str:
    return str(item.chunks[-1])


def test_content_latency_of_a_reply_by_hand(item: Any) -> None:
    # 4 think tokens, then the final answer spoken (its JSON is a few whitespace tokens)
    reply = f"<think>a b c d</think><speak>{_final(item)}</speak>"
    spoken = len(_final(item).split())
    metrics = st.reply_metrics(reply, item)
    assert metrics == {
        "accuracy": 1.0,
        "first_speak_fraction": pytest.approx(4 / (4 + spoken)),
        "speak_tokens": float(spoken),
        "think_tokens": 4.0,
        "speaks": 1.0,
    }
    assert st.sxs_reward(metrics, 0.5) == pytest.approx(1 + 0.5 * (1 - 4 / (4 + spoken)))
    # the right answer only thought, never spoken: not an answer
    hidden = st.reply_metrics(f"<think>{_final(item)}</think>", item)
    assert hidden["accuracy"] == 0.0 and hidden["first_speak_fraction"] == 1.0
    assert st.sxs_reward(hidden, 0.5) == 0.0
    # speaking early but wrong earns nothing for being early
    wrong = st.reply_metrics('<speak>{"final_answer": [1]}</speak>', item)
    assert wrong["first_speak_fraction"] == 0.0 and st.sxs_reward(wrong, 0.5) == 0.0


def test_the_reference_trajectory_is_correct_and_speaks_before_its_end(item: Any) -> None:
    (record,) = sft_records([item])
    metrics = st.reply_metrics(record["messages"][-1]["content"], item)
    assert metrics["accuracy"] == 1.0 and metrics["speaks"] == 2.0
    assert 0 < metrics["first_speak_fraction"] < 1


def test_the_env_asks_as_the_sft_records_do(item: Any) -> None:
    env = gymnasium.make(st.SXS_ENV, source=SOURCE, difficulty="short", latency_weight=0.0)
    observation, info = env.reset(seed=3)
    assert info == {"item": item.id}
    view = chat_view(st.SXS_ENV, env.observation_space, env.action_space)
    (record,) = sft_records([item])
    assert list(view.prompt(observation).messages) == record["messages"][:-1]
    _, reward, terminated, _, step_info = env.step(record["messages"][-1]["content"])
    assert reward == 1.0 and terminated and step_info["metrics"]["accuracy"] == 1.0


def test_bad_env_options_are_named() -> None:
    with pytest.raises(Exception, match="unknown SxS source"):
        gymnasium.make(st.SXS_ENV, source="chess")
    with pytest.raises(st.SxSTrainError, match="latency_weight"):
        gymnasium.make(st.SXS_ENV, latency_weight=-1)


def test_env_metrics_are_means_over_the_episodes() -> None:
    episodes = [
        SimpleNamespace(info={"metrics": {"accuracy": 1.0, "speaks": 2}}),
        SimpleNamespace(info={"metrics": {"accuracy": 0.0, "speaks": 0, "note": "text", "flag": True}}),
        SimpleNamespace(info={}),
    ]
    assert env_metrics(episodes) == {"env/accuracy": 0.5, "env/speaks": 1.0}


@pytest.mark.slow
def test_a_tiny_sxs_run_writes_both_stages(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    settings = st.SxSTrainSettings(
        model=f"hf:{tiny_chat_lm_dir}",
        source=SOURCE,
        sft_items=8,
        sft_epochs=3,
        sft_batch_size=4,
        grpo_steps=2,
        grpo_prompts_per_step=2,
        grpo_group_size=2,
        max_new_tokens=24,
        eval_prompts=2,
        latency_weight=0.5,
    )
    summary = st.run_sxs_train(settings, tmp_path / "run")
    assert summary["sft"]["train_loss_last"] < summary["sft"]["train_loss_first"]
    lines = [
        json.loads(line) for line in (tmp_path / "run" / "grpo" / "metrics.jsonl").read_text().splitlines()
    ]
    steps = [line for line in lines if "reward_mean" in line]
    assert len(steps) == 2 and all("env/first_speak_fraction" in line for line in steps)
    assert set(summary["content_latency_last"]) >= {"env/accuracy", "env/first_speak_fraction"}
    from embodia.policies.spec import make_policy

    make_policy(summary["policy"])  # the trained model loads
    # finished: a resume returns the summary without training again
    assert st.run_sxs_train(settings, tmp_path / "run", resume=True) == summary


def test_bad_stage_settings_fail_before_any_training() -> None:
    for changes, problem in (
        ({"grpo_group_size": 1}, "group_size"),
        ({"grpo_learning_rate": -5.0}, "learning_rate"),
        ({"sft_epochs": -1.0}, "epochs"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
    ):
        with pytest.raises(Exception, match=problem):
            st.SxSTrainSettings(model="hf:models/none", **changes)  # type: ignore[arg-type]


def test_a_run_cut_in_its_first_stage_keeps_its_folder(
    tiny_chat_lm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import embodia.policies.recipes.sft as sft

    def cut(settings: Any, out: Path, **_: Any) -> dict[str, Any]:
        (out / "checkpoints" / "checkpoint-5").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(sft, "run_sft", cut)
    with pytest.raises(KeyboardInterrupt):
        st.run_sxs_train(st.SxSTrainSettings(model=f"hf:{tiny_chat_lm_dir}", sft_items=2), tmp_path / "run")
    assert (tmp_path / "run" / "sft" / "checkpoints" / "checkpoint-5").is_dir()


@pytest.mark.slow
def test_sft_only(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    settings = st.SxSTrainSettings(
        model=f"hf:{tiny_chat_lm_dir}", sft_items=4, sft_batch_size=4, grpo_steps=0
    )
    summary = st.run_sxs_train(settings, tmp_path / "run")
    assert summary["grpo"] is None and summary["policy"] == summary["sft"]["policy"]
    assert not (tmp_path / "run" / "grpo").exists()
