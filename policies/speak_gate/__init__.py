"""The learned speak/silent gate of Proact-VL (see :mod:`embodia.policies.speak_gate.model`)."""

from embodia.policies.speak_gate.model import *  # noqa: F403
from embodia.policies.speak_gate.model import (
    DEFAULT_THRESHOLD,
    GATE_FORMAT,
    GATE_META,
    GATE_WEIGHTS,
    TRAIN_METRICS,
    fit_gate,
)
from embodia.policies.speak_gate.model import __all__ as _model_all

__all__ = [
    *_model_all,
    "DEFAULT_THRESHOLD",
    "GATE_FORMAT",
    "GATE_META",
    "GATE_WEIGHTS",
    "TRAIN_METRICS",
    "fit_gate",
]
