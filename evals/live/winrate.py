"""The live benchmark's pairwise win rate: two commentaries against the reference, both orders."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embodia.core.scores import as_seconds, drop_silent
from embodia.evals.live.judges import PairwiseJudge
from embodia.evals.live.records import Clip, LiveEvalError, _clips, _index, _no_match, as_stored


def flatten_commentary(seconds: Mapping[Any, str]) -> str:
    """Per-second texts in time order, one trailing ``" ..."`` cut, empty ones skipped, joined."""
    parts = []
    for _, text in sorted(as_seconds(seconds, "commentary", LiveEvalError).items()):
        if text.endswith(" ..."):
            text = text[:-4]
        if text.strip():
            parts.append(text)
    return " ".join(parts)


def _commentary(clip: Clip, drop_silent_seconds: bool) -> str:
    if clip.caption is not None:
        return clip.caption
    return flatten_commentary(drop_silent(clip.seconds) if drop_silent_seconds else clip.seconds)


def _win_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    counts = {"wins": 0, "losses": 0, "ties": 0, "invalid": 0}
    for row in rows:
        for order, mine in (("ab", "A"), ("ba", "B")):
            winner = row[order]
            if winner is None:
                counts["invalid"] += 1
            elif winner == "tie":
                counts["ties"] += 1
            elif winner == mine:
                counts["wins"] += 1
            else:
                counts["losses"] += 1
    judgments = 2 * len(rows)
    return {
        "clips": len(rows),
        "judgments": judgments,
        **counts,
        "win_rate": 100.0 * counts["wins"] / judgments if judgments else None,
    }


def judge_pair(
    a: Clip,
    b: Clip,
    label: Clip,
    judge: PairwiseJudge,
    *,
    drop_silent_seconds: bool = True,
    baseline_as_stored: bool = False,
) -> dict[str, Any]:
    """One clip's two judgments: A's commentary against B's, then B's against A's, with the
    flattened label as the reference; the row :class:`WinTally` counts (A's identity and tag).
    ``baseline_as_stored`` shows the judge B's per-second prediction unflattened
    (:func:`~embodia.evals.live.records.as_stored`), as the reference's judge is shown it."""
    a_text = _commentary(a, drop_silent_seconds)
    b_text = as_stored(b) if baseline_as_stored else _commentary(b, drop_silent_seconds)
    gold = flatten_commentary(label.seconds)
    ab, ba = judge.compare(a_text, b_text, gold), judge.compare(b_text, a_text, gold)
    return {
        "video_id": a.video_id,
        "begin": a.begin,
        "end": a.end,
        "idx": a.idx,
        "tag": a.tag,
        "dataset_name": a.dataset_name,
        "ab": ab.winner,
        "ba": ba.winner,
        "ab_raw": ab.raw,
        "ba_raw": ba.raw,
    }


@dataclass
class WinTally:
    """The win rate clip by clip: :meth:`add` judges one clip both ways (:func:`judge_pair`,
    then :meth:`add_result`), :meth:`summary` gives A's win rate overall, per tag and per
    dataset, with every judgment. A tally of judgments made elsewhere (on other workers) needs
    no judge, only its ``judge_name``."""

    judge: PairwiseJudge | None = None
    drop_silent_seconds: bool = True
    rows: list[dict[str, Any]] = field(default_factory=list)
    judge_name: str | None = None
    """The judge's name in the summary (default: ``judge.name``)."""

    def add(self, a: Clip, b: Clip, label: Clip) -> dict[str, Any]:
        if self.judge is None:
            raise LiveEvalError("WinTally.add needs a judge (add_result takes judgments made elsewhere)")
        return self.add_result(
            judge_pair(a, b, label, self.judge, drop_silent_seconds=self.drop_silent_seconds)
        )

    def add_result(self, row: dict[str, Any]) -> dict[str, Any]:
        """Tally one clip's :func:`judge_pair` row made already."""
        self.rows.append(row)
        return row

    def summary(self) -> dict[str, Any]:
        rows = self.rows
        by_tag: dict[str, list[dict[str, Any]]] = defaultdict(list)
        by_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_tag[row["tag"]].append(row)
            by_dataset[row["dataset_name"]].append(row)
        name = self.judge_name if self.judge_name is not None else getattr(self.judge, "name", None)
        return {
            "judge": name,
            "overall": _win_summary(rows),
            "by_tag": {t: _win_summary(by_tag[t]) for t in sorted(by_tag)},
            "by_dataset": {d: _win_summary(by_dataset[d]) for d in sorted(by_dataset)},
            "judgments": rows,
        }


def win_rate(
    a_records: Sequence[Clip | Mapping[str, Any]],
    b_records: Sequence[Clip | Mapping[str, Any]],
    labels: Sequence[Clip | Mapping[str, Any]],
    judge: PairwiseJudge,
    *,
    drop_silent_seconds: bool = True,
) -> dict[str, Any]:
    """A's win rate against B (percent of ``2N`` judgments, both orders), overall, per tag and
    per dataset, with every judgment's raw answer."""
    a_clips, b_clips = _clips(a_records, "pred", "A"), _clips(b_records, "pred", "B")
    b_index, label_index = _index(b_clips, "B prediction"), _index(_clips(labels, "label", "label"), "label")
    _index(a_clips, "A prediction")
    tally = WinTally(judge, drop_silent_seconds)
    for clip in a_clips:
        if clip.key not in b_index:
            raise _no_match(clip, b_index, "B prediction")
        if clip.key not in label_index:
            raise _no_match(clip, label_index, "label")
        tally.add(clip, b_index[clip.key], label_index[clip.key])
    return tally.summary()
