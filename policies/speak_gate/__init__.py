"""The learned speak/silent gate of Proact-VL: a small MLP on a frozen VLM's hidden state at a
``<|FLAG|>`` token closing each second's user turn says whether to speak now.

- :mod:`~embodia.policies.speak_gate.config`: the added tokens, threshold, loss defaults,
  saved-gate file names, poolings and :class:`GateError`;
- :mod:`~embodia.policies.speak_gate.model`: the head (:class:`ResponseHead`), the
  reference's active loss (:func:`gate_loss`) and the features (:class:`FlagFeatures`);
- :mod:`~embodia.policies.speak_gate.train`: fitting (:func:`train_gate`, :func:`fit_gate`)
  and the gate folder (:func:`save_gate`, :func:`load_gate`);
- :mod:`~embodia.policies.speak_gate.infer`: the decider stream agents call
  (:class:`LearnedGate`), and the lines of a VLM fine-tuned with its gate
  (:class:`ProactSpeaker`).
"""

from embodia.policies.speak_gate import config
from embodia.policies.speak_gate.config import *  # noqa: F403  (its names, listed in config.__all__)
from embodia.policies.speak_gate.infer import LearnedGate, ProactSpeaker
from embodia.policies.speak_gate.model import (
    FlagFeatures,
    GateLoss,
    ResponseHead,
    boundary_weights,
    gate_loss,
    rise_labels,
    speaking_seconds,
    stream_labels,
    user_parts,
)
from embodia.policies.speak_gate.train import TrainLog, fit_gate, load_gate, save_gate, train_gate

__all__ = [
    *config.__all__,
    "FlagFeatures",
    "GateLoss",
    "LearnedGate",
    "ProactSpeaker",
    "ResponseHead",
    "TrainLog",
    "boundary_weights",
    "fit_gate",
    "gate_loss",
    "load_gate",
    "rise_labels",
    "save_gate",
    "speaking_seconds",
    "stream_labels",
    "train_gate",
    "user_parts",
]
