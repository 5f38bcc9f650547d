"""Synthetic music with known factors, for training and benchmarking music reward models
(CMI-style: compositional music instructions, ``docs/rewards.md``).

**A piece** (:class:`MusicSpec`, rendered by :func:`render`) is a melody drawn from a key's
scale, played at a tempo on an instrument, with optional sung lyrics. Every factor is
controlled:

- ``tempo`` in beats per minute; notes last a beat or half a beat;
- ``tonic`` (a pitch class) and ``mode`` (major or minor); ``off_key`` is the share of notes
  moved a semitone off the scale;
- ``instrument``: a harmonic profile and an envelope (``sine``, ``square``, ``pluck``,
  ``organ``);
- ``regularity`` in [0, 1]: at 1 notes start on their beat; below it each onset is jittered by
  up to ``(1 - regularity)`` of half a beat;
- ``lyrics``: syllables sung on successive notes as vowel-like tones (two formants over the
  note's pitch); ``lyric_lag`` shifts them off their notes by that share of a beat;
- ``clipping``: the gain into a hard clip (1: clean).

**Labels derived from the factors** (:func:`musicality`, :func:`alignment`): musicality falls
with off-key notes, irregular rhythm, clipping and lyrics sung off their notes; alignment is
the share of what the instruction names (tempo word, key, mode, instrument, the lyrics' timing)
that the piece has.

**Instructions** (:func:`instruction`): the text description of an intended piece, e.g.
"a fast melody in D minor played on a plucked string", and its lyrics; a reference audio prompt
is another rendering of the same intent.

**Preference pairs** (:func:`preference_pairs`): a piece rendered as instructed against a
degraded variant (off-key notes, a broken rhythm, clipping, lyrics off the beat, another
instrument, tempo or key than asked), each labelled per dimension by its derived labels: the
better one is preferred, and equal labels (within :data:`TIE_MARGIN`) are a tie.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from embodia.errors import EmbodiaError

SAMPLE_RATE = 16_000
PITCH_CLASSES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
SCALES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10)}
INSTRUMENTS: dict[str, str] = {
    "sine": "a soft sine synth",
    "square": "a square-wave chiptune synth",
    "pluck": "a plucked string",
    "organ": "an organ",
}
"""Instrument names and how an instruction describes them."""
TEMPO_WORDS = (("slow", 60, 85), ("moderate", 95, 120), ("fast", 135, 170))
"""A tempo word and the range of beats per minute it names."""
SYLLABLES = ("la", "na", "da", "mi", "ko", "ra", "ti", "so", "lu", "me", "ba", "do")
TIE_MARGIN = 0.02
"""Derived labels closer than this are a tie."""
DEGRADATIONS = ("off_key", "rhythm", "clipping", "lyric_timing", "instrument", "tempo", "key")


class MusicDataError(EmbodiaError, ValueError):
    """A piece or a data request that cannot be rendered; the message names the problem."""


@dataclass(frozen=True)
class MusicSpec:
    """Every factor of a piece (module docstring)."""

    tempo: float = 110.0
    tonic: int = 0
    mode: str = "major"
    instrument: str = "sine"
    notes: int = 12
    regularity: float = 1.0
    off_key: float = 0.0
    lyrics: tuple[str, ...] = ()
    lyric_lag: float = 0.0
    clipping: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 30 <= self.tempo <= 240:
            raise MusicDataError(f"tempo is 30..240 beats per minute, got {self.tempo}")
        if not 0 <= self.tonic < 12:
            raise MusicDataError(f"tonic is a pitch class 0..11, got {self.tonic}")
        if self.mode not in SCALES:
            raise MusicDataError(f"mode is major or minor, got {self.mode!r}")
        if self.instrument not in INSTRUMENTS:
            raise MusicDataError(f"instrument is one of {', '.join(INSTRUMENTS)}, got {self.instrument!r}")
        if not 1 <= self.notes <= 64:
            raise MusicDataError(f"notes is 1..64, got {self.notes}")
        for name in ("regularity", "off_key"):
            if not 0 <= getattr(self, name) <= 1:
                raise MusicDataError(f"{name} is in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.lyric_lag <= 1:
            raise MusicDataError(f"lyric_lag is in [0, 1] beats, got {self.lyric_lag}")
        if len(self.lyrics) > self.notes:
            raise MusicDataError(f"{len(self.lyrics)} syllables for {self.notes} notes")
        if self.clipping < 1:
            raise MusicDataError(f"clipping is a gain of at least 1, got {self.clipping}")


@dataclass(frozen=True)
class Score:
    """What a rendering played: each note's onset (s), length (s), MIDI pitch, whether it is
    in the key, and the onsets of the sung syllables."""

    onsets: tuple[float, ...]
    lengths: tuple[float, ...]
    pitches: tuple[int, ...]
    in_key: tuple[bool, ...]
    syllable_onsets: tuple[float, ...]
    duration: float


def score(spec: MusicSpec) -> Score:
    """The notes ``spec`` plays (module docstring), drawn from its seed."""
    rng = np.random.default_rng([spec.seed, 7])
    beat = 60.0 / spec.tempo
    scale = SCALES[spec.mode]
    degree = int(rng.integers(0, 7))
    onsets, lengths, pitches, in_key = [], [], [], []
    time = 0.0
    for _ in range(spec.notes):
        degree = int(np.clip(degree + rng.choice([-2, -1, -1, 0, 1, 1, 2]), 0, 13))
        pitch = 60 + spec.tonic + 12 * (degree // 7) + scale[degree % 7]
        off = bool(rng.random() < spec.off_key)
        if off:
            pitch += 1 if (pitch + 1 - spec.tonic) % 12 not in scale else -1
        length = beat * (1.0 if rng.random() < 0.5 else 0.5)
        jitter = (1.0 - spec.regularity) * 0.5 * beat * float(rng.uniform(-1, 1))
        onsets.append(max(0.0, time + jitter))
        lengths.append(length)
        pitches.append(pitch)
        in_key.append((pitch - spec.tonic) % 12 in scale)
        time += length
    syllables = tuple(onsets[i] + spec.lyric_lag * beat for i in range(len(spec.lyrics)))
    duration = max(o + n for o, n in zip(onsets, lengths, strict=True)) + spec.lyric_lag * beat + 0.2
    return Score(tuple(onsets), tuple(lengths), tuple(pitches), tuple(in_key), syllables, duration)


def _frequency(pitch: int) -> float:
    return 440.0 * 2.0 ** ((pitch - 69) / 12)


def _voice(instrument: str, frequency: float, t: np.ndarray, length: float) -> np.ndarray:
    """One note of ``instrument`` over times ``t`` from its onset."""
    if instrument == "square":
        harmonics = [(k, 1.0 / k) for k in (1, 3, 5, 7, 9)]
        envelope = np.clip(t / 0.01, 0, 1) * np.clip((length - t) / 0.02, 0, 1)
    elif instrument == "pluck":
        harmonics = [(k, 0.8**k) for k in range(1, 7)]
        envelope = np.clip(t / 0.005, 0, 1) * np.exp(-t * 6.0)
    elif instrument == "organ":
        harmonics = [(1, 1.0), (2, 0.7), (4, 0.5), (8, 0.3)]
        envelope = np.clip(t / 0.04, 0, 1) * np.clip((length - t) / 0.04, 0, 1)
    else:
        harmonics = [(1, 1.0)]
        envelope = np.clip(t / 0.03, 0, 1) * np.clip((length - t) / 0.05, 0, 1)
    wave = sum(
        weight * np.sin(2 * np.pi * k * frequency * t) for k, weight in harmonics if k * frequency < 7_500
    )
    return np.asarray(envelope * wave / sum(w for _, w in harmonics))


_VOWELS = {"a": (800, 1200), "i": (300, 2300), "o": (500, 900), "u": (350, 800), "e": (450, 1900)}


def _sung(syllable: str, frequency: float, t: np.ndarray, length: float) -> np.ndarray:
    """A syllable as a vowel-like tone: harmonics of the note weighted by two formants."""
    first, second = _VOWELS.get(syllable[-1], (600, 1400))
    wave = np.zeros_like(t)
    for k in range(1, 16):
        f = k * frequency
        if f >= 7_500:
            break
        gain = math.exp(-(((f - first) / 150) ** 2)) + 0.6 * math.exp(-(((f - second) / 200) ** 2))
        wave += gain * np.sin(2 * np.pi * f * t)
    envelope = np.clip(t / 0.02, 0, 1) * np.clip((length - t) / 0.03, 0, 1)
    return np.asarray(envelope * wave / 3.0)


def render(spec: MusicSpec, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """The piece as mono float32 samples in [-1, 1]."""
    played = score(spec)
    samples = np.zeros(int(math.ceil(played.duration * sample_rate)), dtype=np.float64)
    for onset, length, pitch in zip(played.onsets, played.lengths, played.pitches, strict=True):
        start = int(onset * sample_rate)
        t = np.arange(int(length * sample_rate)) / sample_rate
        samples[start : start + len(t)] += (
            0.5 * _voice(spec.instrument, _frequency(pitch), t, length)[: len(samples) - start]
        )
    for index, (syllable, onset) in enumerate(zip(spec.lyrics, played.syllable_onsets, strict=True)):
        start = int(onset * sample_rate)
        length = played.lengths[index]
        t = np.arange(int(length * sample_rate)) / sample_rate
        sung = 0.4 * _sung(syllable, _frequency(played.pitches[index] - 12), t, length)
        samples[start : start + len(t)] += sung[: len(samples) - start]
    samples = np.clip(samples * spec.clipping, -1.0, 1.0)
    return samples.astype(np.float32)


# --------------------------------------------------------------------------- labels


def tempo_word(tempo: float) -> str | None:
    """The tempo word whose range holds ``tempo`` (None between the ranges)."""
    for word, low, high in TEMPO_WORDS:
        if low <= tempo <= high:
            return word
    return None


def musicality(spec: MusicSpec) -> float:
    """The derived musicality of a piece in [0, 1]: 1 for a clean, regular, in-key piece whose
    lyrics fall on their notes; each flaw takes its share."""
    played = score(spec)
    in_key = float(np.mean(played.in_key))
    lyric_penalty = min(1.0, spec.lyric_lag / 0.5) if spec.lyrics else 0.0
    clip_penalty = min(1.0, (spec.clipping - 1.0) / 4.0)
    value = 1.0 - 0.35 * (1.0 - in_key) / 0.5 - 0.3 * (1.0 - spec.regularity) - 0.2 * clip_penalty
    value -= 0.15 * lyric_penalty
    return float(np.clip(value, 0.0, 1.0))


@dataclass(frozen=True)
class Intent:
    """What an instruction asks for: a tempo word, a key and mode, an instrument, lyrics."""

    tempo: str
    tonic: int
    mode: str
    instrument: str
    lyrics: tuple[str, ...] = ()


def instruction(intent: Intent) -> dict[str, Any]:
    """The instruction's text description and lyrics (``{"text", "lyrics"}``)."""
    text = (
        f"a {intent.tempo} melody in {PITCH_CLASSES[intent.tonic]} {intent.mode} "
        f"played on {INSTRUMENTS[intent.instrument]}"
    )
    if intent.lyrics:
        text += ", with sung lyrics on the beat"
    return {"text": text, "lyrics": " ".join(intent.lyrics)}


def alignment(spec: MusicSpec, intent: Intent) -> float:
    """The share of what ``intent`` names that ``spec`` has: the tempo word, the tonic, the
    mode, the instrument, and (with lyrics) the lyrics sung on their notes."""
    checks = [
        tempo_word(spec.tempo) == intent.tempo,
        spec.tonic == intent.tonic,
        spec.mode == intent.mode,
        spec.instrument == intent.instrument,
    ]
    if intent.lyrics:
        checks.append(spec.lyrics == intent.lyrics and spec.lyric_lag < 0.25)
    return float(np.mean(checks))


def draw_intent(rng: np.random.Generator, lyrics: bool) -> Intent:
    word = TEMPO_WORDS[int(rng.integers(len(TEMPO_WORDS)))][0]
    sung: tuple[str, ...] = ()
    if lyrics:
        sung = tuple(str(s) for s in rng.choice(SYLLABLES, size=int(rng.integers(4, 9))))
    return Intent(
        word, int(rng.integers(12)), str(rng.choice(list(SCALES))), str(rng.choice(list(INSTRUMENTS))), sung
    )


def realise(intent: Intent, rng: np.random.Generator, notes: int = 12) -> MusicSpec:
    """A clean piece as ``intent`` asks (a tempo inside its word's range)."""
    low, high = next((low, high) for word, low, high in TEMPO_WORDS if word == intent.tempo)
    return MusicSpec(
        tempo=float(rng.uniform(low, high)),
        tonic=intent.tonic,
        mode=intent.mode,
        instrument=intent.instrument,
        notes=max(notes, len(intent.lyrics)),
        lyrics=intent.lyrics,
        seed=int(rng.integers(2**31)),
    )


def degrade(spec: MusicSpec, kind: str, rng: np.random.Generator) -> MusicSpec:
    """``spec`` with one flaw of ``kind`` (one of :data:`DEGRADATIONS`), at a random severity."""
    severity = float(rng.uniform(0.3, 1.0))
    if kind == "off_key":
        return replace(spec, off_key=0.5 * severity)
    if kind == "rhythm":
        return replace(spec, regularity=1.0 - severity)
    if kind == "clipping":
        return replace(spec, clipping=1.0 + 4.0 * severity)
    if kind == "lyric_timing":
        return (
            replace(spec, lyric_lag=0.25 + 0.5 * severity)
            if spec.lyrics
            else replace(spec, off_key=0.5 * severity)
        )
    if kind == "instrument":
        return replace(spec, instrument=str(rng.choice([i for i in INSTRUMENTS if i != spec.instrument])))
    if kind == "tempo":
        word = tempo_word(spec.tempo)
        others = [(low, high) for w, low, high in TEMPO_WORDS if w != word]
        low, high = others[int(rng.integers(len(others)))]
        return replace(spec, tempo=float(rng.uniform(low, high)))
    if kind == "key":
        return replace(spec, tonic=(spec.tonic + int(rng.integers(1, 12))) % 12)
    raise MusicDataError(f"degradation is one of {', '.join(DEGRADATIONS)}, got {kind!r}")


def _preferred(a: float, b: float) -> str:
    if abs(a - b) <= TIE_MARGIN:
        return "tie"
    return "a" if a > b else "b"


def preference_pairs(
    seed: int, count: int, *, lyrics_share: float = 0.5, notes: int = 12
) -> list[dict[str, Any]]:
    """``count`` pairs: an instruction, a clean realisation and a degraded variant (worse on at
    least one derived label) in random order (``a``/``b``), their specs and derived labels,
    the degradation, and the preferred side per dimension (``musicality``, ``alignment``:
    ``a``, ``b`` or ``tie``); half of them also carry a reference audio prompt (another clean
    realisation of the intent)."""
    if count < 1:
        raise MusicDataError(f"count must be at least 1, got {count}")
    rng = np.random.default_rng([seed, 26])
    pairs = []
    for index in range(count):
        intent = draw_intent(rng, bool(rng.random() < lyrics_share))
        clean = realise(intent, rng, notes)
        kind = DEGRADATIONS[int(rng.integers(len(DEGRADATIONS)))]
        worse = degrade(clean, kind, rng)
        # a mild draw can leave the piece as good as before (no note moved off the key): draw again
        while musicality(worse) == musicality(clean) and alignment(worse, intent) == alignment(clean, intent):
            worse = degrade(clean, kind, rng)
        first, second = (clean, worse) if rng.random() < 0.5 else (worse, clean)
        reference = realise(intent, rng, notes) if rng.random() < 0.5 else None
        labels = {
            side: {"musicality": musicality(spec), "alignment": alignment(spec, intent)}
            for side, spec in (("a", first), ("b", second))
        }
        pairs.append(
            {
                "id": f"{seed}-{index}",
                "instruction": instruction(intent),
                "intent": asdict(intent),
                "a": asdict(first),
                "b": asdict(second),
                "reference": None if reference is None else asdict(reference),
                "degradation": kind,
                "labels": labels,
                "preferred": {
                    name: _preferred(labels["a"][name], labels["b"][name])
                    for name in ("musicality", "alignment")
                },
            }
        )
    return pairs


def spec_of(value: dict[str, Any]) -> MusicSpec:
    """A :class:`MusicSpec` from its dict (a pair's ``a``, ``b`` or ``reference``)."""
    try:
        return MusicSpec(**{**value, "lyrics": tuple(value.get("lyrics", ()))})
    except TypeError as error:
        raise MusicDataError(f"not a piece's specification: {error}") from None
