"""Supervised fine-tuning (SFT) of a local causal LM on chat records, with TRL's ``SFTTrainer``.

The warm-up every RL recipe needs: a model that has never written the answer format earns no
reward, so GRPO has nothing to work with until SFT has taught it the format
(:mod:`embodia.policies.recipes.solutions` generates such records from embodia's envs).

Data: a JSONL file or an in-memory sequence of records, all of one of two kinds:

- chat records ``{"messages": [{"role": "system" | "user" | "assistant", "content": str}, ...]}``
  ending with an assistant message. With the completion-only loss (the default) the loss is
  on that last assistant message (the model's chat template closes it, end-of-turn token
  included); the messages before it are the prompt, earlier assistant turns included.
- prompt/completion records ``{"prompt": str, "completion": str}``: plain text, no chat
  template; the tokenizer's end-of-sequence token is appended to the completion.

Without the completion-only loss every token of a record is trained on.

A chat record may carry ``images``: a list of image files (a path relative to the JSONL
file's folder, or to the working directory for records given in memory), attached to its
last user message before the reply, as the ``hf`` backend attaches a request's images. The
model is then a vision-language model (an image-text-to-text directory with its processor),
and the records are rendered and tokenised batch by batch by TRL's vision-language collator.
All records of a run have images or none do. An image record with ``"train_reply": false``
runs through the model without an LM loss (for a second objective that reads it). Only image
records can have their completion replaced while training runs (``run_sft(override=...)``:
BYORn's bootstrapped responses).

Either kind may carry ``completion_weights``: ``[[end, weight], ...]``, the completion cut at
increasing character offsets ``end`` into spans, each with a loss weight (a token belongs to
the span its first character is in; the last span runs on to the end of the turn). Records
with weights are tokenised by the recipe itself, and the loss is the weighted mean over the
completion tokens (weights of mean 1 keep the loss's scale); records without weigh 1. AIR's
step weights (:mod:`embodia.policies.recipes.air`) are written in this form.

The run folder (``out``), written through :class:`~embodia.core.runs.RunFolder`:

- ``config.yaml``: the settings (in-memory data as its record count and SHA-256, a file as its
  path and SHA-256, so a resume with other data is refused);
- ``metrics.jsonl``: one line per logging step (``step``, ``epoch``, ``loss``,
  ``learning_rate``, ``grad_norm``, ``entropy``, ``mean_token_accuracy``, ``tokens``,
  ``tokens_per_s``, ``wall_s``), and with held-out data one ``eval_loss`` line before
  training and one after;
- ``checkpoints/checkpoint-N``: the trainer's checkpoints (weights, optimiser, scheduler and
  RNG state); ``--resume`` continues from the last complete one;
- ``final/``: the trained model with its tokenizer and chat template (LoRA adapters merged
  into the weights), loadable as ``hf:OUT/final`` by every runner;
- ``summary.json``: steps, losses, the held-out losses before and after, and a trivial
  baseline for them (:func:`unigram_entropy`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import math
import time
from collections import Counter, UserDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from embodia.core.chat import PolicyError
from embodia.core.limits import MAX_SET_SIZE, MAX_STEPS, check_range, check_seed
from embodia.core.runs import RunFolder, read_jsonl, runner, set_aside
from embodia.core.weights import load_weights
from embodia.errors import EmbodiaError
from embodia.policies.recipes.curves import plot_curves
from embodia.policies.spec import make_policy, parse_policy_spec
from embodia.policies.trainable import model_card, quiet_progress_bars, save_model_folder, tuning

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, TrainerCallback

logger = logging.getLogger(__name__)

METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
FINAL = "final"
SUMMARY = "summary.json"
CURVES = "curves.png"
CURVE_KEYS = ("loss", "learning_rate", "eval_loss", "mean_token_accuracy", "tokens_per_s")
ROLES = ("system", "user", "assistant")
SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup")
MAX_LENGTH = 131_072
MAX_IMAGES = 64
OBJECTIVE_WEIGHTS = "objective.safetensors"

Record = Mapping[str, Any]
"""One SFT record: ``{"messages": [...]}`` or ``{"prompt": str, "completion": str}``."""
MetricsCallback = Callable[[dict[str, Any]], None]
"""What ``run_sft``'s ``on_log`` is: called with each ``metrics.jsonl`` line as it is written."""


class SFTError(EmbodiaError, ValueError):
    """SFT settings or data that cannot be used; the message names the bad value."""


@dataclass(frozen=True)
class SFTSettings:
    """What an SFT run is (see the module docstring)."""

    model: str
    """The model to fine-tune: ``hf:DIR``, a local transformers causal-LM directory with its
    ``config.json``, tokenizer and chat template (options as for ``--policy hf:``, e.g.
    ``?dtype=bfloat16``)."""
    data: str | tuple[Record, ...]
    """The training records: a JSONL file's path, or the records themselves."""
    eval_data: str | tuple[Record, ...] | None = None
    """Held-out records, of the same kind, whose loss is measured before and after training;
    None to measure none."""
    epochs: float = 1.0
    """Passes over the training records (fractions allowed); ignored when ``max_steps`` is set."""
    max_steps: int = 0
    """Optimiser steps to take; 0 means as many as ``epochs`` make."""
    learning_rate: float = 1e-4
    """The AdamW learning rate at the schedule's peak."""
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "linear"
    """How the learning rate moves after the warm-up: to 0 linearly or as a cosine, or constant."""
    warmup_steps: int = 0
    """Optimiser steps over which the learning rate rises from 0 to its peak."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    batch_size: int = 8
    """Records per forward pass (per device)."""
    gradient_accumulation: int = 1
    """Forward passes whose gradients are summed into one optimiser step (the effective batch
    is ``batch_size * gradient_accumulation``)."""
    max_length: int = 1024
    """Tokens per record (longer ones are cut at the end), or per packed row with ``packing``."""
    packing: bool = False
    """Pack several records into each row of ``max_length`` tokens (best-fit, no record split)
    instead of padding each one: fewer wasted tokens when records are short."""
    completion_only_loss: bool = True
    """Train on the completion only (the last assistant message, or ``completion``), not on
    the prompt."""
    lora_r: int = 0
    """LoRA rank; 0 trains every weight instead (full fine-tuning)."""
    lora_alpha: int = 16
    """LoRA scaling numerator (the update is scaled by ``lora_alpha / lora_r``)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch's input."""
    lora_targets: tuple[str, ...] = ()
    """Module names LoRA adapts (e.g. ``q_proj``, ``v_proj``); empty means every linear layer
    but the output head."""
    logging_steps: int = 10
    """Optimiser steps between two ``metrics.jsonl`` lines."""
    save_steps: int = 100
    """Optimiser steps between two checkpoints (a resumed run continues from the last one)."""
    seed: int = 0
    """Seed of the data order, dropout and LoRA initialisation."""

    def __post_init__(self) -> None:
        scheme, _, _ = parse_policy_spec(self.model)
        if scheme != "hf":
            raise SFTError(
                f"SFT trains a local transformers model: the model must be hf:DIR, got {self.model!r}"
            )
        _check_data_setting("data", self.data)
        if self.eval_data is not None:
            _check_data_setting("eval_data", self.eval_data)
        if not (isinstance(self.epochs, int | float) and math.isfinite(self.epochs) and self.epochs > 0):
            raise SFTError(f"epochs must be a positive number, got {self.epochs!r}")
        check_range("max_steps", self.max_steps, 0, MAX_STEPS, SFTError)
        if not (math.isfinite(self.learning_rate) and 0 < self.learning_rate <= 1):
            raise SFTError(f"learning_rate must be in (0, 1], got {self.learning_rate!r}")
        if self.lr_scheduler not in SCHEDULERS:
            raise SFTError(
                f"unknown lr_scheduler {self.lr_scheduler!r}: expected one of {', '.join(SCHEDULERS)}"
            )
        check_range("warmup_steps", self.warmup_steps, 0, MAX_STEPS, SFTError)
        if not (math.isfinite(self.weight_decay) and 0 <= self.weight_decay < 1):
            raise SFTError(f"weight_decay must be in [0, 1), got {self.weight_decay!r}")
        check_range("batch_size", self.batch_size, 1, 4096, SFTError)
        check_range("gradient_accumulation", self.gradient_accumulation, 1, 4096, SFTError)
        check_range("max_length", self.max_length, 8, MAX_LENGTH, SFTError)
        check_range("lora_r", self.lora_r, 0, 4096, SFTError)
        if self.lora_r:
            check_range("lora_alpha", self.lora_alpha, 1, 65_536, SFTError)
            if not (math.isfinite(self.lora_dropout) and 0 <= self.lora_dropout < 1):
                raise SFTError(f"lora_dropout must be in [0, 1), got {self.lora_dropout!r}")
            bad = [t for t in self.lora_targets if not (isinstance(t, str) and t.strip())]
            if bad:
                raise SFTError(f"lora_targets must be module names, got {bad[0]!r}")
        elif self.lora_targets:
            raise SFTError(
                "lora_targets are given but lora_r is 0 (full fine-tuning): set lora_r to use LoRA"
            )
        check_range("logging_steps", self.logging_steps, 1, MAX_STEPS, SFTError)
        check_range("save_steps", self.save_steps, 1, MAX_STEPS, SFTError)
        check_seed("seed", self.seed, SFTError)


def _check_data_setting(name: str, value: object) -> None:
    if isinstance(value, str):
        if not value.strip():
            raise SFTError(f"{name} is empty: give a JSONL file or the records themselves")
        return
    if not isinstance(value, tuple):
        raise SFTError(
            f"{name} must be a JSONL file's path or a tuple of records, got a {type(value).__name__}"
        )


def settings_record(
    settings: SFTSettings, data: Sequence[Record] | None, eval_data: Sequence[Record] | None
) -> dict[str, Any]:
    """The settings as ``config.yaml`` keeps them, given their loaded records: data named by
    its path (or record count) and the SHA-256 of its records, so a resume with other data is
    refused."""
    record = asdict(settings)
    for key, records in (("data", data), ("eval_data", eval_data)):
        value = getattr(settings, key)
        if records is None:
            continue
        record[key] = value if isinstance(value, str) else f"{len(records)} records given in memory"
        record[f"{key}_sha256"] = records_digest(records)
    record["lora_targets"] = list(settings.lora_targets)
    return record


def records_digest(records: Sequence[Record]) -> str:
    """The SHA-256 of the records, as JSON with sorted keys (a resume with other data is refused)."""
    text = json.dumps(list(records), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the records


def load_records(data: str | Sequence[Record], what: str = "data") -> list[Record]:
    """The records of ``data`` (a JSONL file, read strictly, or the records themselves), each
    checked (:func:`record_kind`), all of one kind; an :class:`SFTError` naming the first bad
    one otherwise."""
    if isinstance(data, str):
        numbered = read_jsonl(data, strict=True, error=SFTError, what=f"{what} file")
        where = [f"{data} line {number}" for number, _ in numbered]
        records: list[Record] = [record for _, record in numbered]
    else:
        records = list(data)
        where = [f"{what} record {index}" for index in range(len(records))]
    if not records:
        raise SFTError(f"{what} holds no records")
    check_range(f"the number of {what} records", len(records), 1, MAX_SET_SIZE, SFTError)
    kinds = {record_kind(record, place) for record, place in zip(records, where, strict=True)}
    if len(kinds) > 1:
        raise SFTError(f"{what} mixes chat records and prompt/completion records: use one kind")
    return _resolve_images(records, where, Path(data).parent if isinstance(data, str) else Path.cwd())


def record_kind(record: object, where: str = "record") -> Literal["chat", "completion"]:
    """``chat`` for ``{"messages": [...]}`` (roles system/user/assistant, string contents,
    the last one the assistant's), ``completion`` for ``{"prompt": str, "completion": str}``;
    an :class:`SFTError` naming the problem for anything else."""
    if not isinstance(record, Mapping):
        raise SFTError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise SFTError(f"{where}: messages must be a non-empty list")
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping) or message.get("role") not in ROLES:
                raise SFTError(f"{where}: message {index} must have a role of {', '.join(ROLES)}")
            content = message.get("content")
            if isinstance(content, list) and index < len(messages) - 1:
                _check_parts(content, f"{where}: message {index}")
            elif not isinstance(content, str):
                raise SFTError(f"{where}: message {index} has no string content")
        if messages[-1]["role"] != "assistant":
            raise SFTError(f"{where}: the last message must be the assistant's (the reply to learn)")
        _check_weights(record, where)
        _check_images(record, where)
        return "chat"
    if "prompt" in record or "completion" in record:
        for key in ("prompt", "completion"):
            if not isinstance(record.get(key), str):
                raise SFTError(f"{where}: {key} must be a string")
        if not record["completion"]:
            raise SFTError(f"{where}: completion is empty")
        if "images" in record:
            raise SFTError(f'{where}: images go with chat records ({{"messages": [...], "images": [...]}})')
        _check_weights(record, where)
        return "completion"
    raise SFTError(f'{where}: expected {{"messages": [...]}} or {{"prompt": ..., "completion": ...}}')


def _check_weights(record: Mapping[str, Any], where: str) -> None:
    """``completion_weights``, where a record has them: [[end, weight], ...] with increasing
    integer ends and finite non-negative weights."""
    if "completion_weights" not in record:
        return
    spans = record["completion_weights"]
    if not isinstance(spans, list) or not spans:
        raise SFTError(f"{where}: completion_weights must be a non-empty list of [end, weight] pairs")
    last = 0
    for index, span in enumerate(spans):
        ok = isinstance(span, list | tuple) and len(span) == 2
        end, weight = (span[0], span[1]) if ok else (None, None)
        if not (isinstance(end, int) and not isinstance(end, bool) and end > last):
            raise SFTError(f"{where}: completion_weights[{index}] must start with an end offset above {last}")
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            raise SFTError(f"{where}: completion_weights[{index}] has no finite non-negative weight")
        last = end


def _check_parts(parts: list[Any], where: str) -> None:
    """Content in parts: ``{"type": "text", "text": str}`` or ``{"type": "image"}``."""
    for index, part in enumerate(parts):
        ok = isinstance(part, Mapping) and (
            part.get("type") == "image" or (part.get("type") == "text" and isinstance(part.get("text"), str))
        )
        if not ok:
            raise SFTError(
                f'{where}: part {index} must be {{"type": "text", "text": ...}} or {{"type": "image"}}'
            )


def image_parts(record: Mapping[str, Any]) -> int | None:
    """How many image placeholders a record's content parts hold, or None when its contents
    are all strings."""
    lists = [m["content"] for m in record["messages"] if isinstance(m["content"], list)]
    return sum(p["type"] == "image" for parts in lists for p in parts) if lists else None


def _check_images(record: Mapping[str, Any], where: str) -> None:
    """``images``, where a chat record has them: a non-empty list of file paths, a user message
    to attach them to, and no ``completion_weights`` (image records are tokenised batch by batch)."""
    placed = image_parts(record)
    if "images" not in record:
        if placed is not None:
            raise SFTError(f"{where}: content in parts goes with images: the record has no images")
        if "train_reply" in record:
            raise SFTError(f"{where}: train_reply goes with image records (tokenised batch by batch)")
        return
    images = record["images"]
    if not isinstance(images, list) or not images or len(images) > MAX_IMAGES:
        raise SFTError(f"{where}: images must be a list of 1 to {MAX_IMAGES} image file paths")
    for index, image in enumerate(images):
        if not (isinstance(image, str) and image.strip()):
            raise SFTError(f"{where}: images[{index}] must be an image file's path")
    if not any(m["role"] == "user" for m in record["messages"][:-1]):
        raise SFTError(f"{where}: images are attached to the last user message, but there is no user message")
    if not isinstance(record.get("train_reply", True), bool):
        raise SFTError(f"{where}: train_reply must be true or false")
    if placed is not None and placed != len(images):
        raise SFTError(f"{where}: the content places {placed} image(s) but the record has {len(images)}")
    if "completion_weights" in record:
        raise SFTError(f"{where}: records with images cannot carry completion_weights")


def has_images(records: Sequence[Record]) -> bool:
    """Whether the records are image records (:func:`load_records` makes them all or none)."""
    return bool(records) and "images" in records[0]


def _resolve_images(records: list[Record], where: list[str], base: Path) -> list[Record]:
    """The records with each image path made absolute (relative ones from ``base``), every
    file checked to exist; all records have images or none do."""
    with_images = [index for index, record in enumerate(records) if "images" in record]
    if not with_images:
        return records
    if len(with_images) != len(records):
        missing = next(index for index in range(len(records)) if "images" not in records[index])
        raise SFTError(
            f"{where[missing]}: has no images while other records do: give every record its images"
        )
    resolved: list[Record] = []
    for record, place in zip(records, where, strict=True):
        paths = []
        for image in record["images"]:
            path = Path(image).expanduser()
            path = path if path.is_absolute() else base / path
            if not path.is_file():
                raise SFTError(f"{place}: image file {image!r} not found (looked at {path})")
            paths.append(str(path))
        resolved.append({**record, "images": paths})
    return resolved


def trainer_rows(records: Iterable[Record], completion_only_loss: bool) -> list[dict[str, Any]]:
    """``records`` in the dataset formats ``SFTTrainer`` reads: a chat record becomes a
    conversational prompt/completion pair (the last assistant message is the completion) when
    only the completion is trained on, else stays a ``messages`` record; a prompt/completion
    record stays one, or becomes plain ``text`` when every token is trained on."""
    rows: list[dict[str, Any]] = []
    for record in records:
        if "messages" in record:
            messages = [{"role": m["role"], "content": m["content"]} for m in record["messages"]]
            rows.append(
                {"prompt": messages[:-1], "completion": messages[-1:]}
                if completion_only_loss
                else {"messages": messages}
            )
        elif completion_only_loss:
            rows.append({"prompt": record["prompt"], "completion": record["completion"]})
        else:
            rows.append({"text": record["prompt"] + record["completion"]})
    return rows


def unigram_entropy(labels: Iterable[Sequence[int]]) -> float:
    """The entropy (nats per token) of the token frequencies among the trained-on labels
    (``-100`` marks a token not trained on): the loss of the best predictor that ignores the
    context, told the held-out set's own frequencies. A model below it uses the context."""
    counts = Counter(token for row in labels for token in row if token != -100)
    total = sum(counts.values())
    if not total:
        raise SFTError("no trained-on tokens to measure")
    return -sum(n / total * math.log(n / total) for n in counts.values())


class RecordStream:
    """Training records that arrive while training runs (LIFT's synthetic tasks, generated as
    the trainer learns from the first ones): :func:`run_sft` with ``stream=`` reads them as an
    iterable dataset.

    A pass over the stream yields every record put so far, waits for the next one until
    :meth:`close`, then goes over all of them again, ``epochs`` times in all. Only the first
    pass that runs to its end counts: later passes (the trainer starting a new epoch) yield
    nothing, which ends the training; a pass left unfinished (the trainer's peek at the first
    record) changes nothing. A producer that fails calls :meth:`fail`, and the pass raises its
    error in the training thread.
    """

    def __init__(self, epochs: int = 1) -> None:
        import threading

        if epochs < 1:
            raise SFTError(f"a record stream needs at least 1 epoch, got {epochs}")
        self.epochs = epochs
        self.records: list[Record] = []
        self._changed = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._passed = False
        self.first_record_s: float | None = None
        """When (``time.perf_counter``) the first record was put."""

    def put(self, record: Record) -> None:
        record_kind(record, f"streamed record {len(self.records)}")
        if "completion_weights" in record:
            raise SFTError("streamed records cannot carry completion_weights: give weighted records as data")
        with self._changed:
            if self.first_record_s is None:
                self.first_record_s = time.perf_counter()
            self.records.append(record)
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def fail(self, error: BaseException) -> None:
        with self._changed:
            self._error, self._closed = error, True
            self._changed.notify_all()

    @property
    def error(self) -> BaseException | None:
        """What the producer failed with (:meth:`fail`), None while it has not."""
        return self._error

    def _wait(self, index: int) -> Record | None:
        """Record ``index`` once it is there; None when the stream closed before it."""
        with self._changed:
            while index >= len(self.records) and not self._closed:
                self._changed.wait()
            if self._error is not None:
                raise SFTError(f"the training records stopped coming: {self._error}") from self._error
            return self.records[index] if index < len(self.records) else None

    def __iter__(self) -> Iterator[Record]:
        if self._passed:
            return
        index = 0
        while (record := self._wait(index)) is not None:
            yield record
            index += 1
        if not self.records:
            raise SFTError("the record stream closed without a record to train on")
        for _ in range(self.epochs - 1):
            yield from list(self.records)
        self._passed = True


# --------------------------------------------------------------------------- the run


def load_causal_lm(spec: str) -> tuple[Any, PreTrainedModel]:
    """The tokenizer and causal LM of ``hf:DIR``, loaded by the ``hf`` policy backend (which
    checks config.json, the tokenizer and the chat template)."""
    from embodia.policies.hf import HFPolicy

    try:
        policy = make_policy(spec)
    except PolicyError as error:
        raise SFTError(f"cannot load the model {spec!r}: {error}") from error
    if not isinstance(policy, HFPolicy) or policy.processor is not None:
        raise SFTError(f"{spec} is a vision-language model: this SFT recipe trains text-only causal LMs")
    return policy.tokenizer, policy.model


def load_vlm(spec: str) -> tuple[Any, PreTrainedModel]:
    """The processor and image-text-to-text model of ``hf:DIR``, loaded by the ``hf`` policy
    backend; an :class:`SFTError` when the directory holds a text-only model."""
    from embodia.policies.hf import HFPolicy

    try:
        policy = make_policy(spec)
    except PolicyError as error:
        raise SFTError(f"cannot load the model {spec!r}: {error}") from error
    if not isinstance(policy, HFPolicy) or not policy.accepts_images:
        raise SFTError(
            f"{spec} is a text-only model but the records have images: give a vision-language model "
            "(an image-text-to-text directory with its processor)"
        )
    return policy.processor, policy.model


Override = Callable[[int], "str | None"]
"""What ``run_sft``'s ``override`` is: given a record's index, the completion to train on in
its place right now, or None to train on the record's own."""


class Objective(Protocol):
    """A second loss term trained together with the LM loss through the SFT recipe, with a
    trainable module of its own: Proact-VL's speak gate
    (:mod:`embodia.policies.recipes.proact_sft`) is one.

    The records are drawn in their order (not shuffled), so that a caller can put the records
    one loss term needs together (a clip's seconds) in one batch. Each record's ``fields``
    come into the batch as a tensor per field. The loss of a batch is the LM loss plus
    ``weight`` times :meth:`loss`. The module trains in the same optimiser; its state is
    saved in every checkpoint (``OBJECTIVE_WEIGHTS``) and loaded back on resume.
    """

    name: str
    """The key its loss is logged under in ``metrics.jsonl``."""
    fields: tuple[str, ...]
    module: torch.nn.Module
    weight: float

    def capture(self, model: Any) -> AbstractContextManager[None]:
        """A context in which the model's forward pass records what :meth:`loss` reads."""
        ...

    def loss(self, inputs: Mapping[str, Any], fields: Mapping[str, Any]) -> Any:
        """The term's loss on the batch just run (``inputs``: the model inputs)."""
        ...


def image_messages(record: Record, reply: str | None = None) -> list[dict[str, Any]]:
    """A chat record's messages in the structured form a processor's chat template takes. A
    content given in parts is kept as it is (its image placeholders take the images in
    order); otherwise each content becomes a text part, and one image placeholder per image
    goes before the text of the last user message that precedes the reply (where the ``hf``
    backend attaches a request's images). ``reply`` replaces the last (assistant) message's
    content."""
    messages = record["messages"]
    images = record.get("images", []) if image_parts(record) is None else []
    last_user = max((i for i, m in enumerate(messages[:-1]) if m["role"] == "user"), default=-1)
    structured = []
    for index, message in enumerate(messages):
        text = reply if reply is not None and index == len(messages) - 1 else message["content"]
        if isinstance(text, list):
            structured.append({"role": message["role"], "content": [dict(part) for part in text]})
            continue
        parts: list[dict[str, Any]] = [{"type": "image"} for _ in images] if index == last_user else []
        structured.append({"role": message["role"], "content": [*parts, {"type": "text", "text": text}]})
    return structured


def open_images(paths: Sequence[str]) -> list[Any]:
    """The image files as RGB PIL images (read now, so the files may change afterwards)."""
    from PIL import Image

    opened = []
    for path in paths:
        try:
            with Image.open(path) as image:
                opened.append(image.convert("RGB"))
        except OSError as error:
            raise SFTError(f"cannot read the image {path}: {error}") from error
    return opened


TRAIN_SPLIT, EVAL_SPLIT = "train", "eval"


def _image_rows(records: Sequence[Record], split: str) -> Any:
    """The dataset of image records the trainer draws from: each row names its record (the
    ``images`` column tells TRL the data is for a vision-language model)."""
    from datasets import Dataset  # type: ignore[import-untyped]

    return Dataset.from_list(
        [
            {"split": split, "record": index, "images": record["images"]}
            for index, record in enumerate(records)
        ]
    )


def image_batch(
    processor: Any,
    records: Sequence[Record],
    *,
    max_length: int,
    completion_only_loss: bool = True,
    replies: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """Image records as one padded batch of model inputs with ``labels`` (-100 on padding,
    on the prompt with ``completion_only_loss``, and on the whole row of a record with
    ``"train_reply": false``), rendered and tokenised by TRL's vision-language collator as
    the trainer's batches are; ``replies`` replaces the completions where it holds a string."""
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    collator = DataCollatorForVisionLanguageModeling(
        processor=processor, max_length=max_length, completion_only_loss=completion_only_loss
    )
    examples = []
    for index, record in enumerate(records):
        messages = image_messages(record, None if replies is None else replies[index])
        images = open_images(record["images"])
        examples.append(
            {"prompt": messages[:-1], "completion": messages[-1:], "images": images}
            if completion_only_loss
            else {"messages": messages, "images": images}
        )
    batch = dict(collator(examples))
    for row, record in enumerate(records):
        if record.get("train_reply", True) is False:
            batch["labels"][row] = -100
    return batch


class LazyBatch(UserDict[str, Any]):
    """A training batch rendered when it is first read, not when it is drawn.

    The trainer's data loader (accelerate's) draws each batch one step ahead, so a batch
    rendered when drawn would miss a completion override refreshed after the step before it
    (BYORn's regenerated replies), and a resumed run, which draws its first batches afresh,
    would see other replies than the uninterrupted run. Read first when its step starts (the
    trainer counts its labels), it sees every refresh made before that step. Moving it to a
    device keeps it lazy: the trainer moves each tensor itself. Built from a mapping (as the
    trainer rebuilds a batch with its tensors moved), it is that mapping."""

    def __init__(self, source: Callable[[], dict[str, Any]] | Mapping[str, Any] | None = None) -> None:
        self._render = source if callable(source) else None
        self._rendered: dict[str, Any] = {}
        super().__init__(None if callable(source) else source)

    @property
    def data(self) -> dict[str, Any]:
        if self._render is not None:
            render, self._render = self._render, None
            self._rendered = render()
        return self._rendered

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._rendered = value

    def to(self, device: Any, non_blocking: bool = False) -> LazyBatch:
        return self


def _image_collator(
    processor: Any,
    records: Mapping[str, Sequence[Record]],
    settings: SFTSettings,
    override: Override | None,
    fields: Sequence[str] = (),
) -> Callable[[list[dict[str, Any]]], LazyBatch]:
    """Batches of image records (rows of :func:`_image_rows`) made by :func:`image_batch` when
    first read (:class:`LazyBatch`), each training completion the one ``override`` gives for it
    at that moment (when it gives one), and each of the records' ``fields`` as a tensor."""
    import torch

    def render(rows: list[dict[str, Any]]) -> dict[str, Any]:
        chosen = [records[str(row["split"])][int(row["record"])] for row in rows]
        replies = [
            override(int(row["record"])) if override is not None and row["split"] == TRAIN_SPLIT else None
            for row in rows
        ]
        batch = image_batch(
            processor,
            chosen,
            max_length=settings.max_length,
            completion_only_loss=settings.completion_only_loss,
            replies=replies,
        )
        for field in fields:
            batch[field] = torch.tensor([record[field] for record in chosen])
        return batch

    def collate(rows: list[dict[str, Any]]) -> LazyBatch:
        return LazyBatch(lambda: render(rows))

    return collate


def is_weighted(*record_sets: Sequence[Record] | None) -> bool:
    """Whether any record carries ``completion_weights``."""
    return any("completion_weights" in r for records in record_sets if records for r in records)


def rendered_completion(tokenizer: Any, record: Record) -> tuple[str, str]:
    """The prompt and completion text a record is trained on. For a chat record, both as the
    chat template renders them: the completion is what the whole conversation adds after the
    prompt with its generation prompt (a template's empty think block included, the
    end-of-turn tokens too). For a prompt/completion record, the two strings as they are.
    ``completion_weights`` offsets count characters of this completion, and AIR scores it."""
    if "messages" not in record:
        return str(record["prompt"]), str(record["completion"])
    messages = [{"role": m["role"], "content": m["content"]} for m in record["messages"]]
    prompt = str(tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True))
    whole = str(tokenizer.apply_chat_template(messages, tokenize=False))
    if not whole.startswith(prompt):
        raise SFTError("the chat template does not render the reply after its prompt: cannot weigh it")
    return prompt, whole[len(prompt) :]


def weighted_rows(tokenizer: Any, records: Iterable[Record], max_length: int) -> list[dict[str, Any]]:
    """``records`` tokenised for the weighted loss: ``input_ids``, ``labels`` (-100 on the
    prompt) and ``token_weights`` (0 on the prompt), cut to ``max_length`` tokens."""
    rows: list[dict[str, Any]] = []
    for record in records:
        prompt, completion = rendered_completion(tokenizer, record)
        if "messages" not in record:
            completion += tokenizer.eos_token or ""
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        encoded = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
        spans = record.get("completion_weights") or [[len(completion), 1.0]]
        ends = [end for end, _ in spans]
        weights = [
            float(spans[min(bisect.bisect_right(ends, start), len(spans) - 1)][1])
            for start, _ in encoded["offset_mapping"]
        ]
        ids = (prompt_ids + encoded["input_ids"])[:max_length]
        labels = ([-100] * len(prompt_ids) + encoded["input_ids"])[:max_length]
        token_weights = ([0.0] * len(prompt_ids) + weights)[:max_length]
        rows.append({"input_ids": ids, "labels": labels, "token_weights": token_weights})
    return rows


def _dataset(
    records: Sequence[Record], completion_only_loss: bool, weighted_by: tuple[Any, int] | None = None
) -> Any:
    """A ``datasets.Dataset`` of :func:`trainer_rows`, or with ``weighted_by`` (tokenizer,
    max_length) of :func:`weighted_rows` (datasets ships no type information)."""
    from datasets import Dataset

    if weighted_by is not None:
        return Dataset.from_list(weighted_rows(weighted_by[0], records, weighted_by[1]))
    return Dataset.from_list(trainer_rows(records, completion_only_loss))


def _weighted_trainer_class() -> Any:
    """SFTTrainer whose loss weighs each completion token by its ``token_weights``: the sum of
    the weighted token losses over the number of completion tokens (so weights of mean 1
    keep the loss's scale)."""
    import torch
    from trl import SFTTrainer

    class WeightedSFTTrainer(SFTTrainer):
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            weights, labels = inputs.pop("token_weights"), inputs.pop("labels")
            outputs = model(**inputs, use_cache=False)
            logits, target = outputs.logits[:, :-1].float(), labels[:, 1:]
            mask = target != -100
            nll = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), target.clamp(min=0), reduction="none"
            )
            count = mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = (nll * weights[:, 1:].to(nll.dtype) * mask).sum() / torch.as_tensor(count).clamp(min=1)
            return (loss, outputs) if return_outputs else loss

    return WeightedSFTTrainer


def _image_trainer_class(objective: Objective | None, full_weights: bool) -> Any:
    """SFTTrainer for image records. With ``objective``, the loss is the LM loss plus
    ``objective.weight`` times the objective's, its module trained by the same optimiser and
    kept in every checkpoint. With ``full_weights`` (a full fine-tune), a checkpoint's weights
    are read back through ``from_pretrained``: a VLM saves the names of its original
    checkpoint format (LLaVA's "language_model.model.*"), which only ``from_pretrained`` maps
    back; read by the trainer, none would match and a resumed run would restart from the
    untrained weights."""
    from safetensors.torch import save_file
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
    from trl import SFTTrainer

    class ImageSFTTrainer(SFTTrainer):
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            if objective is None:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            fields = {name: inputs.pop(name) for name in objective.fields}
            with objective.capture(model):
                result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            term = objective.loss(inputs, fields)
            trained: Any = self.model
            mode = "train" if trained.training else "eval"
            self._metrics[mode][objective.name].append(float(term.detach()))
            if return_outputs:
                return result[0] + objective.weight * term, result[1]
            return result + objective.weight * term

        def create_optimizer(self, model: Any = None) -> Any:
            optimizer = super().create_optimizer(*(() if model is None else (model,)))
            if objective is not None:
                owned = {id(p) for group in optimizer.param_groups for p in group["params"]}
                extra = [p for p in objective.module.parameters() if p.requires_grad and id(p) not in owned]
                if extra:
                    optimizer.add_param_group({"params": extra, "weight_decay": 0.0})
            return optimizer

        def _save_checkpoint(self, model: Any, trial: Any) -> None:
            if objective is not None:
                # written before the checkpoint's trainer state, which marks a checkpoint complete
                folder = Path(str(self.args.output_dir)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
                folder.mkdir(parents=True, exist_ok=True)
                state = {k: v.detach().cpu().contiguous() for k, v in objective.module.state_dict().items()}
                save_file(state, str(folder / OBJECTIVE_WEIGHTS))
            super()._save_checkpoint(model, trial)

        def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
            if full_weights:
                target: Any = self.model if model is None else model
                loaded = type(target).from_pretrained(resume_from_checkpoint, dtype=target.dtype)
                target.load_state_dict(loaded.state_dict())
            else:
                super()._load_from_checkpoint(resume_from_checkpoint, model)
            if objective is not None:
                saved = Path(resume_from_checkpoint) / OBJECTIVE_WEIGHTS
                if not saved.is_file():
                    raise SFTError(
                        f"{resume_from_checkpoint} lacks the {objective.name} objective's {OBJECTIVE_WEIGHTS}"
                    )
                load_weights(objective.module, saved, SFTError, f"the {objective.name} objective")

    class ImageSFTTrainerWithObjective(ImageSFTTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            from transformers import TrainerCallback

            super().__init__(*args, **kwargs)

            class ZeroObjectiveGrads(TrainerCallback):
                # the trainer zeroes the model's gradients after each optimiser step, not the
                # objective module's: left alone, they would add up from step to step
                def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
                    assert objective is not None
                    objective.module.zero_grad(set_to_none=True)

            self.add_callback(ZeroObjectiveGrads())

    return ImageSFTTrainer if objective is None else ImageSFTTrainerWithObjective


def _weighted_collator(pad_token_id: int) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """TRL's padding of ids and labels, plus ``token_weights`` padded with 0."""
    import torch
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    base = DataCollatorForLanguageModeling(pad_token_id=pad_token_id)

    def collate(examples: list[dict[str, Any]]) -> dict[str, Any]:
        batch: dict[str, Any] = base([{"input_ids": e["input_ids"], "labels": e["labels"]} for e in examples])
        weights = torch.zeros(batch["input_ids"].shape, dtype=torch.float32)
        for row, example in enumerate(examples):
            weights[row, : len(example["token_weights"])] = torch.as_tensor(example["token_weights"])
        batch["token_weights"] = weights
        return batch

    return collate


def _last_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint in ``folder`` (a complete one has its trainer state,
    written last); newer incomplete ones (a kill mid-save) are set aside, not deleted."""
    if not folder.is_dir():
        return None
    numbered = []
    for entry in folder.iterdir():
        prefix, _, number = entry.name.partition("-")
        if entry.is_dir() and prefix == "checkpoint" and number.isdigit():
            numbered.append((int(number), entry))
    for _, entry in sorted(numbered, reverse=True):
        if (entry / "trainer_state.json").is_file():
            return entry
        kept = set_aside(entry, "incomplete")
        logger.warning("%s is incomplete (the run was killed while saving it): moved to %s", entry, kept)
    return None


def _checkpoint_step(checkpoint: Path) -> int:
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    return int(state["global_step"])


def _metrics_callback(
    note: MetricsCallback, tokens_before: int, extra_keys: Sequence[str] = ()
) -> TrainerCallback:
    """A TrainerCallback that hands ``note`` one ``metrics.jsonl`` line per logging step.
    Tokens are counted on from ``tokens_before`` (TRL counts from 0 in each process, resumed
    or not)."""
    from transformers import TrainerCallback

    class _Metrics(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.last_time = self.started
            self.last_tokens = 0.0

        def on_log(
            self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **_: Any
        ) -> None:
            if not logs or "loss" not in logs:  # eval logs and the final train_runtime summary
                return
            now = time.perf_counter()
            tokens = float(logs.get("num_tokens", 0.0))
            elapsed = now - self.last_time
            record: dict[str, Any] = {
                "step": state.global_step,
                "epoch": logs.get("epoch"),
                "loss": logs["loss"],
                "learning_rate": logs.get("learning_rate"),
                "grad_norm": logs.get("grad_norm"),
                "entropy": logs.get("entropy"),
                "mean_token_accuracy": logs.get("mean_token_accuracy"),
                "tokens": tokens_before + int(tokens),
                "tokens_per_s": (tokens - self.last_tokens) / elapsed if elapsed > 0 else None,
                "wall_s": now - self.started,
                **{key: logs[key] for key in extra_keys if key in logs},
            }
            self.last_time, self.last_tokens = now, tokens
            note(record)

    return _Metrics()


def _eval_record(trainer: Any, step: int) -> dict[str, Any]:
    metrics = trainer.evaluate()
    return {
        "step": step,
        "eval_loss": metrics["eval_loss"],
        "eval_mean_token_accuracy": metrics.get("eval_mean_token_accuracy"),
        "eval_entropy": metrics.get("eval_entropy"),
    }


def _eval_labels(trainer: Any) -> list[list[int]]:
    """The held-out rows' labels: tokenised beforehand, or (image records) by the collator."""
    dataset = trainer.eval_dataset
    if "labels" in dataset.column_names:
        return list(dataset["labels"])
    rows = list(dataset)
    return [
        labels
        for start in range(0, len(rows), 64)
        for labels in trainer.data_collator(rows[start : start + 64])["labels"].tolist()
    ]


def _model_card(settings: SFTSettings, steps: int, records: int) -> str:
    data = settings.data if isinstance(settings.data, str) else "records given in memory"
    how = tuning(settings.lora_r)
    return model_card(
        f"SFT of {settings.model}",
        f"Fine-tuned by embodia's SFT recipe ({how}) for {steps} optimiser steps "
        f"on {records} records ({data}).",
        settings.model,
    )


def _trainer(
    settings: SFTSettings,
    out: Path,
    train_records: Sequence[Record],
    eval_records: Sequence[Record] | None,
    stream: RecordStream | None = None,
    override: Override | None = None,
    objective: Objective | None = None,
) -> Any:
    """TRL's SFTTrainer for the run: the model and tokenizer (or processor) of
    ``settings.model``, LoRA through peft when ``lora_r`` is set, checkpoints under
    ``out/checkpoints``."""
    import torch
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    images = has_images(train_records)
    if eval_records is not None and has_images(eval_records) != images:
        raise SFTError("the training and held-out records must both have images or both have none")
    if (override is not None or objective is not None) and not images:
        raise SFTError(
            "a completion override or a second objective needs image records (tokenised batch by batch)"
        )
    if objective is not None:
        missing = [
            f for f in objective.fields if any(f not in r for r in (*train_records, *(eval_records or ())))
        ]
        if missing:
            raise SFTError(
                f"the {objective.name} objective reads the field {missing[0]!r}, which a record lacks"
            )
    if images and settings.packing:
        raise SFTError("records with images cannot be packed: set packing off")
    tokenizer, model = load_vlm(settings.model) if images else load_causal_lm(settings.model)
    weighted = is_weighted(train_records, eval_records)
    if stream is not None and (weighted or settings.packing or not settings.max_steps):
        raise SFTError("streamed records need max_steps (an upper bound), and no packing or weights")
    if weighted and (settings.packing or not settings.completion_only_loss):
        raise SFTError("records with completion_weights need completion_only_loss and no packing")
    config = SFTConfig(
        output_dir=str(out / CHECKPOINTS),
        num_train_epochs=float(settings.epochs),
        max_steps=settings.max_steps or -1,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.lr_scheduler,
        warmup_steps=settings.warmup_steps,
        weight_decay=settings.weight_decay,
        per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.gradient_accumulation,
        max_length=settings.max_length,
        packing=settings.packing,
        completion_only_loss=settings.completion_only_loss,
        logging_steps=settings.logging_steps,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=2,  # a resume needs the last one; the one before covers a torn save
        seed=settings.seed,
        data_seed=settings.seed,
        # the model's own dtype throughout: TRL's bf16 default would cast on CPUs too
        bf16=False,
        fp16=False,
        activation_checkpointing=False,
        dataloader_pin_memory=torch.cuda.is_available(),
        dataloader_num_workers=0,
        report_to=[],
        disable_tqdm=True,
        # the weighted loss needs its token_weights column, the image collator its record index
        remove_unused_columns=not (weighted or images),
        # a second objective's records come in their order, so its groups share a batch
        train_sampling_strategy="sequential" if objective is not None else "random",
    )
    peft_config = None
    if settings.lora_r:
        peft_config = LoraConfig(
            r=settings.lora_r,
            lora_alpha=settings.lora_alpha,
            lora_dropout=settings.lora_dropout,
            target_modules=list(settings.lora_targets) or "all-linear",
            task_type="CAUSAL_LM",
        )
    weighted_by = (tokenizer, settings.max_length) if weighted else None
    if stream is not None:
        from datasets import IterableDataset

        completion_only = settings.completion_only_loss

        def rows() -> Iterator[dict[str, Any]]:
            for record in stream:
                yield from trainer_rows([record], completion_only)

        train_dataset: Any = IterableDataset.from_generator(rows)
    elif images:
        train_dataset = _image_rows(train_records, TRAIN_SPLIT)
    else:
        train_dataset = _dataset(train_records, settings.completion_only_loss, weighted_by)
    if images:
        eval_dataset = None if eval_records is None else _image_rows(eval_records, EVAL_SPLIT)
    elif eval_records is not None:
        eval_dataset = _dataset(eval_records, settings.completion_only_loss, weighted_by)
    else:
        eval_dataset = None
    if weighted:
        trainer_class = _weighted_trainer_class()
    elif images:
        trainer_class = _image_trainer_class(objective, full_weights=not settings.lora_r)
    else:
        trainer_class = SFTTrainer
    extra: dict[str, Any] = {}
    if weighted:
        extra["data_collator"] = _weighted_collator(tokenizer.pad_token_id or 0)
    elif images:
        text_tokenizer = tokenizer.tokenizer
        if text_tokenizer.pad_token is None:  # what TRL does for the collator it builds itself
            text_tokenizer.pad_token = text_tokenizer.eos_token
        model.config.get_text_config().pad_token_id = text_tokenizer.pad_token_id
        model.generation_config.pad_token_id = text_tokenizer.pad_token_id
        extra["data_collator"] = _image_collator(
            tokenizer,
            {TRAIN_SPLIT: train_records, EVAL_SPLIT: eval_records or []},
            settings,
            override,
            objective.fields if objective is not None else (),
        )
    try:
        trainer = trainer_class(
            model=model,
            args=config,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
            **extra,
        )
    except ValueError as error:  # e.g. LoRA targets the model does not have
        raise SFTError(f"cannot set up SFT of {settings.model}: {error}") from error
    prepared: Any = trainer.train_dataset  # records cut to max_length with no completion left are dropped
    if stream is None and len(prepared) == 0:
        raise SFTError(f"no training record has a token to learn within max_length {settings.max_length}")
    # the run's lines go to metrics.jsonl and on_log; the trainer's own printing would repeat them
    trainer.remove_callback(PrinterCallback)
    return trainer


@runner
def run_sft(
    settings: SFTSettings,
    out: Path,
    *,
    resume: bool = False,
    on_log: MetricsCallback | None = None,
    stream: RecordStream | None = None,
    override: Override | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    objective: Objective | None = None,
) -> dict[str, Any]:
    """Fine-tune ``settings.model`` on ``settings.data`` into the run folder ``out`` (see the
    module docstring); with ``resume``, continue the run there from its last complete
    checkpoint. ``on_log`` gets each ``metrics.jsonl`` line as it is written. With
    ``stream``, the records come from it as they arrive (:class:`RecordStream`) and
    ``settings.data`` only names where they are kept; ``max_steps`` bounds the steps and the
    stream's end ends the run. ``override`` (image records only) gives, when a batch's step
    starts, the completion to train a record on in place of its own; ``callbacks`` are
    TrainerCallbacks added to the trainer (e.g. the one that refreshes the overrides).
    ``objective`` (image records only) adds a second loss term with its own trainable
    module (:class:`Objective`); the module holds the trained state when this returns.
    Returns the summary (also written to ``summary.json``)."""
    folder = RunFolder(out, METRICS)
    train_records = load_records(settings.data, "data") if stream is None else []
    eval_records = load_records(settings.eval_data, "eval_data") if settings.eval_data is not None else None
    record = settings_record(settings, train_records if stream is None else None, eval_records)
    folder.begin(record, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    out = folder.out
    checkpoint = _last_checkpoint(out / CHECKPOINTS) if folder.resuming else None
    resumed_at = _checkpoint_step(checkpoint) if checkpoint is not None else 0
    # lines after the checkpoint are made again by the resumed steps
    kept = [r for r in folder.kept_records() if isinstance(r.get("step"), int) and r["step"] <= resumed_at]
    tokens_before = int(kept[-1].get("tokens", 0)) if kept else 0

    def note(line: dict[str, Any]) -> None:
        log.append(line)
        if on_log is not None:
            on_log(line)

    with quiet_progress_bars(), folder.recording(kept, {"settings": record}) as log:
        trainer = _trainer(settings, out, train_records, eval_records, stream, override, objective)
        trainer.add_callback(
            _metrics_callback(note, tokens_before, () if objective is None else (objective.name,))
        )
        for callback in callbacks:
            trainer.add_callback(callback)
        if eval_records is not None and not any("eval_loss" in r for r in kept):
            note(_eval_record(trainer, 0))
        started = time.perf_counter()
        result = trainer.train(resume_from_checkpoint=None if checkpoint is None else str(checkpoint))
        steps = trainer.state.global_step
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)  # before merging
        if eval_records is not None:
            note(_eval_record(trainer, steps))
        final = save_model_folder(
            trainer.model,
            trainer.processing_class,
            out / FINAL,
            source=Path(parse_policy_spec(settings.model)[1]),
            trained_by="sft",
            card=_model_card(settings, steps, len(train_records) if stream is None else len(stream.records)),
            keep_model=False,
        )
        if objective is not None:
            from safetensors.torch import save_file

            state = {k: v.detach().cpu().contiguous() for k, v in objective.module.state_dict().items()}
            save_file(state, str(final / OBJECTIVE_WEIGHTS))

    written = folder.read_records()
    losses = [r["loss"] for r in written if "loss" in r]
    evals = [r for r in written if "eval_loss" in r]
    summary: dict[str, Any] = {
        "settings": record,
        "steps": steps,
        "epochs": trainer.state.epoch,
        "train_records": len(train_records) if stream is None else len(stream.records),
        "train_loss_first": losses[0] if losses else None,
        "train_loss_last": losses[-1] if losses else None,
        "train_loss_mean": result.training_loss,
        "train_wall_s": time.perf_counter() - started,
        "resumed_from_step": None if checkpoint is None else resumed_at,
        "trainable_parameters": trainable,
        "final": str(final),
        "policy": f"hf:{final}",
    }
    if eval_records is not None:
        summary.update(
            {
                "eval_records": len(eval_records),
                "eval_loss_start": evals[0]["eval_loss"],
                "eval_loss": evals[-1]["eval_loss"],
                "eval_mean_token_accuracy": evals[-1]["eval_mean_token_accuracy"],
                "eval_unigram_entropy": unigram_entropy(_eval_labels(trainer)),
            }
        )
    plot_curves(written, out / CURVES, CURVE_KEYS, title=f"SFT of {settings.model}")
    folder.finish(SUMMARY, summary)
    return summary
