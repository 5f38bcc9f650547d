"""Captions from a VLM: plain greedy decoding, and HaloProbe-guided decoding that steers a beam
search away from the objects the probe doubts.

**Guided decoding** (:func:`guided_search`, a hallucination-aware beam search): the beams grow
by the model's own next-token distribution, and each time a beam's new token completes an
object mention, the mention is scored by a risk (HaloProbe's posterior p(hallucinated), read
from one teacher-forced pass over the beam's caption so far). A beam's score is
``log p(caption) + weight * sum over its mentions of (logit p(real) - logit p_reference(real))``,
where the reference is HaloProbe's prior for the mention's place in the caption: each term is the
log-likelihood ratio of the model's internals for "the object is there", in nats as the
caption's log-probability is. Measured against the prior, naming an object neither costs nor pays
on average (a plain ``log p(real)`` would reward captions that name nothing), and in log-odds a
factor of evidence weighs the same whatever the prior (a ratio of probabilities of real, bounded
by ``-log p_reference(real)``, hardly moves a beam where hallucinations are rare). The search
chooses *which* object to name where the model hesitates, at the moment it names it, and keeps
the model's wording everywhere else. With ``same_mentions_as`` only finished captions naming as
many objects as that caption compete (the comparison at equal caption length); when
none does, that caption is kept. Nothing inside the model is changed.

**Post-hoc removal** (:func:`remove_flagged`): the mentions whose posterior passes a threshold
are handed to an editor (a function that rewrites the caption without them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from embodia.perception.hallucination.detectors import token_signals
from embodia.perception.hallucination.haloprobe import HaloProbe, mention_features
from embodia.perception.hallucination.mentions import HallucinationError, Mention, repeated
from embodia.perception.hallucination.signals import (
    caption_pass,
    extend_text_inputs,
    prompt_inputs,
    run_sequence,
    sequence_inputs,
)

MentionFinder = Callable[[str], list[Mention]]
"""Finds the object mentions of a caption (unlabelled)."""


def greedy_caption(
    model: Any, processor: Any, image: np.ndarray, instruction: str, *, max_new_tokens: int = 64
) -> str:
    """The greedy caption of ``image``."""
    import torch

    inputs = prompt_inputs(processor, image, instruction)
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in inputs.items()}
    start = int(inputs["input_ids"].shape[1])
    tokenizer = processor.tokenizer
    with torch.no_grad():
        out = model.generate(
            **inputs, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id
        )
    return str(tokenizer.decode(out[0, start:], skip_special_tokens=True).strip())


def probe_predictions(
    model: Any,
    processor: Any,
    probe: HaloProbe,
    image: np.ndarray,
    instruction: str,
    caption: str,
    mentions: Sequence[Mention],
) -> dict[str, np.ndarray]:
    """The probe's ``posterior`` p(hallucinated), ``prior`` and ``balanced`` estimate for each
    mention of ``caption`` (one teacher-forced pass)."""
    if not mentions:
        return {name: np.zeros(0) for name in ("balanced", "prior", "posterior")}
    scored = caption_pass(model, processor, image, instruction, caption, mentions, attentions=True)
    internal = np.stack([mention_features(rows) for rows in token_signals(scored)])
    positions = [tokens[0] - scored.caption_start for tokens in scored.mention_tokens]
    return probe.predict(internal, positions, repeated(mentions))


Risk = Callable[[str, list[Mention]], tuple[np.ndarray, np.ndarray]]
"""For each mention of a caption: p(hallucinated), and the p(hallucinated) it is judged against
(HaloProbe: its prior for the mention's position and repetition, so the judgement is the
internal evidence alone)."""


@dataclass(frozen=True)
class GuidedCaption:
    caption: str
    """The chosen caption."""
    expected_hallucination: float
    """Its mean p(hallucinated) over its mentions (0 with none; NaN when no candidate qualified
    and ``same_mentions_as`` was kept)."""
    candidates: int
    """Finished captions that competed."""


@dataclass
class _Beam:
    ids: list[int]
    text: str
    log_prob: float = 0.0
    evidence: float = 0.0
    """Sum over its mentions of logit p(real) - logit p_reference(real): each mention's
    log-likelihood ratio of being real."""
    risks: tuple[float, ...] = ()
    mentions: int = 0

    def score(self, weight: float) -> float:
        return self.log_prob + weight * self.evidence


def _logit_real(p_hallucinated: np.ndarray) -> np.ndarray:
    """logit p(real) = log((1 - p) / p) for p = p(hallucinated)."""
    return np.asarray(np.log1p(-p_hallucinated) - np.log(p_hallucinated))


def haloprobe_risk(model: Any, processor: Any, probe: HaloProbe, image: np.ndarray, instruction: str) -> Risk:
    """HaloProbe as guided decoding's risk: its posterior p(hallucinated), judged against its
    prior for the mention's place."""

    def risk(text: str, mentions: list[Mention]) -> tuple[np.ndarray, np.ndarray]:
        predicted = probe_predictions(model, processor, probe, image, instruction, text, mentions)
        return predicted["posterior"], predicted["prior"]

    return risk


def guided_search(
    model: Any,
    processor: Any,
    image: np.ndarray,
    instruction: str,
    find_mentions: MentionFinder,
    risk: Risk,
    *,
    num_beams: int = 4,
    expand: int | None = None,
    weight: float = 1.0,
    max_new_tokens: int = 64,
    same_mentions_as: str | None = None,
) -> GuidedCaption:
    """Hallucination-aware beam search (module docstring): beams grow one token at a time from
    each beam's ``expand`` most likely next tokens (``num_beams`` by default); a child whose
    new token completes a mention has that mention scored by ``risk``; the ``num_beams``
    children with the highest ``log p(caption) + weight * sum (logit p(real) - logit p_reference(real))``
    go on. A beam ends at the end-of-sequence token; the search ends once ``num_beams`` have
    ended (or at ``max_new_tokens``), and the ended caption with the highest score per token
    wins. ``weight=0`` is a plain beam search."""
    import torch

    expand = num_beams if expand is None else expand
    if num_beams < 2 or expand < 1:
        raise HallucinationError(
            f"guided decoding needs at least two beams and one expansion; got {num_beams} and {expand}"
        )
    if weight < 0:
        raise HallucinationError(f"guided decoding's weight is at least 0; got {weight}")
    tokenizer = processor.tokenizer
    ends = model.generation_config.eos_token_id
    ends = set(ends if isinstance(ends, list) else [ends] if ends is not None else [])
    ends.add(tokenizer.eos_token_id)
    wanted = None if same_mentions_as is None else len(find_mentions(same_mentions_as))
    inputs, _, prompt_ids = sequence_inputs(processor, image, instruction, [])

    def next_log_probs(beams: list[_Beam], step: int) -> torch.Tensor:
        # the beams' own tokens (decoded text need not tokenise back to them), all of one
        # length, so one batched pass serves every beam
        grown = torch.tensor([b.ids for b in beams], dtype=prompt_ids.dtype).reshape(len(beams), step)
        sequences = torch.cat([prompt_ids.expand(len(beams), -1), grown], dim=1)
        logits = run_sequence(model, extend_text_inputs(inputs, len(prompt_ids), step), sequences).logits
        return torch.log_softmax(logits[:, -1].float().cpu(), dim=-1)

    live = [_Beam([], "")]
    ended: list[_Beam] = []
    for step in range(max_new_tokens):
        children: list[_Beam] = []
        for beam, log_probs in zip(live, next_log_probs(live, step), strict=True):
            top = torch.topk(log_probs, expand)
            for value, token in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                ids = [*beam.ids, token]
                if token in ends:
                    children.append(replace(beam, ids=ids, log_prob=beam.log_prob + value))
                    continue
                text = tokenizer.decode(ids, skip_special_tokens=True)
                child = _Beam(ids, text, beam.log_prob + value, beam.evidence, beam.risks, beam.mentions)
                mentions = find_mentions(text)
                if len(mentions) > beam.mentions:
                    p, reference = (
                        np.clip(v[beam.mentions :], 1e-6, 1.0 - 1e-6) for v in risk(text, mentions)
                    )
                    child.risks = (*beam.risks, *p.tolist())
                    child.evidence += float(np.sum(_logit_real(p) - _logit_real(reference)))
                    child.mentions = len(mentions)
                children.append(child)
        children.sort(key=lambda b: b.score(weight), reverse=True)
        live = []
        for rank, child in enumerate(children):
            if child.ids[-1] in ends:
                if rank < num_beams:  # an ending among the best children is a finished caption
                    ended.append(child)
            elif len(live) < num_beams:
                live.append(child)
        if len(ended) >= num_beams or not live:
            break
    finished = [b for b in ended + live if wanted is None or b.mentions == wanted]
    if not finished:
        if same_mentions_as is None:
            raise HallucinationError("guided decoding produced no caption")
        return GuidedCaption(same_mentions_as, float("nan"), 0)
    best = max(finished, key=lambda b: b.score(weight) / len(b.ids))
    return GuidedCaption(best.text.strip(), float(np.mean(best.risks)) if best.risks else 0.0, len(finished))


def remove_flagged(
    caption: str,
    mentions: Sequence[Mention],
    probabilities: Sequence[float],
    edit: Callable[[str, Sequence[Mention]], str],
    threshold: float = 0.5,
) -> str:
    """``caption`` rewritten by ``edit`` without the mentions whose p(hallucinated) exceeds
    ``threshold`` (unchanged when none does)."""
    if len(mentions) != len(probabilities):
        raise HallucinationError(f"{len(probabilities)} probabilities for {len(mentions)} mentions")
    flagged = [m for m, p in zip(mentions, probabilities, strict=True) if p > threshold]
    return edit(caption, flagged) if flagged else caption
