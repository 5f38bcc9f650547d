"""Run folders: a folder that holds a run is continued only when asked (``--resume``) and
only with the settings it was started with; nothing a run wrote is lost.

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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from embodia.core.random_weights import random_weights_in
from embodia.errors import EmbodiaError

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"


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


def _json_object(raw: bytes) -> dict[str, Any] | str:
    """The JSON object on one line, or why the line is not one."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"
    except json.JSONDecodeError as exc:
        return f"bad JSON ({exc.msg})"
    except RecursionError:
        return "JSON nested too deeply"
    return value if isinstance(value, dict) else f"expected a JSON object, got {type(value).__name__}"


def read_jsonl(
    path: Path | str, *, strict: bool = False, error: type[EmbodiaError] = EmbodiaError
) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON-object line of ``path``; blank lines are skipped.

    The one torn-line rule of embodia's JSONL files:

    - ``strict=False`` (a file a run appended to as it went): a missing file reads as empty; a
      torn last line (a kill mid-write) and any unreadable line elsewhere are dropped, with a
      warning that names their line numbers.
    - ``strict=True`` (a file a user hands in): a missing file or any unreadable line, the last
      included, raises ``error`` naming the file, the line and what is wrong with it.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        if strict:
            raise error(f"file not found: {file}")
        return []
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {file}: {exc.strerror or exc}") from None
    *lines, tail = data.split(b"\n")  # a complete file ends with a newline
    records: list[tuple[int, dict[str, Any]]] = []
    unreadable: list[int] = []
    for number, raw in enumerate([*lines, tail], start=1):
        if not raw.strip():
            continue
        record = _json_object(raw)
        if isinstance(record, dict):
            records.append((number, record))
        elif strict:
            raise error(f"{file} line {number}: {record}")
        elif number == len(lines) + 1:
            logger.warning(
                "%s: line %d is incomplete (the run was killed mid-write); dropping it", file, number
            )
        else:
            unreadable.append(number)
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


def continue_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Make ``path`` hold exactly ``records`` (one JSON line each) before a run appends to it
    again: untouched when it already does (the normal resume: append-only), else replaced
    atomically (a torn last line, unreadable lines or records to be made again go)."""
    text = "".join(json.dumps(record) + "\n" for record in records)
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


def begin_results(out: Path, settings: Mapping[str, Any], done: list[dict[str, Any]]) -> Path:
    """Start (or continue) a run that appends one JSON line per result: ``config.yaml`` with
    its settings, and the results file holding exactly the records kept from before. Returns
    the results file, to be opened for appending."""
    out.mkdir(parents=True, exist_ok=True)
    write_config(out, {"settings": dict(settings)})
    results = out / "results.jsonl"
    continue_records(results, done)
    return results


def settings_differences(saved: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """``name: saved -> given`` for every setting whose given value is not the saved one."""
    return [
        f"{key}: {saved.get(key)!r} -> {value!r}" for key, value in given.items() if saved.get(key) != value
    ]


def check_resumable(out: Path, settings: Mapping[str, Any], resume: bool) -> bool:
    """Whether ``out`` holds an earlier run to continue; an error naming the problem when it
    holds one that may not be continued (no ``--resume``, unreadable config, or settings that
    differ: all of them are named, ``name: saved -> given``)."""
    if not (out / CONFIG_FILE).exists():
        return False
    if not resume:
        raise EmbodiaError(f"{out} already holds a run: pass --resume to continue it, or pick another --out")
    saved = read_config(out).get("settings")
    if not isinstance(saved, dict):
        raise EmbodiaError(f"cannot resume {out}: {CONFIG_FILE} has no settings mapping")
    differences = settings_differences(saved, settings)
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
