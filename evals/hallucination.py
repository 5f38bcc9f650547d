"""``embodia eval hallucination``: how often a VLM's captions name objects that are not there,
how well InsLen, HaloProbe and the attention-mass baseline tell those mentions apart, and
whether HaloProbe-guided decoding lowers the rate.

The images are captioned scenes whose objects are known exactly
(:mod:`embodia.evals.hallucination_data`), so every mention is labelled real or hallucinated
without a judge. A run has two sets of scenes, drawn from different seeds:

- **probe** scenes (``probe_captions``): their greedy captions, labelled, fit HaloProbe
  (saved as ``haloprobe.json`` in the run folder);
- **test** scenes (``captions``): their greedy captions are labelled and every mention is
  scored by each detector, one forward pass per caption; detection is measured with real
  mentions as the positive class (AUROC, AUPR, FPR@95%TPR); CHAIR and caption-based POPE
  (a question is answered "yes" when the caption names the object) are measured on them.

With ``guided`` the test scenes are captioned again by HaloProbe-guided decoding (a beam search
that scores each object as it is named; among the captions naming as many objects as the greedy
caption: equal caption length) and by post-hoc removal of the
mentions HaloProbe flags; CHAIR and POPE are measured on both.

The run folder holds ``captions.jsonl`` (one record per captioned scene, written as each is
done), ``haloprobe.json``, ``guided.jsonl`` and ``summary.json``; a resumed run captions only
the scenes without a record. Each scene is one unit of a
:class:`~embodia.core.scale_out.WorkerPool` (here, or on Ray).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from embodia.core.limits import check_range, check_seed
from embodia.core.runs import RecordLog, RunFolder, jsonl_text, read_run_records, runner, write_atomic
from embodia.core.scale_out import LOCAL, Backend, Unit, WorkerPool
from embodia.evals.hallucination_data import (
    CAPTION_PROMPT,
    CaptionSource,
    Key,
    caption_records,
    caption_source,
)
from embodia.perception.hallucination.decoding import (
    greedy_caption,
    guided_search,
    haloprobe_risk,
    probe_predictions,
    remove_flagged,
)
from embodia.perception.hallucination.detectors import (
    INSLEN_PARTS,
    InsLenConfig,
    InsLenParts,
    attention_scores,
    inslen_grid,
    inslen_grid_parts,
    inslen_layers,
    inslen_search_grid,
    signal_names,
    token_signals,
)
from embodia.perception.hallucination.haloprobe import HaloProbe, mention_features, simpson_report
from embodia.perception.hallucination.mentions import HallucinationError, Mention, repeated
from embodia.perception.hallucination.metrics import chair, detection_scores, pope
from embodia.perception.hallucination.signals import caption_pass
from embodia.policies.recipes.sft import SFTSettings, run_sft
from embodia.policies.spec import parse_policy_spec

CAPTIONS = "captions.jsonl"
GUIDED = "guided.jsonl"
SUMMARY = "summary.json"
DETECTORS: tuple[str, ...] = ("inslen", "haloprobe", "attention-baseline")
SPLIT_SEEDS = {"probe": 1, "test": 2}
"""Offsets of each split's scene seed from the run's seed (seed x 10 + offset)."""
POPE_SPLITS: tuple[str, ...] = ("random", "popular", "adversarial")
INSLEN_LAYERS: tuple[str, ...] = ("reference", "probe")


@dataclass(frozen=True)
class HallucinationEvalSettings:
    """One hallucination evaluation (module docstring)."""

    model: str
    """The VLM: ``hf:DIR``, a local image-text-to-text model with its processor."""
    source: str = "simulator"
    """The captioned scenes: ``simulator`` (panoramas) or ``clevr`` (:data:`CAPTION_SOURCES`)."""
    detectors: tuple[str, ...] = DETECTORS
    """Which detectors to measure: ``inslen``, ``haloprobe``, ``attention-baseline``."""
    captions: int = 200
    """Test scenes captioned and scored."""
    probe_captions: int = 200
    """Scenes whose captions fit HaloProbe (used when ``haloprobe`` is measured or ``guided``)."""
    guided: bool = False
    """Also caption the test scenes by HaloProbe-guided decoding and post-hoc removal."""
    num_beams: int = 4
    """Guided decoding's beams (each grows by its ``num_beams`` most likely next tokens)."""
    guidance_weight: float = 1.0
    """Guided decoding's weight on the mentions' evidence of being real (log-odds against the
    prior) beside the caption's log-likelihood
    (0: a plain beam search)."""
    flag_threshold: float = 0.5
    """Post-hoc removal drops mentions whose p(hallucinated) exceeds it."""
    inslen_layers: str = "reference"
    """InsLen's layers and λ: ``reference`` (the reference's choice for LLaVA-1.5, layers as
    fractions of the depth, λ = 0.4) or ``probe`` (the layers (ℓ_v, ℓ_t, ℓ_i) and λ of
    :func:`inslen_search_grid` whose AUROC on the probe captions is highest; the reference's
    choice is reported beside)."""
    max_new_tokens: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if parse_policy_spec(self.model)[0] != "hf":
            raise HallucinationError(
                f"the detectors read a local transformers VLM's hidden states: hf:DIR, got {self.model!r}"
            )
        caption_source(self.source)
        unknown = [d for d in self.detectors if d not in DETECTORS]
        if unknown or not self.detectors:
            raise HallucinationError(
                f"unknown detector {', '.join(map(repr, unknown)) or '(none given)'}; "
                f"known: {', '.join(DETECTORS)}"
            )
        check_range("captions", self.captions, 2, 100_000, HallucinationError)
        check_range("probe_captions", self.probe_captions, 2, 100_000, HallucinationError)
        check_range("num_beams", self.num_beams, 2, 64, HallucinationError)
        if not 0 <= self.guidance_weight <= 100:
            raise HallucinationError(f"guidance_weight must be in [0, 100]; got {self.guidance_weight!r}")
        if not 0 < self.flag_threshold < 1:
            raise HallucinationError(f"flag_threshold must be in (0, 1); got {self.flag_threshold!r}")
        if self.inslen_layers not in INSLEN_LAYERS:
            raise HallucinationError(
                f"inslen_layers must be one of {', '.join(INSLEN_LAYERS)}; got {self.inslen_layers!r}"
            )
        check_range("max_new_tokens", self.max_new_tokens, 1, 4096, HallucinationError)
        check_seed("seed", self.seed, HallucinationError)

    @property
    def scenes(self) -> CaptionSource:
        return caption_source(self.source)

    @property
    def needs_probe(self) -> bool:
        return self.guided or "haloprobe" in self.detectors or self.searches_inslen_layers

    @property
    def fits_haloprobe(self) -> bool:
        return self.guided or "haloprobe" in self.detectors

    @property
    def searches_inslen_layers(self) -> bool:
        return "inslen" in self.detectors and self.inslen_layers == "probe"


# --------------------------------------------------------------------------- the units


def load_captioner(spec: str) -> tuple[Any, Any]:
    """The processor and model of ``hf:DIR``, with eager attention (the detectors read
    attention maps)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    directory = Path(parse_policy_spec(spec)[1])
    if not (directory / "config.json").is_file():
        raise HallucinationError(f"{directory} holds no transformers model (no config.json)")
    try:
        processor = AutoProcessor.from_pretrained(directory)
        model = AutoModelForImageTextToText.from_pretrained(directory, attn_implementation="eager").eval()
    except (OSError, ValueError, KeyError) as error:
        raise HallucinationError(
            f"{directory} is not an image-text-to-text model with a processor: {error}"
        ) from error
    if getattr(processor, "image_processor", None) is None:
        raise HallucinationError(f"the processor in {directory} takes no images")
    return processor, model


def _mention_rows(mentions: Sequence[Mention], offsets: Sequence[int]) -> list[dict[str, Any]]:
    flags = repeated(mentions)
    return [
        {
            "text": m.text,
            "key": list(m.key) if isinstance(m.key, tuple) else m.key,
            "hallucinated": m.hallucinated,
            "position": offset,
            "repeat": flag,
        }
        for m, offset, flag in zip(mentions, offsets, flags, strict=True)
    ]


def caption_unit(
    settings: HallucinationEvalSettings, processor: Any, model: Any, split: str, index: int
) -> dict[str, Any]:
    """Caption one scene greedily, label its mentions and score them (one forward pass)."""
    scenes = settings.scenes
    image, objects = scenes.scene(settings.seed * 10 + SPLIT_SEEDS[split], index)
    caption = greedy_caption(model, processor, image, CAPTION_PROMPT, max_new_tokens=settings.max_new_tokens)
    mentions = scenes.label_mentions(caption, scenes.keys(objects))
    record: dict[str, Any] = {
        "split": split,
        "index": index,
        "caption": caption,
        "objects": sorted(map(list, scenes.keys(objects))),
        "mentions": [],
    }
    if not mentions:
        return record
    scored = caption_pass(model, processor, image, CAPTION_PROMPT, caption, mentions, attentions=True)
    rows = _mention_rows(mentions, [tokens[0] - scored.caption_start for tokens in scored.mention_tokens])
    signals = token_signals(scored)
    columns: dict[str, Sequence[float]] = {"attention-baseline": attention_scores(scored)}
    parts: list[InsLenParts] = []
    search: list[list[float]] = []
    if "inslen" in settings.detectors:
        parts = inslen_grid_parts(scored, InsLenConfig(), [inslen_layers(InsLenConfig(), scored.layers)])[0]
        columns["inslen"] = [p.score for p in parts]
        if settings.searches_inslen_layers:
            search = inslen_grid(scored, InsLenConfig(), inslen_search_grid(scored.layers))
    for i, row in enumerate(rows):
        row["features"] = mention_features(signals[i]).tolist()
        row["scores"] = {name: float(values[i]) for name, values in columns.items()}
        if parts:
            row["inslen_parts"] = {name: float(value) for name, value in asdict(parts[i]).items()}
        if search:
            # six significant digits: only the scores' order matters, and the grid is large
            row["inslen_grid"] = [float(f"{choice[i]:.6g}") for choice in search]
    record["mentions"] = rows
    return record


def _caption_worker(
    settings: HallucinationEvalSettings, loaded: tuple[Any, Any] | None = None
) -> Callable[[tuple[str, int], Any], dict[str, Any]]:
    processor, model = loaded if loaded is not None else load_captioner(settings.model)

    def work(payload: tuple[str, int], _: Any) -> dict[str, Any]:
        return caption_unit(settings, processor, model, *payload)

    return work


def _guided_worker(
    settings: HallucinationEvalSettings, loaded: tuple[Any, Any] | None = None
) -> Callable[[tuple[int, str], Any], dict[str, Any]]:
    processor, model = loaded if loaded is not None else load_captioner(settings.model)

    def work(payload: tuple[int, str], probe_values: Mapping[str, Any]) -> dict[str, Any]:
        index, greedy = payload
        probe = HaloProbe(**probe_values)
        scenes = settings.scenes
        image, objects = scenes.scene(settings.seed * 10 + SPLIT_SEEDS["test"], index)
        guided = guided_search(
            model,
            processor,
            image,
            CAPTION_PROMPT,
            scenes.find_mentions,
            haloprobe_risk(model, processor, probe, image, CAPTION_PROMPT),
            num_beams=settings.num_beams,
            weight=settings.guidance_weight,
            max_new_tokens=settings.max_new_tokens,
            same_mentions_as=greedy,
        )
        mentions = scenes.find_mentions(greedy)
        risk = probe_predictions(model, processor, probe, image, CAPTION_PROMPT, greedy, mentions)[
            "posterior"
        ]
        removed = remove_flagged(
            greedy, mentions, risk.tolist(), scenes.caption_without, settings.flag_threshold
        )
        return {
            "index": index,
            "guided": guided.caption,
            "candidates": guided.candidates,
            "removed": removed,
            "greedy_risk": risk.tolist(),
            "objects": sorted(map(list, scenes.keys(objects))),
        }

    return work


# --------------------------------------------------------------------------- the report


def _mentions_of(record: Mapping[str, Any]) -> list[Mention]:
    return [Mention(m["text"], 0, 0, tuple(m["key"]), bool(m["hallucinated"])) for m in record["mentions"]]


def _keys(objects: Sequence[Sequence[str]]) -> set[Key]:
    return {tuple(o) for o in objects}


@dataclass(frozen=True)
class PopeCounts:
    """How often each object, and each pair of objects, is in the probe scenes: POPE's
    ``popular`` and ``adversarial`` absent objects are drawn by them."""

    frequency: Mapping[Key, int]
    together: Mapping[frozenset[Key], int]

    @classmethod
    def of(cls, scenes: Iterable[set[Key]]) -> PopeCounts:
        frequency: Counter[Key] = Counter()
        together: Counter[frozenset[Key]] = Counter()
        for keys in scenes:
            frequency.update(keys)
            together.update(frozenset(pair) for pair in combinations(sorted(keys), 2))
        return cls(frequency, together)


def pope_questions(
    objects: Sequence[Sequence[str]],
    split: str,
    vocabulary: Sequence[Key],
    counts: PopeCounts,
    rng: np.random.Generator,
) -> list[tuple[Key, bool]]:
    """POPE's questions for one scene: each present object, and as many absent ones of the
    ``vocabulary`` drawn ``random``ly, the most ``popular`` in the probe scenes, or
    ``adversarial``: those most often seen together with the present ones (POPE's rule), a
    key sharing a word with a present one ("red sphere" beside a "red cube") first."""
    present = _keys(objects)
    absent = [key for key in vocabulary if key not in present]
    if split == "random":
        picks = rng.choice(len(absent), size=min(len(present), len(absent)), replace=False)
        chosen = [absent[int(i)] for i in picks]
    else:
        if split == "popular":
            absent.sort(key=lambda key: (-counts.frequency.get(key, 0), key))
        else:
            absent.sort(
                key=lambda key: (
                    -any(set(key) & set(p) for p in present),
                    -sum(counts.together.get(frozenset((key, p)), 0) for p in present),
                    key,
                )
            )
        chosen = absent[: len(present)]
    return [(key, True) for key in sorted(present)] + [(key, False) for key in chosen]


def caption_pope(
    scenes: CaptionSource,
    captions: Sequence[tuple[str, Sequence[Sequence[str]]]],
    counts: PopeCounts,
    seed: int,
) -> dict[str, Any]:
    """POPE from captions: "is there a X?" answered yes when the caption names X, per split."""
    out = {}
    for split in POPE_SPLITS:
        rng = np.random.default_rng([seed, POPE_SPLITS.index(split)])
        answers, truths = [], []
        for caption, objects in captions:
            named = {m.key for m in scenes.find_mentions(caption)}
            for key, present in pope_questions(objects, split, scenes.vocabulary, counts, rng):
                answers.append(key in named)
                truths.append(present)
        out[split] = pope(answers, truths)
    return out


def fit_probe(records: Sequence[Mapping[str, Any]], layers_heads: tuple[int, int] | None) -> HaloProbe:
    rows = [m for r in records for m in r["mentions"]]
    if not rows:
        raise HallucinationError("the probe captions name no objects: HaloProbe has nothing to fit")
    names = []
    if layers_heads is not None:
        signals = signal_names(*layers_heads)
        names = [f"mean/{n}" for n in signals] + [f"min/{n}" for n in signals]
    return HaloProbe.fit(
        np.array([m["features"] for m in rows]),
        [m["position"] for m in rows],
        [m["repeat"] for m in rows],
        [m["hallucinated"] for m in rows],
        feature_names=names,
    )


def _model_shape(spec: str) -> tuple[int, int] | None:
    import json

    config = json.loads((Path(parse_policy_spec(spec)[1]) / "config.json").read_text(encoding="utf-8"))
    text = config.get("text_config", config)
    layers, heads = text.get("num_hidden_layers"), text.get("num_attention_heads")
    return (int(layers), int(heads)) if isinstance(layers, int) and isinstance(heads, int) else None


def summarise(
    settings: HallucinationEvalSettings,
    records: Sequence[Mapping[str, Any]],
    probe: HaloProbe | None,
    guided: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    scenes = settings.scenes
    test = [r for r in records if r["split"] == "test"]
    counts = PopeCounts.of(_keys(r["objects"]) for r in records if r["split"] == "probe")
    rows = [m for r in test for m in r["mentions"]]
    labels = [bool(m["hallucinated"]) for m in rows]
    detection: dict[str, Any] = {}
    both = any(labels) and not all(labels)
    for name in settings.detectors:
        if not both:
            break
        if name == "haloprobe":
            assert probe is not None
            p = probe.predict(
                np.array([m["features"] for m in rows]),
                [m["position"] for m in rows],
                [m["repeat"] for m in rows],
            )
            detection[name] = detection_scores(list(1 - p["posterior"]), labels)
            detection["haloprobe-balanced"] = detection_scores(list(1 - p["balanced"]), labels)
            detection["haloprobe-prior"] = detection_scores(list(1 - p["prior"]), labels)
        elif name == "inslen" and settings.searches_inslen_layers:
            chosen = _best_inslen_choice([m for r in records if r["split"] == "probe" for m in r["mentions"]])
            detection[name] = detection_scores([m["inslen_grid"][chosen] for m in rows], labels)
            detection["inslen-reference"] = detection_scores([m["scores"][name] for m in rows], labels)
            shape = _model_shape(settings.model)
            layers, weight = inslen_search_grid(shape[0] if shape else 0)[chosen]
            detection[name].update(layers=list(layers), weight=weight)
        else:
            detection[name] = detection_scores([m["scores"][name] for m in rows], labels)
    summary: dict[str, Any] = {
        "settings": _plain(settings),
        "detection": detection,
        "detection_note": "real mentions are the positive class; scores are higher for real objects"
        if both
        else "the test captions hold only one class of mention: detection cannot be measured",
        "greedy": {
            **chair((_mentions_of(r), _keys(r["objects"])) for r in test),
            "pope": caption_pope(scenes, [(r["caption"], r["objects"]) for r in test], counts, settings.seed),
        },
    }
    if "inslen" in settings.detectors and both:
        # which of InsLen's premises hold on this model: each part's AUROC, the reference's layers
        summary["inslen_parts_auroc"] = {
            part: detection_scores([m["inslen_parts"][part] for m in rows], labels)["auroc"]
            for part in INSLEN_PARTS
        }
    if probe is not None and both:
        strata = probe.stratum([m["position"] for m in rows], [m["repeat"] for m in rows])
        attention = [m["scores"]["attention-baseline"] for m in rows]
        summary["simpson"] = simpson_report(attention, labels, strata)
    if guided:
        by_index = {int(r["index"]): r for r in test}
        for kind in ("guided", "removed"):
            pairs = [(g[kind], g["objects"]) for g in guided]
            summary[kind] = {
                **chair((scenes.label_mentions(c, o), _keys(o)) for c, o in pairs),
                "pope": caption_pope(scenes, pairs, counts, settings.seed),
            }
        summary["guided"]["mentions_equal_to_greedy"] = sum(
            len(scenes.find_mentions(g["guided"])) == len(by_index[int(g["index"])]["mentions"])
            for g in guided
        ) / len(guided)
    return summary


def _best_inslen_choice(mentions: Sequence[Mapping[str, Any]]) -> int:
    """The index of the InsLen choice (layers and λ) with the highest AUROC on ``mentions`` (the
    probe captions'); the first when they hold one class only."""
    labels = [bool(m["hallucinated"]) for m in mentions]
    if all(labels) or not any(labels):
        return 0
    choices = len(mentions[0]["inslen_grid"])
    aurocs = [
        detection_scores([m["inslen_grid"][c] for m in mentions], labels)["auroc"] for c in range(choices)
    ]
    return int(np.argmax(aurocs))


def _plain(settings: HallucinationEvalSettings) -> dict[str, Any]:
    values = asdict(settings)
    values["detectors"] = list(settings.detectors)
    return values


@runner
def run_hallucination_eval(
    settings: HallucinationEvalSettings,
    out: Path,
    *,
    resume: bool = False,
    backend: Backend = LOCAL,
    on_record: Callable[[Mapping[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Caption, label, score and (with ``guided``) re-caption the scenes (module docstring);
    returns the summary (also ``summary.json``)."""
    folder = RunFolder(out, CAPTIONS)
    config = _plain(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    loaded = load_captioner(settings.model) if backend.kind == "local" else None
    splits = (["probe"] if settings.needs_probe else []) + ["test"]
    counts = {"probe": settings.probe_captions, "test": settings.captions}
    kept = [r for r in folder.kept_records() if r.get("split") in splits and isinstance(r.get("index"), int)]
    done = {(r["split"], r["index"]): r for r in kept}
    todo = [
        Unit(f"{split}-{i:05d}", (split, i))
        for split in splits
        for i in range(counts[split])
        if (split, i) not in done
    ]
    with (
        folder.recording(kept, {"settings": config}) as log,
        WorkerPool(partial(_caption_worker, settings, loaded), backend) as pool,
    ):

        def record(_: str, row: dict[str, Any]) -> None:
            log.append(row)
            done[row["split"], row["index"]] = row
            if on_record is not None:
                on_record(row)

        pool.run(todo, record)
    records = [done[split, i] for split in splits for i in range(counts[split])]
    probe = None
    if settings.fits_haloprobe:
        probe = fit_probe([r for r in records if r["split"] == "probe"], _model_shape(settings.model))
        probe.save(folder.out)
    guided: list[dict[str, Any]] = []
    if settings.guided:
        assert probe is not None
        guided_log = folder.out / GUIDED

        previous = {int(r["index"]): r for r in (read_run_records(guided_log) if guided_log.exists() else [])}
        greedy = {int(r["index"]): r["caption"] for r in records if r["split"] == "test"}
        todo_guided = [
            Unit(f"guided-{i:05d}", (i, greedy[i])) for i in range(settings.captions) if i not in previous
        ]
        with (
            RecordLog(guided_log, list(previous.values())) as log,
            WorkerPool(partial(_guided_worker, settings, loaded), backend) as pool,
        ):

            def keep(_: str, row: dict[str, Any]) -> None:
                log.append(row)
                previous[int(row["index"])] = row

            pool.run(todo_guided, keep, shared=asdict(probe))
        guided = [previous[i] for i in range(settings.captions)]
    summary = summarise(settings, records, probe, guided)
    folder.finish(SUMMARY, summary)
    return summary


# --------------------------------------------------------------------------- the study


@dataclass(frozen=True)
class HallucinationStudySettings:
    """Train a VLM to caption the scenes for a few minutes (embodia's SFT recipe), then
    evaluate it (:func:`run_hallucination_eval`, guided decoding included)."""

    model: str
    """The VLM to train: ``hf:DIR`` (e.g. a tiny random-weight build)."""
    source: str = "simulator"
    """The captioned scenes it trains and is evaluated on (:data:`CAPTION_SOURCES`)."""
    train_records: int = 6000
    train_steps: int = 1200
    learning_rate: float = 1e-3
    batch_size: int = 16
    captions: int = 200
    probe_captions: int = 200
    num_beams: int = 4
    guidance_weight: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_range("train_records", self.train_records, 1, 1_000_000, HallucinationError)
        check_range("train_steps", self.train_steps, 1, 1_000_000, HallucinationError)
        self.eval_settings(self.model)  # the evaluation's own checks now

    def eval_settings(self, model: str) -> HallucinationEvalSettings:
        return HallucinationEvalSettings(
            model=model,
            source=self.source,
            captions=self.captions,
            probe_captions=self.probe_captions,
            guided=True,
            inslen_layers="probe",
            num_beams=self.num_beams,
            guidance_weight=self.guidance_weight,
            seed=self.seed,
        )


@runner
def run_hallucination_study(
    settings: HallucinationStudySettings, out: Path, *, resume: bool = False
) -> dict[str, Any]:
    """``out/train`` (the SFT run on ``train_records`` captioned scenes of their own seed),
    ``out/eval`` (the evaluation of the trained model) and ``out/summary.json`` (the
    evaluation's summary with the training's first and last loss)."""
    folder = RunFolder(out, "study.jsonl")
    config = asdict(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    out = folder.out
    with folder.recording(folder.kept_records(), {"settings": config}) as log:
        data = out / "data"
        records_file = data / "train.jsonl"
        if not records_file.exists():
            scenes = caption_source(settings.source)
            records = caption_records(scenes, data, settings.seed * 10 + 9, settings.train_records)
            write_atomic(records_file, jsonl_text(records))
        sft_settings = SFTSettings(
            model=settings.model,
            data=str(records_file),
            max_steps=settings.train_steps,
            learning_rate=settings.learning_rate,
            batch_size=settings.batch_size,
            logging_steps=20,
            save_steps=200,
            seed=settings.seed,
        )
        trained = run_sft(sft_settings, out / "train", resume=(out / "train").exists())
        log.append({"stage": "train", "policy": trained["policy"]})
        evaluation = run_hallucination_eval(
            settings.eval_settings(str(trained["policy"])), out / "eval", resume=(out / "eval").exists()
        )
        log.append({"stage": "eval"})
    losses = [r["loss"] for r in read_run_records(out / "train" / "metrics.jsonl") if "loss" in r]
    summary = {**evaluation, "settings": config, "train_loss_first": losses[0], "train_loss_last": losses[-1]}
    folder.finish(SUMMARY, summary)
    return summary
