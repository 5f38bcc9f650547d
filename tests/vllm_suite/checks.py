"""What the vLLM suite compares backends against: the same tiny model run by transformers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodia.core.chat import ChatPolicy, Message


def chat(text: str) -> list[Message]:
    return [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": text}]


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir, local_files_only=True)


def load_reference_model(model_dir: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype="float32").eval()


def prompt_ids(
    tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """The chat template's token ids for ``messages`` (listing ``tools``) plus the assistant header."""
    encoded = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    return [int(i) for i in ids]


def reference_logprobs(model: Any, prompt: list[int], completion: list[int]) -> Any:
    """transformers' log-softmax over the vocabulary at each generated position, (T, V)."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)


def stop_inside(text: str) -> tuple[str, int]:
    """A 3-character ASCII stop string whose first occurrence lies in the middle of ``text``."""
    for start in range(len(text) // 3, len(text) - 3):
        candidate = text[start : start + 3]
        if candidate.isascii() and candidate.isalnum() and text.find(candidate) == start:
            return candidate, start
    raise AssertionError(f"no usable stop string in {text!r}")


def check_stop_sequences(policy: ChatPolicy) -> None:
    """A stop string ends the reply right before it (with its reason and fewer tokens), and of
    two stop strings the one earlier in the text wins. ``policy`` must sample reproducibly."""
    messages = chat("Explore the office first, then turn left.")
    full = policy.complete(messages, max_tokens=48, temperature=1.0)
    assert full.finish_reason == "length"
    stop, start = stop_inside(full.text)
    stopped = policy.complete(messages, max_tokens=48, temperature=1.0, stop=[stop])
    assert stopped.text == full.text[:start]
    assert stopped.finish_reason == "stop"
    assert stopped.extra["stop_reason"] == stop
    assert stopped.completion_tokens < full.completion_tokens
    later, _ = stop_inside(full.text[start + 3 :])
    both = policy.complete(messages, max_tokens=48, temperature=1.0, stop=[later, stop])
    assert both.text == full.text[:start]
