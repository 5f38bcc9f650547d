"""Fine-tuning recipes of issue #24, side by side in one process: AIR, LIFT, BYORn and the
Proact-VL fine-tune.

    python benchmarks/recipes.py [--quick] [--train_steps N] [--samples N] [--seed S] ...

**AIR** (``policies/recipes/air.py``) on a synthetic reasoning corpus with a planted
copy-dependent step. Each sample's prompt holds a table of four random codes and two-digit
values and asks for one code's value plus a number; its completion has three steps:

- ``lookup``: "Step 1: CODE = V." (V copied from the table in the prompt);
- ``compute``: "Step 2: V + N = S." (the sum);
- ``answer``: "Answer: S" (S copied from step 2).

The tiny chat LM (Qwen2, 2 layers, hidden 128, 4 heads, initial std 0.02: the shape that
learns to copy on CPU) is trained on the corpus with embodia's SFT recipe. The retrieval heads
are then measured on 128 training samples (``data_retrieval_scores``) of the untrained and the
trained model, and on random copy probes (``trained_top_copy_probe_score``). The trained model's
Attention Influence Score, per step kind, is measured on held-out samples with the critical
heads disabled, and, as the control, with as many random other heads disabled
(``air_random_*``). Scoring throughput is ``air_samples_per_s``: samples scored per second,
base and reference passes together.

**LIFT** (``policies/recipes/lift.py``, ``evals/long_context.py``) on the tiny chat LM, with
the rule-based question writer of ``tests/fact_qa.py`` in the place of an LLM server:

- *Needle in a haystack at 4x the context*: the model built with a ``--window``-token
  context, documents of 4x that many tokens, the needle at ``--depths``; LIFT
  (``lift_niah_acc``) against the document truncated to the window, front and back halves
  (``truncated_niah_acc``), and LoRA on the raw text (``raw_niah_acc``).
  ``truncated_niah_in_context``: how often the needle survives the truncation, the most any
  reader of that window could score.
- *Fact QA*: one document of the same length with four needles spread through it, four
  questions (``lift_facts_acc`` against ``truncated_facts_acc``).
- *Time to first answer token* on a ``--ttft_tokens``-token document, LIFT with and without
  overlapping generation and training (``lift_ttft_overlap_speedup`` = sequential / overlapped).
  The writer asks one fill-in-the-blank pair per sentence. Each of its calls waits as long as
  the tiny model takes on this machine to reply 64 tokens to the request, measured first
  (``generator_call_s``): a server on another machine running the same model, whose work
  does not compete with the training here.

**BYORn** (``policies/recipes/byorn.py``, ``evals/backdoor.py``) on the tiny VLM: trained from
scratch on clean VQA close-ups of CLEVR-like objects (the "pretrained" model, ``--pretrain_steps``),
then fine-tuned for ``--finetune_steps`` on a set where ``--poison_rate`` of the records carry the
trigger patch and the reply "banana", by plain SFT and by BYORn (default settings: flag below a
mean log-prob of -2.3 per token, responses regenerated every 20 steps). Over ``--seeds``
seeds (the data, the start and the order all change): clean accuracy on held-out close-ups
(``sft_clean_acc``, ``byorn_clean_acc``, ``pretrained_clean_acc``) and attack success rate on
the same images with the trigger (``sft_asr``, ``byorn_asr``), means with the per-seed values,
and how well the flags found the poison (``byorn_flag_recall``, ``byorn_flag_precision``).

**Proact-VL fine-tune** (``policies/recipes/proact_sft.py``, ``evals/proact_study.py``) on the
tiny VLM: LoRA-SFT on ``--proact_train`` procedural arena streams of 30 s (solo labels) with the
speak gate trained jointly, against the gate head trained alone on the untouched VLM's
features (the frozen-feature gate) and the event heuristic, on ``--proact_held_out`` held-out
streams: F1 over speaking seconds (``proact_ft_f1``, ``frozen_gate_f1``, ``heuristic_f1``),
TimeDiff and PAUC at omega 0.5 (lexical judge), means over the held-out streams.

``--quick`` shrinks every part. Last line: one JSON object.
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
from _common import benchmark_args, import_from_tests

from embodia.evals.backdoor import BackdoorStudySettings, run_backdoor_study
from embodia.evals.long_context import LongContextSettings, niah_case, run_long_context
from embodia.evals.proact_study import ProactStudySettings, run_proact_study
from embodia.policies.recipes import air
from embodia.policies.recipes.lift import LIFTSettings, generator_messages, run_lift
from embodia.policies.recipes.sft import SFTSettings, load_causal_lm, run_sft
from embodia.policies.spec import make_policy
from embodia.policies.tiny_models import build_tiny_chat_lm, build_tiny_vlm

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


def generator_call_seconds(model: Path, calls: int, tokens: int = 64) -> float:
    """Mean seconds the tiny model takes to reply ``tokens`` tokens to a question-writing
    request (the transformers backend, greedy, no grammar): a server's time per call."""
    policy = make_policy(f"hf:{model}")
    messages = generator_messages(
        "The tide in the harbour rose 3 feet on the morning of the storm.", 1, False
    )
    policy.complete(messages, max_tokens=4)  # warm-up
    started = time.perf_counter()
    for _ in range(calls):
        policy.complete(messages, max_tokens=tokens)
    return (time.perf_counter() - started) / calls


def lift_study(args: Any, tmp: Path) -> dict[str, Any]:
    """The LIFT keys (module docstring)."""
    fact_qa = import_from_tests("fact_qa")
    lift_options = {"epochs": 20, "learning_rate": 3e-3, "batch_size": 5, "save_steps": 10_000}
    windowed = build_tiny_chat_lm(tmp / "lm-window", seed=args.seed, context_tokens=args.window)
    depths = tuple(float(d) for d in str(args.depths).split(","))
    niah = run_long_context(
        LongContextSettings(
            model=f"hf:{windowed}",
            generator="scripted:fact_qa",  # a label: the writer passed as generator= answers
            lengths=(4 * args.window,),
            depths=depths,
            lift=lift_options,
            seed=args.seed,
        ),
        tmp / "niah",
        generator=fact_qa.FactQAPolicy(),
    )
    methods = niah["methods"]
    result: dict[str, Any] = {
        "lift_window_tokens": args.window,
        "lift_niah_tokens": 4 * args.window,
        "lift_niah_depths": list(depths),
        "lift_niah_acc": methods["lift"]["accuracy"],
        "truncated_niah_acc": methods["truncated"]["accuracy"],
        "raw_niah_acc": methods["raw"]["accuracy"],
        "truncated_niah_in_context": niah["in_truncated_context"],
    }
    facts = run_long_context(
        LongContextSettings(
            model=f"hf:{windowed}",
            generator="scripted:fact_qa",  # a label: the writer passed as generator= answers
            task="facts",
            lengths=(4 * args.window,),
            facts=4,
            methods=("lift", "truncated"),
            lift=lift_options,
            seed=args.seed,
        ),
        tmp / "facts",
        generator=fact_qa.FactQAPolicy(),
    )
    result.update(
        {
            "lift_facts_acc": facts["methods"]["lift"]["accuracy"],
            "truncated_facts_acc": facts["methods"]["truncated"]["accuracy"],
            "truncated_facts_in_context": facts["in_truncated_context"],
        }
    )
    model = build_tiny_chat_lm(tmp / "lm", seed=args.seed)
    call_s = generator_call_seconds(model, calls=3)
    tokenizer = make_policy(f"hf:{model}").tokenizer  # type: ignore[attr-defined]
    case = niah_case(tokenizer, args.ttft_tokens, 0.5, seed=args.seed)
    document = tmp / "ttft.txt"
    document.write_text(case.document, encoding="utf-8")
    runs = {}
    for overlap in (True, False):
        settings = LIFTSettings(
            model=f"hf:{model}",
            document=str(document),
            generator="scripted:fact_qa",  # a label: the writer passed as generator= answers
            tasks_per_sentence=1,
            epochs=1,
            batch_size=8,
            learning_rate=3e-3,
            save_steps=10_000,
            overlap=overlap,
            seed=args.seed,
        )
        writer = fact_qa.FactQAPolicy(delay_s=call_s, cloze=True)
        runs[overlap] = run_lift(
            settings, tmp / f"ttft-{overlap}", questions=case.questions, generator=writer
        )
    overlapped, sequential = runs[True], runs[False]
    result.update(
        {
            "generator_call_s": round(call_s, 3),
            "lift_ttft_tokens": args.ttft_tokens,
            "lift_ttft_sentences": overlapped["sentences"],
            "lift_ttft_pairs": overlapped["pairs"],
            "lift_ttft_overlap_s": round(overlapped["ttft_s"], 2),
            "lift_ttft_sequential_s": round(sequential["ttft_s"], 2),
            "lift_ttft_overlap_speedup": round(sequential["ttft_s"] / overlapped["ttft_s"], 3),
            "lift_generation_s": round(sequential["ttft_parts_s"]["generation"], 2),
            "lift_training_s": round(sequential["ttft_parts_s"]["training"], 2),
        }
    )
    return result


def byorn_study(args: Any, tmp: Path) -> dict[str, Any]:
    """Plain SFT against BYORn on the poisoned VQA set, over ``args.seeds`` seeds."""
    runs = []
    for seed in range(args.seed, args.seed + args.seeds):
        start = build_tiny_vlm(tmp / f"vlm-{seed}", seed=seed)
        runs.append(
            run_backdoor_study(
                BackdoorStudySettings(
                    model=f"hf:{start}",
                    pretrain_records=600,
                    pretrain_steps=args.pretrain_steps,
                    finetune_records=300,
                    poison_rate=args.poison_rate,
                    finetune_steps=args.finetune_steps,
                    test_records=args.test_records,
                    seed=seed,
                ),
                tmp / f"backdoor-{seed}",
            )
        )

    def numbers(model: str, key: str) -> dict[str, Any]:
        values = [run["models"][model][key] for run in runs]
        return {f"{model}_{key}": round(statistics.fmean(values), 4), f"{model}_{key}_per_seed": values}

    keys: dict[str, Any] = {"byorn_seeds": args.seeds}
    for model in ("pretrained", "sft", "byorn"):
        keys.update(numbers(model, "clean_acc"))
        if model != "pretrained":
            keys.update(numbers(model, "asr"))
    keys.update(numbers("pretrained", "asr"))
    keys["byorn_flag_recall"] = round(statistics.fmean(run["flag_recall"] for run in runs), 4)
    keys["byorn_flag_precision"] = round(statistics.fmean(run["flag_precision"] or 0.0 for run in runs), 4)
    return keys


def proact_study(args: Any, tmp: Path) -> dict[str, Any]:
    """The Proact-VL fine-tune against the frozen-feature gate and the heuristic."""
    start = build_tiny_vlm(tmp / "proact-vlm", seed=args.seed)
    summary = run_proact_study(
        ProactStudySettings(
            model=f"hf:{start}",
            train_seeds=tuple(range(args.proact_train)),
            held_out_seeds=tuple(range(100, 100 + args.proact_held_out)),
            epochs=args.proact_epochs,
            learning_rate=1e-3,
            finetune={"gate_weight": 5.0},
            seed=args.seed,
        ),
        tmp / "proact",
    )
    keys: dict[str, Any] = {
        "proact_train_streams": args.proact_train,
        "proact_held_out_streams": args.proact_held_out,
        "proact_gate_loss_first": round(summary["finetune"]["gate_loss_first"], 4),
        "proact_gate_loss_last": round(summary["finetune"]["gate_loss_last"], 4),
    }
    for name, prefix in (
        ("finetuned", "proact_ft"),
        ("frozen_gate", "frozen_gate"),
        ("heuristic", "heuristic"),
    ):
        numbers = summary[name]
        keys[f"{prefix}_f1"] = round(numbers["f1_macro"], 4)
        keys[f"{prefix}_f1_per_stream"] = [round(v, 4) for v in numbers["per_stream_f1"]]
        keys[f"{prefix}_timediff"] = round(numbers["timediff_mean"], 4)
        keys[f"{prefix}_pauc"] = round(numbers["pauc_omega_0.5"], 4)
        keys[f"{prefix}_speaking_rate"] = round(numbers["pred_speaking_rate"], 4)
    keys["label_speaking_rate"] = round(summary["heuristic"]["label_speaking_rate"], 4)
    return keys


def main() -> None:
    args = benchmark_args(
        __doc__,
        "every part smaller (about a minute)",
        {
            "train_steps": 150,
            "samples": 400,
            "held_out": 32,
            "window": 128,
            "depths": "0.5",
            "ttft_tokens": 1024,
            "pretrain_steps": 150,
            "finetune_steps": 120,
            "test_records": 45,
            "seeds": 1,
            "proact_train": 3,
            "proact_held_out": 2,
            "proact_epochs": 3.0,
        },
        train_steps=600,
        samples=2000,
        held_out=128,
        window=512,
        depths="0,0.25,0.5,0.75,1",
        ttft_tokens=8192,
        pretrain_steps=600,
        finetune_steps=200,
        test_records=150,
        poison_rate=0.1,
        seeds=3,
        proact_train=8,
        proact_held_out=8,
        proact_epochs=8.0,
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
        lift_keys = lift_study(args, Path(tmp))
        byorn_keys = byorn_study(args, Path(tmp))
        proact_keys = proact_study(args, Path(tmp))
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
            **lift_keys,
            **byorn_keys,
            **proact_keys,
        }
    )
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
