"""A run that shows its policy pictures refuses a text-only model at start, and an exploration
fails when more than --max-fallback-share of its decisions fell back to the best-gain waypoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodia.cli import app
from embodia.evals.explore import FallbackLimit, FallbackShareError

runner = CliRunner()
SCENE = "procedural:seed=3,rooms=3"
BIG_SCENE = "procedural:seed=3,rooms=6"  # enough waypoint decisions for the in-run check
UNUSABLE = "I am not sure."
VALID = '{"tool": "goto_waypoint", "arguments": {"index": 0}}'


def _explore(out: Path, policy: str, *extra: str, scene: str = SCENE, steps: int = 60) -> object:
    args = ["explore", "--agent", "dfs", "--policy", policy, "--scene", scene, "--steps", str(steps)]
    return runner.invoke(
        app, [*args, "--height", "48", "--width", "96", "--no-video", "--out", str(out), *extra]
    )


def _error_line(result: object) -> str:
    """The one ``error:`` line of a failed command (transformers may log its loading above it)."""
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]  # type: ignore[attr-defined]
    assert len(lines) == 1, result.stderr  # type: ignore[attr-defined]
    return lines[0]


def _script(path: Path, *replies: str) -> str:
    path.write_text("".join(json.dumps({"text": reply}) + "\n" for reply in replies))
    return f"scripted:{path}?loop=true"


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------- does the model take images


def test_explore_refuses_a_text_only_model_before_the_run(tmp_path: Path, tiny_chat_lm_dir: Path) -> None:
    out = tmp_path / "run"
    line = _error_line(_explore(out, f"hf:{tiny_chat_lm_dir}"))
    assert f"hf:{tiny_chat_lm_dir} (random weights) does not take images" in line
    assert "qwen2 language model and no image processor" in line
    assert "the dfs explorer works from pictures: use a vision-language model" in line
    assert "docs/models.md" in line
    assert not out.exists(), "a refused run leaves no folder behind"


def test_the_check_tells_a_vlm_from_a_chat_lm(tiny_vlm_dir: Path, tiny_chat_lm_dir: Path) -> None:
    from embodia.core.chat import PolicyError, require_images
    from embodia.policies.hf import HFPolicy

    require_images(HFPolicy(tiny_vlm_dir), "the dfs explorer")  # a LLaVA with its image processor
    with pytest.raises(PolicyError, match="does not take images"):
        require_images(HFPolicy(tiny_chat_lm_dir), "the dfs explorer")


@pytest.mark.slow  # ~10 s: the tiny VLM writes up to 256 tokens for each of its attempts
def test_explore_runs_a_vision_language_model(tmp_path: Path, tiny_vlm_dir: Path) -> None:
    out = tmp_path / "run"
    # Random weights seldom write a usable call: the share is lifted so the run goes to its end.
    result = _explore(out, f"hf:{tiny_vlm_dir}", "--max-fallback-share", "1", steps=30)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    vlm = json.loads((out / "summary.json").read_text())["vlm"]
    assert vlm["decisions"] >= 1 and vlm["replies"] >= vlm["decisions"]


def test_the_csmr_perceiver_and_a_stream_agent_refuse_a_text_only_model(
    tmp_path: Path, tiny_chat_lm_dir: Path
) -> None:
    csmr = ["eval", "csmr", "--task", "clevr", "--items", "1", "--reasoner", f"hf:{tiny_chat_lm_dir}"]
    perceiver = ["--perceiver", f"hf:{tiny_chat_lm_dir}"]
    result = runner.invoke(app, [*csmr, *perceiver, "--out", str(tmp_path / "c")])
    assert "does not take images" in _error_line(result) and "the CSMR perceiver" in _error_line(result)
    stream = ["stream", "run", "--source", "procedural:arena,seed=0,duration=5", "--no-video"]
    result = runner.invoke(app, [*stream, "--agent", f"hf:{tiny_chat_lm_dir}", "--out", str(tmp_path / "s")])
    assert "does not take images" in _error_line(result) and "a stream agent" in _error_line(result)
    speaker = [*stream, "--speaker", f"hf:{tiny_chat_lm_dir}", "--out", str(tmp_path / "p")]
    assert "a stream speaker" in _error_line(runner.invoke(app, speaker))


# ---------------------------------------------------------------------- the share of fallbacks


def test_a_run_whose_decisions_all_fell_back_fails_and_resumes_with_the_flag_raised(tmp_path: Path) -> None:
    policy = _script(tmp_path / "replies.jsonl", UNUSABLE)
    out = tmp_path / "run"
    line = _error_line(_explore(out, policy))
    records = _records(out)  # the decisions made stay on record
    asked = [r for r in records if r["choice"]["by"] == "vlm"]
    assert asked and all(r["choice"]["fallback"] for r in asked)
    assert f"{len(asked)} of {len(asked)} decisions of {policy} fell back" in line
    assert "(100%), more than --max-fallback-share 0.5 allows" in line
    reason = asked[-1]["attempts"][-1]["failure"]
    assert f"the most common reason ({len(asked)} of the {len(asked)}): {reason}." in line
    assert f"{out / 'episodes.jsonl'}" in line and "--resume --max-fallback-share 1" in line
    assert not (out / "summary.json").exists()

    result = _explore(out, policy, "--resume", "--max-fallback-share", "1")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    vlm = json.loads((out / "summary.json").read_text())["vlm"]
    assert vlm["decisions"] == vlm["fallbacks"] == len(asked)


def test_a_long_run_stops_at_the_tenth_decision_when_most_fell_back(tmp_path: Path) -> None:
    policy = _script(tmp_path / "replies.jsonl", UNUSABLE)
    out = tmp_path / "run"
    line = _error_line(_explore(out, policy, scene=BIG_SCENE, steps=1000))
    records = _records(out)
    asked = [r for r in records if r["choice"]["by"] == "vlm"]
    assert len(asked) == 10 and records[-1] is asked[-1], "the run stopped right after its tenth decision"
    assert "10 of 10 decisions" in line
    assert records[-1]["steps"] < 1000 and not (out / "summary.json").exists()


def test_a_run_with_some_fallbacks_passes_and_a_lower_limit_fails_it(tmp_path: Path) -> None:
    # A decision answered, then three unusable replies (the re-asks used up): a fallback.
    policy = _script(tmp_path / "replies.jsonl", VALID, UNUSABLE, UNUSABLE, UNUSABLE)
    result = _explore(tmp_path / "some", policy)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    vlm = json.loads((tmp_path / "some" / "summary.json").read_text())["vlm"]
    assert 1 <= vlm["fallbacks"] <= vlm["decisions"] / 2
    line = _error_line(_explore(tmp_path / "strict", policy, "--max-fallback-share", "0.2"))
    assert f"{vlm['fallbacks']} of {vlm['decisions']} decisions" in line
    assert "more than --max-fallback-share 0.2 allows" in line


def test_the_flag_is_a_share() -> None:
    result = runner.invoke(app, ["explore", "--agent", "dfs", "--out", "x", "--max-fallback-share", "1.5"])
    assert "--max-fallback-share is a share in [0, 1], got 1.5" in _error_line(result)


def _record(fallback: bool, failure: str | None = None, by: str = "vlm") -> dict:
    return {"choice": {"by": by, "fallback": fallback}, "attempts": [{"failure": failure}]}


def test_reasons_are_counted_with_their_numbers_masked() -> None:
    limit = FallbackLimit(0.5, policy="hf:m", records="runs/x/episodes.jsonl")
    limit.count(_record(True, "the prompt has 1139 tokens, which fills the context of 1024"))
    limit.count(_record(False))
    limit.count(_record(True, "the prompt has 1057 tokens, which fills the context of 1024"))
    limit.count(_record(True, "no number in the reply"))
    limit.count(_record(False, by="backtrack"))  # not the policy's decision: not counted
    assert (limit.decisions, limit.fallbacks) == (4, 3)
    expected = (
        "3 of 4 decisions of hf:m fell back to the best-gain waypoint (75%), more than "
        "--max-fallback-share 0.5 allows; the most common reason (2 of the 3): the prompt has 1057 "
        "tokens, which fills the context of 1024. The decisions made are in runs/x/episodes.jsonl; "
        "to finish the run anyway, rerun it with --resume --max-fallback-share 1"
    )
    with pytest.raises(FallbackShareError) as raised:
        limit.check(final=True)
    assert str(raised.value) == expected


def test_the_in_run_check_waits_for_its_minimum_and_exactly_the_limit_passes() -> None:
    limit = FallbackLimit(0.5, check_after=4)
    for _ in range(3):
        limit.observe(_record(True))  # under the minimum: the run goes on
    with pytest.raises(FallbackShareError, match=r"3 of 3 decisions .* \(3 of the 3\): no usable reply\."):
        limit.check(final=True)  # the end of a run checks whatever the count
    with pytest.raises(FallbackShareError, match="4 of 4 decisions"):
        limit.observe(_record(True))
    half = FallbackLimit(0.5, check_after=4)
    for fallback in (True, False, True, False):
        half.observe(_record(fallback, "no number in the reply"))
    half.check(final=True)  # 2 of 4 is not more than half
    with pytest.raises(FallbackShareError, match="3 of 5 decisions"):
        half.observe(_record(True, "no number in the reply"))
