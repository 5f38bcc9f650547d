"""Names and defaults of the learned speak gate, shared by its model, training and decider:
the reference's added tokens, the decision threshold, the loss's boundary defaults, the files
of a saved gate, the feature poolings, and the gate's error."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from embodia.envs.streams.core import Stream
from embodia.errors import EmbodiaError

FLAG = "<|FLAG|>"
HISTORY_START, HISTORY_END = "<|history_start|>", "<|history_end|>"
QUERY_START, QUERY_END = "<|query_start|>", "<|query_end|>"
SPECIAL_TOKENS = (QUERY_START, QUERY_END, HISTORY_START, HISTORY_END, FLAG)
"""The reference's added tokens (``modeling_proact.py``), in its order."""
DEFAULT_THRESHOLD = 0.3
"""The reference's eval scripts' ``state_threshold`` (its training default is 0.5)."""
BOUNDARY_RATE = 5.0
BOUNDARY_SMOOTH = (0.05, 0.20)
GATE_WEIGHTS = "gate.safetensors"
GATE_META = "gate.json"
TRAIN_METRICS = "metrics.jsonl"
"""Per-epoch training curves (loss and its parts), written as training goes."""
GATE_FORMAT = 1
Pooling = Literal["flag", "flag+frames"]
POOLINGS: tuple[Pooling, ...] = ("flag", "flag+frames")

Context = Sequence[Mapping[str, str]] | str
ContextFn = Callable[[Stream, int], Context]


class GateError(EmbodiaError, ValueError):
    """A speak gate cannot be built, loaded or fed (bad model dir, gate dir, features)."""


__all__ = [
    "BOUNDARY_RATE",
    "BOUNDARY_SMOOTH",
    "DEFAULT_THRESHOLD",
    "FLAG",
    "GATE_FORMAT",
    "GATE_META",
    "GATE_WEIGHTS",
    "HISTORY_END",
    "HISTORY_START",
    "POOLINGS",
    "QUERY_END",
    "QUERY_START",
    "SPECIAL_TOKENS",
    "TRAIN_METRICS",
    "Context",
    "ContextFn",
    "GateError",
    "Pooling",
]
