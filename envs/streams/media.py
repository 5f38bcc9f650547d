"""What a person wants to look at after a stream run: the stream with the agent's lines
burned in (:func:`write_subtitled_video`) and when it spoke against when it should have
(:func:`timeline_png`).

Timing metrics say *that* an agent spoke late or too often; these show *where*, on the
picture the agent saw, so a reviewer can judge whether a line fits what was on screen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.core import SILENCE, Stream, StreamError

Frame = NDArray[np.uint8]
MIN_HEIGHT = 360
HOLD_SECONDS = 2
"""How long a line stays on screen unless the same speaker's next line replaces it."""

_SPEAKER_COLOURS = ((255, 255, 255), (140, 220, 255), (255, 190, 120), (190, 255, 160))
_LABEL_COLOUR = (255, 225, 90)
_BOX = (0, 0, 0, 170)


@dataclass(frozen=True)
class Utterance:
    """One line said at a stream second (on the video's clock), by a named speaker."""

    second: int
    speaker: str
    text: str


Predictions = Sequence[Utterance] | Mapping[int, str] | Mapping[int, tuple[str, str]]
"""What :func:`write_subtitled_video` takes: utterances, or a prediction dict
``{second: text}`` (one unnamed speaker) or ``{second: (speaker, text)}``."""


def as_utterances(predictions: Predictions, speaker: str = "") -> list[Utterance]:
    """Utterances in time order, silent ones (empty, the reference's ``" ..."``) dropped."""
    out: list[Utterance] = []
    if isinstance(predictions, Mapping):
        for second, value in predictions.items():
            if isinstance(value, tuple):
                out.append(Utterance(int(second), str(value[0]), str(value[1])))
            else:
                out.append(Utterance(int(second), speaker, str(value)))
    else:
        for item in predictions:
            if not isinstance(item, Utterance):
                raise StreamError(f"expected Utterance items, got {type(item).__name__}")
            out.append(item)
    spoken = [Utterance(u.second, u.speaker, _spoken(u.text)) for u in out]
    return sorted((u for u in spoken if u.text), key=lambda u: (u.second, u.speaker))


def _spoken(text: str) -> str:
    text = text.strip()
    while text.endswith(SILENCE.strip()):
        text = text[: -len(SILENCE.strip())].rstrip()
    return text


def lines_at(utterances: Sequence[Utterance], second: int, hold: int = HOLD_SECONDS) -> list[Utterance]:
    """What is on screen at ``second``: each speaker's latest line from the last ``hold``
    seconds (a speaker's new line replaces their old one; co-casters' lines stack)."""
    latest: dict[str, Utterance] = {}
    for u in utterances:
        if u.second <= second:
            latest[u.speaker] = u
    return sorted(
        (u for u in latest.values() if second - u.second < hold), key=lambda u: (u.second, u.speaker)
    )


# ---------------------------------------------------------------------- subtitled video


class Subtitler:
    """Draws one stream's frames at a legible size with subtitles, the true line and the
    clock. Separate from the writer so the drawing can be checked pixel for pixel."""

    def __init__(
        self, frame_size: tuple[int, int], min_height: int = MIN_HEIGHT, speakers: Sequence[str] = ()
    ) -> None:
        height, width = frame_size
        scale = max(1.0, min_height / height)
        # Even sides: what H.264 in yuv420p needs, with the least distortion.
        self.size = (_even(height * scale), _even(width * scale))
        self._nearest = scale >= 2  # crisp pixels for small (procedural) frames
        self._speakers = list(dict.fromkeys(speakers))
        out_h = self.size[0]
        self._font = _font(max(12, out_h // 20))
        self._small = _font(max(10, out_h // 28))
        self._margin = max(4, out_h // 60)

    def plain(self, frame: Frame) -> Frame:
        """The frame scaled to :attr:`size`, nothing drawn on it."""
        from PIL import Image

        height, width = self.size
        picture = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8))
        if picture.size != (width, height):
            method = Image.Resampling.NEAREST if self._nearest else Image.Resampling.BILINEAR
            picture = picture.resize((width, height), method)
        return np.asarray(picture.convert("RGB"), dtype=np.uint8)

    def overlay(self, second: int, lines: Sequence[Utterance], label: str | None) -> Any:
        """The second's drawing (a transparent RGBA PIL image), shared by its frames."""
        from PIL import Image, ImageDraw

        height, width = self.size
        layer = Image.new("RGBA", (width, height), (0, 0, 0, 0))
        draw = ImageDraw.Draw(layer)
        m = self._margin
        clock = f"t={second:02d}"
        cw, ch = _text_size(draw, clock, self._small)
        draw.rectangle((width - cw - 3 * m, 0, width, ch + 2 * m), fill=_BOX)
        draw.text((width - cw - 2 * m, m), clock, font=self._small, fill=(255, 255, 255))
        if label:
            wrapped = _wrap(draw, f"true: {label}", self._small, width - cw - 6 * m, max_lines=2)
            tw, th = _block_size(draw, wrapped, self._small)
            draw.rectangle((0, 0, tw + 2 * m, th + 2 * m), fill=_BOX)
            draw.multiline_text((m, m), "\n".join(wrapped), font=self._small, fill=_LABEL_COLOUR, spacing=2)
        named = len({u.speaker for u in lines} | set(self._speakers)) > 1
        bottom = height - m
        for u in reversed(lines):  # the newest line lowest, nearest the eye
            text = f"{u.speaker}: {u.text}" if named and u.speaker else u.text
            wrapped = _wrap(draw, text, self._font, width - 4 * m, max_lines=3)
            tw, th = _block_size(draw, wrapped, self._font)
            top = bottom - th - 2 * m
            left = (width - tw) // 2
            draw.rectangle((left - m, top, left + tw + m, bottom), fill=_BOX)
            draw.multiline_text(
                (left, top + m),
                "\n".join(wrapped),
                font=self._font,
                fill=self._colour(u.speaker),
                spacing=2,
                align="center",
            )
            bottom = top - m
        return layer

    def render(self, frame: Frame, overlay: Any) -> Frame:
        from PIL import Image

        base = Image.fromarray(self.plain(frame)).convert("RGBA")
        return np.asarray(Image.alpha_composite(base, overlay).convert("RGB"), dtype=np.uint8)

    def _colour(self, speaker: str) -> tuple[int, int, int]:
        if speaker not in self._speakers:
            self._speakers.append(speaker)
        return _SPEAKER_COLOURS[self._speakers.index(speaker) % len(_SPEAKER_COLOURS)]


def write_subtitled_video(
    stream: Stream,
    utterances: Predictions,
    path: Path | str,
    *,
    labels: Mapping[int, str] | None = None,
    fps: float | None = None,
    min_height: int = MIN_HEIGHT,
    hold: int = HOLD_SECONDS,
) -> Path:
    """An MP4 of the clip (``fps`` frames a second, the stream's by default) with the
    agent's lines as subtitles from their second for ``hold`` seconds, the true line
    (``labels``, ``{second: text}``) small at the top, and the clock ``t=SS``.

    Frames are drawn and encoded one at a time, so a long stream costs no memory."""
    rate = stream.fps if fps is None else float(fps)
    per_second = round(rate)
    if per_second < 1 or abs(rate - per_second) > 1e-9:
        raise StreamError(f"video fps must be a whole number of frames a second, got {rate}")
    said = as_utterances(utterances)
    truth = as_utterances(labels or {})
    subtitler = Subtitler(stream.source.size, min_height, speakers=[u.speaker for u in said])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = video_writer(path, per_second)
    try:
        for second in stream.seconds:
            true_now = lines_at(truth, second, hold)
            label = " ".join(u.text for u in true_now) or None
            overlay = subtitler.overlay(second, lines_at(said, second, hold), label)
            times = [second + i / per_second for i in range(per_second)]
            for frame in stream.source.frames_at(times):
                writer.append_data(subtitler.render(frame, overlay))
    finally:
        writer.close()
    return path


def video_writer(path: Path, fps: int, quality: int = 7) -> Any:
    """An H.264 MP4 writer (imageio's ffmpeg) taking RGB frames of even sides as they are:
    a macro block of 2 pads nothing, so the file's frames keep the given size."""
    import imageio.v2 as imageio

    return imageio.get_writer(path, fps=fps, codec="libx264", quality=quality, macro_block_size=2)


def _even(value: float) -> int:
    return max(2, 2 * round(value / 2))


@lru_cache(maxsize=16)
def _font(size: int) -> Any:
    """DejaVu Sans (matplotlib ships it; it covers accents and most scripts), else PIL's."""
    from PIL import ImageFont

    try:
        from matplotlib import font_manager

        return ImageFont.truetype(font_manager.findfont("DejaVu Sans", fallback_to_default=True), size)
    except (ImportError, OSError, ValueError):
        return ImageFont.load_default(size)


def _text_size(draw: Any, text: str, font: Any) -> tuple[int, int]:
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    return int(right - left), int(bottom)


def _block_size(draw: Any, lines: Sequence[str], font: Any) -> tuple[int, int]:
    left, top, right, bottom = draw.multiline_textbbox((0, 0), "\n".join(lines), font=font, spacing=2)
    return int(right), int(bottom)


def _wrap(draw: Any, text: str, font: Any, width: int, max_lines: int) -> list[str]:
    """Greedy word wrap to ``width`` pixels; a word wider than a line is cut, text past
    ``max_lines`` ends in an ellipsis (a subtitle is for glancing at, not reading)."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        while draw.textlength(word, font=font) > width and len(word) > 1:
            cut = max(1, len(word) * width // max(1, int(draw.textlength(word, font=font))))
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:cut])
            word = word[cut:]
        trial = f"{current} {word}" if current else word
        if draw.textlength(trial, font=font) <= width:
            current = trial
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1]
        while last and draw.textlength(last + "…", font=font) > width:
            last = last[:-1]
        lines[-1] = last.rstrip() + "…"
    return lines or [""]


# ---------------------------------------------------------------------- timeline


_ROW_COLOURS = ("#2e9e44", "#2f6fd6", "#e08a1e", "#8e44ad", "#7f8c8d", "#d62d20", "#16a085")


@dataclass(frozen=True)
class Timeline:
    """What :func:`timeline_png` drew, with where each row and second landed, so the
    picture can be checked without guessing matplotlib's layout."""

    path: Path
    size: tuple[int, int]
    """(height, width) of the PNG in pixels."""
    rows: tuple[str, ...]
    f1: float | None
    """|P∩L|-based F1 of pred vs true seconds (the reference's timing F1), None when no
    second is labelled."""
    begin: int
    duration: int
    box: tuple[float, float, float, float]
    """The plot area in image pixels: (left, top, right, bottom)."""

    def pixel(self, row: str, second: int) -> tuple[int, int]:
        """(y, x) in the PNG at the middle of ``second`` in ``row``."""
        left, top, right, bottom = self.box
        i = self.rows.index(row)
        x = left + (second + 0.5 - self.begin) / self.duration * (right - left)
        y = top + (i + 0.5) / len(self.rows) * (bottom - top)
        return int(round(y)), int(round(x))


def timing_f1(pred_seconds: Iterable[int], label_seconds: Iterable[int]) -> float | None:
    """The reference's timing F1 over sets of speaking seconds (None: nothing labelled)."""
    from embodia.core.scores import f1

    result = f1(set(pred_seconds), set(label_seconds))
    return None if result is None else result["f1"]


def timeline_png(
    pred_seconds: Iterable[int],
    label_seconds: Iterable[int],
    path: Path | str,
    duration: int,
    begin: int = 0,
    title: str = "",
    extra_rows: Mapping[str, Iterable[int]] | None = None,
) -> Timeline:
    """A strip chart of the seconds ``[begin, begin + duration)``: one row each for the true
    and predicted speaking seconds, then ``extra_rows`` (co-caster lines, queries, dropped
    decisions, ...), each second a filled cell; F1 goes in the title."""
    from matplotlib.figure import Figure  # no pyplot: no global state, Agg via savefig
    from PIL import Image

    if duration < 1:
        raise StreamError(f"a timeline needs a duration of at least 1 second, got {duration}")
    rows: dict[str, set[int]] = {"true": set(label_seconds), "pred": set(pred_seconds)}
    for name, seconds in (extra_rows or {}).items():
        rows[str(name)] = set(seconds)
    f1 = timing_f1(rows["pred"], rows["true"])
    dpi = 100
    width_in, left_in, right_in, top_in, bottom_in = 12.0, 1.6, 0.3, 0.45, 0.55
    height_in = top_in + bottom_in + 0.42 * len(rows)
    fig = Figure(figsize=(width_in, height_in), dpi=dpi)
    ax = fig.add_axes(
        (
            left_in / width_in,
            bottom_in / height_in,
            1 - (left_in + right_in) / width_in,
            1 - (top_in + bottom_in) / height_in,
        )
    )
    end = begin + duration
    for i, seconds in enumerate(rows.values()):
        runs = _runs(sorted(s for s in seconds if begin <= s < end))
        ax.broken_barh(runs, (i - 0.4, 0.8), facecolors=_ROW_COLOURS[i % len(_ROW_COLOURS)], linewidth=0)
    ax.set_xlim(begin, end)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), list(rows))
    ax.set_xlabel("second")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    score = "F1 n/a (nothing labelled)" if f1 is None else f"F1 {f1:.2f}"
    counts = f"true {len(rows['true'])} s, pred {len(rows['pred'])} s"
    ax.set_title(f"{title}    {score}    ({counts})" if title else f"{score}    ({counts})", fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    with Image.open(path) as picture:
        width_px, height_px = picture.size
    box = (
        left_in / width_in * width_px,
        top_in / height_in * height_px,
        (1 - right_in / width_in) * width_px,
        (1 - bottom_in / height_in) * height_px,
    )
    return Timeline(path, (height_px, width_px), tuple(rows), f1, begin, duration, box)


def _runs(seconds: Sequence[int]) -> list[tuple[float, float]]:
    """Consecutive seconds merged into (start, length) bars: fewer patches, no seams."""
    runs: list[tuple[float, float]] = []
    for s in seconds:
        if runs and math.isclose(runs[-1][0] + runs[-1][1], s):
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((float(s), 1.0))
    return runs
