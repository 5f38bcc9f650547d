"""Decoding JSON a model wrote without letting it crash the reader: Python's decoders recurse
per level of nesting (RecursionError near the interpreter's limit) and refuse numbers of more
than 4,300 digits (ValueError), and a model repeating itself writes both."""

from __future__ import annotations

import enum
import json

MAX_JSON_DEPTH = 100
"""Deepest nesting of brackets a reply's JSON may have. Deeper replies (runaway brackets) fail
with a clear reason before any decoder sees them: Python's decoders recurse per level."""


class Unreadable(enum.Enum):
    """Why :func:`load_bounded` returned no value."""

    NOT_JSON = "not JSON"
    TOO_DEEP = "nested too deep"


def nested_deeper_than(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a decoded value nests lists/dicts more than ``limit`` deep (walked without recursion)."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def too_deep(value: object, text: str) -> bool:
    """Whether ``value``, decoded from ``text``, nests deeper than :data:`MAX_JSON_DEPTH`. The
    count of brackets in the text bounds the depth, so the common small reply is not walked."""
    return text.count("[") + text.count("{") > MAX_JSON_DEPTH and nested_deeper_than(value)


def load_bounded(text: str, *, strict: bool = True) -> object:
    """``json.loads(text, strict=strict)``, or :class:`Unreadable` saying why there is no
    value; never raises. ``strict=False`` takes control characters (a raw tab or newline)
    inside strings, which models write and some grammar engines let through."""
    try:
        value = json.loads(text, strict=strict)
    except ValueError:  # not JSON, or a number of more than 4,300 digits
        return Unreadable.NOT_JSON
    except RecursionError:  # the C decoder gives up near the interpreter's recursion limit
        return Unreadable.TOO_DEEP
    return Unreadable.TOO_DEEP if too_deep(value, text) else value
