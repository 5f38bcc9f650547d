"""Upper bounds on the sizes a user can ask for, checked where a value is parsed.

A size is checked before anything is allocated for it, so a typo (``duration=1e9``,
``--fps 1e6``, ``procedural:seeds=0-100000000``) is an error naming the limit rather than
minutes of memory growth. The bounds are generous for real use:

=========================  =================  ===========================================
constant                   value              what it bounds
=========================  =================  ===========================================
``MAX_SEED``               2**32 - 1          a seed (numpy's seed range starts at 0)
``MAX_IMAGE_SIDE``         4096 pixels        the height or width of a panorama or frame
``MAX_STREAM_SECONDS``     4 hours            the duration of a procedural stream
``MAX_FPS``                60                 frames per 1-second stream chunk
``MAX_STEPS``              100,000            an exploration's primitive step budget
``MAX_SET_SIZE``           100,000            seeds in a set (``seeds=A-B``, ``--seeds``),
                                              items of an evaluation or a data set
``MAX_STREAM_AGENTS``      16                 agents sharing one stream (self-play)
``MAX_CONCURRENCY``        1024               requests in flight at once
=========================  =================  ===========================================

Settings objects check their sizes with :func:`check_positive` (finite and above zero) and
their counts with :func:`check_whole` (an integer, not a bool, at least a minimum), so every
``XConfig.field must be a positive number, got V`` and ``XConfig.field must be a whole number
>= N, got V`` message is worded alike.
"""

from __future__ import annotations

import math

from embodia.errors import EmbodiaError

MAX_SEED = 2**32 - 1
MAX_IMAGE_SIDE = 4096
MAX_STREAM_SECONDS = 4 * 3600
MAX_FPS = 60
MAX_STEPS = 100_000
MAX_SET_SIZE = 100_000
MAX_STREAM_AGENTS = 16
MAX_CONCURRENCY = 1024


def check_range(
    what: str, value: float, low: float, high: float, error: type[EmbodiaError] = EmbodiaError
) -> None:
    """Raise ``error`` naming ``what`` and the range unless ``low <= value <= high`` (NaN is out)."""
    if isinstance(value, bool) or not low <= value <= high:
        raise error(f"{what} must be in {_number(low)}..{_number(high)}, got {value!r}")


def check_seed(what: str, seed: int, error: type[EmbodiaError] = EmbodiaError) -> int:
    """``seed`` if it is an integer in ``0..MAX_SEED``; else ``error`` naming ``what``."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise error(f"{what} must be an integer, got {seed!r}")
    check_range(what, seed, 0, MAX_SEED, error)
    return seed


def check_image_size(what: str, height: int, width: int, error: type[EmbodiaError] = EmbodiaError) -> None:
    """Both sides of an image positive and at most ``MAX_IMAGE_SIDE`` pixels."""
    if not (0 < height <= MAX_IMAGE_SIDE and 0 < width <= MAX_IMAGE_SIDE):
        raise error(f"{what} must be 1..{MAX_IMAGE_SIDE} pixels a side, got {height}x{width}")


def check_positive_number(
    what: str, value: float, unit: str = "", error: type[Exception] = ValueError
) -> None:
    """Raise ``error`` naming ``what`` unless ``value`` is a finite number above zero.

    ``unit`` (``"metres"``) goes into the message: "... must be a positive number of metres".
    """
    if not (math.isfinite(value) and value > 0):
        of_unit = f" of {unit}" if unit else ""
        raise error(f"{what} must be a positive number{of_unit}, got {value}")


def check_positive(config: object, *names: str, error: type[Exception] = ValueError) -> None:
    """:func:`check_positive_number` on each named field of a settings object, in order.

    The message names the field as ``ConfigClass.field``.
    """
    for name in names:
        check_positive_number(f"{type(config).__name__}.{name}", getattr(config, name), error=error)


def check_whole(config: object, *names: str, minimum: int = 1, error: type[Exception] = EmbodiaError) -> None:
    """Raise ``error`` naming ``ConfigClass.field`` unless each named field of a settings object is
    an integer (``True`` is not a count) of at least ``minimum``."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise error(f"{type(config).__name__}.{name} must be a whole number >= {minimum}, got {value!r}")


def _number(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)):
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    return f"{value:g}"
