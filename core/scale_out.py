"""Running a run's units of work in this process or on a Ray cluster, with workers that may die.

A run (an evaluation, a rollout collection) is a list of **units**: a scene and seed, a
benchmark instance, a clip, an item, a group of rollouts. Each unit is pure: its result is a
function of the unit and the run's settings, so it is the same wherever it runs. A
:class:`WorkerPool` runs units on the backend a :class:`Backend` names:

- ``local`` (the default): in this process, one unit after another (or ``concurrency`` at a
  time on threads, for a policy behind a server), with the worker made once.
- ``ray``: on Ray actors (PyPI ``ray``, the ``[ray]`` extra), ``num_workers`` of them, each
  holding ``num_cpus`` / ``num_gpus``; an actor makes its worker once (loads the policy)
  and then runs the units sent to it. ``address`` picks the cluster: none starts a local Ray
  on this machine, ``auto`` joins the cluster this machine is part of, ``ray://HOST:PORT``
  connects through the Ray client.

The pool hands each result back to the driver through ``on_result`` as it arrives, so the
runner writes its record at once (one per unit, in its run folder, the same file whichever
backend ran it) and a resume on either backend asks only for the units without one.

Faults, on Ray:

- A worker process that dies mid-unit (killed, out of memory, its node lost) has the unit
  sent again to a live worker (a new actor replaces the dead one). A unit is in flight on one
  worker at a time and its result is taken once, so it is never counted twice and never lost;
  after ``max_attempts`` deaths running the same unit, it is recorded as failed ("its worker
  died N times") rather than tried forever.
- A unit whose own input is bad (a scene file that does not load) raises :class:`UnitFailed`
  in the worker: it is recorded as failed with that error (``on_failure``), not retried, and
  the run goes on. The same holds locally.
- Any other error raised by a unit (a policy server that refuses requests, a prompt over the
  model's context) ends the run, as it does locally: the records written so far stay.
- A worker that cannot be made (the policy does not load) ends the run with its error.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import socket
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import urlsplit

from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)

BackendKind = Literal["local", "ray"]
BACKENDS: tuple[BackendKind, ...] = ("local", "ray")
DEFAULT_MAX_ATTEMPTS = 3
"""Worker deaths a unit may see before it is recorded as failed."""
READY_PATIENCE_S = 60.0
"""How long a worker may take to start before the wait is reported (it goes on waiting)."""
CONNECT_TIMEOUT_S = 5.0
"""How long the reachability check of an ``--address`` waits for a TCP connection."""

PayloadT = TypeVar("PayloadT")
ResultT = TypeVar("ResultT")

Work = Callable[[PayloadT, Any], ResultT]
"""What a worker runs for each unit: ``work(payload, shared) -> result``; ``shared`` is the
object given to :meth:`WorkerPool.run` (None when none was), the same for every unit of a call."""
WorkerFactory = Callable[[], Work[PayloadT, ResultT]]
"""Makes a worker's ``work`` once per worker process (loading a policy there). On Ray it is
pickled to the actors: a module-level function, or a ``functools.partial`` of one."""


class ScaleOutError(EmbodiaError):
    """A backend setting that cannot be used: an unknown backend, Ray missing, an unreachable cluster."""


class UnitFailed(EmbodiaError):
    """Raised by a unit whose own input is bad: the unit is recorded as failed with this
    message and not retried; the run goes on with the others."""


@dataclass(frozen=True)
class Backend:
    """Where a run's units run (``--backend``, ``--num-workers``, ``--address``, ...). Not a
    setting of the run: the results do not depend on it, so a run started on one backend
    resumes on the other."""

    kind: BackendKind = "local"
    num_workers: int | None = None
    """Ray actors; None: as many as the cluster's CPUs hold at ``num_cpus`` each (local: 1)."""
    address: str | None = None
    """None starts a local Ray on this machine; ``auto`` joins a running cluster; ``ray://HOST:PORT``
    connects through the Ray client (``HOST:PORT``, a cluster's GCS address, also works)."""
    num_cpus: float = 1.0
    """CPUs each Ray actor reserves (0 lets actors share CPUs, e.g. clients of a policy server)."""
    num_gpus: float = 0.0
    """GPUs each Ray actor reserves (a fraction shares a GPU): actors that hold a policy land
    on GPU nodes, while CPU-only workers run the simulators."""
    concurrency: int = 1
    """Units each worker runs at once (threads): more than 1 for clients of a policy server."""
    queued: int = 1
    """Units waiting on each Ray worker behind those it runs, so that it starts the next one
    the moment it finishes instead of waiting for the driver to take the result and send more
    (a scene's files back and written, a record made); 0 sends a unit only to an idle worker,
    as every run does after its first worker death."""
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def __post_init__(self) -> None:
        if self.kind not in BACKENDS:
            raise ScaleOutError(f"unknown --backend {self.kind!r}: expected local or ray")
        if self.num_workers is not None and self.num_workers < 1:
            raise ScaleOutError(f"--num-workers must be at least 1, got {self.num_workers}")
        if self.num_cpus < 0 or self.num_gpus < 0:
            raise ScaleOutError(
                f"--worker-cpus and --worker-gpus cannot be negative, got {self.num_cpus} and {self.num_gpus}"
            )
        if self.concurrency < 1:
            raise ScaleOutError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.queued < 0:
            raise ScaleOutError(f"queued units per worker cannot be negative, got {self.queued}")
        if self.max_attempts < 1:
            raise ScaleOutError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.kind == "local" and (self.address is not None or self.num_workers not in (None, 1)):
            given = "--address" if self.address is not None else "--num-workers"
            raise ScaleOutError(f"{given} is for --backend ray; the local backend runs in this process")
        if self.address is not None:
            _check_address_form(self.address)


LOCAL = Backend()


def _check_address_form(address: str) -> None:
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "ray" or not parts.hostname or port is None:
        raise ScaleOutError(f"invalid --address {address!r}: expected auto, ray://HOST:PORT or HOST:PORT")


def _check_reachable(address: str) -> None:
    """A clear error at once for a cluster address nothing answers at, instead of Ray's
    retries (tens of seconds) and its traceback."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    host, port = parts.hostname or "", parts.port or 0
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ScaleOutError(f"cannot reach a Ray cluster at --address {address}: {reason}") from None


def import_ray() -> Any:
    """The ``ray`` module, or an error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ScaleOutError(
            "--backend ray needs Ray, which is not installed: pip install 'embodia[ray]'"
        ) from None
    return ray


def connect(backend: Backend) -> Any:
    """Ray, connected to the backend's cluster (started on this machine when ``address`` is
    None); a Ray already initialised in this process (a test's, a notebook's) is used as is.
    An address nothing answers at is an error either way: it names a cluster that is not there."""
    ray = import_ray()
    if backend.address is not None:
        _check_reachable(backend.address)
    if ray.is_initialized():
        return ray
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    if backend.address is None:
        options["include_dashboard"] = False
    else:
        options["address"] = backend.address
    try:
        ray.init(**options)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as error:
        where = backend.address or "this machine"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ScaleOutError(f"cannot start or join Ray at {where}: {first}") from None
    return ray


# ---------------------------------------------------------------------- what a worker sends back


@dataclass(frozen=True)
class _Outcome:
    """A unit's outcome as a worker sends it back: its result, its :class:`UnitFailed`
    message, or an error that ends the run (pickled whole when it can be, else as text)."""

    kind: Literal["ok", "failed", "error"]
    value: Any = None
    message: str = ""


def _error_outcome(error: BaseException) -> _Outcome:
    if isinstance(error, UnitFailed):
        return _Outcome("failed", message=str(error))
    try:
        copy = pickle.loads(pickle.dumps(error))
        if type(copy) is type(error) and str(copy) == str(error):
            return _Outcome("error", value=error, message=str(error))
    except Exception:  # an exception that does not survive pickling goes as text
        pass
    if isinstance(error, EmbodiaError):
        return _Outcome("error", message=str(error))
    return _Outcome("error", message="".join(traceback.format_exception(error)))


def _raise(outcome: _Outcome) -> None:
    if isinstance(outcome.value, BaseException):
        raise outcome.value
    if "Traceback" in outcome.message:
        raise RuntimeError(f"a unit failed in a Ray worker:\n{outcome.message}")
    raise EmbodiaError(outcome.message)


class _RayWorker:
    """The Ray actor: makes its worker once, then runs units. Errors come back as outcomes,
    so that the driver tells a unit's failure from the death of the process."""

    def __init__(self, factory: WorkerFactory[Any, Any]) -> None:
        self._work: Work[Any, Any] | None = None
        self._setup: _Outcome = _Outcome("ok")
        try:
            self._work = factory()
        except BaseException as error:  # reported by ready(), not by a dead actor
            self._setup = _error_outcome(error)

    def ready(self) -> tuple[_Outcome, int]:
        """Whether the worker was made, and the actor's process id."""
        return self._setup, os.getpid()

    def run(self, payload: Any, shared: Any) -> _Outcome:
        if self._work is None:
            return self._setup
        try:
            return _Outcome("ok", self._work(payload, shared))
        except Exception as error:  # sent back to the driver
            return _error_outcome(error)


# ---------------------------------------------------------------------- the pool


@dataclass(frozen=True)
class Unit(Generic[PayloadT]):
    """One unit of a run: ``key`` names it in the run's records (unique in the run)."""

    key: str
    payload: PayloadT


ResultCallback = Callable[[str, Any], None]
FailureCallback = Callable[[str, str], None]


class WorkerPool(AbstractContextManager["WorkerPool"], Generic[PayloadT, ResultT]):
    """Workers on one backend that run units (see the module docstring). The workers are made
    on first use and kept across :meth:`run` calls (a trainer collects every step with the same
    actors); :meth:`close` (or leaving the ``with`` block) ends them."""

    def __init__(self, factory: WorkerFactory[PayloadT, ResultT], backend: Backend = LOCAL) -> None:
        self.factory = factory
        self.backend = backend
        self._local: Work[PayloadT, ResultT] | None = None
        self._ray: _RayActors | None = None
        self.deaths = 0
        """Worker processes that died while running units (Ray)."""

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._ray is not None:
            self._ray.close()
            self._ray = None

    @property
    def worker_pids(self) -> list[int]:
        """The live Ray actors' process ids (empty locally)."""
        return [] if self._ray is None else list(self._ray.pids.values())

    def run(
        self,
        units: Iterable[Unit[PayloadT]],
        on_result: Callable[[str, ResultT], None],
        on_failure: FailureCallback | None = None,
        *,
        shared: Any = None,
    ) -> None:
        """Run every unit; ``on_result(key, result)`` is called in this thread as each result
        arrives (in any order on Ray), ``on_failure(key, message)`` for a unit that failed
        (:class:`UnitFailed`, or its worker died ``max_attempts`` times); without
        ``on_failure`` such a unit ends the run. Any other error ends the run: units in flight
        are abandoned, their results never reported."""
        todo = list(units)
        keys = [u.key for u in todo]
        if len(set(keys)) != len(keys):
            raise ValueError("unit keys must be unique within a run")

        def failed(key: str, message: str) -> None:
            if on_failure is None:
                raise UnitFailed(f"{key}: {message}")
            on_failure(key, message)

        if not todo:
            return
        if self.backend.kind == "local":
            self._run_local(todo, on_result, failed, shared)
        else:
            if self._ray is None:
                self._ray = _RayActors(self.factory, self.backend)
            self._ray.run(todo, on_result, failed, shared)
            self.deaths = self._ray.deaths

    def _run_local(
        self,
        todo: Sequence[Unit[PayloadT]],
        on_result: Callable[[str, ResultT], None],
        failed: FailureCallback,
        shared: Any,
    ) -> None:
        if self._local is None:
            self._local = self.factory()
        work = self._local
        if self.backend.concurrency == 1:
            for unit in todo:
                try:
                    result = work(unit.payload, shared)
                except UnitFailed as error:
                    failed(unit.key, str(error))
                    continue
                on_result(unit.key, result)
            return
        with ThreadPoolExecutor(max_workers=self.backend.concurrency) as threads:
            futures: dict[Future[ResultT], str] = {
                threads.submit(work, unit.payload, shared): unit.key for unit in todo
            }
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in finished:
                    raised = future.exception()
                    if isinstance(raised, UnitFailed):
                        failed(futures[future], str(raised))
                    elif raised is not None:
                        for other in pending:
                            other.cancel()
                        raise raised
                    else:
                        on_result(futures[future], future.result())


def _death_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """What ``ray.get`` raises when the process running a call died (rather than the call
    raising): the actor died or became unreachable, its worker or node crashed."""
    errors = ray.exceptions
    return (
        errors.RayActorError,
        errors.WorkerCrashedError,
        errors.NodeDiedError,
        errors.ObjectLostError,
        errors.OwnerDiedError,
    )


class _RayActors:
    """The Ray side of a :class:`WorkerPool`: ``num_workers`` actors, a dead one replaced."""

    def __init__(self, factory: WorkerFactory[Any, Any], backend: Backend) -> None:
        self.ray = connect(backend)
        self.backend = backend
        self.deaths = 0
        remote = self.ray.remote(_RayWorker)
        # numba (the simulator's kernels) starts a thread per core in every worker unless told
        # otherwise, and does not read the OMP_NUM_THREADS Ray sets: two workers on two cores
        # then run four threads and each scene takes 1.6x as long (docs/benchmarks.md)
        threads = str(max(1, int(backend.num_cpus)))
        self._actor_class = remote.options(
            num_cpus=backend.num_cpus,
            num_gpus=backend.num_gpus,
            max_concurrency=backend.concurrency,
            runtime_env={"env_vars": {"NUMBA_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}},
        )
        self._factory = factory
        count = backend.num_workers or self._default_workers()
        self._check_feasible(count)
        self.actors: list[Any] = []
        self.pids: dict[int, int] = {}
        """Actor slot -> process id, for the live actors."""
        self._sent: dict[str, int] = {}
        """Unit key -> the order its call was sent in, during a run."""
        for _ in range(count):
            self.actors.append(self._actor_class.remote(factory))
        for slot, actor in enumerate(self.actors):
            self._await_ready(slot, actor)

    def _default_workers(self) -> int:
        cpus = float(self.ray.cluster_resources().get("CPU", 1))
        per = self.backend.num_cpus
        return max(1, int(cpus // per)) if per > 0 else max(1, int(cpus))

    def _check_feasible(self, count: int) -> None:
        """An error at once when the cluster could never hold ``count`` workers (Ray would wait
        for resources that do not exist); workers that only wait for busy ones are waited for."""
        total = self.ray.cluster_resources()
        for resource, option, each in (
            ("CPU", "--worker-cpus", self.backend.num_cpus),
            ("GPU", "--worker-gpus", self.backend.num_gpus),
        ):
            have = float(total.get(resource, 0.0))
            if each > 0 and count * each > have:
                raise ScaleOutError(
                    f"{count} workers x {option} {each:g} need {count * each:g} {resource}s, but the Ray "
                    f"cluster has {have:g}: lower --num-workers or {option}"
                )

    def _await_ready(self, slot: int, actor: Any) -> None:
        ready = actor.ready.remote()
        waited, _ = self.ray.wait([ready], timeout=READY_PATIENCE_S)
        if not waited:
            logger.warning(
                "waiting for Ray to place worker %d (%g CPUs, %g GPUs): the cluster's resources are taken",
                slot,
                self.backend.num_cpus,
                self.backend.num_gpus,
            )
        try:
            outcome, pid = self.ray.get(ready)
        except self.ray.exceptions.ActorUnschedulableError as error:
            raise ScaleOutError(f"Ray cannot place a worker: {error}") from None
        if outcome.kind != "ok":
            self.close()
            _raise(outcome)
        self.pids[slot] = pid

    def _replace(self, slot: int) -> None:
        """A new actor in ``slot`` (the old one's process is gone)."""
        old = self.actors[slot]
        self.pids.pop(slot, None)
        with suppress(Exception):  # it is dead already
            self.ray.kill(old, no_restart=True)
        self.actors[slot] = self._actor_class.remote(self._factory)
        self._await_ready(slot, self.actors[slot])

    def close(self) -> None:
        for actor in self.actors:
            with suppress(Exception):  # a dead one cannot be killed again
                self.ray.kill(actor, no_restart=True)
        self.actors = []
        self.pids = {}

    def run(
        self,
        todo: Sequence[Unit[Any]],
        on_result: ResultCallback,
        failed: FailureCallback,
        shared: Any,
    ) -> None:
        ray = self.ray
        died = _death_errors(ray)
        # put once and sent by reference; None goes as itself (a reference costs ~1 ms a call)
        shared_ref = None if shared is None else ray.put(shared)
        queue: deque[Unit[Any]] = deque(todo)
        attempts: dict[str, int] = {}
        in_flight: dict[Any, tuple[int, Unit[Any]]] = {}
        held = [0] * len(self.actors)
        """Calls sent to each actor and not yet back."""
        queued = self.backend.queued
        sent = itertools.count()
        self._sent.clear()
        try:
            while queue or in_flight:
                while queue and (slot := self._next_slot(held, len(queue), queued)) is not None:
                    unit = queue.popleft()
                    ref = self.actors[slot].run.remote(unit.payload, shared_ref)
                    in_flight[ref] = (slot, unit)
                    held[slot] += 1
                    self._sent[unit.key] = next(sent)  # an actor starts its calls in this order
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in ready:
                    slot, unit = in_flight.pop(ref)
                    try:
                        outcome: _Outcome = ray.get(ref)
                    except died:
                        self._on_death(slot, unit, attempts, queue, in_flight, failed)
                        # A unit that finished just before its worker died can lose its reply
                        # with the process and be charged for the death; queued behind a unit
                        # that crashes every time, that would repeat until it failed too. From
                        # the first death on, a unit goes only to an idle worker.
                        queued = 0
                        held[slot] = 0  # a new actor, holding nothing
                        continue
                    held[slot] -= 1
                    if outcome.kind == "ok":
                        on_result(unit.key, outcome.value)
                    elif outcome.kind == "failed":
                        failed(unit.key, outcome.message)
                    else:
                        _raise(outcome)
        finally:
            for ref in in_flight:
                with suppress(Exception):  # abandoned: the run ends without their results
                    ray.cancel(ref, force=False)

    def _next_slot(self, held: list[int], waiting: int, queued: int) -> int | None:
        """The actor the next unit goes to: the one holding the fewest calls, if it has a free
        thread; else, while more units wait than there are actors, the one with the shortest
        line (below ``queued``). Near the end units go only to free actors, so that none is
        left with a line while another has nothing to do."""
        slot = min(range(len(held)), key=held.__getitem__)
        if held[slot] < self.backend.concurrency:
            return slot
        if waiting > len(held) and held[slot] < self.backend.concurrency + queued:
            return slot
        return None

    def _on_death(
        self,
        slot: int,
        unit: Unit[Any],
        attempts: dict[str, int],
        queue: deque[Unit[Any]],
        in_flight: dict[Any, tuple[int, Unit[Any]]],
        failed: FailureCallback,
    ) -> None:
        """The actor in ``slot`` died (``unit``'s call came back first): every unit it held goes
        back to the front of the queue in the order they were sent, or is failed after
        ``max_attempts``; a new actor takes the slot. Only the units it was running count an
        attempt: the first ``concurrency`` sent, since an actor starts its calls in order; the
        ones queued behind them never started."""
        self.deaths += 1
        others = [ref for ref, (s, _) in in_flight.items() if s == slot]
        lost = [unit] + [in_flight.pop(ref)[1] for ref in others]
        order = sorted(lost, key=lambda u: self._sent[u.key])
        running = {u.key for u in order[: self.backend.concurrency]}
        self._replace(slot)
        for lost_unit in reversed(order):
            if lost_unit.key not in running:
                queue.appendleft(lost_unit)
                continue
            attempts[lost_unit.key] = attempts.get(lost_unit.key, 0) + 1
            tries = attempts[lost_unit.key]
            if tries >= self.backend.max_attempts:
                failed(lost_unit.key, f"its worker died {tries} times while running it")
            else:
                logger.warning(
                    "a Ray worker died running %s; running it again (attempt %d of %d)",
                    lost_unit.key,
                    tries + 1,
                    self.backend.max_attempts,
                )
                queue.appendleft(lost_unit)
