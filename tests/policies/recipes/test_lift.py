"""LIFT (``policies/recipes/lift.py``): segmentation, the generator's replies (malformed ones
included), retries, the streamed training on the tiny LM that learns a needle it never sees in
context, resume, and bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from fact_qa import FactQAPolicy

from embodia.core.chat import Completion, PolicyError
from embodia.core.tool_calls import ToolCall
from embodia.policies.recipes import lift
from embodia.policies.scripted import ScriptedPolicy

NEEDLE = "The secret code of the lighthouse is 4821."
QUESTION = {"question": "What is the secret code of the lighthouse?", "answer": "4821"}


def _document(tmp_path: Path, filler: int = 12) -> Path:
    words = " ".join(f"Sentence {i} is about the weather on the coast." for i in range(filler))
    path = tmp_path / "coast.txt"
    path.write_text(f"{words} {NEEDLE} {words}", encoding="utf-8")
    return path


def _reply(text: str = "", calls: Sequence[ToolCall] = ()) -> Completion:
    return Completion(
        text=text,
        finish_reason="stop",
        prompt_tokens=0,
        completion_tokens=0,
        latency_s=0.0,
        tool_calls=tuple(calls),
    )


def test_segmentation_keeps_abbreviations_and_decimals() -> None:
    text = 'Dr. Smith paid 3.5 dollars. "Yes," she said! Why?\n\nA new paragraph\nends here. 2 more.'
    assert lift.segment_sentences(text) == [
        "Dr. Smith paid 3.5 dollars.",
        '"Yes," she said!',
        "Why?",
        "A new paragraph\nends here.",
        "2 more.",
    ]
    assert lift.segment_sentences("One. Two. Three.", max_sentence_chars=9) == ["One. Two.", "Three."]
    assert lift.segment_sentences("no full stop at all") == ["no full stop at all"]


def test_a_passage_reaches_back_to_context_chars() -> None:
    sentences = ["aaaa.", "bbbb.", "cccc.", "dddd."]
    assert lift.passage(sentences, 3, context_chars=12) == "bbbb. cccc. dddd."
    assert lift.passage(sentences, 0, context_chars=100) == "aaaa."
    assert lift.passage(sentences, 2, context_chars=0) == "cccc."


@pytest.mark.parametrize(
    ("reply", "pairs"),
    [
        (_reply('{"qa_list": [{"question": "Q1?", "answer": "A1"}]}'), [{"question": "Q1?", "answer": "A1"}]),
        (_reply('```json\n{"qa_list": []}\n```'), []),
        (_reply('[{"question": " Q? ", "answer": " A "}]'), [{"question": "Q?", "answer": "A"}]),
        (
            _reply(
                calls=[ToolCall("c0", "submit_qa", {"qa_list": [{"question": "Q", "answer": "A"}] * 3}, "")]
            ),
            [{"question": "Q", "answer": "A"}] * 2,  # cut to the count asked for
        ),
    ],
)
def test_generator_replies_that_are_read(reply: Completion, pairs: list[dict[str, str]]) -> None:
    assert lift.read_qa_reply(reply, count=2) == pairs


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (_reply('{"qa_list": [{"question": "Q1?", "answer": "A1"}'), "not JSON"),  # cut off
        (_reply("Sure! Here are some questions: 1. What"), "not JSON"),
        (_reply('{"pairs": []}'), 'no "qa_list"'),
        (_reply('{"qa_list": [{"question": "", "answer": "A"}]}'), r"qa_list\[0\] needs"),
        (_reply('{"qa_list": ["What?"]}'), r"qa_list\[0\] is not an object"),
        (
            _reply(calls=[ToolCall("c0", "submit_qa", None, '{"qa_list": [', error="truncated JSON")]),
            "truncated",
        ),
    ],
)
def test_malformed_generator_replies_are_named(reply: Completion, problem: str) -> None:
    with pytest.raises(lift.LIFTError, match=problem):
        lift.read_qa_reply(reply, count=5)


def _generator(policy: Any, retries: int = 2) -> lift.TaskGenerator:
    return lift.TaskGenerator(
        policy, tasks_per_sentence=2, context_chars=100, concurrency=1, max_retries=retries, max_tokens=64
    )


def test_an_unreadable_reply_is_asked_again() -> None:
    policy = ScriptedPolicy(["not json", '{"qa_list": [{"question": "Q?", "answer": "A"}]}'])
    generator = _generator(policy)
    assert generator.pairs(["One."], 0) == [{"question": "Q?", "answer": "A"}]
    assert (generator.calls, generator.retries) == (2, 1)


def test_a_generator_that_never_answers_in_form_stops_the_run_naming_the_sentence() -> None:
    generator = _generator(ScriptedPolicy(["I cannot help with that."], loop=True), retries=1)
    with pytest.raises(lift.LIFTError, match=r"sentence 1: no usable .* after 2 tries .*'I cannot help"):
        generator.pairs(["One.", "Two."], 1)


def test_the_request_forces_the_qa_tool() -> None:
    policy = ScriptedPolicy(['{"qa_list": []}'])
    _generator(policy).pairs(["First one.", "Second one."], 1)
    request = policy.requests[0]
    assert request.tool_choice == {"name": "submit_qa"}
    assert request.tools[0]["function"]["parameters"]["properties"]["qa_list"]["maxItems"] == 2
    assert request.messages[-1]["content"] == "Passage:\nFirst one. Second one."


def test_the_transformers_generator_writes_valid_pairs_under_the_schema(tiny_chat_lm_dir: Path) -> None:
    from embodia.policies.spec import make_policy

    # random weights: the pairs are noise, but the grammar holds the reply to the schema
    generator = _generator(make_policy(f"hf:{tiny_chat_lm_dir}"), retries=0)
    generator.max_tokens = 400
    pairs = generator.pairs(["The code of the door is 12."], 0)
    assert len(pairs) <= 2
    assert all(set(pair) == {"question", "answer"} for pair in pairs)


def _settings(model: Path, document: Path, **changes: Any) -> lift.LIFTSettings:
    values: dict[str, Any] = {
        "model": f"hf:{model}",
        "document": str(document),
        "generator": "scripted:unused.jsonl",
        "epochs": 20,
        "learning_rate": 3e-3,
        "batch_size": 5,
        "concurrency": 2,
    }
    return lift.LIFTSettings(**(values | changes))


@pytest.mark.slow
def test_lift_learns_a_needle_it_never_sees_in_context(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    summary = lift.run_lift(
        _settings(tiny_chat_lm_dir, _document(tmp_path)),
        tmp_path / "run",
        questions=[QUESTION],
        generator=FactQAPolicy(),
    )
    assert summary["sentences"] == 25 and summary["pairs"] == 5 and summary["generator_calls"] == 25
    assert summary["train_loss_last"] < 0.1 * summary["train_loss_first"]
    assert summary["accuracy"] == 1.0
    tasks = [json.loads(line) for line in (tmp_path / "run" / "tasks.jsonl").read_text().splitlines()]
    assert sorted(t["sentence"] for t in tasks) == list(range(25))
    # the training records hold the question, never the document
    parts = summary["ttft_parts_s"]
    assert summary["ttft_s"] >= parts["training"] + parts["load"] + parts["first_token"]
    (answer,) = [json.loads(line) for line in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert answer["correct"] and "4821" in answer["reply"]
    # the untrained model does not know it
    from embodia.policies.spec import make_policy

    (before,) = lift.answer_questions(make_policy(f"hf:{tiny_chat_lm_dir}"), "coast", [QUESTION], 16)
    assert not before["correct"]


class _FailsAfter:
    """The fact writer, until ``calls`` calls have been made; then every call fails."""

    def __init__(self, calls: int) -> None:
        self.inner, self.left, self.name = FactQAPolicy(), calls, "fails-after"

    def complete(self, messages: Sequence[Any], images: Sequence[Any] = (), **options: Any) -> Completion:
        if self.left <= 0:
            raise PolicyError("the server went away")
        self.left -= 1
        return self.inner.complete(messages, images, **options)


@pytest.mark.slow
def test_a_run_whose_generator_failed_resumes_with_the_pairs_it_has(
    tiny_chat_lm_dir: Path, tmp_path: Path
) -> None:
    settings = _settings(tiny_chat_lm_dir, _document(tmp_path, filler=3), concurrency=1, max_retries=0)
    with pytest.raises(lift.LIFTError, match="server went away"):
        lift.run_lift(settings, tmp_path / "run", generator=_FailsAfter(4))
    kept = (tmp_path / "run" / "tasks.jsonl").read_text().splitlines()
    assert len(kept) == 4
    again = FactQAPolicy()
    summary = lift.run_lift(settings, tmp_path / "run", resume=True, generator=again, questions=[QUESTION])
    assert again.calls == 7 - 4  # only the sentences not yet asked about
    assert summary["resumed"] and summary["pairs"] == 5 and summary["accuracy"] == 1.0


def test_an_empty_document_is_refused(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(lift.LIFTError, match="is empty: there is nothing to learn"):
        lift.run_lift(_settings(tiny_chat_lm_dir, empty), tmp_path / "run", generator=FactQAPolicy())
    assert not (tmp_path / "run").exists()


def test_a_model_folder_without_tokenizer_is_refused(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((tiny_chat_lm_dir / name).read_bytes())
    with pytest.raises(lift.LIFTError, match="tokenizer"):
        lift.run_lift(_settings(bare, _document(tmp_path, 2)), tmp_path / "run", generator=FactQAPolicy())


def test_a_generator_returning_malformed_json_stops_the_run(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    scripted = ScriptedPolicy(['{"qa_list": [{"question": "Q?"'], loop=True)
    with pytest.raises(lift.LIFTError, match=r"sentence \d+: no usable .*not JSON"):
        lift.run_lift(
            _settings(tiny_chat_lm_dir, _document(tmp_path, 2), max_retries=1),
            tmp_path / "run",
            generator=scripted,
        )


def test_settings_name_the_bad_value(tmp_path: Path) -> None:
    with pytest.raises(lift.LIFTError, match="hf:DIR"):
        lift.LIFTSettings(model="openai:http://x/v1?model=m", document="d.txt", generator="scripted:x")
    with pytest.raises(lift.LIFTError, match="epochs"):
        lift.LIFTSettings(model="hf:m", document="d.txt", generator="scripted:x", epochs=0)
    with pytest.raises(lift.LIFTError, match="no document"):
        lift.LIFTSettings(model="hf:m", document=" ", generator="scripted:x")


def test_questions_file_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "Q?", "answer": "A"}\n{"q": "x"}\n', encoding="utf-8")
    with pytest.raises(lift.LIFTError, match=r"line 2: expected"):
        lift.read_questions(str(path))
    path.write_text('{"question": "Q?"}\n', encoding="utf-8")
    assert lift.read_questions(str(path)) == [{"question": "Q?"}]


def test_answers_are_matched_ignoring_case_and_spacing() -> None:
    assert lift.answer_contains("The code is  4821 .", "4821")
    assert lift.answer_contains("PARIS", "paris")
    assert not lift.answer_contains("482", "4821")


def test_a_failed_training_stops_the_generation(tmp_path: Path) -> None:
    # the model folder does not exist: training fails at once, and no more pairs are asked for
    writer = FactQAPolicy(delay_s=0.1)
    settings = _settings(tmp_path / "no-model", _document(tmp_path, filler=20), concurrency=2)
    with pytest.raises(lift.LIFTError, match="no-model"):
        lift.run_lift(settings, tmp_path / "run", generator=writer)
    assert writer.calls < 10  # of 41 sentences


@pytest.mark.slow
def test_a_run_resumes_with_its_folder_named_another_way(
    tiny_chat_lm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tiny_chat_lm_dir, _document(tmp_path, filler=2), epochs=2)
    monkeypatch.chdir(tmp_path)
    lift.run_lift(settings, Path("run"), generator=FactQAPolicy())
    (tmp_path / "run" / "summary.json").unlink()
    again = lift.run_lift(settings, tmp_path / "run", resume=True, generator=FactQAPolicy())
    assert again["resumed"] and again["pairs"] == 5
