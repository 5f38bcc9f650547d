"""AIR: reasoning data selection and step-weighted fine-tuning by attention-head influence.

AIR (Liu et al., 2025) asks which samples of a reasoning corpus, and which steps inside a
sample, lean on a model's retrieval heads: the few attention heads that copy tokens from the
context. It takes four moves, each a function here:

1. **Retrieval heads.** By default on the samples themselves (:func:`data_retrieval_scores`):
   over the completion tokens that also stand in the prompt, the share where a head's
   strongest attention falls on a prompt position holding that token (AIR's two conditions,
   teacher-forced). Or on copy probes (:func:`retrieval_scores`): random token strings whose
   needle appears twice, ``haystack, needle, haystack, needle``; teacher-forced, at each
   position of the second needle the next token copies a needle token, and head ``h``
   retrieves there when its strongest attention falls on that token in the first needle (the
   retrieval-head test of Wu et al., 2024, teacher-forced rather than greedy, so it also
   works on models that cannot yet copy). A head's score ``R_h`` is the share of copies it
   retrieves; the top ``head_fraction`` of heads (at least ``min_heads``) are the critical
   heads.
2. **The weakened reference** (:func:`disabled_heads`). Forward hooks on each attention
   layer's query projection zero the critical heads' query columns. A zero query scores every
   key 0, so the head attends uniformly (``a_ij = 1/N`` over the positions it may see) under
   eager, SDPA or flash attention alike; rotary position embeddings leave a zero query zero.
   No model file is patched, and leaving the context removes the hooks.
3. **The Attention Influence Score** (:func:`influence`). Per completion token, the
   cross-entropy under the reference minus that under the base model. A reasoning step is a
   paragraph of the completion, or a line that starts "Step k" (:func:`split_steps`). A
   step's score is the mean over its tokens; a sample's is the mean over its steps
   (``mean_step``), or the AttentionInfluence form ``(L_ref - L_base) / L_base`` over all
   its tokens (``relative``). With no head disabled every score is exactly 0.
4. **Using the scores.** (a) Global selection (:func:`select`): the top ``select_fraction``
   of samples, ties kept in corpus order, for distillation data. (b) Step-weighted
   fine-tuning (:func:`step_weights`): each step's tokens weighted by ``n * softmax(s / T)``
   or by min-max-normalised scores, both with mean 1 over a sample's steps. The
   ``completion_weights`` the run writes are what embodia's SFT recipe trains on as a
   per-token weighted loss.

:func:`run_air` does all of it in a run folder: ``heads.json`` (every head's retrieval
score and the critical ones), ``scores.jsonl`` (one line per sample, written as it goes;
``--resume`` continues after the last one), ``selected.jsonl`` (the chosen records),
``weighted.jsonl`` (every record with its ``completion_weights``) and ``summary.json``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from embodia.core.limits import check_range, check_seed
from embodia.core.runs import RunFolder, jsonl_text, runner, write_atomic, write_json
from embodia.errors import EmbodiaError
from embodia.policies.recipes.sft import Record, load_causal_lm, load_records, rendered_completion
from embodia.policies.spec import parse_policy_spec

if TYPE_CHECKING:
    import torch

Head = tuple[int, int]
"""(layer, query head)."""

SCORES = "scores.jsonl"
HEADS = "heads.json"
SELECTED = "selected.jsonl"
WEIGHTED = "weighted.jsonl"
SUMMARY = "summary.json"

_STEP_START = re.compile(r"\n[ \t]*\n+|\n(?=[ \t]*Step\s+\d+)", re.IGNORECASE)


class AIRError(EmbodiaError, ValueError):
    """AIR settings or data that cannot be used; the message names the bad value."""


@dataclass(frozen=True)
class AIRSettings:
    """What an AIR run is (see the module docstring)."""

    model: str
    """The model whose heads are probed and whose losses are compared: ``hf:DIR``."""
    data: str | tuple[Record, ...]
    """The reasoning samples: SFT records (a JSONL file or the records), chat or
    prompt/completion; the completion (the last assistant message) is what is scored."""
    head_fraction: float = 0.05
    """Share of all heads, highest retrieval score first, that are disabled (AIR's delta)."""
    min_heads: int = 1
    """At least this many heads are disabled, however few the model has."""
    probe: Literal["data", "copies"] = "data"
    """Where retrieval is measured: on the samples themselves (:func:`data_retrieval_scores`,
    AIR's context subset) or on random copy probes (:func:`retrieval_scores`)."""
    probes: int = 32
    """Copy probes the retrieval scores are averaged over (``probe="copies"``)."""
    probe_haystack: int = 48
    """Random tokens before and after the first needle of a probe."""
    probe_needle: int = 12
    """Tokens of a probe's needle (all distinct)."""
    sample_score: Literal["mean_step", "relative"] = "mean_step"
    """A sample's score: the mean of its step scores, or (L_ref - L_base) / L_base."""
    select_fraction: float = 0.5
    """Share of the samples, highest score first, that :func:`select` keeps."""
    weighting: Literal["softmax", "minmax"] = "softmax"
    """How step scores become loss weights (:func:`step_weights`)."""
    temperature: float = 1.0
    """Softmax temperature of the step weights (the scores' own unit: nats per token)."""
    max_length: int = 1024
    """Tokens per sample (prompt and completion); longer prompts are cut at the front."""
    batch_size: int = 8
    """Samples per forward pass."""
    seed: int = 0
    """Seed of the copy probes."""

    def __post_init__(self) -> None:
        scheme, _, _ = parse_policy_spec(self.model)
        if scheme != "hf":
            raise AIRError(
                f"AIR reads a local transformers model's heads: the model must be hf:DIR, got {self.model!r}"
            )
        if isinstance(self.data, str) and not self.data.strip():
            raise AIRError("data is empty: give a JSONL file or the records themselves")
        for name in ("head_fraction", "select_fraction"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value <= 1):
                raise AIRError(f"{name} must be in (0, 1], got {value!r}")
        check_range("min_heads", self.min_heads, 1, 65_536, AIRError)
        check_range("probes", self.probes, 1, 100_000, AIRError)
        check_range("probe_haystack", self.probe_haystack, 1, 100_000, AIRError)
        check_range("probe_needle", self.probe_needle, 2, 10_000, AIRError)
        if self.probe not in ("data", "copies"):
            raise AIRError(f"unknown probe {self.probe!r}: data | copies")
        if self.sample_score not in ("mean_step", "relative"):
            raise AIRError(f"unknown sample_score {self.sample_score!r}: mean_step | relative")
        if self.weighting not in ("softmax", "minmax"):
            raise AIRError(f"unknown weighting {self.weighting!r}: softmax | minmax")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise AIRError(f"temperature must be a positive number, got {self.temperature!r}")
        check_range("max_length", self.max_length, 8, 1_000_000, AIRError)
        check_range("batch_size", self.batch_size, 1, 4096, AIRError)
        check_seed("seed", self.seed, AIRError)


# --------------------------------------------------------------------------- attention layers


@dataclass(frozen=True)
class AttentionLayer:
    """One self-attention module: where its query heads sit in ``q_proj``'s output."""

    index: int
    module: Any
    heads: int
    head_dim: int


def attention_layers(model: Any) -> list[AttentionLayer]:
    """The model's self-attention modules in layer order: those with a ``q_proj`` linear
    layer and an ``o_proj`` (Llama, Qwen2, Mistral, Gemma and their kin; not fused-projection
    models such as Phi-3, and not OLMo2, whose norm over all queries would rescale the
    others when some are zeroed). An
    :class:`AIRError` for a model without them."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    heads = int(config.num_attention_heads)
    found = [m for _, m in model.named_modules() if hasattr(m, "q_proj") and hasattr(m, "o_proj")]
    if not found:
        raise AIRError(f"{type(model).__name__} has no attention module with q_proj/o_proj projections")
    layers = []
    for index, module in enumerate(found):
        head_dim = int(getattr(module, "head_dim", module.q_proj.out_features // heads))
        if module.q_proj.out_features != heads * head_dim:
            raise AIRError(
                f"layer {index}: q_proj gives {module.q_proj.out_features} features, "
                f"not {heads} heads of {head_dim}"
            )
        layers.append(AttentionLayer(index, module, heads, head_dim))
    return layers


@contextmanager
def disabled_heads(model: Any, heads: Sequence[Head]) -> Iterator[None]:
    """Inside the context, each (layer, head) of ``heads`` attends uniformly: its query is
    zeroed by a forward hook on the layer's ``q_proj`` (see the module docstring)."""
    layers = attention_layers(model)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < len(layers) and 0 <= head < layers[layer].heads):
            raise AIRError(
                f"no head ({layer}, {head}): the model has {len(layers)} layers of {layers[0].heads} heads"
            )
        by_layer.setdefault(layer, []).append(head)
    handles = []

    def hook_for(columns: list[slice]) -> Any:
        def zero_queries(_module: Any, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
            output = output.clone()
            for span in columns:
                output[..., span] = 0
            return output

        return zero_queries

    try:
        for layer, chosen in by_layer.items():
            d = layers[layer].head_dim
            columns = [slice(h * d, (h + 1) * d) for h in sorted(set(chosen))]
            handles.append(layers[layer].module.q_proj.register_forward_hook(hook_for(columns)))
        yield
    finally:
        for handle in handles:
            handle.remove()


# --------------------------------------------------------------------------- retrieval heads


@contextmanager
def _eager_attention(model: Any) -> Iterator[None]:
    """The model on eager attention inside the context (the attention weights themselves are
    read), back on its own implementation after."""
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


def _plain_token_ids(tokenizer: Any) -> NDArray[np.int64]:
    special = set(tokenizer.all_special_ids)
    ids = [i for i in range(len(tokenizer)) if i not in special]
    if len(ids) < 4:
        raise AIRError("the tokenizer has too few ordinary tokens to build copy probes")
    return np.asarray(ids, dtype=np.int64)


def copy_probes(
    tokenizer: Any, count: int, haystack: int, needle: int, seed: int
) -> tuple[NDArray[np.int64], int]:
    """``count`` probes ``haystack, needle, haystack, needle`` of random ordinary tokens, as a
    (count, 2 * haystack + 2 * needle) array, and where the first needle starts."""
    vocabulary = _plain_token_ids(tokenizer)
    if needle > len(vocabulary):
        raise AIRError(
            f"a needle of {needle} distinct tokens needs a larger vocabulary than {len(vocabulary)}"
        )
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        words = rng.choice(vocabulary, size=needle, replace=False)
        # the haystack avoids the needle's tokens, so a copy has one source only
        rest = np.setdiff1d(vocabulary, words)
        before, after = rng.choice(rest, size=haystack), rng.choice(rest, size=haystack)
        rows.append(np.concatenate([before, words, after, words]))
    return np.stack(rows), haystack


def retrieval_scores(
    model: Any, tokenizer: Any, probes: int = 32, haystack: int = 48, needle: int = 12, seed: int = 0
) -> NDArray[np.float64]:
    """Every head's retrieval score ``R_h`` on copy probes (see the module docstring), as a
    (layers, heads) array in [0, 1]."""
    import torch

    ids, start = copy_probes(tokenizer, probes, haystack, needle, seed)
    layers = attention_layers(model)
    second = start + needle + haystack  # where the repeated needle starts
    # query t (in the second needle, before its last token) predicts the copy of needle[t - second + 1]
    queries = np.arange(second, second + needle - 1)
    sources = queries - second + 1 + start  # the first needle's position of that token
    with _eager_attention(model), torch.no_grad():
        out = model(
            input_ids=torch.as_tensor(ids, device=model.device), output_attentions=True, use_cache=False
        )
    if out.attentions is None or len(out.attentions) != len(layers):
        raise AIRError("the model did not return one attention map per layer")
    return np.stack(
        [retrieval_hits(weights.float().cpu().numpy(), queries, sources) for weights in out.attentions]
    )


def retrieval_hits(
    weights: NDArray[np.floating], queries: NDArray[np.int64], sources: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Per head, the share of (probe, query) pairs whose strongest attention is on the query's
    source: ``weights`` is one layer's (probes, heads, positions, positions) attention, query
    ``queries[i]`` should retrieve position ``sources[i]``."""
    strongest = weights[:, :, queries, :].argmax(axis=-1)  # (probes, heads, queries)
    hits: NDArray[np.float64] = (strongest == sources[None, None, :]).mean(axis=(0, 2))
    return hits


def data_retrieval_scores(
    model: Any, tokenizer: Any, records: Sequence[Record], max_length: int = 1024, batch_size: int = 8
) -> NDArray[np.float64]:
    """Every head's retrieval score on the samples themselves, teacher-forced: over the
    completion tokens that also stand in the prompt (AIR's context subset ``k``), the share
    where the head's strongest attention, from the position that predicts the token, falls on
    a prompt position holding that very token. A (layers, heads) array in [0, 1]."""
    import torch

    from embodia.policies.trainable import right_padded

    layers = attention_layers(model)
    hits = np.zeros((len(layers), layers[0].heads), dtype=np.float64)
    copies = 0
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with _eager_attention(model):
        for first in range(0, len(records), batch_size):
            encoded = [_encode(tokenizer, r, max_length)[:2] for r in records[first : first + batch_size]]
            ids, mask = right_padded([p + c for p, c in encoded], pad)
            with torch.no_grad():
                out = model(
                    input_ids=ids.to(model.device),
                    attention_mask=mask.to(model.device),
                    output_attentions=True,
                    use_cache=False,
                )
            strongest = [w.argmax(dim=-1).cpu().numpy() for w in out.attentions]  # (rows, heads, positions)
            for row, (p, c) in enumerate(encoded):
                prompt = np.asarray(p)
                for offset, token in enumerate(c):
                    if token not in prompt:
                        continue
                    copies += 1
                    query = len(p) + offset - 1
                    for layer, chosen in enumerate(strongest):
                        where = chosen[row, :, query]
                        hits[layer] += (where < len(p)) & (prompt[np.minimum(where, len(p) - 1)] == token)
    if not copies:
        raise AIRError("no completion token stands in its prompt: the samples give no retrieval to measure")
    scores: NDArray[np.float64] = hits / copies
    return scores


def critical_heads(scores: NDArray[np.float64], fraction: float, minimum: int = 1) -> list[Head]:
    """The top ``fraction`` of heads by retrieval score (at least ``minimum``), highest first;
    ties go to the lower layer, then the lower head."""
    flat = scores.reshape(-1)
    count = min(len(flat), max(minimum, math.floor(fraction * len(flat) + 1e-9)))
    order = sorted(range(len(flat)), key=lambda i: (-flat[i], i))[:count]
    heads = scores.shape[1]
    return [(i // heads, i % heads) for i in order]


# --------------------------------------------------------------------------- influence


def split_steps(text: str) -> list[tuple[int, int]]:
    """The reasoning steps of a completion as (start, end) character spans covering it: a
    blank line ends a step, and a line starting "Step k" begins one."""
    spans, begin = [], 0
    for match in _STEP_START.finditer(text):
        if text[begin : match.start()].strip():
            spans.append((begin, match.start()))
        begin = match.start()
    if text[begin:].strip() or not spans:
        spans.append((begin, len(text)))
    else:  # trailing blank lines close the last step
        spans[-1] = (spans[-1][0], len(text))
    # the separators belong to the step they open; the first step starts at 0
    spans[0] = (0, spans[0][1])
    return spans


@dataclass(frozen=True)
class SampleInfluence:
    """One sample's Attention Influence Score."""

    score: float
    step_scores: list[float]
    step_spans: list[tuple[int, int]]
    """(start, end) characters of each step in the completion."""
    tokens: int
    base_loss: float
    """Mean cross-entropy (nats per completion token) under the base model."""
    reference_loss: float


def _encode(
    tokenizer: Any, record: Record, max_length: int
) -> tuple[list[int], list[int], list[tuple[int, int]], str]:
    """Prompt ids, completion ids, each completion token's character span and the completion
    text, for the text the
    SFT recipe trains on (:func:`~embodia.policies.recipes.sft.rendered_completion`). An
    empty prompt becomes the beginning-of-sequence (or end-of-sequence) token, so that the
    first completion token is predicted from something."""
    prompt, completion = rendered_completion(tokenizer, record)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if not prompt_ids:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        prompt_ids = [start] if start is not None else []
    if not prompt_ids:
        raise AIRError("a record with an empty prompt needs a tokenizer with a bos or eos token")
    encoded = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
    completion_ids = encoded["input_ids"][: max_length - 1]
    offsets = [tuple(span) for span in encoded["offset_mapping"][: len(completion_ids)]]
    keep = max(1, max_length - len(completion_ids))
    return prompt_ids[-keep:], completion_ids, offsets, completion


def _token_losses(
    model: Any, rows: Sequence[tuple[list[int], list[int]]], pad: int
) -> list[NDArray[np.float64]]:
    """Per completion token cross-entropy of each (prompt ids, completion ids) row."""
    import torch

    from embodia.policies.trainable import right_padded

    ids, mask = right_padded([p + c for p, c in rows], pad)
    with torch.no_grad():
        logits = model(
            input_ids=ids.to(model.device), attention_mask=mask.to(model.device), use_cache=False
        ).logits
    # the cross-entropy alone: token_scores would add an entropy pass over the vocabulary
    logps = torch.log_softmax(logits[:, :-1].float().cpu(), dim=-1)
    picked = -logps.gather(-1, ids[:, 1:, None]).squeeze(-1)
    return [
        picked[i, len(p) - 1 : len(p) + len(c) - 1].numpy().astype(np.float64)
        for i, (p, c) in enumerate(rows)
    ]


def _sample_influence(
    base: NDArray[np.float64],
    reference: NDArray[np.float64],
    offsets: Sequence[tuple[int, int]],
    completion: str,
    how: str,
) -> SampleInfluence:
    spans = split_steps(completion)
    ends = [end for _, end in spans]
    # a token belongs to the step its first character is in
    step_of = np.asarray(
        [min(np.searchsorted(ends, start, side="right"), len(spans) - 1) for start, _ in offsets]
    )
    difference = reference - base
    kept, step_scores = [], []
    for step, span in enumerate(spans):
        tokens = difference[step_of == step]
        if len(tokens):
            kept.append(span)
            step_scores.append(float(tokens.mean()))
    base_loss, reference_loss = float(base.mean()), float(reference.mean())
    if how == "relative":
        score = (reference_loss - base_loss) / base_loss if base_loss > 0 else 0.0
    else:
        score = float(np.mean(step_scores))
    return SampleInfluence(score, step_scores, kept, len(base), base_loss, reference_loss)


def influence(
    model: Any,
    tokenizer: Any,
    records: Sequence[Record],
    heads: Sequence[Head],
    *,
    sample_score: str = "mean_step",
    max_length: int = 1024,
    batch_size: int = 8,
) -> Iterator[SampleInfluence]:
    """Each record's Attention Influence Score with ``heads`` disabled (module docstring), in
    order, a batch at a time."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for first in range(0, len(records), batch_size):
        batch = records[first : first + batch_size]
        encoded = [_encode(tokenizer, record, max_length) for record in batch]
        for index, (_, completion_ids, _, _) in enumerate(encoded):
            if not completion_ids:
                raise AIRError(f"record {first + index}: the completion is empty once tokenised")
        rows = [(p, c) for p, c, _, _ in encoded]
        base = _token_losses(model, rows, pad)
        with disabled_heads(model, heads):
            reference = _token_losses(model, rows, pad)
        for (_, _, offsets, completion), b, r in zip(encoded, base, reference, strict=True):
            yield _sample_influence(b, r, offsets, completion, sample_score)


# --------------------------------------------------------------------------- using the scores


def select(scores: Sequence[float], fraction: float) -> list[int]:
    """Indices of the top ``fraction`` of samples by score (at least one), in corpus order;
    equal scores keep the earlier sample."""
    count = max(1, math.floor(fraction * len(scores) + 1e-9))
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:count]
    return sorted(ranked)


def step_weights(scores: Sequence[float], how: str = "softmax", temperature: float = 1.0) -> list[float]:
    """Loss weights of a sample's steps, mean 1: ``n * softmax(s / temperature)``, or the
    min-max-normalised scores rescaled to mean 1 (all 1 when the scores are all equal)."""
    s = np.asarray(scores, dtype=np.float64)
    if not len(s):
        return []
    if how == "softmax":
        z = s / temperature
        e = np.exp(z - z.max())
        weights = len(s) * e / e.sum()
    elif how == "minmax":
        spread = s.max() - s.min()
        if spread <= 0:
            return [1.0] * len(s)
        normalised = (s - s.min()) / spread
        weights = normalised * len(s) / normalised.sum()
    else:
        raise AIRError(f"unknown weighting {how!r}: softmax | minmax")
    return [float(w) for w in weights]


def weighted_record(
    record: Record, influence: SampleInfluence, how: str, temperature: float
) -> dict[str, Any]:
    """``record`` with ``completion_weights``: [[end character, weight], ...], one per step of
    its completion, for the SFT recipe's weighted loss."""
    weights = step_weights(influence.step_scores, how, temperature)
    ends = [end for _, end in influence.step_spans]
    ends[-1] = max(ends[-1], 10**9)  # the last step runs to the end, special tokens included
    return {**record, "completion_weights": [[e, round(w, 6)] for e, w in zip(ends, weights, strict=True)]}


# --------------------------------------------------------------------------- the run


@runner
def run_air(settings: AIRSettings, out: Path, *, resume: bool = False) -> dict[str, Any]:
    """Probe the heads, score every sample, select and weight (module docstring) into the
    run folder ``out``; with ``resume``, continue the scoring where it stopped."""
    folder = RunFolder(out, SCORES)
    records = load_records(settings.data, "data")
    config = asdict(settings)
    if not isinstance(settings.data, str):
        config["data"] = f"{len(records)} records given in memory"
    folder.begin(config, resume)
    finished = folder.finished(SUMMARY)
    if finished is not None:
        return finished
    tokenizer, model = load_causal_lm(settings.model)
    model.eval()
    kept = folder.kept_records(in_order="index", first=0, what="scores")
    started = time.perf_counter()
    with folder.recording(kept, {"settings": config}) as log:
        if settings.probe == "data":
            scores = data_retrieval_scores(
                model, tokenizer, records, settings.max_length, settings.batch_size
            )
        else:
            scores = retrieval_scores(
                model,
                tokenizer,
                settings.probes,
                settings.probe_haystack,
                settings.probe_needle,
                settings.seed,
            )
        heads = critical_heads(scores, settings.head_fraction, settings.min_heads)
        write_json(
            folder.out / HEADS,
            {"retrieval_scores": np.round(scores, 6).tolist(), "critical_heads": [list(h) for h in heads]},
        )
        done = len(kept)
        lines = list(kept)
        for offset, sample in enumerate(
            influence(
                model,
                tokenizer,
                records[done:],
                heads,
                sample_score=settings.sample_score,
                max_length=settings.max_length,
                batch_size=settings.batch_size,
            )
        ):
            line = {"index": done + offset, **asdict(sample)}
            log.append(line)
            lines.append(line)
    scoring_s = time.perf_counter() - started
    samples = [
        SampleInfluence(
            line["score"],
            line["step_scores"],
            [tuple(span) for span in line["step_spans"]],
            line["tokens"],
            line["base_loss"],
            line["reference_loss"],
        )
        for line in lines
    ]
    chosen = select([s.score for s in samples], settings.select_fraction)
    write_atomic(folder.out / SELECTED, jsonl_text([dict(records[i]) for i in chosen]))
    write_atomic(
        folder.out / WEIGHTED,
        jsonl_text(
            weighted_record(r, s, settings.weighting, settings.temperature)
            for r, s in zip(records, samples, strict=True)
        ),
    )
    values = np.asarray([s.score for s in samples])
    summary = {
        "settings": config,
        "samples": len(samples),
        "heads": int(scores.size),
        "critical_heads": [list(h) for h in heads],
        "critical_retrieval_scores": [round(float(scores[h]), 6) for h in heads],
        "mean_retrieval_score": round(float(scores.mean()), 6),
        "score_mean": round(float(values.mean()), 6),
        "score_std": round(float(values.std()), 6),
        "selected": chosen,
        "scoring_s": round(scoring_s, 3),
        "samples_per_s": round((len(samples) - len(kept)) / scoring_s, 3) if scoring_s > 0 else None,
    }
    folder.finish(SUMMARY, summary)
    return summary
