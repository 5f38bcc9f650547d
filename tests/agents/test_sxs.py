"""SxS runtime: tags split across streamed pieces, the disclosure guard, the user's view."""

from __future__ import annotations

from embodia.agents.sxs import SpanSplitter, run_sxs
from embodia.evals.content_latency import stream_metrics
from embodia.policies.recipes.sxs_data import make_numeric_support
from embodia.policies.scripted import ScriptedPolicy

REPLY = (
    "<think> 2 + 3 = 5 </think> <speak> The sum is 5. </speak> "
    "<speak> Doubled it is 10. </speak> <think> and 5 * 2 = 10 indeed </think>"
)


def test_splitter_handles_tags_cut_anywhere() -> None:
    text = "pre<think>a b</think><speak>c</speak><sp x"
    for cut in range(1, len(text)):
        splitter = SpanSplitter()
        parts = splitter.feed(text[:cut]) + splitter.feed(text[cut:]) + splitter.close()
        speak = "".join(t for c, t, _ in parts if c == "speak")
        think = "".join(t for c, t, _ in parts if c == "think")
        assert speak == "c", cut
        assert think == "prea b<sp x", cut


def test_only_supported_speech_is_released_and_in_order() -> None:
    seen: list[dict] = []
    result = run_sxs(
        "What is 2 + 3, doubled?", ScriptedPolicy([REPLY]), make_numeric_support([2, 3]), on_speak=seen.append
    )
    texts = [d.text for d in result.disclosures]
    assert texts == ["The sum is 5.", "Doubled it is 10."]
    first, second = result.disclosures
    # A chunk is released once it is complete (its span closed): at once, being supported.
    assert first.supported and first.released_at == first.written_at + 4
    # "10" was written before the reasoning derived it: held until "5 * 2 = 10" arrived.
    assert second.supported and second.released_at > second.written_at + 5
    assert [e["text"] for e in seen] == texts and seen[1]["token_index"] == second.released_at
    assert result.think == ["2 + 3 = 5", "and 5 * 2 = 10 indeed"]


def test_unsupported_speech_is_flagged_or_withheld_at_the_end() -> None:
    reply = "<think> 2 + 3 = 5 </think> <speak> The answer is 7. </speak>"
    flagged = run_sxs("?", ScriptedPolicy([reply]), make_numeric_support())
    assert [(d.text, d.supported) for d in flagged.disclosures] == [("The answer is 7.", False)]
    withheld = run_sxs("?", ScriptedPolicy([reply]), make_numeric_support(), release_unsupported=False)
    assert withheld.disclosures == [] and withheld.withheld == ["The answer is 7."]


def test_visible_spans_feed_the_content_latency_metrics() -> None:
    result = run_sxs("?", ScriptedPolicy([REPLY]), make_numeric_support([2, 3]))
    metrics = stream_metrics(result.visible_spans())
    first = result.disclosures[0]
    assert metrics.ttfc_tokens == first.released_at
    assert metrics.ttfc_tokens < result.tokens
