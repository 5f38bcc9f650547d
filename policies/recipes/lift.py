"""LIFT: long-input fine-tuning. A document too long for the context goes into the weights.

LIFT (Mao et al., ICML 2026) answers questions about a long input without putting the input in
the context. It fine-tunes a fresh LoRA adapter per document on synthetic tasks about it, so the
model is asked the question alone. This module follows the released pipeline:

1. **Segmentation** (:func:`segment_sentences`): the document is cut into sentences, by rules
   (sentence-ending punctuation before a capital or a digit, abbreviations and decimals kept
   whole, blank lines ending a sentence), optionally packed up to ``max_sentence_chars``.
2. **Synthetic tasks** (:class:`TaskGenerator`): for sentence ``i`` the passage is the
   sentences before it, back to ``context_chars`` characters, followed by sentence ``i``. Any
   chat policy (``--generator SPEC``, e.g. an ``openai:`` vLLM server) is asked for up to
   ``tasks_per_sentence`` question-answer pairs about that last sentence. The reply is
   structured output: a forced call of the ``submit_qa`` tool, whose JSON schema a server
   with guided decoding, or the transformers backend's grammar decoding, holds it to. A
   plain JSON reply is read too. Calls run ``concurrency`` at a time; a reply that cannot be
   read, or a failed call, is retried ``max_retries`` times, and then the run stops with an
   error that names the sentence and the reply. With ``needle_only`` the generator is told to
   write pairs only when the last sentence has nothing to do with the passage (the
   needle-in-a-haystack setting of the reference).
3. **Training records**: one chat record per pair. The system turn is "You are a helpful
   assistant."; the user turn is ``Please answer the question based on "TITLE".`` with the
   question; the answer is the assistant turn. The document itself is never in them.
4. **Per-document LoRA fine-tuning** through embodia's SFT recipe, on a fresh adapter.
   With ``overlap`` (the default) training starts on the first pairs while the rest are
   still being generated (a :class:`~embodia.policies.recipes.sft.RecordStream`), so time to
   first answer is bounded by the slower of the two, not their sum; ``epochs`` passes, the
   first as the pairs arrive.
5. **Answers without the context** (:func:`answer_questions`): the trained model is asked each
   question in the training prompt's form.

:func:`run_lift` runs it all in a run folder: ``config.yaml``; ``tasks.jsonl`` (one line per
sentence, its pairs, written as they come); ``train/`` (the SFT run: metrics, checkpoints,
``final/``); ``answers.jsonl`` (with questions); and ``summary.json``, which holds the time
to first answer token and its parts. ``resume=True`` keeps the pairs already generated and
continues training from the last checkpoint.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from embodia.core.chat import Completion, Message, Policy, PolicyError
from embodia.core.limits import check_range, check_seed
from embodia.core.runs import RecordLog, RunFolder, read_jsonl, runner
from embodia.errors import EmbodiaError, read_text_file
from embodia.policies.recipes.sft import RecordStream, SFTError, SFTSettings, run_sft
from embodia.policies.spec import make_policy, parse_policy_spec

TASKS = "tasks.jsonl"
TRAIN = "train"
ANSWERS = "answers.jsonl"
SUMMARY = "summary.json"
SYSTEM = "You are a helpful assistant."
QA_TOOL = "submit_qa"
QUESTION_CHARS = 300
ANSWER_CHARS = 200

_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "fig",
        "al",
        "approx",
        "dept",
        "est",
        "inc",
        "ltd",
        "co",
        "corp",
    ]
)
"""Words a full stop follows without ending the sentence ("Dr. Smith")."""
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n")


class LIFTError(EmbodiaError, ValueError):
    """A LIFT input, setting or generator reply that cannot be used; the message names it."""


# --------------------------------------------------------------------------- segmentation


def segment_sentences(text: str, max_sentence_chars: int = -1) -> list[str]:
    """The document's sentences (see the module docstring); with ``max_sentence_chars`` > 0,
    consecutive sentences packed into pieces of at most that many characters."""
    pieces, begin = [], 0
    for match in _SENTENCE_END.finditer(text):
        candidate = text[begin : match.start()].strip()
        last_word = candidate.rsplit(None, 1)[-1].lower().rstrip(".") if candidate else ""
        if match.group(0).strip() == "" and "\n" not in match.group(0) and last_word in _ABBREVIATIONS:
            continue  # "Dr. Smith": not the end of a sentence
        if candidate:
            pieces.append(candidate)
        begin = match.end()
    if text[begin:].strip():
        pieces.append(text[begin:].strip())
    if max_sentence_chars <= 0:
        return pieces
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + 1 + len(piece) <= max_sentence_chars:
            packed[-1] += " " + piece
        else:
            packed.append(piece)
    return packed


def passage(sentences: Sequence[str], index: int, context_chars: int) -> str:
    """Sentence ``index`` after the sentences before it, back to about ``context_chars``."""
    before: list[str] = []
    size = 0
    for sentence in reversed(sentences[:index]):
        if size + len(sentence) > context_chars:
            break
        before.insert(0, sentence)
        size += len(sentence) + 1
    return " ".join([*before, sentences[index]])


# --------------------------------------------------------------------------- synthetic tasks


def qa_tool(count: int) -> dict[str, Any]:
    """The ``submit_qa`` tool: its arguments are ``{"qa_list": [{question, answer}, ...]}``."""
    pair = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": QUESTION_CHARS},
            "answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_CHARS},
        },
        "required": ["question", "answer"],
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {
            "name": QA_TOOL,
            "description": "Submit the question-answer pairs about the passage's last sentence.",
            "parameters": {
                "type": "object",
                "properties": {"qa_list": {"type": "array", "items": pair, "maxItems": count}},
                "required": ["qa_list"],
                "additionalProperties": False,
            },
        },
    }


def generator_messages(text: str, count: int, needle_only: bool) -> list[Message]:
    """The request for pairs about ``text``'s last sentence."""
    rule = (
        "Write pairs only if the last sentence has nothing to do with the rest of the passage; "
        "otherwise submit an empty list. "
        if needle_only
        else ""
    )
    system = (
        f"You write question-answer pairs that test what a reader learnt from a passage. Write up to "
        f"{count} different pairs about the last sentence of the passage only. {rule}Each question must "
        "make sense without the passage (name the people, places and things it asks about); each "
        f'answer is short. Reply by calling {QA_TOOL}, or with the JSON object {{"qa_list": '
        '[{"question": ..., "answer": ...}]}.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Passage:\n{text}"}]


def read_qa_reply(completion: Completion, count: int) -> list[dict[str, str]]:
    """The pairs of a generator reply (a ``submit_qa`` call, or the JSON object as text), at
    most ``count``; a :class:`LIFTError` naming what is wrong otherwise."""
    call = completion.tool_calls[0] if completion.tool_calls else None
    value: Any
    if call is not None and call.ok:
        value = call.arguments
    else:
        # no call, or one that could not be read as a call: the text may be the object itself
        text = (completion.text or (call.arguments_text if call is not None else "")).strip()
        fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
        text = fenced.group(1) if fenced else text
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            why = f"; the {QA_TOOL} call: {call.error}" if call is not None else ""
            raise LIFTError(f"the reply is not JSON ({error.msg} at character {error.pos}){why}") from error
    pairs = value.get("qa_list") if isinstance(value, Mapping) else value
    if not isinstance(pairs, list):
        raise LIFTError('the reply holds no "qa_list" list')
    out = []
    for index, pair in enumerate(pairs[:count]):
        if not isinstance(pair, Mapping):
            raise LIFTError(f"qa_list[{index}] is not an object")
        question, answer = pair.get("question"), pair.get("answer")
        if not (
            isinstance(question, str) and question.strip() and isinstance(answer, str) and answer.strip()
        ):
            raise LIFTError(f"qa_list[{index}] needs a non-empty question and answer")
        out.append({"question": question.strip(), "answer": answer.strip()})
    return out


class TaskGenerator:
    """Asks a chat policy for each sentence's pairs, ``concurrency`` calls at a time."""

    def __init__(
        self,
        policy: Policy,
        *,
        tasks_per_sentence: int,
        context_chars: int,
        concurrency: int,
        max_retries: int,
        max_tokens: int,
        needle_only: bool = False,
    ) -> None:
        self.policy = policy
        self.count = tasks_per_sentence
        self.context_chars = context_chars
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.needle_only = needle_only
        self.calls = 0
        self.retries = 0
        self.stop = threading.Event()
        """Set: no new call starts (the training failed; the pairs are not needed)."""
        self._lock = threading.Lock()

    def pairs(self, sentences: Sequence[str], index: int) -> list[dict[str, str]]:
        """Sentence ``index``'s pairs, retrying unreadable replies and failed calls."""
        messages = generator_messages(
            passage(sentences, index, self.context_chars), self.count, self.needle_only
        )
        problem, reply = "", ""
        for attempt in range(self.max_retries + 1):
            if self.stop.is_set():
                raise LIFTError(f"sentence {index}: generation stopped")
            with self._lock:
                self.calls += 1
                self.retries += attempt > 0
            try:
                completion = self.policy.complete(
                    messages,
                    max_tokens=self.max_tokens,
                    tools=(qa_tool(self.count),),
                    tool_choice={"name": QA_TOOL},
                )
                reply = completion.text or (
                    completion.tool_calls[0].arguments_text if completion.tool_calls else ""
                )
                return read_qa_reply(completion, self.count)
            except (LIFTError, PolicyError) as error:
                problem = str(error)
        raise LIFTError(
            f"sentence {index}: no usable question-answer pairs after {self.max_retries + 1} tries "
            f"({problem}); last reply: {reply[:200]!r}"
        )

    def run(
        self, sentences: Sequence[str], todo: Sequence[int]
    ) -> Iterator[tuple[int, list[dict[str, str]]]]:
        """(sentence, pairs) for each sentence of ``todo``, as the calls finish."""
        if not todo:
            return
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="lift-generator") as pool:
            waiting = list(reversed(todo))
            running: dict[Future[list[dict[str, str]]], int] = {}
            try:
                while (waiting or running) and not self.stop.is_set():
                    while waiting and len(running) < self.concurrency:
                        index = waiting.pop()
                        running[pool.submit(self.pairs, sentences, index)] = index
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in sorted(done, key=lambda f: running[f]):
                        index = running.pop(future)
                        yield index, future.result()
            finally:
                for future in running:
                    future.cancel()


def training_record(title: str, question: str, answer: str) -> dict[str, Any]:
    """One pair as a chat record, in the form questions are asked after training."""
    return {"messages": [*question_messages(title, question), {"role": "assistant", "content": answer}]}


def question_messages(title: str, question: str) -> list[Message]:
    """A question without the document, as LIFT's training records put it."""
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f'Please answer the question based on "{title}".\nQuestion: {question}\nAnswer:',
        },
    ]


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class LIFTSettings:
    """What a LIFT run is (see the module docstring)."""

    model: str
    """The model to fine-tune: ``hf:DIR``."""
    document: str
    """The long input: a UTF-8 text file."""
    generator: str
    """The policy that writes the question-answer pairs (any ``--policy`` spec)."""
    title: str = ""
    """How questions name the document; empty: the file's name without its suffix."""
    tasks_per_sentence: int = 5
    """Pairs asked for per sentence (the reference: 5 or 10)."""
    context_chars: int = 2048
    """Characters of the sentences before the one asked about, given as its passage."""
    max_sentence_chars: int = -1
    """Pack sentences into pieces of at most this many characters; -1: one per sentence."""
    needle_only: bool = False
    """Ask for pairs only about sentences unrelated to their passage (needle in a haystack)."""
    concurrency: int = 8
    """Generator calls in flight at once."""
    max_retries: int = 3
    """Tries after the first for a sentence whose reply cannot be read."""
    generator_max_tokens: int = 1024
    """Tokens a generator reply may take."""
    overlap: bool = True
    """Train on the first pairs while the rest are generated."""
    epochs: int = 3
    """Passes over the pairs."""
    learning_rate: float = 3e-4
    batch_size: int = 4
    lora_r: int = 16
    """LoRA rank; 0: full fine-tuning."""
    lora_alpha: int = 32
    max_length: int = 256
    """Tokens per training record."""
    answer_max_tokens: int = 32
    """Tokens an answer may take."""
    save_steps: int = 50
    """Optimiser steps between checkpoints (a resume continues from the last)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if parse_policy_spec(self.model)[0] != "hf":
            raise LIFTError(
                f"LIFT fine-tunes a local transformers model: the model must be hf:DIR, got {self.model!r}"
            )
        parse_policy_spec(self.generator)
        if not self.document.strip():
            raise LIFTError("no document given")
        check_range("tasks_per_sentence", self.tasks_per_sentence, 1, 100, LIFTError)
        check_range("context_chars", self.context_chars, 0, 10_000_000, LIFTError)
        if not (self.max_sentence_chars == -1 or self.max_sentence_chars > 0):
            raise LIFTError(f"max_sentence_chars must be -1 or positive, got {self.max_sentence_chars}")
        check_range("concurrency", self.concurrency, 1, 1024, LIFTError)
        check_range("max_retries", self.max_retries, 0, 100, LIFTError)
        check_range("generator_max_tokens", self.generator_max_tokens, 1, 1_000_000, LIFTError)
        check_range("epochs", self.epochs, 1, 1000, LIFTError)
        if not (math.isfinite(self.learning_rate) and 0 < self.learning_rate <= 1):
            raise LIFTError(f"learning_rate must be in (0, 1], got {self.learning_rate!r}")
        check_range("batch_size", self.batch_size, 1, 4096, LIFTError)
        check_range("lora_r", self.lora_r, 0, 4096, LIFTError)
        check_range("lora_alpha", self.lora_alpha, 1, 65_536, LIFTError)
        check_range("max_length", self.max_length, 8, 1_000_000, LIFTError)
        check_range("answer_max_tokens", self.answer_max_tokens, 1, 100_000, LIFTError)
        check_range("save_steps", self.save_steps, 1, 1_000_000, LIFTError)
        check_seed("seed", self.seed, LIFTError)

    @property
    def document_title(self) -> str:
        return self.title or Path(self.document).stem


def read_document(path: str) -> str:
    """The document's text; a :class:`LIFTError` when it is missing or holds no text."""
    text = read_text_file(Path(path), LIFTError)
    if not text.strip():
        raise LIFTError(f"the document {path} is empty: there is nothing to learn")
    return text


def read_questions(path: str) -> list[dict[str, Any]]:
    """Questions from a JSONL file: ``{"question": str}``, optionally with ``"answer"``
    (checked: does the reply contain it)."""
    numbered = read_jsonl(path, strict=True, error=LIFTError, what="questions file")
    questions = []
    for number, record in numbered:
        if not isinstance(record.get("question"), str) or not record["question"].strip():
            raise LIFTError(f'{path} line {number}: expected {{"question": str}}')
        if "answer" in record and not isinstance(record["answer"], str):
            raise LIFTError(f"{path} line {number}: answer must be a string")
        questions.append(record)
    if not questions:
        raise LIFTError(f"{path} holds no questions")
    return questions


def answer_contains(reply: str, answer: str) -> bool:
    """Whether ``reply`` states ``answer`` (case and spacing ignored)."""
    squash = lambda text: " ".join(text.lower().split())  # noqa: E731
    return squash(answer) in squash(reply)


class _FirstPiece:
    """An ``on_text`` callback that keeps when the first piece of a reply came."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, _piece: str) -> None:
        if self.at is None:
            self.at = time.perf_counter()


def answer_questions(
    policy: Policy,
    title: str,
    questions: Sequence[Mapping[str, Any]],
    max_tokens: int,
    messages: Callable[[str], list[Message]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Each question's reply, greedy, with the time to its first token; with ``messages``
    the prompt is built by it instead (an in-context baseline)."""
    for item in questions:
        question = str(item["question"])
        started = time.perf_counter()
        first = _FirstPiece()
        completion = policy.complete(
            messages(question) if messages else question_messages(title, question),
            max_tokens=max_tokens,
            on_text=first,
        )
        line: dict[str, Any] = {
            "question": question,
            "reply": completion.text,
            "first_token_s": (first.at or time.perf_counter()) - started,
        }
        if "answer" in item:
            line["answer"] = item["answer"]
            line["correct"] = answer_contains(completion.text, str(item["answer"]))
        yield line


@runner
def run_lift(
    settings: LIFTSettings,
    out: Path,
    *,
    resume: bool = False,
    questions: Sequence[Mapping[str, Any]] = (),
    generator: Policy | None = None,
) -> dict[str, Any]:
    """Absorb ``settings.document`` into a LoRA-tuned copy of ``settings.model`` in the run
    folder ``out`` and answer ``questions`` with it (see the module docstring). ``generator``
    replaces the policy ``settings.generator`` names (an object already made)."""
    started = time.perf_counter()
    folder = RunFolder(out, TASKS)
    text = read_document(settings.document)
    config = asdict(settings)
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    sentences = segment_sentences(text, settings.max_sentence_chars)
    segment_s = time.perf_counter() - started
    kept = [r for r in folder.kept_records() if isinstance(r.get("sentence"), int)]
    done = {r["sentence"] for r in kept}
    todo = [i for i in range(len(sentences)) if i not in done]
    policy = generator if generator is not None else make_policy(settings.generator, connect=True)
    tasks = TaskGenerator(
        policy,
        tasks_per_sentence=settings.tasks_per_sentence,
        context_chars=settings.context_chars,
        concurrency=settings.concurrency,
        max_retries=settings.max_retries,
        max_tokens=settings.generator_max_tokens,
        needle_only=settings.needle_only,
    )
    title = settings.document_title
    stream = RecordStream(epochs=settings.epochs)
    upper = len(sentences) * settings.tasks_per_sentence * settings.epochs
    sft = SFTSettings(
        model=settings.model,
        data=TASKS,  # a label: the records come from the stream (and the run's tasks.jsonl)
        max_steps=max(1, math.ceil(upper / settings.batch_size)),
        learning_rate=settings.learning_rate,
        lr_scheduler="constant",
        batch_size=settings.batch_size,
        max_length=settings.max_length,
        lora_r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        logging_steps=1,
        save_steps=settings.save_steps,
        seed=settings.seed,
    )
    timing: dict[str, float | None] = {"first_pair_s": None, "generation_s": None}
    generation_started = time.perf_counter()

    with folder.recording(kept, {"settings": config}) as log:
        for record in kept:
            for pair in record["pairs"]:
                stream.put(training_record(title, pair["question"], pair["answer"]))

        def generate() -> None:
            try:
                for index, pairs in tasks.run(sentences, todo):
                    log.append({"sentence": index, "pairs": pairs})
                    for pair in pairs:
                        stream.put(training_record(title, pair["question"], pair["answer"]))
                    if pairs and timing["first_pair_s"] is None:
                        timing["first_pair_s"] = time.perf_counter() - generation_started
                timing["generation_s"] = time.perf_counter() - generation_started
                stream.close()
            except BaseException as error:  # handed to the training thread, which raises it
                stream.fail(error)

        worker = threading.Thread(target=generate, name="lift-generation", daemon=True)
        worker.start()
        if not settings.overlap:
            worker.join()
        training_started = time.perf_counter()
        try:
            trained = run_sft(sft, folder.out / TRAIN, resume=folder.resuming, stream=stream)
        except BaseException as error:
            failed = stream.error  # a generation failure that stopped the training, if any
            tasks.stop.set()  # no more calls: the calls in flight end, nothing new starts
            worker.join()
            if not isinstance(error, SFTError):
                raise
            if isinstance(failed, LIFTError):
                raise failed from None  # the generation's own error says more than the trainer's
            raise LIFTError(str(failed if failed is not None else error)) from error
        worker.join()
    training_s = time.perf_counter() - training_started
    load_started = time.perf_counter()
    model = make_policy(trained["policy"])
    load_s = time.perf_counter() - load_started
    answers: list[dict[str, Any]] = []
    first_token_s = None
    ready_s = time.perf_counter() - started  # document in, model ready to answer
    if questions:
        with RecordLog(folder.out / ANSWERS, []) as written:
            for line in answer_questions(model, title, questions, settings.answer_max_tokens):
                answers.append(line)
                written.append(line)
        first_token_s = answers[0]["first_token_s"]
    ttft_s = None if first_token_s is None else ready_s + first_token_s
    pairs = sum(len(r["pairs"]) for r in folder.read_records())
    summary: dict[str, Any] = {
        "settings": config,
        "sentences": len(sentences),
        "pairs": pairs,
        "generator_calls": tasks.calls,
        "generator_retries": tasks.retries,
        "train_steps": trained["steps"],
        "train_loss_first": trained["train_loss_first"],
        "train_loss_last": trained["train_loss_last"],
        "policy": trained["policy"],
        "overlap": settings.overlap,
        "ttft_s": ttft_s,
        "ttft_parts_s": {
            "segment": segment_s,
            "wait_before_training": training_started - started - segment_s,
            "first_pair": timing["first_pair_s"],
            "generation": timing["generation_s"],
            "training": training_s,
            "load": load_s,
            "first_token": first_token_s,
        },
        "resumed": folder.resuming,
    }
    if answers and all("correct" in a for a in answers):
        summary["accuracy"] = sum(a["correct"] for a in answers) / len(answers)
    folder.finish(SUMMARY, summary)
    return summary
