"""The human marker corpus: verbal uncertainty markers ("highly likely", "we doubt", ...) with the
probabilities people read in them, from published surveys and institutional yardsticks.

The corpus ships with embodia as ``human_markers.json`` (versioned). Each marker lists its
aliases, each survey's statistics (median; where the survey's answers are public, mean, standard
deviation and a method-of-moments Beta fit), the institutional ranges that define it, and, for a
marker no survey asked about ("possible", "maybe"), the surveyed marker whose level it borrows and
why. Every source carries its citation.

**The human prior** of a marker (:meth:`HumanMarker.prior`, a probability in [0, 1]) is the median
of the surveys' medians; where no survey asked, the median of the yardstick ranges' midpoints; a
proxy marker takes its proxy's. **The human distribution** is the Beta fit of the survey with the
most respondents, and its interquartile range is that Beta's (:meth:`HumanMarker.iqr`).
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodia.errors import EmbodiaError

CORPUS = Path(__file__).with_name("human_markers.json")
CORPUS_VERSION = 1


class UncertaintyError(EmbodiaError, ValueError):
    """A marker corpus, marker or uncertainty setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class SurveyLevel:
    """One survey's reading of a marker, in percent."""

    source: str
    median: float
    mean: float | None = None
    sd: float | None = None
    beta: tuple[float, float] | None = None


@dataclass(frozen=True)
class HumanMarker:
    marker: str
    aliases: tuple[str, ...]
    surveys: tuple[SurveyLevel, ...]
    yardsticks: Mapping[str, tuple[float, float]]
    proxy: str | None = None
    proxy_why: str = ""


@dataclass(frozen=True)
class MarkerCorpus:
    """The corpus (module docstring): ``markers`` by canonical name, ``sources`` by id."""

    version: int
    sources: Mapping[str, Mapping[str, Any]]
    markers: Mapping[str, HumanMarker]
    _spellings: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spellings = {}
        for marker in self.markers.values():
            for spelling in (marker.marker, *marker.aliases):
                spellings[spelling] = marker.marker
        object.__setattr__(self, "_spellings", spellings)  # frozen: set once, here

    def _own_prior(self, marker: HumanMarker) -> float | None:
        if marker.surveys:
            return statistics.median(level.median for level in marker.surveys) / 100
        if marker.yardsticks:
            return statistics.median((lo + hi) / 2 for lo, hi in marker.yardsticks.values()) / 100
        return None

    def prior(self, name: str) -> float:
        """The human prior of marker ``name`` (module docstring), a probability."""
        marker = self.marker(name)
        own = self._own_prior(marker)
        if own is not None:
            return own
        assert marker.proxy is not None  # load_corpus checks that every marker has a level
        return self.prior(marker.proxy)

    def distribution(self, name: str) -> tuple[float, float] | None:
        """The Beta (alpha, beta) of the survey with the most respondents that fitted one (a
        proxy's for a proxy marker); None where no survey did."""
        marker = self.marker(name)
        fitted = [level for level in marker.surveys if level.beta is not None]
        if not fitted:
            return self.distribution(marker.proxy) if marker.proxy else None
        best = max(fitted, key=lambda level: int(self.sources[level.source].get("respondents") or 0))
        return best.beta

    def iqr(self, name: str) -> tuple[float, float] | None:
        """The interquartile range of the human distribution, as probabilities."""
        from scipy.stats import beta

        fitted = self.distribution(name)
        if fitted is None:
            return None
        low, high = beta.ppf([0.25, 0.75], *fitted)
        return float(low), float(high)

    def marker(self, name: str) -> HumanMarker:
        """The marker called ``name`` or one of its aliases (any case)."""
        canonical = self._spellings.get(name) or self._spellings.get(name.strip().lower())
        if canonical is None:
            raise UncertaintyError(f"{name!r} is not a marker of the corpus (version {self.version})")
        return self.markers[canonical]

    def aliases(self) -> dict[str, str]:
        """Every spelling (canonical names and aliases, lower case) -> its canonical marker."""
        return dict(self._spellings)

    def by_prior(self) -> list[str]:
        """The canonical markers from the least to the most probable by their human priors (the
        order a monotone fit keeps)."""
        return sorted(self.markers, key=lambda name: (self.prior(name), name))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise UncertaintyError(f"{where} must be a percentage in [0, 100], got {value!r}")
    return float(value)


def _survey(source: str, value: Any, where: str) -> SurveyLevel:
    if not isinstance(value, Mapping) or "median" not in value:
        raise UncertaintyError(f"{where} needs at least a median")
    beta = value.get("beta")
    if beta is not None and (
        not isinstance(beta, list)
        or len(beta) != 2
        or not all(isinstance(b, int | float) and b > 0 for b in beta)
    ):
        raise UncertaintyError(f"{where}.beta must be two positive numbers, got {beta!r}")
    return SurveyLevel(
        source,
        _number(value["median"], f"{where}.median"),
        None if value.get("mean") is None else _number(value["mean"], f"{where}.mean"),
        None if value.get("sd") is None else float(value["sd"]),
        None if beta is None else (float(beta[0]), float(beta[1])),
    )


def parse_corpus(document: Any, where: str = "the marker corpus") -> MarkerCorpus:
    """A corpus from its JSON document, every field checked (an error names the first bad one)."""
    if not isinstance(document, Mapping) or document.get("version") != CORPUS_VERSION:
        found = document.get("version") if isinstance(document, Mapping) else None
        raise UncertaintyError(f"{where}: expected version {CORPUS_VERSION}, found {found!r}")
    sources = document.get("sources")
    if not isinstance(sources, Mapping) or not all(
        isinstance(s, Mapping) and str(s.get("citation", "")).strip() for s in sources.values()
    ):
        raise UncertaintyError(f"{where}: every source needs a citation")
    markers: dict[str, HumanMarker] = {}
    for k, entry in enumerate(document.get("markers") or []):
        name = str(entry.get("marker", "")).strip().lower() if isinstance(entry, Mapping) else ""
        at = f"{where} marker {k + 1} ({name or '?'})"
        if not name:
            raise UncertaintyError(f"{at}: the marker has no name")
        surveys = []
        for source, value in (entry.get("surveys") or {}).items():
            if source not in sources:
                raise UncertaintyError(f"{at}: survey {source!r} is not among the sources")
            surveys.append(_survey(source, value, f"{at} {source}"))
        yardsticks = {}
        for body, bounds in (entry.get("yardsticks") or {}).items():
            low, high = (_number(b, f"{at} yardstick {body}") for b in bounds)
            if low > high:
                raise UncertaintyError(f"{at}: yardstick {body} runs from {low} down to {high}")
            yardsticks[str(body)] = (low, high)
        proxy = entry.get("proxy") or {}
        markers[name] = HumanMarker(
            name,
            tuple(str(a).strip().lower() for a in entry.get("aliases") or ()),
            tuple(surveys),
            yardsticks,
            str(proxy["marker"]).lower() if proxy else None,
            str(proxy.get("why", "")) if proxy else "",
        )
    if not markers:
        raise UncertaintyError(f"{where} holds no markers")
    seen: dict[str, str] = {}
    for marker in markers.values():
        if not (marker.surveys or marker.yardsticks or marker.proxy in markers):
            raise UncertaintyError(f"{where}: {marker.marker!r} has no survey, yardstick or known proxy")
        for spelling in (marker.marker, *marker.aliases):
            if seen.setdefault(spelling, marker.marker) != marker.marker:
                raise UncertaintyError(
                    f"{where}: {spelling!r} names both {seen[spelling]!r} and {marker.marker!r}"
                )
    return MarkerCorpus(int(document["version"]), dict(sources), markers)


@functools.cache
def load_corpus(path: Path | str = CORPUS) -> MarkerCorpus:
    """The corpus in ``path`` (default: the one shipped with embodia)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UncertaintyError(f"cannot read the marker corpus {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UncertaintyError(f"the marker corpus {path} is not JSON: {exc}") from None
    return parse_corpus(document, str(path))
