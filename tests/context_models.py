"""The tiny random-weight models with a context window of a chosen length, for the
context-overflow tests.

The tiny models use rotary position embeddings, which have no weights: the window is only
``max_position_embeddings`` in the config (and the tokenizer's ``model_max_length``), so
:func:`set_context` changes it in a built model, weights untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

from embodia.policies.tiny_models import build_tiny_chat_lm, build_tiny_vlm


def set_context(directory: Path, tokens: int) -> Path:
    """Give the model in ``directory`` a context of ``tokens`` positions."""
    config_file = directory / "config.json"
    config = json.loads(config_file.read_text())
    config.get("text_config", config)["max_position_embeddings"] = tokens
    config_file.write_text(json.dumps(config, indent=2))
    tokenizer_file = directory / "tokenizer_config.json"
    tokenizer = json.loads(tokenizer_file.read_text())
    tokenizer["model_max_length"] = tokens
    tokenizer_file.write_text(json.dumps(tokenizer, indent=2))
    return directory


def tiny_chat(directory: Path, context: int) -> Path:
    """The tiny Qwen2 chat LM with a ``context``-token window."""
    return build_tiny_chat_lm(directory, context_tokens=context)


def tiny_vlm(directory: Path, context: int) -> Path:
    """The tiny LLaVA VLM with a ``context``-token window (its Qwen2 decoder's)."""
    return build_tiny_vlm(directory, context_tokens=context)


def error_line(output: str) -> str:
    """The one ``error:`` line a command printed (transformers' loading bars aside), with no
    traceback."""
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]
