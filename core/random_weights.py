"""Telling a model folder of random weights (built by ``embodia models tiny``) from a trained one.

A tiny build writes :data:`BUILD_MARKER` (``"random_weights": true``) into its folder; the
model backends warn when they load such a folder and label the policy ``... (random weights)``,
and run folders note it in ``config.yaml``. Reading a marker needs no torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUILD_MARKER = "tiny-model-complete.json"
RANDOM_WEIGHTS = "random weights"
OFFLINE_ONLY = "for trying embodia offline only"
TRAINED_BY = "trained_by"
"""The marker's list of the recipes that trained a copy of the build (``["sft", "grpo"]``):
a model trained from random weights keeps the marker, since it is still a toy."""


def read_marker(directory: Path | str) -> dict[str, Any] | None:
    """The build marker of a finished tiny-model build in ``directory``; None when there is none
    (or it cannot be read, which counts as no finished build)."""
    try:
        value = json.loads((Path(directory) / BUILD_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def random_weights_note(directory: Path | str) -> str | None:
    """One line saying that ``directory`` holds random weights built by embodia (or a model
    trained from them: a toy), or None for any other directory (a real model)."""
    marker = read_marker(directory)
    if marker is None or marker.get("random_weights") is False:
        return None
    built = f"built by `embodia models tiny {marker.get('kind', '?')}`, seed {marker.get('seed', '?')}"
    trained = marker.get(TRAINED_BY)
    if isinstance(trained, list) and trained:
        return (
            f"{directory} holds a toy model: {RANDOM_WEIGHTS} ({built}) then trained by "
            f"{' then '.join(map(str, trained))} on generated data; {OFFLINE_ONLY}"
        )
    return f"{directory} holds {RANDOM_WEIGHTS} ({built}): its outputs are noise, {OFFLINE_ONLY}"


def random_weights_label(name: str) -> str:
    """A policy's name as records show it when its weights are random."""
    return f"{name} ({RANDOM_WEIGHTS})"


_SPEC_PREFIXES = ("judge:", "hf:", "vllm:", "nli:")
_GATE_META = "gate.json"  # policies.speak_gate.GATE_META, a floor above this one


def _named_directory(value: str) -> str:
    """The model directory a setting names: ``hf:DIR?opts``, ``vllm:DIR``, ``nli:DIR``,
    ``judge:hf:DIR``, a bare ``DIR``, or for ``gate:DIR`` (a trained speak gate) the VLM
    directory its ``gate.json`` names."""
    text = value.strip()
    stripped = True
    while stripped:
        stripped = False
        for prefix in _SPEC_PREFIXES:
            if text[: len(prefix)].lower() == prefix:
                text, stripped = text[len(prefix) :], True
    if text[:5].lower() == "gate:":
        try:
            meta = json.loads((Path(text[5:]) / _GATE_META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ""
        model_dir = meta.get("model_dir") if isinstance(meta, dict) else None
        return model_dir if isinstance(model_dir, str) else ""
    return text.split("?", 1)[0]


def random_weights_in(settings: Mapping[str, Any]) -> dict[str, str]:
    """``{setting: note}`` for every setting of a run that names a model directory of random
    weights (a policy spec, a judge, an NLI model, a speak gate's VLM); empty when none does."""
    notes: dict[str, str] = {}
    for key, value in settings.items():
        if isinstance(value, str) and value.strip():
            directory = _named_directory(value)
            note = random_weights_note(directory) if directory else None
            if note is not None:
                notes[str(key)] = note
    return notes
