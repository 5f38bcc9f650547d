"""The music reward bench's scores against hand-computed values, and the synthetic music and
preference pairs they are measured on: factors that are what they say, derived labels that
rank degraded pieces below clean ones."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from embodia.evals.music_data import (
    DEGRADATIONS,
    Intent,
    MusicDataError,
    MusicSpec,
    alignment,
    musicality,
    preference_pairs,
    render,
    score,
    spec_of,
)
from embodia.evals.reward_bench import (
    RewardBenchError,
    breakdown,
    correlations,
    modality,
    pair_score,
    pairwise_accuracy,
    verdict,
)


def test_pairwise_accuracy_counts_a_tie_on_either_side_as_half() -> None:
    assert [
        pair_score(p, y) for p, y in [("a", "a"), ("a", "b"), ("tie", "a"), ("b", "tie"), ("tie", "tie")]
    ] == [
        1.0,
        0.0,
        0.5,
        0.5,
        1.0,
    ]
    assert pairwise_accuracy(["a", "b", "tie", "a"], ["a", "a", "b", "tie"]) == pytest.approx(
        (1 + 0 + 0.5 + 0.5) / 4
    )
    assert (
        verdict(0.7, 0.2) == "a"
        and verdict(0.2, 0.7) == "b"
        and verdict(0.50, 0.51, tie_margin=0.02) == "tie"
    )
    with pytest.raises(RewardBenchError, match="one of a, b, tie; got 'model_a'"):
        pair_score("model_a", "a")
    with pytest.raises(RewardBenchError, match="finite"):
        verdict(float("nan"), 0.0)


def test_correlations_by_hand() -> None:
    # ranks 1 2 3 4 against 1 3 2 4: one discordant pair of six
    measured = correlations([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0])
    assert measured["spearman"] == pytest.approx(1 - 6 * 2 / (4 * 15))
    assert measured["kendall"] == pytest.approx((5 - 1) / 6)
    x, y = np.array([1.0, 2, 3, 4]), np.array([10.0, 30, 20, 40])
    assert measured["pearson"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert correlations([1.0, 1.0], [1.0, 2.0]) == {"spearman": None, "pearson": None, "kendall": None}


def test_breakdown_and_modality() -> None:
    items = [
        {"instruction": {"lyrics": ""}, "reference": None, "degradation": "key"},
        {"instruction": {"lyrics": "la la"}, "reference": None, "degradation": "key"},
        {"instruction": {"lyrics": ""}, "reference": {"tempo": 100}, "degradation": "rhythm"},
        {"instruction": {"lyrics": "mi"}, "reference": {"tempo": 100}, "degradation": "rhythm"},
    ]
    assert [modality(i) for i in items] == ["T", "L", "A", "C"]
    table = breakdown(items, ["a", "b", "tie", "a"], ["a", "a", "a", "a"], lambda i: i["degradation"])
    assert table == {"key": {"accuracy": 0.5, "pairs": 2.0}, "rhythm": {"accuracy": 0.75, "pairs": 2.0}}


def test_a_piece_plays_its_factors() -> None:
    spec = MusicSpec(tempo=120, tonic=2, mode="minor", notes=8, lyrics=("la", "mi"), seed=1)
    played = score(spec)
    assert all(played.in_key)
    # a beat is half a second at 120 bpm; notes last a beat or half of one, back to back
    assert set(played.lengths) <= {0.5, 0.25}
    assert played.onsets == tuple(np.cumsum([0, *played.lengths[:-1]]))
    audio = render(spec)
    assert audio.dtype == np.float32 and np.abs(audio).max() <= 1.0
    assert len(audio) == pytest.approx(played.duration * 16_000, abs=1)
    # the sung syllables add energy where they fall
    plain = render(replace(spec, lyrics=()))
    assert np.abs(audio[:4000] - plain[: len(audio)][:4000]).max() > 0.05
    off = score(replace(spec, off_key=1.0))
    assert not any(off.in_key)
    with pytest.raises(MusicDataError, match="mode is major or minor"):
        MusicSpec(mode="dorian")


def test_every_degradation_lowers_a_label_and_pairs_name_the_better_side() -> None:
    pairs = preference_pairs(0, 120)
    assert {p["degradation"] for p in pairs} == set(DEGRADATIONS)
    for pair in pairs:
        clean_side = "a" if pair["a"] == _clean(pair) else "b"
        worse_side = "b" if clean_side == "a" else "a"
        labels = pair["labels"]
        # the degraded piece is never better, and worse on at least one dimension
        assert all(labels[worse_side][d] <= labels[clean_side][d] for d in labels["a"]), pair["degradation"]
        assert any(pair["preferred"][d] == clean_side for d in pair["preferred"]), pair["degradation"]
        assert all(pair["preferred"][d] in (clean_side, "tie") for d in pair["preferred"])
    # the same seed makes the same pairs
    assert preference_pairs(0, 5) == pairs[:5]


def _clean(pair: dict) -> dict:
    """The side whose spec has none of the flaws a degradation adds and does what is asked."""
    intent = Intent(**{**pair["intent"], "lyrics": tuple(pair["intent"]["lyrics"])})
    for side in ("a", "b"):
        spec = spec_of(pair[side])
        if (
            alignment(spec, intent) == 1.0
            and spec.off_key == 0
            and spec.regularity == 1
            and spec.clipping == 1
            and spec.lyric_lag == 0
        ):
            return pair[side]
    raise AssertionError(pair)


def test_musicality_and_alignment_by_hand() -> None:
    clean = MusicSpec(tempo=150, tonic=4, mode="major", instrument="pluck", seed=2)
    intent = Intent("fast", 4, "major", "pluck")
    assert musicality(clean) == 1.0 and alignment(clean, intent) == 1.0
    assert alignment(replace(clean, instrument="organ", mode="minor"), intent) == 0.5
    assert musicality(replace(clean, regularity=0.0)) == pytest.approx(0.7)
    assert musicality(replace(clean, clipping=5.0)) == pytest.approx(0.8)


def test_a_wav_clip_is_read_as_mono_at_the_model_rate(tmp_path: Path) -> None:
    from scipy.io import wavfile

    from embodia.evals.reward_bench import read_clip

    t = np.arange(8000) / 8000
    tone = (0.5 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)
    wavfile.write(tmp_path / "tone.wav", 8000, np.stack([tone, tone], axis=1))
    clip = read_clip({"path": "tone.wav"}, tmp_path, 16_000, "pair 1 clip a")
    assert clip.dtype == np.float32 and len(clip) == 16_000
    spectrum = np.abs(np.fft.rfft(clip))
    assert np.argmax(spectrum) == 440  # one second: bin k is k Hz
    assert np.abs(clip).max() == pytest.approx(0.5, abs=0.02)
    with pytest.raises(RewardBenchError, match="pair 1 clip a: cannot read the WAV file"):
        read_clip({"path": "missing.wav"}, tmp_path, 16_000, "pair 1 clip a")


def test_a_bench_file_names_its_bad_pair(tmp_path: Path) -> None:
    from embodia.evals.reward_bench import read_bench

    good = {
        "instruction": {"text": "a slow melody"},
        "a": {},
        "b": {},
        "preferred": {"musicality": "a", "alignment": "tie"},
    }
    bad = {**good, "preferred": {"musicality": "model_a", "alignment": "a"}}
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(
        RewardBenchError, match=r"pair 2: preferred.musicality is one of a, b, tie; got 'model_a'"
    ):
        read_bench(path)
    path.write_text("")
    with pytest.raises(RewardBenchError, match="holds no pairs"):
        read_bench(path)
    labelled = {**good, "labels": {"a": {"musicality": 4.0, "alignment": 2.5}, "b": {"musicality": "high"}}}
    path.write_text(json.dumps(labelled) + "\n")
    with pytest.raises(
        RewardBenchError, match=r"pair 1: labels.b.musicality must be a finite number, got 'high'"
    ):
        read_bench(path)


def test_scores_agree_with_reference_labels_where_every_pair_has_them() -> None:
    from embodia.evals.reward_bench import summarise_verdicts

    def item(a: float, b: float) -> dict:
        labels = {side: {"musicality": v, "alignment": 0.0} for side, v in (("a", a), ("b", b))}
        return {
            "instruction": {"text": "x"},
            "preferred": {"musicality": "a", "alignment": "tie"},
            "labels": labels,
        }

    def row(a: float, b: float) -> dict:
        scores = {side: {"musicality": v, "alignment": v} for side, v in (("a", a), ("b", b))}
        return {
            "scores_a": scores["a"],
            "scores_b": scores["b"],
            "verdict": {"musicality": "a", "alignment": "a"},
        }

    items = [item(3, 1), item(4, 2)]
    rows = [row(0.5, 0.1), row(0.2, 0.3)]  # clips in order: scores 0.5 0.1 0.2 0.3, labels 3 1 4 2
    summary = summarise_verdicts(items, rows)
    agreement = summary["musicality"]["score_agreement"]
    # by hand: score ranks (4, 1, 2, 3), label ranks (3, 1, 4, 2)
    # Spearman 1 - 6 * (1 + 0 + 4 + 1) / (4 * 15) = 0.4; Kendall: 4 concordant, 2 discordant of 6
    assert agreement["spearman"] == pytest.approx(0.4)
    assert agreement["kendall"] == pytest.approx(2 / 6)
    assert summary["alignment"]["score_agreement"]["spearman"] is None  # constant references
    del items[1]["labels"]
    assert "score_agreement" not in summarise_verdicts(items, rows)["musicality"]


def test_the_study_trains_saves_and_the_command_scores_its_bench(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from embodia.cli import app
    from embodia.core.runs import read_run_records
    from embodia.evals.reward_bench import RewardStudySettings, run_reward_study

    settings = RewardStudySettings(
        train_pairs=24, test_pairs=12, steps=6, batch_pairs=4, width=16, text_hidden=16, log_every=2
    )
    out = tmp_path / "study"
    summary = run_reward_study(settings, out)
    assert [r["stage"] for r in read_run_records(out / "study.jsonl")] == ["untrained", "trained"]
    assert [r["step"] for r in read_run_records(out / "metrics.jsonl")] == [2, 4, 6]
    for stage in ("untrained", "trained"):
        for dimension in ("musicality", "alignment"):
            assert 0 <= summary[stage][dimension]["accuracy"] <= 1
        assert set(summary[stage]["musicality"]["by_modality"]) <= {"T", "L", "A", "C"}
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "rewards",
            "--model",
            str(out / "model"),
            "--bench",
            str(out / "bench.jsonl"),
            "--out",
            str(tmp_path / "eval"),
        ],
    )
    assert result.exit_code == 0, result.output
    scored = json.loads((tmp_path / "eval" / "summary.json").read_text())
    # the saved model, scoring the saved bench, agrees with the study's own measurement
    for dimension in ("musicality", "alignment"):
        assert scored[dimension]["accuracy"] == summary["trained"][dimension]["accuracy"]
    assert len(read_run_records(tmp_path / "eval" / "scores.jsonl")) == 12


def test_the_reward_model_learns_musicality_on_held_out_pairs(tmp_path: Path) -> None:
    """A CI-sized run (about a minute): 200 synthetic pairs, 150 steps. On 100 held-out pairs
    (other seeds) musicality is judged clearly above the always-tie baseline (0.5) and above the
    untrained start. Alignment is not asserted: it barely learns at this size (docs/rewards.md)."""
    from embodia.evals.reward_bench import RewardStudySettings, run_reward_study

    settings = RewardStudySettings(train_pairs=200, test_pairs=100, steps=150, width=32, text_hidden=32)
    summary = run_reward_study(settings, tmp_path / "study")
    trained = summary["trained"]["musicality"]["accuracy"]
    untrained = summary["untrained"]["musicality"]["accuracy"]
    assert trained > 0.5 + 0.1, trained
    assert trained > untrained + 0.03, (trained, untrained)
