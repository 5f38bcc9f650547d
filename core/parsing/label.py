"""Which of a fixed set of labels a reply gave (:func:`parse_label`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from embodia.core.parsing.failure import ParseFailure
from embodia.core.parsing.json_scan import scan_reply

_LABEL_MARKER = (
    r"\b(?:final\s+)?(?:answer|decision|label|choice|action|output|response)\b[\"']?\s*(?:[:：=]|is\b)"
)


def parse_label(text: str, labels: Sequence[str]) -> str | ParseFailure:
    """Which of ``labels`` a reply gave (case-insensitive), returned as spelled in ``labels``.

    Explicit forms win (``Answer: SPEAK``, a JSON string value, a line holding only the
    label), the last one in the reply; otherwise the last whole-word occurrence of any label.
    """
    if not labels:
        raise ValueError("parse_label needs at least one label")
    canonical = {label.lower(): label for label in labels}
    if len(canonical) != len(labels):
        raise ValueError(f"labels must differ ignoring case: {list(labels)}")
    scanned = scan_reply(text)
    if isinstance(scanned, ParseFailure):
        return scanned
    body, scan = scanned
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    word = rf"(?<![A-Za-z0-9_])(?P<label>{alternatives})(?![A-Za-z0-9_])"
    explicit: list[tuple[int, str]] = []
    for span in scan.spans:
        for value in _json_strings(span.value):
            if value.strip().lower() in canonical:
                explicit.append((span.end, value.strip().lower()))
    for pattern in (
        re.compile(rf"{_LABEL_MARKER}[\s\"'*_`\[(]*{word}", re.I),
        re.compile(rf"^[^\w\n]*{word}[^\w\n]*$", re.I | re.M),
    ):
        explicit.extend((m.start("label"), m.group("label").lower()) for m in pattern.finditer(body))
    if explicit:
        return canonical[max(explicit)[1]]
    mentions = [(m.start("label"), m.group("label").lower()) for m in re.finditer(word, body, re.I)]
    if not mentions:
        return ParseFailure(f"none of {', '.join(labels)} in the reply")
    return canonical[max(mentions)[1]]


def _json_strings(value: object) -> list[str]:
    """Every string in a JSON value (walked with a stack, not recursion; order does not matter)."""
    strings: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return strings


# ---------------------------------------------------------------------------------------------
