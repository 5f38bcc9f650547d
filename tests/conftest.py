"""Fixtures every suite may share: the tiny random-weight models, built once per session."""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[object]:
    """A local Ray runtime with 2 CPUs for the whole session (started on first use, stopped at
    the end); the scale-out code finds it initialised and uses it."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'embodia[ray]')")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()
