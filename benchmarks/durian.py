"""Durian as a controlled study: group std vs batch std vs none vs Durian on one synthetic task.

    python benchmarks/durian.py [--quick] [--seeds N] [--steps N] [--out DIR]

Trains a small softmax policy with embodia's GRPO loss (``policies/recipes/grpo.py``) and each
advantage estimator (``policies/recipes/advantages.py``) from the same seeds, on a synthetic
multimodal task of mixed difficulty: find the red square among 9 cells of a generated image,
with easy images (the target alone), medium ones and hard ones (near-red distractors, noise,
and half of them with a target no policy can tell apart). The task, the policy and the loop are
in ``tests/difficulty_study.py``, which the test suite runs at a tiny size.

Reports per estimator the final held-out reward (mean over seeds, its std and variance across
seeds, per tier), the mean held-out reward along the way (``reward_auc``), and the largest
advantage magnitude seen (``max_abs_advantage``) and its per-step mean: the extreme-sample
distortion Durian targets. ``--out DIR`` also writes ``DIR/ESTIMATOR/seed-N.jsonl`` (one line
per step), ``DIR/curves.jsonl`` (held-out reward along each run), ``DIR/summary.json`` and
``DIR/reward_curves.png``.

Last line: one JSON object with ``ESTIMATOR_final_reward``, ``ESTIMATOR_reward_std_across_seeds``,
``ESTIMATOR_reward_var_across_seeds``, ``ESTIMATOR_final_reward_easy|medium|hard``,
``ESTIMATOR_reward_auc``, ``ESTIMATOR_max_abs_advantage``, ``ESTIMATOR_mean_max_abs_advantage``
for group, batch, none and durian, and ``untrained_reward``, ``seeds``, ``steps``, ``seconds``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from _common import benchmark_args, import_from_tests

from embodia.core.runs import check_out_folder, jsonl_text, write_atomic, write_json
from embodia.errors import EmbodiaError

REPORTED = (
    "final_reward",
    "reward_std_across_seeds",
    "reward_var_across_seeds",
    "final_reward_easy",
    "final_reward_medium",
    "final_reward_hard",
    "reward_auc",
    "max_abs_advantage",
    "mean_max_abs_advantage",
)


def write_out(out: Path, study: dict[str, Any]) -> None:
    """Per-step metrics per run, the held-out curves, the summary and a PNG of the curves."""
    from matplotlib.figure import Figure  # no pyplot: no global state, Agg via savefig

    curves = []
    for name, runs in study["runs"].items():
        (out / name).mkdir(parents=True, exist_ok=True)
        for run in runs:
            write_atomic(out / name / f"seed-{run['seed']}.jsonl", jsonl_text(run["steps"]))
            curves += [{"estimator": name, "seed": run["seed"], **point} for point in run["curve"]]
    write_atomic(out / "curves.jsonl", jsonl_text(curves))
    write_json(
        out / "summary.json",
        {key: study[key] for key in ("config", "untrained_reward", "image_entropy_by_tier", "summary")},
    )
    figure = Figure(figsize=(7, 4.5))
    axes = figure.subplots()
    for name, runs in study["runs"].items():
        steps = [point["step"] for point in runs[0]["curve"]]
        rewards = np.array([[point["reward"] for point in run["curve"]] for run in runs])
        mean = rewards.mean(0)
        axes.plot(steps, mean, label=name)
        axes.fill_between(steps, rewards.min(0), rewards.max(0), alpha=0.15)
    axes.set_xlabel("GRPO step")
    axes.set_ylabel("held-out expected reward")
    axes.set_title(f"advantage estimators, mean and range over {study['config']['seeds']} seeds")
    axes.legend()
    figure.savefig(out / "reward_curves.png", dpi=120, bbox_inches="tight")


def main() -> None:
    args = benchmark_args(
        __doc__, "2 seeds of 80 steps (seconds)", {"seeds": 2, "steps": 80}, seeds=10, steps=400, out=""
    )
    out = Path(args.out) if args.out else None
    if out is not None:
        try:
            check_out_folder(out)
        except EmbodiaError as problem:
            raise SystemExit(f"error: {problem}") from None
    study_module = import_from_tests("difficulty_study")
    config = study_module.StudyConfig(seeds=args.seeds, steps=args.steps)
    study = study_module.run_study(config)
    summary = study["summary"]
    print(
        f"untrained held-out reward {study['untrained_reward']:.3f}; image entropy by tier (bits): "
        + ", ".join(f"{tier} {bits:.2f}" for tier, bits in study["image_entropy_by_tier"].items())
    )
    print("estimator  final reward (± std, seeds)  easy   medium hard   auc     max|A|  mean max|A|")
    for name, row in summary.items():
        print(
            f"{name:9}  {row['final_reward']:.4f} ± {row['reward_std_across_seeds']:.4f}{'':12}"
            f"{row['final_reward_easy']:.3f}  {row['final_reward_medium']:.3f}  "
            f"{row['final_reward_hard']:.3f}  {row['reward_auc']:.4f} {row['max_abs_advantage']:6.2f}  "
            f"{row['mean_max_abs_advantage']:6.2f}"
        )
    if out is not None:
        write_out(out, study)
        print(f"metrics and reward_curves.png in {out}")
    result: dict[str, Any] = {
        f"{name}_{key}": float(f"{row[key]:.4g}") for name, row in summary.items() for key in REPORTED
    }
    result.update(
        untrained_reward=float(f"{study['untrained_reward']:.4g}"),
        seeds=config.seeds,
        steps=config.steps,
        durian_levels=config.durian_levels,
        seconds=round(study["seconds"], 1),
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
