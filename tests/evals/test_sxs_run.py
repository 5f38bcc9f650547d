"""``embodia eval sxs`` and ``embodia sxs data``: exact step support on puzzles and DSR
traces, hand-computed content latency per mode, resume, bad input, SFT records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.agents.sxs import run_sxs
from embodia.cli import app
from embodia.core.interleaved import timed_blocks
from embodia.envs.puzzles import make_task
from embodia.evals.sxs_run import MODES, SxSRunSettings, run_sxs_eval
from embodia.policies.recipes.sxs_data import build_trajectory, dsr_item, make_item, puzzle_item, render
from embodia.policies.scripted import ScriptedPolicy

runner = CliRunner()


def test_puzzles_read_steps_only_from_json_and_whole_answers() -> None:
    maze = make_task("maze")
    inst = maze.generate(0, "easy")
    truth = maze.steps(inst)
    assert maze.claimed_steps("I should go right and then down, 2 or 3 cells.", inst) == []
    assert (
        maze.claimed_steps(f"first {json.dumps(truth[0])}, then {json.dumps(truth[1:3])}", inst) == truth[:3]
    )
    # A complete answer object counts as every step it implies.
    assert maze.claimed_steps(json.dumps({"path": inst.answer}), inst) == truth
    sudoku = make_task("sudoku")
    s = sudoku.generate(3, "easy")
    first = sudoku.steps(s)[0]
    assert sudoku.claimed_steps(f"so r{first[0]}c{first[1]} is {json.dumps(first)}.", s) == [first]
    # A pair is not a sudoku step; a triple inside an object is.
    assert sudoku.claimed_steps('[1, 2] and {"cell": [1, 2, 3]}', s) == [[1, 2, 3]]
    assert make_task("jigsaw").text(make_task("jigsaw").generate(0, "easy")) is None


def test_step_support_needs_the_reasoning_and_a_consistent_solution() -> None:
    item = puzzle_item("maze", 0, "easy")
    steps = make_task("maze").steps(make_task("maze").generate(0, "easy"))
    support = item.new_support()
    reasoning = [f"Step 1: {json.dumps(steps[0])}"]
    # Stated before the reasoning reaches it: not yet supported.
    assert not support(reasoning, f"Next: {json.dumps(steps[:2])}")
    assert support([*reasoning, f"Step 2: {json.dumps(steps[1])}"], f"Next: {json.dumps(steps[:2])}")
    assert support.committed == steps[:2]  # type: ignore[attr-defined]
    # A wrong cell is refused even when the reasoning states it.
    wrong = [steps[1][0] + 5, steps[1][1]]
    assert not support([f"maybe {json.dumps(wrong)}"], f"then {json.dumps(wrong)}")
    # Prose is not a claim; the full answer restates the committed steps and adds the rest.
    assert support([], "Almost there.")
    everything = [f"Step {i}: {json.dumps(s)}" for i, s in enumerate(steps, 1)]
    assert support(everything, json.dumps({"answer": make_task("maze").generate(0, "easy").answer}))


SOURCES = [
    "maze",
    "sudoku",
    "frozenlake",
    "tsp",
    "dsr:queue.compound",
    "dsr:bst.compound",
    "dsr:lru_cache.cache",
]


@pytest.mark.parametrize("source", SOURCES)
def test_reference_trajectories_are_exactly_supported_and_correct(source: str) -> None:
    for index in range(3):
        item = make_item(source, index, "easy" if ":" not in source else "short", 0)
        segments = build_trajectory(item.reasoning, item.chunks, item.new_support())
        speak = [s for s in segments if s.channel == "speak"]
        assert all(s.supported for s in speak), item.id
        prefixes = [s.steps[1] for s in speak]
        assert prefixes == sorted(prefixes) and prefixes[0] < len(item.reasoning)
        assert item.score(render(segments)).correct, item.id


def test_dsr_support_follows_the_true_trace() -> None:
    item = dsr_item("queue.compound", 0)
    trace = item.reasoning
    support = item.new_support()
    state2 = trace[1].split(": ", 1)[1]
    assert not support(trace[:1], f"now {state2}")  # not derived yet
    assert support(trace[:2], f"now {state2}")
    assert not support(trace, "now [999]")  # not a state of the true trace
    final = json.loads(item.chunks[-1])["final_answer"]
    assert item.contradicts('{"final_answer": [1]}', json.dumps({"final_answer": final}))
    assert not item.contradicts(f"now {state2}", json.dumps({"final_answer": final}))


def test_timed_blocks_cut_a_live_stream_into_k_token_updates() -> None:
    deltas = [(0.1, "a b"), (0.2, "c"), (0.3, "d e "), (0.5, "f")]
    spans = timed_blocks(deltas, 2)
    # "a b" + "c" + "d e " + "f" = "a bcd e f": "bcd" arrives with its last letter, at 0.3.
    assert [(s.start, s.end, s.text) for s in spans] == [(0, 2, "a bcd"), (2, 4, "e f")]
    assert [(s.start_time_s, s.end_time_s) for s in spans] == [(0.1, 0.3), (0.3, 0.5)]


def test_the_runtime_counts_a_word_split_across_pieces_once() -> None:
    pieces = ["<think>Ste", "p 1: [0,", " 1]</think><spe", "ak>Next: [[0, 1]]</speak>"]

    class Pieces(ScriptedPolicy):
        def complete(self, messages, images=(), **kw):  # type: ignore[no-untyped-def]
            on_text = kw.pop("on_text")
            result = super().complete(messages, images, **kw)
            for piece in pieces:
                on_text(piece)
            return result

    result = run_sxs("q", Pieces(["".join(pieces)]))
    # think "Step 1: [0, 1]" = 4 tokens, speak "Next: [[0, 1]]" = 3 tokens.
    assert result.tokens == 7 and len(result.token_times) == 7
    assert [(s.channel, s.start, s.end) for s in result.visible_spans()] == [
        ("think", 0, 7),
        ("speak", 7, 10),
    ]


def _maze_replies() -> tuple[list[str], list[list[int]], str]:
    inst = make_task("maze").generate(0, "easy")
    steps = make_task("maze").steps(inst)
    answer = json.dumps({"answer": inst.answer})
    s = [json.dumps(x) for x in steps]
    replies = [
        # think_then_answer: 4 think tokens ("route is [r, c]"), then the answer (3 tokens)
        f"<think>route is {s[0]}</think><speak>Answer: {answer}</speak>",
        # naive early streaming: everything visible
        f"route is {s[0]} so {answer}",
        # prompted interleaving: speaks a wrong cell first (premature), then the answer
        f"<speak>Go [[9, 9]]</speak><think>route is {s[0]}</think><speak>{answer}</speak>",
        # sxs: claims the first two cells before the reasoning states the second
        f"<think>Step 1: {s[0]}</think><speak>Next: [{s[0]}, {s[1]}]</speak>"
        f"<think>Step 2: {s[1]}</think><speak>{answer}</speak>",
    ]
    return replies, steps, answer


def test_a_run_measures_every_mode_by_hand(tmp_path: Path) -> None:
    replies, steps, answer = _maze_replies()
    script = tmp_path / "replies.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in replies))
    out = tmp_path / "run"
    settings = SxSRunSettings("maze", f"scripted:{script}", difficulty="easy", items=1, k=2)
    report = run_sxs_eval(settings, out)
    rows = {r["mode"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(rows) == set(MODES)
    tta, naive, prompted, sxs = (rows[m] for m in MODES[:4])
    assert tta["correct"] and tta["ttfc_tokens"] == 4 and tta["n_tokens"] == 7
    assert tta["early_disclosure"] == 0.0 and tta["ttfc_s"] is not None
    # naive: "route is [r, c] so {"answer": "..."}" -> 7 words in updates of 2; the first at 0.
    assert naive["ttfc_tokens"] == 0 and naive["n_updates"] == 4 and naive["disclosure_rate"] == 1.0
    assert prompted["premature_commitment"] == 0.5 and prompted["correct"]
    # sxs: the two-cell chunk (written at token 4) waits for "Step 2: [r, c]" (tokens 9-12),
    # so it is released at token 13, not where it was written.
    assert sxs["correct"] and sxs["premature_commitment"] == 0.0
    assert sxs["visible"].startswith("Next:") and sxs["ttfc_tokens"] == 13
    assert report["modes"]["sft_target"]["accuracy"] == 1.0
    for name in ("pareto_ttfc.png", "pareto_wait.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Resume asks the policy nothing more (the script is spent) and keeps every row.
    again = run_sxs_eval(settings, out, resume=True)
    assert again["modes"] == report["modes"]
    assert len((out / "results.jsonl").read_text().splitlines()) == len(MODES)


def test_the_cli_runs_and_refuses_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "ref"
    result = runner.invoke(
        app, ["eval", "sxs", "--source", "sudoku", "--modes", "sft_target", "--items", "2", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "sft_target: accuracy 100.0%" in result.output
    for args, message in [
        (["--source", "jigsaw", "--modes", "sft_target"], "unknown SxS source 'jigsaw'"),
        (["--modes", "sxs"], "--policy is needed"),
        (["--modes", "sft_target,telepathy"], "unknown SxS mode 'telepathy'"),
        (["--modes", "sft_target", "--difficulty", "absurd"], "unknown difficulty 'absurd'"),
        (["--source", "dsr:nope.op", "--modes", "sft_target"], "unknown DSR operation"),
    ]:
        result = runner.invoke(app, ["eval", "sxs", "--out", str(tmp_path / "bad"), *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
    result = runner.invoke(
        app, ["eval", "sxs", "--source", "sudoku", "--modes", "sft_target", "--out", str(out)]
    )
    assert result.exit_code == 2 and "--resume" in result.output


def test_sft_data_with_a_chat_template(tmp_path: Path) -> None:
    from embodia.policies.tiny_models import build_tiny_chat_lm

    model = build_tiny_chat_lm(tmp_path / "lm")
    out = tmp_path / "sft.jsonl"
    result = runner.invoke(
        app,
        [
            "sxs",
            "data",
            "--source",
            "frozenlake",
            "--items",
            "3",
            "--tokenizer",
            str(model),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 and all(r["supported"] for r in records)
    content = records[0]["messages"][-1]["content"]
    assert content.startswith("<think>") and content in records[0]["text"]
    assert "When you state steps" in records[0]["messages"][0]["content"]


@pytest.mark.slow
def test_every_mode_with_a_tiny_transformers_model(tmp_path: Path) -> None:
    """The real HF backend streams each mode; random weights give replies that are wrong and
    mostly tagless, which the metrics count honestly (no content, zero accuracy)."""
    from embodia.policies.tiny_models import build_tiny_chat_lm

    model = build_tiny_chat_lm(tmp_path / "lm")
    out = tmp_path / "run"
    args = ["eval", "sxs", "--source", "dsr:queue.compound", "--difficulty", "short", "--items", "2"]
    result = runner.invoke(app, [*args, "--policy", f"hf:{model}", "--max-tokens", "24", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(MODES)
    for row in rows:
        assert row["n_tokens"] >= 0 and row["wall_s"] > 0
        if row["mode"] == "naive_early_streaming" and row["n_tokens"]:
            assert row["ttfc_tokens"] == 0 and row["ttfc_s"] is not None and row["ttfc_s"] <= row["wall_s"]
    report = json.loads((out / "report.json").read_text())
    assert report["modes"]["sft_target"]["accuracy"] == 1.0
    assert set(report["modes"]) == set(MODES) and (out / "pareto_wait.png").exists()
    # The tiny VLM is a chat policy too: the same run, on a puzzle, through its processor.
    from embodia.policies.tiny_models import build_tiny_vlm

    vlm = build_tiny_vlm(tmp_path / "vlm")
    args = ["eval", "sxs", "--source", "maze", "--difficulty", "easy", "--items", "1", "--max-tokens", "16"]
    result = runner.invoke(app, [*args, "--policy", f"hf:{vlm}", "--out", str(tmp_path / "vlm-run")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "vlm-run" / "results.jsonl").read_text().splitlines()]
    assert [r["mode"] for r in rows] == list(MODES) and all(r["raw"] for r in rows)


def test_a_judge_model_decides_support_and_its_verdicts_are_kept() -> None:
    from embodia.policies.recipes.sxs_data import JudgeSupport

    judge = JudgeSupport(ScriptedPolicy(["No.", "Yes, it follows.", "I cannot tell"]))
    assert not judge(["2 + 3 = 5"], "The answer is 6.")
    assert judge(["2 + 3 = 5"], "The answer is 5.")
    assert not judge([], "Anything")  # an unreadable verdict is not support
    assert [v["supported"] for v in judge.verdicts] == [False, True, False]
    assert judge.verdicts[2]["raw"] == "I cannot tell" and judge.verdicts[0]["steps"] == 1
    # In the runtime: the first chunk waits for a "yes" that comes with the second think span.
    reply = "<think>a</think><speak>claim</speak><think>b</think>"
    result = run_sxs("q", ScriptedPolicy([reply]), JudgeSupport(ScriptedPolicy(["no", "yes"])))
    assert [(d.text, d.supported, d.released_at) for d in result.disclosures] == [("claim", True, 3)]


def test_an_nli_cross_encoder_decides_support(tmp_path: Path) -> None:
    from embodia.errors import EmbodiaError
    from embodia.policies.recipes.sxs_data import NLISupport
    from embodia.policies.tiny_models import build_tiny_nli

    model = build_tiny_nli(tmp_path / "nli", labels=("ENTAILMENT", "neutral", "contradiction"))
    nli = NLISupport(model)
    assert nli.entailment == 0  # found by name, wherever it sits
    p = nli.probability(["The queue is [3, 1]."], "It holds 3.")
    assert 0.0 < p < 1.0 and p == nli.probability(["The queue is [3, 1]."], "It holds 3.")
    nli.threshold = p
    assert nli(["The queue is [3, 1]."], "It holds 3.")
    nli.threshold = min(1.0, p + 1e-6)
    assert not nli(["The queue is [3, 1]."], "It holds 3.")
    # A reasoning prefix far past the model's 128 positions is cut from the left, not refused.
    long = [f"step {i}: the state is [{i}, {i + 1}]" for i in range(200)]
    assert 0.0 < nli.probability(long, "It holds 3.") < 1.0
    with pytest.raises(EmbodiaError, match="no single entailment label"):
        NLISupport(build_tiny_nli(tmp_path / "bad", labels=("yes", "no")))
    with pytest.raises(EmbodiaError, match="not a directory"):
        NLISupport(tmp_path / "missing")
