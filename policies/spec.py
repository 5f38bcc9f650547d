"""Policies from URI-like spec strings, as the CLI's ``--policy`` takes them.

=============================================  ==============================================
``openai:http://host:8000/v1?model=NAME``      :class:`OpenAICompatPolicy`; options ``api_key``,
                                               ``timeout`` (s), ``max_retries``
``hf:/path/to/model``                          ``HFPolicy`` (transformers); options ``device``,
                                               ``dtype``, ``seed``, ``max_new_tokens_cap``,
                                               ``exit_threshold``, ``exit_min_layer``
``vllm:/path/to/model``                        ``VLLMOfflinePolicy`` (the ``[vllm]`` extra);
                                               options ``max_model_len``, ``dtype``,
                                               ``gpu_memory_utilization``, ``seed``,
                                               ``max_logprobs``
``scripted:replies.jsonl``                     :class:`ScriptedPolicy`; option ``loop``
=============================================  ==============================================

Options follow ``?`` as ``key=value`` pairs joined by ``&``. ``heuristic`` is not a chat
policy: agents handle ``--policy heuristic`` themselves. Backends are imported only when a
spec asks for them, so parsing a spec never loads torch, transformers or vllm.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from embodia.core.chat import Policy, PolicyError

if TYPE_CHECKING:
    from embodia.policies.trainable import TrainablePolicy

SCHEMES = ("openai", "hf", "vllm", "scripted")


def _flag(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


_OPTION_TYPES: dict[str, dict[str, Callable[[str], object]]] = {
    "openai": {"model": str, "api_key": str, "timeout": float, "max_retries": int},
    "hf": {
        "device": str,
        "dtype": str,
        "seed": int,
        "max_new_tokens_cap": int,
        "exit_threshold": float,
        "exit_min_layer": int,
    },
    "vllm": {
        "max_model_len": int,
        "dtype": str,
        "gpu_memory_utilization": float,
        "seed": int,
        "max_logprobs": int,
    },
    "scripted": {"loop": _flag},
}

_EXAMPLES = {
    "openai": "openai:http://127.0.0.1:8000/v1?model=NAME",
    "hf": "hf:/path/to/model",
    "vllm": "vllm:/path/to/model",
    "scripted": "scripted:replies.jsonl",
}


def parse_policy_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """``(scheme, target, options)`` of a spec; PolicyError naming the problem if malformed.

    Only the syntax and the option names are checked here; values and targets are checked
    by :func:`make_policy`.
    """
    text = spec.strip()
    if text.split(":", 1)[0].lower() == "heuristic":
        raise PolicyError(
            "'heuristic' is not a chat policy: pass --policy heuristic to the agent, which runs its own "
            "non-learned decision rule"
        )
    scheme, colon, rest = text.partition(":")
    if not colon or not scheme:
        raise PolicyError(
            f"policy spec {spec!r} must look like SCHEME:TARGET, e.g. {' or '.join(_EXAMPLES.values())}"
        )
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise PolicyError(
            f"unknown policy scheme {scheme!r} in {spec!r}: expected one of {', '.join(SCHEMES)}"
        )
    target, _, query = rest.partition("?")
    if not target:
        raise PolicyError(f"policy spec {spec!r} has no target: expected e.g. {_EXAMPLES[scheme]}")
    options: dict[str, str] = {}
    if query:
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise PolicyError(
                f"cannot read the options {query!r} in {spec!r}: expected key=value&key=value"
            ) from None
        allowed = _OPTION_TYPES[scheme]
        for key, value in pairs:
            if key not in allowed:
                raise PolicyError(
                    f"unknown option {key!r} for a {scheme}: spec (known: {', '.join(sorted(allowed))})"
                )
            if key in options:
                raise PolicyError(f"option {key!r} is given twice in {spec!r}")
            if not value:
                raise PolicyError(f"option {key!r} has no value in {spec!r}")
            options[key] = value
    return scheme, target, options


def _typed_options(scheme: str, options: dict[str, str]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for key, value in options.items():
        try:
            typed[key] = _OPTION_TYPES[scheme][key](value)
        except ValueError as error:
            raise PolicyError(f"option {key}={value!r} of a {scheme}: spec is invalid: {error}") from None
    return typed


def _model_dir(scheme: str, target: str) -> Path:
    path = Path(target).expanduser()
    if not path.is_dir():
        raise PolicyError(f"model directory not found for {scheme}: {path}")
    return path


def _backend_class(module: str, name: str) -> Callable[..., object]:
    """A backend class, imported now (so torch/vllm load only when a spec needs them)."""
    backend: Callable[..., object] = getattr(importlib.import_module(f"embodia.policies.{module}"), name)
    return backend


def make_trainable_policy(spec: str, **trainable: Any) -> TrainablePolicy:
    """The model of ``hf:DIR[?options]`` (or a bare ``DIR``) as a
    :class:`~embodia.policies.trainable.TrainablePolicy`, for the training recipes; ``trainable``
    adds its keywords (``lora``, ``seed``), which win over the spec's options."""
    scheme, target, raw_options = parse_policy_spec(spec if ":" in spec.strip() else f"hf:{spec}")
    if scheme != "hf":
        raise PolicyError(
            f"training needs a local transformers model (hf:DIR), not a {scheme}: policy ({spec!r})"
        )
    from embodia.policies.trainable import TrainablePolicy

    options = {**_typed_options(scheme, raw_options), **trainable}
    return TrainablePolicy(_model_dir(scheme, target), name=spec.strip(), **options)


def make_policy(spec: str, *, connect: bool = False) -> Policy:
    """A policy from its spec string (see the module docstring); its ``name`` is the spec.

    With ``connect``, an ``openai:`` policy's server must answer now (see
    :meth:`OpenAICompatPolicy.check_reachable`): every runner passes it, so each fails fast,
    with one error naming the address, when the server is down at start.
    """
    scheme, target, raw_options = parse_policy_spec(spec)
    options = _typed_options(scheme, raw_options)
    name = spec.strip()
    policy: object
    if scheme == "openai":
        from embodia.policies.openai_compat import OpenAICompatPolicy

        model = options.pop("model", None)
        if not isinstance(model, str):
            raise PolicyError(f"policy spec {spec!r} needs ?model=NAME (the model name the server serves)")
        if "timeout" in options:
            options["timeout_s"] = options.pop("timeout")
        policy = OpenAICompatPolicy(target, model, name=name, **options)
        if connect:
            policy.check_reachable()
    elif scheme == "scripted":
        from embodia.policies.scripted import ScriptedPolicy

        policy = ScriptedPolicy.from_jsonl(target, name=name, **options)
    else:
        path = _model_dir(scheme, target)  # before the import: a typo should not cost loading torch
        module, class_name = ("hf", "HFPolicy") if scheme == "hf" else ("vllm_offline", "VLLMOfflinePolicy")
        policy = _backend_class(module, class_name)(path, name=name, **options)
    if not isinstance(policy, Policy):
        raise PolicyError(f"the {scheme} backend built a {type(policy).__name__}, which is not a Policy")
    return policy
