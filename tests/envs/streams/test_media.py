"""Run media: the subtitled stream video and the speaking timeline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import numpy as np
import pytest
from numpy.typing import NDArray

from embodia.envs.streams.core import Annotation, Stream, StreamError
from embodia.envs.streams.media import (
    Subtitler,
    Utterance,
    as_utterances,
    lines_at,
    timeline_png,
    timing_f1,
    write_subtitled_video,
)

SHADES = [(40, 60, 90), (90, 40, 40), (40, 90, 40), (70, 70, 20), (20, 70, 70), (60, 30, 80)]


class ShadeSource:
    """Second ``s`` is a solid SHADES[s]: plain frames whose upscaled pixels are known."""

    name = "shades"
    size = (64, 96)
    duration = float(len(SHADES))

    def frames_at(self, times: Sequence[float]) -> list[NDArray[np.uint8]]:
        return [np.full((*self.size, 3), SHADES[int(t)], np.uint8) for t in times]

    def hud_at(self, time: float) -> dict[str, Any] | None:
        return None


def shade_stream() -> Stream:
    record = {
        "video_path": "shades.mp4",
        "video_begin": 0,
        "video_end": len(SHADES),
        "active_speaker": {"name": "CASTER"},
        "metadata": {"tag": "Solo commentators"},
        "annotations": [{"role": "assistant", "speaker": "CASTER", "start": 1, "end": 2, "text": "A hit!"}],
    }
    return Stream(ShadeSource(), Annotation.from_record(record))


def test_utterances_and_what_is_on_screen_when() -> None:
    assert as_utterances({3: "Go.", 1: " ...", 2: "Nice ..."}) == [
        Utterance(2, "", "Nice"),
        Utterance(3, "", "Go."),
    ]
    said = as_utterances({1: ("A", "one"), 2: ("B", "two"), 3: ("A", "three")})
    assert [u.speaker for u in said] == ["A", "B", "A"]
    assert lines_at(said, 0) == []
    assert lines_at(said, 1) == [Utterance(1, "A", "one")]
    assert lines_at(said, 2) == [Utterance(1, "A", "one"), Utterance(2, "B", "two")]  # co-casters stack
    assert lines_at(said, 3) == [
        Utterance(2, "B", "two"),
        Utterance(3, "A", "three"),
    ]  # A's new line replaces
    assert lines_at(said, 5) == []  # held for 2 s only
    assert lines_at(said, 5, hold=3) == [Utterance(3, "A", "three")]
    with pytest.raises(StreamError, match="Utterance"):
        as_utterances([(1, "A", "x")])


def bottom(frame: NDArray[np.uint8]) -> NDArray[np.int16]:
    """The subtitle band: the lowest sixth of the picture."""
    return frame[-frame.shape[0] // 6 :].astype(np.int16)


def test_subtitles_are_drawn_only_where_a_line_is_shown() -> None:
    subtitler = Subtitler((64, 96), speakers=["CASTER"])
    assert subtitler.size == (360, 540)
    frame = ShadeSource().frames_at([0.0])[0]
    plain = subtitler.plain(frame)
    assert plain.shape == (360, 540, 3) and (plain == SHADES[0]).all()

    silent = subtitler.render(frame, subtitler.overlay(7, [], None))
    assert np.array_equal(bottom(silent), bottom(plain))
    assert not np.array_equal(silent[:30, -80:], plain[:30, -80:])  # the clock, top right
    assert np.array_equal(silent[:30, :200], plain[:30, :200])  # no true line: nothing top left

    line = [Utterance(7, "CASTER", "and he takes the tower with a long wrapped line of commentary " * 3)]
    spoken = subtitler.render(frame, subtitler.overlay(7, line, "the true line"))
    changed = np.abs(spoken.astype(np.int16) - plain).sum(axis=2) > 0
    assert changed[-60:].any() and not changed[150:200].any()  # a band at the bottom, not the middle
    rows = np.nonzero(changed[:, 270])[0]
    assert rows.max() > 340 and rows[rows > 100].min() < 300  # long text wrapped onto several lines
    assert changed[:30, :200].any()  # the true line, top left
    white = (spoken[-60:] > 230).all(axis=2)
    assert white.any()  # white text on the dark box

    two = [Utterance(6, "CASTER", "first"), Utterance(7, "SPEAKER_1", "second")]
    stacked = subtitler.render(frame, subtitler.overlay(7, two, None))
    one = subtitler.render(frame, subtitler.overlay(7, two[1:], None))

    def top_of(image: NDArray[np.uint8]) -> int:
        """The highest changed row below the clock."""
        changed = (np.abs(image.astype(np.int16) - plain).sum(axis=2) > 0)[100:].any(axis=1)
        return int(np.nonzero(changed)[0].min())

    assert top_of(stacked) < top_of(one)  # the second speaker's line sits above


def test_the_subtitled_video_has_every_frame_and_lines_where_said(tmp_path: Path) -> None:
    stream = shade_stream()
    said = [Utterance(1, "CASTER", "What a play!"), Utterance(4, "CASTER", "He is down.")]
    path = write_subtitled_video(stream, said, tmp_path / "out" / "stream.mp4", labels=stream.label)
    assert path.is_file()
    subtitler = Subtitler(stream.source.size)
    frames = imageio.mimread(path, memtest=False)
    assert len(frames) == len(stream) * 2
    assert {f.shape for f in frames} == {(360, 540, 3)}
    diff = []
    for i, frame in enumerate(frames):
        second = i // 2
        plain = subtitler.plain(stream.source.frames_at([float(second)])[0])
        diff.append(float(np.abs(bottom(frame) - bottom(plain)).mean()))
    shown = [d > 3.0 for d in diff]  # codec noise on flat colour is well under that
    assert shown == [s in (1, 2, 4, 5) for s in range(len(stream)) for _ in range(2)]

    # A {second: text} prediction dict works too, and at another frame rate.
    one_fps = write_subtitled_video(stream, {2: "Hello"}, tmp_path / "one.mp4", fps=1)
    assert len(imageio.mimread(one_fps, memtest=False)) == len(stream)
    with pytest.raises(StreamError, match="whole number"):
        write_subtitled_video(stream, {}, tmp_path / "bad.mp4", fps=1.5)


def test_timeline_rows_show_the_seconds_of_each_set(tmp_path: Path) -> None:
    pred, label = {101, 102, 103, 107}, {102, 103, 104}
    timeline = timeline_png(
        pred,
        label,
        tmp_path / "timeline.png",
        duration=10,
        begin=100,
        title="solo: test",
        extra_rows={"queries": {105}},
    )
    assert timeline.f1 == pytest.approx(2 * 2 / 7) == timing_f1(pred, label)
    assert timeline.rows == ("true", "pred", "queries")
    image = imageio.imread(timeline.path)[..., :3]
    assert image.shape[:2] == timeline.size == (226, 1200)

    def filled(row: str, second: int) -> bool:
        y, x = timeline.pixel(row, second)
        return bool((image[y, x] < 200).any())  # a bar, not the white background

    for second in range(100, 110):
        assert filled("true", second) == (second in label), second
        assert filled("pred", second) == (second in pred), second
        assert filled("queries", second) == (second == 105), second
    assert timeline_png([], [], tmp_path / "empty.png", duration=5).f1 is None
    with pytest.raises(StreamError, match="duration"):
        timeline_png([], [], tmp_path / "bad.png", duration=0)
