"""Fixtures every suite may share: the tiny random-weight models, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_chat_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from embodia.policies.tiny_models import build_tiny_chat_lm  # torch: only for tests that ask

    return build_tiny_chat_lm(tmp_path_factory.mktemp("tiny-chat-lm"))


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from embodia.policies.tiny_models import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))
