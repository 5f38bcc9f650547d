"""Policy protocol, VLM backends and training recipes.

Importing this package stays light (no torch, transformers, openai or vllm): backends are
imported when :func:`make_policy` or their own module is used.
"""

from embodia.core.chat import (
    ChatPolicy,
    Completion,
    ContextOverflowError,
    ContextWindow,
    Message,
    Policy,
    PolicyError,
    SamplingParams,
    TokenLogprob,
    context_window,
    count_prompt_tokens,
)
from embodia.core.parsing import Decision, FollowUp, ParseFailure, ask, parse_choice, parse_label
from embodia.policies.scripted import ScriptedPolicy
from embodia.policies.spec import make_policy, parse_policy_spec

__all__ = [
    "ChatPolicy",
    "Completion",
    "ContextOverflowError",
    "ContextWindow",
    "Decision",
    "FollowUp",
    "Message",
    "ParseFailure",
    "Policy",
    "PolicyError",
    "SamplingParams",
    "ScriptedPolicy",
    "TokenLogprob",
    "ask",
    "context_window",
    "count_prompt_tokens",
    "make_policy",
    "parse_choice",
    "parse_label",
    "parse_policy_spec",
]
