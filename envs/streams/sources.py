"""Stream specs, as the CLI's ``--source`` takes them.

=================================================  =========================================
``procedural:arena,seed=3[,duration=120]``         a game embodia renders (``arena``,
                                                   ``dungeon``), labelled from its event log
``video:clip.mp4,labels=clip.jsonl[,index=0]``     a video file with annotation records in
                                                   the reference's format
=================================================  =========================================

Both give the same :class:`~embodia.envs.streams.core.Stream`; ``begin``/``end`` cut a
clip out of either.
"""

from __future__ import annotations

from typing import Any

from embodia.envs.streams.core import DEFAULT_FPS, SCENARIOS, TAGS, Scenario, Stream, StreamError

_PROCEDURAL_OPTIONS = {"seed": int, "duration": float, "begin": int, "end": int, "height": int, "width": int}
_VIDEO_OPTIONS = {"labels": str, "index": int, "max_side": int}


def _options(text: str, allowed: dict[str, Any], spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise StreamError(f"source {spec!r}: option {part!r} must look like key=value")
        if key not in allowed:
            raise StreamError(f"source {spec!r}: unknown option {key!r} (known: {', '.join(allowed)})")
        try:
            out[key] = allowed[key](value)
        except ValueError:
            raise StreamError(
                f"source {spec!r}: {key}={value!r} is not a valid {allowed[key].__name__}"
            ) from None
    return out


def check_scenario(scenario: str) -> Scenario:
    if scenario not in SCENARIOS:
        raise StreamError(f"unknown scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")
    return scenario


def open_stream(spec: str, scenario: str = "solo", fps: float = DEFAULT_FPS) -> Stream:
    """The stream a spec names, labelled for ``scenario``: procedural games write that
    scenario's ground truth; a video's record carries its own tag, which must agree."""
    kind, colon, rest = spec.partition(":")
    if not colon:
        raise StreamError(
            f"source {spec!r} must look like procedural:arena,seed=3 or video:clip.mp4,labels=clip.jsonl"
        )
    if kind == "procedural":
        from embodia.envs.streams.games import make_game

        name, _, options_text = rest.partition(",")
        options = _options(options_text, _PROCEDURAL_OPTIONS, spec)
        size = None
        if "height" in options or "width" in options:
            size = (options.get("height", 144), options.get("width", 256))
        game = make_game(
            name.strip(), seed=options.get("seed", 0), duration=options.get("duration", 120.0), size=size
        )
        annotation = game.annotation(
            check_scenario(scenario), begin=options.get("begin", 0), end=options.get("end")
        )
        return Stream(game, annotation, fps=fps)
    if kind == "video":
        from embodia.envs.streams.video import open_video_stream

        path, _, options_text = rest.partition(",")
        options = _options(options_text, _VIDEO_OPTIONS, spec)
        if "labels" not in options:
            raise StreamError(f"source {spec!r} needs labels=ANNOTATIONS.jsonl")
        stream = open_video_stream(
            path.strip(),
            options["labels"],
            index=options.get("index", 0),
            fps=fps,
            max_side=options.get("max_side"),
        )
        tagged, wanted = stream.annotation.scenario, check_scenario(scenario)
        if tagged != wanted:
            raise StreamError(
                f"the clip's annotation is tagged {stream.annotation.tag!r}, the tag of --scenario {tagged}, "
                f"not {wanted}: pass --scenario {tagged} (the tag is {TAGS[wanted]!r} for {wanted})"
            )
        return stream
    raise StreamError(f"source {spec!r}: unknown kind {kind!r} (procedural or video)")
