"""Context overflows in every command that asks a model, on the tiny transformers models with
a short window (no server): a reply budget the context cannot hold is refused at start, a
prompt that does not fit ends the run with one line naming the option to change, and what
the run wrote before stays (the vLLM suite checks the same against a real server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from context_models import error_line, set_context, tiny_chat, tiny_vlm
from typer.testing import CliRunner

from embodia.cli import app
from embodia.envs.dsr import prompts
from embodia.evals.dsr import ANSWERS_FILE, DSRSettings, select_instances
from embodia.policies.hf import HFPolicy

runner = CliRunner()


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_chat(tmp_path_factory.mktemp("chat"), 1024)


@pytest.mark.parametrize(
    ("command", "option", "default"),
    [
        (["eval", "dsr", "--limit", "2"], "--tokens", 1500),
        (
            ["eval", "sxs", "--source", "sudoku", "--items", "1", "--modes", "think_then_answer"],
            "--max-tokens",
            1024,
        ),
    ],
)
def test_a_default_reply_budget_past_the_context_is_refused_at_start(
    command: list[str], option: str, default: int, chat_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, [*command, "--policy", f"hf:{chat_dir}", "--out", str(out)])
    assert result.exit_code == 2
    assert error_line(result.output) == (
        f"error: {option} {default} leaves no room in {chat_dir}'s context of 1024 tokens: "
        f"lower {option} or use a model with a longer context"
    )
    assert not out.exists()


def test_an_eval_dsr_prompt_past_the_context_fails_the_run_keeping_its_answers(tmp_path: Path) -> None:
    model = tiny_chat(tmp_path / "chat", 1024)
    settings = DSRSettings(policy=f"hf:{model}", limit=6, tokens=8, description="name")
    instances = select_instances(settings)
    policy = HFPolicy(model)
    sizes = [
        policy.count_tokens(prompts.messages(i, settings.mode, description="name", tokens=8))
        for i in instances
    ]
    # a window the first instance fits and a later one does not
    limit = sizes[0] + 1
    failing = next(j for j, size in enumerate(sizes) if size >= limit)
    set_context(model, limit)
    out = tmp_path / "run"
    args = [
        "eval",
        "dsr",
        "--policy",
        f"hf:{model}",
        "--limit",
        "6",
        "--tokens",
        "8",
        "--description",
        "name",
    ]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2
    assert error_line(result.output) == (
        f"error: {instances[failing].id}: the prompt has {sizes[failing]} tokens, which fills "
        f"{model}'s context of {limit} tokens: choose shorter instances (--length short) or use a model "
        "with a longer context"
    )
    answered = [json.loads(line)["id"] for line in (out / ANSWERS_FILE).read_text().splitlines()]
    assert answered == [i.id for i in instances[:failing]]
    # with a longer context the same command goes on from there
    set_context(model, 4096)
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    answered = [json.loads(line)["id"] for line in (out / ANSWERS_FILE).read_text().splitlines()]
    assert answered[:failing] == [i.id for i in instances[:failing]] and sorted(answered) == sorted(
        i.id for i in instances
    )


def test_eval_csmr_names_the_reasoner_and_its_looks(tmp_path: Path) -> None:
    model = tiny_chat(tmp_path / "chat", 256)
    args = ["eval", "csmr", "--task", "clevr", "--items", "2", "--reasoner", f"hf:{model}"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert error_line(result.output) == (
        f"error: --reasoner: a reply of up to 256 tokens leaves no room in {model}'s context of 256 tokens: "
        "use a model with a longer context"
    )
    set_context(model, 400)  # room for a reply, not for the question and its evidence
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert result.exit_code == 2
    line = error_line(result.output)
    assert line.startswith("error: item 0 (--reasoner): the prompt has ") and line.endswith(
        f"which fills {model}'s context of 400 tokens: lower --max-queries or use a model with a longer "
        "context"
    )


def test_explore_fails_when_its_prompt_does_not_fit_instead_of_falling_back(tmp_path: Path) -> None:
    """Before, every decision's overflow was a failed attempt and the heuristic took over. The
    question is about 290 tokens: 260 leaves room for a reply (256) and not for it."""
    model = tiny_vlm(tmp_path / "vlm", 260)
    out = tmp_path / "run"
    args = ["explore", "--agent", "dfs", "--policy", f"hf:{model}", "--steps", "30", "--height", "48"]
    result = runner.invoke(app, [*args, "--width", "96", "--no-video", "--out", str(out)])
    assert result.exit_code == 2
    line = error_line(result.output)
    assert line.startswith("error: decision 1: the prompt has ") and line.endswith(
        f"which fills {model}'s context of 260 tokens: lower --height and --width or use a model with a "
        "longer context"
    )
