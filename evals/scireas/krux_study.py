"""KRUX on a policy trained here: do knowledge ingredients raise a trained model's accuracy, and
does KRUX split what it gets wrong into missing knowledge and failed reasoning?

A policy with random weights gets every science question wrong with or without ingredients,
so KRUX says nothing about it. This study first teaches a chat LM, then measures it. It uses the
invented-element families (:mod:`embodia.evals.scireas.invented`), whose constants no model
knows unless it was taught them here. The elements fall into three pools:

- **taught** (the first ``taught`` elements): the training asks their constants directly ("how
  many protons does a Bakotium atom have?") and three quarters of their ion and mole questions,
  all without ingredients. Their knowledge is in the model's weights.
- **unseen** (the next ``unseen``): never in training.
- **practice** (every other element): ion and mole questions with their ingredients in the
  prompt, in random order. The model learns to read ingredients.

Every training answer is worked: the fact, the arithmetic, then ``Answer:`` (so the model must
surface a fact before computing with it). The held-out questions are, per family, taught
elements' questions the training never asked (the held-out quarter) and unseen elements'
questions. Each is measured by KRUX (:func:`~embodia.evals.scireas.krux.measure_item`): plainly,
then with its true ingredients in ``permutations`` orders.

Per seed the untrained start (the same model before training) is measured the same way. The
trivial baseline always gives the family's most common training answer
(:func:`majority_baseline`). The
expected picture, if KRUX separates what it claims to: unseen elements wrong plainly and right
with ingredients (*knowledge*); taught elements right plainly (*solved*); what stays wrong with
ingredients is arithmetic (*reasoning*), more of it in the multiplication family.

The folder holds ``items.jsonl`` (one line per seed, policy and question, written as it is
answered; ``resume=True`` keeps them and continues a seed's training from its last checkpoint),
``seed-N/sft/`` (the fine-tune's run folder with its ``metrics.jsonl``), ``seed-N/base/`` (the
untrained start, when the study built it) and ``summary.json``: per seed and policy the KRUX
summary by pool and family, and their means and spreads over seeds.
"""

from __future__ import annotations

import random
import statistics
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodia.core.chat import Policy
from embodia.core.limits import check_seed, check_whole
from embodia.core.runs import RunFolder, record_each, runner
from embodia.evals.scireas.invented import ELEMENTS, INVENTED, InventedQuestion, invented_element
from embodia.evals.scireas.items import ScienceItem
from embodia.evals.scireas.krux import SciReasSettings, measure_item, summarise
from embodia.evals.scireas.scoring import ScienceScoreError

RECORDS, SUMMARY = "items.jsonl", "summary.json"
POOLS = ("taught", "unseen")
POLICIES = ("untrained", "trained")
HELD_OUT_SHARE = 4
"""One question in this many about a taught element is held out of training."""
REPLY_TOKENS = 48
"""Tokens a reply may take: a worked answer ("Bakotium has 42 protons; 42 - 2 = 40. Answer: 40")
with room."""


@dataclass(frozen=True)
class KruxStudySettings:
    """``embodia eval krux-study`` (module docstring)."""

    seeds: tuple[int, ...] = (0, 1, 2)
    model: str = ""
    """The chat LM to fine-tune (``hf:DIR``); empty: a tiny random-weight one built per seed."""
    taught: int = 40
    """Elements whose constants the training teaches."""
    unseen: int = 40
    """Elements the training never mentions."""
    practice_questions: int = 4000
    """Training questions with their ingredients in the prompt, about practice elements."""
    fact_repeats: int = 6
    """Times each taught element's two constants are asked in training."""
    taught_questions: int = 1500
    """Training questions without ingredients about taught elements (never a held-out one)."""
    steps: int = 1500
    learning_rate: float = 1e-3
    batch_size: int = 16
    questions: int = 20
    """Held-out questions per family and pool."""
    permutations: int = 5
    """Orders of the ingredients each held-out question is asked with (KRUX averages over five)."""

    def __post_init__(self) -> None:
        check_whole(
            self,
            "taught",
            "unseen",
            "practice_questions",
            "fact_repeats",
            "taught_questions",
            "steps",
            "batch_size",
            "questions",
            "permutations",
            error=ScienceScoreError,
        )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ScienceScoreError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        for seed in self.seeds:
            check_seed("seed", seed, ScienceScoreError)
        if self.taught + self.unseen + 100 > ELEMENTS:
            raise ScienceScoreError(
                f"taught + unseen must leave at least 100 of the {ELEMENTS} invented elements for practice"
            )
        if not (0 < self.learning_rate <= 1):
            raise ScienceScoreError(f"learning_rate must be in (0, 1], got {self.learning_rate!r}")
        if self.model and not self.model.startswith("hf:"):
            raise ScienceScoreError(
                f"the study fine-tunes a local model: --model is hf:DIR, got {self.model!r}"
            )

    def pool(self, name: str) -> range:
        if name == "taught":
            return range(self.taught)
        if name == "unseen":
            return range(self.taught, self.taught + self.unseen)
        return range(self.taught + self.unseen, ELEMENTS)


def held_out(question: InventedQuestion) -> bool:
    """Whether a taught element's question is kept out of training (one in
    :data:`HELD_OUT_SHARE`, by a stable hash of its text)."""
    return zlib.crc32(question.question.encode()) % HELD_OUT_SHARE == 0


def worked_answer(family: str, drawn: InventedQuestion) -> str:
    """The training answer: the fact recalled, the arithmetic, then the answer line."""
    element = drawn.element
    if family == "invented_ions":
        charge = element.atomic_number - drawn.answer
        return (
            f"{element.name} has {element.atomic_number} protons; {element.atomic_number} - {charge} = "
            f"{drawn.answer}. Answer: {drawn.answer}"
        )
    moles = drawn.answer // element.molar_mass
    return (
        f"{element.name} has a molar mass of {element.molar_mass} g/mol; {moles} x {element.molar_mass} = "
        f"{drawn.answer}. Answer: {drawn.answer} g"
    )


def as_item(family: str, drawn: InventedQuestion, task: str, doc_id: str) -> ScienceItem:
    return ScienceItem(
        task,
        doc_id,
        drawn.question,
        drawn.answer,
        "numeric",
        unit=drawn.unit,
        tolerance=1e-6,
        ingredients=drawn.ingredients,
    )


def _chat(prompt: str, answer: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]}


def _fact_records(element_index: int) -> list[dict[str, Any]]:
    element = invented_element(element_index)
    return [
        _chat(
            f"How many protons does a {element.name} atom have?\n\n"
            "Reason step by step, then end with: Answer: <number>",
            f"{element.name} has {element.atomic_number} protons. Answer: {element.atomic_number}",
        ),
        _chat(
            f"What is the molar mass of {element.name}, in g/mol?\n\n"
            "Reason step by step, then end with: Answer: <number> in g/mol",
            f"{element.name} has a molar mass of {element.molar_mass} g/mol. "
            f"Answer: {element.molar_mass} g/mol",
        ),
    ]


def training_examples(settings: KruxStudySettings, seed: int) -> list[tuple[str, int, dict[str, Any]]]:
    """The fine-tune's examples (module docstring), shuffled by ``seed``: each one's family
    (``fact`` for a constant asked directly), answer and chat record."""
    rng = random.Random(f"krux-study/train/{seed}")
    families = list(INVENTED)
    practice, taught = list(settings.pool("practice")), list(settings.pool("taught"))
    examples = []
    for k in range(settings.practice_questions):
        family = families[k % len(families)]
        drawn = INVENTED[family](rng, practice)
        order = list(drawn.ingredients)
        rng.shuffle(order)
        record = _chat(as_item(family, drawn, family, str(k)).prompt(order), worked_answer(family, drawn))
        examples.append((family, drawn.answer, record))
    for index in taught:
        element = invented_element(index)
        facts = zip((element.atomic_number, element.molar_mass), _fact_records(index), strict=True)
        examples.extend(
            ("fact", answer, record) for answer, record in facts for _ in range(settings.fact_repeats)
        )
    asked = 0
    while asked < settings.taught_questions:
        family = families[asked % len(families)]
        drawn = INVENTED[family](rng, taught)
        if held_out(drawn):
            continue
        record = _chat(as_item(family, drawn, family, "").prompt(), worked_answer(family, drawn))
        examples.append((family, drawn.answer, record))
        asked += 1
    rng.shuffle(examples)
    return examples


def training_records(settings: KruxStudySettings, seed: int) -> list[dict[str, Any]]:
    """The fine-tune's chat records (:func:`training_examples`)."""
    return [record for _, _, record in training_examples(settings, seed)]


def majority_baseline(settings: KruxStudySettings, items: Sequence[ScienceItem]) -> dict[str, float]:
    """The trivial baseline: per held-out group, the accuracy of always giving the family's most
    common training answer, averaged over seeds (each seed trains on other questions)."""
    scores: dict[str, list[float]] = defaultdict(list)
    for seed in settings.seeds:
        answers: dict[str, Counter[int]] = defaultdict(Counter)
        for family, answer, _ in training_examples(settings, seed):
            answers[family][answer] += 1
        by_task: dict[str, list[bool]] = defaultdict(list)
        for item in items:
            family = item.task.split("/", 1)[1]
            by_task[item.task].append(item.answer == answers[family].most_common(1)[0][0])
        for task, hits in by_task.items():
            scores[task].append(statistics.fmean(hits))
    return {task: statistics.fmean(values) for task, values in sorted(scores.items())}


def held_out_items(settings: KruxStudySettings) -> list[ScienceItem]:
    """Per family and pool, ``questions`` distinct questions the training never asked (the same
    for every seed)."""
    items = []
    for family, draw in INVENTED.items():
        for pool in POOLS:
            rng = random.Random(f"krux-study/held-out/{family}/{pool}")
            elements = list(settings.pool(pool))
            seen: set[str] = set()
            attempts = 0
            while len(seen) < settings.questions:
                attempts += 1
                if attempts > 100 * settings.questions:
                    raise ScienceScoreError(
                        f"{pool} {family}: fewer than {settings.questions} distinct held-out questions exist "
                        f"over {len(elements)} elements; ask fewer --questions or use more elements"
                    )
                drawn = draw(rng, elements)
                if drawn.question in seen or (pool == "taught" and not held_out(drawn)):
                    continue
                seen.add(drawn.question)
                items.append(as_item(family, drawn, f"{pool}/{family}", str(len(seen) - 1)))
    return items


def _base_model(settings: KruxStudySettings, seed: int, seed_dir: Path) -> str:
    if settings.model:
        return settings.model
    from embodia.policies.tiny_models import build_tiny_chat_lm

    base = seed_dir / "base"
    if not (base / "config.json").is_file():
        # a small initial scale: the shipped tiny model's large one suits random replies, not training
        build_tiny_chat_lm(base, seed=seed, initializer_range=0.02)
    return f"hf:{base}"


def _train(settings: KruxStudySettings, seed: int, seed_dir: Path, base: str, resume: bool) -> str:
    from embodia.policies.recipes.sft import SFTSettings, run_sft

    sft = SFTSettings(
        model=base,
        data=tuple(training_records(settings, seed)),
        max_steps=settings.steps,
        learning_rate=settings.learning_rate,
        lr_scheduler="cosine",
        warmup_steps=min(20, settings.steps // 10),
        batch_size=settings.batch_size,
        max_length=256,
        logging_steps=max(1, settings.steps // 30),
        save_steps=max(1, settings.steps // 5),
        seed=seed,
    )
    summary = run_sft(sft, seed_dir / "sft", resume=resume and (seed_dir / "sft").exists())
    return str(summary["policy"])


def _mean_spread(values: Sequence[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "sd": statistics.pstdev(values) if len(values) > 1 else 0.0}


def summarise_study(
    records: Sequence[Mapping[str, Any]], settings: KruxStudySettings, krux: SciReasSettings
) -> dict[str, Any]:
    """Per seed and policy, KRUX's summary of each pool-and-family group; then, per policy and
    group, the mean and spread over seeds of plain accuracy, accuracy with ingredients, and the
    breakdown."""
    groups: dict[tuple[int, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        groups[(record["seed"], record["policy"], record["task"])].append(record)
    per_seed: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (seed, policy, task), rows in sorted(groups.items()):
        per_seed[f"{policy}/seed-{seed}"][task] = summarise(rows, krux)
    over_seeds: dict[str, dict[str, Any]] = {}
    for policy in POLICIES:
        for task in sorted({task for (_, p, task) in groups if p == policy}):
            runs = [per_seed[f"{policy}/seed-{s}"][task] for s in settings.seeds]
            with_kis = [r["oracle"] for r in runs]
            over_seeds[f"{policy}/{task}"] = {
                "plain_accuracy": _mean_spread([r["plain_accuracy"] for r in runs]),
                "oracle_accuracy": _mean_spread([r["accuracy"] for r in with_kis]),
                "gain": _mean_spread([r["gain"] for r in with_kis]),
                "breakdown": {
                    c: _mean_spread([r["breakdown"][c] for r in with_kis])
                    for c in ("solved", "knowledge", "reasoning", "hurt")
                },
            }
    return {"per_seed": dict(per_seed), "over_seeds": over_seeds}


@runner
def run_krux_study(
    settings: KruxStudySettings,
    out: Path,
    *,
    resume: bool = False,
    policy_for: Callable[[str], Policy] | None = None,
) -> dict[str, Any]:
    """Train and measure each seed (module docstring). ``policy_for`` makes a policy from a spec
    (default: :func:`~embodia.policies.spec.make_policy`)."""
    if policy_for is None:
        from embodia.policies.spec import make_policy

        policy_for = make_policy
    folder = RunFolder(out, RECORDS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    items = held_out_items(settings)
    krux = SciReasSettings(
        policy="", ingredients="oracle", permutations=settings.permutations, max_tokens=REPLY_TOKENS
    )
    units: list[tuple[int, str, ScienceItem]] = []
    for seed in settings.seeds:
        units.extend((seed, policy, item) for policy in POLICIES for item in items)
    policies: dict[tuple[int, str], Policy] = {}

    def policy(seed: int, which: str) -> Policy:
        if (seed, which) not in policies:
            seed_dir = folder.out / f"seed-{seed}"
            base = _base_model(settings, seed, seed_dir)
            spec = base if which == "untrained" else _train(settings, seed, seed_dir, base, resume)
            policies[(seed, which)] = policy_for(spec)
        return policies[(seed, which)]

    def measure(unit: tuple[int, str, ScienceItem]) -> dict[str, Any]:
        seed, which, item = unit
        target = policy(seed, which)
        record = measure_item(item, krux, target, target, None)
        return {**record, "key": _unit_key(unit), "seed": seed, "policy": which}

    done = record_each(folder, folder.config, units, _unit_key, measure)
    summary = summarise_study([done[_unit_key(u)] for u in units], settings, krux)
    summary["majority_baseline"] = majority_baseline(settings, items)
    summary["settings"] = folder.config
    folder.finish(SUMMARY, summary)
    return summary


def _unit_key(unit: tuple[int, str, ScienceItem]) -> str:
    seed, which, item = unit
    return f"{seed}/{which}/{item.key}"
