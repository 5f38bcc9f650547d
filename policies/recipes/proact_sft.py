"""Proact-VL fine-tuning: LoRA-SFT of the VLM on live-commentary streams, the speak gate
trained jointly.

The learned gate of :mod:`embodia.policies.speak_gate` reads a *frozen* VLM. Proact-VL
fine-tunes the VLM itself on commentary streams, so that the state at each second's
``<|FLAG|>`` token says when to speak and the model knows what to say. This recipe does that
through the SFT recipe (:func:`~embodia.policies.recipes.sft.run_sft`):

- **The start.** The VLM with the reference's special tokens added (as
  :class:`~embodia.policies.speak_gate.FlagFeatures` adds them), saved as ``start/``.
- **The records.** One per second of each training stream, under each scenario asked for
  (solo, co-commentary, guidance): the reference's user turn for the chunk (what was heard,
  the frames, the query, then ``<|FLAG|>``) and, as the reply, the active speaker's line for
  that second. A silent second's reply is :data:`SILENCE` (the reference's filler) and is not
  trained on (``train_reply: false``): the model is asked for a line only when its gate says
  speak, and a model taught the filler, three seconds in four, writes it there too. Each
  record carries its ``gate`` label (1 in a labelled second), its ``clip`` and ``second``. The
  frames are written as PNG files under ``data/``.
- **The joint loss.** Batches are ``window`` consecutive seconds of one clip. The loss is the
  LM loss on the lines plus ``gate_weight`` times the reference's active gate loss
  (:func:`~embodia.policies.speak_gate.gate_loss`) on the :class:`ResponseHead`'s logits at
  each record's flag, read at hidden-state ``layer`` of the model being trained, per clip in
  seconds order. The head's input standardisation is fixed from the start model's features
  on the training seconds, as the frozen gate's is; with ``head_warmup_epochs`` the head is
  first fitted alone on those features (the frozen-feature gate), then trained on jointly.
- **The result.** ``sft/final`` (LoRA merged) and ``gate/``, a gate folder naming it, with
  ``speaks: true`` in its metadata: a ``gate:DIR`` stream agent then writes its lines with the
  same model, continuing the flag turn (:class:`~embodia.policies.speak_gate.ProactSpeaker`).

The run folder: ``config.yaml``, ``stages.jsonl`` (each stage started and done), ``start/``,
``data/``, ``sft/`` (the SFT run: ``metrics.jsonl`` with ``gate_loss``, checkpoints holding the
head), ``gate/`` and ``summary.json``; ``resume=True`` continues where it was cut.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodia.core.limits import MAX_STEPS, check_range, check_seed
from embodia.core.runs import RunFolder, jsonl_text, read_run_records, runner, write_atomic
from embodia.core.weights import load_weights
from embodia.envs.streams.core import Stream
from embodia.envs.streams.sources import check_scenario, open_stream
from embodia.errors import EmbodiaError
from embodia.policies.recipes.sft import OBJECTIVE_WEIGHTS, SFTSettings, run_sft
from embodia.policies.speak_gate import (
    DEFAULT_THRESHOLD,
    FLAG,
    FlagFeatures,
    ResponseHead,
    gate_loss,
    save_gate,
    stream_labels,
    train_gate,
    user_parts,
)
from embodia.policies.spec import parse_policy_spec
from embodia.policies.trainable import save_model_folder

SILENCE = " ..."
"""The reply of a silent second: the reference's filler text."""
START, DATA, SFT, GATE = "start", "data", "sft", "gate"
STAGES = "stages.jsonl"
SUMMARY = "summary.json"


class ProactSFTError(EmbodiaError, ValueError):
    """Proact-VL fine-tuning settings that cannot be used; the message names them."""


@dataclass(frozen=True)
class ProactSFTSettings:
    """A Proact-VL fine-tuning run (module docstring)."""

    model: str
    """The VLM to fine-tune: ``hf:DIR``, an image-text-to-text directory with its processor."""
    streams: tuple[str, ...]
    """Training stream specs, e.g. ``procedural:arena,seed=3,duration=30``."""
    scenarios: tuple[str, ...] = ("solo",)
    """The labels each stream is trained on: ``solo``, ``co-commentary``, ``guidance``."""
    fps: float = 2.0
    window: int = 15
    """Seconds per batch: consecutive seconds of one clip (the gate loss is per clip)."""
    epochs: float = 3.0
    max_steps: int = 0
    learning_rate: float = 5e-4
    lora_r: int = 8
    lora_alpha: int = 16
    gate_weight: float = 1.0
    head_warmup_epochs: int = 0
    """Epochs of fitting the head alone on the start model's flag features (the frozen-feature
    gate's training) before the joint fine-tuning starts from it; 0 starts from a random head."""
    layer: int = -2
    """The hidden state the gate reads (as ``FlagFeatures``'s ``layer``)."""
    threshold: float = DEFAULT_THRESHOLD
    logging_steps: int = 5
    save_steps: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        if parse_policy_spec(self.model)[0] != "hf":
            raise ProactSFTError(f"Proact-VL fine-tuning trains a local VLM: hf:DIR, got {self.model!r}")
        if not self.streams or not all(isinstance(s, str) and s.strip() for s in self.streams):
            raise ProactSFTError("give at least one training stream spec")
        if not self.scenarios:
            raise ProactSFTError("give at least one scenario")
        for scenario in self.scenarios:
            check_scenario(scenario)
        check_range("window", self.window, 2, 4096, ProactSFTError)
        check_range("max_steps", self.max_steps, 0, MAX_STEPS, ProactSFTError)
        check_range("head_warmup_epochs", self.head_warmup_epochs, 0, 100_000, ProactSFTError)
        if not (math.isfinite(self.gate_weight) and self.gate_weight >= 0):
            raise ProactSFTError(f"gate_weight must be a finite number >= 0, got {self.gate_weight!r}")
        if not 0 <= self.threshold <= 1:
            raise ProactSFTError(f"threshold is a probability, got {self.threshold!r}")
        check_seed("seed", self.seed, ProactSFTError)
        self.sft_settings(self.model, ())

    def sft_settings(self, model: str, data: str | tuple[Any, ...]) -> SFTSettings:
        return SFTSettings(
            model=model,
            data=data,
            epochs=self.epochs,
            max_steps=self.max_steps,
            learning_rate=self.learning_rate,
            batch_size=self.window,
            max_length=4096,
            lora_r=self.lora_r,
            lora_alpha=self.lora_alpha,
            logging_steps=self.logging_steps,
            save_steps=self.save_steps,
            seed=self.seed,
        )


# --------------------------------------------------------------------------- the records


def stream_records(stream: Stream, clip: int, folder: Path) -> list[dict[str, Any]]:
    """One SFT record per second of ``stream`` (module docstring), frames written into
    ``folder`` as ``CLIP-SECOND-I.png`` (paths relative to it)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    label = stream.label
    records = []
    for second in stream.seconds:
        chunk = stream.chunk(second)
        names = []
        for index, frame in enumerate(chunk.frames):
            name = f"{clip}-{second}-{index}.png"
            Image.fromarray(np.ascontiguousarray(frame)).save(folder / name)
            names.append(name)
        line = label.get(second)
        records.append(
            {
                "messages": [
                    {"role": "user", "content": user_parts(chunk)},
                    {"role": "assistant", "content": line if line else SILENCE},
                ],
                "images": names,
                "train_reply": bool(line),
                "gate": 1 if second in label else 0,
                "clip": clip,
                "second": second,
            }
        )
    return records


def clip_order(count: int, seed: int) -> list[int]:
    """The order the clips are trained in (seeded; batches go through it in turn)."""
    return [int(i) for i in np.random.default_rng(seed).permutation(count)]


# --------------------------------------------------------------------------- the objective


def text_layers(model: Any) -> Any:
    """The decoder layers of a (possibly LoRA-wrapped) VLM's language model."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    count = int(config.num_hidden_layers)
    for name, module in model.named_modules():
        if (
            name.endswith("layers")
            and isinstance(module, torch.nn.ModuleList)
            and "vision" not in name
            and len(module) == count
        ):
            return module
    raise ProactSFTError("cannot find the language model's decoder layers")


class GateObjective:
    """The speak gate as the SFT recipe's second objective
    (:class:`~embodia.policies.recipes.sft.Objective`): the head's logits at each record's
    last ``<|FLAG|>``, read at hidden state ``layer``, and the reference's active loss over
    each clip's seconds in order (the mean over the batch's clips)."""

    name = "gate_loss"
    fields: tuple[str, ...] = ("gate", "clip", "second")

    def __init__(self, head: ResponseHead, flag_id: int, layer: int, weight: float) -> None:
        self.head = head
        self.module: torch.nn.Module = head
        self.flag_id = flag_id
        self.layer = layer
        self.weight = weight
        self._states: torch.Tensor | None = None

    def _hooked_layer(self, model: Any) -> Any:
        layers = text_layers(model)
        index = self.layer % (len(layers) + 1)
        # hidden state i (1 <= i < n) is layer i-1's output; the last one is normed, the 0th
        # the embeddings: neither is a layer's output to hook
        if not 1 <= index < len(layers):
            raise ProactSFTError(
                f"layer {self.layer} is not an inner decoder layer's output ({len(layers)} layers)"
            )
        return layers[index - 1]

    @contextmanager
    def capture(self, model: Any) -> Iterator[None]:
        def keep(module: Any, args: Any, output: Any) -> None:
            self._states = output[0] if isinstance(output, tuple) else output

        handle = self._hooked_layer(model).register_forward_hook(keep)
        try:
            yield
        finally:
            handle.remove()

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The head's logit at each row's last flag, from the states the last pass kept."""
        if self._states is None:
            raise ProactSFTError("no hidden states were captured for the gate")
        flags = input_ids.eq(self.flag_id) & attention_mask.bool()
        if not bool(flags.any(dim=1).all()):
            raise ProactSFTError(f"a record's prompt has no {FLAG} token")
        last = flags.shape[1] - 1 - flags.flip(1).float().argmax(dim=1)
        rows = torch.arange(input_ids.shape[0], device=input_ids.device)
        head_device = self.head.feature_mean.device
        return self.head(self._states[rows, last].float().to(head_device))

    def loss(self, inputs: Mapping[str, Any], fields: Mapping[str, Any]) -> torch.Tensor:
        logits = self.logits(inputs["input_ids"], inputs["attention_mask"])
        clips, seconds, labels = fields["clip"], fields["second"], fields["gate"].to(logits.device)
        losses = []
        for clip in torch.unique(clips):
            rows = (clips == clip).nonzero().flatten()
            rows = rows[torch.argsort(seconds[rows])].to(logits.device)
            losses.append(gate_loss(logits[rows], labels[rows].float()).total)
        return torch.stack(losses).mean()


# --------------------------------------------------------------------------- the run


@runner
def run_proact_sft(settings: ProactSFTSettings, out: Path, *, resume: bool = False) -> dict[str, Any]:
    """Fine-tune the VLM and its gate jointly (module docstring) into ``out``; returns the
    summary (also ``summary.json``)."""
    folder = RunFolder(out, STAGES)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    out = folder.out
    kept = folder.kept_records()
    marked = {(r.get("stage"), r.get("status")) for r in kept}
    streams = [(spec, scenario) for spec in settings.streams for scenario in settings.scenarios]
    opened = [open_stream(spec, scenario, settings.fps) for spec, scenario in streams]
    with folder.recording(kept, {"settings": folder.config}) as log:

        def mark(stage: str, status: str, **extra: Any) -> None:
            if (stage, status) not in marked:
                log.append({"stage": stage, "status": status, **extra})

        mark(START, "started")
        source = Path(parse_policy_spec(settings.model)[1])
        features = FlagFeatures(source, layer=settings.layer, seed=settings.seed)
        if not (out / START / "config.json").is_file():
            save_model_folder(features.model, features.processor, out / START, source=source)
        mark(START, "done", added_tokens=features.added_tokens)

        mark(DATA, "started")
        records: list[dict[str, Any]] = []
        for clip in clip_order(len(opened), settings.seed):
            records.extend(stream_records(opened[clip], clip, out / DATA))
        write_atomic(out / DATA / "train.jsonl", jsonl_text(records))
        # the head's input standardisation: the start model's flag states on the training seconds
        by_stream = features.stream_features(opened)
        mark(DATA, "done", records=len(records), speaking=sum(r["gate"] for r in records))

        if settings.head_warmup_epochs:
            head, _ = train_gate(
                by_stream,
                [stream_labels(stream) for stream in opened],
                epochs=settings.head_warmup_epochs,
                seed=settings.seed,
            )
            head.train()
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(settings.seed)
                head = ResponseHead(features.hidden_size)
            start_features = torch.cat(by_stream)
            head.feature_mean.copy_(start_features.mean(0))
            head.feature_std.copy_(start_features.std(0, unbiased=False).clamp_min(1e-6))
        objective = GateObjective(head, features.flag_id, settings.layer, settings.gate_weight)
        meta = features.meta(
            model_dir=None,
            threshold=settings.threshold,
            trained_by="proact_sft",
            trained_on=list(settings.streams),
            scenarios=list(settings.scenarios),
            speaks=True,
        )
        del features

        mark(SFT, "started")
        sft = run_sft(
            settings.sft_settings(f"hf:{out / START}", str(out / DATA / "train.jsonl")),
            out / SFT,
            resume=(out / SFT).exists(),
            objective=objective,
        )
        final = Path(sft["final"])
        # also when the SFT run had finished
        load_weights(head, final / OBJECTIVE_WEIGHTS, ProactSFTError, "the speak gate's head")
        mark(SFT, "done", policy=sft["policy"])
        save_gate(out / GATE, head.eval(), {**meta, "model_dir": str(final.resolve())})
        mark(GATE, "done", gate=str(out / GATE))
    rows = read_run_records(out / SFT / "metrics.jsonl")
    gate_losses = [r["gate_loss"] for r in rows if r.get("gate_loss") is not None]
    summary = {
        "settings": folder.config,
        "records": len(records),
        "speaking_records": sum(r["gate"] for r in records),
        "sft": {k: sft[k] for k in ("steps", "train_loss_first", "train_loss_last")},
        "gate_loss_first": gate_losses[0] if gate_losses else None,
        "gate_loss_last": gate_losses[-1] if gate_losses else None,
        "gate": str(out / GATE),
        "policy": sft["policy"],
    }
    folder.finish(SUMMARY, summary)
    return summary
