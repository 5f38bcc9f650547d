"""BYORn on the tiny VLM: the plausibility score, flagging, responses replaced while SFT runs
(refreshed on schedule, resumed after a kill), the filtering and pretrained-response modes, a
judge, and bad input named. The attack study itself (ASR and clean accuracy) is in
``tests/evals/test_backdoor.py`` and the recipes benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from killed_runs import kill_after_step
from safetensors.torch import load_file

from embodia.errors import EmbodiaError
from embodia.evals.backdoor import vqa_records, write_records
from embodia.policies import make_policy
from embodia.policies.recipes import byorn
from embodia.policies.recipes.sft import image_batch, load_records, load_vlm


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 VQA records, a quarter of them poisoned (trigger, reply "banana"), as a JSONL file."""
    folder = tmp_path_factory.mktemp("vqa")
    return write_records(vqa_records(folder, 5, 24, poison_rate=0.25), folder / "train.jsonl")


def _settings(model: Path, data: Any, **changes: Any) -> byorn.BYORnSettings:
    values: dict[str, Any] = {
        "model": f"hf:{model}",
        "data": str(data),
        "max_steps": 6,
        "batch_size": 4,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_steps": 2,
        "regenerate_every": 2,
        "max_new_tokens": 4,
        "quantile": 0.25,
        **changes,
    }
    return byorn.BYORnSettings(**values)


def test_the_score_is_the_mean_log_prob_of_the_reply_and_ignores_batch_padding(
    tiny_vlm_dir: Path, poisoned: Path
) -> None:
    processor, model = load_vlm(f"hf:{tiny_vlm_dir}")
    records = load_records(str(poisoned))[:4]
    together = byorn.plausibility(model, processor, records, batch_size=4)
    alone = [byorn.plausibility(model, processor, [r], batch_size=1)[0] for r in records]
    assert together == pytest.approx(alone, abs=1e-4)
    # by hand for one record: the reply's tokens and their log-probs
    batch = image_batch(processor, records[:1], max_length=1024)
    labels = batch.pop("labels")[0]
    with torch.no_grad():
        logps = torch.log_softmax(model(**batch).logits[0, :-1].float(), -1)
    taken = [logps[i, labels[i + 1]].item() for i in range(len(labels) - 1) if labels[i + 1] != -100]
    reply = processor.tokenizer.decode([t for t in labels.tolist() if t != -100])
    assert reply.startswith(records[0]["messages"][-1]["content"])
    assert alone[0] == pytest.approx(sum(taken) / len(taken), abs=1e-5)


@pytest.mark.parametrize(
    ("scores", "threshold", "quantile", "flagged"),
    [
        ([-0.1, -5.0, -2.0, -2.4], -2.3, None, [False, True, False, True]),
        ([-0.1, -5.0, -2.0, -2.4], -2.3, 0.5, [False, True, False, True]),
        ([-1.0, -1.0, -1.0, -3.0], -2.3, 0.5, [True, False, False, True]),  # ties: record order
        ([-1.0, -2.0], -2.3, 0.0, [False, False]),
    ],
)
def test_flagging_by_threshold_or_quantile(
    scores: list[float], threshold: float, quantile: float | None, flagged: list[bool]
) -> None:
    assert byorn.flag(scores, threshold, quantile) == flagged


def test_a_replaced_reply_is_what_the_batch_trains_on(tiny_vlm_dir: Path, poisoned: Path) -> None:
    processor, _ = load_vlm(f"hf:{tiny_vlm_dir}")
    records = load_records(str(poisoned))[:2]
    batch = image_batch(processor, records, max_length=1024, replies=["purple", None])
    texts = [processor.tokenizer.decode([t for t in row if t != -100]) for row in batch["labels"].tolist()]
    assert texts[0].startswith("purple") and texts[1].startswith(records[1]["messages"][-1]["content"])


def test_byorn_flags_refreshes_and_trains(tiny_vlm_dir: Path, poisoned: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = byorn.run_byorn(_settings(tiny_vlm_dir, poisoned), out)
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [s["record"] for s in scores] == list(range(24))
    assert summary["flagged"] == 6 and len(summary["flagged_records"]) == 6
    lowest = sorted(range(24), key=lambda i: (scores[i]["score"], i))[:6]
    assert sorted(summary["flagged_records"]) == sorted(lowest)
    refreshes = [json.loads(line) for line in (out / "replacements.jsonl").read_text().splitlines()]
    # at the start and after steps 2 and 4 (not after the last step): one response per flagged record
    assert sorted({r["step"] for r in refreshes}) == [0, 2, 4] and len(refreshes) == 18
    assert {r["record"] for r in refreshes} == set(summary["flagged_records"])
    assert summary["refreshes"] == 3
    metrics = [json.loads(line) for line in (out / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 7))
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    policy = make_policy(summary["policy"])
    assert policy.accepts_images  # type: ignore[attr-defined]
    assert byorn.run_byorn(_settings(tiny_vlm_dir, poisoned), out, resume=True) == summary


def test_drop_and_pretrained_modes(tiny_vlm_dir: Path, poisoned: Path, tmp_path: Path) -> None:
    dropped = byorn.run_byorn(_settings(tiny_vlm_dir, poisoned, replace="drop", max_steps=2), tmp_path / "d")
    assert dropped["refreshes"] == 0 and not (tmp_path / "d" / "replacements.jsonl").exists()
    config = (tmp_path / "d" / "sft" / "config.yaml").read_text()
    assert "18 records given in memory" in config  # the 6 flagged left out
    fixed = byorn.run_byorn(
        _settings(tiny_vlm_dir, poisoned, replace="pretrained", max_steps=4), tmp_path / "p"
    )
    refreshes = [
        json.loads(line) for line in (tmp_path / "p" / "replacements.jsonl").read_text().splitlines()
    ]
    assert {r["step"] for r in refreshes} == {0} and fixed["refreshes"] == 1


def test_a_judge_that_says_no_flags_the_record(tiny_vlm_dir: Path, poisoned: Path, tmp_path: Path) -> None:
    """A scripted judge says no to the first record only; with a threshold nothing passes
    below, that record alone is flagged."""
    replies = tmp_path / "judge.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in ["No, it is not.", *["yes"] * 23]))
    summary = byorn.run_byorn(
        _settings(
            tiny_vlm_dir, poisoned, quantile=None, threshold=-1000.0, judge=f"scripted:{replies}", max_steps=2
        ),
        tmp_path / "run",
    )
    assert summary["flagged_records"] == [0]
    scores = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert [s["judge"] for s in scores] == [False] + [True] * 23


def test_a_killed_run_resumes_with_the_responses_of_its_checkpoint(
    tiny_vlm_dir: Path, poisoned: Path, tmp_path: Path
) -> None:
    """LoRA, a refresh at the checkpoint's step: the resumed run trains step 5 on the replies
    the uninterrupted run did (those refreshed after step 4), to the same weights."""
    settings = _settings(tiny_vlm_dir, poisoned, lora_r=4)
    whole = byorn.run_byorn(settings, tmp_path / "whole")
    out = tmp_path / "killed"
    killed = kill_after_step(settings, "run_byorn", out, 5)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (out / "sft" / "checkpoints" / "checkpoint-4").is_dir() and not (out / "summary.json").exists()
    with pytest.raises(EmbodiaError, match="--resume"):
        byorn.run_byorn(settings, out)
    resumed = byorn.run_byorn(settings, out, resume=True)
    assert resumed["flagged_records"] == whole["flagged_records"]
    # the refresh at step 4 was written before the kill: the resumed run loads it, and makes none
    steps = [json.loads(line)["step"] for line in (out / "replacements.jsonl").read_text().splitlines()]
    assert sorted(set(steps)) == [0, 2, 4] and len(steps) == 18
    expected = load_file(str(Path(whole["policy"].removeprefix("hf:")) / "model.safetensors"))
    got = load_file(str(Path(resumed["policy"].removeprefix("hf:")) / "model.safetensors"))
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-5, msg=name)


def test_bad_input_is_named(
    tiny_vlm_dir: Path, tiny_chat_lm_dir: Path, poisoned: Path, tmp_path: Path
) -> None:
    with pytest.raises(EmbodiaError, match="threshold"):
        _settings(tiny_vlm_dir, poisoned, threshold=0.5)
    with pytest.raises(EmbodiaError, match="unknown replace"):
        _settings(tiny_vlm_dir, poisoned, replace="ignore")
    with pytest.raises(EmbodiaError, match="quantile"):
        _settings(tiny_vlm_dir, poisoned, quantile=1.5)
    text = tmp_path / "text.jsonl"
    text.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})
        + "\n"
    )
    with pytest.raises(EmbodiaError, match="no images"):
        byorn.run_byorn(_settings(tiny_vlm_dir, text), tmp_path / "a")
    with pytest.raises(EmbodiaError, match="text-only model"):
        byorn.run_byorn(_settings(tiny_chat_lm_dir, poisoned), tmp_path / "b")
    missing = tmp_path / "missing.jsonl"
    record = json.loads(poisoned.read_text().splitlines()[0])
    missing.write_text(json.dumps({**record, "images": ["nowhere.png"]}) + "\n")
    with pytest.raises(EmbodiaError, match="image file 'nowhere.png' not found"):
        byorn.run_byorn(_settings(tiny_vlm_dir, missing), tmp_path / "c")


def test_a_batch_is_rendered_when_first_read_and_stays_lazy_when_moved() -> None:
    from embodia.policies.recipes.sft import LazyBatch

    made = []
    batch = LazyBatch(lambda: made.append(1) or {"labels": torch.tensor([1, -100])})
    assert batch.to("cpu") is batch and made == []
    assert batch["labels"].tolist() == [1, -100] and made == [1]
    assert dict(batch) == {"labels": batch["labels"]} and made == [1]  # rendered once
    rebuilt = type(batch)({key: value for key, value in batch.items()})  # as the trainer rebuilds it
    assert rebuilt["labels"] is batch["labels"]
    rebuilt["use_cache"] = False
    assert rebuilt.pop("use_cache") is False and set(rebuilt) == {"labels"}


def test_a_refresh_cut_by_a_kill_is_not_trained_on(tmp_path: Path) -> None:
    """A kill while a refresh was being written leaves part of it: a resume takes the last
    whole refresh, so no flagged record falls back to its own (poisoned) reply."""
    from embodia.core.runs import RunFolder

    folder = RunFolder(tmp_path / "run", byorn.SCORES)
    folder.out.mkdir(parents=True)
    replacements = byorn.Replacements(folder, [{}] * 5, [1, 3])
    lines = [(0, 1, "red"), (0, 3, "cube"), (2, 1, "blue")]  # step 2's reply for record 3 never written
    (folder.out / byorn.REPLACEMENTS).write_text(
        "".join(json.dumps({"step": s, "record": r, "response": t}) + "\n" for s, r, t in lines)
    )
    assert replacements.load(2) and replacements.current == {1: "red", 3: "cube"}
    assert not byorn.Replacements(folder, [{}] * 5, [1, 3, 4]).load(2)
