"""core.weights: a module's safetensors weights, checked before they are loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodia.core.weights import load_weights
from embodia.errors import EmbodiaError


class WeightsError(EmbodiaError):
    pass


def test_weights_round_trip_and_every_mismatch_is_named(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    saved = torch.nn.Linear(3, 2)
    path = tmp_path / "head.safetensors"
    save_file(saved.state_dict(), str(path))
    loaded = torch.nn.Linear(3, 2)
    load_weights(loaded, path, WeightsError)
    assert torch.equal(loaded.weight, saved.weight) and torch.equal(loaded.bias, saved.bias)

    with pytest.raises(WeightsError, match=r"tensor weight is \[2, 3\], a head of 4 inputs needs \[2, 4\]"):
        load_weights(torch.nn.Linear(4, 2), path, WeightsError, "a head of 4 inputs")
    with pytest.raises(WeightsError, match="tensor bias is missing, the module needs"):
        without_bias = tmp_path / "no-bias.safetensors"
        save_file({"weight": saved.weight.detach()}, str(without_bias))
        load_weights(torch.nn.Linear(3, 2), without_bias, WeightsError)
    with pytest.raises(WeightsError, match=r"tensor bias is \[2\], the module needs missing"):
        load_weights(torch.nn.Sequential(), path, WeightsError)  # a module with no tensors
    with pytest.raises(WeightsError, match=f"{tmp_path} has no absent.safetensors"):
        load_weights(loaded, tmp_path / "absent.safetensors", WeightsError)
    (tmp_path / "torn.safetensors").write_bytes(b"\x00\x01 not a safetensors file")
    with pytest.raises(WeightsError, match="cannot read .*torn.safetensors"):
        load_weights(loaded, tmp_path / "torn.safetensors", WeightsError)
