"""The one type every reply parser returns when a reply cannot be used."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParseFailure:
    """Why a reply could not be used, as one line fit to show the model."""

    reason: str
