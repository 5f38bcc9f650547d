"""Scores shared by several rooms: per-second speaking F1 (the live-commentary timing score)
and ROUGE-L over lower-cased words.

The live benchmark (``embodia.evals.live``), the speak gate's training, the stream media
checks and the CLEVR answer checks all score with these, so they live on the lowest floor.
Seconds are read from ``{second: text}`` objects whose keys are whole seconds (ints or digit
strings); a second whose text is empty or only an ellipsis is *silent*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from embodia.errors import EmbodiaError

_SECOND = re.compile(r"\d+")
_TOKEN = re.compile(r"[a-z0-9]+")


class ScoreInputError(EmbodiaError, ValueError):
    """Seconds or texts handed to a score are malformed."""


def is_silent(text: str) -> bool:
    """Whether a second's text says nothing: empty, or only an ellipsis (the ``" ..."`` filler)."""
    return text.strip() in ("", "...", "…")


def drop_silent(seconds: Mapping[int, str]) -> dict[int, str]:
    """The seconds whose text is not silent (see :func:`is_silent`)."""
    return {t: s for t, s in seconds.items() if not is_silent(s)}


def second_key(key: object, where: str, error: type[EmbodiaError] = ScoreInputError) -> int:
    if isinstance(key, bool):
        raise error(f"{where}: second {key!r} is not an integer")
    if isinstance(key, int):
        if key < 0:
            raise error(f"{where}: second {key} is negative")
        return key
    if isinstance(key, str) and _SECOND.fullmatch(key):
        return int(key)
    raise error(f"{where}: second {key!r} is not a non-negative integer")


def parse_seconds(
    value: object, where: str = "seconds", error: type[EmbodiaError] = ScoreInputError
) -> dict[int, str]:
    """``{"<sec>": text}`` (string or int keys) as ``{sec: text}``, checking every entry."""
    if not isinstance(value, Mapping):
        raise error(f"{where} must be an object of {{second: text}}, got {type(value).__name__}")
    out: dict[int, str] = {}
    for key, text in value.items():
        second = second_key(key, where, error)
        if not isinstance(text, str):
            raise error(f"{where}: second {key!r} holds a {type(text).__name__}, not a string")
        if second in out:
            raise error(f"{where}: second {second} appears twice")
        out[second] = text
    return dict(sorted(out.items()))


def as_seconds(
    value: Mapping[Any, str] | Iterable[Any],
    where: str = "seconds",
    error: type[EmbodiaError] = ScoreInputError,
) -> dict[int, str]:
    """Seconds given as ``{sec: text}`` or as an iterable of seconds (each with empty text)."""
    if isinstance(value, Mapping):
        return parse_seconds(value, where, error)
    return {second_key(s, where, error): "" for s in value}


class F1Clip(TypedDict):
    precision: float
    recall: float
    f1: float
    tp: int
    pred_count: int
    label_count: int


def f1_from(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def f1(pred: Mapping[Any, str] | Iterable[Any], label: Mapping[Any, str] | Iterable[Any]) -> F1Clip | None:
    """Per-second speaking overlap of one clip; ``None`` when the label has no second (skipped)."""
    p, gt = set(as_seconds(pred, "pred")), set(as_seconds(label, "label"))
    if not gt:
        return None
    tp = len(p & gt)
    precision = tp / len(p) if p else 0.0
    recall = tp / len(gt)
    return F1Clip(
        precision=precision,
        recall=recall,
        f1=f1_from(precision, recall),
        tp=tp,
        pred_count=len(p),
        label_count=len(gt),
    )


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric words, the unit of the lexical judges."""
    return _TOKEN.findall(text.lower())


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 (longest common subsequence of :func:`tokens`), 0 when either side is empty."""
    a, b = tokens(prediction), tokens(reference)
    if not a or not b:
        return 0.0
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, start=1):
            keep = row[j]
            row[j] = prev + 1 if x == y else max(row[j], row[j - 1])
            prev = keep
    lcs = row[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)
