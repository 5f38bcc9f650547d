"""Uncertainty markers found in model outputs, and the prompts that elicit them.

:class:`MarkerLexicon` compiles the corpus's markers and aliases (and a few hedging forms of
them: "I doubt", "chances are slim", "there is almost no chance") into one case-insensitive
pattern over whole words (a trie of the spellings, so one pass reads a reply), longest
spelling first, so that "highly unlikely" is not read as
"unlikely" and "probably not" not as "probably". Hyphens and runs of spaces match each other
("fifty-fifty", "fifty fifty"). "may", "might" and "could" count only in a hedging form ("it
might be", "could happen"), and "certain" not after "a" ("a certain number").

**Negation**: a marker right after a negator ("not", "n't", "never", "hardly", "no"; at most
one word such as "very" between) is negated. A negated plain marker whose opposite is in the
corpus reads as that opposite ("not likely" is "unlikely", "not possible" is "impossible").
Any other negated marker ("not certain", "not highly likely") has no level people agree on:
it is kept with ``negated`` set and no level, and gives no confidence.

**Position**: each :class:`Mention` knows its character span and its sentence. Given where the
answer is in the reply, :meth:`MarkerLexicon.qualifying` picks the mention that qualifies it: one
in the answer's sentence if any (the nearest), else the nearest before the answer, else the
nearest after, and tells which (``same sentence``, ``before``, ``after``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from embodia.evals.uncertainty.corpus import MarkerCorpus, load_corpus

HEDGES: dict[str, str] = {
    "i doubt": "we doubt",
    "i strongly doubt": "we doubt",
    "we strongly doubt": "we doubt",
    "chances are slim": "chances are slight",
    "slim chance": "chances are slight",
    "there is almost no chance": "almost no chance",
    "it is almost certain": "almost certain",
    "it's almost certain": "almost certain",
    "i am almost certain": "almost certain",
    "i'm almost certain": "almost certain",
    "more likely than not": "better than even",
    "may be": "may",
    "may well": "may",
    "might be": "might",
    "might well": "might",
    "could be": "could",
    "could well": "could",
}
"""Hedging forms that are not the corpus's spellings, and the marker each one is."""

BARE_MODALS = frozenset({"may", "might", "could"})
"""Markers read only in a hedging form ("it might be", "could happen"): bare, these words are
far more often not hedges at all ("I could not find", "May 5")."""

OPPOSITES: dict[str, str] = {
    "likely": "unlikely",
    "probable": "improbable",
    "possible": "impossible",
}
"""A negated marker that reads as another marker of the corpus. Only the plain words: "not
highly likely" is not "highly unlikely", and "not certain" is not "impossible"."""

NEGATOR = re.compile(r"\b(?:not|never|hardly|n't|no)\s+(?:\w+\s+)?$|n't\s+(?:\w+\s+)?$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?;]+(?=\s|$)|\n+")
_PARTICULAR = re.compile(r"\b(?:a|in|to a)\s+$", re.IGNORECASE)

VERBAL_CONFIDENCE_PROMPT = (
    "After your answer, say how sure you are that it is right, in words, using exactly one of "
    "these expressions: {markers}. Write it on the last line as: Confidence: <expression>"
)
"""The elicitation instructions (Tian et al.'s linguistic one-stage form, leaving the answer's own
format to the question): ``{markers}`` is the list."""


def elicitation_prompt(question: str, corpus: MarkerCorpus | None = None) -> str:
    """``question`` followed by the elicitation instructions over the corpus's markers, from the
    most to the least probable."""
    corpus = corpus or load_corpus()
    markers = ", ".join(f'"{name}"' for name in reversed(corpus.by_prior()))
    return f"{question.strip()}\n\n{VERBAL_CONFIDENCE_PROMPT.format(markers=markers)}"


@dataclass(frozen=True)
class Mention:
    """One marker in a reply: the canonical marker it reads as (after negation), the words as
    written, their span, whether a negator is left on it, its sentence's index and its level
    (the human prior; None for a negated marker with no opposite)."""

    marker: str
    text: str
    start: int
    end: int
    negated: bool
    sentence: int
    level: float | None


@dataclass(frozen=True)
class Qualifier:
    """The mention that qualifies an answer and where it stands relative to it."""

    mention: Mention
    position: str
    """``same sentence``, ``before`` or ``after``."""
    distance: int
    """Characters between the mention and the answer (0 when they touch or overlap)."""


def _normal(spelling: str) -> str:
    return re.sub(r"[\s\-]+", " ", spelling.lower()).strip()


def _trie_pattern(spellings: Sequence[str]) -> str:
    """One pattern matching any of ``spellings`` (normalised: words split by single spaces),
    their common prefixes shared, so the engine tries one branch per character instead of
    every spelling at every position; a space matches any run of spaces and hyphens. Greedy
    alternatives put a longer spelling before its prefix."""
    trie: dict[str, dict] = {}
    for spelling in spellings:
        node = trie
        for char in spelling:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [
            (r"[\s\-]+" if char == " " else re.escape(char)) + pattern(child)
            for char, child in sorted(node.items())
            if char
        ]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return pattern(trie)


class MarkerLexicon:
    """The compiled lexicon of a corpus (module docstring)."""

    def __init__(self, corpus: MarkerCorpus | None = None) -> None:
        self.corpus = corpus or load_corpus()
        self.readings: dict[str, str] = {
            _normal(spelling): marker
            for spelling, marker in self.corpus.aliases().items()
            if spelling not in BARE_MODALS
        }
        for form, marker in HEDGES.items():
            if marker in self.corpus.markers:
                self.readings.setdefault(_normal(form), marker)
        self.pattern = re.compile(
            r"(?<![\w-])" + _trie_pattern(list(self.readings)) + r"(?![\w-])", re.IGNORECASE
        )
        self._priors = {name: self.corpus.prior(name) for name in self.corpus.markers}

    def _canonical(self, written: str) -> str:
        return self.readings[_normal(written)]

    def mentions(self, reply: str) -> list[Mention]:
        """Every marker in ``reply``, in order (module docstring)."""
        found: list[Mention] = []
        if not reply:
            return found
        sentence_starts = [0] + [m.end() for m in _SENTENCE_END.finditer(reply)]
        sentence = 0
        for match in self.pattern.finditer(reply):
            while sentence + 1 < len(sentence_starts) and sentence_starts[sentence + 1] <= match.start():
                sentence += 1
            marker = self._canonical(match.group(0))
            before = reply[sentence_starts[sentence] : match.start()]
            if marker == "certain" and _PARTICULAR.search(before):
                continue  # "a certain number": a particular one, not a probability
            negated = NEGATOR.search(before) is not None
            level: float | None = self._priors[marker]
            if negated:
                opposite = OPPOSITES.get(marker)
                if opposite in self._priors:
                    marker, level, negated = opposite, self._priors[opposite], False
                else:
                    level = None
            found.append(
                Mention(marker, match.group(0), match.start(), match.end(), negated, sentence, level)
            )
        return found

    def qualifying(self, reply: str, answer_start: int, answer_end: int) -> Qualifier | None:
        """The mention that qualifies the answer at ``reply[answer_start:answer_end]`` (module
        docstring); None when the reply has no marker."""
        mentions = self.mentions(reply)
        if not mentions:
            return None
        ends = [m.end() for m in _SENTENCE_END.finditer(reply)]
        answer_sentence = sum(1 for end in ends if end <= answer_start)

        def distance(m: Mention) -> int:
            return max(0, m.start - answer_end, answer_start - m.end)

        same = [m for m in mentions if m.sentence == answer_sentence]
        if same:
            best = min(same, key=distance)
            return Qualifier(best, "same sentence", distance(best))
        before = [m for m in mentions if m.end <= answer_start]
        if before:
            return Qualifier(before[-1], "before", distance(before[-1]))
        return Qualifier(mentions[0], "after", distance(mentions[0]))

    def confidence(self, reply: str, answer: str | None = None) -> float | None:
        """The level of the marker qualifying ``answer`` in ``reply`` (its first occurrence; the
        reply's last marker with a level when ``answer`` is None or not found); None without one."""
        if answer:
            at = reply.lower().find(answer.lower())
            if at >= 0:
                qualifier = self.qualifying(reply, at, at + len(answer))
                return None if qualifier is None else qualifier.mention.level
        levels = [m.level for m in self.mentions(reply) if m.level is not None]
        return levels[-1] if levels else None


def markers_of(replies: Sequence[str], lexicon: MarkerLexicon | None = None) -> list[list[Mention]]:
    """The mentions of each reply."""
    lexicon = lexicon or MarkerLexicon()
    return [lexicon.mentions(reply) for reply in replies]
