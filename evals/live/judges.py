"""Judges of the live benchmark: the score judge PAUC asks (1..3) and the pairwise judge the win
rate asks, lexical (ROUGE-L, offline) or backed by a chat policy, and the parsing of their replies."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from embodia.core.chat import Message, Policy
from embodia.core.scores import rouge_l
from embodia.evals.live.records import LiveEvalError

Winner = Literal["A", "B", "tie"]


@dataclass(frozen=True)
class Judgment:
    """A judge's verdict on one prediction: ``score`` in 1..3 (``None`` when unparseable)."""

    score: int | None
    raw: str


@dataclass(frozen=True)
class PairJudgment:
    """A pairwise verdict: ``"A"``, ``"B"``, ``"tie"``, or ``None`` when unparseable."""

    winner: Winner | None
    raw: str


@runtime_checkable
class Judge(Protocol):
    """Scores a (cumulative) prediction against the reference text on 1..3, for PAUC."""

    name: str

    def score(self, prediction: str, reference: str) -> Judgment: ...


@runtime_checkable
class PairwiseJudge(Protocol):
    """Says which of two commentaries is closer to the reference."""

    name: str

    def compare(self, a: str, b: str, reference: str) -> PairJudgment: ...


@dataclass
class LexicalJudge:
    """Offline PAUC judge: ROUGE-L F1 ``>= high`` scores 3, ``>= low`` scores 2, else 1."""

    low: float = 0.2
    high: float = 0.5
    name: str = "lexical-rougeL"

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high <= 1:
            raise LiveEvalError(f"LexicalJudge needs 0 <= low <= high <= 1, got {self.low}, {self.high}")

    def score(self, prediction: str, reference: str) -> Judgment:
        f = rouge_l(prediction, reference)
        return Judgment(3 if f >= self.high else 2 if f >= self.low else 1, f"rougeL_f={f:.4f}")


@dataclass
class LexicalPairwiseJudge:
    """Offline pairwise judge: the side with the higher ROUGE-L F1 wins; equal is a tie."""

    name: str = "lexical-rougeL"

    def compare(self, a: str, b: str, reference: str) -> PairJudgment:
        fa, fb = rouge_l(a, reference), rouge_l(b, reference)
        winner: Winner = "tie" if math.isclose(fa, fb, abs_tol=1e-12) else "A" if fa > fb else "B"
        return PairJudgment(winner, f"rougeL_f A={fa:.4f} B={fb:.4f}")


SCORE_INSTRUCTIONS = (
    "You grade a live game commentary system. Compare the Predicted Answer with the Ground Truth "
    "Answer and rate how much of the ground truth's key content the prediction conveys.\n"
    "3 = nearly all key points are conveyed; small inaccuracies or rewording are fine.\n"
    "2 = some key points are right, but important ones are missing or wrong.\n"
    "1 = little or none of the key content is conveyed, or the prediction is of very poor quality.\n"
    "The prediction is the running transcript so far: when it repeats itself, lower the score.\n"
    "Reply with one digit (1, 2 or 3) and nothing else."
)

PAIRWISE_TEMPLATE = (
    "You are judging live video commentary. Read two candidate commentaries, A and B, and the "
    "commentary a human caster gave for the same clip, then decide which candidate is closer to "
    "the human commentary. Judge first by meaning: the same events, details and key points. Only "
    "when that does not separate them, judge by style: similar tone, wording and structure.\n\n"
    "[Commentary A]\n{a}\n\n[Commentary B]\n{b}\n\n[Human commentary]\n{reference}\n\n"
    "Answer with one letter, A or B."
)


def parse_score(text: str, low: int = 1, high: int = 3) -> int | None:
    """The first integer in a judge's reply when it lies in ``[low, high]``, else ``None``."""
    match = re.search(r"\d+", text)
    if match is None:
        return None
    value = int(match.group())
    return value if low <= value <= high else None


def parse_preference(text: str) -> Winner | None:
    """``"A"``/``"B"`` from a lone letter or "Commentary X [is better]", ``"tie"`` when the reply
    says so, ``None`` when it cannot be read."""
    lone = re.fullmatch(r"[\W_]*([AB])[\W_]*", text.strip())
    if lone:
        return "A" if lone.group(1) == "A" else "B"
    named = {m.upper() for m in re.findall(r"(?i)\bcommentary\s+([ab])\b", text)}
    if len(named) == 2:
        named = {m.upper() for m in re.findall(r"(?i)\bcommentary\s+([ab])\s+is\s+(?:better|closer)", text)}
    if len(named) == 1:
        return "A" if named == {"A"} else "B"
    if re.search(r"(?i)\b(tie|equal(ly)?|neither|same)\b", text):
        return "tie"
    return None


@dataclass
class _PolicyBacked:
    """A judge that asks a chat :class:`Policy`, keeping every prompt and raw answer in ``records``."""

    policy: Policy
    records: list[dict[str, Any]] = field(default_factory=list, kw_only=True)

    @property
    def name(self) -> str:
        return self.policy.name

    def _ask(self, messages: list[Message], max_tokens: int, temperature: float) -> str:
        return self.policy.complete(messages, max_tokens=max_tokens, temperature=temperature).text


@dataclass
class PolicyJudge(_PolicyBacked):
    """PAUC judge backed by any chat :class:`Policy`; keeps every prompt and raw answer."""

    max_tokens: int = 8
    temperature: float = 0.0
    instructions: str = SCORE_INSTRUCTIONS

    def score(self, prediction: str, reference: str) -> Judgment:
        messages: list[Message] = [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": f"Ground Truth Answer: {reference}\nPredicted Answer: {prediction}"},
        ]
        raw = self._ask(messages, self.max_tokens, self.temperature)
        score = parse_score(raw)
        self.records.append({"judge": self.name, "messages": messages, "raw": raw, "score": score})
        return Judgment(score, raw)


@dataclass
class PolicyPairwiseJudge(_PolicyBacked):
    """Pairwise judge backed by any chat :class:`Policy` (temperature 0 by default)."""

    max_tokens: int = 16
    temperature: float = 0.0
    template: str = PAIRWISE_TEMPLATE

    def compare(self, a: str, b: str, reference: str) -> PairJudgment:
        prompt = self.template.format(a=a, b=b, reference=reference)
        raw = self._ask([{"role": "user", "content": prompt}], self.max_tokens, self.temperature)
        winner = parse_preference(raw)
        self.records.append({"judge": self.name, "prompt": prompt, "raw": raw, "winner": winner})
        return PairJudgment(winner, raw)
