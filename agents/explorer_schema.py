"""The explorer's data, as TypedDicts told apart by one key, so a type checker narrows them:

- :data:`Choice` (``kind``, then ``by``): what a decision's ``select`` settled on; written to the
  decision's record in ``episodes.jsonl`` as it is (a VLM choice's ``attempts`` beside it);
- :data:`ExplorerEvent` (``kind``): the log of env actions and region updates in the state, which
  a resume replays;
- :data:`ExplorerProgress` (``event``): the ``custom`` stream events a run emits (``observe``,
  ``token``, ``select``, ``navigate``), which the CLI and the runner read.

They are plain dicts at run time, so records and checkpoints hold exactly what they held before.
"""

# No ``from __future__ import annotations``: TypedDict tells NotRequired keys apart only from
# evaluated annotations (``__optional_keys__``).
from typing import Any, Literal, NotRequired, TypedDict


class Candidate(TypedDict):
    """A waypoint candidate as the state keeps it (rounded, so it checkpoints small)."""

    index: int
    row: int
    col: int
    point: list[float]
    gain_m2: float
    distance: float
    region: int
    """The region it lies in; -1 for none."""


# ---------------------------------------------------------------------- choices
# What ``select`` decided, told apart by ``kind`` (and ``by``); written to each decision's
# record as it is (a VLM choice's ``attempts`` go beside it).


class HeuristicChoice(TypedDict):
    """The informative candidate with the best score (gain, distance, bonuses)."""

    kind: Literal["pixel"]
    row: int
    col: int
    index: int
    score: float
    by: Literal["heuristic"]


class AttemptRecord(TypedDict):
    """One reply of the VLM in a decision."""

    reply: str
    failure: str | None
    """Why the reply could not be used; None if it could."""
    tool_result: str | None
    """What a tool call it made answered (the model was asked again)."""
    latency_s: float
    reply_chars: NotRequired[int]
    """Only when the reply was cut to ``ask``'s ``max_reply_chars``: its full length."""
    calls: NotRequired[list[dict[str, Any]]]
    """The reply's native tool calls: each call's id, name and arguments, with its
    ``result``, or its ``error`` (an unreadable call, arguments against the schema)."""


class VLMChoice(TypedDict):
    """The candidate the VLM chose, or the best-gain one when it did not (``fallback``)."""

    kind: Literal["pixel"]
    row: int
    col: int
    index: int
    by: Literal["vlm"]
    fallback: bool
    prompt: str
    tool_calls: int
    tool_errors: int
    attempts: list[AttemptRecord]


class PointChoice(TypedDict):
    """A floor point the panorama need not show: an open region's nearest frontier
    (``backtrack``, ``to`` the region's tree node), the map's nearest one (``frontier``), the
    floor beside an object the instruction asks for, or one of a room that shares its open
    plan, in sight of it (``instruction``)."""

    kind: Literal["point"]
    point: list[float]
    by: Literal["backtrack", "frontier", "instruction"]
    to: NotRequired[str]


class StopChoice(TypedDict):
    """Nothing is left to explore."""

    kind: Literal["stop"]
    by: Literal["done"]


Choice = HeuristicChoice | VLMChoice | PointChoice | StopChoice


# ---------------------------------------------------------------------- the event log
# What a resume replays, in order, told apart by ``kind``.


class PixelEvent(TypedDict):
    """The env walked to a panorama pixel (``env.step``)."""

    kind: Literal["pixel"]
    row: int
    col: int


class PointEvent(TypedDict):
    """The env walked to a floor point (``env.step_to_point``)."""

    kind: Literal["point"]
    point: list[float]


class UpdateEvent(TypedDict):
    """The region tracker took in the map."""

    kind: Literal["update"]


EnvAction = PixelEvent | PointEvent
ExplorerEvent = PixelEvent | PointEvent | UpdateEvent


# ---------------------------------------------------------------------- progress
# The ``custom`` stream events a run emits, told apart by ``event``.


class ObserveProgress(TypedDict):
    """A decision starts (``decision`` is its number, as in the records)."""

    event: Literal["observe"]
    decision: int
    steps: int
    coverage_ratio: float
    pose: list[float]
    """[x, y, z, yaw]."""


class TokenProgress(TypedDict):
    """A piece of the VLM's reply as it streams in."""

    event: Literal["token"]
    decision: int
    attempt: int
    text: str


class SelectProgress(TypedDict):
    """The VLM's decision: the candidate it settled on and all its replies."""

    event: Literal["select"]
    decision: int
    index: int
    fallback: bool
    replies: list[str]
    tool_errors: int


class NavigateProgress(TypedDict):
    """A decision's walk is done."""

    event: Literal["navigate"]
    decision: int
    steps: int
    coverage_ratio: float


ExplorerProgress = ObserveProgress | TokenProgress | SelectProgress | NavigateProgress
