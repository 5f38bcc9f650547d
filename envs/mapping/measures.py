"""Coverage measures for active mapping: area, ratio, AUC, path length, collisions, steps.

Definitions (those of Active Neural SLAM: Chaplot et al., "Learning to Explore using Active
Neural SLAM", ICLR 2020):

- *explorable*: the simulator's ground-truth navigable island, every floor of it
  (``simulator.floor_maps(0.05)``), so one cell is 0.0025 m2; each floor's cells are matched
  against the agent's map of that floor (a map per floor, :func:`floor_of` says which);
- ``coverage_m2``: ``A_t = |observed_t ∩ explorable| * res²``, where a ground-truth cell is
  observed when the BEV cell holding its centre is explored (``BEVMap.explored``: any floor
  or obstacle evidence; the BEV grid is on the world lattice, so the two maps line up
  whatever their resolutions);
- ``coverage_ratio``: ``C_t = A_t / |explorable|``;
- ``coverage_auc``: ``(1/T) Σ_{t=1..T} C_t`` over a budget of ``T`` primitive steps. Steps
  not taken (the episode ended early) carry the last value, so the AUC "so far" is the AUC
  the episode would score if it ended now. ``C_0`` (the observation at reset) is not a term.

A step is one primitive action; a ``goto`` spends the steps of its path. Measures are
updated once per primitive step with a :class:`StepOutcome`; a step without a new
observation (the inside of a ``goto``, a rejected waypoint) passes ``bev=None`` and carries
the previous coverage. :class:`CoverageTracker` bundles the measures, keeps the per-step
curves (coverage ratio and area, metres travelled, decisions) and the trajectory that
:func:`recompute_coverage` replays.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from embodia.core.limits import check_positive_number
from embodia.errors import EmbodiaError
from embodia.perception.bev import BEVConfig, BEVMap
from embodia.sim.protocol import Pose, SceneSpec, Simulator, TopDownMap

if TYPE_CHECKING:
    from embodia.sim.scene import Region, Scene

logger = logging.getLogger(__name__)

COVERAGE_RESOLUTION = 0.05
"""Ground-truth cell size of the coverage measures, metres (ANS: 5 cm)."""
DEFAULT_BUDGETS: tuple[int, ...] = (500, 1000)
_SAME_FLOOR = 0.3
"""A region and a floor map whose heights differ by at most this are on one floor, metres."""
"""Step budgets of the literature: 500 (OccAnt, ObjectNav), 1000 (ANS, ANM)."""


# ---------------------------------------------------------------------- AUC arithmetic


def _check_budget(budget: int) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget < 1:
        raise ValueError(f"an AUC budget must be a positive whole number of steps, got {budget!r}")
    return int(budget)


def coverage_auc(curve: Sequence[float], budget: int, initial: float = 0.0) -> float:
    """``(1/T) Σ_{t=1..T} C_t`` with ``C_t = curve[t-1]``.

    Steps beyond the curve carry its last value (``initial`` when the curve is empty);
    values beyond the budget are not counted.
    """
    budget = _check_budget(budget)
    values = np.asarray(curve, dtype=np.float64)[:budget]
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError("a coverage curve must be a flat sequence of finite numbers")
    last = float(values[-1]) if len(values) else float(initial)
    return float((values.sum() + (budget - len(values)) * last) / budget)


def coverage_auc_over_distance(
    distances: Sequence[float], curve: Sequence[float], max_distance: float, initial: float = 0.0
) -> float:
    """Normalised area under coverage against metres travelled, over ``[0, max_distance]``.

    ``distances[t]`` is the cumulative distance after step ``t+1`` and ``curve[t]`` the
    coverage then; coverage is a step function of distance (``initial`` before the first
    step moves, the last value beyond the last step).
    """
    check_positive_number("max_distance", max_distance, unit="metres")
    d = np.asarray(distances, dtype=np.float64)
    c = np.asarray(curve, dtype=np.float64)
    if d.shape != c.shape or d.ndim != 1:
        raise ValueError(f"distances and curve must be flat and of one length, got {d.shape} and {c.shape}")
    if len(d) and (np.any(np.diff(d) < 0) or d[0] < 0):
        raise ValueError("distances must be cumulative: non-negative and non-decreasing")
    # Coverage c[t] holds from d[t] until d[t+1] (the last one until max_distance).
    starts = np.concatenate([[0.0], np.minimum(d, max_distance)])
    ends = np.concatenate([starts[1:], [max_distance]])
    values = np.concatenate([[initial], c])
    return float(np.sum(values * (ends - starts)) / max_distance)


# ---------------------------------------------------------------------- ground truth


class _FloorCells:
    """One floor's explorable cells and where they fall in a BEV map."""

    def __init__(self, topdown: TopDownMap) -> None:
        rows, cols = np.nonzero(topdown.navigable)
        self.topdown = topdown
        self.centres: NDArray[np.float64] = topdown.from_grid(rows, cols)
        self._grid_key: tuple[int, int, int, int, float] | None = None
        self._bev_cells: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]] | None = None

    def observed(self, bev: BEVMap) -> NDArray[np.bool_]:
        key = (bev.row0, bev.col0, *bev.shape, bev.config.resolution)
        if key != self._grid_key or self._bev_cells is None:
            # The BEV grid moved (it grew): map the fixed GT centres into it again.
            rows, cols = bev.to_grid(self.centres)
            inside = bev.inside(rows, cols)
            self._grid_key, self._bev_cells = key, (rows[inside], cols[inside], inside)
        rows, cols, inside = self._bev_cells
        out = np.zeros(len(self.centres), dtype=bool)
        out[inside] = bev.explored[rows, cols]
        return out


FloorBEVs = Mapping[int, BEVMap]
"""A map per floor, by floor index (the order of :meth:`Simulator.floor_maps`)."""


class ExplorableArea:
    """The ground-truth explorable cells, of every floor, and which of them the agent's maps
    have observed. A floor's cells are matched against that floor's map only; a single
    :class:`BEVMap` stands for the map of floor ``start_floor``."""

    def __init__(self, topdown: TopDownMap | Sequence[TopDownMap], start_floor: int = 0) -> None:
        maps = [topdown] if isinstance(topdown, TopDownMap) else list(topdown)
        self.floors = [_FloorCells(m) for m in maps]
        if not any(len(f.centres) for f in self.floors):
            raise EmbodiaError("the ground-truth top-down map has no navigable cell: nothing to explore")
        resolutions = {m.resolution for m in maps}
        if len(resolutions) != 1:
            raise ValueError(f"floor maps of different resolutions: {sorted(resolutions)}")
        self.start_floor = start_floor
        self.cell_area = maps[0].resolution ** 2
        self.heights = [m.floor_height for m in maps]

    @classmethod
    def of(cls, simulator: Simulator, resolution: float = COVERAGE_RESOLUTION) -> ExplorableArea:
        """Every floor of the simulator's scene, the agent's own as ``start_floor``."""
        maps = simulator.floor_maps(resolution)
        here = simulator.topdown(resolution).floor_height
        return cls(maps, int(np.argmin([abs(m.floor_height - here) for m in maps])))

    @property
    def topdown(self) -> TopDownMap:
        """The map of the start floor."""
        return self.floors[self.start_floor].topdown

    @property
    def cells(self) -> int:
        return sum(len(f.centres) for f in self.floors)

    @property
    def area_m2(self) -> float:
        return self.cells * self.cell_area

    def _maps(self, bev: BEVMap | FloorBEVs) -> FloorBEVs:
        return {self.start_floor: bev} if isinstance(bev, BEVMap) else bev

    def observed(self, bev: BEVMap | FloorBEVs) -> NDArray[np.bool_]:
        """Per explorable cell (floor after floor): whether its floor's map has explored the
        BEV cell holding its centre."""
        maps = self._maps(bev)
        parts = [
            floor.observed(maps[index]) if index in maps else np.zeros(len(floor.centres), dtype=bool)
            for index, floor in enumerate(self.floors)
        ]
        return np.concatenate(parts)

    def region_cells(self, region: Region) -> NDArray[np.bool_]:
        """Per explorable cell (floor after floor): whether it lies in ``region``'s outline,
        on the floor at the region's height."""
        parts = []
        for floor in self.floors:
            on_floor = abs(floor.topdown.floor_height - region.floor_height) <= _SAME_FLOOR
            inside = region.contains(floor.centres) if on_floor else np.zeros(len(floor.centres), dtype=bool)
            parts.append(inside)
        return np.concatenate(parts)

    def covered_cells(self, bev: BEVMap | FloorBEVs) -> int:
        maps = self._maps(bev)
        return sum(
            int(floor.observed(maps[index]).sum()) for index, floor in enumerate(self.floors) if index in maps
        )


def floor_of(heights: Sequence[float], y: float, climb: float) -> int:
    """The floor a point at height ``y`` is on: the highest floor at or below it, within
    ``climb`` (the navigation grid's rule: a flight of stairs belongs to the floor it starts
    from until its top steps)."""
    index = int(np.searchsorted(np.asarray(heights) - climb, y, side="right")) - 1
    return min(max(index, 0), len(heights) - 1)


# ---------------------------------------------------------------------- measures


@dataclass(frozen=True)
class StepOutcome:
    """One primitive step as the measures see it."""

    pose: Pose
    """Agent pose after the step."""
    collided: bool = False
    distance: float = 0.0
    """Metres travelled during the step (horizontal)."""
    bev: BEVMap | FloorBEVs | None = None
    """The map after this step's observation (a map per floor where there are several);
    None when the step observed nothing new."""


@dataclass(frozen=True)
class EpisodeStart:
    """What measures are reset with: the ground truth and the state after the first view."""

    explorable: ExplorableArea
    pose: Pose
    bev: BEVMap | FloorBEVs | None = None
    """The map after the observation at reset (None: nothing observed yet)."""


class Measure(ABC):
    """habitat-lab's Measure: ``uuid``, ``reset_metric``, ``update_metric``, ``get_metric``."""

    uuid: str

    @abstractmethod
    def reset_metric(self, start: EpisodeStart) -> None: ...

    @abstractmethod
    def update_metric(self, step: StepOutcome) -> None: ...

    @abstractmethod
    def get_metric(self) -> float: ...


class CoverageM2(Measure):
    """Observed explorable area, m2."""

    uuid = "coverage_m2"

    def __init__(self) -> None:
        self._explorable: ExplorableArea | None = None
        self.covered_cells = 0

    @property
    def explorable(self) -> ExplorableArea:
        if self._explorable is None:
            raise EmbodiaError(f"measure {self.uuid}: call reset_metric before using it")
        return self._explorable

    def reset_metric(self, start: EpisodeStart) -> None:
        self._explorable = start.explorable
        self.covered_cells = 0 if start.bev is None else start.explorable.covered_cells(start.bev)

    def update_metric(self, step: StepOutcome) -> None:
        if step.bev is not None:
            self.covered_cells = self.explorable.covered_cells(step.bev)

    def get_metric(self) -> float:
        return self.covered_cells * self.explorable.cell_area


class CoverageRatio(Measure):
    """Observed share of the explorable area, in [0, 1]; reads :class:`CoverageM2`."""

    uuid = "coverage_ratio"

    def __init__(self, coverage: CoverageM2) -> None:
        self.coverage = coverage

    def reset_metric(self, start: EpisodeStart) -> None:
        """Nothing of its own: :class:`CoverageM2` holds the state (reset it first)."""

    def update_metric(self, step: StepOutcome) -> None:
        """Nothing of its own: :class:`CoverageM2` holds the state (update it first)."""

    def get_metric(self) -> float:
        return self.coverage.covered_cells / self.coverage.explorable.cells


class CoverageAUC(Measure):
    """Mean coverage ratio over a step budget (see :func:`coverage_auc`)."""

    uuid = "coverage_auc"

    def __init__(self, ratio: CoverageRatio, budget: int = DEFAULT_BUDGETS[0]) -> None:
        self.ratio = ratio
        self.budget = _check_budget(budget)
        self.initial = 0.0
        self.curve: list[float] = []

    def reset_metric(self, start: EpisodeStart) -> None:
        self.initial = self.ratio.get_metric()
        self.curve = []

    def update_metric(self, step: StepOutcome) -> None:
        self.curve.append(self.ratio.get_metric())

    def get_metric(self) -> float:
        return coverage_auc(self.curve, self.budget, self.initial)


class RegionCoverage(Measure):
    """Observed share of one room's explorable cells, step by step (``curve[t-1]`` after step
    t), e.g. to count the steps until an instructed room is covered."""

    uuid = "region_coverage"

    def __init__(self, region: Region) -> None:
        self.region = region
        self._explorable: ExplorableArea | None = None
        self._cells: NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.initial = 0.0
        self.curve: list[float] = []

    def _share(self, bev: BEVMap | FloorBEVs) -> float:
        assert self._explorable is not None
        return float(self._explorable.observed(bev)[self._cells].mean())

    def reset_metric(self, start: EpisodeStart) -> None:
        self._explorable = start.explorable
        self._cells = start.explorable.region_cells(self.region)
        if not self._cells.any():
            raise EmbodiaError(
                f"the {self.region.kind} at floor height {self.region.floor_height:g} "
                "holds no explorable cell"
            )
        self.initial = 0.0 if start.bev is None else self._share(start.bev)
        self.curve = []

    def update_metric(self, step: StepOutcome) -> None:
        last = self.curve[-1] if self.curve else self.initial
        self.curve.append(last if step.bev is None else self._share(step.bev))

    def get_metric(self) -> float:
        return self.curve[-1] if self.curve else self.initial

    def steps_until(self, share: float) -> int | None:
        """The first step after which the observed share is at least ``share`` (0 when it
        was at reset; None: not within the steps taken)."""
        if self.initial >= share:
            return 0
        reached = np.nonzero(np.asarray(self.curve) >= share)[0]
        return int(reached[0]) + 1 if len(reached) else None


class PathLength(Measure):
    """Metres travelled."""

    uuid = "path_length"

    def __init__(self) -> None:
        self.total = 0.0

    def reset_metric(self, start: EpisodeStart) -> None:
        self.total = 0.0

    def update_metric(self, step: StepOutcome) -> None:
        if not (math.isfinite(step.distance) and step.distance >= 0):
            raise ValueError(f"a step's distance must be a non-negative number, got {step.distance}")
        self.total += step.distance

    def get_metric(self) -> float:
        return self.total


class _StepCount(Measure):
    """Steps of the episode that :meth:`counts`, from 0 at each reset."""

    def __init__(self) -> None:
        self.count = 0

    @abstractmethod
    def counts(self, step: StepOutcome) -> bool: ...

    def reset_metric(self, start: EpisodeStart) -> None:
        self.count = 0

    def update_metric(self, step: StepOutcome) -> None:
        self.count += int(self.counts(step))

    def get_metric(self) -> int:
        return self.count


class Collisions(_StepCount):
    """Steps whose ``move_forward`` was stopped by geometry."""

    uuid = "collisions"

    def counts(self, step: StepOutcome) -> bool:
        return step.collided


class Steps(_StepCount):
    """Primitive steps taken."""

    uuid = "steps"

    def counts(self, step: StepOutcome) -> bool:
        return True


# ---------------------------------------------------------------------- tracker


@dataclass(frozen=True)
class TrajectoryStep:
    """A pose of the run and whether a panorama was integrated there."""

    pose: Pose
    observed: bool


class CoverageTracker:
    """The mapping measures of one episode plus their per-step curves.

    ``reset`` after the observation at reset, ``update`` after every primitive step. The
    ``trajectory`` starts with the reset pose (observed when a map was given) and has one
    entry per step after it; ``curve[t-1]`` is ``C_t``.
    """

    def __init__(self, budget: int = DEFAULT_BUDGETS[0], resolution: float = COVERAGE_RESOLUTION) -> None:
        check_positive_number("coverage resolution", resolution, unit="metres")
        self.resolution = resolution
        self.coverage_m2 = CoverageM2()
        self.coverage_ratio = CoverageRatio(self.coverage_m2)
        self.coverage_auc = CoverageAUC(self.coverage_ratio, budget)
        self.path_length = PathLength()
        self.collisions = Collisions()
        self.steps = Steps()
        # Update order matters: ratio reads area, AUC reads ratio.
        self.measures: dict[str, Measure] = {
            m.uuid: m
            for m in (
                self.coverage_m2,
                self.coverage_ratio,
                self.coverage_auc,
                self.path_length,
                self.collisions,
                self.steps,
            )
        }
        self._built_in = frozenset(self.measures)
        self._explorable: ExplorableArea | None = None
        self.area_curve: list[float] = []
        self.distance_curve: list[float] = []
        self.decisions: list[int] = []
        self.trajectory: list[TrajectoryStep] = []

    @property
    def budget(self) -> int:
        return self.coverage_auc.budget

    @property
    def explorable(self) -> ExplorableArea:
        if self._explorable is None:
            raise EmbodiaError("the coverage tracker has not been reset")
        return self._explorable

    @property
    def curve(self) -> list[float]:
        """Coverage ratio after steps 1..t."""
        return list(self.coverage_auc.curve)

    @property
    def initial_ratio(self) -> float:
        """Coverage ratio after the observation at reset (``C_0``)."""
        return self.coverage_auc.initial

    @property
    def fully_covered(self) -> bool:
        return self.coverage_m2.covered_cells == self.explorable.cells

    def reset(
        self,
        ground_truth: Simulator | TopDownMap | ExplorableArea,
        pose: Pose,
        bev: BEVMap | FloorBEVs | None,
    ) -> None:
        """Start an episode; ``bev`` holds the observation made at reset, if any. The ground
        truth is a simulator (every floor of its scene), one floor's map, or an area."""
        if isinstance(ground_truth, ExplorableArea):
            explorable = ground_truth
        elif isinstance(ground_truth, TopDownMap):
            explorable = ExplorableArea(ground_truth)
        else:
            explorable = ExplorableArea.of(ground_truth, self.resolution)
        resolution = math.sqrt(explorable.cell_area)
        if not math.isclose(resolution, self.resolution):
            raise ValueError(
                f"the ground-truth map has {resolution:g} m cells, the tracker expects {self.resolution} m"
            )
        self._explorable = explorable
        self.measures = {uuid: m for uuid, m in self.measures.items() if uuid in self._built_in}
        start = EpisodeStart(self._explorable, pose, bev)
        for measure in self.measures.values():
            measure.reset_metric(start)
        self.area_curve, self.distance_curve, self.decisions = [], [], []
        self.trajectory = [TrajectoryStep(pose, bev is not None)]

    def update(self, step: StepOutcome) -> None:
        """Account one primitive step."""
        if self._explorable is None:
            raise EmbodiaError("the coverage tracker has not been reset: call reset() before update()")
        for measure in self.measures.values():
            measure.update_metric(step)
        self.area_curve.append(self.coverage_m2.get_metric())
        self.distance_curve.append(self.path_length.get_metric())
        self.trajectory.append(TrajectoryStep(step.pose, step.bev is not None))

    def track(self, measure: Measure, bev: BEVMap | FloorBEVs | None) -> None:
        """Add a measure to the episode under way (updated after the built-in ones, dropped at
        the next reset); it starts from the episode's reset pose and the map ``bev`` as it is
        now. Call it right after the reset: steps already taken are not replayed."""
        if self._explorable is None:
            raise EmbodiaError("the coverage tracker has not been reset: track measures after reset()")
        if measure.uuid in self.measures:
            raise ValueError(f"a measure {measure.uuid!r} is already tracked")
        measure.reset_metric(EpisodeStart(self._explorable, self.trajectory[0].pose, bev))
        self.measures[measure.uuid] = measure

    def end_decision(self) -> None:
        """Mark that the agent's current decision (a primitive action or a goto) ended."""
        self.decisions.append(self.steps.count)

    def metrics(self) -> dict[str, float]:
        """Every measure by uuid, plus ``explorable_m2``."""
        values = {uuid: measure.get_metric() for uuid, measure in self.measures.items()}
        values["explorable_m2"] = self.explorable.area_m2
        return values

    def auc(self, budget: int | None = None) -> float:
        """Coverage AUC over ``budget`` steps (default: the tracker's budget)."""
        return coverage_auc(self.coverage_auc.curve, budget or self.budget, self.initial_ratio)

    def auc_over_distance(self, max_distance: float) -> float:
        return coverage_auc_over_distance(
            self.distance_curve, self.coverage_auc.curve, max_distance, self.initial_ratio
        )

    def decision_curve(self) -> list[float]:
        """Coverage ratio at the end of each decision (the x-axis of VLM-call budgets)."""
        curve = self.coverage_auc.curve
        return [curve[s - 1] if s > 0 else self.initial_ratio for s in self.decisions]

    def summary(self, budgets: Sequence[int] = DEFAULT_BUDGETS) -> dict[str, float]:
        """Final metrics plus ``coverage_auc_<T>`` for each budget (for run records)."""
        out = self.metrics()
        for budget in budgets:
            out[f"coverage_auc_{_check_budget(budget)}"] = self.auc(budget)
        return out


# ---------------------------------------------------------------------- replay


def recompute_coverage(
    simulator: Simulator,
    scene: SceneSpec | Scene,
    trajectory: Sequence[TrajectoryStep],
    panorama_size: tuple[int, int],
    bev_config: BEVConfig | None = None,
    resolution: float = COVERAGE_RESOLUTION,
) -> list[float]:
    """Replay a saved trajectory and return its coverage curve (``C_1..C_t``).

    The panorama is re-rendered and integrated at every observed pose, in order, into a
    fresh map of the pose's floor, and coverage is measured against every floor's ground
    truth, as the tracker of the original run did. The agent stays at the first pose.
    """
    if not trajectory:
        raise ValueError("recompute_coverage needs a trajectory with at least the reset pose")
    height, width = panorama_size
    if height < 1 or width < 1:
        raise ValueError(f"panorama size must be positive, got {height}x{width}")
    config = bev_config or BEVConfig.for_agent(simulator.config)
    first = trajectory[0]
    simulator.reset(scene, first.pose)
    tracker = CoverageTracker(budget=max(1, len(trajectory) - 1), resolution=resolution)
    explorable = ExplorableArea.of(simulator, resolution)
    bevs: dict[int, BEVMap] = {}

    def observe(pose: Pose) -> dict[int, BEVMap]:
        floor = floor_of(explorable.heights, pose.position[1], simulator.config.max_climb)
        if floor not in bevs:
            bevs[floor] = BEVMap(simulator.categories, config)
        bevs[floor].integrate(simulator.panorama_at(pose, height, width))
        return bevs

    tracker.reset(explorable, first.pose, observe(first.pose) if first.observed else None)
    for step in trajectory[1:]:
        tracker.update(StepOutcome(step.pose, bev=observe(step.pose) if step.observed else None))
    final = tracker.coverage_ratio.get_metric()
    logger.debug("replayed %d steps: final coverage %.4f", len(trajectory) - 1, final)
    return tracker.curve
