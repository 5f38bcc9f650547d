"""A rule-based question writer for LIFT, in the place of the LLM server that writes the pairs
in real use: it answers the generator's request exactly as the recipe asks a chat policy to.

It reads the passage's last sentence; when that states a fact, "The ATTRIBUTE of THING is
VALUE.", it writes questions about it in several phrasings, the value as their answer, and
otherwise an empty list (the needle-only generator's behaviour on filler), or with ``cloze`` a
fill-in-the-blank pair about any other sentence (a writer with something to say about every
sentence, as an LLM's is). Shared by
``tests/policies/recipes/test_lift.py`` and ``benchmarks/recipes.py``; ``delay_s`` stands for
a server's time per call.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from embodia.core.chat import Completion
from embodia.policies.recipes.lift import segment_sentences

FACT = re.compile(r"^The (?P<attribute>[\w' -]+?) of (?P<thing>[\w' -]+?) is (?P<value>[\w-]+)\.$")
PHRASINGS = (
    "What is the {attribute} of {thing}?",
    "Which {attribute} does {thing} have?",
    "Tell me the {attribute} of {thing}.",
    "What {attribute} belongs to {thing}?",
    "Name the {attribute} of {thing}.",
)


def cloze_pair(sentence: str) -> dict[str, str]:
    """A fill-in-the-blank pair: the sentence without its last word asks for that word."""
    head, _, last = sentence.strip().rstrip(".!?").rpartition(" ")
    return {"question": f'Which word ends the sentence "{head} ..."?', "answer": last}


def fact_pairs(sentence: str, count: int, cloze: bool = False) -> list[dict[str, str]]:
    match = FACT.match(sentence.strip())
    if match is None:
        return [cloze_pair(sentence)][:count] if cloze and " " in sentence.strip() else []
    return [
        {"question": phrasing.format(**match.groupdict()), "answer": match["value"]}
        for phrasing in PHRASINGS[:count]
    ]


class FactQAPolicy:
    """A chat policy that writes LIFT's pairs by rule (module docstring)."""

    def __init__(self, delay_s: float = 0.0, cloze: bool = False) -> None:
        self.name = "fact-qa"
        self.delay_s = delay_s
        self.cloze = cloze
        self.calls = 0

    def complete(self, messages: Sequence[Any], images: Sequence[Any] = (), **options: Any) -> Completion:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        count = int(options["tools"][0]["function"]["parameters"]["properties"]["qa_list"]["maxItems"])
        text = str(messages[-1]["content"]).split("Passage:\n", 1)[1]
        pairs = fact_pairs(segment_sentences(text)[-1], count, self.cloze)
        return Completion(
            text=json.dumps({"qa_list": pairs}),
            finish_reason="stop",
            prompt_tokens=0,
            completion_tokens=0,
            latency_s=self.delay_s,
            model=self.name,
        )
