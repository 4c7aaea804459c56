"""Notebook 01's dashboard: ``lab.view.overview`` (the head: scorecard, rates with their
intervals, what needs attention) and ``lab.dashboard.StreamExplorer`` (filters, a menu, and
the picked stream's sections, redrawn on every change), on the bundled sample and on streams
whose text is markup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import lab.capture
from lab.replay import replay, replay_sse
from lab.view import format_rate, overview

ROOT = Path(__file__).resolve().parents[1]
PARTIAL = "s18ec9d7c919ad13206eb17"  # the sample's stream the think stripper cleaned in part
LONGEST = "s18ec9d7dca518ae3795e22"  # the sample's stream with the most reads (34)
MARKUP = "<script>window.__labPwned=1</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def capture():
    return lab.capture.open(ROOT / "captures")


@pytest.fixture(scope="module")
def sample(capture):
    return replay(capture)


def _hostile():
    chunk = {
        "provider": f"Evil{MARKUP}",
        "choices": [{"delta": {"content": f"<think>plan {MARKUP}</think>Answer {MARKUP}"}}],
    }
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    return replay_sse("openrouter", body, stream_id="s-hostile")


def test_format_rate_is_one_format_for_a_rate_and_its_interval():
    assert format_rate(0.142857, 0.02568, 0.513128) == "14.3 % (2.6–51.3 %)"
    assert format_rate(0.5) == "50.0 %"
    assert format_rate(0.5, float("nan"), 0.9) == "50.0 %"
    assert format_rate(float("nan"), 0.1, 0.2) == "—"
    assert format_rate(None) == "—"


def test_overview_says_the_capture_in_one_view(sample):
    page = overview(sample)._repr_html_()
    assert (
        "<b>132 streams · 14 serving backends · 7 leaked reasoning · 54 ended in an error</b>"
        in page
    )
    # the scorecard: each verdict's rate with its interval, the worse backend said in red
    assert "<b style='color: #b0262c'>57.1 % (42.2–70.9 %) worse</b>" in page
    assert (
        "openai (direct): worse with confidence on errors, 57.1 % (42.2–70.9 %) against "
        "25.9 % for the rest"
    ) in page
    # a backend slower to first token is a flag too, said in red beside the worse one
    assert re.search(
        r"<div style='[^']*'>anthropic \(direct\): slower with confidence on time to first "
        r"token, median 36\.1 ms \(24\.9–43\.6 ms\) against 22\.7 ms for the rest",
        page,
    )
    assert "<summary>the other sentences (14)</summary>" in page  # 11 backends, 3 notes
    # the rates per backend with their intervals, and what they let you say
    assert (
        "<td style='border: 1px solid #ddd; padding: 2px 6px; text-align: left; "
        "vertical-align: top'>100.0 % (20.7–100.0 %)</td>" in page
    )
    assert "<li>Leaks: no backend is worse than the rest with 95 % confidence.</li>" in page
    # what needs attention: the anomalies per backend, the partial clean
    assert "<b>38 of 132 streams need attention</b>" in page
    assert "Chutes (1), DeepInfra (1), Nebius (1)" in page  # eof_without_terminator
    assert "<b>1 stream(s) cleaned only in part</b>" in page
    assert f">{PARTIAL}</td>" in page


def test_overview_shows_markup_from_a_stream_as_text():
    page = str(overview([_hostile()]))
    assert "<script>" not in page and "<img src=x" not in page
    assert "Evil&lt;script&gt;window.__labPwned=1&lt;/script&gt;" in page


def test_overview_of_no_stream_says_so():
    assert (
        str(overview([]))
        == "<p>0 streams · 0 serving backends · 0 leaked reasoning · 0 ended in an error</p>"
    )


def _explorer(sample, capture, **kwargs):
    pytest.importorskip("ipywidgets")
    from lab.dashboard import StreamExplorer

    return StreamExplorer(sample, capture, **kwargs)


def test_explorer_filters_say_how_many_streams_have_each_choice(sample, capture):
    ex = _explorer(sample, capture)
    assert [label for label, _ in ex.verdict.options] == [
        "(any)",
        "leaked (7)",
        "cleaned only in part (1)",
        "error (54)",
        "ok (71)",
    ]
    assert [label for label, _ in ex.backend.options][:3] == [
        "(any)",
        "AtlasCloud (1)",
        "Chutes (7)",
    ]
    assert ("eof_without_terminator (3)", "eof_without_terminator") in ex.anomaly.options
    assert ex.matches.value == "<span style='color: #555'>132 of 132 streams match</span>"
    assert ex.value == ex.stream.options[0][1]  # leaked first


def test_explorer_redraws_every_section_when_a_filter_or_the_pick_changes(sample, capture):
    ex = _explorer(sample, capture)
    ex.verdict.value = "cleaned only in part"
    assert [sid for _, sid in ex.stream.options] == [PARTIAL]
    assert ex.value == PARTIAL
    assert ex.view.value.count(f"<b>{PARTIAL}</b>") == 1  # the stream, drawn once
    assert "the closing reasoning tag arrived after 42 chars of reasoning" in ex.view.value
    assert "&quot;model&quot;: &quot;fake/think-leak&quot;" in ex.request.value
    assert ex.timeline.value.count("src='data:image/png;base64,") == 1
    ex.verdict.value = None
    ex.backend.value = "Chutes"
    assert ex.matches.value == "<span style='color: #555'>7 of 132 streams match</span>"
    assert ex.value != PARTIAL and ex.result.serving_provider == "Chutes"
    assert f"<b>{ex.value}</b>" in ex.view.value and PARTIAL not in ex.view.value
    ex.anomaly.value = "glued_reasoning_summaries"  # a google (direct) anomaly: none on Chutes
    assert ex.value is None and ex.stream.options == ()
    assert ex.request.value == "<p>no stream matches these filters</p>"
    assert ex.view.value == ex.reads.value == ex.timeline.value == ""


def test_explorer_caps_the_raw_reads_until_show_all(sample, capture):
    from lab.dashboard import READ_ROWS

    ex = _explorer(sample, capture, value=LONGEST)
    assert ex.reads.value.count("<tr") == 1 + READ_ROWS
    assert f"34 read(s) of the final attempt; the first {READ_ROWS} shown" in ex.reads.value
    assert ex.show_all.description == "show all 34 reads" and ex.show_all.layout.display is None
    ex.show_all.click()
    assert ex.reads.value.count("<tr") == 1 + 34
    assert ex.show_all.description == f"show the first {READ_ROWS}"
    ex.stream.value = PARTIAL  # a new pick starts capped again; few reads: no button
    assert ex.show_all.layout.display == "none"


def test_explorer_highlights_the_reads_where_a_guard_moved_text(sample, capture):
    from lab.dashboard import decoded_reads

    reads = decoded_reads(capture, next(r for r in sample if r.stream_id == PARTIAL))
    assert reads.columns.tolist() == ["seq", "t_ms", "n_bytes", "text", "guard"]
    assert int(reads["guard"].sum()) >= 1
    ex = _explorer(sample, capture, value=PARTIAL)
    assert ex.reads.value.count("<tr style='background: #ffe0e0'>") == int(reads["guard"].sum())


def test_explorer_shows_markup_from_a_stream_as_text():
    pytest.importorskip("ipywidgets")
    from lab.dashboard import StreamExplorer

    ex = StreamExplorer([_hostile()])
    bundle = ex._repr_mimebundle_()
    for page in (ex.view.value, bundle["text/html"]):
        assert "<script>" not in page and "<img src=x" not in page
        assert "Answer &lt;script&gt;window.__labPwned=1&lt;/script&gt;" in page
    assert "no capture given: StreamExplorer(results, capture)" in ex.request.value


def test_explorer_refuses_an_unknown_stream_and_no_results(sample, capture):
    with pytest.raises(KeyError, match="no stream 'nope' among 132 results"):
        _explorer(sample, capture, value="nope")
    with pytest.raises(ValueError, match="no stream to explore: the results are empty"):
        _explorer([], None)


def test_explorer_says_what_it_is_to_a_viewer_without_widgets(sample, capture):
    from lab.view import stream_html
    from lab.widgetview import NEEDS

    ex = _explorer(sample, capture, value=PARTIAL)
    bundle = ex._repr_mimebundle_()
    assert bundle["text/plain"] == (
        "A stream explorer of 132 streams (filters, a stream menu, the picked stream's "
        f"sections) (interactive, ipywidgets): {NEEDS}; a static copy is in its HTML output."
    )
    assert bundle["text/html"] == stream_html(ex.result)
    assert "application/vnd.jupyter.widget-view+json" in bundle
