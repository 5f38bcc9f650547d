"""CSMR: scripted reasoners against an exact oracle; guards; ablations call the perceiver as
specified."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from embodia.agents.csmr import CAPTION_QUESTION, CSMRError, CSMRSettings, solve
from embodia.perception.scheduler import CropPerceiver, Evidence, OraclePerceiver, QueryGuard, crop
from embodia.policies.scripted import ScriptedPolicy


@dataclass
class Item:
    """A scene of coloured shapes with its ground truth."""

    facts: Mapping[str, Any]
    image: np.ndarray = field(default_factory=lambda: np.zeros((40, 60, 3), np.uint8))


SCENE = Item(
    {
        "objects": [
            {"shape": "cube", "colour": "red"},
            {"shape": "sphere", "colour": "red"},
            {"shape": "cube", "colour": "blue"},
        ]
    }
)


def count_oracle(item: Any, query: Mapping[str, Any]) -> str:
    if query.get("kind") != "count":
        raise ValueError(f"unknown query kind {query.get('kind')!r}")
    filters = query.get("filters", {})
    return str(sum(all(o.get(k) == v for k, v in filters.items()) for o in item.facts["objects"]))


def q(question: str, **filters: str) -> str:
    return json.dumps(
        {"action": "query", "question": question, "query": {"kind": "count", "filters": filters}}
    )


def a(answer: str) -> str:
    return json.dumps({"action": "answer", "answer": answer})


class CountingPerceiver:
    name = "counting"

    def __init__(self) -> None:
        self.questions: list[str] = []

    def look(self, item: Any, question: str, query: Mapping[str, Any] | None = None) -> Evidence:
        self.questions.append(question)
        return Evidence(question, "something", self.name)


def test_scripted_reasoner_reaches_its_answer_in_its_number_of_looks() -> None:
    reasoner = ScriptedPolicy(
        [
            q("How many red objects?", colour="red"),
            q("How many red cubes?", colour="red", shape="cube"),
            a("1"),
        ]
    )
    oracle = OraclePerceiver(count_oracle)
    result = solve(SCENE, "How many red objects are not cubes?", oracle, reasoner)
    assert result.answer == "1" and result.stop == "answered"
    assert result.queries == 2 == oracle.calls
    assert [e["answer"] for e in result.evidence] == ["2", "1"]
    # The reasoner saw the evidence of its looks in its next prompt.
    last_prompt = reasoner.requests[-1].messages[-1]["content"]
    assert "Q: How many red objects? A: 2" in last_prompt and "A: 1" in last_prompt
    assert result.tokens > 0 and result.guards == []


def test_looping_reasoner_trips_the_repeat_guard() -> None:
    reasoner = ScriptedPolicy([q("How many red objects?", colour="red")], loop=True)
    oracle = OraclePerceiver(count_oracle)
    result = solve(SCENE, "?", oracle, reasoner, CSMRSettings(max_queries=6))
    assert oracle.calls == 1  # repeats are answered from the first look
    assert result.repeats == 3 and "repeated" in result.guards
    assert result.stop == "max_queries" and result.answer is None


def test_endless_distinct_questions_trip_max_queries() -> None:
    replies = [q(f"How many objects of kind {i}?", colour=str(i)) for i in range(20)]
    oracle = OraclePerceiver(count_oracle)
    result = solve(SCENE, "?", oracle, ScriptedPolicy(replies), CSMRSettings(max_queries=4))
    assert oracle.calls == 4 and result.stop == "max_queries" and "max_queries" in result.guards


def test_token_budget_and_unreadable_replies_stop_the_item() -> None:
    long = q("How many red objects? " + "please " * 200, colour="red")
    result = solve(
        SCENE,
        "?",
        OraclePerceiver(count_oracle),
        ScriptedPolicy([long], loop=True),
        CSMRSettings(max_tokens=300),
    )
    assert result.stop == "max_tokens" and "max_tokens" in result.guards
    garbage = ScriptedPolicy(["I think it is red", '{"action": "dance"}', '{"action": "query"}'])
    result = solve(SCENE, "?", OraclePerceiver(count_oracle), garbage, CSMRSettings(max_rereads=2))
    assert result.stop == "unreadable" and result.queries == 0
    notes = [r.messages[-1]["content"] for r in garbage.requests[1:]]
    assert "unknown action 'dance'" in notes[1] and "needs a 'question'" not in notes[0]


def test_static_ablation_captions_once_and_never_looks_again() -> None:
    perceiver = CountingPerceiver()
    reasoner = ScriptedPolicy([q("How many?"), a("2")])
    result = solve(SCENE, "How many red?", perceiver, reasoner, CSMRSettings(ablation="static"))
    assert perceiver.questions == [CAPTION_QUESTION] and result.answer == "2"
    assert "no looks left" in reasoner.requests[1].messages[-1]["content"]


def test_always_k_looks_exactly_k_times() -> None:
    perceiver = CountingPerceiver()
    replies = [a("early"), q("one"), q("two"), a("still early"), q("three"), q("four"), a("done")]
    result = solve(
        SCENE, "?", perceiver, ScriptedPolicy(replies), CSMRSettings(ablation="always-k", k=3, max_refusals=5)
    )
    assert perceiver.questions == ["one", "two", "three"] and result.answer == "done"


def test_no_stop_looks_until_the_budget() -> None:
    perceiver = CountingPerceiver()
    replies = [q(f"look {i}") if i % 2 else a("now?") for i in range(12)] + [a("final")]
    result = solve(
        SCENE,
        "?",
        perceiver,
        ScriptedPolicy(replies),
        CSMRSettings(ablation="no-stop", max_queries=3, max_refusals=6),
    )
    assert len(perceiver.questions) == 3 and result.answer in ("now?", "final")


def test_direct_ablation_is_one_look_without_a_reasoner() -> None:
    perceiver = CountingPerceiver()
    result = solve(SCENE, "How many red objects?", perceiver, None, CSMRSettings(ablation="direct"))
    assert perceiver.questions == ["How many red objects?"] and result.answer == "something"
    with pytest.raises(CSMRError, match="needs a reasoner"):
        solve(SCENE, "?", perceiver, None, CSMRSettings())
    with pytest.raises(CSMRError, match="ablation"):
        CSMRSettings(ablation="sometimes")


def test_oracle_needs_a_structured_query_and_reports_bad_ones() -> None:
    oracle = OraclePerceiver(count_oracle)
    assert oracle.look(SCENE, "how many?").answer.startswith("unanswerable")
    assert "unknown query kind" in oracle.look(SCENE, "?", {"kind": "colour"}).answer


def test_oracle_reads_free_questions_through_the_task_parser() -> None:
    from embodia.envs.puzzles.clevr import oracle, parse_question

    read: list[str] = []

    def parse(item: Any, question: str) -> Mapping[str, Any] | None:
        read.append(question)
        return parse_question(question, item.facts)

    perceiver = OraclePerceiver(lambda item, query: str(oracle(item.facts, query)), parse=parse)
    assert perceiver.look(SCENE, "How many red objects are there?").answer == "2"
    assert perceiver.look(SCENE, "Is there a blue cube?").answer == "yes"
    unread = perceiver.look(SCENE, "What is the weather like?").answer
    assert unread.startswith("unanswerable:") and "count, exists, attribute, compare or relation" in unread
    # a structured query is answered as given: the question is not read
    assert perceiver.look(SCENE, "anything", {"kind": "count", "filters": {"shape": "cube"}}).answer == "2"
    assert read == ["How many red objects are there?", "Is there a blue cube?", "What is the weather like?"]
    # a reasoner that asks in plain words reaches its answer
    reasoner = ScriptedPolicy(
        [
            json.dumps({"action": "query", "question": "How many red things are there?"}),
            json.dumps({"action": "query", "question": "how many red blocks?"}),
            a("1"),
        ]
    )
    result = solve(SCENE, "How many red objects are not cubes?", perceiver, reasoner)
    assert [e["answer"] for e in result.evidence] == ["2", "1"] and result.answer == "1"


def test_crop_perceiver_zooms_into_the_region() -> None:
    image = np.zeros((40, 60, 3), np.uint8)
    image[:20, 30:] = 255  # the top right quarter is white
    part = crop(image, [0.5, 0.0, 1.0, 0.5])
    assert part.shape[0] >= 224 and part.mean() > 250
    policy = ScriptedPolicy(["a white square"])
    CropPerceiver(policy).look(Item({}, image), "what is there?", {"region": [0.5, 0.0, 1.0, 0.5]})
    assert policy.requests[0].images[0].mean() > 250
    with pytest.raises(ValueError, match="region"):
        crop(image, [0.5, 0.5, 0.2, 0.9])


def test_guard_normalises_repeated_questions() -> None:
    guard = QueryGuard(max_queries=5)
    guard.record(Evidence("How many red objects?", "2", "oracle"))
    assert guard.earlier("how many  RED objects") is not None and guard.repeats == 1
    assert guard.earlier("How many blue objects?") is None


def call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_the_reasoner_acts_through_native_tool_calls_and_each_is_recorded() -> None:
    """``ask_perception`` goes through the guard to the perceiver, a bad call is answered as an
    unreadable reply and counted, ``answer`` ends the item."""
    oracle = OraclePerceiver(count_oracle)
    reasoner = ScriptedPolicy(
        [
            call(
                "ask_perception",
                question="How many red cubes?",
                query={"kind": "count", "filters": {"colour": "red"}},
            ),
            call("ask_perception", region=[0, 0, 1, 1]),  # no question: against the schema
            call("ask_perception", question="How many red cubes?", query={"kind": "count", "filters": {}}),
            "I think " + call("answer", answer="1"),
        ]
    )
    result = solve(
        SCENE, "How many red objects are not cubes?", oracle, reasoner, CSMRSettings(tool_choice="required")
    )
    assert (result.answer, result.stop, result.queries) == ("1", "answered", 1)
    asked, bad, repeated, answered = result.calls
    assert asked["action"]["query"] == {"kind": "count", "filters": {"colour": "red"}}
    assert "'question' is a required property" in bad["error"] and "action" not in bad
    assert repeated["name"] == "ask_perception" and answered["action"] == {"action": "answer", "answer": "1"}
    assert [e["answer"] for e in result.evidence] == ["2", "2"]  # the repeat answered by the guard
    assert result.evidence[1]["repeated"]
    # the tools were offered with the request, the choice forcing a call
    assert {t["function"]["name"] for t in reasoner.requests[0].tools} == {"ask_perception", "answer"}
    assert reasoner.requests[0].tool_choice == "required"
    assert "unreadable reply: bad ask_perception call" in reasoner.requests[2].messages[-1]["content"]
    assert json.loads(json.dumps(result.to_record()))["calls"] == result.calls


def test_a_required_choice_takes_no_json_action_written_in_text() -> None:
    reasoner = ScriptedPolicy([a("2")], loop=True)
    result = solve(
        SCENE, "?", CountingPerceiver(), reasoner, CSMRSettings(tool_choice="required", max_rereads=1)
    )
    assert result.stop == "unreadable" and result.answer is None
    assert all(c["error"] == "the reply holds no complete call" for c in result.calls)
    with pytest.raises(CSMRError, match="unknown tool choice 'none'"):
        CSMRSettings(tool_choice="none")


def test_a_tiny_random_model_asks_and_answers_with_schema_valid_calls(tiny_chat_lm_dir: Any) -> None:
    """Constrained decoding under ``required``: random weights, yet every call is valid."""
    from embodia.policies.hf import HFPolicy

    reasoner = HFPolicy(tiny_chat_lm_dir)
    perceiver = CountingPerceiver()
    settings = CSMRSettings(tool_choice="required", reply_tokens=320, max_queries=3, max_tokens=20_000)
    result = solve(SCENE, "How many red objects?", perceiver, reasoner, settings)
    assert result.calls and all("error" not in c for c in result.calls), result.calls
    assert {c["name"] for c in result.calls} <= {"ask_perception", "answer"}
    assert perceiver.questions == [e["question"] for e in result.evidence if not e["repeated"]]
    assert result.stop in ("answered", "max_queries", "refused")
