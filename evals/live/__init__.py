"""Live Gaming Benchmark metrics (Proact-VL, ICML 2026) over per-second prediction records.

A record is one clip: ``{"video_id", "begin", "end", "pred": {"<sec>": "<text>"}, "tag",
"dataset_name", "idx"}``; a label record has ``label`` where a prediction has ``pred``.
Seconds are integers on the *video's* clock (absolute, not relative to ``begin``), written as
strings in JSON; a second that is not a key is silence. Records are matched on
``(video_id, begin, end, dataset_name, idx)``, the key the reference's F1/TimeDiff script and
its pairwise judge use ("the reference": the evaluation code released with Proact-VL).

Metrics (the reference's definitions unless marked *ours*):

- **F1** (:func:`f1`, :func:`f1_report`): sets of speaking seconds ``P = keys(pred)``,
  ``L = keys(label)``; precision ``|P∩L|/|P|``, recall ``|P∩L|/|L|``, harmonic F1; clips with
  an empty label are skipped. Macro = mean over clips, micro = pooled seconds; overall and
  per tag.
- **TimeDiff** (:func:`time_diff`): ``first, last`` = first/last label second; the response
  is the first predicted second ``>= first``; ``base = response - first``, or
  ``last - first`` when the agent never responds; plus ``alpha`` for each predicted second with
  non-empty text outside ``[first - k, last + k]``. Defaults ``k=2, alpha=0.2`` (the
  reference's README run; its script default is 0.5).
- **PAUC** (:func:`pauc`): predictions inside ``[begin, end]`` sorted, runs of adjacent
  seconds merged into one reply (a trailing ``...`` of the earlier piece dropped) stamped at
  the run's first second; after each new (not previously seen) reply a judge scores the
  cumulative prediction against the clip's reference text on 1..3, giving ``y = score - 1``;
  the step function starting at ``start_score`` from ``x = 0`` (``x = second - begin``, scaled
  by ``1 - omega``) and held to ``end - begin`` is integrated and divided by
  ``(end - begin) * 2``. A clip with no scored reply (no prediction, every answer unparseable,
  or no reference text) gets ``start_score / 2``, as the reference counts it.
- **Win rate** (:func:`win_rate`): a pairwise judge compares the flattened commentaries of A
  and B against the reference, once in each order; win rate = A's wins over ``2N`` judgments
  x 100. Flattening joins the per-second texts in time order after cutting one trailing
  ``" ..."``, skipping empty ones. *Ours*: ties and unparseable answers are counted
  separately (the reference lumps both into "tie"); both are non-wins, as there.
- *Ours*, co-commentary: :func:`overlap_rate` ``= |P ∩ O| / |P|`` with ``O`` the other
  casters' speaking seconds, :func:`max_consecutive_overlap`, and
  :func:`concurrent_speech` for self-play (seconds where two or more agents speak).
- *Ours*, guidance: :func:`query_response_delay` (first predicted second ``>=`` the query's
  second, minus it; ``None`` when never) and :func:`answer_rate` (share of queries answered
  with a delay ``<= window``: the window is *inclusive*, so ``window=5`` accepts an answer in
  seconds ``q .. q+5``).
- *Ours*, quantity and speed: :func:`speaking_rate` (``|P| / (end - begin)``, set beside the
  label's) and :func:`real_time_factor` (processing seconds / stream seconds, with the backlog
  a real-time player would accumulate).

Where we differ from or extend the reference. ``counting="reference"`` (``embodia eval live
--reference``) counts as the reference's scripts do wherever the first three items differ;
the report records the counting (``settings.counting``, ``summary.counting``):

- Silence. The reference's generator writes only the seconds the model chose to speak, so
  silence is a missing key; ``" ..."`` is only the in-context filler of a silent turn. Our
  agents may write ``" ..."`` or ``""`` for silent seconds, so :func:`evaluate` drops seconds
  whose text is empty or only an ellipsis (``drop_silent_seconds=True``, counted in the
  report); ``drop_silent_seconds=False`` keeps every key, exactly as the reference reads them
  (always so in the reference's counting).
- A prediction no label matches is an error; the reference's counting leaves it out of F1,
  TimeDiff and the win rate and counts it in PAUC as a clip with no judged reply
  (``start_score / 2``), as its PAUC script does. A caption is left out of its PAUC.
- The win rate flattens both commentaries; the reference's judge is shown a per-second
  baseline unflattened (:func:`~embodia.evals.live.records.as_stored`), which its counting
  reproduces.
- Judges are pluggable (:class:`Judge`, :class:`PairwiseJudge`) with lexical (ROUGE-L)
  judges for offline runs and Policy-backed ones that keep every prompt and raw answer. The
  Policy judges parse more leniently than the reference (which reads only the first character
  of a score reply, or tests ``"Commentary A" in reply``): the first integer of the reply for
  a score, a lone letter or "Commentary X" for a preference. There is no ``seed`` in our
  Policy contract; the judges run at temperature 0.
- Malformed files raise :class:`LiveEvalError` naming the line and the problem, where the
  reference skips bad lines and keys silently. A label without a prediction is skipped by
  default, as in the reference (``missing="empty"`` scores it as silence, ``"error"`` refuses).
- A ``pred`` that is one string (an offline captioner's output, as the reference's baseline
  files may hold) is read as the reference reads it: speaking over every second of
  ``[begin, end]`` for F1 (and our rate/overlap metrics), said at ``begin`` for TimeDiff, and
  taken whole by the pairwise judge; for PAUC (undefined there) it is one reply at ``begin``.
- Optional record fields (*ours*): label records may carry ``"other"`` (co-casters'
  ``{sec: text}``) and ``"queries"`` (guidance ``{sec: query}``); prediction records may carry
  ``"agents"`` (``{name: {sec: text}}``, the other self-play agents on the same clip) and
  ``"timing"`` (per-chunk processing seconds, numbers or ``{"processing_s", "stream_s"}``).

Clip by clip (*ours*): every metric but the summaries is a function of one clip, so
:func:`evaluate` scores each matched clip into a JSON-safe row (:func:`score_clip`: the
judges are asked here, the win rate's two judgments included) and sums the rows up
(:func:`report_from_rows`, one tally per metric, each tally's ``add`` = the metric + its
``add_result``). ``embodia eval live`` (:func:`run_eval_live`) runs the clips as units, in
this process or on Ray workers that each build the judge from its spec, appends each row to
``NAME.clips.jsonl`` beside the report as it arrives, resumes from it (``--resume``), and
builds the report from it in the prediction file's order: the same report as
:func:`evaluate`'s, whichever backend scored which clip.

The modules: :mod:`~embodia.evals.live.records` (clips, their files, matching),
:mod:`~embodia.evals.live.timing` (F1, TimeDiff, rates, overlap, guidance, real-time factor),
:mod:`~embodia.evals.live.judges`, :mod:`~embodia.evals.live.pauc`,
:mod:`~embodia.evals.live.winrate`, :mod:`~embodia.evals.live.report` (:func:`evaluate`)
and :mod:`~embodia.evals.live.units` (:func:`run_eval_live`). Every public name is
importable from this package.
"""

from embodia.core.scores import F1Clip, f1, rouge_l
from embodia.evals.live.judges import (
    PAIRWISE_TEMPLATE,
    SCORE_INSTRUCTIONS,
    Judge,
    Judgment,
    LexicalJudge,
    LexicalPairwiseJudge,
    PairJudgment,
    PairwiseJudge,
    PolicyJudge,
    PolicyPairwiseJudge,
    Winner,
    parse_preference,
    parse_score,
)
from embodia.evals.live.pauc import (
    DEFAULT_OMEGAS,
    MAX_Y,
    area_under_steps,
    merge_adjacent,
    pauc,
    reference_text,
    unjudged_pauc,
)
from embodia.evals.live.records import (
    COUNTINGS,
    UNTAGGED,
    Clip,
    ClipKey,
    Counting,
    LiveEvalError,
    Missing,
    as_stored,
    parse_clip,
    read_clips,
    read_records,
)
from embodia.evals.live.report import (
    ClipOptions,
    ClipPlan,
    ClipUnit,
    evaluate,
    evaluate_files,
    plan_clips,
    report_from_rows,
    score_clip,
)
from embodia.evals.live.timing import (
    TimeDiffClip,
    answer_rate,
    concurrent_speech,
    f1_report,
    max_consecutive_overlap,
    overlap_rate,
    query_response_delay,
    real_time_factor,
    speaking_rate,
    time_diff,
    time_diff_report,
)
from embodia.evals.live.units import LiveEvalSettings, clips_path, make_judges, run_eval_live
from embodia.evals.live.winrate import WinTally, flatten_commentary, judge_pair, win_rate

__all__ = [
    "Clip",
    "ClipKey",
    "ClipOptions",
    "ClipPlan",
    "ClipUnit",
    "COUNTINGS",
    "Counting",
    "DEFAULT_OMEGAS",
    "F1Clip",
    "Judge",
    "Judgment",
    "LexicalJudge",
    "LexicalPairwiseJudge",
    "LiveEvalError",
    "LiveEvalSettings",
    "MAX_Y",
    "Missing",
    "PAIRWISE_TEMPLATE",
    "PairJudgment",
    "PairwiseJudge",
    "PolicyJudge",
    "PolicyPairwiseJudge",
    "SCORE_INSTRUCTIONS",
    "TimeDiffClip",
    "UNTAGGED",
    "WinTally",
    "Winner",
    "answer_rate",
    "area_under_steps",
    "as_stored",
    "clips_path",
    "concurrent_speech",
    "evaluate",
    "evaluate_files",
    "f1",
    "f1_report",
    "flatten_commentary",
    "judge_pair",
    "make_judges",
    "max_consecutive_overlap",
    "merge_adjacent",
    "overlap_rate",
    "parse_clip",
    "parse_preference",
    "parse_score",
    "pauc",
    "plan_clips",
    "query_response_delay",
    "read_clips",
    "read_records",
    "real_time_factor",
    "reference_text",
    "report_from_rows",
    "rouge_l",
    "run_eval_live",
    "score_clip",
    "speaking_rate",
    "time_diff",
    "time_diff_report",
    "unjudged_pauc",
    "win_rate",
]
