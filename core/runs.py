"""Run folders: a folder that holds a run is continued only when asked (``--resume``) and
only with the settings it was started with; nothing a run wrote is lost.

Every runner (:class:`Runner`: ``runner(settings, out, resume=...) -> summary``) keeps its
folder through a :class:`RunFolder`: begun (``--out`` checked, settings compared with the
saved ones), resumed (the records kept so far), appended to (:class:`RecordLog`) and
finished (a summary written atomically). JSONL files, a run's own or a user's, are read by
one parser with one torn-line rule (:func:`parse_jsonl`, :func:`read_jsonl`).

- Records are appended one JSON line at a time and flushed. Reading them back recovers
  every readable line: a torn last line (a kill mid-write) is dropped, and so is any other
  unreadable line, each named in a warning by its line number.
- A file that is (re)written whole (``config.yaml``, ``summary.json``, a log cut back on
  resume) goes through :func:`write_atomic`: a temporary file in the same folder, flushed
  and fsynced, renamed over the old one, and the folder fsynced. A kill leaves the old
  file or the new one, never a part of either.
- A log continued on resume is left as it is (append-only) unless lines must go, and is
  then replaced atomically (:func:`continue_records`).
- ``--out`` is checked before anything is computed (:func:`check_out_folder`,
  :func:`check_out_file`), and a run that fails before its first record removes what it
  created (:func:`run_folder`), so a corrected command can start over in the same folder.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from embodia.core.random_weights import random_weights_in
from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"

RecordCallback = Callable[[dict[str, Any]], None]
"""What a runner's ``on_record`` is: called with each record as it is appended."""


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so that a kill at any moment leaves either the
    old file or the new one: written to a hidden temporary file beside it, fsynced, renamed
    over it, and the folder fsynced so the rename itself survives a power cut."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            temporary.unlink()
        raise
    _fsync_folder(path.parent)


def write_json(
    path: Path, value: Any, *, indent: int = 2, default: Callable[[Any], Any] | None = None
) -> None:
    """Write ``value`` to ``path`` as indented JSON, whole and atomically (:func:`write_atomic`)."""
    write_atomic(path, json.dumps(value, indent=indent, default=default) + "\n")


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _line_ranges(numbers: Sequence[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``."""
    parts: list[str] = []
    start = previous = None
    for number in [*numbers, None]:
        if number is not None and previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = number
    return ", ".join(parts)


@dataclass(frozen=True)
class BadLine:
    """A non-blank line of a JSONL file that holds no JSON object."""

    number: int
    kind: Literal["utf-8", "json", "depth", "type"]
    """What is wrong: not UTF-8, not JSON, nested too deeply to parse, JSON but not an object."""
    detail: str = ""
    """The JSON parser's message (``json``), or the type found instead (``type``)."""
    torn: bool = False
    """The text after the file's last newline: a line its writer has not finished (a kill
    mid-write, or a run still writing it)."""

    @property
    def problem(self) -> str:
        """What is wrong, in a few words (``bad JSON (Expecting value)``)."""
        return {
            "utf-8": "not UTF-8 text",
            "json": f"bad JSON ({self.detail})",
            "depth": "JSON nested too deeply",
            "type": f"expected a JSON object, got {self.detail}",
        }[self.kind]


def _json_object(number: int, raw: bytes, torn: bool) -> dict[str, Any] | BadLine:
    """The JSON object on one line, or why the line is not one."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return BadLine(number, "utf-8", torn=torn)
    except json.JSONDecodeError as exc:
        return BadLine(number, "json", exc.msg, torn)
    except RecursionError:
        return BadLine(number, "depth", torn=torn)
    return value if isinstance(value, dict) else BadLine(number, "type", type(value).__name__, torn)


def parse_jsonl(data: bytes) -> tuple[list[tuple[int, dict[str, Any]]], list[BadLine]]:
    """``(line number, object)`` for each JSON-object line of ``data``, and the other non-blank
    lines as :class:`BadLine`; the one place embodia's JSONL lines are split and parsed. The
    torn-line rule: a complete line ends with a newline, so an unreadable text after the
    last one is ``torn`` (its writer was killed mid-write or is still writing it)."""
    *lines, tail = data.split(b"\n")
    records: list[tuple[int, dict[str, Any]]] = []
    bad: list[BadLine] = []
    for number, raw in enumerate([*lines, tail], start=1):
        if not raw.strip():
            continue
        found = _json_object(number, raw, torn=number == len(lines) + 1)
        if isinstance(found, BadLine):
            bad.append(found)
        else:
            records.append((number, found))
    return records, bad


def read_jsonl(
    path: Path | str,
    *,
    strict: bool = False,
    error: type[EmbodiaError] = EmbodiaError,
    what: str = "file",
) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON-object line of ``path``; blank lines are skipped.

    The one torn-line rule of embodia's JSONL files (:func:`parse_jsonl`):

    - ``strict=False`` (a file a run appended to as it went): a missing file reads as empty; a
      torn last line (a kill mid-write) and any unreadable line elsewhere are dropped, with a
      warning that names their line numbers.
    - ``strict=True`` (a file a user hands in): a missing file or any unreadable line, the last
      included, raises ``error`` naming the file, the line and what is wrong with it (a
      missing file is called ``what``: "instance file not found: ...").
    """
    file = Path(path).expanduser()
    if not file.is_file():
        if strict:
            raise error(f"{what} not found: {file}")
        return []
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {file}: {exc.strerror or exc}") from None
    records, bad = parse_jsonl(data)
    if strict and bad:
        raise error(f"{file} line {bad[0].number}: {bad[0].problem}")
    unreadable = [line.number for line in bad if not line.torn]
    if len(unreadable) < len(bad):
        logger.warning(
            "%s: line %d is incomplete (the run was killed mid-write); dropping it", file, bad[-1].number
        )
    if unreadable:
        logger.warning(
            "%s: line%s %s cannot be read; dropping %s and keeping the %d readable lines",
            file,
            "s" if len(unreadable) > 1 else "",
            _line_ranges(unreadable),
            "them" if len(unreadable) > 1 else "it",
            len(records),
        )
    return records


def read_run_records(path: Path) -> list[dict[str, Any]]:
    """The JSON-object lines a run appended as it went, every readable one (see
    :func:`read_jsonl`, ``strict=False``)."""
    return [record for _, record in read_jsonl(path)]


def records_before_gap(
    records: Sequence[dict[str, Any]], key: str, first: int, path: Path, what: str
) -> list[dict[str, Any]]:
    """The records numbered ``first, first + 1, ...`` (by ``key``) up to the first number
    that is missing. A run in order cannot be continued across a gap (the lost step shaped
    everything after it), so records after one are dropped, with a warning: those ``what``
    (e.g. "decisions") are made again."""
    kept: list[dict[str, Any]] = []
    for record in records:
        try:
            number = int(record.get(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = None
        if number != first + len(kept):
            break
        kept.append(record)
    if len(kept) < len(records):
        later = [r.get(key) for r in records[len(kept) :]]
        missing = first + len(kept)
        logger.warning(
            "%s: %s %d is missing; the %d records after it (%s %s) are dropped and made again",
            path,
            what.rstrip("s"),
            missing,
            len(later),
            what,
            ", ".join(map(str, later[:5])) + (", ..." if len(later) > 5 else ""),
        )
    return kept


def jsonl_text(records: Iterable[Mapping[str, Any]]) -> str:
    """``records`` as JSONL: one JSON line each, every line ended."""
    return "".join(json.dumps(record) + "\n" for record in records)


def continue_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Make ``path`` hold exactly ``records`` (one JSON line each) before a run appends to it
    again: untouched when it already does (the normal resume: append-only), else replaced
    atomically (a torn last line, unreadable lines or records to be made again go)."""
    text = jsonl_text(records)
    if path.is_file() and path.read_bytes() == text.encode("utf-8"):
        return
    write_atomic(path, text)


def set_aside(path: Path, label: str) -> Path:
    """Rename ``path`` to ``NAME.LABEL`` (``NAME.LABEL.2``, ... when taken) beside it and
    return the new path: a file a run cannot use is kept, never deleted."""
    target = path.with_name(f"{path.name}.{label}")
    number = 1
    while target.exists():
        number += 1
        target = path.with_name(f"{path.name}.{label}.{number}")
    os.replace(path, target)
    return target


def read_config(out: Path) -> dict[str, Any]:
    """A run folder's ``config.yaml`` as a mapping; an error naming the problem otherwise."""
    import yaml

    try:
        config = yaml.safe_load((out / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise EmbodiaError(f"cannot resume {out}: {CONFIG_FILE} is not valid YAML ({exc})") from None
    if not isinstance(config, dict):
        raise EmbodiaError(
            f"cannot resume {out}: {CONFIG_FILE} holds a {type(config).__name__}, with no settings mapping"
        )
    return config


def write_config(out: Path, config: Mapping[str, Any]) -> None:
    """Write a run's ``config.yaml`` (atomically). When a setting names a model of random
    weights (``embodia models tiny``), ``random_weights`` beside the settings says which and
    why its results mean nothing; resuming compares the settings only."""
    import yaml

    record = dict(config)
    settings = record.get("settings")
    notes = random_weights_in(settings) if isinstance(settings, Mapping) else {}
    if notes:
        record["random_weights"] = notes
    write_atomic(out / CONFIG_FILE, yaml.safe_dump(record, sort_keys=False))


ADDED_SETTINGS: dict[str, Any] = {"sim": "embedded", "counting": "embodia"}
"""Settings added after runs were first written, with the value a run saved before then had
(it did not record it): such a run resumes with that value."""


def settings_differences(saved: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """``name: saved -> given`` for every setting whose given value is not the saved one."""
    differences = []
    for key, value in given.items():
        before = saved[key] if key in saved else ADDED_SETTINGS.get(key)
        if before != value:
            differences.append(f"{key}: {saved.get(key)!r} -> {value!r}")
    return differences


def check_resumable(
    out: Path, settings: Mapping[str, Any], resume: bool, may_grow: Collection[str] = ()
) -> bool:
    """Whether ``out`` holds an earlier run to continue; an error naming the problem when it
    holds one that may not be continued (no ``--resume``, unreadable config, or settings that
    differ: all of them are named, ``name: saved -> given``). The numbers named in
    ``may_grow`` (a training run's ``steps``) may be larger than saved: the run goes on further."""
    if not (out / CONFIG_FILE).exists():
        return False
    if not resume:
        raise EmbodiaError(f"{out} already holds a run: pass --resume to continue it, or pick another --out")
    saved = read_config(out).get("settings")
    if not isinstance(saved, dict):
        raise EmbodiaError(f"cannot resume {out}: {CONFIG_FILE} has no settings mapping")
    grown = {
        key
        for key in may_grow
        if isinstance(saved.get(key), int)
        and isinstance(settings.get(key), int)
        and settings[key] > saved[key]
    }
    differences = settings_differences(saved, {k: v for k, v in settings.items() if k not in grown})
    if differences:
        raise EmbodiaError(
            f"cannot resume {out}: it was started with other settings ({'; '.join(differences)}); "
            "resume it with the settings it was started with, or pick another --out"
        )
    return True


def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _writable_problem(folder: Path) -> str | None:
    """Why nothing can be created in ``folder`` (None when something can). Permission bits say
    nothing for root, and /proc or a read-only mount refuse anyway: only trying tells."""
    try:
        with tempfile.TemporaryDirectory(prefix=".embodia-probe-", dir=folder):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)


def _check_creatable_in(path: Path, option: str) -> None:
    """``path`` does not exist: its nearest existing ancestor must be a folder we can write."""
    ancestor = _nearest_existing(path)
    if not ancestor.is_dir():
        raise EmbodiaError(f"{option} {path} cannot be created: {ancestor} is a file, not a folder")
    problem = _writable_problem(ancestor)
    if problem is not None:
        raise EmbodiaError(f"{option} {path} cannot be created: {ancestor} is not writable ({problem})")


def check_out_folder(out: Path, option: str = "--out") -> None:
    """An error naming the problem unless ``out`` is a writable folder or can be created as one."""
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise EmbodiaError(f"{option} {out} is a file, not a folder")
        problem = _writable_problem(out)
        if problem is not None:
            raise EmbodiaError(f"{option} {out} is not writable ({problem})")
        return
    _check_creatable_in(out, option)


def check_out_file(out: Path, option: str = "--out") -> None:
    """An error naming the problem unless ``out`` is a file that can be (over)written."""
    if out.is_dir():
        raise EmbodiaError(f"{option} {out} is a folder, not a file")
    if not out.exists():
        _check_creatable_in(out, option)
        return
    try:
        with open(out, "ab"):  # opened for appending and closed: its content is untouched
            pass
    except OSError as exc:
        raise EmbodiaError(f"{option} {out} is not writable ({exc.strerror or exc})") from None


@contextmanager
def run_folder(out: Path, records: str, settings_file: str = CONFIG_FILE) -> Iterator[None]:
    """Create ``out`` (and missing parents) for a run whose records go to ``records`` inside
    it. When a new run (no ``settings_file`` there before) fails before its first record is
    written, what this call and the body created is removed (entries that were there before
    are kept), so no ``config.yaml`` is left to refuse the corrected command. A resumed run
    keeps everything."""
    out = Path(out)
    created_below = _nearest_existing(out)  # everything under it on the way to out is new
    before = {p.name for p in out.iterdir()} if out.is_dir() else None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbodiaError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    try:
        yield
    except BaseException:
        log = out / records
        new_run = before is None or (settings_file not in before and records not in before)
        if new_run and not (log.is_file() and log.stat().st_size > 0):
            _remove_created(out, before, created_below)
        raise


def _remove_created(out: Path, before: set[str] | None, created_below: Path) -> None:
    if before is None:
        top = out.absolute()
        while top.parent != created_below and top.parent != top:
            top = top.parent
        shutil.rmtree(top, ignore_errors=True)
        logger.info("removed %s: the run failed before its first record", top)
        return
    for entry in out.iterdir():
        if entry.name not in before:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


class RecordLog:
    """A run's append-only JSONL file, open for appending: each record is one JSON line,
    flushed as it is written, so a kill loses at most the line being written. It starts
    holding exactly ``kept`` (:func:`continue_records`: untouched when it already does)."""

    def __init__(
        self,
        path: Path,
        kept: Sequence[dict[str, Any]] = (),
        *,
        default: Callable[[Any], Any] | None = None,
    ) -> None:
        """``default`` turns a value JSON has no type for into one (``str``: its text)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        continue_records(path, kept)
        self.path = path
        self.last: Mapping[str, Any] | None = kept[-1] if kept else None
        """The record appended last (or kept last, before the first append)."""
        self._default = default
        self._file = path.open("a", encoding="utf-8")

    def append(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record, default=self._default) + "\n")
        self._file.flush()
        self.last = record

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> RecordLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class RunFolder:
    """The folder of one run, through its life:

    - made (``RunFolder(out, records)``): ``--out`` is checked before anything is computed;
    - :meth:`begin`: the settings are compared with those saved in ``config.yaml``, and the
      run is refused or resumed;
    - :meth:`kept_records`: on resume, the records kept so far (a torn last line dropped);
    - :meth:`recording`: the folder is created, the config written and the records file
      opened for appending (:class:`RecordLog`); a new run that fails before its first
      record leaves nothing behind (:func:`run_folder`);
    - :meth:`finish`: a JSON file written whole and atomically (the summary, the report).
    """

    def __init__(self, out: Path | str, records: str, *, settings_file: str = CONFIG_FILE) -> None:
        self.out = Path(out)
        check_out_folder(self.out)
        self.records = records
        """The name of the JSONL file the run appends its records to."""
        self.settings_file = settings_file
        """The file whose presence marks a run begun (``config.yaml``, DSR's ``run.json``)."""
        self.resuming = False
        """Whether the folder holds an earlier run that this one continues: set by
        :meth:`begin`, or by a runner that checks a settings file of its own (DSR's)."""
        self.config: dict[str, Any] = {}
        """The settings as ``config.yaml`` keeps them (set by :meth:`start`)."""

    @property
    def log(self) -> Path:
        """The records file."""
        return self.out / self.records

    def begin(self, settings: Mapping[str, Any], resume: bool, may_grow: Collection[str] = ()) -> bool:
        """Whether this run continues one in the folder; an error naming the problem when the
        folder holds a run that may not be continued (see :func:`check_resumable`)."""
        self.resuming = check_resumable(self.out, settings, resume, may_grow)
        return self.resuming

    def start(self, settings: Any, resume: bool, summary: str = "summary.json") -> dict[str, Any] | None:
        """:meth:`begin` with a settings dataclass, as ``config.yaml`` keeps it (JSON types,
        tuples as lists; kept in :attr:`config` for :meth:`recording`), then :meth:`finished`:
        the summary of a resumed run that had finished, which the runner returns as it is."""
        self.config = json.loads(json.dumps(asdict(settings), default=dict))
        self.begin(self.config, resume)
        return self.finished(summary)

    def finished(self, name: str = "summary.json") -> dict[str, Any] | None:
        """The summary a resumed run wrote when it finished (None for a new or unfinished run)."""
        summary = self.out / name
        if not (self.resuming and summary.exists()):
            return None
        value: dict[str, Any] = json.loads(summary.read_text(encoding="utf-8"))
        return value

    def read_records(self) -> list[dict[str, Any]]:
        """Every readable record of the records file (:func:`read_run_records`)."""
        return read_run_records(self.log)

    def kept_records(
        self, in_order: str | None = None, first: int = 1, what: str = "records"
    ) -> list[dict[str, Any]]:
        """The records a resume keeps (none for a new run): every readable line, and with
        ``in_order`` (the key that numbers them, from ``first``) only those before a gap
        (:func:`records_before_gap`; ``what`` names them in its warning)."""
        if not self.resuming:
            return []
        records = self.read_records()
        return records if in_order is None else records_before_gap(records, in_order, first, self.log, what)

    def creating(self) -> AbstractContextManager[None]:
        """The folder created for the run's body; removed again when a new run fails before
        its first record (:func:`run_folder`)."""
        return run_folder(self.out, self.records, self.settings_file)

    @contextmanager
    def recording(
        self,
        kept: Sequence[dict[str, Any]],
        config: Mapping[str, Any] | None = None,
        *,
        default: Callable[[Any], Any] | None = None,
    ) -> Iterator[RecordLog]:
        """The records file holding ``kept``, open for appending, inside :meth:`creating`;
        ``config`` (``{"settings": ..., ...}``) is written to ``config.yaml`` first."""
        with self.creating():
            if config is not None:
                write_config(self.out, config)
            with RecordLog(self.log, kept, default=default) as log:
                yield log

    def finish(
        self,
        name: str,
        value: Mapping[str, Any],
        *,
        indent: int = 2,
        default: Callable[[Any], Any] | None = None,
    ) -> None:
        """Write ``value`` as the JSON file ``name`` of the run (its summary, its report)."""
        write_json(self.out / name, value, indent=indent, default=default)


UnitT = TypeVar("UnitT")


def record_each(
    folder: RunFolder,
    settings: Mapping[str, Any],
    units: Iterable[UnitT],
    key: Callable[[UnitT], str],
    measure: Callable[[UnitT], dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Each unit's record by ``key``: those a resumed run kept (records carry their unit's
    ``"key"``), and for the others ``measure(unit)``, appended to the records file as each one
    is done. ``settings`` go to ``config.yaml`` first."""
    kept = folder.kept_records()
    done = {str(record["key"]): record for record in kept if "key" in record}
    with folder.recording(kept, {"settings": settings}) as log:
        for unit in units:
            if key(unit) not in done:
                record = measure(unit)
                log.append(record)
                done[key(unit)] = record
    return done


SettingsT_contra = TypeVar("SettingsT_contra", contravariant=True)


class Runner(Protocol[SettingsT_contra]):
    """The shape every runner has: ``runner(settings, out, resume=...) -> summary``. It runs
    (or, with ``resume``, continues) the run its settings describe in the folder ``out``
    (a :class:`RunFolder`) and returns what it wrote last (its summary or report). Runners
    take optional keyword arguments of their own besides: a callback that follows the
    progress (``on_record``, ``on_step``, ``on_event``) and run options that are not settings."""

    def __call__(self, settings: SettingsT_contra, out: Path, *, resume: bool = False) -> dict[str, Any]: ...


RunnerT = TypeVar("RunnerT", bound=Runner[Any])


def runner(function: RunnerT) -> RunnerT:
    """Mark ``function`` as a runner: the type checker holds it to the :class:`Runner` shape."""
    return function
