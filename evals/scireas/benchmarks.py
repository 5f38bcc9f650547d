"""SciReas's benchmarks read from the files a user has, into :class:`ScienceItem` records.

No benchmark is downloaded: :func:`load_items` reads a local file (``.json``, ``.jsonl``,
``.csv`` or ``.parquet``; Parquet needs ``pyarrow``, which ``datasets`` installs), or a folder:
one the ``datasets`` library saved, or a downloaded dataset repository (:func:`read_folder`),
in one of the published layouts (:data:`FORMATS`):

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
- ``sciriff``: ``input``, ``output``, ``_instance_id`` (``{task}:{split}:{n}``; else ``id``),
  ``metadata`` (kept in ``extra`` with the task's name); an ``f1`` item, the output its
  reference (a JSON list or object in it is scored as a list, :mod:`.items`).
- ``ugphysics``: ``problem``, ``answers`` (the answers in ``\\boxed{}``), ``answer_type`` (one
  code per answer: NV numeric, MC choice, EX, EQ, IN, TF, TUP), ``unit``,
  ``is_multiple_answer``, ``index``; ``subject``, ``topic``, ``domain``, ``level``, ``language``
  and the answer type kept in ``extra``. One NV answer written as a number (plain, ``a \\times
  10^{b}`` or ``\\frac{a}{b}``) is numeric, one MC letter a choice among the letters the problem
  writes, anything else exact; several answers are one exact answer, joined by ", ".
- ``scieval``: ``question`` (its closing "Answer:" dropped; ``cot_prompt``, else ``prompt``,
  put before it, since PubMedQA's yes/no/maybe are only there), ``answer`` (a list holding
  one answer, or the answer), ``type``, ``id``; ``category``, ``topic``, ``ability`` and
  ``task_name`` kept in ``extra``. A multiple-choice answer is a choice among the letters
  the question writes, a judge answer (yes/no/maybe, true/false) exact, a filling answer
  numeric when it is a number and exact otherwise.
- ``items``: embodia's own schema, the fields of :class:`ScienceItem` (what
  :func:`write_items` writes).
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from embodia.evals.scireas.items import LETTERS, ScienceItem
from embodia.evals.scireas.scoring import ScienceScoreError, unit

DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")


def read_rows(path: Path | str) -> list[dict[str, Any]]:
    """The records of a JSON (a list, or an object holding one list), JSONL, CSV or Parquet file,
    or of a folder (:func:`read_folder`)."""
    file = Path(path)
    if file.is_dir():
        return read_folder(file)
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


def read_folder(folder: Path) -> list[dict[str, Any]]:
    """The records of a benchmark folder: one the ``datasets`` library saved
    (``save_to_disk``; of a dataset with several splits, its ``test`` split, else its only
    one), or a downloaded dataset repository: every data file under it, in path order, hidden
    folders left out."""
    if (folder / "state.json").is_file() or (folder / "dataset_dict.json").is_file():
        try:
            import datasets  # type: ignore[import-untyped]
        except ImportError:
            raise ScienceScoreError(
                f"{folder} was saved by the datasets library: pip install datasets"
            ) from None
        loaded = datasets.load_from_disk(str(folder))
        if isinstance(loaded, datasets.DatasetDict):
            splits = list(loaded)
            if "test" not in splits and len(splits) != 1:
                raise ScienceScoreError(
                    f"{folder} holds the splits {', '.join(splits)} and none is 'test': "
                    f"give the split's folder, e.g. {folder / splits[0]}"
                )
            loaded = loaded["test" if "test" in splits else splits[0]]
        return [dict(row) for row in loaded]
    files = sorted(
        f
        for f in folder.rglob("*")
        # hidden parts (a download's .cache, .git) hold no records of the benchmark
        if f.is_file()
        and f.suffix.lower() in DATA_SUFFIXES
        and not any(part.startswith(".") for part in f.relative_to(folder).parts)
    )
    if not files:
        raise ScienceScoreError(f"{folder} holds no {', '.join(DATA_SUFFIXES)} file")
    return [row for file in files for row in read_rows(file)]


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


def _sciriff(row: Mapping[str, Any], task: str) -> ScienceItem:
    key = row.get("_instance_id", row.get("id"))
    if key is None:
        raise KeyError("_instance_id")
    key = str(key)
    output = row["output"]
    answer = [str(o) for o in output] if isinstance(output, list) else str(output).strip()
    metadata = row.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    extra = {"task_name": key.split(":")[0], "metadata": metadata}
    return ScienceItem(task, key, str(row["input"]), answer, "f1", extra=extra)


_BOXED = re.compile(r"\\boxed\s*\{")
_MANTISSA = r"[-+]?(?:\d+\.?\d*|\.\d+)"
_LATEX_NUMBER = re.compile(
    rf"(?P<plain>{_MANTISSA}(?:e[-+]?\d+)?)"
    rf"|(?P<mantissa>{_MANTISSA})?(?:\\times|\\cdot|x|×)?10\^\{{?(?P<power>[-+]?\d+)\}}?"
    rf"|(?P<sign>-?)\\d?frac\{{(?P<top>{_MANTISSA})\}}\{{(?P<bottom>{_MANTISSA})\}}"
    rf"|(?P<over>{_MANTISSA})/(?P<under>{_MANTISSA})",
    re.IGNORECASE,
)
_LATEX_UNIT = re.compile(r"\\(?:mathrm|text|rm|mathit)\s*\{([^{}]*)\}")


def _boxed(text: str) -> list[str]:
    """What each ``\\boxed{...}`` of ``text`` holds (braces balanced); the whole text, less its
    math delimiters, when nothing is boxed."""
    found = []
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                found.append(text[start:end].strip())
                break
    if found:
        return found
    bare = text.strip()
    for delimiter in ("$", "\\[", "\\]", "\\(", "\\)"):
        bare = bare.replace(delimiter, "")
    return [bare.strip()]


def _latex_number(text: str) -> float | None:
    """A number written plainly or in LaTeX (``a \\times 10^{b}``, ``\\frac{a}{b}``, ``a/b``);
    None for anything else (an expression)."""
    compact = re.sub(r"\s|\\[,;!]|\\ |~|\$", "", text).replace("{,}", "").replace("−", "-")
    match = _LATEX_NUMBER.fullmatch(compact)
    if match is None:
        return None
    if match["plain"]:
        return float(match["plain"])
    if match["power"]:
        return float(f"{match['mantissa'] or 1}e{match['power']}")
    top, bottom = (match["top"], match["bottom"]) if match["top"] else (match["over"], match["under"])
    if float(bottom) == 0:
        return None
    return (-1 if match["sign"] else 1) * float(top) / float(bottom)


def _latex_unit(text: Any) -> str:
    """A unit as UGPhysics writes it (``\\mathrm{eV}``, ``\\text{Hz}``, null, "None"), plain."""
    plain = _LATEX_UNIT.sub(r"\1", str(text or "")).replace("~", "").replace("\\,", "").replace("$", "")
    return "" if plain.strip().lower() == "none" else plain.strip()


def _ugphysics(row: Mapping[str, Any], task: str) -> ScienceItem:
    key, question = str(row["index"]), str(row["problem"])
    written = row["answers"]
    answers = [a for w in (written if isinstance(written, list) else [written]) for a in _boxed(str(w))]
    kinds = [k.strip().upper() for k in str(row["answer_type"]).split(",")]
    extra = {k: row.get(k) for k in ("subject", "topic", "domain", "level", "language")}
    extra["answer_type"] = row["answer_type"]
    several = str(row.get("is_multiple_answer")).strip().lower() in ("true", "1")
    if len(answers) > 1 or several:
        return ScienceItem(task, key, question, ", ".join(answers), "exact", extra=extra)
    answer = answers[0]
    if kinds[0] == "MC" and len(answer) == 1 and answer.upper() in LETTERS[:10]:
        return ScienceItem(task, key, question, answer.upper(), "choice", extra=extra)
    value = _latex_number(answer) if kinds[0] == "NV" else None
    if value is None:
        return ScienceItem(task, key, question, answer, "exact", extra=extra)
    return _numeric_or_exact(task, key, question, value, _latex_unit(row.get("unit")), extra)


_SCIEVAL_CUE = re.compile(r"\s*Answer:\s*$")


def _scieval(row: Mapping[str, Any], task: str) -> ScienceItem:
    key, kind = str(row["id"]), str(row["type"]).strip().lower()
    written = row["answer"]
    answer = str(written[0] if isinstance(written, list) else written).strip()
    question = _SCIEVAL_CUE.sub("", str(row["question"]))
    instruction = str(row.get("cot_prompt") or row.get("prompt") or "").strip()
    if instruction:
        question = f"{instruction}\n\n{question}"
    extra = {k: row.get(k) for k in ("category", "topic", "ability", "task_name", "type")}
    if kind == "multiple-choice":
        return ScienceItem(task, key, question, answer.upper(), "choice", extra=extra)
    if kind == "judge":
        return ScienceItem(task, key, question, answer, "exact", extra=extra)
    if kind == "filling":
        return _numeric_or_exact(task, key, question, answer, "", extra)
    raise ValueError(f"unknown SciEval type {row['type']!r}")


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
    "sciriff": _sciriff,
    "ugphysics": _ugphysics,
    "scieval": _scieval,
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
