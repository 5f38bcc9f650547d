"""Durian's controlled study (tests/difficulty_study.py, run in full by benchmarks/durian.py) at a
tiny size: the task is learnable, the advantage magnitudes are what each estimator promises, and
Durian with one level per prompt trains exactly as group std does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from difficulty_study import TIERS, StudyConfig, draw_image, make_data, run_study, train_run

from embodia.policies.recipes.advantages import image_entropy

TINY = StudyConfig(seeds=1, steps=30, train_prompts=128, eval_prompts=90, curve_every=10)


@pytest.fixture(scope="module")
def data() -> tuple:
    return make_data(TINY)


def test_visual_complexity_rises_with_difficulty() -> None:
    rng = np.random.default_rng(0)
    bits = {tier: np.mean([image_entropy([draw_image(rng, tier)[0]]) for _ in range(20)]) for tier in TIERS}
    assert bits["easy"] < 1.0 < bits["medium"] < bits["hard"]


def test_every_estimator_learns_an_easy_task() -> None:
    easy = StudyConfig(seeds=2, steps=25, tier_mix=(1.0, 0.0, 0.0), train_prompts=96, eval_prompts=60)
    summary = run_study(easy)["summary"]
    for name, row in summary.items():
        assert min(row["final_rewards"]) > 0.8, name  # from chance, 1/9


def test_advantage_magnitudes_show_the_extreme_sample_distortion(data: tuple) -> None:
    none = train_run(TINY, "none", 0, data)
    group = train_run(TINY, "group", 0, data)
    # Binary rewards centred on the group mean stay within 1 (7/8 at most with G = 8) ...
    assert none["max_abs_advantage"] <= 1.0
    assert none["max_abs_advantage"] == pytest.approx(7 / 8)
    # ... while dividing by the group's std lifts the lone success (or failure) of a group to 2.47.
    assert group["max_abs_advantage"] > 2.0
    assert group["max_abs_advantage"] == pytest.approx(2.474, abs=1e-3)
    extreme = [s for s in group["steps"] if s["groups_one_off"] > 0]
    assert extreme and all(s["advantage_abs_max"] > 2.0 for s in extreme)


def test_durian_with_one_level_per_prompt_trains_exactly_as_group(data: tuple) -> None:
    config = StudyConfig(**{**TINY.__dict__, "durian_levels": TINY.prompts_per_step})
    group = train_run(config, "group", 3, data)
    durian = train_run(config, "durian", 3, data)
    assert durian["steps"] == group["steps"]
    assert durian["curve"] == group["curve"]
    assert all(torch.equal(a, b) for a, b in zip(durian["weights"], group["weights"], strict=True))
    # With four levels Durian is a different estimator: its scales, hence its runs, differ.
    four = train_run(TINY, "durian", 3, data)
    assert four["steps"] != group["steps"]


def test_study_summary_reports_spread_across_seeds(data: tuple) -> None:
    study = run_study(StudyConfig(**{**TINY.__dict__, "seeds": 2, "estimators": ("none",)}))
    row = study["summary"]["none"]
    finals = row["final_rewards"]
    assert len(finals) == 2 and finals[0] != finals[1]
    assert row["reward_std_across_seeds"] == pytest.approx(float(np.std(finals, ddof=1)))
    assert row["reward_var_across_seeds"] == pytest.approx(row["reward_std_across_seeds"] ** 2)
    assert study["untrained_reward"] == pytest.approx(1 / 9, abs=0.06)
