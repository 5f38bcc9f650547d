"""Token streaming: TextStream's stop handling, and the scripted backend's pieces."""

from __future__ import annotations

import pytest

from embodia.core.chat import TextStream
from embodia.policies.scripted import ScriptedPolicy


def _streamed(pieces: list[str], stops: list[str], close: bool = True) -> list[str]:
    sent: list[str] = []
    stream = TextStream(sent.append, stops)
    for piece in pieces:
        stream.feed(piece)
    if close:
        stream.close()
    return sent


@pytest.mark.parametrize(
    ("pieces", "stops", "joined"),
    [
        (["Answer", ": 3", "\n", "Because"], ["\n"], "Answer: 3"),
        (["Answer: 3 #", "#", "# the rest"], ["###"], "Answer: 3 "),  # a stop split over pieces
        (["a#", "#b", "###c"], ["###"], "a##b"),  # a false start of the stop is sent after all
        (["x", "EN", "D", "y"], ["END", "ENDING"], "x"),  # the first stop to complete cuts
        (["plain", " reply"], [], "plain reply"),
        (["ends with #", "#"], ["###"], "ends with ##"),  # held back, then sent on close
    ],
)
def test_pieces_join_to_the_reply_cut_at_its_stop(pieces: list[str], stops: list[str], joined: str) -> None:
    sent = _streamed(pieces, stops)
    assert "".join(sent) == joined
    assert all(sent), "no empty pieces"


def test_text_that_may_begin_a_stop_is_held_until_known() -> None:
    sent: list[str] = []
    stream = TextStream(sent.append, ["</answer>"])
    stream.feed("3 </ans")
    assert sent == ["3 "]  # "</ans" may be the stop: not sent yet
    stream.feed("wer> and more")
    stream.feed(" never sent")
    stream.close()
    assert sent == ["3 "]


def test_scripted_replies_stream_word_by_word() -> None:
    policy = ScriptedPolicy(["Answer: 2\nBecause the hall is open.", "  spaced   out  "])
    pieces: list[str] = []
    stopped = policy.complete([{"role": "user", "content": "?"}], stop=["hall"], on_text=pieces.append)
    assert stopped.text == "Answer: 2\nBecause the "
    assert pieces == ["Answer:", " 2", "\nBecause", " the", " "]
    pieces.clear()
    spaced = policy.complete([{"role": "user", "content": "?"}], on_text=pieces.append)
    assert "".join(pieces) == spaced.text == "  spaced   out  "
