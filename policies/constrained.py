"""Decoding under a grammar for the transformers backend: a reply held to a JSON schema.

A request whose ``tool_choice`` forces a call (``"required"``, or a named tool) must come
back with a valid call whatever the model, a tiny one with random weights included: the
reply is decoded under the JSON schema of one call object
(:func:`~embodia.core.tool_calls.forced_call_schema`), token by token, every token that
would leave the grammar masked out of the logits before the next one is chosen.

The grammar engine is llguidance (the Rust core of the Guidance project, and one of vLLM's
structured-output backends): one wheel with no Python dependencies, a token mask in tens of
microseconds, and full JSON Schema coverage. xgrammar, vLLM's default backend, was the other
candidate; its wheel brings triton and a TVM runtime, hundreds of megabytes that a CPU
install does not otherwise need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from embodia.core.chat import PolicyError


class GrammarTokenizer:
    """llguidance's view of a Hugging Face fast tokenizer (built once per policy: the
    vocabulary is read token by token)."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Sequence[int]) -> None:
        import llguidance.hf

        self.vocab_size = vocab_size
        self.tokenizer = llguidance.hf.from_tokenizer(
            tokenizer, n_vocab=vocab_size, eos_token=list(eos_token_ids)
        )


class SchemaConstraint(LogitsProcessor):
    """Masks, at each step, the tokens that would take the reply out of a JSON schema; once
    the reply is complete, only an end-of-sequence token is left.

    One instance serves one ``generate`` call: it keeps the grammar's state and reads the
    tokens chosen so far from ``input_ids`` (batch size 1).
    """

    def __init__(self, tokenizer: GrammarTokenizer, schema: Mapping[str, Any]) -> None:
        import llguidance
        import llguidance.torch

        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            dict(schema), defaults={"whitespace_flexible": False}
        )
        self._matcher = llguidance.LLMatcher(tokenizer.tokenizer, grammar)
        if self._matcher.is_error():
            raise PolicyError(f"cannot decode under the call's schema: {self._matcher.get_error()}")
        self._mask = llguidance.torch.allocate_token_bitmask(1, tokenizer.vocab_size)
        self._fill = llguidance.torch.fill_next_token_bitmask
        self._seen: int | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[0] != 1:
            raise PolicyError("decoding under a schema takes one sequence at a time")
        length = int(input_ids.shape[1])
        chosen = self._seen is not None and length > self._seen
        if chosen and not self._matcher.consume_token(int(input_ids[0, -1])):
            raise PolicyError(f"the grammar refused a token it allowed: {self._matcher.get_error()}")
        self._seen = length
        self._fill(self._matcher, self._mask, 0)
        # one bit per token, little-endian in 32-bit words: unpacked once here, which costs a
        # tenth of llguidance's torch kernel on a CPU
        bits = np.unpackbits(self._mask.numpy().view(np.uint8), bitorder="little")
        vocab = scores.shape[-1]
        allowed = np.zeros(vocab, dtype=bool)
        allowed[: min(vocab, bits.size)] = bits[:vocab].astype(bool)
        masked = scores.masked_fill(torch.from_numpy(~allowed), -float("inf"))
        return masked  # type: ignore[return-value]
