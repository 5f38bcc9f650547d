"""Measures of object hallucination: detection (AUROC, AUPR, FPR@95%TPR with **real mentions
as the positive class**, as the InsLen reference's evaluation), CHAIR over captions, and
POPE-style yes/no accuracy.

- ``CHAIR_s`` = captions with at least one hallucinated mention / captions;
- ``CHAIR_i`` = hallucinated mentions / mentions;
- ``recall`` = ground-truth objects mentioned / ground-truth objects (each object once per
  caption);
- POPE: yes/no answers to "is there a X?" for present objects and absent ones; accuracy,
  precision, recall and F1 of "yes", and the share of "yes" answers.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from embodia.core.scores import auroc, average_precision, f1_from, fpr_at_tpr
from embodia.perception.hallucination.mentions import HallucinationError, Mention


def detection_scores(scores: Sequence[float], hallucinated: Sequence[bool]) -> dict[str, float]:
    """AUROC, AUPR and FPR@95%TPR of ``scores`` (higher: real) against the labels, real
    mentions positive."""
    if len(scores) != len(hallucinated):
        raise HallucinationError(f"{len(scores)} scores for {len(hallucinated)} labels")
    real = [s for s, h in zip(scores, hallucinated, strict=True) if not h]
    fake = [s for s, h in zip(scores, hallucinated, strict=True) if h]
    return {
        "auroc": auroc(real, fake),
        "aupr": average_precision(real, fake),
        "fpr95": fpr_at_tpr(real, fake, 0.95),
        "real": len(real),
        "hallucinated": len(fake),
    }


def chair(captions: Iterable[tuple[Sequence[Mention], Iterable[Hashable]]]) -> dict[str, float]:
    """CHAIR over captions, each given as (its labelled mentions, the scene's object keys)."""
    count = hallucinating = mentions = hallucinated = truth = recalled = 0
    for labelled, objects in captions:
        if any(m.hallucinated is None for m in labelled):
            raise HallucinationError("CHAIR needs labelled mentions (hallucinated True/False)")
        present = set(objects)
        count += 1
        flags = [bool(m.hallucinated) for m in labelled]
        hallucinating += any(flags)
        mentions += len(flags)
        hallucinated += sum(flags)
        truth += len(present)
        recalled += len(present & {m.key for m in labelled})
    if count == 0:
        raise HallucinationError("CHAIR over no captions")
    return {
        "chair_s": hallucinating / count,
        "chair_i": hallucinated / mentions if mentions else 0.0,
        "recall": recalled / truth if truth else 0.0,
        "mentions_per_caption": mentions / count,
        "captions": count,
    }


def pope(answers: Sequence[bool], present: Sequence[bool]) -> dict[str, Any]:
    """POPE's measures of yes (True) / no answers to questions whose object is (or is not)
    ``present``."""
    if len(answers) != len(present) or not answers:
        raise HallucinationError(f"POPE needs one answer per question: {len(answers)} for {len(present)}")
    tp = sum(a and p for a, p in zip(answers, present, strict=True))
    fp = sum(a and not p for a, p in zip(answers, present, strict=True))
    fn = sum(p and not a for a, p in zip(answers, present, strict=True))
    correct = sum(a == p for a, p in zip(answers, present, strict=True))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "accuracy": correct / len(answers),
        "precision": precision,
        "recall": recall,
        "f1": f1_from(precision, recall),
        "yes_ratio": sum(answers) / len(answers),
        "questions": len(answers),
    }
