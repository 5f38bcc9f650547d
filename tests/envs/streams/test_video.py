"""Video files as frame sources: timing, sequential decoding, seeking, errors, annotations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import imageio_ffmpeg
import numpy as np
import pytest
from numpy.typing import NDArray
from streams import annotation_record

from embodia.envs.streams import video as video_module
from embodia.envs.streams.core import SCENARIO_OF_TAG, FrameSource, StreamError
from embodia.envs.streams.video import VideoSource, find_record, open_video_stream

SECONDS, FPS, HEIGHT, WIDTH = 8, 10, 64, 96
COLOURS = [
    (255, 0, 0),
    (0, 200, 0),
    (0, 0, 255),
    (255, 255, 0),
    (255, 0, 255),
    (0, 255, 255),
    (128, 128, 128),
    (255, 128, 0),
]
"""Second ``s`` is a solid COLOURS[s]; a white square at x = 8 * (frame index % 10)."""


def write_clip(path: Path, seconds: int = SECONDS, fps: int = FPS) -> Path:
    writer = imageio.get_writer(path, fps=fps, codec="libx264", quality=8, macro_block_size=16)
    for i in range(seconds * fps):
        frame = np.empty((HEIGHT, WIDTH, 3), np.uint8)
        frame[:] = COLOURS[(i // fps) % len(COLOURS)]
        x = 8 * (i % 10)
        frame[40:48, x : x + 8] = 255
        writer.append_data(frame)
    writer.close()
    return path


def colour_of(frame: NDArray[np.uint8]) -> int:
    """The second a frame's colour says (nearest colour, so codec noise does not matter)."""
    mean = frame[4:28].reshape(-1, 3).mean(axis=0)
    return int(np.argmin([np.abs(mean - np.array(c)).sum() for c in COLOURS]))


def step_of(frame: NDArray[np.uint8]) -> int:
    """The frame's index within its second, from where the white square is."""
    white = (frame[40:48] > 200).all(axis=2)
    return int(round((np.nonzero(white)[1].mean() - 3.5) / 8))


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_clip(tmp_path_factory.mktemp("video") / "clip.mp4")


def record(video_path: str, begin: int, end: int, duration: int = SECONDS) -> dict[str, Any]:
    """A record in the reference's format: the agent (CASTER) and a co-caster."""
    return annotation_record(
        video_path,
        begin,
        end,
        duration,
        [
            {
                "role": "assistant",
                "speaker": "CASTER",
                "start": begin + 1,
                "end": begin + 2,
                "text": "Red wins.",
            },
            {"role": "user", "speaker": "SPEAKER_1", "start": begin + 2, "end": begin + 3, "text": "Indeed."},
        ],
        {"tag": "Multiple commentators", "dataset_name": "test"},
        speaker={"name": "CASTER", "persona": ["calm"]},
    )


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_metadata_and_the_frame_at_each_time(clip: Path) -> None:
    with VideoSource(clip) as source:
        assert isinstance(source, FrameSource)
        assert source.name == "clip.mp4"
        assert source.duration == pytest.approx(SECONDS)
        assert source.fps == pytest.approx(FPS)
        assert source.size == (HEIGHT, WIDTH)
        assert source.frame_count == SECONDS * FPS
        assert source.hud_at(1.0) is None
        for second in range(SECONDS):
            frames = source.frames_at([second, second + 0.5])
            assert [f.shape for f in frames] == [(HEIGHT, WIDTH, 3)] * 2
            assert [colour_of(f) for f in frames] == [second, second]
            assert [step_of(f) for f in frames] == [0, 5]
        # Times between frames give the frame on screen; times off the ends are clamped.
        assert step_of(source.frames_at([2.29])[0]) == 2
        assert step_of(source.frames_at([0.3])[0]) == 3  # 0.3 * 10 is 2.9999...: the 1e-6 nudge
        last = source.frames_at([100.0])[0]
        assert (colour_of(last), step_of(last)) == (SECONDS - 1, 9)
        with pytest.raises(ValueError):
            last[0, 0, 0] = 0  # the cache hands out its own arrays: read-only


def test_reading_a_stream_forward_decodes_each_frame_once(clip: Path, tmp_path: Path) -> None:
    labels = write_jsonl(tmp_path / "labels.jsonl", [record("LOL/clip.mp4", 0, SECONDS)])
    stream = open_video_stream(clip, labels)
    source = stream.source
    assert isinstance(source, VideoSource)
    seen = []
    for chunk in stream.chunks():
        seen.append([(colour_of(f), step_of(f)) for f in chunk.frames])
        assert chunk.hud is None
    assert seen == [[(s, 0), (s, 5)] for s in range(SECONDS)]
    last_index = (SECONDS - 1) * FPS + 5
    assert source.decoded == last_index + 1 and source.reopens == 0
    # Going back within the cache window costs nothing.
    assert [colour_of(f) for f in stream.chunk(2).frames] == [2, 2]
    assert source.decoded == last_index + 1 and source.reopens == 0
    source.close()


def test_going_back_past_the_cache_reopens_the_decoder(clip: Path) -> None:
    with VideoSource(clip, cache_seconds=0.5) as source:
        assert [colour_of(f) for f in source.frames_at([5.0, 6.0])] == [5, 6]
        assert source.reopens == 0
        back = source.frames_at([1.0, 1.5])
        assert [(colour_of(f), step_of(f)) for f in back] == [(1, 0), (1, 5)]
        assert source.reopens == 1
        assert source.decoded == 61 + 6  # it seeked to frame 10: frames 0..9 were not decoded again
        # And it carries on forward from there.
        assert [(colour_of(f), step_of(f)) for f in source.frames_at([2.0, 2.5])] == [(2, 0), (2, 5)]
        assert source.reopens == 1 and source.decoded == 61 + 6 + 10


def test_a_long_jump_forward_seeks(clip: Path) -> None:
    with VideoSource(clip, seek_seconds=1.0) as source:
        frame = source.frames_at([6.3])[0]
        assert (colour_of(frame), step_of(frame)) == (6, 3)
        assert source.reopens == 1 and source.decoded == 2  # frame 0 at opening, then frame 63
        # A short step forward decodes on without reopening.
        assert [step_of(f) for f in source.frames_at([6.5, 6.8])] == [5, 8]
        assert source.reopens == 1


def test_max_side_downscales(clip: Path) -> None:
    with VideoSource(clip, max_side=48) as source:
        assert source.size == (32, 48)
        frame = source.frames_at([3.5])[0]
        assert frame.shape == (32, 48, 3) and frame.dtype == np.uint8
        assert colour_of(np.asarray(np.repeat(np.repeat(frame, 2, 0), 2, 1))) == 3
    with VideoSource(clip, max_side=500) as source:  # never upscales
        assert source.size == (HEIGHT, WIDTH)


def test_metadata_without_a_duration_falls_back_to_counting(
    clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = imageio_ffmpeg.read_frames

    def no_duration(*args: Any, **kwargs: Any) -> Any:
        frames = real(*args, **kwargs)
        meta = next(frames)
        yield {**meta, "duration": 0}
        yield from frames

    monkeypatch.setattr(imageio_ffmpeg, "read_frames", no_duration)
    with VideoSource(clip) as source:
        assert source.duration == pytest.approx(SECONDS)
        assert source.frame_count == SECONDS * FPS
        assert colour_of(source.frames_at([7.5])[0]) == 7


@pytest.mark.parametrize("seek_seconds", [10.0, 1.0])
def test_metadata_that_overstates_the_length_is_clamped_to_the_frames_there_are(
    clip: Path, monkeypatch: pytest.MonkeyPatch, seek_seconds: float
) -> None:
    """Container durations count audio too; asking past the last frame gives the last frame,
    whether the decoder runs into the end (sequential) or seeks past it."""
    real = imageio_ffmpeg.read_frames

    def longer(*args: Any, **kwargs: Any) -> Any:
        frames = real(*args, **kwargs)
        yield {**next(frames), "duration": 12.0}
        yield from frames

    monkeypatch.setattr(imageio_ffmpeg, "read_frames", longer)
    with VideoSource(clip, seek_seconds=seek_seconds) as source:
        assert source.frame_count == 120
        frame = source.frames_at([11.0])[0]
        assert (colour_of(frame), step_of(frame)) == (SECONDS - 1, 9)
        assert source.frame_count == SECONDS * FPS
        assert step_of(source.frames_at([7.3])[0]) == 3


def test_bad_files_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StreamError, match="does not exist"):
        VideoSource(tmp_path / "missing.mp4")
    with pytest.raises(StreamError, match="not a file"):
        VideoSource(tmp_path)
    text = tmp_path / "notes.mp4"
    text.write_text("not a video")
    with pytest.raises(StreamError, match="not a readable video"):
        VideoSource(text)
    with pytest.raises(StreamError, match="max_side"):
        VideoSource(text, max_side=0)

    real = imageio_ffmpeg.read_frames

    def header_only(*args: Any, **kwargs: Any) -> Any:
        yield next(real(*args, **kwargs))  # a video stream that holds no frames

    clip = write_clip(tmp_path / "short.mp4", seconds=1)
    monkeypatch.setattr(imageio_ffmpeg, "read_frames", header_only)
    with pytest.raises(StreamError, match="no frames"):
        VideoSource(clip)


def test_open_video_stream_picks_this_videos_record(clip: Path, tmp_path: Path) -> None:
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [record("other.mp4", 0, 4), record("LOL/clip.mp4", 0, 4), record("LOL/clip.mp4", 4, 8)],
    )
    stream = open_video_stream(clip, labels, index=1, fps=2.0, max_side=48)
    assert (stream.begin, stream.end) == (4, 8)
    assert stream.label == {5: "Red wins."}
    chunk = stream.chunk(6)
    assert [line.speaker for line in chunk.history] == ["SPEAKER_1"]
    assert chunk.frames[0].shape == (32, 48, 3) and colour_of(chunk.frames[0]) == 6

    with pytest.raises(StreamError, match=r"no annotation record is for clip\.mp4.*other\.mp4"):
        open_video_stream(clip, write_jsonl(tmp_path / "other.jsonl", [record("other.mp4", 0, 4)]))
    with pytest.raises(StreamError, match="index 2 is out of range"):
        open_video_stream(clip, labels, index=2)
    too_long = write_jsonl(tmp_path / "long.jsonl", [record("clip.mp4", 0, 12, duration=12)])
    with pytest.raises(StreamError, match="ends at 12 s but clip.mp4 has only 8.0 s"):
        open_video_stream(clip, too_long)
    with pytest.raises(StreamError, match="does not exist"):
        open_video_stream(clip, tmp_path / "missing.jsonl")


def test_find_record_matches_by_file_name_only(tmp_path: Path) -> None:
    from embodia.envs.streams.core import Annotation

    records = [Annotation.from_record(record(p, 0, 4)) for p in ("a/x.mp4", "b/y.mp4", "x.mp4")]
    assert find_record(records, "/home/me/x.mp4").video_path == "a/x.mp4"
    assert find_record(records, "x.mp4", index=1).video_path == "x.mp4"
    assert video_module.DEFAULT_CACHE_SECONDS == 60.0  # the reference's window


def test_a_video_clip_must_be_run_in_its_own_scenario(clip: Path, tmp_path: Path) -> None:
    from embodia.envs.streams.sources import open_stream

    labels = write_jsonl(tmp_path / "labels.jsonl", [record(clip.name, 0, 4)])
    tag = json.loads(labels.read_text())["metadata"]["tag"]
    scenario = SCENARIO_OF_TAG.get(tag, "solo")
    assert open_stream(f"video:{clip},labels={labels}", scenario).annotation.scenario == scenario
    other = next(s for s in ("solo", "guidance") if s != scenario)
    with pytest.raises(StreamError, match=f"pass --scenario {scenario}"):
        open_stream(f"video:{clip},labels={labels}", other)
