"""The speak/silent decider that stream agents ask every second (:class:`LearnedGate`): a
trained head on the frozen VLM's features of the chunk, above a threshold means speak."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from embodia.core.random_weights import random_weights_label
from embodia.envs.streams.core import Chunk, Stream
from embodia.policies.speak_gate.config import DEFAULT_THRESHOLD, GateError
from embodia.policies.speak_gate.model import FlagFeatures, ResponseHead
from embodia.policies.speak_gate.train import load_gate


class LearnedGate:
    """Speak/silent decider for the proactive agent: ``score`` is the head's probability on
    the chunk's flag features, ``decide`` is ``score > threshold``.

    ``context`` is the agent's retained conversation. Its last message, when a user turn, is
    the agent's own text rendering of this same second, which the gate's user turn already
    carries, so it is dropped; of the rest the last ``context_turns`` messages are given to
    the VLM (0, the default, ignores context, which matches training without context).
    """

    def __init__(
        self,
        features: FlagFeatures,
        head: ResponseHead,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        context_turns: int = 0,
        name: str | None = None,
        speaks: bool = False,
    ) -> None:
        if features.hidden_size != head.hidden_size:
            raise GateError(
                f"the head takes {head.hidden_size} features but {features.model_dir} gives "
                f"{features.hidden_size} (layer {features.layer}, pooling {features.pooling})"
            )
        if not 0.0 <= threshold <= 1.0:
            raise GateError(f"threshold must be a probability, got {threshold}")
        if context_turns < 0:
            raise GateError(f"context_turns must be at least 0, got {context_turns}")
        self.features = features
        self.head = head.eval()
        self.threshold = threshold
        self.context_turns = context_turns
        self.speaks = speaks
        """Whether the VLM was fine-tuned with the gate to write the lines itself, continuing
        the flag turn (:class:`ProactSpeaker`)."""
        self.name = name or f"gate:{features.model_dir.name}"
        if features.random_weights is not None:
            self.name = random_weights_label(self.name)

    @classmethod
    def from_dir(
        cls,
        directory: Path | str,
        *,
        features: FlagFeatures | None = None,
        model_dir: Path | str | None = None,
        device: str = "cpu",
        threshold: float | None = None,
    ) -> LearnedGate:
        """A gate saved by :func:`save_gate`, on the VLM its metadata names (or ``model_dir``)."""
        head, meta = load_gate(directory)
        if features is None:
            source = model_dir if model_dir is not None else meta.get("model_dir")
            if not source:
                raise GateError(f"{directory} names no model_dir; pass the VLM directory")
            features = FlagFeatures(
                source,
                layer=int(meta.get("layer", -2)),
                device=device,
                pooling=meta.get("pooling", "flag"),
                seed=int(meta.get("seed", 0)),
            )
        if features.layer != meta.get("layer", features.layer) or features.pooling != meta.get(
            "pooling", features.pooling
        ):
            raise GateError(
                f"{directory} was trained on layer {meta.get('layer')} / {meta.get('pooling')} features, "
                f"not layer {features.layer} / {features.pooling}"
            )
        return cls(
            features,
            head,
            float(meta.get("threshold", DEFAULT_THRESHOLD)) if threshold is None else threshold,
            context_turns=int(meta.get("context_turns", 0)),
            speaks=bool(meta.get("speaks", False)),
        )

    def gate_context(self, context: Sequence[Mapping[str, str]]) -> list[Mapping[str, str]]:
        kept = [m for m in context if m.get("role") in ("user", "assistant")]
        if kept and kept[-1].get("role") == "user":
            kept = kept[:-1]
        return kept[-self.context_turns :] if self.context_turns else []

    @torch.no_grad()
    def score(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> float:
        vector = self.features(chunk, self.gate_context(context))
        return float(self.head.score(vector))

    def decide(self, chunk: Chunk, context: Sequence[Mapping[str, str]] = ()) -> bool:
        return self.score(chunk, context) > self.threshold

    @torch.no_grad()
    def scores(self, stream: Stream, batch_size: int = 16) -> list[float]:
        """Context-free scores of every second of a stream, batched (for evaluation)."""
        (features,) = self.features.stream_features([stream], batch_size=batch_size)
        return [float(p) for p in self.head.score(features)]


class ProactSpeaker:
    """Lines from a gate's own VLM fine-tuned with it (``speaks`` in the gate's metadata), as
    Proact-VL writes them: the model continues the second's flag turn, greedily, up to the
    line's cap (tokens, twice the words) or the end of its first line. The stream agent's
    conversation is not shown: the model was trained on the flag turn alone."""

    def __init__(self, gate: LearnedGate) -> None:
        self.gate = gate
        self.name = f"{gate.name} (its own lines)"

    @torch.no_grad()
    def line(self, request: Any) -> str:
        features = self.gate.features
        chunk: Chunk = request.chunk
        prompt = features.processor.apply_chat_template(
            features.conversation(chunk), add_generation_prompt=True, tokenize=False
        )
        images = [Image.fromarray(np.ascontiguousarray(frame)) for frame in chunk.frames]
        inputs = features.processor(
            text=[prompt], images=images or None, return_tensors="pt", add_special_tokens=False
        ).to(features.device)
        tokenizer = features.tokenizer
        output = features.model.generate(
            **inputs,
            max_new_tokens=max(1, 2 * int(request.max_words)),
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else tokenizer.eos_token_id,
        )
        text = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        text = text.split("\n", 1)[0].strip()
        if request.on_text is not None:
            request.on_text(text)
        return text
