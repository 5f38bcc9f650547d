"""Tiny random-weight vision towers of the three supported kinds, saved to directories and
loaded back as a user would (``from_pretrained``), and one torch thread per test (these
models are so small that more threads only wait on each other)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

TOWER_SHAPE = {
    "image_size": 16,
    "patch_size": 4,
    "hidden_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tower_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``vit``, ``clip`` and ``siglip`` towers (16-pixel images, 3 blocks of width 32)."""
    import transformers

    builders = {
        "vit": (transformers.ViTConfig, transformers.ViTModel),
        "clip": (transformers.CLIPVisionConfig, transformers.CLIPVisionModel),
        "siglip": (transformers.SiglipVisionConfig, transformers.SiglipVisionModel),
    }
    folders = {}
    for name, (config_class, model_class) in builders.items():
        torch.manual_seed(0)
        folder = tmp_path_factory.mktemp(f"tower-{name}")
        model_class(config_class(**TOWER_SHAPE)).save_pretrained(folder)
        folders[name] = folder
    return folders
