"""VOCAL's costs: reading uncertainty markers out of model replies, and fitting a marker profile
to many answers.

    python benchmarks/vocal.py [--quick] [--replies N] [--fit_answers N] [--rounds N]

**Extraction**: ``--replies`` replies written the way models answer with verbal confidence (an
answer, a reason, a confidence phrase from the corpus or a hedge, sometimes a negation or no
marker at all; 150-300 characters) are read by
:class:`embodia.evals.uncertainty.extract.MarkerLexicon` (one compiled pattern, longest
spelling first) and, side by side, by the plain alternative: one pattern per spelling, each
searched in turn, the longest overlapping match kept. Keys: ``marker_replies_per_s`` (the
lexicon; target at least 20,000), ``naive_replies_per_s``, and ``same_markers`` (whether the
two read the same canonical markers in every reply).

**Fitting**: ``--fit_answers`` answers with a known profile over ten markers (the test suite's,
``tests/marker_profiles.py``) are counted and
fitted (:func:`~embodia.evals.uncertainty.vocal.fit_profile`, log loss), then bootstrapped
(``--rounds`` refits). Keys: ``fit_s`` (counting and one fit), ``bootstrap_s``, and
``max_profile_error`` (the largest gap between a learned and a true probability).

``--quick``: 5,000 replies, 20,000 answers, 20 bootstrap rounds (seconds).
The last line printed is one JSON object with every key.
"""

from __future__ import annotations

import json
import random
import re
import time

from _common import benchmark_args, import_from_tests, log

TEMPLATES = (
    "The answer is {answer}. {reason} Confidence: {marker}.",
    "{answer}. I think so because {reason_lower} It is {marker}.",
    "Answer: {answer}\nReasoning: {reason} I would say it is {negation}{marker} that this is right.",
    "After working through the steps, {reason_lower} So the result is {answer}; {marker}.",
    "{reason} Final answer: {answer}. No further caveats.",
)
REASONS = (
    "The second clause follows from the first once the units are converted to metres per second.",
    "Counting the nodes level by level gives the same total as the closed form.",
    "The stack is popped twice before the push, so the top holds the earlier value.",
    "Both options fit the data, but only one keeps the charge balanced.",
)


def replies(count: int, seed: int) -> list[str]:
    from embodia.evals.uncertainty.corpus import load_corpus
    from embodia.evals.uncertainty.extract import HEDGES

    corpus = load_corpus()
    spellings = sorted(corpus.aliases()) + sorted(HEDGES)
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        reason = rng.choice(REASONS)
        out.append(
            rng.choice(TEMPLATES).format(
                answer=rng.choice(["42", "B", "3.5 m/s", "the left subtree", "Paris"]),
                reason=reason,
                reason_lower=reason[0].lower() + reason[1:],
                marker=rng.choice(spellings),
                negation=rng.choice(["", "", "", "not "]),
            )
        )
    return out


def naive_markers(replies_: list[str], readings: dict[str, str]) -> list[list[str]]:
    """One pattern per spelling, each searched in turn; overlapping matches keep the longest."""
    patterns = [
        (re.compile(r"(?<![\w-])" + r"[\s\-]+".join(map(re.escape, s.split())) + r"(?![\w-])", re.I), s)
        for s in readings
    ]
    out = []
    for reply in replies_:
        found: list[tuple[int, int, str]] = []
        for pattern, spelling in patterns:
            found += [(m.start(), m.end(), readings[spelling]) for m in pattern.finditer(reply)]
        found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
        kept: list[tuple[int, int, str]] = []
        for start, end, marker in found:
            if not kept or start >= kept[-1][1]:
                kept.append((start, end, marker))
        out.append([marker for _, _, marker in kept])
    return out


def main() -> None:
    args = benchmark_args(
        __doc__,
        "5,000 replies, 20,000 answers, 20 bootstrap rounds",
        {"replies": 5000, "fit_answers": 20_000, "rounds": 20},
        replies=50_000,
        fit_answers=100_000,
        rounds=200,
    )

    from embodia.evals.uncertainty.corpus import load_corpus
    from embodia.evals.uncertainty.extract import MarkerLexicon
    from embodia.evals.uncertainty.vocal import MarkerCounts, bootstrap_profile, fit_profile

    corpus = load_corpus()
    lexicon = MarkerLexicon(corpus)
    texts = replies(int(args.replies), seed=0)
    log(f"extraction: {len(texts)} replies")
    started = time.perf_counter()
    read = [lexicon.mentions(text) for text in texts]
    lexicon_s = time.perf_counter() - started
    started = time.perf_counter()
    naive = naive_markers(texts, lexicon.readings)
    naive_s = time.perf_counter() - started
    # the naive reader has no negation: compare the markers as written, before it
    written = [[lexicon.readings[re.sub(r"[\s\-]+", " ", m.text.lower())] for m in found] for found in read]
    result: dict[str, object] = {
        "quick": bool(args.quick),
        "replies": len(texts),
        "marker_replies_per_s": len(texts) / lexicon_s,
        "naive_replies_per_s": len(texts) / naive_s,
        "same_markers": written == naive,
    }

    profiles = import_from_tests("marker_profiles")
    truth = profiles.TRUE_PROFILE
    markers, correct = profiles.answers(truth, int(args.fit_answers) // len(truth), seed=0)
    log(f"fitting: {len(markers)} answers, {args.rounds} bootstrap rounds")
    fit_profile(MarkerCounts({"likely": 1}, {"likely": 1}), corpus)  # the optimiser's import, untimed
    started = time.perf_counter()
    counts = MarkerCounts.of(markers, correct, corpus)
    profile = fit_profile(counts, corpus)
    result["fit_s"] = time.perf_counter() - started
    started = time.perf_counter()
    bootstrap_profile(counts, corpus, rounds=int(args.rounds))
    result["bootstrap_s"] = time.perf_counter() - started
    result["fit_answers"] = len(markers)
    result["max_profile_error"] = max(abs(profile[m] - p) for m, p in truth.items())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
