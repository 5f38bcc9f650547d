"""SciReas's benchmarks read from the files a user has, into :class:`ScienceItem` records.

No benchmark is downloaded: :func:`load_items` reads a local file (``.json``, ``.jsonl``,
``.csv`` or ``.parquet``; Parquet needs ``pyarrow``, which ``datasets`` installs) in one of the
published layouts (:data:`FORMATS`):

- ``gpqa``: the CSV release (``Question``, ``Correct Answer``, ``Incorrect Answer 1-3``,
  ``Record ID``); the four choices are shuffled by the record's id, reproducibly.
- ``mmlu_pro``: ``question``, ``options`` (up to ten), ``answer`` (a letter), ``question_id``,
  ``category``.
- ``supergpqa``: ``question``, ``options``, ``answer_letter``, ``uuid``, ``discipline``.
- ``sciknoweval``: ``question``, ``choices`` (``text`` and ``label``), ``answerKey``.
- ``labbench``: ``question``, ``ideal``, ``distractors``, ``id``; the choices shuffled by id.
- ``scibench``: ``problem_text``, ``answer_number``, ``unit``, ``problemid``, ``source``;
  numeric. A unit the scorer does not know (SciBench writes some as LaTeX with a power of ten)
  is kept in ``extra`` and the number compared bare.
- ``olympiadbench``: ``question``, ``final_answer`` (a list), ``unit``, ``id``; numeric when
  the single final answer is a number, exact otherwise.
- ``scireas_pro``: the SciReas-Pro release (``question``, ``answer``, ``taskname``,
  ``doc_id`` and the effort flags, kept in ``extra``); a one-letter answer is a choice among
  the letters the question writes.
- ``items``: embodia's own schema, the fields of :class:`ScienceItem` (what
  :func:`write_items` writes).

SciRIFF (generative, F1-scored), UGPhysics and SciEval have no reader yet.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from embodia.evals.scireas.items import LETTERS, ScienceItem
from embodia.evals.scireas.scoring import ScienceScoreError, unit


def read_rows(path: Path | str) -> list[dict[str, Any]]:
    """The records of a JSON (a list, or an object holding one list), JSONL, CSV or Parquet file."""
    file = Path(path)
    if not file.is_file():
        raise ScienceScoreError(f"benchmark file not found: {file}")
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as parquet
        except ImportError:
            raise ScienceScoreError("reading Parquet needs pyarrow: pip install pyarrow") from None
        return [dict(row) for row in parquet.read_table(file).to_pylist()]
    text = file.read_text(encoding="utf-8")
    if suffix == ".csv":
        return [dict(row) for row in csv.DictReader(text.splitlines())]
    if suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ScienceScoreError(f"{file} line {number} is not JSON ({exc.msg})") from None
        return rows
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScienceScoreError(f"{file} is not JSON ({exc.msg})") from None
    if isinstance(value, Mapping):
        lists = [v for v in value.values() if isinstance(v, list)]
        value = lists[0] if len(lists) == 1 else None
    if not isinstance(value, list):
        raise ScienceScoreError(f"{file}: expected a list of records (or an object holding one)")
    return value


def _shuffled(right: str, wrong: Iterable[str], key: str) -> tuple[tuple[str, ...], str]:
    choices = [right, *wrong]
    random.Random(f"choices/{key}").shuffle(choices)
    return tuple(choices), LETTERS[choices.index(right)]


def _gpqa(row: Mapping[str, Any], task: str) -> ScienceItem:
    key = str(row["Record ID"])
    wrong = [str(row[f"Incorrect Answer {k}"]).strip() for k in (1, 2, 3)]
    choices, letter = _shuffled(str(row["Correct Answer"]).strip(), wrong, key)
    return ScienceItem(task, key, str(row["Question"]), letter, "choice", choices)


def _mmlu_pro(row: Mapping[str, Any], task: str) -> ScienceItem:
    return ScienceItem(
        task,
        str(row["question_id"]),
        str(row["question"]),
        str(row["answer"]).strip(),
        "choice",
        tuple(str(o) for o in row["options"]),
        extra={"category": row.get("category")},
    )


def _supergpqa(row: Mapping[str, Any], task: str) -> ScienceItem:
    return ScienceItem(
        task,
        str(row["uuid"]),
        str(row["question"]),
        str(row["answer_letter"]).strip(),
        "choice",
        tuple(str(o) for o in row["options"]),
        extra={"discipline": row.get("discipline")},
    )


def _sciknoweval(row: Mapping[str, Any], task: str, number: int) -> ScienceItem:
    choices = row["choices"]
    labels, texts = list(choices["label"]), list(choices["text"])
    answer = LETTERS[labels.index(row["answerKey"])]
    return ScienceItem(task, str(row.get("id", number)), str(row["question"]), answer, "choice", tuple(texts))


def _labbench(row: Mapping[str, Any], task: str) -> ScienceItem:
    key = str(row["id"])
    choices, letter = _shuffled(str(row["ideal"]), [str(d) for d in row["distractors"]], key)
    return ScienceItem(task, key, str(row["question"]), letter, "choice", choices)


def _numeric_or_exact(
    task: str, key: str, question: str, answer: Any, written_unit: str, extra: dict[str, Any]
) -> ScienceItem:
    try:
        value = float(str(answer).replace(",", "").strip())
    except ValueError:
        return ScienceItem(task, key, question, str(answer), "exact", extra=extra)
    written_unit = written_unit.strip()
    try:
        unit(written_unit)
    except ScienceScoreError:
        extra = {**extra, "unit_text": written_unit}
        written_unit = ""  # compared as a bare number
    return ScienceItem(task, key, question, value, "numeric", unit=written_unit, extra=extra)


def _scibench(row: Mapping[str, Any], task: str) -> ScienceItem:
    return _numeric_or_exact(
        task,
        str(row.get("problemid", "")).strip() or str(row.get("source", "?")),
        str(row["problem_text"]),
        row["answer_number"],
        str(row.get("unit") or ""),
        {"source": row.get("source")},
    )


def _olympiadbench(row: Mapping[str, Any], task: str) -> ScienceItem:
    answers = row["final_answer"]
    answer = answers[0] if isinstance(answers, list) and len(answers) == 1 else answers
    if isinstance(answer, list):
        return ScienceItem(task, str(row["id"]), str(row["question"]), ", ".join(map(str, answer)), "exact")
    return _numeric_or_exact(
        task, str(row["id"]), str(row["question"]), str(answer).strip("$ "), str(row.get("unit") or ""), {}
    )


def _scireas_pro(row: Mapping[str, Any], task: str) -> ScienceItem:
    answer = str(row["answer"]).strip()
    extra = {k: v for k, v in row.items() if k not in ("question", "answer")}
    key = f"{row.get('taskname', '?')}/{row.get('doc_id', '?')}"
    if len(answer) == 1 and answer in LETTERS[:10]:
        return ScienceItem(task, key, str(row["question"]), answer, "choice", extra=extra)
    return _numeric_or_exact(task, key, str(row["question"]), answer, "", extra)


def _items(row: Mapping[str, Any], task: str) -> ScienceItem:
    fields = dict(row)
    fields["choices"] = tuple(fields.get("choices") or ())
    fields["ingredients"] = tuple(fields.get("ingredients") or ())
    return ScienceItem(**fields)


FORMATS: dict[str, Callable[..., ScienceItem]] = {
    "gpqa": _gpqa,
    "mmlu_pro": _mmlu_pro,
    "supergpqa": _supergpqa,
    "sciknoweval": _sciknoweval,
    "labbench": _labbench,
    "scibench": _scibench,
    "olympiadbench": _olympiadbench,
    "scireas_pro": _scireas_pro,
    "items": _items,
}


def load_items(path: Path | str, layout: str, task: str | None = None) -> list[ScienceItem]:
    """The items of a benchmark file in ``layout`` (module docstring); ``task`` names them
    (default: the layout). A record missing a field of its layout is named with its number."""
    if layout not in FORMATS:
        raise ScienceScoreError(f"the benchmark layouts are {', '.join(FORMATS)}; got {layout!r}")
    reader = FORMATS[layout]
    items = []
    for number, row in enumerate(read_rows(path), start=1):
        try:
            if layout == "sciknoweval":
                items.append(reader(row, task or layout, number))
            else:
                items.append(reader(row, task or layout))
        except (KeyError, TypeError, ValueError) as exc:
            raise ScienceScoreError(f"{path} record {number} is not a {layout} record ({exc!r})") from None
    return items


def write_items(items: Iterable[ScienceItem], path: Path | str) -> None:
    """``items`` as JSONL in embodia's own layout (``load_items(path, "items")`` reads them)."""
    lines = [
        json.dumps({**asdict(item), "choices": list(item.choices), "ingredients": list(item.ingredients)})
        for item in items
    ]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
