"""SxS trajectory builder (When to Think, When to Speak, ICML 2026): entailment-aligned
interleaved think/speak SFT data from ``(reasoning, answer)`` pairs.

For answer chunks ``a_1..a_K`` and reasoning steps ``R``, chunk ``k`` gets the minimal prefix
length ``r_k >= r_{k-1}`` (``r_0 = 0``) with ``supports(R[:r_k], a_k)``; the trajectory is
``think(R[:r_1]) speak(a_1) think(R[r_1:r_2]) speak(a_2) ...``. A chunk that no prefix
supports gets ``r_k = len(R)`` (placed after all reasoning) and is flagged unsupported; by
monotonicity every later chunk also goes at the end, so the answer order is never changed.
Reasoning after the last chunk's prefix is dropped unless ``keep_trailing``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from embodia.core.interleaved import SXS_SYSTEM
from embodia.envs.puzzles.core import Verdict, json_values
from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)

Support = Callable[[Sequence[str], str], bool]
"""``supports(reasoning_prefix_steps, chunk) -> bool``."""

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\\$\"'])")
_DERIVED = re.compile(r"(?:=|\bis\b|\bequals\b|\bgives\b)\s*\$?\s*(-?\d+(?:\.\d+)?)")


def split_answer(answer: str, splitter: Callable[[str], list[str]] | None = None) -> list[str]:
    """Answer chunks: non-empty lines, each split into sentences (``. ! ?`` followed by space
    and an uppercase letter, digit or bracket; decimals like ``3.5`` are not split)."""
    if splitter is not None:
        return [c for c in splitter(answer) if c.strip()]
    out: list[str] = []
    for line in answer.splitlines():
        out.extend(s.strip() for s in _SENT.split(line.strip()) if s.strip())
    return out


@dataclass(frozen=True)
class Segment:
    """One trajectory segment. ``steps`` is the reasoning range ``[a, b)`` a think segment
    holds, or ``(0, r_k)`` the prefix that supports a speak segment; ``chunk`` is the answer
    chunk index of a speak segment."""

    channel: Literal["think", "speak"]
    text: str
    steps: tuple[int, int]
    chunk: int | None = None
    supported: bool = True


def align(
    reasoning_steps: Sequence[str], answer_chunks: Sequence[str], supports: Support
) -> list[int | None]:
    """Monotone minimal supporting prefix length per chunk; ``None`` where none supports it."""
    n = len(reasoning_steps)
    prev = 0
    out: list[int | None] = []
    for chunk in answer_chunks:
        r = next((r for r in range(prev, n + 1) if supports(reasoning_steps[:r], chunk)), None)
        out.append(r)
        prev = n if r is None else r
    return out


def build_trajectory(
    reasoning_steps: Sequence[str],
    answer_chunks: Sequence[str],
    supports: Support,
    keep_trailing: bool = False,
    joiner: str = "\n",
) -> list[Segment]:
    """Interleaved think/speak segments (see module docstring); empty think runs are omitted."""
    n = len(reasoning_steps)
    segs: list[Segment] = []
    prev = 0
    for k, (chunk, r) in enumerate(
        zip(answer_chunks, align(reasoning_steps, answer_chunks, supports), strict=True)
    ):
        rk = n if r is None else r
        if rk > prev:
            segs.append(Segment("think", joiner.join(reasoning_steps[prev:rk]), (prev, rk)))
        segs.append(Segment("speak", chunk, (0, rk), k, r is not None))
        prev = rk
    if keep_trailing and prev < n:
        segs.append(Segment("think", joiner.join(reasoning_steps[prev:]), (prev, n)))
    return segs


def render(segments: Sequence[Segment]) -> str:
    """Assistant content ``<think>..</think><speak>..</speak>...``."""
    return "".join(f"<{s.channel}>{s.text}</{s.channel}>" for s in segments)


_SENTINEL = "\x00SXS_ASSISTANT_CONTENT\x00"


def to_sft_record(
    question: str,
    segments: Sequence[Segment],
    tokenizer: Any = None,
    system: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"messages": [...], ...meta}``; with a HF tokenizer that has a chat template, also
    ``text``. The template is rendered around a marker string that the content then replaces, so the
    interleaved tags reach ``text`` verbatim (templates such as Qwen3's would otherwise keep only
    one ``<think>`` block); template-specific wrapping (e.g. an empty think block) is kept."""
    messages: list[dict[str, str]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": question})
    content = render(segments)
    rec: dict[str, Any] = {"messages": [*messages, {"role": "assistant", "content": content}]}
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": _SENTINEL}], tokenize=False
        )
        rec["text"] = str(text).replace(_SENTINEL, content)
    if meta:
        rec.update(meta)
    return rec


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """One JSON object per line (UTF-8); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return out


# --- exact support checkers ---------------------------------------------------------------


def numbers(text: str) -> list[float]:
    """Numbers stated in ``text`` (thousands commas removed)."""
    return [float(m) for m in re.findall(r"-?\d+(?:\.\d+)?", re.sub(r"(?<=\d),(?=\d{3})", "", text))]


def derived_values(steps: Sequence[str]) -> list[float]:
    """Values a step derives: the number right after ``=``, ``is``, ``equals`` or ``gives``."""
    return [float(m) for s in steps for m in _DERIVED.findall(re.sub(r"(?<=\d),(?=\d{3})", "", s))]


def make_numeric_support(known: Iterable[float | str] = ()) -> Support:
    """A chunk is supported when every number it states is a derived value of the prefix (or
    in ``known``, e.g. the question's givens). A chunk stating no number is always supported."""
    given = [float(k) for k in known]

    def supports(prefix: Sequence[str], chunk: str) -> bool:
        pool = given + derived_values(prefix)
        return all(any(math.isclose(x, v) for v in pool) for x in numbers(chunk))

    return supports


numeric_support: Support = make_numeric_support()


def derived_claim_support(
    claim: Callable[[str], Hashable | None], derive: Callable[[str], Iterable[Hashable]]
) -> Support:
    """Hook for exact puzzle/DSR checkers: ``claim(chunk)`` is the value a chunk asserts (e.g. a
    parsed data-structure state or grid); it is supported when some prefix step derives it
    (``derive(step)`` yields the values a step establishes). A chunk with no claim is
    supported."""

    def supports(prefix: Sequence[str], chunk: str) -> bool:
        c = claim(chunk)
        return c is None or any(c in set(derive(s)) for s in prefix)

    return supports


def table_support(min_steps: Mapping[str, int | None]) -> Support:
    """Hand-labelled support: chunk -> minimal step count that supports it (``None``: never)."""

    def supports(prefix: Sequence[str], chunk: str) -> bool:
        m = min_steps.get(chunk)
        return m is not None and len(prefix) >= m

    return supports


class StepSupport:
    """Exact support for tasks with verifiable steps (puzzles, DSR traces).

    A chunk's claim is the steps it states (``claimed(text)``, in the task's step form). It is
    supported when (1) every step it adds is already stated in the reasoning prefix and (2) the
    steps disclosed so far plus these are consistent with some correct solution
    (``consistent(steps)``, the task's exact checker). A chunk restating the disclosed steps
    and more (a final answer holding the whole solution) adds only what is new. A chunk that
    states no step asserts nothing checkable and is supported.

    Stateful: the steps of each supported chunk are committed, so one instance serves one
    stream, asked about chunks in disclosure order, as :class:`DisclosureGuard` and
    :func:`align` do (each asks until a chunk is supported, then moves to the next).
    """

    def __init__(self, claimed: Callable[[str], list[Any]], consistent: Callable[[list[Any]], bool]) -> None:
        self.claimed = claimed
        self.consistent = consistent
        self.committed: list[Any] = []

    def __call__(self, prefix: Sequence[str], chunk: str) -> bool:
        claim = self.claimed(chunk)
        if not claim:
            return True
        done = self.committed
        total = claim if claim[: len(done)] == done else [*done, *claim]
        new = total[len(done) :]
        stated = self.claimed("\n".join(prefix)) if new else []
        if any(step not in stated for step in new) or not self.consistent(total):
            return False
        self.committed = total
        return True


# --- model-based support: a judge chat model, an NLI cross-encoder ----------------------

JUDGE_PROMPT = (
    "Reasoning so far:\n{reasoning}\n\nClaim: {chunk}\n\n"
    "Does the reasoning so far establish the claim? Answer yes or no."
)


@dataclass
class JudgeSupport:
    """Support decided by a chat model asked whether the reasoning entails the chunk (yes/no,
    temperature 0). An unreadable verdict is not support: the chunk waits for more reasoning.
    Every question and raw verdict is kept in ``verdicts`` for inspection."""

    policy: Any
    max_tokens: int = 8
    verdicts: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, prefix: Sequence[str], chunk: str) -> bool:
        from embodia.envs.puzzles.clevr import parse_yes_no

        prompt = JUDGE_PROMPT.format(reasoning="\n".join(prefix) or "(none yet)", chunk=chunk)
        reply = self.policy.complete([{"role": "user", "content": prompt}], max_tokens=self.max_tokens).text
        parsed = parse_yes_no(reply)
        supported = parsed.ok and parsed.value == "yes"
        self.verdicts.append({"chunk": chunk, "steps": len(prefix), "raw": reply, "supported": supported})
        return supported


def load_pretrained(loader: Any, path: Path, what: str) -> Any:
    """``loader.from_pretrained(path)`` (local files only) for a folder a user named; a folder
    without files the loader can use is an EmbodiaError naming ``what`` and the folder, not a
    transformers traceback."""
    from embodia.errors import EmbodiaError

    if not path.is_dir():
        raise EmbodiaError(f"{what} {path} is not a directory")
    try:
        return loader.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:  # no such files, or none this install can read
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EmbodiaError(f"{what} {path} holds no usable {loader.__name__} files: {reason}") from None


class NLISupport:
    """Support from an NLI cross-encoder (premise: the reasoning so far, hypothesis: the
    chunk): supported when P(entailment) >= ``threshold``. The entailment class is the label
    in ``config.id2label`` containing "entail"; a long premise keeps its latest reasoning
    (truncated from the left), since that is where a chunk's support was just derived."""

    def __init__(self, model_dir: str | Path, threshold: float = 0.5, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from embodia.core.random_weights import random_weights_note
        from embodia.errors import EmbodiaError

        path = Path(model_dir)
        self.random_weights = random_weights_note(path)
        """Why this model's verdicts mean nothing (random weights), or None for a trained model."""
        if self.random_weights is not None:
            logger.warning("%s", self.random_weights)
        self.tokenizer = load_pretrained(AutoTokenizer, path, "NLI model")
        self.tokenizer.truncation_side = "left"
        self.model = load_pretrained(AutoModelForSequenceClassification, path, "NLI model")
        self.model.eval().to(device)
        labels = {int(k): str(v).lower() for k, v in self.model.config.id2label.items()}
        found = [k for k, v in labels.items() if "entail" in v and "not" not in v]
        if len(found) != 1:
            raise EmbodiaError(
                f"NLI model {path} has no single entailment label among {sorted(labels.values())}"
            )
        self.entailment = found[0]
        self.threshold = threshold
        self.device = device
        self._torch = torch

    def probability(self, prefix: Sequence[str], chunk: str) -> float:
        batch = self.tokenizer(
            " ".join(prefix),
            chunk,
            truncation="only_first",
            max_length=self._max_length(),
            return_tensors="pt",
        ).to(self.device)
        with self._torch.no_grad():
            logits = self.model(**batch).logits[0]
        return float(self._torch.softmax(logits.float(), dim=-1)[self.entailment])

    def _max_length(self) -> int:
        limit = int(getattr(self.tokenizer, "model_max_length", 512))
        positions = int(getattr(self.model.config, "max_position_embeddings", limit))
        return min(limit, positions, 4096)

    def __call__(self, prefix: Sequence[str], chunk: str) -> bool:
        return self.probability(prefix, chunk) >= self.threshold


# --- items with exact support: puzzles and DSR-Bench traces ----------------------------


@dataclass(frozen=True)
class SxSItem:
    """One question with what an SxS run and the data builder need: the text question, an
    exact scorer of a reply, a fresh exact support checker per stream, and a reference
    ``(reasoning steps, answer chunks)`` pair derived from the ground truth."""

    id: str
    question: str
    step_format: str
    """How to state steps so that the support checker can read them (shown to the model)."""
    reasoning: tuple[str, ...]
    chunks: tuple[str, ...]
    score: Callable[[str], Verdict]
    new_support: Callable[[], Support]
    contradicts: Callable[[str, str], bool]
    """``contradicts(chunk, final)``: the chunk commits to something the final answer does not."""
    record: Mapping[str, Any]


def puzzle_item(task_name: str, seed: int, difficulty: str = "medium", chunk_steps: int = 3) -> SxSItem:
    """A puzzle instance as an SxS item; only puzzles that can be written out as text qualify.

    Reference reasoning: one line per true step (``Step k: <step as JSON>``); answer chunks:
    the steps ``chunk_steps`` at a time, then the complete answer object."""
    from embodia.envs.puzzles import PuzzleError, make_task

    task = make_task(task_name)
    instance = task.generate(seed, difficulty)
    text = task.text(instance)
    steps = task.steps(instance)
    if text is None or not steps:
        raise PuzzleError(
            f"the {task_name} puzzle has no text form or no verifiable steps, so SxS cannot run on it"
        )

    def contradicts(chunk: str, final: str) -> bool:
        """A step the chunk states that the final answer's solution does not contain."""
        stated, answer = task.claimed_steps(chunk, instance), task.parse(final, instance)
        if not stated or not answer.ok:
            return False
        solution = task.answer_steps(answer.value, instance)
        return any(step not in solution for step in stated)

    return SxSItem(
        id=f"{task_name}/{difficulty}/{seed}",
        question=f"{instance.prompt}\n{text}",
        step_format=task.step_format,
        # integer steps go in a list: prose numbers are not claims, JSON values are
        reasoning=tuple(
            f"Step {k}: {json.dumps(step if isinstance(step, list) else [step])}"
            for k, step in enumerate(steps, start=1)
        ),
        chunks=(
            *(f"Next: {json.dumps(steps[i : i + chunk_steps])}" for i in range(0, len(steps), chunk_steps)),
            f"Answer: {json.dumps({'answer': instance.answer})}",  # every puzzle parser reads "answer"
        ),
        score=lambda reply: task.score(reply, instance),
        new_support=lambda: StepSupport(
            lambda t: task.claimed_steps(t, instance), lambda s: task.check_step(s, instance)
        ),
        contradicts=contradicts,
        record=instance.to_record(),
    )


def dsr_item(operation: str, index: int, length: str = "short", seed: int | None = None) -> SxSItem:
    """A DSR-Bench main-suite problem as an SxS item: steps are the structure's states after
    each operation, checked exactly against the reference implementation's trace.

    Reference reasoning: ``After (op, x): <state>`` per operation; answer chunks: the state
    every ``3`` operations, then ``{"final_answer": ...}``."""
    from embodia.envs.dsr import DSRError, canonical, prompts, scoring, suites

    options = {} if seed is None else {"seed": seed}
    instance = suites.make_instance(suites.Group("main", operation), length, index, **options)
    if not instance.steps:
        raise DSRError(f"DSR operation {operation} has no per-operation states to check")
    truth = [*(canonical(s.state) for s in instance.steps), canonical(instance.truth)]

    def claimed(text: str) -> list[Any]:
        out = []
        for value in json_values(text):
            if isinstance(value, dict):
                value = next((value[k] for k in ("final_answer", "state", "output") if k in value), value)
            out.append(canonical(value))
        return out

    def consistent(states: list[Any]) -> bool:
        at = 0  # a subsequence of the true states, in order
        for s in states:
            while at < len(truth) and truth[at] != s:
                at += 1
            if at == len(truth):
                return False
            at += 1
        return True

    def final_answers(text: str) -> list[str]:
        return [
            canonical(v["final_answer"])
            for v in json_values(text)
            if isinstance(v, dict) and "final_answer" in v
        ]

    def contradicts(chunk: str, final: str) -> bool:
        """Only final answers are compared: an intermediate state is not refuted by the final one."""
        mine, theirs = final_answers(chunk), final_answers(final)
        return bool(mine and theirs) and mine[-1] != theirs[-1]

    def score(reply: str) -> Verdict:
        result = scoring.score_reply(reply, instance)
        return Verdict(
            result.exact == 1.0, float(result.partial), result.reason or str(result.failure or "correct")
        )

    states = [s.state for s in instance.steps]
    return SxSItem(
        id=instance.id,
        question=prompts.render(instance, "0-CoT"),
        step_format="state the structure after an operation as JSON, e.g. [3, 1], and end with the JSON "
        "object asked for",
        reasoning=tuple(f"After {s.label}: {json.dumps(s.state)}" for s in instance.steps),
        chunks=(
            *(f"After {i + 1} operations: {json.dumps(states[i])}" for i in range(2, len(states) - 1, 3)),
            json.dumps({"final_answer": instance.truth}),
        ),
        score=score,
        new_support=lambda: StepSupport(claimed, consistent),
        contradicts=contradicts,
        record=instance.to_json(),
    )


PUZZLE_SOURCES = ("maze", "sudoku", "frozenlake", "tsp")
"""The puzzles with a text form and checkable steps (``puzzle_item``); ``dsr:OPERATION`` too."""


def make_item(source: str, index: int, difficulty: str, seed: int) -> SxSItem:
    """Item ``index`` of ``source``: a puzzle name of :data:`PUZZLE_SOURCES` (``difficulty`` its
    size) or ``dsr:OPERATION`` (``difficulty`` its length), instance seed ``seed + index``."""
    if source.startswith("dsr:"):
        return dsr_item(source.removeprefix("dsr:"), seed + index, difficulty)
    if source not in PUZZLE_SOURCES:
        raise EmbodiaError(
            f"unknown SxS source {source!r}: expected one of {', '.join(PUZZLE_SOURCES)} or dsr:OPERATION"
        )
    return puzzle_item(source, seed + index, difficulty)


def system_prompt(system: str, item: SxSItem) -> str:
    """A mode's instructions plus how to state steps so they can be checked (the same for every
    mode, and the same as the SxS training data's)."""
    return f"{system} When you state steps, {item.step_format}."


def sft_records(items: Iterable[SxSItem], tokenizer: Any = None) -> Iterator[dict[str, Any]]:
    """SFT records of the items' reference trajectories, with the prompt the SxS runtime uses
    (so a model fine-tuned on them is asked at run time exactly as it was trained)."""
    for item in items:
        segments = build_trajectory(item.reasoning, item.chunks, item.new_support())
        yield to_sft_record(
            item.question,
            segments,
            tokenizer,
            system=system_prompt(SXS_SYSTEM, item),
            meta={"id": item.id, "supported": all(s.supported for s in segments if s.channel == "speak")},
        )
