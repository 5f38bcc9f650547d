"""Issue #26's side-by-side tables: calibration against early-exit failure prediction as proxies
for the compute an early-exit network saves; DiffThinker-style diffusion reasoning against a
random solver and a text policy trained by SFT then GRPO; and a CMI-style reward model trained on
synthetic preference pairs.

    python benchmarks/eefp_diffusion_cmi.py [--quick] [--sections early_exit,diffusion,cmi] [--seeds N] ...

``--sections`` runs some of the three parts (default: all).

**EEFP** (``evals/early_exit.py``, ``docs/early_exit.md``): the study of
:func:`embodia.evals.early_exit.run_early_exit_study` over ``--seeds`` seeds of every dataset
(scikit-learn's digits, puzzle close-ups) and architecture (CNN, ViT): per network, the heads as
trained (``baseline``), temperature-scaled (``calibrated``), retrained by cross-entropy
(``ce-heads``) and retrained with the failure-prediction term (``eefp``). Keys, per
``DATASET_ARCH_METHOD``: ``_acc25``, ``_acc50``, ``_acc75`` (accuracy at that share of the full
MACs; null when even the first head costs more), ``_ece``, ``_eefp`` and ``_efficiency``, means
over the seeds; and over every method-against-baseline change, the rank correlation of the
efficiency gained with the change in EEFP (``eefp_efficiency_corr``) and in ECE
(``ece_efficiency_corr``), with the Pearson values beside (``*_pearson``) and the number of
changes (``correlation_points``). ``early_exit_s``: the study's wall time.

**DiffThinker** (``evals/diffusion_reasoning.py``, ``docs/diffusion_reasoning.md``): the study
of :func:`embodia.evals.diffusion_reasoning.run_diffusion_study` on 5x5 mazes over ``--seeds``
seeds, on 200 held-out mazes, means over seeds: the diffusion reasoner's first-sample accuracy
at 4 sampling steps (``diffthinker_maze_acc``), its best-of-4 by the checker
(``diffthinker_best_of_4_acc``), its accuracy and seconds per answer at 1, 2, 4 and 8 steps
(``diffthinker_acc_steps_K``, ``diffthinker_s_per_answer_steps_K``); the random solver
(``random_maze_acc``); the text policy trained by SFT then GRPO on the same instances
(``grpo_text_maze_acc``, ``grpo_text_s_per_answer``); the text policy choosing among the four
diffusion samples (``collaboration_maze_acc``); each side's training seconds
(``diffthinker_train_s``, ``grpo_text_train_s``). ``diffusion_s``: the study's wall time.

**CMI** (``evals/reward_bench.py``, ``docs/rewards.md``): the reward study of
:func:`embodia.evals.reward_bench.run_reward_study` over ``--cmi_seeds`` seeds (each its own
training and held-out pairs; ``--cmi_train_pairs`` pairs, ``--cmi_steps`` steps,
``--cmi_test_pairs`` held-out pairs), means over the seeds: held-out pairwise accuracy,
ties counting one half, of the trained model (``cmi_musicality_acc``, ``cmi_alignment_acc`` and their mean
``cmi_pairwise_acc``) and of its untrained start (``cmi_untrained_musicality_acc``,
``cmi_untrained_alignment_acc``); the always-tie baseline scores 0.5 by construction. The
trained model's clip scores against the pseudo-labels: ``cmi_musicality_spearman``,
``_pearson``, ``_kendall`` and the same for alignment.
``cmi_pairwise_acc_per_seed``: each seed's mean pairwise accuracy.
``cmi_pairs_per_s``: held-out pairs scored per second by seed 0's trained model (both clips,
batches of 25, rendering excluded). ``cmi_s``: the study's wall time.

``--quick``: the digits CNN alone, three seeds and shorter training; one DiffThinker seed at a
tenth of the training on 40 mazes; one reward model trained on 64 pairs for 30 steps and measured
on 50 (about a minute in all: the numbers only show that every part runs).
The last line printed is one JSON object with every key.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import benchmark_args, log


def early_exit(args: Any, folder: Path) -> dict[str, Any]:
    from embodia.evals.early_exit import DATASETS, EarlyExitSettings, run_early_exit_study

    quick = bool(args.quick)
    settings = EarlyExitSettings(
        datasets=("digits",) if quick else DATASETS,
        architectures=("cnn",) if quick else ("cnn", "vit"),
        seeds=tuple(range(int(args.seeds))),
        train_steps=int(args.train_steps),
        finetune_steps=int(args.finetune_steps),
    )
    started = time.perf_counter()
    summary = run_early_exit_study(settings, folder / "early-exit")
    out: dict[str, Any] = {"early_exit_s": time.perf_counter() - started}
    for network, row in summary["networks"].items():
        for method, measured in row["methods"].items():
            key = f"{network.replace('/', '_')}_{method.replace('-', '_')}"
            for budget, accuracy in measured["accuracy_at"].items():
                out[f"{key}_acc{round(float(budget) * 100)}"] = accuracy
            for name in ("ece", "eefp", "efficiency"):
                out[f"{key}_{name}"] = measured[name]
    for proxy in ("eefp", "ece"):
        correlation = summary[f"{proxy}_efficiency"]
        out[f"{proxy}_efficiency_corr"] = correlation["spearman"]
        out[f"{proxy}_efficiency_pearson"] = correlation["pearson"]
    out["correlation_points"] = summary["points"]
    return out


def diffusion(args: Any, folder: Path) -> dict[str, Any]:
    from embodia.evals.diffusion_reasoning import DiffusionStudySettings, run_diffusion_study

    quick = bool(args.quick)
    settings = DiffusionStudySettings(seeds=tuple(range(int(args.seeds))))
    if quick:
        settings = DiffusionStudySettings(
            seeds=(0,),
            train_instances=1000,
            train_steps=60,
            batch_size=32,
            test_instances=40,
            text_sft_instances=100,
            text_sft_steps=10,
            text_grpo_steps=1,
        )
    started = time.perf_counter()
    summary = run_diffusion_study(settings, folder / "diffusion")
    out: dict[str, Any] = {"diffusion_s": time.perf_counter() - started}
    by_steps = summary["accuracy_by_sampling_steps"]
    out["diffthinker_maze_acc"] = summary["diffusion_first_sample_accuracy"]
    out[f"diffthinker_best_of_{settings.samples}_acc"] = summary["diffusion_best_of_n_accuracy"]
    for steps, accuracy in by_steps.items():
        out[f"diffthinker_acc_steps_{steps}"] = accuracy
        out[f"diffthinker_s_per_answer_steps_{steps}"] = summary["seconds_per_answer_by_sampling_steps"][
            steps
        ]
    out["random_maze_acc"] = summary["random_accuracy"]
    out["grpo_text_maze_acc"] = summary["text_accuracy"]
    out["grpo_text_s_per_answer"] = summary["text_seconds_per_answer"]
    out["collaboration_maze_acc"] = summary["collaboration_accuracy"]
    out["diffthinker_train_s"] = summary["diffusion_train_seconds"]
    out["grpo_text_train_s"] = summary["text_train_seconds"]
    return out


def cmi(args: Any, folder: Path) -> dict[str, Any]:
    import statistics

    from embodia.evals.music_data import preference_pairs
    from embodia.evals.reward_bench import RewardStudySettings, bench_pair, run_reward_study
    from embodia.policies.rewards.cmi import load_reward_model, score_pairs

    started = time.perf_counter()
    per_seed: list[dict[str, Any]] = []
    for seed in range(int(args.cmi_seeds)):
        settings = RewardStudySettings(
            train_pairs=int(args.cmi_train_pairs),
            test_pairs=int(args.cmi_test_pairs),
            steps=int(args.cmi_steps),
            seed=seed,
        )
        summary = run_reward_study(settings, folder / f"cmi-{seed}")
        numbers: dict[str, Any] = {}
        for stage, prefix in (("trained", "cmi"), ("untrained", "cmi_untrained")):
            for dimension in ("musicality", "alignment"):
                numbers[f"{prefix}_{dimension}_acc"] = summary[stage][dimension]["accuracy"]
        numbers["cmi_pairwise_acc"] = (numbers["cmi_musicality_acc"] + numbers["cmi_alignment_acc"]) / 2
        for dimension in ("musicality", "alignment"):
            for name, value in summary["trained"][dimension]["score_agreement"].items():
                numbers[f"cmi_{dimension}_{name}"] = value
        per_seed.append(numbers)
    out: dict[str, Any] = {"cmi_s": time.perf_counter() - started, "cmi_seeds": len(per_seed)}
    for key in per_seed[0]:
        values = [numbers[key] for numbers in per_seed]
        out[key] = None if None in values else statistics.fmean(values)
    out["cmi_pairwise_acc_per_seed"] = [numbers["cmi_pairwise_acc"] for numbers in per_seed]
    model = load_reward_model(folder / "cmi-0" / "model")
    items = preference_pairs(12345, 50)
    pairs = [bench_pair(item, folder, 16_000, f"pair {k + 1}") for k, item in enumerate(items)]
    import torch

    with torch.no_grad():
        score_pairs(model, pairs[:25])  # warm-up
        started = time.perf_counter()
        for start in range(0, len(pairs), 25):
            score_pairs(model, pairs[start : start + 25])
    out["cmi_pairs_per_s"] = len(pairs) / (time.perf_counter() - started)
    return out


SECTIONS = {"early_exit": early_exit, "diffusion": diffusion, "cmi": cmi}


def main() -> None:
    args = benchmark_args(
        __doc__,
        "the digits CNN alone, three seeds, shorter training; one short DiffThinker seed; "
        "one reward model on 64 pairs, 30 steps",
        {
            "seeds": 3,
            "train_steps": 300,
            "finetune_steps": 100,
            "cmi_train_pairs": 64,
            "cmi_test_pairs": 50,
            "cmi_steps": 30,
            "cmi_seeds": 1,
        },
        seeds=3,
        train_steps=600,
        finetune_steps=200,
        cmi_train_pairs=800,
        cmi_test_pairs=200,
        cmi_steps=600,
        cmi_seeds=3,
        sections=",".join(SECTIONS),
    )
    chosen = [name.strip() for name in str(args.sections).split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown or not chosen:
        raise SystemExit(f"--sections takes some of {', '.join(SECTIONS)}; got {args.sections!r}")
    result: dict[str, Any] = {"quick": bool(args.quick), "sections": chosen}
    with tempfile.TemporaryDirectory() as folder:
        for name in chosen:
            log(name)
            result |= SECTIONS[name](args, Path(folder))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
