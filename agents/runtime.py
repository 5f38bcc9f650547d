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
  of decisions the checkpoint does not hold (they will be made again).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

EventHandler = Callable[[dict[str, Any]], None]


def emit(event: dict[str, Any]) -> None:
    """Send a progress event to whoever streams the graph with ``stream_mode="custom"``."""
    from langgraph.config import get_stream_writer

    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a running graph (e.g. from a test)
        return
    writer(event)


@contextmanager
def sqlite_checkpointer(path: Path) -> Iterator[Any]:
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
    graph: Any,
    graph_input: dict[str, Any] | None,
    config: dict[str, Any],
    context: Any,
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
    if graph_input is None and getattr(graph, "checkpointer", None):
        values = dict(graph.get_state(config).values)
    listening = on_event is not None
    options: dict[str, Any] = {"durability": "async"} if getattr(graph, "checkpointer", None) else {}
    for part in graph.stream(
        graph_input,
        config,
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


def graph_diagram(graph: Any) -> str:
    """The graph's structure as Mermaid text (printable, no extra dependencies)."""
    text: str = graph.get_graph().draw_mermaid()
    return text


class RunRecorder:
    """Appends decision records to ``episodes.jsonl`` as they happen (flushed each line)."""

    def __init__(self, path: Path, keep_decisions: int | None = None) -> None:
        self.path = path
        kept: list[str] = []
        if keep_decisions is not None and path.exists():
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break  # a torn last line from a kill
                if int(record.get("decision", 0)) <= keep_decisions:
                    kept.append(line)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in kept))
        self._file = path.open("a")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
