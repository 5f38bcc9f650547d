"""Building blocks for embodia's LangGraph agents.

- Run-scoped dependencies (env, policy, recorder) travel in LangGraph's runtime *context*
  (``graph.stream(..., context=...)``; nodes read ``runtime.context``), never in globals
  and never in the checkpointed state, which stays small (ids, numbers, short lists).
- State is a TypedDict; a key that accumulates (an event log) has a reducer
  (``Annotated[list, operator.add]``) and nodes return only what they add.
- Checkpoints go to SQLite keyed by the run id (``thread_id``) after every step of the
  graph (the explorer: once per decision; ``durability="async"``: written while the next
  step runs), so a killed run resumes from its last saved step (at worst one step earlier;
  the agents replay deterministically).
- Progress and tokens reach the CLI as ``custom`` stream events (``emit``) next to ``updates``.
- A :class:`RunRecorder` appends one JSON line per decision and, on resume, drops the lines
  of decisions the checkpoint does not hold (they will be made again), replacing the file
  atomically only when a line must go.
- The thread id is the run id drawn when the run starts (:func:`new_run_id`, kept in the
  run's ``config.yaml``), never the folder's name.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.typing import ContextT

from embodia.core.runs import RecordLog, read_run_records, records_before_gap

logger = logging.getLogger(__name__)

EventHandler = Callable[[dict[str, Any]], None]


def emit(event: Mapping[str, object]) -> None:
    """Send a progress event to whoever streams the graph with ``stream_mode="custom"``."""
    from langgraph.config import get_stream_writer

    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a running graph (e.g. from a test)
        return
    writer(event)


@contextmanager
def sqlite_checkpointer(path: Path) -> Iterator[SqliteSaver]:
    """A LangGraph ``SqliteSaver`` on ``path`` (created if missing), closed afterwards."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), check_same_thread=False)
    # WAL with synchronous=NORMAL: a commit is in the OS's hands when it returns, so a killed
    # process loses nothing; only a power cut may lose the last checkpoints (a resume then
    # redoes those decisions). The default FULL fsyncs every checkpoint, ~1.6 ms a decision.
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


def run_config(run_id: str, recursion_limit: int = 100_000) -> dict[str, Any]:
    """The graph config of a run: its checkpoint thread and a limit fit for long loops."""
    return {"configurable": {"thread_id": run_id}, "recursion_limit": recursion_limit}


def stream_run(
    graph: CompiledStateGraph[Any, ContextT, Any, Any],
    graph_input: Mapping[str, Any] | None,
    config: dict[str, Any],
    context: ContextT,
    on_event: EventHandler | None = None,
) -> dict[str, Any]:
    """Run (``graph_input``) or resume (``None``) a compiled graph to its end; returns the
    final state values (the graph's reducers applied, as LangGraph streams them).

    With ``on_event``, node updates and custom events, subgraphs' included, are passed to it
    as ``{"type": "updates" | "custom", "ns": (...), "data": ...}`` (``ns`` is empty for the
    graph's own nodes). Without a listener they are not streamed: custom events from
    subgraphs cost about 0.8 ms a decision (docs/benchmarks.md).
    """
    values: dict[str, Any] = dict(graph_input or {})
    runnable = cast("RunnableConfig", config)
    if graph_input is None and getattr(graph, "checkpointer", None):
        values = dict(graph.get_state(runnable).values)
    listening = on_event is not None
    options: dict[str, Any] = {"durability": "async"} if getattr(graph, "checkpointer", None) else {}
    for part in graph.stream(
        graph_input,
        runnable,
        context=context,
        stream_mode=["values", "updates", "custom"] if listening else ["values"],
        # Nodes emit their events from inside subgraphs, which LangGraph only forwards when asked.
        subgraphs=listening,
        version="v2",
        **options,
    ):
        namespace = tuple(part.get("ns", ()))
        if part["type"] == "values":
            if not namespace:
                values = dict(part["data"])
        elif on_event is not None:
            on_event({"type": part["type"], "ns": namespace, "data": part["data"]})
    return values


def graph_diagram(graph: CompiledStateGraph[Any, Any, Any, Any]) -> str:
    """The graph's structure as Mermaid text (printable, no extra dependencies)."""
    text: str = graph.get_graph().draw_mermaid()
    return text


def checkpoint_problem(path: Path) -> str | None:
    """Why the SQLite checkpoint at ``path`` cannot be used (``"file is not a database"``,
    ``"database disk image is malformed"``, ...), or None when it can (or does not exist)."""
    if not path.exists():
        return None
    try:
        connection = sqlite3.connect(str(path))
        try:
            rows = connection.execute("PRAGMA quick_check").fetchall()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return str(exc)
    verdict = "; ".join(str(row[0]) for row in rows)
    return None if verdict == "ok" else verdict


def checkpoint_threads(path: Path) -> list[str]:
    """The thread ids that hold checkpoints in the SQLite file at ``path``."""
    if not path.exists():
        return []
    connection = sqlite3.connect(str(path))
    try:
        rows = connection.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
    except sqlite3.Error:
        return []
    finally:
        connection.close()
    return sorted(str(row[0]) for row in rows)


def new_run_id() -> str:
    """A run's checkpoint thread id: drawn once when the run starts and kept in its
    ``config.yaml``, so a run folder can be moved or renamed and still resume."""
    import uuid

    return uuid.uuid4().hex


class RunRecorder(RecordLog):
    """Appends decision records to ``episodes.jsonl`` as they happen (flushed each line).

    On resume (``keep_decisions``: the decisions the checkpoint holds) the file keeps the
    records of decisions ``1..keep_decisions`` that come in order before any gap (every
    readable line is recovered, see ``read_run_records``); the rest will be made again. The
    file is left as it is when it already holds exactly those (append-only), else replaced
    atomically, so a kill at any moment loses no record. ``records`` passes records the
    caller has already read from ``path``.
    """

    def __init__(
        self,
        path: Path,
        keep_decisions: int | None = None,
        records: list[dict[str, Any]] | None = None,
    ) -> None:
        kept: list[dict[str, Any]] = []
        if keep_decisions:
            if records is None:
                records = records_before_gap(read_run_records(path), "decision", 1, path, "decisions")
            kept = [r for r in records if int(r["decision"]) <= keep_decisions]
            if len(kept) < len(records):
                logger.info(
                    "%s: dropping decisions %d-%d, made after the last checkpoint; they will be made again",
                    path,
                    len(kept) + 1,
                    len(records),
                )
        super().__init__(path, kept)

    write = RecordLog.append
    """The explorer's name for appending a decision record."""
