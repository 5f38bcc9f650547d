"""Perception models of issue #25, side by side in one process: hallucination detection and
guided decoding, IDEAL fusion, the bitwise tokenizer and the MAA adapters' cost.

    python benchmarks/perception.py [--quick] [--seeds N] [--train_steps N] [--captions N] ...

**Hallucination** (``evals/hallucination.py``): for each seed, a tiny VLM
(``CAPTIONER_SHAPE``: a 2-layer CLIP tower on 84-pixel images, a 4-layer Qwen2 decoder,
random weights) is trained from scratch for ``--train_steps`` on ``--train_records``
captioned simulator panoramas with embodia's SFT recipe, then its greedy captions of
``--captions`` held-out panoramas (other houses) are labelled against the render's semantics
and every mention is scored by InsLen,
HaloProbe (fitted on the captions of ``--captions`` other scenes) and the attention-mass
baseline. AUROC with real mentions positive (``inslen_auroc`` at the layers and λ chosen on
the probe captions, ``inslen_reference_auroc`` at the reference's, ``haloprobe_auroc``,
``attention_auroc``; HaloProbe's two parts alone: ``haloprobe_balanced_auroc``,
``haloprobe_prior_auroc``; each part of InsLen at the reference's layers:
``inslen_lens_weight_auroc``, ``inslen_local_auroc``, ...); CHAIR of the greedy captions, of
HaloProbe-guided decoding (the hallucination-aware beam search with ``--beams`` beams and
``--guidance_weight``, captions naming as many objects as the greedy one) and of post-hoc removal
(``greedy_chair_i``, ``guided_chair_i``, ``removed_chair_i``, with ``*_mentions`` per caption);
caption-based POPE accuracy on the adversarial split. Means over seeds, per-seed values beside.
Scoring throughput on the held-out captions of the first seed: captions per second scored by
InsLen (one forward pass each) and by HaloProbe (the pass with attention maps, the signals and
the probe) (``inslen_captions_per_s``, ``haloprobe_captions_per_s``).

**Fusion** (``perception/fusion``): ``fusion_512_ms``, the median time of fusing one 512x512
infrared-visible pair with an IDEAL model (conditions, policy and mix), over ``--repeats``
calls after warm-up, on one torch thread.

**Tokenizer** (``perception/tokenizers``): encode and decode images per second of the bitwise
tokenizer on a batch of renders (``tokenizer_encode_images_per_s``, ``tokenizer_decode_images_per_s``).

**MAA** (``evals/robustness.py``): images per second through the study's tiny ViT, frozen and
with the adapters (``maa_frozen_images_per_s``, ``maa_adapted_images_per_s``).

The last line printed is one JSON object with every key.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import benchmark_args, log


def hallucination(seeds: int, args: Any, folder: Path) -> dict[str, Any]:
    from embodia.evals.hallucination import HallucinationStudySettings, run_hallucination_study
    from embodia.policies.tiny_models import CAPTIONER_SHAPE, build_tiny_vlm

    summaries = []
    for seed in range(seeds):
        model = build_tiny_vlm(folder / f"captioner-{seed}", seed=seed, shape=CAPTIONER_SHAPE)
        settings = HallucinationStudySettings(
            model=f"hf:{model}",
            train_records=int(args.train_records),
            train_steps=int(args.train_steps),
            captions=int(args.captions),
            probe_captions=int(args.captions),
            num_beams=int(args.beams),
            guidance_weight=float(args.guidance_weight),
            seed=seed,
        )
        started = time.perf_counter()
        summaries.append(run_hallucination_study(settings, folder / f"study-{seed}"))
        log(f"hallucination seed {seed}: {time.perf_counter() - started:.0f} s")
    values: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        values.setdefault(key, []).append(float(value))

    for summary in summaries:
        detection = summary["detection"]
        for key, name in (
            ("inslen", "inslen"),
            ("inslen_reference", "inslen-reference"),
            ("haloprobe", "haloprobe"),
            ("haloprobe_balanced", "haloprobe-balanced"),
            ("haloprobe_prior", "haloprobe-prior"),
            ("attention", "attention-baseline"),
        ):
            if name in detection:
                add(f"{key}_auroc", detection[name]["auroc"])
        if "weight" in detection.get("inslen", {}):
            add("inslen_weight", detection["inslen"]["weight"])  # λ chosen on the probe captions
        for kind in ("greedy", "guided", "removed"):
            add(f"{kind}_chair_i", summary[kind]["chair_i"])
            add(f"{kind}_chair_s", summary[kind]["chair_s"])
            add(f"{kind}_mentions", summary[kind]["mentions_per_caption"])
            add(f"{kind}_recall", summary[kind]["recall"])
            add(f"{kind}_pope_adversarial_acc", summary[kind]["pope"]["adversarial"]["accuracy"])
        for part, value in summary.get("inslen_parts_auroc", {}).items():
            add(f"inslen_{part}_auroc", value)
        add("train_loss_first", summary["train_loss_first"])
        add("train_loss_last", summary["train_loss_last"])
        if "simpson" in summary:
            add("simpson_paradox", summary["simpson"]["paradox"])
    result: dict[str, Any] = {key: statistics.fmean(v) for key, v in values.items()}
    result |= {
        f"{key}_per_seed": v for key, v in values.items() if key.endswith(("auroc", "chair_i", "weight"))
    }
    result["hallucination_seeds"] = seeds
    result |= scoring_throughput(folder / "study-0")
    return result


def scoring_throughput(study: Path) -> dict[str, float]:
    """Captions per second scored by InsLen and by HaloProbe, over the study's held-out captions."""
    import numpy as np

    from embodia.core.runs import read_run_records
    from embodia.evals.hallucination import SPLIT_SEEDS, load_captioner
    from embodia.evals.hallucination_data import CAPTION_PROMPT, caption_source
    from embodia.perception.hallucination.detectors import inslen_scores, token_signals
    from embodia.perception.hallucination.haloprobe import HaloProbe, mention_features
    from embodia.perception.hallucination.mentions import repeated
    from embodia.perception.hallucination.signals import caption_pass

    config = json.loads((study / "eval" / "summary.json").read_text())["settings"]
    processor, model = load_captioner(config["model"])
    probe = HaloProbe.load(study / "eval")
    scenes = caption_source(config["source"])
    items = []
    for record in read_run_records(study / "eval" / "captions.jsonl"):
        if record["split"] == "test" and record["mentions"]:
            image, _ = scenes.scene(config["seed"] * 10 + SPLIT_SEEDS["test"], record["index"])
            items.append((image, record["caption"], scenes.find_mentions(record["caption"])))

    def inslen_pass(image: Any, caption: str, mentions: Any) -> None:
        inslen_scores(caption_pass(model, processor, image, CAPTION_PROMPT, caption, mentions))

    def haloprobe_pass(image: Any, caption: str, mentions: Any) -> None:
        scored = caption_pass(model, processor, image, CAPTION_PROMPT, caption, mentions, attentions=True)
        features = np.stack([mention_features(rows) for rows in token_signals(scored)])
        positions = [tokens[0] - scored.caption_start for tokens in scored.mention_tokens]
        probe.predict(features, positions, repeated(mentions))

    out = {}
    for name, score in (("inslen", inslen_pass), ("haloprobe", haloprobe_pass)):
        score(*items[0])  # warm-up
        started = time.perf_counter()
        for item in items:
            score(*item)
        out[f"{name}_captions_per_s"] = len(items) / (time.perf_counter() - started)
    return out


def fusion(repeats: int) -> dict[str, float]:
    import torch

    from embodia.perception.fusion.model import fusion_benchmark_case

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tensors are small: a second thread only adds hand-offs
    try:
        fuse = fusion_benchmark_case(512)
        for _ in range(3):
            fuse()
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            fuse()
            times.append(1000 * (time.perf_counter() - started))
    finally:
        torch.set_num_threads(threads)
    return {
        "fusion_512_ms": statistics.median(times),
        "fusion_512_ms_min": min(times),
        "fusion_repeats": repeats,
    }


def tokenizer() -> dict[str, float]:
    from embodia.evals.tokenizer_study import tokenizer_throughput

    measured = tokenizer_throughput()
    return {f"tokenizer_{key}": value for key, value in measured.items()}


def adapters() -> dict[str, float]:
    from embodia.evals.robustness import adapter_overhead

    measured = adapter_overhead()
    return {f"maa_{key}": value for key, value in measured.items()}


def main() -> None:
    args = benchmark_args(
        __doc__,
        "one hallucination seed of a short training, fewer captions and fusion repeats (about a minute)",
        {
            "seeds": 1,
            "train_steps": 200,
            "train_records": 400,
            "captions": 30,
            "beams": 2,
            "guidance_weight": 1.0,
            "repeats": 5,
        },
        seeds=2,
        train_steps=1200,
        train_records=6000,
        captions=150,
        beams=4,
        guidance_weight=1.0,
        repeats=30,
    )
    result: dict[str, Any] = {"quick": bool(args.quick)}
    with tempfile.TemporaryDirectory() as folder:
        result |= hallucination(int(args.seeds), args, Path(folder))
    log("fusion")
    result |= fusion(int(args.repeats))
    log("tokenizer")
    result |= tokenizer()
    log("adapters")
    result |= adapters()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
