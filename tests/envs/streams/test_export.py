"""`stream export`'s library side: a procedural clip written as a video and annotation JSONL
reads back through the video source with exactly the procedural labels and frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embodia.envs.streams.core import SCENARIOS, Stream, StreamError, read_annotations
from embodia.envs.streams.export import export_procedural
from embodia.envs.streams.sources import open_stream

SPEC = "procedural:arena,seed=3,duration=12"


def _same_labels(video: Stream, procedural: Stream) -> None:
    """Everything a run or a metric reads from the annotation is the procedural one's."""
    a, b = video.annotation, procedural.annotation
    assert a.to_record()["annotations"] == b.to_record()["annotations"]
    assert (a.video_begin, a.video_end, a.active_speaker, a.history, a.tag) == (
        b.video_begin,
        b.video_end,
        b.active_speaker,
        b.history,
        b.tag,
    )
    assert video.label == procedural.label and video.label
    assert a.other_lines() == b.other_lines() and a.queries() == b.queries()
    ours, theirs = a.label_record(), b.label_record()
    assert ours.pop("video_id") == f"arena:{a.video_begin}-{a.video_end}"
    theirs.pop("video_id")
    assert ours == theirs


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_exported_clip_streams_with_the_procedural_labels(tmp_path: Path, scenario: str) -> None:
    written = export_procedural(SPEC, tmp_path / "arena.mp4", scenario)
    assert written.video == tmp_path / "arena.mp4" and written.labels == tmp_path / "arena.jsonl"
    record = json.loads(written.labels.read_text())
    assert record["video_path"] == "arena.mp4" and record["metadata"]["source"] == SPEC
    assert [r.to_record() for r in read_annotations(written.labels)] == [record]
    video = open_stream(f"video:{written.video},labels={written.labels}", scenario)
    _same_labels(video, open_stream(SPEC, scenario))
    assert not list(tmp_path.glob(".*"))  # no partial file left behind


def test_the_video_holds_every_frame_at_its_time(tmp_path: Path) -> None:
    written = export_procedural(SPEC, tmp_path / "arena.mp4", fps=10)
    assert written.frames == 120 and written.size == (144, 256)
    video = open_stream(f"video:{written.video},labels={written.labels}")
    procedural = open_stream(SPEC)
    source = video.source
    assert (source.fps, source.duration, source.size) == (10.0, 12.0, (144, 256))
    assert source.frame_count == 120
    for second in video.seconds:
        ours, theirs = video.chunk(second), procedural.chunk(second)
        assert ours.frame_times == theirs.frame_times
        for frame, truth in zip(ours.frames, theirs.frames, strict=True):
            assert frame.shape == truth.shape == (144, 256, 3)
            # H.264 is lossy: close to the game's frame at that time, a few levels off on average
            assert np.abs(frame.astype(int) - truth.astype(int)).mean() < 6
    # ... and the frame of that very time: a tenth of a second off differs more (players move)
    frame = video.source.frames_at([6.0])[0]
    here, next_one = procedural.source.frames_at([6.0, 6.1])
    assert np.abs(frame.astype(int) - here).mean() < np.abs(frame.astype(int) - next_one).mean()


def test_a_clip_cut_out_of_the_game(tmp_path: Path) -> None:
    spec = "procedural:dungeon,seed=1,duration=20,begin=5,end=15"
    written = export_procedural(spec, tmp_path / "cut.mp4", "guidance", fps=4)
    assert written.frames == 15 * 4  # the video runs from 0 to the clip's end
    video = open_stream(f"video:{written.video},labels={written.labels}", "guidance")
    procedural = open_stream(spec, "guidance")
    assert list(video.seconds) == list(range(5, 15))
    assert video.annotation.video_duration == 15
    assert video.label == procedural.label
    assert video.annotation.to_record()["annotations"] == procedural.annotation.to_record()["annotations"]


def test_an_export_replaces_an_old_one_whole(tmp_path: Path) -> None:
    out = tmp_path / "clip.mp4"
    export_procedural("procedural:arena,seed=1,duration=4", out)
    export_procedural("procedural:arena,seed=2,duration=6", out)
    assert open_stream(f"video:{out},labels={tmp_path / 'clip.jsonl'}").source.duration == 6.0


@pytest.mark.parametrize(
    ("spec", "out", "options", "message"),
    [
        ("video:a.mp4,labels=a.jsonl", "x.mp4", {}, "writes procedural sources"),
        (SPEC, "x.avi", {}, "must name an .mp4 file"),
        ("procedural:arena,seed=3,duration=4,height=145", "x.mp4", {}, "even frame sides"),
        (SPEC, "x.mp4", {"fps": 0}, "--fps"),
        (SPEC, "x.mp4", {"fps": 61}, "--fps"),
        (SPEC, "x.mp4", {"scenario": "karaoke"}, "unknown scenario"),
        ("procedural:chess", "x.mp4", {}, "unknown game"),
    ],
)
def test_what_cannot_be_exported_is_named(
    tmp_path: Path, spec: str, out: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(StreamError, match=message):
        export_procedural(spec, tmp_path / out, **options)
    assert not any(tmp_path.iterdir())
