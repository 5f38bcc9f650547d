"""Fixtures of the real vLLM suite: one tiny chat model, its tokenizer and its transformers
reference, shared by the server and offline tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_suite.checks import load_reference_model, load_tokenizer
from vllm_suite.server import CPU_ENV, OFFLINE_ENV


@pytest.fixture(scope="session", autouse=True)
def _offline_vllm_env() -> Iterator[None]:
    """In-process vLLM (the offline policy) reads these too: no usage stats, no hub, 1 GiB KV cache."""
    settings = {**OFFLINE_ENV, **CPU_ENV}
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen2 chat LM, built with this interpreter's transformers (vLLM pins its own)."""
    from embodia.policies.tiny_models import (
        build_tiny_chat_lm,  # torch + transformers: only when the suite runs
    )

    return build_tiny_chat_lm(tmp_path_factory.mktemp("tiny-chat-lm"), seed=0)


@pytest.fixture(scope="session")
def tokenizer(tiny_chat_model: Path) -> Any:
    """The tiny model's own tokenizer: prompt and completion token ids are counted with it."""
    return load_tokenizer(tiny_chat_model)


@pytest.fixture(scope="session")
def reference_model(tiny_chat_model: Path) -> Any:
    """The same model run by transformers: the numbers vLLM's are checked against."""
    return load_reference_model(tiny_chat_model)
