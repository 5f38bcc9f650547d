"""`embodia eval live --reference` counts as the Proact-VL reference scripts do; the default keeps
embodia's counting. Hand-made prediction/label files, one per place where the two differ; every
expected value is worked out by hand in the comments (ROUGE-L on lower-cased [a-z0-9] tokens for
the lexical judges).

Clip A, [0, 12], label {3: "a goal", 4: "by Kane", 8: "save"}:
prediction {0: " ...", 3: "goal!", 4: " ...", 5: "", 9: "again", 12: ""}.
Clip B, [0, 10], label {5: "x", 6: "y"}: prediction {5: " ...", 7: "goal"}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.evals.live import LexicalPairwiseJudge, PairJudgment, evaluate_files

runner = CliRunner()
BASE = {"tag": "Solo commentators", "dataset_name": "lol", "idx": 0}
A_PRED = {"0": " ...", "3": "goal!", "4": " ...", "5": "", "9": "again", "12": ""}
A_LABEL = {"3": "a goal", "4": "by Kane", "8": "save"}
B_PRED = {"5": " ...", "7": "goal"}
B_LABEL = {"5": "x", "6": "y"}


def record(video: str, end: int, field: str, seconds: dict[str, str] | str) -> dict[str, Any]:
    return {"video_id": video, "begin": 0, "end": end, field: seconds, **BASE}


def write(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def eval_live(tmp_path: Path, pred: Path, label: Path, *flags: str, name: str = "report") -> dict[str, Any]:
    out = tmp_path / f"{name}.json"
    args = ["eval", "live", "--pred", str(pred), "--label", str(label), "--out", str(out), *flags]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())  # type: ignore[no-any-return]


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    return write(
        tmp_path / "labels.jsonl", record("a", 12, "label", A_LABEL), record("b", 10, "label", B_LABEL)
    )


def test_filler_seconds_count_as_speech_in_the_reference(tmp_path: Path, labels: Path) -> None:
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED), record("b", 10, "pred", B_PRED))
    # embodia drops "", " ...": A speaks {3, 9}: TP 1 of L {3, 4, 8}, P 1/2, R 1/3, F1 0.4; TimeDiff:
    # first reply at or after 3 is 3, delay 0, nothing outside [1, 10]. B speaks {7}: F1 0; delay
    # 7 - 5 = 2, 7 inside [3, 8]. Macro (0.4 + 0) / 2 = 0.2; micro TP 1, |P| 3, |L| 5: P 1/3,
    # R 1/5, F1 0.25; TimeDiff (0 + 2) / 2 = 1.
    ours = eval_live(tmp_path, preds, labels, "--judge", "none", name="ours")
    assert ours["summary"]["counting"] == "embodia" and ours["settings"]["drop_silent"] is True
    assert ours["summary"]["f1_macro"] == pytest.approx(0.2)
    assert ours["summary"]["f1_micro"] == pytest.approx(0.25)
    assert ours["summary"]["timediff_mean"] == pytest.approx(1.0)
    assert ours["counts"]["silent_seconds_dropped"] == 5
    # The reference keeps every key: A speaks {0, 3, 4, 5, 9, 12}: TP 2 (3, 4), P 2/6, R 2/3,
    # F1 4/9; TimeDiff delay 0, plus alpha 0.2 for second 0 (" ..." is text) outside [1, 10],
    # not for 12 (empty text) -> 0.2. B speaks {5, 7}: TP 1, P 1/2, R 1/2, F1 1/2; the filler at 5
    # is its reply: delay 0. Macro (4/9 + 1/2) / 2 = 17/36; micro TP 3, |P| 8, |L| 5: P 3/8,
    # R 3/5, F1 6/13; TimeDiff (0.2 + 0) / 2 = 0.1.
    ref = eval_live(tmp_path, preds, labels, "--judge", "none", "--reference", name="ref")
    assert ref["summary"]["counting"] == "reference"
    assert ref["settings"] | {"omegas": None} == {
        "k": 2,
        "alpha": 0.2,
        "omegas": None,
        "start_score": 0.0,
        "answer_window": 5,
        "drop_silent": False,
        "counting": "reference",
        "missing": "skip",
        "match_key": ["video_id", "begin", "end", "dataset_name", "idx"],
    }
    assert ref["summary"]["f1_macro"] == pytest.approx(17 / 36)
    assert ref["summary"]["f1_micro"] == pytest.approx(6 / 13)
    assert ref["summary"]["timediff_mean"] == pytest.approx(0.1)
    assert [c["timediff"]["penalty"] for c in ref["clips"]] == pytest.approx([0.2, 0.0])
    # --keep-fillers alone keeps embodia's counting otherwise, with the same seconds counted.
    kept = eval_live(tmp_path, preds, labels, "--judge", "none", "--keep-fillers", name="kept")
    assert kept["summary"]["counting"] == "embodia"
    assert kept["f1"] == ref["f1"] and kept["timediff"] == ref["timediff"]


def test_the_timediff_and_pauc_settings_reach_the_metrics(tmp_path: Path, labels: Path) -> None:
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED))
    # k 0, alpha 0.5, reference counting: span [3, 8]; outside it 0 (" ...") and 9 ("again"), not
    # 12 (empty): 2 x 0.5 = 1.0 over a delay of 0.
    ref = eval_live(tmp_path, preds, labels, "--judge", "none", "--reference", "--k", "0", "--alpha", "0.5")
    assert ref["settings"]["k"] == 0 and ref["settings"]["alpha"] == 0.5
    assert ref["summary"]["timediff_mean"] == pytest.approx(1.0)
    # PAUC, lexical judge, start score 0.5, embodia's counting: replies at 3 ("goal!": ROUGE-L
    # with "a goal by kane save" 1/3 -> score 2, y 1) and 9 ("goal! again": 2/7 -> y 1). At
    # omega 0 the area is 3 x 0.5 + 6 x 1 + 3 x 1 = 10.5 of 12 x 2: 0.4375.
    ours = eval_live(tmp_path, preds, labels, "--start-score", "0.5", name="ours")
    assert ours["settings"]["start_score"] == 0.5
    assert ours["summary"]["pauc_omega_0"] == pytest.approx(0.4375)
    # The reference's first reply is the filler at 0 ("...": no tokens, y 0), which ends the
    # start score at once: 0 + 3 x 0 + 6 x 1 + 3 x 1 = 9 of 24: 0.375.
    ref = eval_live(tmp_path, preds, labels, "--start-score", "0.5", "--reference", name="ref-pauc")
    assert ref["summary"]["pauc_omega_0"] == pytest.approx(0.375)


def test_a_prediction_without_a_label_is_an_error_or_left_out_as_the_reference_does(
    tmp_path: Path, labels: Path
) -> None:
    orphan = record("c", 10, "pred", {"2": "nobody labelled this"})
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED), orphan)
    args = ["eval", "live", "--pred", str(preds), "--label", str(labels), "--out", str(tmp_path / "r.json")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert f"{preds} line 2: no label for clip c [0, 10]" in result.output.replace("\n", "")
    assert "Traceback" not in result.output
    # The reference's F1/TimeDiff script skips it; its PAUC script counts it as a clip with no
    # judged reply, start_score / 2 = 0. Clip A's PAUC (reference counting): replies "..." at 0
    # (y 0), "goal! ..." at 3 (merged with the filler at 4: ROUGE-L 1/3, y 1), "... goal! ...
    # again" at 9 (2/7, y 1); the empty seconds 5 and 12 are no replies. Areas over 12 x 2:
    # omega 0: 0 + 6 + 3 = 9 -> 0.375; omega 0.5 (x at 0, 1.5, 4.5): 3 + 7.5 -> 0.4375; omega 1:
    # 12 -> 0.5. Means over A and the orphan: 0.1875, 0.21875, 0.25.
    ref = eval_live(tmp_path, preds, labels, "--reference")
    assert ref["counts"]["preds_without_label"] == 1 and ref["counts"]["evaluated_clips"] == 1
    assert ref["summary"]["f1_macro"] == pytest.approx(4 / 9)
    assert ref["pauc"]["overall"]["clips"] == 2
    assert ref["pauc"]["overall"]["mean_auc"] == pytest.approx({"0": 0.1875, "0.5": 0.21875, "1": 0.25})
    assert [j["prediction"] for j in ref["clips"][0]["pauc"]["judgments"]] == [
        "...",
        "... goal! ...",
        "... goal! ... again",
    ]


def test_a_caption_is_left_out_of_the_references_pauc(tmp_path: Path) -> None:
    labels = write(
        tmp_path / "labels.jsonl", record("a", 12, "label", A_LABEL), record("d", 4, "label", {"2": "kick"})
    )
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED), record("d", 4, "pred", "kick"))
    # The caption "kick" speaks over [0, 4]: TP 1 of 5 seconds, F1 1/3, in both countings. For
    # PAUC embodia says it at 0: ROUGE-L 1 -> y 2 from x 0, area 1.0; A scores 0.375 (omega 0, as
    # above; embodia's replies at 3 and 9 give the same area). Mean (0.375 + 1) / 2.
    ours = eval_live(tmp_path, preds, labels, name="ours")
    assert ours["clips"][1]["f1"]["f1"] == pytest.approx(1 / 3)
    assert ours["summary"]["pauc_omega_0"] == pytest.approx(1.375 / 2)
    # The reference's PAUC reads per-second predictions only: A alone.
    ref = eval_live(tmp_path, preds, labels, "--reference", name="ref")
    assert ref["clips"][1]["f1"]["f1"] == pytest.approx(1 / 3)
    assert ref["pauc"]["overall"]["clips"] == 1 and ref["summary"]["pauc_omega_0"] == pytest.approx(0.375)


class RecordingJudge(LexicalPairwiseJudge):
    """The lexical pairwise judge, keeping the texts it was shown."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[tuple[str, str]] = []

    def compare(self, a: str, b: str, reference: str) -> PairJudgment:
        self.shown.append((a, b))
        return super().compare(a, b, reference)


def test_the_references_judge_is_shown_a_per_second_baseline_unflattened(tmp_path: Path) -> None:
    labels = write(tmp_path / "labels.jsonl", record("e", 5, "label", {"1": "kane scores"}))
    preds = write(tmp_path / "preds.jsonl", record("e", 5, "pred", {"1": "kane scores"}))
    baseline = write(tmp_path / "baseline.jsonl", record("e", 5, "pred", {"1": "kane", "2": "scores"}))
    # Flattened, both say "kane scores" (ROUGE-L 1 each): two ties, win rate 0.
    ours = eval_live(tmp_path, preds, labels, "--baseline", str(baseline), name="ours")
    assert ours["win_rate"]["overall"] | {"clips": 1} == {
        "clips": 1, "judgments": 2, "wins": 0, "losses": 0, "ties": 2, "invalid": 0, "win_rate": 0.0,
    }  # fmt: skip
    # The reference hands its judge the baseline's dict: "{'1': 'kane', '2': 'scores'}", tokens
    # [1, kane, 2, scores], LCS 2 with [kane, scores]: P 1/2, R 1, F 2/3 < 1: two wins, 100 %.
    ref = eval_live(tmp_path, preds, labels, "--baseline", str(baseline), "--reference", name="ref")
    assert ref["win_rate"]["overall"]["wins"] == 2 and ref["win_rate"]["overall"]["win_rate"] == 100.0
    judge = RecordingJudge()
    evaluate_files(preds, labels, None, pairwise_judge=judge, baseline_path=baseline, counting="reference")
    assert judge.shown == [
        ("kane scores", "{'1': 'kane', '2': 'scores'}"),
        ("{'1': 'kane', '2': 'scores'}", "kane scores"),
    ]


def test_a_one_record_file_is_read_in_both_countings(tmp_path: Path) -> None:
    # A one-line JSONL file is one JSON object, which the reference's PAUC reader takes for the
    # whole file and then fails on; embodia reads it as one record. Values as above for clip A.
    labels = write(tmp_path / "labels.jsonl", record("a", 12, "label", A_LABEL))
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED))
    ref = eval_live(tmp_path, preds, labels, "--reference")
    assert ref["summary"]["f1_macro"] == pytest.approx(4 / 9)
    assert ref["summary"]["timediff_mean"] == pytest.approx(0.2)
    assert ref["pauc"]["overall"]["mean_auc"] == pytest.approx({"0": 0.375, "0.5": 0.4375, "1": 0.5})
    ours = eval_live(tmp_path, preds, labels, name="ours")
    assert ours["summary"]["f1_macro"] == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--k", "-1"], "k (TimeDiff's tolerance in seconds) must be a whole number >= 0, got -1"),
        (["--alpha", "nan"], "alpha (TimeDiff's penalty per second) must be a number >= 0, got nan"),
        (["--start-score", "3"], "start_score (PAUC's score before a reply) must lie in [0, 2], got 3.0"),
    ],
)
def test_bad_settings_are_refused_in_one_line(
    tmp_path: Path, labels: Path, flags: list[str], message: str
) -> None:
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED))
    args = ["eval", "live", "--pred", str(preds), "--label", str(labels), "--out", str(tmp_path / "r.json")]
    result = runner.invoke(app, [*args, *flags])
    assert result.exit_code == 2 and message in result.output.replace("\n", "")
    assert "Traceback" not in result.output and not (tmp_path / "r.json").exists()


def test_a_resume_refuses_another_counting(tmp_path: Path, labels: Path) -> None:
    preds = write(tmp_path / "preds.jsonl", record("a", 12, "pred", A_PRED))
    out = tmp_path / "r.json"
    records = tmp_path / "r.clips.jsonl"
    first = eval_live(tmp_path, preds, labels, "--judge", "none", name="r")
    lines = records.read_text().splitlines()
    records.write_text("\n".join(lines[:-1]) + "\n")  # cut before it finished
    args = [
        "eval",
        "live",
        "--pred",
        str(preds),
        "--label",
        str(labels),
        "--out",
        str(out),
        "--judge",
        "none",
    ]
    result = runner.invoke(app, [*args, "--resume", "--reference"])
    assert result.exit_code == 2
    assert "counting: 'embodia' -> 'reference'" in result.output.replace("\n", "")
    result = runner.invoke(app, [*args, "--resume"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == first
