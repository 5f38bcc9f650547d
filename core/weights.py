"""A torch module's weights from a safetensors file, checked against the module before they
are loaded: how every saved head, adapter and small model of embodia is read back.

safetensors and torch are imported when a file is read, not with this module (``core/`` holds
no model library at import time).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from embodia.errors import EmbodiaError

if TYPE_CHECKING:
    from torch import nn


def load_weights(module: nn.Module, path: Path, error: type[EmbodiaError], what: str = "the module") -> None:
    """Load the safetensors file ``path`` into ``module``; an ``error`` naming the file when it is
    missing, unreadable, or holds other tensors (names or shapes) than ``module`` has, one of
    them named (``what`` says what the file should fit: "its config", "a head of hidden size 64")."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise error(f"{path.parent} has no {path.name}")
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise error(f"cannot read {path}: {exc}") from None
    expected = {name: tuple(value.shape) for name, value in module.state_dict().items()}
    found = {name: tuple(value.shape) for name, value in state.items()}
    if expected != found:
        name = sorted(set(expected) ^ set(found) or {n for n in expected if expected[n] != found[n]})[0]

        def shape(tensors: dict[str, tuple[int, ...]]) -> str:
            return str(list(tensors[name])) if name in tensors else "missing"

        raise error(
            f"{path} does not fit {what}: tensor {name} is {shape(found)}, {what} needs {shape(expected)}"
        )
    module.load_state_dict(state)
