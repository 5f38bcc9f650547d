"""Video files as a :class:`~embodia.envs.streams.core.FrameSource`.

A stream reads a video chunk after chunk, a few frames a second, always forward. So
:class:`VideoSource` keeps one ffmpeg decoder open (through imageio-ffmpeg) and decodes
sequentially: frames in between requested ones are read off the pipe and dropped (never
converted or stored), requested frames are kept in a cache covering the last
``cache_seconds`` of video (the reference pre-decodes 60-s windows). A request behind the
decoder that the cache does not hold, or far ahead of it, reopens the decoder with an
ffmpeg seek rather than decoding from the start.

Frame ``i`` is shown at ``i / fps``; time ``t`` maps to frame ``floor(t * fps + 1e-6)``,
clamped to the video, the frame on screen at ``t``.
"""

from __future__ import annotations

import importlib
import math
from collections import OrderedDict
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.core import DEFAULT_FPS, Annotation, Stream, StreamError, read_annotations

Frame = NDArray[np.uint8]
DEFAULT_CACHE_SECONDS = 60.0
DEFAULT_SEEK_SECONDS = 10.0
"""A forward jump longer than this reopens the decoder at the target (an ffmpeg seek is
cheaper than decoding that much video and throwing it away)."""


class VideoSource:
    """A user's video file: RGB frames by time, no HUD readout.

    ``max_side`` downscales returned frames (PIL, bilinear) so their longest side is at most
    that many pixels; only the frames handed out are resized. ``decoded`` counts frames read
    from the decoder and ``reopens`` how often it was restarted, so callers (and tests) can
    see that reading a stream forward decodes each frame once.
    """

    def __init__(
        self,
        path: Path | str,
        max_side: int | None = None,
        *,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        seek_seconds: float = DEFAULT_SEEK_SECONDS,
    ) -> None:
        self._reader: Generator[Any, None, None] | None = None
        self.path = Path(path)
        self.name = self.path.name
        if not self.path.exists():
            raise StreamError(f"video file {self.path} does not exist")
        if not self.path.is_file():
            raise StreamError(f"video file {self.path} is not a file")
        if max_side is not None and (isinstance(max_side, bool) or int(max_side) != max_side or max_side < 1):
            raise StreamError(f"max_side must be a positive integer, got {max_side!r}")
        self.max_side = None if max_side is None else int(max_side)
        self.cache_seconds = float(cache_seconds)
        self.seek_seconds = float(seek_seconds)
        self.decoded = 0
        self.reopens = 0
        self._next = 0  # index of the frame the open reader yields next
        self._cache: OrderedDict[int, Frame] = OrderedDict()
        self._frame_count: int | None = None  # known exactly once the decoder hit the end

        meta = self._open(0)
        width, height = (int(v) for v in meta["size"])
        fps = float(meta.get("fps") or 0.0)
        duration = float(meta.get("duration") or 0.0)
        if not (fps > 0 and math.isfinite(fps) and duration > 0 and math.isfinite(duration)):
            # Metadata without a rate or length (some containers, raw streams): count instead.
            count, seconds = self._count_frames()
            if count == 0:
                raise StreamError(f"video file {self.path} has no frames")
            if not (fps > 0 and math.isfinite(fps)):
                fps = count / seconds if seconds > 0 else DEFAULT_FPS
            duration = count / fps
            self._frame_count = count
        self.fps = fps
        self.duration = duration
        self.source_size = (height, width)
        self.size = _fitted((height, width), self.max_side)
        first = self._decode_to(0)  # also proves the file decodes to at least one frame
        if first is None:
            raise StreamError(f"video file {self.path} has no frames")
        self._remember(0, first)

    # ------------------------------------------------------------------ FrameSource

    def frames_at(self, times: Sequence[float]) -> list[Frame]:
        """The frame on screen at each time (seconds from the video's start)."""
        return [self.frame(self.index_at(t)) for t in times]

    def hud_at(self, time: float) -> dict[str, Any] | None:
        """A video has no HUD readout: what the HUD shows is only in the picture."""
        return None

    # ------------------------------------------------------------------ by index

    @property
    def frame_count(self) -> int:
        """Frames in the file: exact once the decoder reached the end, else the metadata's."""
        if self._frame_count is not None:
            return self._frame_count
        return max(1, math.floor(self.duration * self.fps + 1e-6))

    def index_at(self, time: float) -> int:
        index = math.floor(float(time) * self.fps + 1e-6)
        return min(max(index, 0), self.frame_count - 1)

    def frame(self, index: int) -> Frame:
        """Frame ``index`` (clamped), from the cache or by decoding forward to it."""
        index = min(max(int(index), 0), self.frame_count - 1)
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        frame = self._decode_to(index)
        if frame is None:  # the metadata promised more frames than the file has
            index = self.frame_count - 1
            cached = self._cache.get(index)
            frame = cached if cached is not None else self._decode_to(index)
        if frame is None:  # a seek landed past the end: count the frames there are, once
            self._frame_count = max(1, self._count_frames()[0])
            index = self._frame_count - 1
            frame = self._decode_to(index)
            if frame is None:
                raise StreamError(f"video file {self.path}: frame {index} cannot be decoded")
        self._remember(index, frame)
        return frame

    def close(self) -> None:
        """Stop the decoder process (it is also stopped when the source is collected)."""
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.close()
            self._reader = None

    def __enter__(self) -> VideoSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VideoSource({str(self.path)!r}, {self.duration:.1f} s at {self.fps:g} fps, size={self.size})"

    # ------------------------------------------------------------------ decoding

    def _open(self, start: int) -> dict[str, Any]:
        """(Re)start the decoder so that it yields frame ``start`` next."""
        self.close()
        params: list[str] = []
        if start > 0:
            # Half a frame early: ffmpeg's seek starts at the first frame at or after it.
            params = ["-ss", f"{(start - 0.5) / self.fps:.6f}"]
        reader = _ffmpeg().read_frames(str(self.path), input_params=params)
        try:
            meta: dict[str, Any] = reader.__next__()
        except (OSError, RuntimeError, StopIteration) as exc:
            reader.close()
            raise StreamError(f"{self.path} is not a readable video: {_ffmpeg_reason(exc)}") from None
        self._reader = reader
        self._next = start
        return meta

    def _decode_to(self, index: int) -> Frame | None:
        """Frame ``index`` from the decoder, or None when the file ends before it."""
        behind = index < self._next
        far = index - self._next > self.seek_seconds * self.fps
        if self._reader is None or behind or far:
            self._open(index)
            self.reopens += 1
        assert self._reader is not None
        while True:
            try:
                data = next(self._reader)
            except StopIteration:
                self._frame_count = self._next if self._next > 0 else self._frame_count
                self.close()
                return None
            except RuntimeError as exc:
                self.close()
                raise StreamError(f"{self.path}: decoding failed near frame {self._next} ({exc})") from None
            self.decoded += 1
            position = self._next
            self._next += 1
            if position == index:
                height, width = self.source_size
                frame = np.frombuffer(data, np.uint8).reshape(height, width, 3)
                return self._resized(frame)

    def _count_frames(self) -> tuple[int, float]:
        try:
            count, seconds = _ffmpeg().count_frames_and_secs(str(self.path))
        except (OSError, RuntimeError, ValueError) as exc:
            raise StreamError(f"{self.path} is not a readable video ({exc})") from None
        return int(count), float(seconds)

    def _resized(self, frame: Frame) -> Frame:
        if self.size == self.source_size:
            return frame.copy()  # frombuffer views are read-only
        from PIL import Image

        height, width = self.size
        picture = Image.fromarray(frame).resize((width, height), Image.Resampling.BILINEAR)
        return np.asarray(picture, dtype=np.uint8).copy()

    def _remember(self, index: int, frame: Frame) -> None:
        """Keep handed-out frames from the last ``cache_seconds`` of video before ``index``
        (read-only: every caller gets the cached array itself)."""
        frame.setflags(write=False)
        self._cache[index] = frame
        self._cache.move_to_end(index)
        horizon = index - self.cache_seconds * self.fps
        for old in [i for i in self._cache if i < horizon]:
            del self._cache[old]


def _ffmpeg() -> Any:
    """imageio's ffmpeg binding, imported when a video is opened (it ships no type hints)."""
    return importlib.import_module("imageio_ffmpeg")


def _ffmpeg_reason(exc: BaseException) -> str:
    """One line out of ffmpeg's log saying why it cannot read a file."""
    text = str(exc)
    if "does not contain any stream" in text:
        return "it has no video stream"
    for line in reversed(text.splitlines()):
        if "Error opening input" in line and ":" in line:
            return line.rsplit(":", 1)[1].strip()
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _fitted(size: tuple[int, int], max_side: int | None) -> tuple[int, int]:
    height, width = size
    if max_side is None or max(height, width) <= max_side:
        return size
    scale = max_side / max(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))


def find_record(records: Sequence[Annotation], video: Path | str, index: int = 0) -> Annotation:
    """The ``index``-th record whose ``video_path`` names this file (by file name, since
    the records carry the dataset's paths, not the user's)."""
    name = Path(video).name
    matches = [r for r in records if Path(r.video_path).name == name]
    if not matches:
        named = sorted({Path(r.video_path).name for r in records})
        shown = ", ".join(named[:5]) + (", ..." if len(named) > 5 else "")
        raise StreamError(f"no annotation record is for {name} (the records name {shown})")
    if not 0 <= index < len(matches):
        raise StreamError(f"index {index} is out of range: {len(matches)} record(s) are for {name}")
    return matches[index]


def open_video_stream(
    video_path: Path | str,
    annotation_path: Path | str,
    index: int = 0,
    fps: float = DEFAULT_FPS,
    max_side: int | None = None,
) -> Stream:
    """A stream of a video file and its clip's annotation record (the reference's JSONL),
    ``index`` choosing among the records for this video (a video has one record per clip)."""
    source = VideoSource(video_path, max_side=max_side)
    try:
        record = find_record(read_annotations(annotation_path), video_path, index)
        return Stream(source, record, fps=fps)
    except StreamError:
        source.close()
        raise
