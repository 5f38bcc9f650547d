"""SxS trajectory builder (When to Think, When to Speak, ICML 2026): entailment-aligned
interleaved think/speak SFT data from ``(reasoning, answer)`` pairs.

For answer chunks ``a_1..a_K`` and reasoning steps ``R``, chunk ``k`` gets the minimal prefix
length ``r_k >= r_{k-1}`` (``r_0 = 0``) with ``supports(R[:r_k], a_k)``; the trajectory is
``think(R[:r_1]) speak(a_1) think(R[r_1:r_2]) speak(a_2) ...``. A chunk that no prefix
supports gets ``r_k = len(R)`` (placed after all reasoning) and is flagged unsupported; by
monotonicity every later chunk also goes at the end, so the answer order is never changed.
Reasoning after the last chunk's prefix is dropped unless ``keep_trailing``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Support = Callable[[Sequence[str], str], bool]
"""``supports(reasoning_prefix_steps, chunk) -> bool``."""

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\\$\"'])")
_DERIVED = re.compile(r"(?:=|\bis\b|\bequals\b|\bgives\b)\s*\$?\s*(-?\d+(?:\.\d+)?)")


def split_answer(answer: str, splitter: Callable[[str], list[str]] | None = None) -> list[str]:
    """Answer chunks: non-empty lines, each split into sentences (``. ! ?`` followed by space
    and an uppercase letter, digit or bracket; decimals like ``3.5`` are not split)."""
    if splitter is not None:
        return [c for c in splitter(answer) if c.strip()]
    out: list[str] = []
    for line in answer.splitlines():
        out.extend(s.strip() for s in _SENT.split(line.strip()) if s.strip())
    return out


@dataclass(frozen=True)
class Segment:
    """One trajectory segment. ``steps`` is the reasoning range ``[a, b)`` a think segment
    holds, or ``(0, r_k)`` the prefix that supports a speak segment; ``chunk`` is the answer
    chunk index of a speak segment."""

    channel: Literal["think", "speak"]
    text: str
    steps: tuple[int, int]
    chunk: int | None = None
    supported: bool = True


def align(
    reasoning_steps: Sequence[str], answer_chunks: Sequence[str], supports: Support
) -> list[int | None]:
    """Monotone minimal supporting prefix length per chunk; ``None`` where none supports it."""
    n = len(reasoning_steps)
    prev = 0
    out: list[int | None] = []
    for chunk in answer_chunks:
        r = next((r for r in range(prev, n + 1) if supports(reasoning_steps[:r], chunk)), None)
        out.append(r)
        prev = n if r is None else r
    return out


def build_trajectory(
    reasoning_steps: Sequence[str],
    answer_chunks: Sequence[str],
    supports: Support,
    keep_trailing: bool = False,
    joiner: str = "\n",
) -> list[Segment]:
    """Interleaved think/speak segments (see module docstring); empty think runs are omitted."""
    n = len(reasoning_steps)
    segs: list[Segment] = []
    prev = 0
    for k, (chunk, r) in enumerate(
        zip(answer_chunks, align(reasoning_steps, answer_chunks, supports), strict=True)
    ):
        rk = n if r is None else r
        if rk > prev:
            segs.append(Segment("think", joiner.join(reasoning_steps[prev:rk]), (prev, rk)))
        segs.append(Segment("speak", chunk, (0, rk), k, r is not None))
        prev = rk
    if keep_trailing and prev < n:
        segs.append(Segment("think", joiner.join(reasoning_steps[prev:]), (prev, n)))
    return segs


def render(segments: Sequence[Segment]) -> str:
    """Assistant content ``<think>..</think><speak>..</speak>...``."""
    return "".join(f"<{s.channel}>{s.text}</{s.channel}>" for s in segments)


_SENTINEL = "\x00SXS_ASSISTANT_CONTENT\x00"


def to_sft_record(
    question: str,
    segments: Sequence[Segment],
    tokenizer: Any = None,
    system: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"messages": [...], ...meta}``; with a HF tokenizer that has a chat template, also
    ``text``. The template is rendered around a marker string that the content then replaces, so the
    interleaved tags reach ``text`` verbatim (templates such as Qwen3's would otherwise keep only
    one ``<think>`` block); template-specific wrapping (e.g. an empty think block) is kept."""
    messages: list[dict[str, str]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": question})
    content = render(segments)
    rec: dict[str, Any] = {"messages": [*messages, {"role": "assistant", "content": content}]}
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": _SENTINEL}], tokenize=False
        )
        rec["text"] = str(text).replace(_SENTINEL, content)
    if meta:
        rec.update(meta)
    return rec


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """One JSON object per line (UTF-8); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return out


# --- exact support checkers ---------------------------------------------------------------


def numbers(text: str) -> list[float]:
    """Numbers stated in ``text`` (thousands commas removed)."""
    return [float(m) for m in re.findall(r"-?\d+(?:\.\d+)?", re.sub(r"(?<=\d),(?=\d{3})", "", text))]


def derived_values(steps: Sequence[str]) -> list[float]:
    """Values a step derives: the number right after ``=``, ``is``, ``equals`` or ``gives``."""
    return [float(m) for s in steps for m in _DERIVED.findall(re.sub(r"(?<=\d),(?=\d{3})", "", s))]


def make_numeric_support(known: Iterable[float | str] = ()) -> Support:
    """A chunk is supported when every number it states is a derived value of the prefix (or
    in ``known``, e.g. the question's givens). A chunk stating no number is always supported."""
    given = [float(k) for k in known]

    def supports(prefix: Sequence[str], chunk: str) -> bool:
        pool = given + derived_values(prefix)
        return all(any(math.isclose(x, v) for v in pool) for x in numbers(chunk))

    return supports


numeric_support: Support = make_numeric_support()


def derived_claim_support(
    claim: Callable[[str], Hashable | None], derive: Callable[[str], Iterable[Hashable]]
) -> Support:
    """Hook for exact puzzle/DSR checkers: ``claim(chunk)`` is the value a chunk asserts (e.g. a
    parsed data-structure state or grid); it is supported when some prefix step derives it
    (``derive(step)`` yields the values a step establishes). A chunk with no claim is
    supported."""

    def supports(prefix: Sequence[str], chunk: str) -> bool:
        c = claim(chunk)
        return c is None or any(c in set(derive(s)) for s in prefix)

    return supports


def table_support(min_steps: Mapping[str, int | None]) -> Support:
    """Hand-labelled support: chunk -> minimal step count that supports it (``None``: never)."""

    def supports(prefix: Sequence[str], chunk: str) -> bool:
        m = min_steps.get(chunk)
        return m is not None and len(prefix) >= m

    return supports
