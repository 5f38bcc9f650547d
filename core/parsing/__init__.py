"""Reading decisions out of model replies, and asking again when a reply cannot be used.

Model replies are messy: JSON in code fences with prose around it, ``<think>`` blocks full of
numbers, "Answer: 3", "I choose waypoint [2].", trailing commas, single quotes, comments,
replies cut off by the token limit. The parsers here return either a value or a
:class:`ParseFailure` whose ``reason`` is one line that can be shown to the model; :func:`ask`
uses that reason to re-ask, then falls back to a declared default, and keeps every attempt.

Rules :func:`parse_choice` follows (the tests hold a table of real-looking replies):

- Reasoning is ignored: ``<think>``/``<thinking>`` blocks, a leading block whose opening tag
  was in the prompt (only ``</think>`` in the reply), and an unclosed block at the end.
- An *explicit* answer is a JSON object with one of ``keys`` (``{"choice": 3}``), a marker
  (``Answer: 3``, ``the answer is 3``, ``choice = 3``, ``答案：3``), a choosing verb
  (``I pick 4``, ``I choose waypoint [2]``, ``go to waypoint 5``; negated ones such as
  ``I would not pick 3`` are skipped) or a line holding only the number (``[3]``, ``**3**``).
  The *last* explicit answer in the reply wins over everything before it.
- Without an explicit answer, a reply that mentions exactly one number uses it
  (``Waypoint 3 looks best.``); several different numbers are ambiguous and fail.
- Number words ``zero`` .. ``ten`` count in explicit answers only (``Answer: three``), not
  as loose mentions, because "one of the doors" is prose, not a choice.
- A reply cut off right after a number inside an unclosed JSON object (``{"choice": 1``)
  fails: the number may be the first digits of a longer one.

Hostile replies (small models repeat themselves up to the token limit, or open brackets
forever) are read safely:

- Every parser here runs in time linear in the reply: one pass finds the bracketed regions
  (:func:`scan_json`), no pattern can backtrack over a long run, and a region that is not JSON
  is looked into only a few levels deep (benchmarks/parsing.py measures it).
- JSON nested deeper than :data:`MAX_JSON_DEPTH` fails with a clear reason before a decoder
  (which recurses per level) sees it. No parser raises on any reply.
- :func:`ask` cuts a reply longer than ``max_reply_chars`` (default :data:`MAX_REPLY_CHARS`)
  before parsing it and records the cut; an exception from a parser is a failed attempt.

The package's modules: :mod:`.failure` (:class:`ParseFailure`), :mod:`.thinking` (reasoning
blocks), :mod:`.json_scan` (finding and decoding JSON), :mod:`.choice` (:func:`parse_choice`),
:mod:`.label` (:func:`parse_label`) and :mod:`.ask` (re-asks and the fallback); every public
name is importable from ``embodia.core.parsing`` itself.
"""

from embodia.core.json_bounds import MAX_JSON_DEPTH, nested_deeper_than
from embodia.core.parsing.ask import MAX_REPLY_CHARS, AskRecord, CallsAnswer, Decision, FollowUp, ask
from embodia.core.parsing.choice import parse_choice
from embodia.core.parsing.failure import ParseFailure
from embodia.core.parsing.json_scan import (
    CUT_OFF,
    NOT_JSON,
    TOO_DEEP,
    JsonScan,
    JsonSpan,
    checked_depth,
    decode_bounded,
    extract_json,
    scan_json,
    scan_reply,
)
from embodia.core.parsing.label import parse_label
from embodia.core.parsing.thinking import empty_reason, strip_thinking

__all__ = [
    "CUT_OFF",
    "MAX_JSON_DEPTH",
    "MAX_REPLY_CHARS",
    "NOT_JSON",
    "TOO_DEEP",
    "AskRecord",
    "CallsAnswer",
    "Decision",
    "FollowUp",
    "JsonScan",
    "JsonSpan",
    "ParseFailure",
    "ask",
    "checked_depth",
    "decode_bounded",
    "empty_reason",
    "extract_json",
    "nested_deeper_than",
    "parse_choice",
    "parse_label",
    "scan_json",
    "scan_reply",
    "strip_thinking",
]
