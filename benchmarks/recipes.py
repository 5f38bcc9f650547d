"""Fine-tuning recipes of issue #24, side by side in one process: so far AIR.

    python benchmarks/recipes.py [--quick] [--train_steps N] [--samples N] [--seed S]

**AIR** (``policies/recipes/air.py``) on a synthetic reasoning corpus with a planted
copy-dependent step. Each sample's prompt holds a table of four random codes and two-digit
values and asks for one code's value plus a number; its completion has three steps:

- ``lookup``: "Step 1: CODE = V." (V copied from the table in the prompt);
- ``compute``: "Step 2: V + N = S." (the sum);
- ``answer``: "Answer: S" (S copied from step 2).

The tiny chat LM (Qwen2, 2 layers, hidden 128, 4 heads, initial std 0.02: the shape that
learns to copy on CPU) is trained on the corpus with embodia's SFT recipe. The retrieval heads
are then measured on 128 training samples (``data_retrieval_scores``) of the untrained and the
trained model, and on random copy probes (``trained_top_copy_probe_score``). The trained model's Attention
Influence Score, per step kind, is measured on held-out samples with the critical heads
disabled, and, as the control, with as many random other heads disabled
(``air_random_*``). Scoring throughput is ``air_samples_per_s``: samples scored per second,
base and reference passes together.

``--quick`` trains for fewer steps on fewer samples (under a minute). Last line: one JSON
object.
"""

from __future__ import annotations

import json
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import benchmark_args

from embodia.policies.recipes import air
from embodia.policies.recipes.sft import SFTSettings, load_causal_lm, run_sft
from embodia.policies.tiny_models import build_tiny_chat_lm

STEP_KINDS = ("lookup", "compute", "answer")


def lookup_sample(rng: np.random.Generator) -> dict[str, str]:
    """One prompt/completion record of the corpus (module docstring)."""
    letters = list(string.ascii_lowercase)
    codes = ["".join(rng.choice(letters, 2)) + str(rng.integers(10)) for _ in range(4)]
    while len(set(codes)) < 4:
        codes = ["".join(rng.choice(letters, 2)) + str(rng.integers(10)) for _ in range(4)]
    values = rng.integers(10, 60, size=4)
    asked, plus = int(rng.integers(4)), int(rng.integers(1, 10))
    # "= V" in the table and in step 1, so the copied value is the same token in both
    table = ", ".join(f"{c} = {v}" for c, v in zip(codes, values, strict=True))
    value = int(values[asked])
    prompt = f"Table: {table}.\nWhat is {codes[asked]} + {plus}?\n"
    steps = [f"Step 1: {codes[asked]} = {value}.", f"Step 2: {value} + {plus} = {value + plus}."]
    completion = "\n".join(steps) + f"\n\nAnswer: {value + plus}"
    return {"prompt": prompt, "completion": completion}


def step_kind_scores(samples: list[air.SampleInfluence]) -> dict[str, float]:
    """Mean step score of each step kind over the samples (every sample has the three steps)."""
    return {
        kind: statistics.fmean(s.step_scores[index] for s in samples if len(s.step_scores) == 3)
        for index, kind in enumerate(STEP_KINDS)
    }


def main() -> None:
    args = benchmark_args(
        __doc__,
        "fewer training steps and samples (under a minute)",
        {"train_steps": 150, "samples": 400, "held_out": 32},
        train_steps=600,
        samples=2000,
        held_out=128,
        seed=0,
    )
    rng = np.random.default_rng(args.seed)
    train = tuple(lookup_sample(rng) for _ in range(args.samples))
    held_out = [lookup_sample(rng) for _ in range(args.held_out)]
    result: dict[str, Any] = {"quick": bool(args.quick), "train_steps": args.train_steps}
    with tempfile.TemporaryDirectory() as tmp:
        start = build_tiny_chat_lm(
            Path(tmp) / "start", seed=args.seed, attention_heads=4, initializer_range=0.02
        )
        tokenizer, untrained = load_causal_lm(f"hf:{start}")
        probe = list(train[:128])
        untrained_scores = air.data_retrieval_scores(untrained.eval(), tokenizer, probe)
        summary = run_sft(
            SFTSettings(
                model=f"hf:{start}",
                data=train,
                max_steps=args.train_steps,
                learning_rate=3e-3,
                lr_scheduler="constant",
                batch_size=16,
                logging_steps=50,
                save_steps=10_000,
                seed=args.seed,
            ),
            Path(tmp) / "sft",
        )
        tokenizer, model = load_causal_lm(summary["policy"])
        model.eval()
        scores = air.data_retrieval_scores(model, tokenizer, probe)
        copy_scores = air.retrieval_scores(model, tokenizer, seed=args.seed)
        heads = air.critical_heads(scores, 0.05, 1)
        others = [h for h in np.ndindex(scores.shape) if h not in heads]
        pick = np.random.default_rng(args.seed + 1).choice(len(others), size=len(heads), replace=False)
        random_heads = [tuple(int(v) for v in others[i]) for i in pick]
        began = time.perf_counter()
        critical = list(air.influence(model, tokenizer, held_out, heads))
        seconds = time.perf_counter() - began
        control = list(air.influence(model, tokenizer, held_out, random_heads))
    by_kind, control_kind = step_kind_scores(critical), step_kind_scores(control)
    result.update(
        {
            "sft_loss_first": round(summary["train_loss_first"], 4),
            "sft_loss_last": round(summary["train_loss_last"], 4),
            "untrained_top_retrieval_score": round(float(untrained_scores.max()), 4),
            "trained_top_retrieval_score": round(float(scores.max()), 4),
            "trained_top_copy_probe_score": round(float(copy_scores.max()), 4),
            "critical_heads": [list(h) for h in heads],
            "random_heads": [list(h) for h in random_heads],
            **{f"air_{kind}_step_score": round(value, 4) for kind, value in by_kind.items()},
            **{f"air_random_{kind}_step_score": round(value, 4) for kind, value in control_kind.items()},
            "air_sample_score_mean": round(statistics.fmean(s.score for s in critical), 4),
            "air_random_sample_score_mean": round(statistics.fmean(s.score for s in control), 4),
            "air_samples_per_s": round(len(held_out) / seconds, 2),
        }
    )
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
