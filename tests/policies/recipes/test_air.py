"""AIR (``policies/recipes/air.py``): the disabled heads' outputs, the scores, the selection and
weights computed by hand, the retrieval test on hand-made attention maps, and a run folder that
resumes, on the tiny random-weight chat LM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from embodia.policies.recipes import air  # noqa: E402
from embodia.policies.recipes.sft import load_causal_lm  # noqa: E402

RECORDS: tuple[dict[str, Any], ...] = (
    {"prompt": "Q: 2+3*4?\n", "completion": "Step 1: 3*4 = 12.\nStep 2: 2+12 = 14.\n\nAnswer: 14"},
    {"messages": [{"role": "user", "content": "copy abc"}, {"role": "assistant", "content": "abc\n\nabc"}]},
    {"prompt": "Q: 7-5?\n", "completion": "7-5 = 2.\n\nAnswer: 2"},
)

PLAIN = (RECORDS[0], RECORDS[2], {"prompt": "Say hi.\n", "completion": "hi"})


@pytest.fixture(scope="module")
def tiny(tiny_chat_lm_dir: Path) -> tuple[Any, Any]:
    tokenizer, model = load_causal_lm(f"hf:{tiny_chat_lm_dir}")
    return tokenizer, model.eval()


def _head_outputs(model: Any, ids: Any, layer: int) -> Any:
    """What o_proj of ``layer`` receives: the heads' outputs side by side."""
    seen: list[Any] = []
    module = air.attention_layers(model)[layer].module
    handle = module.o_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        handle.remove()
    return seen[0]


def test_disabling_a_head_changes_exactly_that_heads_output_to_uniform_attention(
    tiny: tuple[Any, Any],
) -> None:
    _, model = tiny
    layer = air.attention_layers(model)[0]
    d = layer.head_dim
    ids = torch.arange(5, 25)[None]
    base = _head_outputs(model, ids, 0)
    with air.disabled_heads(model, [(0, 1)]):
        weak = _head_outputs(model, ids, 0)
    # head 0 of the layer is untouched, head 1 is not
    torch.testing.assert_close(weak[..., :d], base[..., :d])
    assert not torch.allclose(weak[..., d:], base[..., d:])
    # uniform causal attention: head 1's output at t is the mean of its values at 0..t
    values: list[Any] = []
    handle = layer.module.v_proj.register_forward_hook(lambda _m, _i, out: values.append(out.detach()))
    try:
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        handle.remove()
    groups = layer.heads // (values[0].shape[-1] // d)
    kv = values[0][..., (1 // groups) * d : (1 // groups + 1) * d]
    running_mean = kv.cumsum(dim=1) / torch.arange(1, ids.shape[1] + 1)[None, :, None]
    torch.testing.assert_close(weak[..., d:], running_mean, rtol=1e-4, atol=1e-5)
    # leaving the context removes the hooks
    torch.testing.assert_close(_head_outputs(model, ids, 0), base)


def test_a_head_the_model_does_not_have_is_refused(tiny: tuple[Any, Any]) -> None:
    _, model = tiny
    with pytest.raises(air.AIRError, match=r"no head \(5, 0\)"), air.disabled_heads(model, [(5, 0)]):
        pass


def test_scores_are_exactly_zero_when_no_head_is_disabled(tiny: tuple[Any, Any]) -> None:
    tokenizer, model = tiny
    samples = list(air.influence(model, tokenizer, RECORDS, []))
    assert [s.score for s in samples] == [0.0, 0.0, 0.0]
    assert all(step == 0.0 for s in samples for step in s.step_scores)
    assert samples[0].base_loss == samples[0].reference_loss > 0


def test_influence_is_the_loss_difference_per_step(tiny: tuple[Any, Any]) -> None:
    tokenizer, model = tiny
    first, second, _ = air.influence(model, tokenizer, RECORDS, [(1, 0)])
    assert len(first.step_scores) == 3 and first.step_spans[0][0] == 0
    # the mean over the tokens is the steps' means weighted by their token counts
    assert first.reference_loss - first.base_loss != 0
    assert first.score == pytest.approx(np.mean(first.step_scores))
    relative = next(air.influence(model, tokenizer, RECORDS[:1], [(1, 0)], sample_score="relative"))
    assert relative.score == pytest.approx((first.reference_loss - first.base_loss) / first.base_loss)
    # batching does not change a sample's numbers
    alone = next(air.influence(model, tokenizer, RECORDS[1:2], [(1, 0)], batch_size=1))
    assert alone.step_scores == pytest.approx(second.step_scores, abs=1e-5)


def test_split_steps() -> None:
    assert air.split_steps("Step 1: a\nStep 2: b\n\nAnswer: c") == [(0, 9), (9, 19), (19, 30)]
    assert air.split_steps("one line") == [(0, 8)]
    assert air.split_steps("a\n\n\nb") == [(0, 1), (1, 5)]
    # a blank run at the end is no step of its own
    assert air.split_steps("a\n\n") == [(0, 3)]


def test_retrieval_hits_on_hand_made_attention() -> None:
    queries, sources = np.array([4, 5]), np.array([1, 2])
    weights = np.full((1, 3, 6, 6), 1 / 6)  # head 0: uniform (argmax: position 0)
    weights[0, 1, 4, 1] = weights[0, 1, 5, 2] = 1.0  # head 1: a perfect copy head
    weights[0, 2, 4, 1] = 1.0  # head 2: right once
    assert air.retrieval_hits(weights, queries, sources).tolist() == [0.0, 1.0, 0.5]


def test_retrieval_scores_on_the_tiny_model(tiny: tuple[Any, Any]) -> None:
    tokenizer, model = tiny
    scores = air.retrieval_scores(model, tokenizer, probes=4, haystack=10, needle=5, seed=3)
    assert scores.shape == (2, 2) and ((scores >= 0) & (scores <= 1)).all()
    assert model.config._attn_implementation == "sdpa"  # set back after the eager pass
    np.testing.assert_array_equal(scores, air.retrieval_scores(model, tokenizer, 4, 10, 5, seed=3))


def test_copy_probes_repeat_a_needle_of_distinct_tokens(tiny: tuple[Any, Any]) -> None:
    tokenizer, _ = tiny
    ids, start = air.copy_probes(tokenizer, count=3, haystack=7, needle=4, seed=0)
    assert ids.shape == (3, 22) and start == 7
    for row in ids:
        needle = row[7:11]
        assert len(set(needle.tolist())) == 4
        np.testing.assert_array_equal(row[18:22], needle)
        assert not set(needle.tolist()) & (set(row[:7].tolist()) | set(row[11:18].tolist()))


def test_critical_heads_and_selection_are_deterministic() -> None:
    scores = np.array([[0.1, 0.9], [0.9, 0.0]])
    assert air.critical_heads(scores, 0.05) == [(0, 1)]  # at least one; ties to the lower layer
    assert air.critical_heads(scores, 0.5) == [(0, 1), (1, 0)]
    assert air.select([0.2, 0.5, 0.5, -1.0], 0.5) == [1, 2]
    assert air.select([0.3, 0.3, 0.3], 0.34) == [0]


def test_step_weights_by_hand() -> None:
    weights = air.step_weights([0.0, np.log(3.0)], "softmax")
    assert weights == pytest.approx([0.5, 1.5])
    assert air.step_weights([1.0, 2.0, 3.0], "minmax") == pytest.approx([0.0, 1.0, 2.0])
    assert air.step_weights([2.0, 2.0], "minmax") == [1.0, 1.0]
    # a high temperature flattens the weights
    assert air.step_weights([0.0, 5.0], "softmax", temperature=1e6) == pytest.approx([1.0, 1.0], abs=1e-4)


def test_settings_name_the_bad_value() -> None:
    with pytest.raises(air.AIRError, match="hf:DIR"):
        air.AIRSettings(model="scripted:x", data="d.jsonl")
    with pytest.raises(air.AIRError, match="head_fraction"):
        air.AIRSettings(model="hf:m", data="d.jsonl", head_fraction=0)
    with pytest.raises(air.AIRError, match="weighting"):
        air.AIRSettings(model="hf:m", data="d.jsonl", weighting="rank")  # type: ignore[arg-type]


def test_an_empty_completion_is_refused(tiny: tuple[Any, Any]) -> None:
    tokenizer, model = tiny
    with pytest.raises(air.AIRError, match="record 1: the completion is empty"):
        list(air.influence(model, tokenizer, [RECORDS[0], {"prompt": "a", "completion": ""}], []))


def test_a_model_folder_without_tokenizer_is_refused(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((tiny_chat_lm_dir / name).read_bytes())
    settings = air.AIRSettings(model=f"hf:{bare}", data=PLAIN)
    with pytest.raises(Exception, match="tokenizer"):
        air.run_air(settings, tmp_path / "run")


def test_run_writes_its_folder_and_resumes(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    settings = air.AIRSettings(
        model=f"hf:{tiny_chat_lm_dir}", data=PLAIN, probes=4, probe_haystack=10, probe_needle=5, batch_size=2
    )
    whole = air.run_air(settings, tmp_path / "whole")
    assert whole["samples"] == 3 and whole["heads"] == 4 and len(whole["critical_heads"]) == 1
    heads = json.loads((tmp_path / "whole" / "heads.json").read_text())
    assert np.asarray(heads["retrieval_scores"]).shape == (2, 2)
    selected = [json.loads(line) for line in (tmp_path / "whole" / "selected.jsonl").read_text().splitlines()]
    assert len(selected) == 1 and selected[0] == PLAIN[whole["selected"][0]]
    weighted = [json.loads(line) for line in (tmp_path / "whole" / "weighted.jsonl").read_text().splitlines()]
    assert [len(r["completion_weights"]) for r in weighted] == [3, 2, 1]
    assert all(np.mean([w for _, w in r["completion_weights"]]) == pytest.approx(1.0) for r in weighted)
    # a run stopped after its first sample continues from there to the same numbers
    part = tmp_path / "part"
    air.run_air(settings, part)
    lines = (part / "scores.jsonl").read_text().splitlines()
    (part / "scores.jsonl").write_text(lines[0] + "\n")
    (part / "summary.json").unlink()
    resumed = air.run_air(settings, part, resume=True)
    assert resumed["selected"] == whole["selected"]
    again = [json.loads(line) for line in (part / "scores.jsonl").read_text().splitlines()]
    assert [line["index"] for line in again] == [0, 1, 2]
    # the rest is scored in another batch: equal up to float rounding of the padding
    for fresh, first in zip(again, map(json.loads, lines), strict=True):
        assert fresh["step_scores"] == pytest.approx(first["step_scores"], abs=1e-5)


def _span_losses(spec: str, records: list[dict[str, Any]]) -> tuple[float, float]:
    """Mean completion-token loss before and after each record's blank line."""
    tokenizer, model = load_causal_lm(spec)
    model.eval()
    encoded = [air._encode(tokenizer, r, 1024) for r in records]
    losses = air._token_losses(model, [(p, c) for p, c, _, _ in encoded], tokenizer.pad_token_id)
    first, second = [], []
    for record, (_, _, offsets, _), loss in zip(records, encoded, losses, strict=True):
        cut = record["completion"].index("\n\n")
        for (start, _), value in zip(offsets, loss, strict=True):
            (first if start < cut else second).append(value)
    return float(np.mean(first)), float(np.mean(second))


@pytest.mark.slow
def test_sft_trains_on_the_weighted_steps_only(tiny_chat_lm_dir: Path, tmp_path: Path) -> None:
    from embodia.policies.recipes.sft import SFTSettings, run_sft

    rng = np.random.default_rng(0)
    records = []
    for index in range(16):
        a, b = rng.integers(10, 99, 2)
        first, second = f"alpha {a} beta {b} gamma", f"delta {b} epsilon {a} zeta"
        completion = f"{first}\n\n{second}"
        # the first step weighs nothing, the second twice (mean 1)
        weights = [[len(first), 0.0], [len(completion), 2.0]]
        records.append(
            {"prompt": f"Item {index}:\n", "completion": completion, "completion_weights": weights}
        )
    plain = [{k: v for k, v in r.items() if k != "completion_weights"} for r in records]
    before = _span_losses(f"hf:{tiny_chat_lm_dir}", plain)
    summary = run_sft(
        SFTSettings(
            model=f"hf:{tiny_chat_lm_dir}",
            data=tuple(records),
            max_steps=30,
            learning_rate=3e-3,
            logging_steps=5,
        ),
        tmp_path / "run",
    )
    after = _span_losses(summary["policy"], plain)
    assert summary["train_loss_last"] < summary["train_loss_first"]
    assert after[1] < 0.1 * before[1]  # the weighted step is learnt
    assert after[0] > 0.5 * before[0]  # the unweighted one moves only through shared weights
    assert after[0] > 10 * after[1]


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ([], "non-empty list"),
        ([[5, 1.0], [3, 1.0]], r"completion_weights\[1\] must start with an end offset above 5"),
        ([[5, -1.0]], "non-negative weight"),
        ([[5, float("nan")]], "non-negative weight"),
        ([["5", 1.0]], "end offset"),
    ],
)
def test_bad_completion_weights_are_named(weights: list[Any], problem: str) -> None:
    from embodia.policies.recipes.sft import SFTError, load_records

    record = {"prompt": "p", "completion": "some text", "completion_weights": weights}
    with pytest.raises(SFTError, match=problem):
        load_records([record])


def test_data_retrieval_scores_on_the_tiny_model(tiny: tuple[Any, Any]) -> None:
    tokenizer, model = tiny
    scores = air.data_retrieval_scores(model, tokenizer, RECORDS, batch_size=2)
    assert scores.shape == (2, 2) and ((scores >= 0) & (scores <= 1)).all()
    np.testing.assert_allclose(scores, air.data_retrieval_scores(model, tokenizer, RECORDS, batch_size=3))
    with pytest.raises(air.AIRError, match="no completion token stands in its prompt"):
        air.data_retrieval_scores(model, tokenizer, [{"prompt": "a", "completion": "zzz"}])


def test_a_record_with_an_empty_prompt_is_scored(tiny: tuple[Any, Any]) -> None:
    tokenizer, model = tiny
    (sample,) = air.influence(model, tokenizer, [{"prompt": "", "completion": "one\n\ntwo"}], [(1, 0)])
    assert len(sample.step_scores) == 2 and sample.tokens > 0


def test_weights_fall_on_the_text_sft_trains_on(tiny_chat_lm_dir: Path) -> None:
    """A template that writes an empty think block before the reply (as Qwen3's does): AIR's
    steps and the SFT recipe's weights count characters of the same rendered completion."""
    from transformers import AutoTokenizer

    from embodia.policies.recipes.sft import weighted_rows

    tokenizer = AutoTokenizer.from_pretrained(tiny_chat_lm_dir)
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.role == 'assistant' %}<think>\n\n</think>\n\n{% endif %}{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    record = {
        "messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "First.\n\nSecond."}]
    }
    (step_spans,) = [air.split_steps(air.rendered_completion(tokenizer, record)[1])]
    completion = air.rendered_completion(tokenizer, record)[1]
    assert completion.startswith("<think>")
    # weight 0 on every step but the one holding "Second.", 3 there
    ends = [end for _, end in step_spans]
    second = next(i for i, (a, b) in enumerate(step_spans) if "Second." in completion[a:b])
    weights = [[end, 3.0 if i == second else 0.0] for i, end in enumerate(ends)]
    (row,) = weighted_rows(tokenizer, [{**record, "completion_weights": weights}], 256)
    weighted = [t for t, w in zip(row["input_ids"], row["token_weights"], strict=True) if w == 3.0]
    assert "Second." in tokenizer.decode(weighted) and "First" not in tokenizer.decode(weighted)
