"""The public DSR-Bench's released instance files, hand-written here in each layout, read into
embodia's instances; stored truths checked by replay, disagreements reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.envs.dsr import released
from embodia.envs.dsr.core import DSRError
from embodia.envs.dsr.released import ReleasedFormatError, import_released, verify
from embodia.envs.dsr.suites import read_jsonl


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.lstrip("\n"))
    return path


ARRAYS = {
    "array/access/access_easy.txt": """
0
[65, 65, 64, 8, 0]
Index: 2
Answer: 64
1
[3, 1, 4]
Index: 0
Answer: 3
""",
    "array/delete/delete_easy.txt": """
0
[65, 65, 64, 8, 0]
Element: 65
Answer: [65, 64, 8, 0]
""",
    "array/insert/insert_easy.txt": """
0
[65, 65, 64, 8, 0]
Index: 2
Element: 2
Answer: [65, 65, 2, 64, 8, 0]
""",
    "array/reverse/reverse_medium.txt": """
0
[65, 65, 64, 8, 0]
Answer: [0, 8, 64, 65, 65]
""",
    "array/search/search_hard.txt": """
0
[65, 65, 64, 8, 0]
Element: 65
Answer: 0
""",
}


def test_array_layouts(tmp_path: Path) -> None:
    for relative, text in ARRAYS.items():
        _write(tmp_path, relative, text)
    result = import_released(tmp_path)
    by_id = {i.id: i for i in result.instances}
    assert result.by_operation == {
        "array.access": 2,
        "array.delete": 1,
        "array.insert": 1,
        "array.reverse": 1,
        "array.search": 1,
    }
    assert result.files == 5 and result.disagreements == []
    access = by_id["released/array.access/short/01"]
    assert access.data == {"array": [3, 1, 4], "index": 0} and access.truth == 3
    assert access.question == "Given an array [3, 1, 4]. Q: What is the value stored in index 0?"
    assert access.extra["source"] == "array/access/access_easy.txt:5" and access.suite == "main"
    assert by_id["released/array.insert/short/00"].data == {
        "array": [65, 65, 64, 8, 0],
        "index": 2,
        "value": 2,
    }
    assert by_id["released/array.reverse/medium/00"].length == "medium"
    assert by_id["released/array.search/long/00"].truth == 0


def test_a_stored_truth_embodia_disagrees_with_is_reported_not_copied(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "array/delete/delete_easy.txt",
        ARRAYS["array/delete/delete_easy.txt"].replace("Answer: [65, 64, 8, 0]", "Answer: [65, 65, 64, 8]"),
    )
    result = import_released(tmp_path)
    (instance,) = result.instances
    (found,) = result.disagreements
    assert found.stored == [65, 65, 64, 8] and found.replayed == [65, 64, 8, 0]
    assert found.source == "array/delete/delete_easy.txt:1"
    assert instance.truth == [65, 64, 8, 0] and instance.extra["released_truth"] == [65, 65, 64, 8]


def test_files_not_in_their_layout_are_named_with_the_line(tmp_path: Path) -> None:
    _write(tmp_path, "array/access/access_easy.txt", "0\n[1, 2]\nIndex: 1\nAnswer: 2\n2\n[1]\n")
    with pytest.raises(ReleasedFormatError, match=r"access_easy.txt:5: expected instance index 1, found '2'"):
        import_released(tmp_path)
    _write(tmp_path, "array/access/access_easy.txt", "0\n[1, 2]\nPosition: 1\nAnswer: 2\n")
    with pytest.raises(ReleasedFormatError, match=r"access_easy.txt:3: expected the index starting 'Index:'"):
        import_released(tmp_path)
    _write(tmp_path, "array/access/access_easy.txt", "0\n[1, 2\n")
    with pytest.raises(ReleasedFormatError, match=r"access_easy.txt:2: the array is not a Python literal"):
        import_released(tmp_path)
    _write(tmp_path, "array/access/access_easy.txt", "0\n" + "[" * 100_000 + "\n")
    with pytest.raises(ReleasedFormatError, match=r"access_easy.txt:2: the array is not a Python literal"):
        import_released(tmp_path)
    _write(tmp_path, "array/access/access_easy.txt", "0\n[1, 2]\nIndex: 1\n")
    with pytest.raises(ReleasedFormatError, match=r"the file ends where the answer was expected"):
        import_released(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DSRError, match="holds no released instance file"):
        import_released(tmp_path / "empty")
    with pytest.raises(DSRError, match="is not a folder"):
        import_released(tmp_path / "nowhere")
    with pytest.raises(DSRError, match="no released-file reader for 'array.sort'"):
        import_released(tmp_path, ["array.sort"])


def test_import_and_verify_commands(tmp_path: Path) -> None:
    root = tmp_path / "generation"
    for relative, text in ARRAYS.items():
        _write(root, relative, text)
    out = tmp_path / "released.jsonl"
    result = CliRunner().invoke(app, ["dsr", "import", str(root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "6 instances from 5 files; 0 stored truths differ" in result.output
    instances = read_jsonl(out)
    assert len(instances) == 6
    # a truth changed by hand: verify counts it and shows the first disagreement
    lines = out.read_text().splitlines()
    record = json.loads(lines[0])
    record["truth"] = 65
    out.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    result = CliRunner().invoke(app, ["dsr", "verify", str(out)])
    assert result.exit_code == 0, result.output
    assert "array.access: 1/2 agree" in result.output and "5/6 stored truths agree" in result.output
    assert "stored 65, embodia 64" in result.output
    checked = verify(read_jsonl(out))
    assert checked.agree["array.access"] == 1 and checked.total["array.access"] == 2
    bad = CliRunner().invoke(
        app, ["dsr", "import", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x.jsonl")]
    )
    assert bad.exit_code == 2 and "is not a folder" in bad.output and "Traceback" not in bad.output


def test_every_reader_is_for_a_registered_operation() -> None:
    from embodia.envs.dsr.core import OPERATIONS

    assert set(released.READERS) <= set(OPERATIONS)


def test_a_k_d_truth_from_another_tie_rule_keeps_the_prompts_rule(tmp_path: Path) -> None:
    """A stored K-D tree built with ties broken by the whole point (as an unstable sort may
    leave them): the import keeps embodia's stable order, which the prompt states, and reports
    the stored one."""
    points = [[5, 9], [5, 1], [3, 4], [5, 5]]
    by_whole_point = [[5, 5], [3, 4], [5, 1], [5, 9]]
    _write(
        tmp_path,
        "kd_tree/construct_2d/construct_easy.txt",
        f"Tree 0\nPoints: {points}\nTraversal: {by_whole_point}\n",
    )
    result = import_released(tmp_path)
    (instance,) = result.instances
    (found,) = result.disagreements
    assert instance.id == "released/kd_tree.construct/short/dim=2/00" and instance.suite == "spatial"
    assert found.stored == by_whole_point and found.replayed == [[5, 1], [5, 9], [3, 4], [5, 5]]
    assert instance.truth == found.replayed and instance.extra["released_truth"] == by_whole_point
    assert verify(result.instances).agree == {"kd_tree.construct": 1}
