"""Captions from a VLM: plain greedy decoding, and HaloProbe-guided decoding that keeps the
candidate caption with the fewest expected hallucinations.

**Guided decoding** (candidate re-ranking): the model's *standard* decoding proposes
candidates (the beams of a beam search, plus optional samples), each candidate's mentions are
scored by a HaloProbe in one teacher-forced pass, and the candidate with the lowest mean
posterior probability of hallucination wins (ties: the higher model likelihood, i.e. the
earlier candidate). With ``same_mentions_as`` only candidates naming as many objects as that
caption compete (the comparison at equal caption length); when none does, that caption is
kept. Nothing inside the model is changed.

**Post-hoc removal** (:func:`remove_flagged`): the mentions whose posterior passes a threshold
are handed to an editor (a function that rewrites the caption without them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodia.perception.hallucination.detectors import token_signals
from embodia.perception.hallucination.haloprobe import HaloProbe, mention_features
from embodia.perception.hallucination.mentions import HallucinationError, Mention, repeated
from embodia.perception.hallucination.signals import caption_pass, prompt_inputs

MentionFinder = Callable[[str], list[Mention]]
"""Finds the object mentions of a caption (unlabelled)."""


def generate_captions(
    model: Any,
    processor: Any,
    image: np.ndarray,
    instruction: str,
    *,
    max_new_tokens: int = 64,
    num_beams: int = 1,
    samples: int = 0,
    temperature: float = 1.0,
    seed: int = 0,
) -> list[str]:
    """Captions of ``image``: the greedy one (``num_beams=1``) or the ``num_beams`` beams of a
    beam search, best first; then ``samples`` sampled at ``temperature``."""
    import torch

    inputs = prompt_inputs(processor, image, instruction)
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in inputs.items()}
    start = int(inputs["input_ids"].shape[1])
    tokenizer = processor.tokenizer
    common = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id}
    with torch.no_grad():
        if num_beams > 1:
            out = model.generate(
                **inputs, do_sample=False, num_beams=num_beams, num_return_sequences=num_beams, **common
            )
        else:
            out = model.generate(**inputs, do_sample=False, **common)
        rows = [tokenizer.decode(row[start:], skip_special_tokens=True).strip() for row in out]
        if samples:
            torch.manual_seed(seed)
            sampled = model.generate(
                **inputs, do_sample=True, temperature=temperature, num_return_sequences=samples, **common
            )
            rows += [tokenizer.decode(row[start:], skip_special_tokens=True).strip() for row in sampled]
    return rows


def hallucination_probabilities(
    model: Any,
    processor: Any,
    probe: HaloProbe,
    image: np.ndarray,
    instruction: str,
    caption: str,
    mentions: Sequence[Mention],
) -> np.ndarray:
    """The probe's posterior p(hallucinated) for each mention of ``caption``."""
    if not mentions:
        return np.zeros(0)
    scored = caption_pass(model, processor, image, instruction, caption, mentions, attentions=True)
    internal = np.stack([mention_features(rows) for rows in token_signals(scored)])
    positions = [tokens[0] - scored.caption_start for tokens in scored.mention_tokens]
    return probe.predict(internal, positions, repeated(mentions))["posterior"]


@dataclass(frozen=True)
class GuidedCaption:
    caption: str
    """The chosen caption."""
    expected_hallucination: float
    """Its mean posterior p(hallucinated) over its mentions (0 with none)."""
    candidates: int
    """Candidates that competed."""


def guided_caption(
    model: Any,
    processor: Any,
    probe: HaloProbe,
    image: np.ndarray,
    instruction: str,
    find_mentions: MentionFinder,
    *,
    num_beams: int = 4,
    samples: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 64,
    same_mentions_as: str | None = None,
    seed: int = 0,
) -> GuidedCaption:
    """HaloProbe-guided decoding (module docstring)."""
    if num_beams < 1 or samples < 0 or num_beams + samples < 2:
        raise HallucinationError(
            f"guided decoding needs at least two candidates; got {num_beams} beams and {samples} samples"
        )
    candidates = generate_captions(
        model,
        processor,
        image,
        instruction,
        max_new_tokens=max_new_tokens,
        num_beams=num_beams,
        samples=samples,
        temperature=temperature,
        seed=seed,
    )
    wanted = None if same_mentions_as is None else len(find_mentions(same_mentions_as))
    best: tuple[float, int] | None = None
    competing = 0
    for index, text in enumerate(candidates):
        mentions = find_mentions(text)
        if wanted is not None and len(mentions) != wanted:
            continue
        competing += 1
        risk = hallucination_probabilities(model, processor, probe, image, instruction, text, mentions)
        expected = float(risk.mean()) if risk.size else 0.0
        if best is None or expected < best[0]:
            best = (expected, index)
    if best is None:
        if same_mentions_as is None:
            raise HallucinationError("no candidate caption to choose from")
        return GuidedCaption(same_mentions_as, float("nan"), 0)
    return GuidedCaption(candidates[best[1]], best[0], competing)


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
