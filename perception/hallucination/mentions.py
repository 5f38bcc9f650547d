"""Object mentions in a caption: where they are (characters and tokens) and whether the scene
holds them.

A detector scores *mentions*, not words: "a red cube" is one object (its CHAIR key is
``("red", "cube")``) written over several tokens. Each mention keeps its character span in
the caption; :func:`token_spans` turns those into the caption's token positions.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from embodia.errors import EmbodiaError


class HallucinationError(EmbodiaError, ValueError):
    """Input a hallucination detector or measure cannot use; the message names it."""


@dataclass(frozen=True)
class Mention:
    """One object mentioned in a caption."""

    text: str
    """The words that mention it ("red cube")."""
    start: int
    """Its first character in the caption."""
    end: int
    """One past its last character."""
    key: Hashable
    """What object it names, comparable with the scene's ground truth (a CHAIR class)."""
    hallucinated: bool | None = None
    """Whether the scene lacks it (None: not labelled)."""

    def labelled(self, hallucinated: bool) -> Mention:
        return replace(self, hallucinated=hallucinated)


def token_spans(offsets: Sequence[tuple[int, int]], mentions: Sequence[Mention]) -> list[list[int]]:
    """For each mention, the indices of the caption tokens that overlap its characters.

    ``offsets`` are the caption's tokens as (start, end) character spans, as a fast
    tokenizer's ``offset_mapping`` gives them. A token carrying the space before a word
    (byte-level BPE's " red") overlaps the word and counts. A mention no token overlaps is an
    error: the offsets are not those of this caption.
    """
    spans = []
    for mention in mentions:
        span = [i for i, (start, end) in enumerate(offsets) if start < mention.end and end > mention.start]
        if not span:
            raise HallucinationError(
                f"no caption token covers the mention {mention.text!r} at characters "
                f"{mention.start}-{mention.end}: the token offsets belong to another text"
            )
        spans.append(span)
    return spans


def repeated(mentions: Sequence[Mention]) -> list[bool]:
    """Whether each mention names an object the caption already mentioned."""
    seen: set[Hashable] = set()
    out = []
    for mention in mentions:
        out.append(mention.key in seen)
        seen.add(mention.key)
    return out
