"""Reasoning blocks (``<think>``/``<thinking>``) taken out of a reply before it is read."""

from __future__ import annotations

import collections
import re

_THINK_OPENER = re.compile(r"<(think|thinking)>", re.I)
_THINK_CLOSER = {name: re.compile(rf"</{name}\s*+>", re.I) for name in ("think", "thinking")}
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*+>", re.I)


def _without_think_blocks(text: str) -> str:
    """``text`` without its closed ``<think>...</think>`` blocks: each opening tag ends at the first
    closing tag of the same name after it; an opening tag with none stays.

    Linear: the text after a block is searched from the block's end, and once no closing tag of
    a name is left, later opening tags of that name are not searched from (a lazy
    ``<think>.*?</think>`` would rescan to the end from each of 100k unclosed openers).
    """
    pieces: list[str] = []
    kept_from = position = 0
    unclosed: set[str] = set()  # names with no closing tag after ``position``
    while (opener := _THINK_OPENER.search(text, position)) is not None:
        name = opener.group(1).lower()
        closer = None if name in unclosed else _THINK_CLOSER[name].search(text, opener.end())
        if closer is None:
            unclosed.add(name)
            position = opener.end()
            continue
        pieces.append(text[kept_from : opener.start()])
        kept_from = position = closer.end()
    pieces.append(text[kept_from:])
    return "".join(pieces)


def strip_thinking(text: str) -> str:
    """The reply without its reasoning blocks, stripped of surrounding whitespace.

    Removes closed ``<think>...</think>`` (or ``<thinking>``) blocks, everything up to a
    closing tag whose opening tag was part of the prompt, and an unclosed block running to
    the end of the reply (a reply cut off while thinking has no answer).
    """
    rest = _without_think_blocks(text)
    last_close = collections.deque(_THINK_CLOSE.finditer(rest), maxlen=1)
    if last_close:
        rest = rest[last_close[0].end() :]
    opening = _THINK_OPENER.search(rest)
    if opening:
        rest = rest[: opening.start()]
    return rest.strip()


def empty_reason(original: str) -> str:
    """Why a reply with nothing left after :func:`strip_thinking` cannot be used."""
    if original.strip():
        return "the reply has only a <think> block and no answer after it"
    return "empty reply"
