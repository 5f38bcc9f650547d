"""SxS trajectory builder on hand-made examples."""

from __future__ import annotations

import json
from pathlib import Path

from embodia.policies.recipes.sxs_data import (
    align,
    build_trajectory,
    derived_claim_support,
    numeric_support,
    render,
    split_answer,
    table_support,
    to_sft_record,
    write_jsonl,
)

# Problem: 3 boxes of 4 apples, plus 5 apples, then double.
STEPS = [
    "There are 3 boxes with 4 apples each.",  # 1
    "3 * 4 = 12 apples in boxes.",  # 2
    "Check the loose apples: there are 5.",  # 3
    "12 + 5 = 17 apples.",  # 4
    "Doubling: 17 * 2 = 34.",  # 5
]
ANSWER = "The boxes hold 12 apples. In total there are 34 apples. We double 17 to get 34."


def test_split_answer() -> None:
    assert split_answer(ANSWER) == [
        "The boxes hold 12 apples.",
        "In total there are 34 apples.",
        "We double 17 to get 34.",
    ]
    assert split_answer("a 3.5 b.\nStep 2.") == ["a 3.5 b.", "Step 2."]


def test_monotone_interleaving_with_table() -> None:
    # chunk A needs 2 steps, chunk B needs 5, chunk C alone would need only 4 (supported early)
    # but must come after B -> prefix 5; chunk D is never supported -> end.
    chunks = ["A", "B", "C", "D"]
    sup = table_support({"A": 2, "B": 5, "C": 4, "D": None})
    assert align(STEPS, chunks, sup) == [2, 5, 5, None]
    segs = build_trajectory(STEPS, chunks, sup)
    assert [(s.channel, s.steps) for s in segs] == [
        ("think", (0, 2)),
        ("speak", (0, 2)),
        ("think", (2, 5)),
        ("speak", (0, 5)),
        ("speak", (0, 5)),
        ("speak", (0, 5)),
    ]
    assert [s.text for s in segs if s.channel == "speak"] == chunks
    assert [s.supported for s in segs if s.channel == "speak"] == [True, True, True, False]
    prefixes = [s.steps[1] for s in segs if s.channel == "speak"]
    assert prefixes == sorted(prefixes)


def test_unsupported_middle_chunk_pushes_rest_to_end_and_trailing() -> None:
    sup = table_support({"A": 1, "X": None, "B": 2})
    assert align(STEPS, ["A", "X", "B"], sup) == [1, None, 5]
    segs = build_trajectory(STEPS, ["A"], sup, keep_trailing=True)
    assert [(s.channel, s.steps) for s in segs] == [("think", (0, 1)), ("speak", (0, 1)), ("think", (1, 5))]
    assert build_trajectory(STEPS, ["A"], sup)[-1].channel == "speak"  # trailing dropped


def test_numeric_support_on_arithmetic() -> None:
    chunks = split_answer(ANSWER)
    # "12" derived at step 2; "34" at step 5; "17" derived at step 4 but chunk 3 also states 34
    assert align(STEPS, chunks, numeric_support) == [2, 5, 5]
    segs = build_trajectory(STEPS, chunks, numeric_support)
    assert render(segs) == (
        "<think>" + "\n".join(STEPS[:2]) + "</think>"
        "<speak>The boxes hold 12 apples.</speak>"
        "<think>" + "\n".join(STEPS[2:]) + "</think>"
        "<speak>In total there are 34 apples.</speak>"
        "<speak>We double 17 to get 34.</speak>"
    )
    # a given (4) is not derived: unsupported unless declared known
    assert not numeric_support(STEPS, "Each box has 4 apples.")
    assert numeric_support([], "No numbers here.")


def test_derived_claim_hook() -> None:
    # DSR-like: a step "push 2 -> stack [1, 2]" derives that state; a chunk claims a state.
    def state(text: str) -> str | None:
        return text.split("stack", 1)[1].strip(" .") if "stack" in text else None

    sup = derived_claim_support(state, lambda s: [state(s)] if state(s) else [])
    steps = ["push 1 -> stack [1]", "push 2 -> stack [1, 2]"]
    assert align(steps, ["Now stack [1, 2].", "Done."], sup) == [2, 2]


class _FakeTok:
    chat_template = "x"

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = False) -> str:
        # mimics a template that would keep only the first <think> block
        return "".join(f"<|{m['role']}|>{m['content'].split('</think>')[0]}<|end|>" for m in messages)


def test_sft_record_and_jsonl(tmp_path: Path) -> None:
    segs = build_trajectory(STEPS, split_answer(ANSWER), numeric_support)
    rec = to_sft_record("How many apples?", segs, tokenizer=_FakeTok(), system="sys", meta={"id": 1})
    content = rec["messages"][-1]["content"]
    assert [m["role"] for m in rec["messages"]] == ["system", "user", "assistant"]
    assert rec["text"] == f"<|system|>sys<|end|><|user|>How many apples?<|end|><|assistant|>{content}<|end|>"
    assert "text" not in to_sft_record("q", segs)
    p = write_jsonl([rec, rec], tmp_path / "d" / "sxs.jsonl")
    lines = p.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["id"] == 1
