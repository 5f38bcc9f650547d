"""Long-input evaluation: needle in a haystack and fact QA on documents the project generates,
for LIFT and its baselines in one harness.

Documents:

- **Haystack**: filler sentences about an imaginary coastal town, drawn from templates by a
  seeded generator, up to a length in tokens of the model's tokenizer. None of them states a
  fact of the form the needle has.
- **Needle in a haystack** (:func:`niah_case`): one needle, "The secret code of the PLACE is
  NNNN.", inserted at a depth (0: the start, 1: the end) at a sentence boundary; one question.
- **Fact QA** (:func:`facts_case`): ``facts`` needles with other places and codes, spread
  evenly through the haystack; one question each.

Methods, each answering every question of a case:

- ``lift``: :func:`~embodia.policies.recipes.lift.run_lift` on the document, then the question
  alone;
- ``truncated``: in context, the document cut to the model's context window minus the answer
  and the prompt, keeping its front and back halves (the reference's in-context baseline);
- ``raw``: a LoRA fine-tune on the document's own text (plain language modelling of its
  chunks, the same adapter and budget as LIFT), then the question alone.

:func:`run_long_context` runs a grid of cases (lengths x depths, or lengths for fact QA) and
methods in a run folder. ``results.jsonl`` holds one line per question, written as it goes,
between a cell's ``started`` and ``done`` lines; a resume skips the cells done and redoes a
cell cut midway. ``summary.json`` holds the accuracy per method, per length and per depth. A
line also says whether the needle survives truncation (``in_truncated_context``): the most any
in-context reader of that window could answer.
"""

from __future__ import annotations

import functools
import json
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embodia.core.chat import Message, Policy
from embodia.core.limits import check_range, check_seed
from embodia.core.runs import RunFolder, runner
from embodia.errors import EmbodiaError
from embodia.policies.recipes.lift import (
    SYSTEM,
    LIFTSettings,
    answer_contains,
    answer_questions,
    run_lift,
)
from embodia.policies.recipes.sft import SFTSettings, run_sft
from embodia.policies.spec import make_policy, parse_policy_spec

METHODS = ("lift", "truncated", "raw")
TASKS = ("niah", "facts")
RESULTS = "results.jsonl"
SUMMARY = "summary.json"
TITLE = "the harbour records"

_TOWNS = ("Port Ellery", "Saltmere", "Gullhaven", "Brinewick", "Cape Tamsin", "Kelpford")
_PLACES = (
    "lighthouse", "old mill", "harbour gate", "chapel tower", "fish market", "signal station",
    "tide office", "boat house", "coast guard hut", "salt store", "rope works", "net loft",
)  # fmt: skip
_FILLER = (
    "In {town} the tide came in slowly on {day} and the boats stayed close to the shore.",
    "Fishermen from {town} mended their nets while the wind turned to the {direction}.",
    "A {adjective} fog covered {town} until noon, and the gulls were quiet.",
    "On {day} the market in {town} sold {count} crates of herring before the rain.",
    "Children in {town} watched the ferry leave for the islands in the {adjective} morning.",
    "The road out of {town} was muddy after {count} days of rain from the {direction}.",
    "Old sailors in {town} said the {direction} wind would bring a {adjective} winter.",
    "Lamps were lit early in {town} because the sky was {adjective} all afternoon.",
)
_WORDS = {
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "direction": ("north", "south", "east", "west"),
    "adjective": ("grey", "cold", "bright", "heavy", "calm", "damp", "pale"),
}


class LongContextError(EmbodiaError, ValueError):
    """Settings of a long-input evaluation that cannot be used; the message names them."""


@dataclass(frozen=True)
class Case:
    """One document and its questions (with answers), and where each answer's needle lies."""

    document: str
    questions: list[dict[str, str]]
    needles: list[str]


def filler_sentence(rng: random.Random) -> str:
    template = rng.choice(_FILLER)
    return template.format(
        town=rng.choice(_TOWNS),
        count=rng.randint(2, 40),
        **{key: rng.choice(values) for key, values in _WORDS.items()},
    )


def needle(rng: random.Random, place: str) -> tuple[str, dict[str, str]]:
    code = str(rng.randint(1000, 9999))
    return f"The secret code of the {place} is {code}.", {
        "question": f"What is the secret code of the {place}?",
        "answer": code,
    }


def _haystack(tokenizer: Any, tokens: int, rng: random.Random) -> list[str]:
    """Filler sentences whose text is about ``tokens`` tokens long."""
    sentences: list[str] = []
    size = 0
    while size < tokens:
        batch = [filler_sentence(rng) for _ in range(32)]
        size += len(tokenizer(" ".join(batch), add_special_tokens=False)["input_ids"])
        sentences.extend(batch)
    while len(sentences) > 1 and size > tokens:  # trim the last batch's overshoot
        size -= len(tokenizer(" " + sentences.pop(), add_special_tokens=False)["input_ids"])
    return sentences


def niah_case(tokenizer: Any, tokens: int, depth: float, seed: int) -> Case:
    """A haystack of about ``tokens`` tokens with one needle at ``depth`` (module docstring)."""
    rng = random.Random(seed)
    sentences = _haystack(tokenizer, tokens, rng)
    text, question = needle(rng, rng.choice(_PLACES))
    sentences.insert(round(depth * len(sentences)), text)
    return Case(" ".join(sentences), [question], [text])


def facts_case(tokenizer: Any, tokens: int, facts: int, seed: int) -> Case:
    """A haystack of about ``tokens`` tokens with ``facts`` needles spread through it."""
    rng = random.Random(seed)
    sentences = _haystack(tokenizer, tokens, rng)
    places = rng.sample(_PLACES, facts)
    texts, questions = zip(*(needle(rng, place) for place in places), strict=True)
    for index, text in reversed(list(enumerate(texts))):
        sentences.insert(round((index + 0.5) / facts * len(sentences)), text)
    return Case(" ".join(sentences), list(questions), list(texts))


def truncated_context(tokenizer: Any, document: str, budget: int) -> str:
    """``document`` cut to ``budget`` tokens, its front and back halves kept."""
    ids = tokenizer(document, add_special_tokens=False)["input_ids"]
    if len(ids) <= budget:
        return document
    front = budget // 2
    return tokenizer.decode(ids[:front]) + " ... " + tokenizer.decode(ids[len(ids) - (budget - front) :])


def in_context_messages(context: str, title: str, question: str) -> list[Message]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f'{context}\n\nPlease answer the question based on "{title}" above.\n'
            f"Question: {question}\nAnswer:",
        },
    ]


@dataclass(frozen=True)
class LongContextSettings:
    """A grid of long-input cases and the methods answering them (module docstring)."""

    model: str
    """The model: ``hf:DIR``."""
    generator: str
    """LIFT's question writer (any ``--policy`` spec)."""
    task: str = "niah"
    """``niah`` (one needle per document) or ``facts`` (``facts`` needles)."""
    lengths: tuple[int, ...] = (2048,)
    """Document lengths in the model's tokens."""
    depths: tuple[float, ...] = (0.0, 0.5, 1.0)
    """Needle depths (``niah``)."""
    facts: int = 4
    """Needles per document (``facts``)."""
    methods: tuple[str, ...] = METHODS
    lift: Mapping[str, Any] = field(default_factory=dict)
    """LIFTSettings fields for the ``lift`` method (``raw`` uses its epochs, rate and LoRA)."""
    answer_max_tokens: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if parse_policy_spec(self.model)[0] != "hf":
            raise LongContextError(f"the model must be hf:DIR, got {self.model!r}")
        if self.task not in TASKS:
            raise LongContextError(f"unknown task {self.task!r}: {' | '.join(TASKS)}")
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown or not self.methods:
            raise LongContextError(f"unknown methods {unknown}: choose from {', '.join(METHODS)}")
        if not self.lengths or any(not 64 <= n <= 1_000_000 for n in self.lengths):
            raise LongContextError(f"lengths must be 64..1,000,000 tokens, got {list(self.lengths)}")
        if not self.depths or any(not 0 <= d <= 1 for d in self.depths):
            raise LongContextError(f"depths must be in [0, 1], got {list(self.depths)}")
        check_range("facts", self.facts, 1, len(_PLACES), LongContextError)
        check_range("answer_max_tokens", self.answer_max_tokens, 1, 10_000, LongContextError)
        check_seed("seed", self.seed, LongContextError)


def _cells(settings: LongContextSettings) -> list[dict[str, Any]]:
    depths: Sequence[float | None] = settings.depths if settings.task == "niah" else (None,)
    return [
        {"length": length, "depth": depth, "method": method}
        for length in settings.lengths
        for depth in depths
        for method in settings.methods
    ]


def _cell_name(cell: Mapping[str, Any]) -> str:
    depth = "" if cell["depth"] is None else f"-d{cell['depth']:g}"
    return f"{cell['method']}-{cell['length']}{depth}"


@runner
def run_long_context(
    settings: LongContextSettings, out: Path, *, resume: bool = False, generator: Policy | None = None
) -> dict[str, Any]:
    """Every cell of the grid, one after the other, into the run folder ``out`` (module
    docstring). ``generator`` replaces the policy ``settings.generator`` names."""
    folder = RunFolder(out, RESULTS)
    config = json.loads(json.dumps(asdict(settings) | {"lift": dict(settings.lift)}))  # tuples as lists
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    # a cell counts once its "done" line is written; the lines of a cell cut midway are dropped
    earlier = folder.kept_records()
    done = {r["cell"] for r in earlier if r.get("status") == "done"}
    kept = [r for r in earlier if r["cell"] in done]
    model_dir = Path(parse_policy_spec(settings.model)[1])
    from transformers import AutoConfig, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(model_dir)
    text_config = AutoConfig.from_pretrained(model_dir).get_text_config()
    window = min(int(tokenizer.model_max_length), int(text_config.max_position_embeddings))
    where = folder.out.resolve()  # the cells' paths, the same however --out is spelled on resume
    with folder.recording(kept, {"settings": config}) as log:
        base: Policy | None = None
        for index, cell in enumerate(_cells(settings)):
            name = _cell_name(cell)
            if name in done:
                continue
            log.append({"cell": name, "status": "started"})  # also keeps a new run's folder if cut
            seed = settings.seed * 1000 + index // len(settings.methods)  # one document per case
            case = (
                niah_case(tokenizer, cell["length"], cell["depth"], seed)
                if settings.task == "niah"
                else facts_case(tokenizer, cell["length"], settings.facts, seed)
            )
            document = where / "documents" / f"{name}.txt"
            document.parent.mkdir(parents=True, exist_ok=True)
            document.write_text(case.document, encoding="utf-8")
            empty = in_context_messages("", TITLE, case.questions[0]["question"])
            prompt_text = tokenizer.apply_chat_template(empty, tokenize=False, add_generation_prompt=True)
            prompt_tokens = len(tokenizer(prompt_text, add_special_tokens=False)["input_ids"])
            budget = window - settings.answer_max_tokens - prompt_tokens - 8
            if budget <= 0:
                raise LongContextError(
                    f"the model's {window}-token window leaves no room for a document after the "
                    f"question ({prompt_tokens} tokens) and the answer ({settings.answer_max_tokens})"
                )
            kept_text = truncated_context(tokenizer, case.document, budget)
            if cell["method"] == "truncated":
                base = base or make_policy(settings.model)
                replies = list(
                    answer_questions(
                        base,
                        TITLE,
                        case.questions,
                        settings.answer_max_tokens,
                        messages=functools.partial(_with_context, kept_text),
                    )
                )
            else:
                tuned = _tuned(settings, cell["method"], document, where / "cells" / name, generator)
                replies = list(
                    answer_questions(make_policy(tuned), TITLE, case.questions, settings.answer_max_tokens)
                )
            tokens = len(tokenizer(case.document, add_special_tokens=False)["input_ids"])
            for reply, text in zip(replies, case.needles, strict=True):
                log.append(
                    {
                        "cell": name,
                        **cell,
                        "tokens": tokens,
                        "question": reply["question"],
                        "answer": reply["answer"],
                        "reply": reply["reply"],
                        "correct": answer_contains(reply["reply"], reply["answer"]),
                        "in_truncated_context": text in kept_text,
                    }
                )
            log.append({"cell": name, "status": "done"})
    lines = [r for r in folder.read_records() if "correct" in r]
    summary = {"settings": config, "questions": len(lines), **accuracy_summary(lines)}
    folder.finish(SUMMARY, summary)
    return summary


def _with_context(context: str, question: str) -> list[Message]:
    return in_context_messages(context, TITLE, question)


def _tuned(
    settings: LongContextSettings, method: str, document: Path, out: Path, generator: Policy | None
) -> str:
    """The spec of the model tuned on ``document`` by ``method`` (``lift`` or ``raw``)."""
    options = {"title": TITLE, **settings.lift}
    lift = LIFTSettings(model=settings.model, document=str(document), generator=settings.generator, **options)
    if method == "lift":
        summary = run_lift(lift, out, resume=out.exists(), generator=generator)
        return str(summary["policy"])
    text = document.read_text(encoding="utf-8")
    chunk = 400  # characters of text per record
    records = tuple({"prompt": "", "completion": text[i : i + chunk]} for i in range(0, len(text), chunk))
    trained = run_sft(
        SFTSettings(
            model=settings.model,
            data=records,
            epochs=float(lift.epochs),
            learning_rate=lift.learning_rate,
            lr_scheduler="constant",
            batch_size=lift.batch_size,
            max_length=lift.max_length,
            completion_only_loss=False,
            lora_r=lift.lora_r,
            lora_alpha=lift.lora_alpha,
            logging_steps=5,
            save_steps=1000,
            seed=lift.seed,
        ),
        out,
        resume=out.exists(),
    )
    return str(trained["policy"])


def accuracy_summary(lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy per method, and per method and length and depth, over ``results.jsonl``."""

    def mean(rows: Sequence[Mapping[str, Any]], key: str = "correct") -> float:
        return round(statistics.fmean(bool(r[key]) for r in rows), 4)

    by_method: dict[str, Any] = {}
    for method in sorted({r["method"] for r in lines}):
        rows = [r for r in lines if r["method"] == method]
        by_method[method] = {
            "accuracy": mean(rows),
            "by_length": {
                str(n): mean([r for r in rows if r["length"] == n])
                for n in sorted({r["length"] for r in rows})
            },
            "by_depth": {
                f"{d:g}": mean([r for r in rows if r["depth"] == d])
                for d in sorted({r["depth"] for r in rows if r["depth"] is not None})
            },
        }
    summary: dict[str, Any] = {"methods": by_method}
    if lines:
        summary["in_truncated_context"] = mean(lines, "in_truncated_context")
    return summary
