"""Reading choices and labels out of messy model replies, and re-asking when that fails."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from embodia.core.chat import Message
from embodia.core.parsing import (
    MAX_REPLY_CHARS,
    AskRecord,
    Decision,
    FollowUp,
    ParseFailure,
    ask,
    extract_json,
    parse_choice,
    parse_label,
    strip_thinking,
)
from embodia.policies.scripted import ScriptedPolicy

# Replies written the way small chat models actually answer "which waypoint (0-5)?".
# Expected: an int, or a substring of the ParseFailure reason.
CHOICE_TABLE: list[tuple[str, int | str]] = [
    ('{"choice": 3}', 3),
    ('```json\n{"choice": 2}\n```', 2),
    (
        'Sure! Here is my decision:\n```json\n{\n  "choice": 4,\n'
        '  "reason": "the answer is 2 rooms away"\n}\n```\n'
        "Let me know if you need anything else.",
        4,
    ),
    ('```json\n{\n  "choice": 1, // the kitchen door\n  "reason": "unexplored",\n}\n```', 1),
    ("{'choice': 5, 'reason': 'the hallway is open'}", 5),
    ("{choice: 2}", 2),
    ('{"waypoint": "3"}', 3),
    ('{"choice": "waypoint 2"}', 2),
    ('{"choice": [4]}', 4),
    ('{"answer": {"choice": 2}}', 2),
    ('{"Choice": 0}', 0),
    ('First I considered {"choice": 1}.\nOn reflection:\n{"choice": 2}', 2),
    ('{"choice": 2}\nActually, answer: 5', 5),
    ('<think>Waypoint 1 is near, 3 is far and 4 has a door. I pick 3? No.</think>\n{"choice": 4}', 4),
    ("<think>\nThe panorama shows 6 markers.\n</think>\n\nAnswer: 0", 0),
    ("The corridor at 2 looks long.\n</think>\nAnswer: 1", 1),  # opening tag was in the prompt
    ("<think>Marker 2 leads to the kitchen, marker 5 to", "only a <think> block"),
    ("Option 2 looks good but I'll pick 4", 4),
    ("I choose waypoint [2].", 2),
    ("Answer: 3", 3),
    ("**Answer:** 3", 3),
    ("**Answer**: waypoint 5", 5),
    ("The answer is 5.", 5),
    ("Final answer: three", 3),
    ("final answer: **ten**", "choice 10 is not one of 0..5"),
    ("My choice is one.", 1),
    ("I choose one of the doors: waypoint 4", 4),
    ("Let me go with option 3!", 3),
    ("Go to waypoint 1.", 1),
    ("The nearest waypoint is 3 m away, so I go to waypoint 1.", 1),
    ("I would not pick 3; I pick 1.", 1),
    ("I don't want to pick 2, it is a dead end. Waypoint 5 then.", 5),
    ("I would not pick 3.", "only rules out 3"),
    ("Answer: 3\nWait, no. Answer: 1", 1),
    ("Waypoints 1 and 4 are both near doors, 1 is closer.\n\n[4]", 4),
    ("Reasoning: 0 is behind me and 2 is a wall.\n**3**", 3),
    ("Waypoint 3 looks best.", 3),
    ("3", 3),
    ("  [2]\n", 2),
    ("(1)", 1),
    ("three", 3),
    ("✅ 2", 2),
    ("好的！🙂 答案：3", 3),
    ("我选择 2 号点，因为它通向客厅。", 2),
    ('🤔🤔 {"choice": 2} ✅🎉', 2),
    ("Waypoints 1 and 4 both look open.", "several numbers (1, 4)"),
    ("The left side looks more open, I would go left.", "no number"),
    ("", "empty reply"),
    ("   \n\t ", "empty reply"),
    ('{"choice": 3', "cut off"),
    ('{"choice": 3, "reason": "the hallway leads to', 3),
    ('{"choice": 9}', "choice 9 is not one of 0..5"),
    ('{"choice": -1}', "choice -1 is not one of 0..5"),
    ("-1", "choice -1 is not one of 0..5"),
    ("Answer: 2.5", "choice 2.5 is not a whole number"),
    ('{"choice": "left"}', '"left" is not a number'),
    ('{"choice": true}', "true is not a number"),
    ('{"reason": "the corridor"}', "no number"),
]


@pytest.mark.parametrize(("reply", "expected"), CHOICE_TABLE)
def test_parse_choice_on_real_looking_replies(reply: str, expected: int | str) -> None:
    result = parse_choice(reply, 6)
    if isinstance(expected, int):
        assert result == expected, f"{reply!r} -> {result}"
    else:
        assert isinstance(result, ParseFailure), f"{reply!r} parsed to {result}, expected a failure"
        assert expected in result.reason


def test_parse_choice_keys_and_range() -> None:
    assert parse_choice('{"target": 2}', 3, keys=("target",)) == 2
    # without the key the JSON value is not an answer; the lone number still is a mention
    assert parse_choice('{"target": 2, "other": 1}', 3) == ParseFailure(
        "the reply mentions several numbers (1, 2) but gives no explicit answer"
    )
    assert parse_choice("Answer: 0", 1) == 0
    assert parse_choice("Answer: 1", 1) == ParseFailure("choice 1 is not one of 0..0")
    with pytest.raises(ValueError, match="n_options"):
        parse_choice("1", 0)


def test_strip_thinking() -> None:
    assert strip_thinking("<think>a 1 b</think> Answer: 2 ") == "Answer: 2"
    assert strip_thinking("<THINKING>x</THINKING>y<think>z</think>w") == "yw"
    assert strip_thinking("half a thought</think>\nAnswer: 2") == "Answer: 2"
    assert strip_thinking("<think>never closed 3 4 5") == ""
    assert strip_thinking("Answer: 3 <think>second thoughts") == "Answer: 3"
    assert strip_thinking("no tags at all") == "no tags at all"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here:\n```json\n{"a": [1, 2,], "b": "x}y",}\n```\nDone.', {"a": [1, 2], "b": "x}y"}),
        ("{'k': True, 'v': None, 'w': 'it\\'s'}", {"k": True, "v": None, "w": "it's"}),
        ('{"a": 1 /* note */, "b": "http://x/y" // url\n}', {"a": 1, "b": "http://x/y"}),
        ('[1, 2] and then {"z": 3}', {"z": 3}),
        ('{"z": 3} and then [1, 2]', [1, 2]),
        ('prose {not json} {"ok": true}', {"ok": True}),
        ('<think>{"a": 1}</think>no json here', "no JSON object"),
        ('{"a": {"b": 1}', "cut off"),
        ("{oops, not: json: at all}", "no valid JSON"),
        ("", "empty reply"),
    ],
)
def test_extract_json(reply: str, expected: object) -> None:
    result = extract_json(reply)
    if isinstance(expected, str):
        assert isinstance(result, ParseFailure)
        assert expected in result.reason
    else:
        assert result == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("SPEAK", "SPEAK"),
        ("speak", "SPEAK"),
        ("The player is idle, so I stay silent.\nSILENT", "SILENT"),
        ("Answer: SPEAK. (not silent)", "SPEAK"),
        ('{"action": "silent", "why": "nothing happens"}', "SILENT"),
        ("I could SPEAK, but nothing changed, so SILENT.", "SILENT"),
        ("<think>I should SPEAK</think>SILENT", "SILENT"),
        ("The speaker icon is on.", "none of SPEAK, SILENT"),
        ("<think>SPEAK</think>", "only a <think> block"),
    ],
)
def test_parse_label(reply: str, expected: str) -> None:
    result = parse_label(reply, ["SPEAK", "SILENT"])
    if expected in ("SPEAK", "SILENT"):
        assert result == expected
    else:
        assert isinstance(result, ParseFailure)
        assert expected in result.reason


def test_parse_label_rejects_bad_label_sets() -> None:
    with pytest.raises(ValueError, match="at least one"):
        parse_label("x", [])
    with pytest.raises(ValueError, match="differ ignoring case"):
        parse_label("x", ["yes", "YES"])


MESSAGES: list[Message] = [
    {"role": "system", "content": 'Reply as JSON: {"choice": N}.'},
    {"role": "user", "content": "Which waypoint, 0 to 3?"},
]


def _choice_of_4(text: str) -> int | ParseFailure:
    return parse_choice(text, 4)


def test_ask_reasks_twice_then_succeeds() -> None:
    policy = ScriptedPolicy(["I think the left one.", '{"choice": 7}', 'Sorry! {"choice": 2}'])
    image = np.full((4, 6, 3), 200, dtype=np.uint8)
    decision = ask(policy, MESSAGES, [image], _choice_of_4, default=0, format_hint='{"choice": N}')
    assert isinstance(decision, Decision)
    assert decision.value == 2 and not decision.fallback
    assert [a.attempt for a in decision.attempts] == [0, 1, 2]
    assert [a.failure for a in decision.attempts] == [
        "no number in the reply",
        "choice 7 is not one of 0..3",
        None,
    ]
    assert decision.attempts[-1].parsed == 2
    assert decision.attempts[1].reply == '{"choice": 7}'
    # the last request carries the whole repair conversation, and the image every time
    last = policy.requests[-1].messages
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last[2]["content"] == "I think the left one."
    assert (
        last[3]["content"]
        == 'Your reply could not be used: no number in the reply. Reply with {"choice": N} only.'
    )
    assert last[5]["content"].startswith("Your reply could not be used: choice 7 is not one of 0..3.")
    assert all(len(r.images) == 1 and r.images[0] is image for r in policy.requests)
    assert decision.attempts[2].prompt_chars == sum(len(m["content"]) for m in last)
    assert decision.attempts[0].prompt_chars == sum(len(m["content"]) for m in MESSAGES)


def test_ask_falls_back_to_default_after_max_retries() -> None:
    policy = ScriptedPolicy(["no idea"], loop=True)
    decision = ask(policy, MESSAGES, (), _choice_of_4, default=1)
    assert decision.value == 1 and decision.fallback
    assert len(decision.attempts) == 3 and policy.calls == 3
    assert all(a.failure == "no number in the reply" and a.parsed is None for a in decision.attempts)
    assert all(isinstance(a, AskRecord) and a.latency_s >= 0 for a in decision.attempts)


def test_ask_survives_backend_errors() -> None:
    policy = ScriptedPolicy(
        [{"error": "cannot reach the policy server at http://x: connection refused"}, "Answer: 3"]
    )
    decision = ask(policy, MESSAGES, (), _choice_of_4, default=0)
    assert decision.value == 3 and not decision.fallback
    assert (
        decision.attempts[0].failure
        == "policy error: cannot reach the policy server at http://x: connection refused"
    )
    assert decision.attempts[0].reply == ""
    # a backend failure is not the model's fault: the same conversation is sent again
    assert policy.requests[1].messages == policy.requests[0].messages

    down = ScriptedPolicy([])  # raises "ran out of outputs" on every call
    decision = ask(down, MESSAGES, (), _choice_of_4, default=2, max_retries=1)
    assert decision.value == 2 and decision.fallback and len(decision.attempts) == 2
    assert all("ran out of outputs" in (a.failure or "") for a in decision.attempts)


def test_ask_arguments() -> None:
    policy = ScriptedPolicy(["x"], loop=True)
    decision = ask(
        policy, MESSAGES, parse=_choice_of_4, default=0, max_retries=0, max_tokens=7, temperature=0.5
    )
    assert len(decision.attempts) == 1 and decision.fallback
    assert policy.requests[0].max_tokens == 7 and policy.requests[0].temperature == 0.5
    with pytest.raises(TypeError, match="parse function"):
        ask(policy, MESSAGES, default=0)
    with pytest.raises(ValueError, match="max_retries"):
        ask(policy, MESSAGES, parse=_choice_of_4, default=0, max_retries=-1)


def _choice_or_look(text: str) -> int | ParseFailure | FollowUp:
    if "look" in text:
        return FollowUp("You see a door at 2.")
    return _choice_of_4(text)


def test_ask_answers_follow_ups_without_using_re_asks() -> None:
    policy = ScriptedPolicy(["look around", "look again", "nonsense", "Answer: 2"])
    streamed: list[tuple[int, str]] = []
    decision = ask(
        policy,
        MESSAGES,
        (),
        _choice_or_look,
        default=0,
        max_retries=1,
        format_hint='{"choice": N}',
        on_text=lambda attempt, piece: streamed.append((attempt, piece)),
    )
    # Two follow-ups and one failure, within max_retries=1: the answer is the model's.
    assert decision.value == 2 and not decision.fallback
    assert [a.follow_up for a in decision.attempts] == ["You see a door at 2."] * 2 + [None, None]
    assert [a.failure is None for a in decision.attempts] == [True, True, False, True]
    second = policy.requests[1].messages
    assert list(second[-2:]) == [
        {"role": "assistant", "content": "look around"},
        {"role": "user", "content": 'You see a door at 2.\nNow reply with {"choice": N}.'},
    ]
    # every reply streamed, tagged with its attempt
    for attempt, reply in enumerate(["look around", "look again", "nonsense", "Answer: 2"]):
        assert "".join(piece for a, piece in streamed if a == attempt) == reply


def test_ask_counts_follow_ups_past_the_cap_as_failures() -> None:
    policy = ScriptedPolicy(["look"], loop=True)
    decision = ask(policy, MESSAGES, (), _choice_or_look, default=3, max_retries=1, max_follow_ups=2)
    assert decision.value == 3 and decision.fallback
    assert len(decision.attempts) == 4 and policy.calls == 4  # 2 free follow-ups, then 2 failures
    assert [a.failure for a in decision.attempts[2:]] == [
        "2 tool results were given already; an answer is needed"
    ] * 2
    with pytest.raises(ValueError, match="max_follow_ups"):
        ask(policy, MESSAGES, parse=_choice_or_look, default=0, max_follow_ups=-1)


def test_ask_cuts_a_long_reply_and_records_the_cut() -> None:
    long_reply = "Answer: 2 " + "and again " * 10_000  # 100,010 characters of degenerate repetition
    policy = ScriptedPolicy([long_reply, "Answer: 1"])
    seen: list[int] = []

    def parse(text: str) -> int | ParseFailure:
        seen.append(len(text))
        return _choice_of_4(text)

    # (the scripted policy cuts a reply at max_tokens, as a server would)
    decision = ask(policy, MESSAGES, (), parse, default=0, max_reply_chars=1_000, max_tokens=50_000)
    assert decision.value == 2 and seen == [1_000]
    record = decision.attempts[0]
    assert record.reply == long_reply[:1_000] and record.reply_chars == len(long_reply)
    json.dumps(dataclasses.asdict(record))  # records stay JSON-serialisable
    # the default keeps ordinary replies whole and records no cut
    whole = ask(ScriptedPolicy(["Answer: 3"]), MESSAGES, (), _choice_of_4, default=0)
    assert whole.attempts[0].reply_chars is None and MAX_REPLY_CHARS >= 65_536
    cut = ask(ScriptedPolicy([long_reply]), MESSAGES, (), _choice_of_4, default=0, max_tokens=50_000)
    assert cut.attempts[0].reply_chars == len(long_reply) and len(cut.attempts[0].reply) == MAX_REPLY_CHARS
    with pytest.raises(ValueError, match="max_reply_chars"):
        ask(policy, MESSAGES, parse=_choice_of_4, default=0, max_reply_chars=0)


def test_ask_turns_a_parser_exception_into_a_failed_attempt(caplog: pytest.LogCaptureFixture) -> None:
    def broken(text: str) -> int | ParseFailure:
        if text == "boom":
            raise RecursionError("maximum recursion depth exceeded")
        return _choice_of_4(text)

    policy = ScriptedPolicy(["boom", "Answer: 1"])
    with caplog.at_level("ERROR", logger="embodia.core.parsing"):
        decision = ask(policy, MESSAGES, (), broken, default=0)
    assert decision.value == 1 and not decision.fallback
    assert decision.attempts[0].failure == (
        "the reply could not be parsed (RecursionError: maximum recursion depth exceeded)"
    )
    assert "the parser raised RecursionError" in caplog.text
    # and the model is told, as for any unusable reply
    assert "could not be parsed" in policy.requests[1].messages[-1]["content"]


def test_ask_survives_a_deeply_nested_reply() -> None:
    """A 2 KB reply nested 1,000 deep raised RecursionError out of ask() and ended the run."""
    policy = ScriptedPolicy(["[" * 1000 + "]" * 1000, '{"choice": 2}'])
    decision = ask(policy, MESSAGES, (), _choice_of_4, default=0)
    assert decision.value == 2
    assert decision.attempts[0].failure == "the JSON in the reply is nested deeper than 100 levels"
