"""Policy spec strings: parsing, per-scheme construction, and one-line errors for bad specs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from embodia.core.chat import Completion, Policy, PolicyError
from embodia.policies import spec as spec_module
from embodia.policies.openai_compat import OpenAICompatPolicy
from embodia.policies.scripted import ScriptedPolicy
from embodia.policies.spec import make_policy, parse_policy_spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "openai:http://10.0.0.5:8000/v1?model=Qwen/Qwen2.5-VL-7B-Instruct&api_key=sk-1&timeout=30",
            (
                "openai",
                "http://10.0.0.5:8000/v1",
                {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "api_key": "sk-1", "timeout": "30"},
            ),
        ),
        ("OpenAI:https://h/v1?model=m", ("openai", "https://h/v1", {"model": "m"})),
        ("hf:/models/tiny", ("hf", "/models/tiny", {})),
        (
            "hf:/models/tiny?device=cpu&dtype=float32",
            ("hf", "/models/tiny", {"device": "cpu", "dtype": "float32"}),
        ),
        ("vllm:/models/tiny?max_model_len=512", ("vllm", "/models/tiny", {"max_model_len": "512"})),
        ("scripted:runs/replies.jsonl", ("scripted", "runs/replies.jsonl", {})),
        ("  scripted:r.jsonl?loop=true ", ("scripted", "r.jsonl", {"loop": "true"})),
    ],
)
def test_parse_policy_spec(spec: str, expected: tuple[str, str, dict[str, str]]) -> None:
    assert parse_policy_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("heuristic", "'heuristic' is not a chat policy: pass --policy heuristic to the agent"),
        ("heuristic:frontier", "not a chat policy"),
        ("gpt4", "policy spec 'gpt4' must look like SCHEME:TARGET"),
        (":x", "must look like SCHEME:TARGET"),
        (
            "ollama:http://h",
            "unknown policy scheme 'ollama' in 'ollama:http://h': expected one of openai, hf",
        ),
        ("hf:", "policy spec 'hf:' has no target: expected e.g. hf:/path/to/model"),
        ("hf:/m?device", "cannot read the options 'device'"),
        ("hf:/m?devcie=cpu", "unknown option 'devcie' for a hf: spec \\(known: device, dtype"),
        ("hf:/m?device=cpu&device=cuda", "option 'device' is given twice"),
        ("vllm:/m?max_model_len=", "option 'max_model_len' has no value"),
    ],
)
def test_bad_specs_are_one_clear_line(spec: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message) as caught:
        parse_policy_spec(spec)
    assert "\n" not in str(caught.value)
    with pytest.raises(PolicyError, match=message):
        make_policy(spec)


def test_openai_spec_builds_a_policy_without_connecting() -> None:
    spec = "openai:http://127.0.0.1:9/v1?model=tiny&api_key=secret&timeout=2.5&max_retries=0"
    policy = make_policy(spec)
    assert isinstance(policy, OpenAICompatPolicy)
    assert policy.name == spec
    assert (policy.base_url, policy.model, policy.timeout_s, policy.max_retries) == (
        "http://127.0.0.1:9/v1",
        "tiny",
        2.5,
        0,
    )
    with pytest.raises(PolicyError, match=r"needs \?model=NAME"):
        make_policy("openai:http://127.0.0.1:9/v1")
    with pytest.raises(PolicyError, match=r"option timeout='soon' of a openai: spec is invalid"):
        make_policy("openai:http://127.0.0.1:9/v1?model=m&timeout=soon")
    with pytest.raises(PolicyError, match="must start with http:// or https://"):
        make_policy("openai:127.0.0.1:9?model=m")


def test_scripted_spec(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    path.write_text(json.dumps("Answer: 2") + "\n")
    policy = make_policy(f"scripted:{path}?loop=yes")
    assert isinstance(policy, ScriptedPolicy) and policy.loop and policy.name == f"scripted:{path}?loop=yes"
    assert [policy.complete([{"role": "user", "content": "?"}]).text for _ in range(2)] == ["Answer: 2"] * 2
    with pytest.raises(PolicyError, match="scripted outputs file not found: .*missing.jsonl"):
        make_policy(f"scripted:{tmp_path / 'missing.jsonl'}")
    with pytest.raises(PolicyError, match="option loop='maybe' of a scripted: spec is invalid"):
        make_policy(f"scripted:{path}?loop=maybe")


@pytest.mark.parametrize("scheme", ["hf", "vllm"])
def test_model_specs_need_an_existing_directory(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_import(module: str, name: str) -> Any:
        raise AssertionError(f"{module} imported before the path was checked")

    monkeypatch.setattr(spec_module, "_backend_class", no_import)
    missing = tmp_path / "no-such-model"
    with pytest.raises(PolicyError, match=f"model directory not found for {scheme}: {missing}"):
        make_policy(f"{scheme}:{missing}")


class _RecordingBackend:
    """Stands in for HFPolicy / VLLMOfflinePolicy to check what make_policy passes them."""

    created: list[tuple[Path, dict[str, Any]]] = []

    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.created.append((path, kwargs))
        self.name = str(kwargs["name"])

    def complete(self, messages: Any, images: Any = (), **kwargs: Any) -> Completion:
        return Completion("ok", "stop", 0, 1, 0.0)


def test_model_specs_pass_typed_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[tuple[str, str]] = []

    def fake_backend(module: str, name: str) -> Any:
        loaded.append((module, name))
        return _RecordingBackend

    monkeypatch.setattr(spec_module, "_backend_class", fake_backend)
    _RecordingBackend.created.clear()
    hf = make_policy(f"hf:{tmp_path}?device=cpu&dtype=bfloat16&seed=3")
    vllm = make_policy(f"vllm:{tmp_path}?max_model_len=256&gpu_memory_utilization=0.2&max_logprobs=5")
    assert isinstance(hf, Policy) and isinstance(vllm, Policy)
    assert loaded == [("hf", "HFPolicy"), ("vllm_offline", "VLLMOfflinePolicy")]
    assert _RecordingBackend.created == [
        (
            tmp_path,
            {
                "name": f"hf:{tmp_path}?device=cpu&dtype=bfloat16&seed=3",
                "device": "cpu",
                "dtype": "bfloat16",
                "seed": 3,
            },
        ),
        (
            tmp_path,
            {
                "name": f"vllm:{tmp_path}?max_model_len=256&gpu_memory_utilization=0.2&max_logprobs=5",
                "max_model_len": 256,
                "gpu_memory_utilization": 0.2,
                "max_logprobs": 5,
            },
        ),
    ]
    with pytest.raises(PolicyError, match="option max_model_len='big' of a vllm: spec is invalid"):
        make_policy(f"vllm:{tmp_path}?max_model_len=big")


def test_backend_class_resolves_the_real_modules() -> None:
    # the vLLM module imports without vllm installed (vllm itself loads when a policy is built)
    backend = spec_module._backend_class("vllm_offline", "VLLMOfflinePolicy")
    assert backend.__name__ == "VLLMOfflinePolicy"


def test_package_import_stays_light() -> None:
    import subprocess

    code = (
        "import sys, embodia.policies as p; "
        "assert callable(p.make_policy) and callable(p.ask) and p.ScriptedPolicy; "
        "print(sorted(m for m in ('torch', 'openai', 'transformers', 'vllm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
