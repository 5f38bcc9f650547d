"""``embodia eval vocal``: ask a policy questions it can be graded on, with its confidence in
words; fit its marker profile (VOCAL) and set it, and two baselines, against the human mapping.

Per question (:func:`question_set`: puzzles written as text, DSR-Bench instances, or the
generated science problems of SciReas), the
policy answers greedily, the elicitation instructions appended
(:func:`~embodia.evals.uncertainty.extract.elicitation_prompt`), with token log-probabilities.
The answer is graded by the task's own checker. Its marker is the first one with a level after
the reply's last "Confidence:", else the reply's last marker with a level
(:func:`elicited_marker`). Two baselines need no words:

- **sample consistency**: ``consistency_samples`` more replies at ``temperature``; the share
  whose parsed answer equals the greedy reply's;
- **token probability**: the geometric mean of the greedy reply's token probabilities.

Each question's record goes to ``answers.jsonl`` as it is answered (a resumed run asks only the
questions left). The summary fits the profile (:func:`~embodia.evals.uncertainty.vocal.fit_profile`)
on the first ``calibration_share`` of the answers that carry a marker, and measures on the rest,
side by side: the human mapping, the learned one, and the two baselines (ECE, Brier, AUROC,
selective accuracy). It writes ``summary.json`` with the marker-level comparison with people
(with bootstrap intervals), ``markers.png`` (human against learned level per marker) and
``reliability.png`` (the reliability diagram of each confidence).

With ``readings``, the policy is also asked what probability each marker conveys, in a
speaker's words about a statement it cannot check (:func:`marker_readings`), and its readings
are set against the human levels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from embodia.core.chat import Message, Policy, check_temperature
from embodia.core.limits import check_seed, check_whole
from embodia.core.runs import RunFolder, record_each, runner
from embodia.evals.uncertainty.corpus import UncertaintyError, load_corpus
from embodia.evals.uncertainty.extract import MarkerLexicon, Mention, elicitation_prompt
from embodia.evals.uncertainty.vocal import (
    LOSSES,
    MarkerCounts,
    bootstrap_profile,
    calibration_report,
    compare_with_humans,
    fit_profile,
)

TASKS = ("puzzle", "dsr", "scireas")
ANSWERS, SUMMARY = "answers.jsonl", "summary.json"
MARKERS_PLOT, RELIABILITY_PLOT = "markers.png", "reliability.png"
_CONFIDENCE = re.compile(r"confidence\s*:", re.IGNORECASE)


@dataclass(frozen=True)
class VocalSettings:
    """``embodia eval vocal`` (module docstring)."""

    policy: str
    task: str = "puzzle"
    puzzle: str = "maze"
    """The puzzle asked (``task="puzzle"``): any puzzle written as text."""
    difficulty: str = "easy"
    questions: int = 100
    consistency_samples: int = 4
    temperature: float = 0.7
    max_tokens: int = 256
    calibration_share: float = 0.5
    loss: str = "log"
    shrinkage: float = 1.0
    monotone: bool = False
    bootstrap_rounds: int = 200
    readings: bool = False
    """Also ask the policy what probability each marker conveys (:func:`marker_readings`)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise UncertaintyError(f"--task is one of {', '.join(TASKS)}; got {self.task!r}")
        check_whole(self, "questions", "max_tokens", "bootstrap_rounds", error=UncertaintyError)
        check_whole(self, "consistency_samples", minimum=0, error=UncertaintyError)
        check_temperature(self.temperature)
        check_seed("seed", self.seed, UncertaintyError)
        if not 0 < self.calibration_share < 1:
            raise UncertaintyError(f"calibration_share is in (0, 1), got {self.calibration_share}")
        if self.loss not in LOSSES:
            raise UncertaintyError(f"the loss is one of {', '.join(LOSSES)}; got {self.loss!r}")
        if not (math.isfinite(self.shrinkage) and self.shrinkage >= 0):
            raise UncertaintyError(f"shrinkage must be >= 0, got {self.shrinkage}")
        if self.task == "puzzle":
            from embodia.envs.puzzles import make_task

            task = make_task(self.puzzle)
            if not task.drawn_as_text:
                raise UncertaintyError(f"the {self.puzzle} puzzle has no text drawing to ask a text policy")
            if self.difficulty not in task.difficulties:
                raise UncertaintyError(
                    f"unknown {self.puzzle} difficulty {self.difficulty!r}: expected one of "
                    f"{', '.join(task.difficulties)}"
                )


@dataclass(frozen=True)
class Question:
    """A question as messages, and how to grade a reply: ``grade(reply) -> (right, answer)``
    (the answer as the task parsed it, None when it could not)."""

    key: str
    messages: tuple[Message, ...]
    grade: Callable[[str], tuple[bool, Any]]


def _with_elicitation(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` with the elicitation instructions appended to the last one's text."""
    last = cast(Message, {**messages[-1], "content": elicitation_prompt(str(messages[-1]["content"]))})
    return (*messages[:-1], last)


def question_set(settings: VocalSettings) -> list[Question]:
    """The run's questions (module docstring), in a fixed order."""
    if settings.task == "puzzle":
        import gymnasium

        from embodia.envs.puzzles.env import PuzzleEnv
        from embodia.policies.recipes.solutions import PUZZLE_ENV_ID

        env = gymnasium.make(PUZZLE_ENV_ID, task=settings.puzzle, difficulty=settings.difficulty, text=True)
        questions = []
        try:
            for seed in range(settings.seed, settings.seed + settings.questions):
                observation, _ = env.reset(options={"seed": seed})
                puzzle = env.unwrapped
                assert isinstance(puzzle, PuzzleEnv) and puzzle.instance is not None
                task, instance = puzzle.task, puzzle.instance

                def grade(reply: str, task: Any = task, instance: Any = instance) -> tuple[bool, Any]:
                    parsed = task.parse(reply, instance)
                    return bool(task.score(reply, instance).correct), parsed.value if parsed.ok else None

                content = str(observation["prompt"])
                questions.append(
                    Question(
                        f"{settings.puzzle}/{seed}",
                        _with_elicitation([{"role": "user", "content": content}]),
                        grade,
                    )
                )
        finally:
            env.close()
        return questions
    if settings.task == "scireas":
        return _science_questions(settings)
    return _dsr_questions(settings)


def _science_questions(settings: VocalSettings) -> list[Question]:
    """The generated science problems (:mod:`embodia.evals.scireas`), graded by their scorer."""
    from embodia.evals.scireas.krux import science_items

    out = []
    for item in science_items("generated", "items", settings.questions, settings.seed):

        def grade(reply: str, item: Any = item) -> tuple[bool, Any]:
            return item.grade(reply), item.read(reply)

        out.append(Question(item.key, _with_elicitation([{"role": "user", "content": item.prompt()}]), grade))
    return out


def _dsr_questions(settings: VocalSettings) -> list[Question]:
    """DSR-Bench's short main-suite instances, graded by the benchmark's scorer."""
    from embodia.envs.dsr import prompts
    from embodia.envs.dsr.env import score_answer
    from embodia.evals.dsr import DSRSettings, select_instances

    dsr = DSRSettings(
        policy=settings.policy, limit=settings.questions, lengths=("short",), seed=settings.seed
    )
    out = []
    for instance in select_instances(dsr):
        mode = prompts.instance_mode(instance, dsr.mode)

        def grade_dsr(reply: str, instance: Any = instance, mode: str = mode) -> tuple[bool, Any]:
            score = score_answer(reply, instance, mode)
            return score.exact == 1.0, None if score.failure == "parse" else score.answer

        messages = prompts.messages(
            instance, dsr.mode, description=dsr.description, tokens=settings.max_tokens
        )
        out.append(Question(instance.id, _with_elicitation(messages), grade_dsr))
    return out


def elicited_marker(reply: str, lexicon: MarkerLexicon) -> Mention | None:
    """The reply's stated confidence (module docstring), or None."""
    mentions = lexicon.mentions(reply)
    stated = list(_CONFIDENCE.finditer(reply))
    if stated:
        after = [m for m in mentions if m.start >= stated[-1].end() and m.level is not None]
        if after:
            return after[0]
    with_level = [m for m in mentions if m.level is not None]
    return with_level[-1] if with_level else None


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and repr(a) == repr(b)


def ask(
    policy: Policy, question: Question, settings: VocalSettings, lexicon: MarkerLexicon
) -> dict[str, Any]:
    """One question's record (module docstring)."""
    greedy = policy.complete(
        list(question.messages), max_tokens=settings.max_tokens, temperature=0.0, logprobs=True
    )
    right, answer = question.grade(greedy.text)
    marker = elicited_marker(greedy.text, lexicon)
    samples = [
        policy.complete(
            list(question.messages), max_tokens=settings.max_tokens, temperature=settings.temperature
        )
        for _ in range(settings.consistency_samples)
    ]
    agree = [_same(question.grade(sample.text)[1], answer) for sample in samples]
    logprobs = [token.logprob for token in greedy.tokens]
    return {
        "key": question.key,
        "correct": right,
        "marker": None if marker is None else marker.marker,
        "marker_text": None if marker is None else marker.text,
        "human_level": None if marker is None else marker.level,
        "consistency": float(np.mean(agree)) if agree else None,
        "token_probability": float(math.exp(np.mean(logprobs))) if logprobs else None,
        "reply": greedy.text,
    }


READING_PROMPT = (
    '{speaker} says: "It is {marker} that {statement}." What probability, from 0 to 100, do you '
    "think {speaker} gives it? Reply with the number only."
)
"""Asking what a marker conveys, as Belem et al. do: the belief is a speaker's, about a statement
the reader cannot check, so the reading is the marker's and not the reader's own knowledge."""
READING_STATEMENTS = (
    ("Sonia", "the meeting will start late"),
    ("Omar", "the parcel arrives on Monday"),
    ("Lena", "the new café opens this month"),
)
_PERCENT = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d+)?)\s*(%?)")


def read_probability(reply: str) -> float | None:
    """The first number of ``reply`` as a probability: a percentage, or a number at most 1
    written with a decimal point (0.7); None without one in range."""
    for match in _PERCENT.finditer(reply):
        value = float(match.group(1))
        if value <= 1 and "." in match.group(1) and not match.group(2):
            return value
        if value <= 100:
            return value / 100
    return None


def marker_readings(policy: Policy, max_tokens: int = 16) -> dict[str, Any]:
    """Per corpus marker, the probabilities the policy reads in it (:data:`READING_PROMPT`
    over :data:`READING_STATEMENTS`), their median against the human prior, and whether it
    falls in the human interquartile range; over markers, the mean absolute gap and that share."""
    corpus = load_corpus()
    rows: list[dict[str, Any]] = []
    for name in reversed(corpus.by_prior()):
        readings: list[float] = []
        for speaker, statement in READING_STATEMENTS:
            prompt = READING_PROMPT.format(speaker=speaker, marker=name, statement=statement)
            reply = policy.complete([{"role": "user", "content": prompt}], max_tokens=max_tokens).text
            value = read_probability(reply)
            if value is not None:
                readings.append(value)
        human = corpus.prior(name)
        iqr = corpus.iqr(name)
        median = float(np.median(readings)) if readings else None
        rows.append(
            {
                "marker": name,
                "readings": readings,
                "median": median,
                "human": human,
                "gap": None if median is None else median - human,
                "within_human_iqr": None if median is None or iqr is None else iqr[0] <= median <= iqr[1],
            }
        )
    read = [row for row in rows if row["median"] is not None]
    judged = [row for row in read if row["within_human_iqr"] is not None]
    return {
        "markers": rows,
        "read": len(read),
        "mean_absolute_gap": float(np.mean([abs(row["gap"]) for row in read])) if read else None,
        "within_human_iqr": float(np.mean([row["within_human_iqr"] for row in judged])) if judged else None,
    }


def summarise(records: Sequence[Mapping[str, Any]], settings: VocalSettings) -> dict[str, Any]:
    """The fit, the side-by-side calibration and the comparison (module docstring)."""
    corpus = load_corpus()
    marked = [r for r in records if r["marker"] is not None]
    summary: dict[str, Any] = {
        "answered": len(records),
        "accuracy": float(np.mean([r["correct"] for r in records])) if records else None,
        "marker_rate": len(marked) / len(records) if records else 0.0,
    }
    split = int(round(settings.calibration_share * len(marked)))
    calibration, test = marked[:split], marked[split:]
    if not calibration or not test:
        summary["note"] = (
            f"{len(marked)} of {len(records)} replies state a confidence in words: too few to fit on "
            "one part and measure on the other"
        )
        return summary
    counts = MarkerCounts.of([r["marker"] for r in calibration], [r["correct"] for r in calibration], corpus)
    profile = fit_profile(
        counts, corpus, loss=settings.loss, shrinkage=settings.shrinkage, monotone=settings.monotone
    )
    intervals = bootstrap_profile(
        counts,
        corpus,
        rounds=settings.bootstrap_rounds,
        seed=settings.seed,
        loss=settings.loss,
        shrinkage=settings.shrinkage,
        monotone=settings.monotone,
    )
    correct = [bool(r["correct"]) for r in test]
    confidences: dict[str, list[float] | None] = {
        "human": [float(r["human_level"]) for r in test],
        "learned": [profile[r["marker"]] for r in test],
        "consistency": [r["consistency"] for r in test]
        if all(r["consistency"] is not None for r in test)
        else None,
        "token_probability": [r["token_probability"] for r in test]
        if all(r["token_probability"] is not None for r in test)
        else None,
    }
    summary["calibration_answers"], summary["test_answers"] = len(calibration), len(test)
    summary["calibration"] = {
        name: None if values is None else calibration_report(values, correct)
        for name, values in confidences.items()
    }
    summary["comparison"] = compare_with_humans(profile, counts, corpus, intervals)
    return summary


def write_plots(summary: Mapping[str, Any], out: Path) -> None:
    """``markers.png`` and ``reliability.png`` (module docstring); nothing without a fit."""
    if "comparison" not in summary:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in summary["comparison"]["markers"] if row["used"]]
    figure, axis = plt.subplots(figsize=(6, 0.35 * len(rows) + 1.5))
    for y, row in enumerate(rows):
        low, high = row["interval"]
        axis.plot([low, high], [y, y], color="tab:blue", alpha=0.5)
        axis.plot(row["learned"], y, "o", color="tab:blue", label="learned" if y == 0 else None)
        axis.plot(row["human"], y, "s", color="tab:orange", label="human" if y == 0 else None)
    axis.set_yticks(range(len(rows)), [f"{row['marker']} ({row['used']})" for row in rows])
    axis.set_xlim(0, 1)
    axis.set_xlabel("probability the marker conveys")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / MARKERS_PLOT, dpi=100)
    plt.close(figure)
    figure, axis = plt.subplots(figsize=(5, 5))
    axis.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
    for name, report in summary["calibration"].items():
        if report is None:
            continue
        curve = np.asarray(report["reliability"], dtype=float) if report.get("reliability") else None
        if curve is not None and len(curve):
            axis.plot(curve[:, 0], curve[:, 1], "o-", label=f"{name} (ECE {report['ece']:.3f})")
    axis.set_xlabel("confidence")
    axis.set_ylabel("accuracy")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / RELIABILITY_PLOT, dpi=100)
    plt.close(figure)


@runner
def run_vocal(
    settings: VocalSettings,
    out: Path,
    *,
    resume: bool = False,
    policy: Policy | None = None,
) -> dict[str, Any]:
    """Ask, fit and report (module docstring); ``policy`` stands in for ``settings.policy``'s."""
    folder = RunFolder(out, ANSWERS)
    config = asdict(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    questions = question_set(settings)
    if policy is None:
        from embodia.policies.spec import make_policy

        policy = make_policy(settings.policy)
    asked, lexicon = policy, MarkerLexicon()
    done = record_each(folder, config, questions, lambda q: q.key, lambda q: ask(asked, q, settings, lexicon))
    summary = summarise([done[q.key] for q in questions], settings)
    if settings.readings:
        summary["readings"] = marker_readings(policy, settings.max_tokens)
    summary["settings"] = config
    folder.finish(SUMMARY, summary)
    write_plots(summary, folder.out)
    return summary
