"""`stream run`'s context budget: counted in the speaking model's tokens, defaulted from its
context, and an explicit --budget that cannot fit refused (issue #18: the gate at default
settings overflowed a 1,024-token context at second 40)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from context_models import error_line, tiny_vlm
from typer.testing import CliRunner

from embodia.cli import app
from embodia.core.chat import ContextOverflowError, Message
from embodia.envs.streams.core import StreamError
from embodia.envs.streams.sources import open_stream
from embodia.evals.live_run import LiveSettings, plan_context
from embodia.policies import ScriptedPolicy
from embodia.policies.hf import HFPolicy

runner = CliRunner()
CONTEXT = 1024
SOURCE = "procedural:arena,seed=0,duration=60"
PERSONA = "You are CASTER, a professional live game commentator."


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_vlm(tmp_path_factory.mktemp("vlm-1024"), CONTEXT)


@pytest.fixture(scope="module")
def gate_dir(vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained gate (a fresh head) on the 1,024-token VLM: what it scores does not matter
    here, only that its VLM writes the lines."""
    from embodia.policies.speak_gate import FlagFeatures, ResponseHead, save_gate

    features = FlagFeatures(vlm_dir)
    return save_gate(
        tmp_path_factory.mktemp("gate") / "gate", ResponseHead(features.hidden_size), features.meta()
    )


def test_without_a_model_the_budget_is_words(vlm_dir: Path) -> None:
    settings = LiveSettings(source=SOURCE)
    assert plan_context(None, settings, PERSONA).as_dict() == {
        "budget": 16_384,
        "unit": "words",
        "context": None,
        "frame_tokens": 0,
    }
    scripted = plan_context(ScriptedPolicy(["hi"]), LiveSettings(source=SOURCE, budget=300), PERSONA)
    assert (scripted.budget, scripted.unit, scripted.measure) == (300, "words", None)


def test_a_models_budget_is_what_its_context_leaves(vlm_dir: Path) -> None:
    policy = HFPolicy(vlm_dir)
    frames = open_stream(SOURCE).chunk(0).frames
    plan = plan_context(policy, LiveSettings(source=SOURCE), PERSONA, frames)
    # 2 frames of 16 image tokens and 2 vision markers each, 12 tokens for each line
    assert (plan.unit, plan.context, plan.frame_tokens) == ("tokens", CONTEXT, 36)
    assert plan.budget == CONTEXT - 12 - 36
    chat: list[Message] = [{"role": "system", "content": PERSONA}, {"role": "user", "content": "t=3"}]
    assert plan.measure is not None and plan.measure(chat) == policy.count_tokens(chat)
    assert plan_context(policy, LiveSettings(source=SOURCE, budget=500), PERSONA, frames).budget == 500

    with pytest.raises(StreamError) as caught:
        plan_context(policy, LiveSettings(source=SOURCE, budget=977), PERSONA, frames)
    assert str(caught.value) == (
        f"--budget 977 does not fit {vlm_dir}'s context of 1024 tokens: with 12 tokens for each line "
        "(--token-cap) and 36 for the frames of a second, at most 976 tokens are left for the conversation: "
        "lower --budget, or leave it out to use what the context leaves"
    )
    with pytest.raises(
        ContextOverflowError, match=r"^--token-cap 1024 leaves no room in .* lower --token-cap"
    ):
        plan_context(policy, LiveSettings(source=SOURCE, token_cap=1024), PERSONA, frames)


def test_a_budget_past_the_context_is_one_error_naming_budget(gate_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["stream", "run", "--source", SOURCE, "--agent", f"gate:{gate_dir}", "--budget", "5000"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2
    line = error_line(result.output)
    assert line.startswith("error: --budget 5000 does not fit ") and "context of 1024 tokens" in line
    assert not out.exists()


@pytest.mark.slow
def test_the_gate_at_default_settings_keeps_its_speaker_inside_a_1024_token_context(
    gate_dir: Path, tmp_path: Path
) -> None:
    """The issue's case: a gate with its VLM (1,024 positions) speaking every second (threshold
    0) for 60 seconds. Counted in words, the conversation outgrew the context at second 33 and
    the run failed; counted in the VLM's tokens it is evicted in time, and every prompt the
    VLM read, measured by its own tokenizer, left room for the line and the frames."""
    out = tmp_path / "run"
    args = ["stream", "run", "--source", SOURCE, "--agent", f"gate:{gate_dir}", "--threshold", "0"]
    result = runner.invoke(app, [*args, "--no-video", "--out", str(out)])
    assert result.exit_code == 0, result.output
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert [d["second"] for d in decisions] == list(range(60))
    prompts = [d["prompt_tokens"] for d in decisions]  # every second spoke
    assert max(prompts) + 12 <= CONTEXT
    assert max(prompts) > CONTEXT - 12 - 36 - 80  # the budget was used, not left idle
    (decider,) = json.loads((out / "summary.json").read_text())["deciders"]
    assert decider["context_unit"] == "tokens" and decider["context_budget"] == CONTEXT - 12 - 36
    assert decider["evicted_turns"] > 0 and decider["context_tokens"] <= decider["context_budget"]
