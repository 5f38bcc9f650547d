"""The run viewer end to end in headless Chromium (Debian's chromium, driven by Playwright):
the list loads the fixture runs, the slider moves every view to the same step, the
comparison shows both runs, a malformed run says what is wrong, and the page reads nothing
outside the runs folder.

Skipped where Chromium or Playwright is missing, unless EMBODIA_REQUIRE_BROWSER=1 (CI), where
that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embodia.core.tool_calls import parse_tool_calls
from embodia.viewer.server import serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _skip_reason() -> str | None:
    if CHROMIUM is None:
        return "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


REASON = _skip_reason()
if REASON and os.environ.get("EMBODIA_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"EMBODIA_REQUIRE_BROWSER=1 but {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(scope="module")
def base(runs_root: Path) -> Iterator[str]:
    with serving(runs_root) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--mute-audio"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert errors == [], errors  # no script error on any page


def steps_of(page: Any) -> dict[str, str]:
    return page.eval_on_selector_all(
        "[data-view]",
        "els => Object.fromEntries(els.map(e => "
        "[e.closest('[data-run-id]').dataset.runId + ':' + e.dataset.view, e.dataset.step]))",
    )


def move_to(page: Any, step: int) -> None:
    page.fill("#step", str(step))
    page.dispatch_event("#step", "input")


def test_the_list_shows_every_run_and_which_are_broken(page: Any, base: str) -> None:
    page.goto(base + "/")
    page.wait_for_selector("#runs")
    ids = page.eval_on_selector_all("#runs tbody tr", "rows => rows.map(r => r.dataset.runId)")
    assert ids == [
        "broken",
        "dsr",
        "duo",
        "garbled-summary",
        "gate",
        "house/frontier",
        "house/going",
        "house/long",
        "house/short",
        "house/vlm",
        "stream",
        "sxs",
    ]
    assert "coverage_ratio" in page.inner_text('tr[data-run-id="house/long"]')
    assert "exact" in page.inner_text('tr[data-run-id="dsr"]')
    assert "episodes.jsonl line 2 is not valid JSON" in page.inner_text('tr[data-run-id="broken"] td.error')


def test_the_slider_moves_every_view_to_the_same_step(page: Any, base: str, runs_root: Path) -> None:
    records = [
        json.loads(x) for x in (runs_root / "house" / "long" / "episodes.jsonl").read_text().splitlines()
    ]
    page.goto(base + "/#/run?id=house/long")
    page.wait_for_selector("#step")
    assert page.get_attribute("#step", "max") == str(len(records))
    views = {"frame", "trajectory", "tree", "coverage", "decision"}
    for step in (3, 1, len(records)):
        move_to(page, step)
        assert steps_of(page) == {f"house/long:{v}": str(step) for v in views}
        text = page.inner_text('[data-view="decision"] .decided')
        assert text.startswith(f"decision {step} of {len(records)}: ")
        # the video shows the frame the decision was made on; the ring sits on the chosen pixel
        video = page.eval_on_selector('[data-view="frame"] video', "v => [v.dataset.frame, v.currentTime]")
        assert video[0] == str(step - 1) and video[1] == pytest.approx((step - 0.5) / 10)
        choice = records[step - 1]["choice"]
        marker = page.eval_on_selector(".marker", "m => [m.style.display, m.style.left, m.style.top]")
        if choice["kind"] == "pixel":
            assert marker[0] == "block"
            assert float(marker[1].rstrip("%")) == pytest.approx(choice["col"] / 128 * 200 / 3, abs=1e-3)
            assert float(marker[2].rstrip("%")) == pytest.approx(choice["row"] / 64 * 100, abs=1e-3)
        else:
            assert marker[0] == "none"
        # the tree shows the waypoints decided so far and no later one
        shown = page.eval_on_selector_all(
            "[data-node^=waypoint]",
            "ns => ns.filter(n => n.style.display !== 'none').map(n => n.dataset.node)",
        )
        assert sorted(shown) == sorted(
            f"waypoint-{d}" for d in range(1, step + 1) if f"waypoint-{d}" in _waypoints(runs_root)
        )
    # the video is streamed from the run's own file, not inlined
    src = page.get_attribute('[data-view="frame"] video', "src")
    assert src == "/files/house/long/episode.mp4"
    assert page.evaluate("document.querySelector('video').readyState") >= 1


def test_each_step_shows_the_prompt_the_raw_answers_the_re_asks_and_the_decision(
    page: Any, base: str, runs_root: Path
) -> None:
    script = (runs_root.parent / "vlm-replies.jsonl").read_text().splitlines()
    # each reply's text apart from its calls, and each call with what it came to
    replies = [parse_tool_calls(json.loads(line)["text"])[0] for line in script]
    records = [
        json.loads(x) for x in (runs_root / "house" / "vlm" / "episodes.jsonl").read_text().splitlines()
    ]
    step = next(i for i, r in enumerate(records, start=1) if r["choice"]["by"] == "vlm")
    page.goto(base + "/#/run?id=house/vlm")
    page.wait_for_selector("#step")
    move_to(page, step)
    panel = '[data-view="decision"]'
    assert "Instruction:" in page.inner_text(f"{panel} pre.prompt")
    assert page.eval_on_selector_all(f"{panel} pre.raw", "ps => ps.map(p => p.textContent)") == replies
    calls = page.eval_on_selector_all(f"{panel} pre.call", "ps => ps.map(p => p.textContent)")
    assert [c.split("(")[0] for c in calls] == ["describe_map", "goto_waypoint", "goto_waypoint"]
    assert "coverage_percent" in calls[0] and "error: invalid index" in calls[1]
    assert calls[2] == 'goto_waypoint({"index":0}) -> {"walking_to":0}'
    headings = page.eval_on_selector_all(f"{panel} .attempt h4", "hs => hs.map(h => h.textContent)")
    assert headings == ["answer", "re-ask 1", "re-ask 2"]
    failed = page.eval_on_selector_all(f"{panel} .attempt.failed", "as => as.length")
    assert failed == 1 and "index" in page.inner_text(f"{panel} .attempt.failed .error")
    assert page.inner_text(f"{panel} .decided").startswith(
        f"decision {step} of {len(records)}: candidate 0 by vlm"
    )


def _waypoints(runs_root: Path) -> set[str]:
    tree = json.loads((runs_root / "house" / "long" / "tree.json").read_text())
    return {n["id"] for n in tree["nodes"] if n["kind"] == "waypoint"}


def test_the_comparison_shows_both_runs_on_one_slider(page: Any, base: str, runs_root: Path) -> None:
    page.goto(base + "/")
    page.wait_for_selector("#runs")
    page.check('tr[data-run-id="house/short"] input')
    page.check('tr[data-run-id="house/long"] input')
    page.click("#compare")
    page.wait_for_selector("#comparison")
    panels = page.eval_on_selector_all("#comparison > [data-run-id]", "ps => ps.map(p => p.dataset.runId)")
    assert sorted(panels) == ["house/long", "house/short"]
    assert "both on procedural:seed=0,rooms=5" in page.inner_text("main")
    maximum = int(page.get_attribute("#step", "max") or 0)
    move_to(page, maximum)
    steps = steps_of(page)
    long_steps = {v for k, v in steps.items() if k.startswith("house/long:")}
    short_steps = {v for k, v in steps.items() if k.startswith("house/short:")}
    short_count = len((runs_root / "house" / "short" / "episodes.jsonl").read_text().splitlines())
    assert short_count < maximum
    assert long_steps == {str(maximum)} and short_steps == {str(short_count)}  # each stops at its own last


def test_a_stream_run_shows_its_timeline_and_lines(page: Any, base: str, runs_root: Path) -> None:
    prediction = json.loads((runs_root / "stream" / "predictions.jsonl").read_text().splitlines()[0])
    spoken = sorted(int(s) for s in prediction["pred"])
    page.goto(base + "/#/run?id=stream")
    page.wait_for_selector("#step")
    move_to(page, spoken[0])
    assert prediction["pred"][str(spoken[0])] in page.inner_text('[data-view="lines"]')
    assert set(steps_of(page).values()) == {str(spoken[0])}
    bars = page.eval_on_selector_all('[data-view="timeline"] rect', "rs => rs.length")
    labels = json.loads((runs_root / "stream" / "labels.jsonl").read_text().splitlines()[0])["label"]
    assert bars == len(prediction["pred"]) + len(labels)


def test_a_co_commentary_run_draws_one_lane_per_speaker(page: Any, base: str, runs_root: Path) -> None:
    preds = [json.loads(x) for x in (runs_root / "duo" / "predictions.jsonl").read_text().splitlines()]
    label = json.loads((runs_root / "duo" / "labels.jsonl").read_text())
    page.goto(base + "/#/run?id=duo")
    page.wait_for_selector('[data-view="timeline"] g[data-lane]')
    lanes = page.eval_on_selector_all(
        '[data-view="timeline"] g[data-lane]', "gs => gs.map(g => g.dataset.lane)"
    )
    assert lanes == ["CASTER", "SPEAKER_1"]
    drawn = page.eval_on_selector_all(
        '[data-view="timeline"] rect',
        "rs => rs.map(r => r.closest('g').dataset.lane + ':' + r.dataset.side)",
    )
    truths = {"CASTER": label["label"], "SPEAKER_1": label["other_speakers"]["SPEAKER_1"]}
    for pred in preds:
        name = pred["speaker"]
        assert drawn.count(f"{name}:said") == len(pred["pred"]) > 0
        assert drawn.count(f"{name}:true") == len(truths[name]) > 0
    # the co-caster's line, said and true, at the second it spoke
    second = min(int(s) for s in preds[1]["pred"])
    move_to(page, second)
    lines = page.inner_text('[data-view="lines"] [data-lane="SPEAKER_1"]')
    assert f"SPEAKER_1 at {second}s: {preds[1]['pred'][str(second)]}" in lines
    assert "SPEAKER_1, true line:" in lines


def test_runs_that_share_no_time_unit_are_not_paired(page: Any, base: str) -> None:
    page.goto(base + "/")
    page.wait_for_selector("#runs")
    page.check('tr[data-run-id="house/short"] input')
    page.check('tr[data-run-id="stream"] input')
    assert page.is_disabled("#compare")
    refused = page.inner_text("#compare-refused")
    assert "house/short steps through exploration steps, stream steps through stream seconds" in refused
    assert "they share no time unit" in refused
    # asked for by address, the page says why instead of a slider that cannot reach second 0
    page.goto(base + "/#/compare?a=house/short&b=stream")
    page.wait_for_selector("#error")
    assert "cannot compare house/short with stream" in page.inner_text("#error")
    assert page.query_selector("#step") is None
    page.goto(base + "/#/compare?a=gate&b=stream")
    page.wait_for_selector("#error >> text=gate has no time axis (a training run)")
    # two streams share seconds: one slider from second 0
    page.goto(base + "/")
    page.wait_for_selector("#runs")
    page.check('tr[data-run-id="stream"] input')
    page.check('tr[data-run-id="duo"] input')
    assert not page.is_disabled("#compare") and page.inner_text("#compare-refused") == ""
    page.click("#compare")
    page.wait_for_selector("#comparison")
    assert page.get_attribute("#step", "min") == "0"
    move_to(page, 0)
    assert set(steps_of(page).values()) == {"0"}


def test_training_curves_are_drawn(page: Any, base: str) -> None:
    page.goto(base + "/#/run?id=gate")
    page.wait_for_selector('[data-view="curve-loss"] polyline')
    points = page.get_attribute('[data-view="curve-loss"] polyline', "points") or ""
    assert len(points.split()) == 15


@pytest.mark.parametrize("run", ["broken", "garbled-summary", "no-such-run"])
def test_a_malformed_run_says_what_is_wrong_instead_of_a_blank_page(page: Any, base: str, run: str) -> None:
    page.goto(base + f"/#/run?id={run}")
    page.wait_for_selector("#error")
    message = page.inner_text("#error")
    expected = {
        "broken": "episodes.jsonl line 2 is not valid JSON",
        "garbled-summary": "summary.json is not valid JSON",
        "no-such-run": "no run 'no-such-run'",
    }[run]
    assert message.startswith(f"cannot show run {run}: ") and expected in message


def test_the_page_cannot_fetch_outside_the_runs_folder(page: Any, base: str) -> None:
    page.goto(base + "/")
    page.wait_for_selector("#runs")
    # Chromium itself folds "../" and "%2e%2e/" out of a URL; these reach the server as written
    paths = (
        "/files/%2Fetc%2Fpasswd",
        "/files/house%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/files/..%2F..%2Fetc%2Fpasswd",
    )
    for path in paths:
        status, body = page.evaluate(
            "async p => { const r = await fetch(p); return [r.status, await r.text()]; }", path
        )
        assert status == 403 and "root:" not in body, (path, status)


def test_arrow_keys_move_one_step_wherever_the_focus_is(page: Any, base: str) -> None:
    page.goto(base + "/#/run?id=house/long")
    page.wait_for_selector("#step")
    move_to(page, 2)
    page.focus("#step")
    page.keyboard.press("ArrowRight")  # the slider's own key handling, once
    assert page.input_value("#step") == "3"
    page.focus("#home")
    page.keyboard.press("ArrowRight")
    assert page.input_value("#step") == "4"
    assert set(steps_of(page).values()) == {"4"}


def test_the_frame_shown_is_the_frame_the_decision_was_made_on(page: Any, base: str, runs_root: Path) -> None:
    """Pixels, not arithmetic: the browser's decoded frame against imageio's frame k - 1."""
    import imageio.v2 as imageio
    import numpy as np

    reader = imageio.get_reader(runs_root / "house" / "long" / "episode.mp4")
    frames = list(reader.iter_data())  # list(reader) asks len(), which ffmpeg does not know
    reader.close()
    page.goto(base + "/#/run?id=house/long")
    page.wait_for_selector("#step")
    for step in (2, 5):
        move_to(page, step)
        page.wait_for_function(
            "() => { const v = document.querySelector('video'); return !v.seeking && v.readyState >= 2; }"
        )
        pixels = page.evaluate(
            """() => { const v = document.querySelector('video');
                 const c = document.createElement('canvas'); c.width = v.videoWidth; c.height = v.videoHeight;
                 const g = c.getContext('2d'); g.drawImage(v, 0, 0);
                 return Array.from(g.getImageData(0, 0, c.width, c.height).data); }"""
        )
        shown = np.array(pixels, dtype=np.float32).reshape(frames[0].shape[0], frames[0].shape[1], 4)[..., :3]
        errors = [float(np.abs(shown - f.astype(np.float32)).mean()) for f in frames]
        assert int(np.argmin(errors)) == step - 1 and errors[step - 1] < 6.0, errors


def test_an_unfinished_video_still_shows_the_run(page: Any, base: str) -> None:
    page.goto(base + "/#/run?id=house/going")
    page.wait_for_selector("#step")
    assert "episode.mp4 cannot be played yet" in page.inner_text(".video-error")
    move_to(page, 2)
    assert set(steps_of(page).values()) == {"2"}


def test_a_dsr_run_shows_its_chart_and_one_row_per_answer(page: Any, base: str, runs_root: Path) -> None:
    page.goto(base + "/#/run?id=dsr")
    page.wait_for_selector("table.rows")
    answers = [json.loads(x) for x in (runs_root / "dsr" / "answers.jsonl").read_text().splitlines()]
    rows = page.eval_on_selector_all("table.rows tr", "rows => rows.map(r => r.innerText)")
    assert len(rows) == 1 + len(answers)  # a header, then one row per answer
    assert all(a["id"] in row for a, row in zip(answers, rows[1:], strict=True))
    page.wait_for_function(  # the chart loads: it is served from the run's folder
        "() => { const i = document.querySelector('img[alt=\"report.png\"]');"
        " return i !== null && i.complete && i.naturalWidth > 0; }",
        timeout=10_000,
    )
