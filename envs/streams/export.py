"""A procedural stream written out as a user's video would come: an MP4 and its annotation
JSONL in the reference's format, so ``--source video:FILE.mp4,labels=FILE.jsonl`` streams
the same clip with the same labels as ``--source procedural:...`` (``embodia stream export``).

The video covers the game from second 0 to the clip's end, ``fps`` frames a second: frame
``i`` is the game at ``i / fps``, which is what :class:`~embodia.envs.streams.video.VideoSource`
hands out for that time. A stream samples its chunks at ``k / stream_fps``, so an ``fps``
that is a multiple of the stream's (10 for the default 2) shows the agent the very frames
the procedural source would, up to H.264's compression.
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from embodia.core.limits import MAX_FPS
from embodia.envs.streams.core import Annotation, StreamError, write_annotations
from embodia.envs.streams.media import video_writer
from embodia.envs.streams.sources import open_stream

EXPORT_FPS = 10


@dataclass(frozen=True)
class Export:
    """What :func:`export_procedural` wrote."""

    video: Path
    labels: Path
    annotation: Annotation
    frames: int
    fps: int
    size: tuple[int, int]
    """(height, width) of every frame."""


def labels_path(video: Path) -> Path:
    """The annotation file written beside ``video``: the same name, ``.jsonl``."""
    return video.with_suffix(".jsonl")


def export_procedural(spec: str, out: Path | str, scenario: str = "solo", fps: int = EXPORT_FPS) -> Export:
    """Write the clip ``spec`` names (a ``procedural:`` source) as ``out`` (an ``.mp4``) and
    its ``scenario`` annotation record as ``out`` with ``.jsonl``; each file replaces an old
    one only once it is complete."""
    out = Path(out)
    if not spec.startswith("procedural:"):
        raise StreamError(f"stream export writes procedural sources (procedural:arena,seed=3), not {spec!r}")
    if out.suffix.lower() != ".mp4":
        raise StreamError(f"--out {out} must name an .mp4 file (its annotations go beside it as .jsonl)")
    if isinstance(fps, bool) or not isinstance(fps, int) or not 1 <= fps <= MAX_FPS:
        raise StreamError(f"--fps must be a whole number of frames a second, 1 to {MAX_FPS}, got {fps!r}")
    stream = open_stream(spec, scenario)
    height, width = stream.source.size
    if height % 2 or width % 2:
        # H.264 in yuv420p halves the colour resolution: odd sides would be padded or cut.
        raise StreamError(f"an exported video needs even frame sides, got height={height}, width={width}")
    record = stream.annotation
    annotation = dataclasses.replace(
        record,
        video_path=out.name,
        video_duration=record.video_end,  # the file holds seconds 0 .. video_end
        metadata={**record.metadata, "source": spec},
    )
    labels = labels_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frames = record.video_end * fps
    # ffmpeg picks the container by the suffix: the hidden partial file keeps ".mp4".
    partial = out.with_name(f".{out.stem}.{os.getpid()}.partial.mp4")
    try:
        writer = video_writer(partial, fps, quality=8)
        try:
            for second in range(record.video_end):
                for frame in stream.source.frames_at([second + i / fps for i in range(fps)]):
                    writer.append_data(frame)
        finally:
            writer.close()
        os.replace(partial, out)
    except BaseException:
        with suppress(OSError):
            partial.unlink()
        raise
    write_annotations(labels, [annotation])
    return Export(out, labels, annotation, frames, fps, (height, width))
