"""A tiny hand-made stream for tests of the stream env and agents: a dark picture that
flashes white in seconds 3, 10, 17, ... with a HUD counter that steps at 7, 14, ...; the
caster's true lines start in the flash seconds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.envs.streams.core import TAGS, Annotation, Line, Stream


class FlashSource:
    name = "flash"
    size = (36, 48)

    def __init__(self, duration: float = 40.0, period: int = 7, phase: int = 3) -> None:
        self.duration = duration
        self.period = period
        self.phase = phase

    def frames_at(self, times: Sequence[float]) -> list[NDArray[np.uint8]]:
        out = []
        for t in times:
            frame = np.full((*self.size, 3), 40, np.uint8)
            frame[0, 0] = int(t * 10) % 256  # every frame differs a little, by its time
            if int(t) % self.period == self.phase:
                frame[4:, :] = 250
            out.append(frame)
        return out

    def hud_at(self, time: float) -> dict[str, Any] | None:
        return {"clock": int(time), "score": int(time) // self.period}


def flash_stream(duration: int = 40, scenario: str = "solo", **kwargs: Any) -> Stream:
    source = FlashSource(float(duration), **kwargs)
    lines = [
        Line("assistant", "CASTER", s, s + 1, f"what a flash at {s}")
        for s in range(source.phase, duration, source.period)
    ]
    if scenario == "co-commentary":
        lines += [
            Line("user", "SPEAKER_1", s + 2, s + 3, "indeed") for s in range(source.phase, duration - 2, 7)
        ]
    if scenario == "guidance":
        lines += [Line("user", "user", 5, 5, "where now?"), Line("assistant", "CASTER", 6, 7, "go left")]
    tag = {"solo": TAGS["solo"], "co-commentary": TAGS["co-commentary"], "guidance": TAGS["guidance"]}[
        scenario
    ]
    annotation = Annotation(
        "flash.mp4", 0, duration, duration, {"name": "CASTER", "persona": []}, lines, {"tag": tag}
    )
    return Stream(source, annotation)


def annotation_record(
    video_path: str,
    begin: int,
    end: int,
    duration: int,
    annotations: list[dict[str, Any]],
    metadata: dict[str, Any],
    speaker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One record of annotation JSONL in the reference's format, as a user writes it; the
    agent is SPEAKER_0, a lead caster, unless ``speaker`` says otherwise."""
    if speaker is None:
        speaker = {"name": "SPEAKER_0", "persona": ["lead caster"]}
    return {
        "video_path": video_path,
        "video_begin": begin,
        "video_end": end,
        "video_duration": duration,
        "history": "",
        "active_speaker": speaker,
        "metadata": metadata,
        "annotations": annotations,
    }
