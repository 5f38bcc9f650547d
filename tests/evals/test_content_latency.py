"""Content-latency metrics against hand-computed streams."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodia.core.interleaved import parse_deltas, parse_interleaved, to_events
from embodia.evals.content_latency import (
    aggregate,
    exact_contradicts,
    naive_early_streaming,
    pareto_front,
    pareto_plot,
    stream_metrics,
    think_then_answer,
)


def test_think_then_answer_vs_naive_early() -> None:
    # think "a b c d e f" (6 tokens) then speak "x = 5" (3): N=9, s_1=6, gaps [6], tail 0
    # E[W] = 6^2 / (2*9) = 2.0; disclosure 3/9; nothing spoken before reasoning ends.
    m = stream_metrics(parse_interleaved(think_then_answer("a b c d e f", "x = 5")))
    assert (m.n_tokens, m.ttfc_tokens, m.mean_gap, m.max_gap, m.tail) == (9, 6, 6.0, 6, 0)
    assert m.expected_wait == pytest.approx(2.0)
    assert m.disclosure_rate == pytest.approx(1 / 3) and m.early_disclosure == 0.0
    assert m.ttfc_frac == pytest.approx(6 / 9) and m.premature_commitment == 0.0
    # naive, k=2: speak [0,2) [2,4) [4,7): s_1 = 0, all gaps 0, E[W] = 0, disclosure 1
    spans = parse_interleaved(naive_early_streaming("a b c d", "x = 5", k=2))
    assert [(s.start, s.end) for s in spans] == [(0, 2), (2, 4), (4, 7)]
    n = stream_metrics(spans)
    assert (n.ttfc_tokens, n.n_updates, n.max_gap, n.expected_wait, n.disclosure_rate) == (0, 3, 0, 0.0, 1.0)


def test_random_observer_known_gaps() -> None:
    # think[0,2) speak[2,3) think[3,7) speak[7,8) think[8,10): N=10, gaps [2, 4], tail 2
    text = "<think>a b</think><speak>s</speak><think>c d e f</think><speak>t</speak><think>g h</think>"
    spans = parse_interleaved(text)
    m = stream_metrics(spans)
    assert (m.ttfc_tokens, m.mean_gap, m.max_gap, m.tail) == (2, 3.0, 4, 2)
    assert m.expected_wait == pytest.approx((4 + 16 + 4) / 20)  # 1.2
    assert stream_metrics(spans, include_tail=False).expected_wait == pytest.approx(20 / 20)
    assert m.early_disclosure == 1.0 and m.disclosure_rate == pytest.approx(0.2)


def test_premature_commitment() -> None:
    spans = parse_interleaved("<speak>x = 4</speak><think>oops, recheck</think><speak>x = 5</speak>")
    assert stream_metrics(spans).premature_commitment == pytest.approx(0.5)  # 1 of 2 chunks
    assert stream_metrics(spans, final="x = 4").premature_commitment == pytest.approx(0.5)
    assert exact_contradicts("The answer is 12.", "\\boxed{13}")
    assert exact_contradicts("answer: B", "(C)") and not exact_contradicts("answer: B", "answer is (B)")
    assert not exact_contradicts("3 + 4 = 7 so far", "x = 5")


def test_unclosed_and_outside_text() -> None:
    spans = parse_interleaved("intro <speak>hello world")
    assert [(s.channel, s.start, s.end, s.closed) for s in spans] == [
        ("think", 0, 1, True),
        ("speak", 1, 3, False),
    ]
    assert stream_metrics(spans).ttfc_tokens == 1
    # an opening tag inside an open span closes it; stray close tags are ignored
    spans = parse_interleaved("<think>a <speak>b</think> c</speak>")
    assert [(s.channel, s.text) for s in spans] == [("think", "a"), ("speak", "b"), ("think", "c")]


def test_empty_and_silent_streams() -> None:
    e = stream_metrics(parse_interleaved(""))
    assert (e.n_tokens, e.ttfc_tokens, e.mean_gap, e.expected_wait, e.premature_commitment) == (
        0,
        None,
        None,
        0.0,
        None,
    )
    s = stream_metrics(parse_interleaved("<think>a b c d</think>"))
    assert s.ttfc_tokens is None and s.ttfc_frac is None and s.early_disclosure is None
    assert s.tail == 4 and s.expected_wait == pytest.approx(2.0)  # N/2


def test_wall_clock_from_deltas() -> None:
    deltas = [(0.5, "<think>a b "), (1.0, "c</think><speak>x"), (1.5, " y</speak>")]
    spans = parse_deltas(deltas)
    assert [(s.start_time_s, s.end_time_s) for s in spans] == [(0.5, 1.0), (1.0, 1.5)]
    m = stream_metrics(spans)
    # first speak token at 1.0 s; gaps_s [1.0]; T = 1.5; E[W]_s = 1 / 3
    assert m.ttfc_s == pytest.approx(1.0) and m.max_gap_s == pytest.approx(1.0)
    assert m.expected_wait_s == pytest.approx(1 / 3)
    ev = to_events(spans)
    assert [(e.token_index, e.channel, e.wall_time_s) for e in ev] == [
        (0, "think", 0.5),
        (1, "think", 0.75),
        (2, "think", 1.0),
        (3, "speak", 1.0),
        (4, "speak", 1.5),
    ]
    assert stream_metrics(parse_interleaved("<speak>x</speak>")).ttfc_s is None


def test_pareto_and_plot(tmp_path: Path) -> None:
    pts = [(1.0, 0.5), (2.0, 0.7), (3.0, 0.6), (0.5, 0.2), (2.0, 0.7)]
    assert pareto_front(pts) == [3, 0, 1, 4]  # (3, 0.6) is dominated by (2, 0.7)
    rows = [
        {"baseline": "tta", "ttfc_tokens": 6, "correct": True},
        {"baseline": "tta", "ttfc_tokens": 8, "correct": False},
        {"baseline": "naive", "ttfc_tokens": None, "correct": False},
    ]
    agg = aggregate(rows)
    assert agg["tta"]["ttfc_tokens"] == 7.0 and agg["tta"]["correct"] == 0.5
    assert agg["naive"]["no_content"] == 1.0 and "ttfc_tokens" not in agg["naive"]
    plot_rows = [{"baseline": k, "accuracy": v["correct"], **v} for k, v in agg.items()]
    out = pareto_plot(plot_rows, tmp_path / "p" / "pareto.png")
    assert out.exists() and out.read_bytes()[:4] == b"\x89PNG"
