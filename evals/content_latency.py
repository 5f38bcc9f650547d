"""Content-latency metrics for interleaved think/speak streams (SxS, ICML 2026; metrics are *ours*).

A stream is one autoregressive output with ``<think>`` and ``<speak>`` spans, split into
:class:`~embodia.core.interleaved.Span` objects by :mod:`embodia.core.interleaved`.

Definitions over a stream of ``N`` tokens with speak spans ``[s_k, e_k)``, ``k = 1..K``:

- **TTFC** ``ttfc_tokens = s_1`` (``ttfc_frac = s_1 / N``); ``None`` when ``K = 0`` (never
  speaks). Wall-clock ``ttfc_s`` = arrival time of the first speak token, when times are known
  (seconds since the request was sent).
- **Inter-update waiting**: gaps ``g_0 = s_1``, ``g_k = s_{k+1} - e_k`` (the silence before each
  update); ``mean_gap`` / ``max_gap`` over them (``None`` when ``K = 0``). The silence after the
  last update is ``tail = N - e_K`` (``N`` when ``K = 0``), reported separately.
- **Expected wait of a random observer**: an observer arrives at ``U ~ Uniform[0, N)`` and
  waits until the next speak token. Inside a speak span the wait is 0; inside a silent gap of
  length ``g`` that ends in an update the wait is uniform on ``(0, g]`` with mean ``g / 2``,
  and that gap is hit with probability ``g / N``; so ``E[W] = sum_k g_k^2 / (2N)``. With
  ``include_tail`` (default) the tail counts as a gap that ends at the end of the stream (the
  observer then sees the final state), adding ``tail^2 / (2N)``; a stream that never speaks has
  ``E[W] = N / 2``. (The discrete variant, arriving at a token index, is ``sum g(g+1) / (2N)``.)
  Seconds versions use token arrival times: gap = start time of update ``k+1`` minus the time of
  the last token of update ``k``, ``T`` = last token's time.
- **Disclosure rate** ``disclosure_rate = speak tokens / N``. **Early disclosure**
  ``early_disclosure = fraction of speak tokens emitted before the last think token`` (content
  disclosed while reasoning was still going; 0 for think-then-answer; ``None`` without speak).
- **Premature commitment** ``= #disclosed chunks c with contradicts(c, final) / #chunks``;
  chunks are the speak spans, ``final`` defaults to the last speak span's text (which should
  not contradict itself). The default :func:`exact_contradicts` is exact for numeric and
  multiple-choice answers (see there).
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embodia.core.interleaved import (
    Span,
    Tokenizer,
    parse_interleaved,
    whitespace_tokenize,
)

Contradicts = Callable[[str, str], bool]

if TYPE_CHECKING:
    from embodia.core.chat import Message, Policy


def timed_completion(
    policy: Policy, messages: Sequence[Message], max_tokens: int
) -> tuple[str, list[tuple[float, str]]]:
    """The reply and its ``(arrival s, piece)`` deltas as the backend streamed them (a backend
    that does not stream gives one delta at the end)."""
    started = time.perf_counter()
    deltas: list[tuple[float, str]] = []
    completion = policy.complete(
        messages,
        max_tokens=max_tokens,
        temperature=0.0,
        on_text=lambda piece: deltas.append((time.perf_counter() - started, piece)),
    )
    if not deltas and completion.text:
        deltas.append((time.perf_counter() - started, completion.text))
    return completion.text, deltas


# --- contradiction -----------------------------------------------------------------------

_NUM = r"-?\d+(?:\.\d+)?"
_ASSIGN = re.compile(rf"\b([A-Za-z_]\w*)\s*=\s*({_NUM})(?![\d.])")
_ANSWER_NUM = re.compile(rf"\banswer\s*(?:is|:|=)?\s*\$?\\?(?:boxed\{{)?\s*({_NUM})", re.I)
_BOXED = re.compile(rf"\\boxed\{{\s*({_NUM})\s*\}}")
_OPTION = re.compile(r"(?:\b(?:answer|option|choice)\s*(?:is\s*)?:?\s*\(?([A-J])\)?(?![A-Za-z])|\(([A-J])\))")


def _num(s: str) -> float:
    return float(s)


def _answer_number(text: str) -> float | None:
    m = _BOXED.search(text) or _ANSWER_NUM.search(text)
    if m:
        return _num(m.group(1))
    stripped = text.strip().rstrip(".")
    return _num(stripped) if re.fullmatch(_NUM, stripped) else None


def _options(text: str) -> set[str]:
    return {(a or b).upper() for a, b in _OPTION.findall(text)}


def exact_contradicts(chunk: str, final: str) -> bool:
    """Exact default: True when (1) both assign the same variable different numbers
    (``x = 4`` vs ``x = 5``), (2) both state an answer number (``answer is N``, ``\\boxed{N}``,
    or a bare number) that differ, or (3) both name answer options (``answer: B``, ``(C)``)
    with no option in common. Anything else is not a contradiction."""
    fa = {v: _num(x) for v, x in _ASSIGN.findall(final)}
    for v, x in _ASSIGN.findall(chunk):
        if v in fa and not math.isclose(_num(x), fa[v]):
            return True
    ca, fn = _answer_number(chunk), _answer_number(final)
    if ca is not None and fn is not None and not math.isclose(ca, fn):
        return True
    co, fo = _options(chunk), _options(final)
    return bool(co and fo and not (co & fo))


# --- metrics -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamMetrics:
    """Per-stream content-latency metrics (definitions in the module docstring)."""

    n_tokens: int
    n_updates: int
    ttfc_tokens: int | None
    ttfc_frac: float | None
    mean_gap: float | None
    max_gap: int | None
    tail: int
    expected_wait: float
    disclosure_rate: float
    early_disclosure: float | None
    premature_commitment: float | None
    ttfc_s: float | None = None
    mean_gap_s: float | None = None
    max_gap_s: float | None = None
    expected_wait_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _observer(gaps: Sequence[float], tail: float, total: float, include_tail: bool) -> float:
    if total <= 0:
        return 0.0
    sq = sum(g * g for g in gaps) + (tail * tail if include_tail else 0.0)
    return sq / (2.0 * total)


def stream_metrics(
    spans: Sequence[Span],
    final: str | None = None,
    contradicts: Contradicts = exact_contradicts,
    include_tail: bool = True,
) -> StreamMetrics:
    """Metrics of one parsed stream; ``final`` defaults to the last speak span's text."""
    n = spans[-1].end if spans else 0
    speak = [s for s in spans if s.channel == "speak"]
    gaps: list[int] = []
    prev_end = 0
    for s in speak:
        gaps.append(s.start - prev_end)
        prev_end = s.end
    tail = n - prev_end if speak else n
    n_speak = sum(s.n_tokens for s in speak)
    think_end = max((s.end for s in spans if s.channel == "think"), default=0)
    early = sum(max(0, min(s.end, think_end) - s.start) for s in speak)

    final_text = final if final is not None else (speak[-1].text if speak else "")
    pc = sum(contradicts(s.text, final_text) for s in speak) / len(speak) if speak else None

    # wall-clock versions, only when every span carries times
    ttfc_s = mean_s = max_s = wait_s = None
    if spans and all(s.start_time_s is not None and s.end_time_s is not None for s in spans):
        total_s = float(spans[-1].end_time_s or 0.0)
        gaps_s: list[float] = []
        prev_t = 0.0
        for s in speak:
            gaps_s.append(max(0.0, float(s.start_time_s or 0.0) - prev_t))
            prev_t = float(s.end_time_s or 0.0)
        tail_s = max(0.0, total_s - prev_t) if speak else total_s
        if speak:
            ttfc_s = gaps_s[0]
            mean_s, max_s = sum(gaps_s) / len(gaps_s), max(gaps_s)
        wait_s = _observer(gaps_s, tail_s, total_s, include_tail)

    return StreamMetrics(
        n_tokens=n,
        n_updates=len(speak),
        ttfc_tokens=gaps[0] if speak else None,
        ttfc_frac=(gaps[0] / n if n else 0.0) if speak else None,
        mean_gap=sum(gaps) / len(gaps) if gaps else None,
        max_gap=max(gaps) if gaps else None,
        tail=tail,
        expected_wait=_observer(gaps, tail, n, include_tail),
        disclosure_rate=n_speak / n if n else 0.0,
        early_disclosure=early / n_speak if n_speak else None,
        premature_commitment=pc,
        ttfc_s=ttfc_s,
        mean_gap_s=mean_s,
        max_gap_s=max_s,
        expected_wait_s=wait_s,
    )


def aggregate(rows: Sequence[Mapping[str, Any]], by: str = "baseline") -> dict[str, dict[str, float]]:
    """Mean of every numeric field per group (``None`` values skipped); adds ``n`` (rows) and,
    for streams that never speak, ``no_content`` (fraction with ``ttfc_tokens is None``)."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[str(r.get(by, ""))].append(r)
    out: dict[str, dict[str, float]] = {}
    for name, rs in groups.items():
        sums: dict[str, list[float]] = defaultdict(list)
        for r in rs:
            for k, v in r.items():
                if k != by and isinstance(v, int | float):
                    sums[k].append(float(v))
        agg = {k: sum(v) / len(v) for k, v in sums.items() if v}
        agg["n"] = float(len(rs))
        agg["no_content"] = sum(r.get("ttfc_tokens") is None for r in rs) / len(rs)
        out[name] = agg
    return out


# --- Pareto ------------------------------------------------------------------------------


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of non-dominated ``(latency, accuracy)`` points (lower latency, higher accuracy
    are better), sorted by latency. Equal points are all kept."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any(
            (x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1]))


def pareto_plot(
    rows: Sequence[Mapping[str, Any]],
    path: str | Path,
    x: str = "ttfc_tokens",
    y: str = "accuracy",
    label: str = "baseline",
    title: str | None = None,
) -> Path:
    """Scatter ``y`` vs ``x`` (one point per row, e.g. per baseline/checkpoint), front marked.

    Rows whose ``x`` or ``y`` is ``None`` are skipped. Writes a PNG (matplotlib Agg).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    xy = [(float(r[x]), float(r[y])) for r in pts]
    front = pareto_front(xy)
    fig, ax = plt.subplots(figsize=(5, 4))
    markers = "osD^vP*Xh<>"
    for n, (r, (px, py)) in enumerate(zip(pts, xy, strict=True)):
        # a legend rather than text beside the points: close points would overprint their names
        ax.scatter(px, py, s=40, marker=markers[n % len(markers)], label=str(r.get(label, "")), zorder=3)
    if front:
        ax.plot([xy[i][0] for i in front], [xy[i][1] for i in front], "k--", lw=1, label="Pareto front")
    if pts:
        ax.legend(fontsize=7, loc="best")
    if xy and all(0.0 <= py <= 1.0 for _, py in xy):
        ax.set_ylim(-0.03, 1.03)  # rates: keep the whole scale, so one run's plot reads like another's
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"{y} vs {x}")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


# --- baselines (stream transformers over a (reasoning, answer) pair) --------------------

PROMPTED_INTERLEAVING_SYSTEM = (
    "Reason privately inside <think>...</think> and tell the user results inside "
    "<speak>...</speak>. Alternate: as soon as your reasoning so far establishes part of the "
    "answer, speak that part, then keep thinking. Never speak anything you have not yet derived."
)


def think_then_answer(reasoning: str, answer: str) -> str:
    """All reasoning as one think span, then the whole answer as one speak span."""
    return f"<think>{reasoning}</think><speak>{answer}</speak>"


def naive_early_streaming(
    reasoning: str, answer: str, k: int = 32, tokenizer: Tokenizer = whitespace_tokenize
) -> str:
    """No private thinking: the reasoning is spoken verbatim in ``k``-token updates, then the
    answer (tokens re-joined with spaces)."""
    toks = tokenizer(reasoning)
    blocks = [" ".join(toks[i : i + k]) for i in range(0, len(toks), k)]
    return "".join(f"<speak>{b}</speak>" for b in blocks) + f"<speak>{answer}</speak>"


def prompted_interleaving(text: str, tokenizer: Tokenizer = whitespace_tokenize) -> list[Span]:
    """Prompted interleaving (no training): parse whatever the model produced."""
    return parse_interleaved(text, tokenizer)


BASELINES: dict[str, Callable[[str, str], str]] = {
    "think_then_answer": think_then_answer,
    "naive_early_streaming": naive_early_streaming,
}
