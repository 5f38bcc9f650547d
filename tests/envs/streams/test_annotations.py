"""Annotation JSONL as people write it by hand: each mistake is an error naming the file, the
line, the field and what it must be."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streams import annotation_record

from embodia.envs.streams.core import TAGS, Annotation, StreamError, read_annotations

_GOOD_LINES = [
    {"role": "assistant", "speaker": "SPEAKER_0", "start": 2, "end": 4, "text": "Goal!"},
    {"role": "user", "speaker": "user", "start": 5, "end": 5, "query": "who scored?"},
]
GOOD = annotation_record("final.mp4", 0, 10, 12, _GOOD_LINES, {"tag": TAGS["solo"], "dataset_name": "mine"})
TAG_LIST = (
    "'Solo commentators' (--scenario solo), 'Multiple commentators' (--scenario co-commentary), "
    "'Guidance' (--scenario guidance)"
)


def _changed(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    record = copy.deepcopy(GOOD)
    change(record)
    return record


def _moved_tag(record: dict[str, Any]) -> None:
    record["tag"] = record.pop("metadata")["tag"]


MISTAKES: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "the scenario name as the tag": (
        lambda r: r["metadata"].update(tag="co-commentary"),
        f"unknown metadata.tag 'co-commentary' (did you mean 'Multiple commentators'?); "
        f"the tag must be one of the exact strings {TAG_LIST}",
    ),
    "the tag in lower case": (
        lambda r: r["metadata"].update(tag="solo commentators"),
        "unknown metadata.tag 'solo commentators' (did you mean 'Solo commentators'?)",
    ),
    "a tag of one's own": (
        lambda r: r["metadata"].update(tag="Play-by-play"),
        f"unknown metadata.tag 'Play-by-play'; the tag must be one of the exact strings {TAG_LIST}",
    ),
    "a tag that is not text": (lambda r: r["metadata"].update(tag=1), "metadata.tag must be a string"),
    "no tag": (lambda r: r["metadata"].pop("tag"), f"metadata has no 'tag': it must be one of {TAG_LIST}"),
    "the tag outside metadata": (_moved_tag, "missing field 'metadata' (the tag goes inside metadata)"),
    "active_speaker as a string": (
        lambda r: r.update(active_speaker="SPEAKER_0"),
        'active_speaker must be an object like {"name": "SPEAKER_0", "persona": ["play-by-play caster"]}, '
        "got a string ('SPEAKER_0')",
    ),
    "active_speaker without a name": (
        lambda r: r.update(active_speaker={"persona": []}),
        "active_speaker.name must be the speaker's name as the annotations write it",
    ),
    "persona as a string": (
        lambda r: r["active_speaker"].update(persona="calm"),
        "active_speaker.persona must be a list of strings, got a string ('calm')",
    ),
    "no active_speaker": (lambda r: r.pop("active_speaker"), "missing field 'active_speaker'"),
    "no video_end": (
        lambda r: r.pop("video_end"),
        "missing field 'video_end'; a record needs video_path, video_begin, video_end, active_speaker, "
        "metadata, annotations",
    ),
    "a clip that ends before it begins": (
        lambda r: r.update(video_begin=10, video_end=5),
        "video_end 5 must be after video_begin 10",
    ),
    "a video shorter than the clip": (
        lambda r: r.update(video_duration=8),
        "video_duration 8 is shorter than the clip's video_end 10",
    ),
    "a line that ends before it starts": (
        lambda r: r["annotations"][0].update(start=6, end=3),
        "annotations[0] ends at 3 before it starts at 6",
    ),
    "a time as a clock string": (
        lambda r: r["annotations"][0].update(start="00:02"),
        "annotations[0] start must be an integer second from 0, got '00:02'",
    ),
    "a line without a start": (lambda r: r["annotations"][0].pop("start"), "annotations[0] has no 'start'"),
    "a query written as text": (
        lambda r: r["annotations"][1].update(text=r["annotations"][1].pop("query")),
        "annotations[1] has 'text' but needs 'query'",
    ),
    "a line without text": (lambda r: r["annotations"][0].pop("text"), "annotations[0] has no 'text'"),
    "a role of one's own": (
        lambda r: r["annotations"][0].update(role="caster"),
        "annotations[0] has role 'caster': expected 'assistant' or 'user'",
    ),
    "annotations as an object": (
        lambda r: r.update(annotations={"0": "Goal!"}),
        "annotations must be a list of lines, got an object",
    ),
    "metadata as a string": (
        lambda r: r.update(metadata="Guidance"),
        "metadata must be an object with a 'tag'",
    ),
}


def test_the_good_record_reads() -> None:
    annotation = Annotation.from_record(GOOD)
    assert annotation.scenario == "solo" and annotation.label() == {2: "Goal!"}
    assert [q.text for q in annotation.queries()] == ["who scored?"]


@pytest.mark.parametrize(("change", "message"), MISTAKES.values(), ids=MISTAKES.keys())
def test_a_mistake_is_named_with_its_line(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], message: str
) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(_changed(change)) + "\n")
    with pytest.raises(StreamError) as error:
        read_annotations(path)
    text = str(error.value)
    assert text.startswith(f"{path} line 3") and message in text
    assert "\n" not in text


def test_files_that_are_not_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{'video_path': 'b.mp4'}\n")
    with pytest.raises(StreamError, match=r"line 2 is not JSON \(Expecting property name"):
        read_annotations(path)
    path.write_text(json.dumps(GOOD, indent=2))  # a pretty-printed record
    with pytest.raises(StreamError, match="line 1 is not JSON .*one JSON document spread over lines"):
        read_annotations(path)
    path.write_text(json.dumps([GOOD, GOOD], indent=1))
    with pytest.raises(StreamError, match="a list of records spread over lines.*one record object per line"):
        read_annotations(path)
    path.write_text(json.dumps([GOOD]) + "\n")  # a list on one line is JSON, but not a record
    with pytest.raises(StreamError, match="line 1: a record must be a JSON object, got a list"):
        read_annotations(path)
    path.write_text("\n\n")
    with pytest.raises(StreamError, match="holds no annotation records"):
        read_annotations(path)


@pytest.mark.parametrize(("scenario", "tag"), TAGS.items())
def test_each_exact_tag_names_its_scenario(scenario: str, tag: str) -> None:
    record = _changed(lambda r: r["metadata"].update(tag=tag))
    assert Annotation.from_record(record).scenario == scenario
