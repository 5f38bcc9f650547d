"""SciReas's benchmark readers on small files in each published layout, written here."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from embodia.evals.scireas.benchmarks import load_items, read_rows, write_items
from embodia.evals.scireas.items import F1_PASS, ScienceItem, from_problem
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


def test_sciriff_records_are_f1_items_scored_by_overlap(tmp_path: Path) -> None:
    ner = {"Chemical": ["carbamazepine"], "Disease": ["myocarditis", "cardiogenic shock"], "Gene": []}
    rows = [
        {
            "_instance_id": "qasa_abstractive_qa:test:1",
            "input": "Which cells carry oxygen?",
            "output": "the red blood cell",
            "metadata": {"task_family": "qa.abstractive", "domains": ["biomedicine"]},
        },
        {
            "_instance_id": "bioasq_list_qa:test:2",
            "input": "What do orexin neurons regulate? Answer with a JSON array.",
            "output": json.dumps(["sleep", "appetite", "pain", "reward"]),
            "metadata": {"task_family": "qa.list"},
        },
        {"_instance_id": "biored_ner:test:3", "input": "Extract the entities.", "output": json.dumps(ner)},
        {
            "_instance_id": "scifact:test:4",
            "input": "Verdict?",
            "output": '{"answer": "BERT", "evidence": []}',
        },
        {"_instance_id": "biored_ner:test:5", "input": "Extract.", "output": '{"CellLine": [], "Gene": []}'},
    ]
    text, listed, entities, keyed, empty = load_items(_jsonl(tmp_path / "sciriff.jsonl", rows), "sciriff")
    assert text.answer_type == "f1" and text.key == "sciriff/qasa_abstractive_qa:test:1"
    assert text.extra["task_name"] == "qasa_abstractive_qa"
    assert text.extra["metadata"]["domains"] == ["biomedicine"]
    assert "Answer:" in text.prompt()
    # tokens red, blood, cell: "red cell" has precision 1, recall 2/3, F1 0.8
    assert text.score("Oxygen binds haemoglobin.\nAnswer: Red cell.") == pytest.approx(0.8)
    assert text.grade("Answer: red cell") and text.read("Answer: the Red cell.") == "red cell"
    # "white cell": precision 1/2, recall 1/3, F1 0.4, under the pass mark
    assert text.score("Answer: white cell") == pytest.approx(0.4)
    assert text.score("Answer: white cell") < F1_PASS and not text.grade("Answer: white cell")
    assert text.score("Answer:") == 0.0  # no answer given
    # sets: {sleep, appetite, mood} against four: precision 2/3, recall 1/2, F1 4/7
    assert listed.score('Answer: ["Sleep", "appetite", "mood"]') == pytest.approx(4 / 7)
    assert listed.score("Answer: sleep, appetite\npain") == pytest.approx(6 / 7)  # not JSON: split
    assert listed.score('Answer: ["sleep", "appet') == pytest.approx(1 / 3)  # torn JSON: split too
    assert listed.score("I am not sure.") == 0.0
    assert listed.read('Answer: ["Pain", "sleep", "pain"]') == ["pain", "sleep"]
    fenced = (
        'Answer:\n```json\n{"Chemical": ["Carbamazepine"], "Disease": ["myocarditis"], "Gene": ["HLA"]}\n```'
    )
    assert entities.score(fenced) == pytest.approx(2 / 3)  # 2 of 3 found, 1 of 3 wrong
    # a JSON key "answer" inside the reply's answer is not its cue
    assert keyed.score('The verdict follows. Answer: {"answer": "BERT", "evidence": []}') == 1.0
    # nothing to find: right only when the reply finds nothing either
    assert empty.score('Answer: {"CellLine": [], "Gene": []}') == 1.0
    assert empty.score('Answer: {"Gene": ["TP53"]}') == 0.0
    choice = ScienceItem("t", "1", "Which?", "C", "choice", ("a", "b", "c"))
    assert choice.score("Answer: C") == 1.0 and choice.score("Answer: A") == 0.0


def test_f1_answers_are_checked_and_round_trip(tmp_path: Path) -> None:
    for bad in ("  ", [], ["a", 2], 3):
        with pytest.raises(ScienceScoreError, match="an f1 answer is"):
            ScienceItem("t", "1", "Q?", bad, "f1")
    item = ScienceItem(
        "sciriff", "multicite:test:7", "Intents?", ["Similarities", "Uses"], "f1", extra={"n": 1}
    )
    assert item.answer == ("Similarities", "Uses")
    write_items([item], tmp_path / "items.jsonl")
    (back,) = load_items(tmp_path / "items.jsonl", "items")
    assert back == item and back.score('Answer: ["Uses"]') == pytest.approx(2 / 3)


def test_ugphysics_answers_by_type_and_count(tmp_path: Path) -> None:
    base = {"subject": "Atomic Physics", "topic": "Atomic and Molecular Physics", "language": "EN"}
    rows = [
        {
            "index": 1,
            "problem": "Length?",
            "answers": "\\boxed{3.4}",
            "answer_type": "NV",
            "unit": "\\mathrm{m}",
        },
        {
            "index": 2,
            "problem": "Frequency?",
            "answers": "\\boxed{1.2356 \\times 10^{20}}",
            "answer_type": "NV",
            "unit": "\\text{Hz}",
        },
        {"index": 3, "problem": "Which? (A) x (B) y (C) z", "answers": "\\boxed{C}", "answer_type": "MC"},
        {
            "index": 4,
            "problem": "Energy levels?",
            "answers": "\\[\n\\boxed{-\\frac{2 m e^{4}}{n^{2}}}\n\\]",
            "answer_type": "NV",
        },
        {
            "index": 5,
            "problem": "Ratio?",
            "answers": "\\boxed{2, 3, 4}",
            "answer_type": "NV",
            "unit": "None, None",
        },
        {"index": 6, "problem": "Two?", "answers": "\\boxed{2}, \\boxed{x^{2}}", "answer_type": "NV,EX"},
        {"index": 7, "problem": "Forbidden?", "answers": "\\boxed{True}", "answer_type": "TF"},
    ]
    rows = [{**base, "unit": None, "is_multiple_answer": k in (4, 5), **row} for k, row in enumerate(rows)]
    items = load_items(_jsonl(tmp_path / "en.jsonl", rows), "ugphysics")
    length, frequency, choice, expression, ratio, two, truth = items
    assert length.answer_type == "numeric" and length.answer == 3.4 and length.unit == "m"
    assert length.grade("So the length is 340 cm. Answer: 340 cm") and not length.grade("Answer: 3.4 s")
    assert length.extra["subject"] == "Atomic Physics" and length.extra["answer_type"] == "NV"
    assert frequency.answer == pytest.approx(1.2356e20) and frequency.extra["unit_text"] == "Hz"
    assert frequency.grade("Answer: 1.24 x 10^20 Hz") and not frequency.grade("Answer: about a lot")
    assert choice.answer_type == "choice" and choice.grade("The answer is (C).")
    assert expression.answer_type == "exact" and expression.answer == "-\\frac{2 m e^{4}}{n^{2}}"
    assert ratio.answer_type == "exact" and ratio.answer == "2, 3, 4" and ratio.grade("Answer: 2, 3, 4")
    assert two.answer == "2, x^{2}" and not two.grade("Answer: 2")
    assert truth.answer_type == "exact" and truth.grade("Answer: true") and not truth.grade("Answer: False")


def test_scieval_questions_by_type(tmp_path: Path) -> None:
    instruction = (
        'Given a question and four options, please select the right answer. Your answer should be "A".'
    )
    rows = [
        {
            "id": "a1",
            "question": "What is ovulation?\n\nA. Fusion\nB. Release of an oocyte\n\nAnswer:",
            "answer": ["B"],
            "type": "multiple-choice",
            "category": "biology",
            "topic": "Reproduction",
            "ability": "Base Knowledge",
            "task_name": "SocraticQA",
            "cot_prompt": instruction,
        },
        {
            "id": "a2",
            "question": "Context...\n\nDoes surgery help?\n\nAnswer:",
            "answer": ["no"],
            "type": "judge",
            "prompt": 'Your answer should be "yes", "no" or "maybe".',
        },
        {"id": "a3", "question": "Optimal solvent:", "answer": ["CO"], "type": "filling"},
        {"id": "a4", "question": "Speed in m/s?", "answer": ["12.5"], "type": "filling"},
    ]
    path = tmp_path / "scieval-valid.json"
    path.write_text(json.dumps(rows))
    mc, judge, solvent, speed = load_items(path, "scieval")
    assert mc.answer_type == "choice" and mc.answer == "B" and mc.letters == "ABCDEFGHIJ"
    assert mc.question.startswith(instruction) and mc.question.endswith("Release of an oocyte")
    assert mc.extra == {
        "category": "biology",
        "topic": "Reproduction",
        "ability": "Base Knowledge",
        "task_name": "SocraticQA",
        "type": "multiple-choice",
    }
    assert mc.grade("Reasoning... Answer: B") and not mc.grade("Answer: A or B")
    assert judge.answer_type == "exact" and "maybe" in judge.question
    assert judge.grade("Answer: No.") and not judge.grade("Answer: maybe")
    assert solvent.answer_type == "exact" and solvent.grade("Answer: CO") and not solvent.grade("Answer: CN")
    assert speed.answer_type == "numeric" and speed.answer == 12.5 and speed.grade("Answer: 12.4")
    assert not speed.grade("Answer: 13") and not speed.grade("Answer: fast")


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
    sciriff = [
        {
            "input": "Intents?",
            "output": '["Uses"]',
            "_instance_id": "multicite:test:1",
            "metadata": {"task_family": "classification", "domains": ["artificial_intelligence"]},
        }
    ]
    parquet.write_table(pyarrow.Table.from_pylist(sciriff), tmp_path / "sciriff.parquet")
    (item,) = load_items(tmp_path / "sciriff.parquet", "sciriff")
    assert item.extra["metadata"]["task_family"] == "classification" and item.grade('Answer: ["uses"]')


def test_folders_saved_by_datasets_and_downloaded_repositories(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [
        {"question_id": k, "question": f"Q{k}?", "options": ["a", "b"], "answer": "B", "category": "physics"}
        for k in range(3)
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "one"))
    assert [i.doc_id for i in load_items(tmp_path / "one", "mmlu_pro")] == ["0", "1", "2"]
    splits = datasets.DatasetDict(
        {"validation": datasets.Dataset.from_list(rows[:1]), "test": datasets.Dataset.from_list(rows[1:])}
    )
    splits.save_to_disk(str(tmp_path / "splits"))
    assert [i.doc_id for i in load_items(tmp_path / "splits", "mmlu_pro")] == ["1", "2"]
    no_test = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:1]), "validation": datasets.Dataset.from_list(rows[1:])}
    )
    no_test.save_to_disk(str(tmp_path / "no-test"))
    with pytest.raises(ScienceScoreError, match="none is 'test': give the split's folder"):
        load_items(tmp_path / "no-test", "mmlu_pro")
    assert len(load_items(tmp_path / "no-test" / "validation", "mmlu_pro")) == 2
    # a downloaded repository: its data files in path order, the card and the cache left alone
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / ".cache").mkdir()
    (repo / "README.md").write_text("# card\n")
    _jsonl(repo / "data" / "b.jsonl", rows[2:])
    _jsonl(repo / "data" / "a.jsonl", rows[:2])
    _jsonl(repo / ".cache" / "stale.jsonl", [{"broken": True}])
    assert [i.doc_id for i in load_items(repo, "mmlu_pro")] == ["0", "1", "2"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScienceScoreError, match="holds no .json, .jsonl, .csv, .parquet file"):
        read_rows(tmp_path / "empty")


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
    good = {"_instance_id": "t:test:1", "input": "Q?", "output": "yes"}
    sciriff = _jsonl(tmp_path / "sciriff.jsonl", [good, {"_instance_id": "t:test:2", "input": "Q?"}])
    with pytest.raises(ScienceScoreError, match="record 2 is not a sciriff record.*output"):
        load_items(sciriff, "sciriff")
    blank = _jsonl(tmp_path / "blank.jsonl", [{**good, "output": " "}])
    with pytest.raises(ScienceScoreError, match="record 1 is not a sciriff record.*an f1 answer"):
        load_items(blank, "sciriff")
    ugphysics = _jsonl(tmp_path / "ug.jsonl", [{"index": 1, "problem": "Q?", "answer_type": "NV"}])
    with pytest.raises(ScienceScoreError, match="record 1 is not a ugphysics record.*answers"):
        load_items(ugphysics, "ugphysics")
    scieval = _jsonl(tmp_path / "se.jsonl", [{"id": "x", "question": "Q?", "answer": ["A"]}])
    with pytest.raises(ScienceScoreError, match="record 1 is not a scieval record.*type"):
        load_items(scieval, "scieval")
    essay = _jsonl(
        tmp_path / "essay.jsonl", [{"id": "x", "question": "Q?", "answer": ["A"], "type": "essay"}]
    )
    with pytest.raises(ScienceScoreError, match="unknown SciEval type 'essay'"):
        load_items(essay, "scieval")
