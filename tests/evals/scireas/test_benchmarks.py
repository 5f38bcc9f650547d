"""SciReas's benchmark readers on small files in each published layout, written here."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from embodia.evals.scireas.benchmarks import load_items, read_rows, write_items
from embodia.evals.scireas.items import ScienceItem, from_problem
from embodia.evals.scireas.problems import problem_set
from embodia.evals.scireas.scoring import ScienceScoreError


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_gpqa_csv_shuffles_the_choices_by_record_and_keeps_the_right_letter(tmp_path: Path) -> None:
    path = tmp_path / "gpqa_main.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, ["Record ID", "Question", "Correct Answer", *(f"Incorrect Answer {k}" for k in (1, 2, 3))]
        )
        writer.writeheader()
        for k in range(6):
            writer.writerow(
                {
                    "Record ID": f"rec{k}",
                    "Question": f"Q{k}?",
                    "Correct Answer": "right",
                    "Incorrect Answer 1": "w1",
                    "Incorrect Answer 2": "w2",
                    "Incorrect Answer 3": "w3",
                }
            )
    items = load_items(path, "gpqa")
    assert all(item.choices["ABCD".index(item.answer)] == "right" for item in items)
    assert len({item.answer for item in items}) > 1  # not always the same letter
    assert load_items(path, "gpqa") == items  # reproducibly
    assert items[0].grade(f"so the answer is ({items[0].answer})")


def test_multiple_choice_layouts(tmp_path: Path) -> None:
    mmlu = load_items(
        _jsonl(
            tmp_path / "mmlu.jsonl",
            [
                {
                    "question_id": 7,
                    "question": "Q?",
                    "options": ["a", "b", "c", "d", "e"],
                    "answer": "E",
                    "category": "physics",
                }
            ],
        ),
        "mmlu_pro",
    )
    assert mmlu[0].answer == "E" and len(mmlu[0].choices) == 5 and mmlu[0].extra["category"] == "physics"
    sgp = load_items(
        _jsonl(
            tmp_path / "sgp.jsonl",
            [
                {
                    "uuid": "u1",
                    "question": "Q?",
                    "options": ["a", "b"],
                    "answer_letter": "B",
                    "discipline": "Science",
                }
            ],
        ),
        "supergpqa",
    )
    assert sgp[0].key == "supergpqa/u1" and sgp[0].grade("Answer: B")
    ske = load_items(
        _jsonl(
            tmp_path / "ske.jsonl",
            [
                {
                    "question": "Q?",
                    "choices": {"text": ["x", "y", "z"], "label": ["1", "2", "3"]},
                    "answerKey": "2",
                }
            ],
        ),
        "sciknoweval",
    )
    assert ske[0].answer == "B" and ske[0].choices == ("x", "y", "z")
    lab = load_items(
        _jsonl(
            tmp_path / "lab.jsonl",
            [{"id": "l1", "question": "Q?", "ideal": "good", "distractors": ["bad1", "bad2"]}],
        ),
        "labbench",
    )
    assert lab[0].choices["ABC".index(lab[0].answer)] == "good"


def test_numeric_and_exact_layouts(tmp_path: Path) -> None:
    scibench = load_items(
        _jsonl(
            tmp_path / "sb.json.jsonl",
            [
                {
                    "problemid": "1.2",
                    "problem_text": "Speed?",
                    "answer_number": "12.5",
                    "unit": " m/s",
                    "source": "fund",
                },
                {
                    "problemid": "3",
                    "problem_text": "Energy?",
                    "answer_number": "4.1",
                    "unit": "$10^{-19} \\mathrm{~J}$",
                    "source": "atkins",
                },
            ],
        ),
        "scibench",
    )
    assert scibench[0].answer == 12.5 and scibench[0].unit == "m/s" and scibench[0].grade("Answer: 45 km/h")
    # a LaTeX unit: kept aside, the number compared bare
    assert scibench[1].unit == "" and scibench[1].extra["unit_text"].startswith("$10^")
    olympiad = load_items(
        _jsonl(
            tmp_path / "ob.jsonl",
            [
                {"id": 1, "question": "Q?", "final_answer": ["$3.5$"], "unit": "m"},
                {"id": 2, "question": "Q?", "final_answer": ["$x^2+1$"], "unit": None},
            ],
        ),
        "olympiadbench",
    )
    assert olympiad[0].answer_type == "numeric" and olympiad[0].answer == 3.5
    assert olympiad[1].answer_type == "exact" and olympiad[1].grade("Answer: x^2+1")
    pro = load_items(
        _jsonl(
            tmp_path / "pro.jsonl",
            [
                {
                    "question": "Q? (A) x (B) y",
                    "answer": "B",
                    "taskname": "gpqa",
                    "doc_id": 3,
                    "o3-mini-high_correct": True,
                }
            ],
        ),
        "scireas_pro",
    )
    assert (
        pro[0].answer_type == "choice"
        and pro[0].key == "scireas_pro/gpqa/3"
        and pro[0].extra["o3-mini-high_correct"]
    )


def test_embodias_own_layout_round_trips_and_parquet_is_read(tmp_path: Path) -> None:
    items = [from_problem(p) for p in problem_set(6)]
    write_items(items, tmp_path / "items.jsonl")
    assert load_items(tmp_path / "items.jsonl", "items") == items
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    rows = [
        {"question_id": 1, "question": "Q?", "options": ["a", "b"], "answer": "A", "category": "chemistry"}
    ]
    parquet.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "test.parquet")
    assert load_items(tmp_path / "test.parquet", "mmlu_pro")[0].answer == "A"


def test_bad_files_and_records_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScienceScoreError, match="not found"):
        read_rows(tmp_path / "nope.jsonl")
    bad = _jsonl(tmp_path / "bad.jsonl", [{"question": "Q?"}])
    with pytest.raises(ScienceScoreError, match="record 1 is not a mmlu_pro record"):
        load_items(bad, "mmlu_pro")
    (tmp_path / "torn.jsonl").write_text('{"a": 1}\n{"b"\n')
    with pytest.raises(ScienceScoreError, match="line 2 is not JSON"):
        read_rows(tmp_path / "torn.jsonl")
    with pytest.raises(ScienceScoreError, match="not one of the letters"):
        ScienceItem("t", "1", "Q?", "E", "choice", ("a", "b"))
