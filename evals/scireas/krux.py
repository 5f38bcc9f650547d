"""KRUX: how much of a policy's failure on science questions is missing knowledge, and how much
is reasoning; and the SciReas-Pro rule that keeps the questions only more reasoning solves.

**Knowledge ingredients** (KIs) are atomic, answer-agnostic facts and formulas a question needs.
They come from two places:

- **oracle**: the generated problems carry their true ones
  (:mod:`embodia.evals.scireas.problems`);
- **extracted**: a reasoning trace (the ``tracer`` policy's answer, by default the target's own)
  is given to the ``extractor`` policy with :func:`extraction_messages`, which asks for a list
  of ingredients and no answer. :func:`parse_ingredients` reads the list, and
  :func:`drop_leaks` drops any ingredient that states the answer (its number, or its letter
  as a choice).

**The measurement** (:func:`run_krux`): each question is asked plainly, then with each source's
KIs placed before it, in ``permutations`` random orders (KRUX averages over five); accuracy is
the mean over the orders, and its spread over orders is reported. Each question is then
classed by what the KIs did to it (majority over the orders): *solved* (right without them),
*knowledge* (wrong without, right with: the knowledge was missing), *reasoning* (wrong with and
without: knowing was not enough) or *hurt* (right without, wrong with).

**SciReas-Pro** (:func:`run_pro_selection`): the questions one policy setting (``high``: more
reasoning, a larger model, a longer budget) answers right and another (``low``) wrong. With a
``judge`` policy, a second step (the paper's LLM judge) keeps only those the judge finds more
reasoning-intensive than an easy comparison: a question of the same task both settings solve
(another task's when the task has none), the two shown in an order drawn per question so the
judge's position bias does not decide (:func:`judge_messages`). The kept items go to
``pro.jsonl`` in embodia's item layout, with the judge's verdict, its explanation and the easy
comparison's key in ``extra``; every question's two verdicts, and every judgement, to
``selection.jsonl``.

Both runners write each question's record as it is answered and resume.
"""

from __future__ import annotations

import random
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from embodia.core.chat import Message, Policy
from embodia.core.limits import check_seed, check_whole
from embodia.core.runs import RunFolder, record_each, runner
from embodia.evals.scireas.benchmarks import FORMATS, load_items, write_items
from embodia.evals.scireas.items import ScienceItem, from_problem
from embodia.evals.scireas.problems import ALL_FAMILIES, problem_set
from embodia.evals.scireas.scoring import ScienceScoreError, read_choice

SOURCES = ("none", "oracle", "extracted", "both")
RECORDS, SUMMARY = "items.jsonl", "summary.json"
SELECTION, PRO = "selection.jsonl", "pro.jsonl"

EXTRACTION_INSTRUCTIONS = (
    "Below are a science question and a worked solution. List the knowledge ingredients the "
    "solution relies on: atomic facts, definitions, formulas and constants, each general enough "
    "to help with other questions. Do not state the answer, any value computed for this "
    "question, or which choice is right. Write one ingredient per line, each starting with '- '."
)


def extraction_messages(question: str, trace: str) -> list[Message]:
    """The extractor's prompt (module docstring)."""
    content = f"{EXTRACTION_INSTRUCTIONS}\n\nQuestion:\n{question.strip()}\n\nSolution:\n{trace.strip()}"
    return [{"role": "user", "content": content}]


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")


def parse_ingredients(reply: str, limit: int = 12) -> list[str]:
    """The bulleted or numbered lines of the extractor's reply, in order, without repeats,
    at most ``limit``."""
    found: list[str] = []
    for line in reply.splitlines():
        match = _BULLET.match(line)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found[:limit]


def drop_leaks(ingredients: Sequence[str], item: ScienceItem) -> list[str]:
    """``ingredients`` without those that give ``item``'s answer away (module docstring)."""
    if item.answer_type == "numeric":
        answer = float(item.answer)
        shown = {f"{answer:.{d}g}" for d in (2, 3, 4, 6)}
        pattern = re.compile(r"(?<![\d.])(" + "|".join(re.escape(s) for s in shown) + r")(?!\d)")
    elif item.answer_type == "choice":
        pattern = re.compile(
            rf"\b(?:answer|option|choice)\s*(?:is\s*)?\(?{re.escape(str(item.answer))}\b", re.I
        )
    else:
        # an exact answer, or an f1 reference: its text or, for a list, any of its elements
        texts = [str(a) for a in item.answer] if isinstance(item.answer, tuple) else [str(item.answer)]
        pattern = re.compile("|".join(re.escape(t) for t in texts if t.strip()), re.IGNORECASE)
    return [i for i in ingredients if not pattern.search(i)]


def check_source(source: str, layout: str, families: Sequence[str] = ()) -> None:
    """An error naming a question source that is neither ``generated`` nor a file, an
    unknown layout, or an unknown generated family."""
    unknown = [f for f in families if f not in ALL_FAMILIES]
    if unknown:
        raise ScienceScoreError(f"the generated families are {', '.join(ALL_FAMILIES)}; got {unknown[0]!r}")
    if families and source != "generated":
        raise ScienceScoreError("--families picks generated problems; it does not apply to a benchmark file")
    if layout not in FORMATS:
        raise ScienceScoreError(f"the benchmark layouts are {', '.join(FORMATS)}; got {layout!r}")
    if source != "generated" and not (Path(source).is_file() or Path(source).is_dir()):
        raise ScienceScoreError(f"--source is 'generated' or a benchmark file or folder; {source} is neither")


@dataclass(frozen=True)
class SciReasSettings:
    """``embodia eval scireas`` (module docstring)."""

    policy: str
    source: str = "generated"
    """``generated`` (the science problems) or a benchmark file."""
    layout: str = "items"
    """The benchmark file's layout (:data:`~embodia.evals.scireas.benchmarks.FORMATS`)."""
    items: int = 60
    first_seed: int = 0
    families: tuple[str, ...] = ()
    """The generated families asked, in turn (default: the six of
    :data:`~embodia.evals.scireas.problems.FAMILIES`)."""
    ingredients: str = "oracle"
    """Which KIs are given: none, oracle, extracted or both."""
    extractor: str | None = None
    """The policy that extracts KIs from a trace (default: the target policy)."""
    tracer: str | None = None
    """The policy whose trace KIs are extracted from (default: the target's own answer)."""
    permutations: int = 5
    max_tokens: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        check_whole(self, "items", "permutations", "max_tokens", error=ScienceScoreError)
        check_seed("first_seed", self.first_seed, ScienceScoreError)
        check_seed("seed", self.seed, ScienceScoreError)
        if self.ingredients not in SOURCES:
            raise ScienceScoreError(f"--ingredients is one of {', '.join(SOURCES)}; got {self.ingredients!r}")
        check_source(self.source, self.layout, self.families)


def science_items(
    source: str, layout: str, count: int, first_seed: int = 0, families: Sequence[str] = ()
) -> list[ScienceItem]:
    """The first ``count`` items of ``source`` (module docstring)."""
    items = (
        [from_problem(p) for p in problem_set(count, first_seed, families)]
        if source == "generated"
        else load_items(source, layout)[:count]
    )
    if not items:
        raise ScienceScoreError(f"{source} holds no items")
    return items


def _ask(policy: Policy, prompt: str, max_tokens: int) -> str:
    return policy.complete([{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0).text


def _orders(ingredients: Sequence[str], count: int, key: str) -> list[list[str]]:
    rng = random.Random(f"krux/{key}")
    orders = []
    for _ in range(count):
        order = list(ingredients)
        rng.shuffle(order)
        orders.append(order)
    return orders


def measure_item(
    item: ScienceItem,
    settings: SciReasSettings,
    policy: Policy,
    extractor: Policy,
    tracer: Policy | None,
) -> dict[str, Any]:
    """One question's record: its plain verdict, and per KI source the KIs and one verdict per
    order."""
    reply = _ask(policy, item.prompt(), settings.max_tokens)
    record: dict[str, Any] = {"key": item.key, "task": item.task, "plain": item.grade(reply), "reply": reply}
    sources = {"oracle": ["oracle"], "extracted": ["extracted"], "both": ["oracle", "extracted"]}.get(
        settings.ingredients, []
    )
    for source in sources:
        if source == "oracle":
            ingredients = list(item.ingredients)
        else:
            trace = reply if tracer is None else _ask(tracer, item.prompt(), settings.max_tokens)
            extracted = extractor.complete(
                extraction_messages(item.question, trace), max_tokens=settings.max_tokens, temperature=0.0
            ).text
            ingredients = drop_leaks(parse_ingredients(extracted), item)
        if not ingredients:
            record[source] = {"ingredients": [], "verdicts": None}
            continue
        verdicts = [
            item.grade(_ask(policy, item.prompt(order), settings.max_tokens))
            for order in _orders(ingredients, settings.permutations, f"{settings.seed}/{item.key}/{source}")
        ]
        record[source] = {"ingredients": ingredients, "verdicts": verdicts}
    return record


def _classify(plain: bool, verdicts: Sequence[bool]) -> str:
    helped = sum(verdicts) * 2 > len(verdicts)
    if plain:
        return "solved" if helped else "hurt"
    return "knowledge" if helped else "reasoning"


def summarise(records: Sequence[Mapping[str, Any]], settings: SciReasSettings) -> dict[str, Any]:
    """Accuracy plain and with each source's KIs (mean and spread over orders), the gain, the
    knowledge-vs-reasoning breakdown, and the same by task."""
    summary: dict[str, Any] = {
        "items": len(records),
        "plain_accuracy": statistics.fmean(r["plain"] for r in records),
    }
    for source in ("oracle", "extracted"):
        given = [r for r in records if isinstance(r.get(source), Mapping) and r[source]["verdicts"]]
        if not given:
            continue
        per_order = [
            statistics.fmean(r[source]["verdicts"][k] for r in given) for k in range(settings.permutations)
        ]
        plain = statistics.fmean(r["plain"] for r in given)
        with_kis = statistics.fmean(per_order)
        classes = Counter(_classify(r["plain"], r[source]["verdicts"]) for r in given)
        by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in given:
            by_task[r["task"]].append(r)
        summary[source] = {
            "items": len(given),
            "plain_accuracy": plain,
            "accuracy": with_kis,
            "accuracy_spread": statistics.pstdev(per_order),
            "gain": with_kis - plain,
            "mean_ingredients": statistics.fmean(len(r[source]["ingredients"]) for r in given),
            "breakdown": {
                c: classes.get(c, 0) / len(given) for c in ("solved", "knowledge", "reasoning", "hurt")
            },
            "by_task": {
                task: {
                    "items": len(rows),
                    "plain_accuracy": statistics.fmean(r["plain"] for r in rows),
                    "accuracy": statistics.fmean(statistics.fmean(r[source]["verdicts"]) for r in rows),
                }
                for task, rows in sorted(by_task.items())
            },
        }
    return summary


def _policy(given: Policy | None, spec: str) -> Policy:
    """``given`` when a caller passed one (tests, a program), else the policy ``spec`` names."""
    if given is not None:
        return given
    from embodia.policies.spec import make_policy

    return make_policy(spec)


@runner
def run_krux(
    settings: SciReasSettings,
    out: Path,
    *,
    resume: bool = False,
    policy: Policy | None = None,
    extractor: Policy | None = None,
    tracer: Policy | None = None,
) -> dict[str, Any]:
    """Measure every question (module docstring); the policies given stand in for the specs'."""
    folder = RunFolder(out, RECORDS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    items = science_items(
        settings.source, settings.layout, settings.items, settings.first_seed, settings.families
    )
    target = _policy(policy, settings.policy)
    extractor = _policy(extractor, settings.extractor) if settings.extractor else (extractor or target)
    tracer = _policy(tracer, settings.tracer) if settings.tracer else tracer
    done = record_each(
        folder,
        folder.config,
        items,
        lambda item: item.key,
        lambda item: measure_item(item, settings, target, extractor, tracer),
    )
    summary = summarise([done[i.key] for i in items], settings)
    summary["settings"] = folder.config
    folder.finish(SUMMARY, summary)
    return summary


JUDGE_INSTRUCTIONS = (
    "Below are two questions from the same benchmark. Which one is more reasoning-intensive: "
    "which needs more steps of reasoning (deriving, combining, computing) beyond recalling facts? "
    "Explain briefly, then end with: Answer: A or Answer: B"
)


def judge_messages(hard: ScienceItem, easy: ScienceItem, hard_first: bool) -> list[Message]:
    """The judge's prompt: the two questions as A and B (``hard`` first when ``hard_first``)."""
    first, second = (hard, easy) if hard_first else (easy, hard)
    content = (
        f"{JUDGE_INSTRUCTIONS}\n\nQuestion A:\n{first.question.strip()}\n\n"
        f"Question B:\n{second.question.strip()}"
    )
    return [{"role": "user", "content": content}]


def easy_comparison(item: ScienceItem, easy: Sequence[ScienceItem]) -> ScienceItem | None:
    """The question ``item`` is compared with: one of ``easy`` (solved by both settings) from
    its own task when there is one, else from any, drawn by ``item``'s key; None when
    ``easy`` is empty."""
    pool = [e for e in easy if e.task == item.task] or list(easy)
    return random.Random(f"pro-judge/{item.key}").choice(pool) if pool else None


def judge_item(
    item: ScienceItem, easy: Sequence[ScienceItem], judge: Policy, max_tokens: int
) -> dict[str, Any]:
    """The judge's record for one effort-selected question: whether it is the more
    reasoning-intensive of the pair (None when the reply names neither, or there is no
    comparison), the judge's explanation and the comparison's key."""
    comparison = easy_comparison(item, easy)
    record: dict[str, Any] = {
        "key": f"judge/{item.key}",
        "easy_comparison": None,
        "reasoning_intensive": None,
    }
    if comparison is None:
        return record
    hard_first = random.Random(f"pro-judge-order/{item.key}").random() < 0.5
    reply = judge.complete(
        judge_messages(item, comparison, hard_first), max_tokens=max_tokens, temperature=0.0
    ).text
    picked = read_choice(reply, "AB")
    record["easy_comparison"] = comparison.key
    record["reasoning_intensive"] = None if picked is None else picked == ("A" if hard_first else "B")
    record["reasoning_comparison_explanation"] = reply
    return record


@dataclass(frozen=True)
class ProSelectionSettings:
    """``embodia eval scireas-pro`` (module docstring)."""

    low: str
    high: str
    source: str = "generated"
    layout: str = "items"
    items: int = 60
    first_seed: int = 0
    families: tuple[str, ...] = ()
    low_max_tokens: int = 512
    high_max_tokens: int = 512
    judge: str | None = None
    """The policy that judges whether a kept question is reasoning-intensive; None: no judge."""
    judge_max_tokens: int = 512

    def __post_init__(self) -> None:
        check_whole(
            self, "items", "low_max_tokens", "high_max_tokens", "judge_max_tokens", error=ScienceScoreError
        )
        check_seed("first_seed", self.first_seed, ScienceScoreError)
        check_source(self.source, self.layout, self.families)


@runner
def run_pro_selection(
    settings: ProSelectionSettings,
    out: Path,
    *,
    resume: bool = False,
    low: Policy | None = None,
    high: Policy | None = None,
    judge: Policy | None = None,
) -> dict[str, Any]:
    """Keep the questions ``high`` solves and ``low`` does not, and with a judge those it finds
    reasoning-intensive (module docstring)."""
    folder = RunFolder(out, SELECTION)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    items = science_items(
        settings.source, settings.layout, settings.items, settings.first_seed, settings.families
    )
    low_policy, high_policy = _policy(low, settings.low), _policy(high, settings.high)

    def measure(item: ScienceItem) -> dict[str, Any]:
        return {
            "key": item.key,
            "low": item.grade(_ask(low_policy, item.prompt(), settings.low_max_tokens)),
            "high": item.grade(_ask(high_policy, item.prompt(), settings.high_max_tokens)),
        }

    judge = _policy(judge, settings.judge) if settings.judge else None
    kept = folder.kept_records()
    done = {str(r["key"]): r for r in kept if "key" in r}
    with folder.recording(kept, {"settings": folder.config}) as log:
        for item in items:
            if item.key not in done:
                done[item.key] = measure(item)
                log.append(done[item.key])
        chosen = [i for i in items if done[i.key]["high"] and not done[i.key]["low"]]
        if judge is not None:
            easy = [i for i in items if done[i.key]["high"] and done[i.key]["low"]]
            for item in chosen:
                key = f"judge/{item.key}"
                if key not in done:
                    done[key] = judge_item(item, easy, judge, settings.judge_max_tokens)
                    log.append(done[key])
    summary: dict[str, Any] = {
        "items": len(items),
        "low_accuracy": statistics.fmean(done[i.key]["low"] for i in items),
        "high_accuracy": statistics.fmean(done[i.key]["high"] for i in items),
        "effort_items": len(chosen),
    }
    if judge is not None:
        verdicts = [done[f"judge/{i.key}"] for i in chosen]
        summary["judge_unreadable"] = sum(v["reasoning_intensive"] is None for v in verdicts)
        summary["judge_no_comparison"] = sum(v["easy_comparison"] is None for v in verdicts)
        chosen = [
            replace(i, extra={**i.extra, **{k: v for k, v in done[f"judge/{i.key}"].items() if k != "key"}})
            for i in chosen
            if done[f"judge/{i.key}"]["reasoning_intensive"]
        ]
    write_items(chosen, folder.out / PRO)
    summary.update(
        {"pro_items": len(chosen), "pro_share": len(chosen) / len(items), "settings": folder.config}
    )
    folder.finish(SUMMARY, summary)
    return summary
