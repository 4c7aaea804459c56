"""How results look in a notebook: escaped HTML for one stream, a summary table for many,
and every ``lab.tables`` function saying clearly what it takes."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pandas as pd
import pytest

from lab import tables
from lab.replay import replay, replay_sse
from lab.result import AttemptInfo, Results, StreamResult
from lab.view import MISSING, results_html, shown_before_close, stream_html

ROOT = Path(__file__).resolve().parents[1]


def _event(delta: dict) -> bytes:
    return f"data: {json.dumps({'choices': [{'delta': delta}]})}\n\n".encode()


def partly_cleaned() -> StreamResult:
    """The closing tag arrives after 'The user asks. Keep it' was already shown."""
    body = [
        _event({"content": "The user asks. Keep it"}),
        _event({"content": " short.</think>Hello <script>alert(1)</script> & <b>bye</b>!"}),
        b"data: [DONE]\n\n",
    ]
    return replay_sse("openrouter", body, stream_id="s-partial")


@pytest.fixture(scope="module")
def sample() -> Results:
    return replay(ROOT / "captures")


def test_stream_html_escapes_model_text_and_never_renders_it_as_markup():
    page = stream_html(partly_cleaned())
    assert "<script" not in page and "<b>bye" not in page
    assert "Hello &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bye&lt;/b&gt;!" in page


def test_stream_html_marks_moved_text_in_the_reasoning_and_flags_a_partial_clean():
    r = partly_cleaned()
    page = r._repr_html_()
    assert re.search(r"<mark [^>]*title='moved here by a guard'> short\.</mark>", page)
    assert "cleaned only in part" in page
    assert "after 22 chars of reasoning had been shown as the answer" in page
    assert re.search(r"<span [^>]*>The user asks\. Keep it</span>Hello", page)


def test_shown_before_close_returns_what_the_stripper_could_not_take_back():
    assert shown_before_close(partly_cleaned()) == [("The user asks. Keep it", " short.")]
    clean = replay_sse("openrouter", _event({"content": "<think>plan</think>Hi"}))
    assert clean.guard_events and shown_before_close(clean) == []


def test_stream_html_lists_attempts_with_labels_statuses_and_how_they_ended():
    r = partly_cleaned()
    r.attempts = [
        AttemptInfo(
            attempt=0,
            label="default",
            status=400,
            error="min_p unsupported",
            degradable="generic_400",
            end_reason="http_error",
        ),
        AttemptInfo(attempt=1, label="targeted_drop_min_p", status=200, end_reason="eof"),
    ]
    page = stream_html(r)
    assert "<b>attempts (2)</b>" in page
    cells = re.findall(r"<td [^>]*>([^<]*)</td>", page)
    assert ["0", "default", "400", "http_error", "generic_400", "min_p unsupported"] == cells[
        cells.index("default") - 1 : cells.index("default") + 5
    ]
    i = cells.index("targeted_drop_min_p")
    assert cells[i - 1 : i + 5] == ["1", "targeted_drop_min_p", "200", "eof", MISSING, MISSING]


def test_stream_html_shows_guard_events_usage_backend_and_anomalies():
    r = partly_cleaned()
    r.serving_provider = "SiliconFlow"
    page = stream_html(r)
    assert "served by <b>SiliconFlow</b>" in page
    assert "<b>guard events (1)</b>" in page and "orphan_close" in page
    assert "<b>usage</b> — (the stream reported none)" in page
    # the partial clean is an anomaly too (issue 22 asked for it in the anomalies column)
    assert "<b>anomalies (1)</b>" in page and "reasoning_shown_before_close" in page
    r.text = "<think>x</think>hi"
    assert "think_tags_after_guards" in stream_html(r)


def test_stream_result_repr_is_one_short_line():
    text = repr(partly_cleaned())
    assert "\n" not in text and len(text) < 400
    assert text.startswith("StreamResult(stream_id='s-partial', provider='openrouter'")


def test_replay_returns_results_a_list_whose_repr_is_the_summary_table(sample):
    assert isinstance(sample, Results) and isinstance(sample, list)
    assert sample == list(sample) and len(sample) == 132
    first = repr(sample).splitlines()
    assert first[0] == (
        "Results: 132 streams · 14 serving backends · 7 leaked reasoning · 54 ended in an error"
    )
    assert first[1].split() == [
        "stream_id",
        "serving_provider",
        "model",
        "leak_guards",
        "error_type",
        "classifier",
    ]
    assert max(map(len, first[1:-2])) <= 100  # the table fits 100 columns
    assert first[-2] == "... 112 more (lab.tables.streams(results) has every row)"
    assert first[-1] == (
        "(not shown to fit 100 columns: degradation_path, finish_reason, ttft_ms, anomalies, "
        "provider, leaked)"
    )
    assert isinstance(sample[:3], Results) and isinstance(sample[0], StreamResult)


def test_two_replays_added_are_results_with_the_summary_view(sample):
    both = sample + sample[:2]
    assert isinstance(both, Results) and len(both) == 134
    assert repr(both).splitlines()[0].startswith("Results: 134 streams")
    assert isinstance(list(sample[:1]) + sample[:1], Results)
    assert isinstance(sum([sample[:1], sample[:2]], Results()), Results)
    assert isinstance(sample[:1] * 2, Results) and len(sample[:1] * 2) == 2
    with pytest.raises(TypeError):
        sample + 1
    assert type(pickle.loads(pickle.dumps(sample))) is Results


def test_results_html_is_a_scrolling_summary_table_of_the_first_rows(sample):
    page = results_html(sample)
    assert page.count("</tr>") == 51  # header + 50 rows
    assert "82 more rows" in page and "overflow: auto" in page
    assert sample.get(sample[5].stream_id) is sample[5]
    with pytest.raises(KeyError, match="no stream 'nope' among 132 results"):
        sample.get("nope")


def test_every_table_takes_results_or_the_streams_table_where_it_can(sample):
    st = tables.streams(sample)
    assert tables.streams(st) is st
    pd.testing.assert_frame_equal(tables.by_backend(sample), tables.by_backend(st))
    pd.testing.assert_frame_equal(tables.classifiers(sample), tables.classifiers(st))
    pd.testing.assert_series_equal(tables.backend_labels(sample), tables.backend_labels(st))


@pytest.mark.parametrize("fn", ["leaks", "attempts"])
def test_tables_that_need_results_say_so_when_given_the_streams_table(sample, fn):
    st = tables.streams(sample)
    with pytest.raises(
        TypeError, match=rf"tables\.{fn}\(\) needs the replay results .* not a table"
    ):
        getattr(tables, fn)(st)
    with pytest.raises(
        TypeError, match=rf"tables\.{fn}\(\) needs a list of StreamResult .* not str"
    ):
        getattr(tables, fn)("captures/")
    with pytest.raises(TypeError, match=rf"for one result: {fn}\(\[result\]\)"):
        getattr(tables, fn)(sample[0])


def test_tables_that_take_a_streams_table_refuse_another_frame():
    with pytest.raises(TypeError, match=r"tables\.by_backend\(\) takes the streams table"):
        tables.by_backend(pd.DataFrame({"x": [1]}))


def test_show_table_without_ipywidgets_is_escaped_html_with_one_missing_marker(monkeypatch):
    import sys

    import IPython.display

    shown: list = []
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets -> ImportError
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    from lab.view import show_table

    show_table(pd.DataFrame({"text": ["<b>x</b>", None], "n": [1.5, float("nan")]}), caption="t")
    (page,) = [obj.data for obj in shown]
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert page.count(f"<td>{MISSING}</td>") == 2 and "NaN" not in page


def _table_view(page_rows: int = 2):
    pytest.importorskip("ipywidgets")
    from lab.view import TableView

    df = pd.DataFrame({"text": ["<b>x</b>", None, "c", "d"], "n": [3, 1, float("nan"), 2]})
    return TableView(df, caption="<i>t</i>", page_rows=page_rows)


def test_table_view_pages_and_says_which_rows_it_shows():
    view = _table_view()
    assert view.status.value == "rows 1–2 of 4 · page 1 of 2"
    assert view.previous.disabled and not view.next.disabled
    view.next.click()
    assert view.status.value == "rows 3–4 of 4 · page 2 of 2"
    assert view.page_frame()["text"].tolist() == ["c", "d"]
    assert view.next.disabled and not view.previous.disabled
    view.next.click()  # past the last page: stays there
    assert view.page == 1


def test_table_view_sorts_missing_values_last_both_ways():
    view = _table_view(page_rows=10)
    view.sort.value = "n"
    assert view.rows()["n"].tolist() == [1.0, 2.0, 3.0, MISSING]
    view.descending.value = True
    assert view.rows()["n"].tolist() == [3.0, 2.0, 1.0, MISSING]
    view.sort.value = "text"
    assert view.rows()["text"].tolist() == ["d", "c", "<b>x</b>", MISSING]


def test_table_view_search_keeps_matching_rows_and_starts_at_page_one():
    view = _table_view()
    view.next.click()
    view.search.value = "<B>"
    assert view.page == 0
    assert view.rows()["text"].tolist() == ["<b>x</b>"]
    assert view.status.value == "rows 1–1 of 1 (of 4; search: &lt;B&gt;) · page 1 of 1"
    view.search.value = "zzz"
    assert view.status.value == "rows 0–0 of 0 (of 4; search: zzz) · page 1 of 1"


def test_table_view_shows_markup_as_text_in_the_page_and_the_static_copy():
    view = _table_view(page_rows=10)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "application/vnd.jupyter.widget-view+json", "text/html"}
    for page in (view.body.value, bundle["text/html"]):
        assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
        assert page.count(f"<td>{MISSING}</td>") == 2 and "NaN" not in page
    assert "&lt;i&gt;t&lt;/i&gt;" in bundle["text/html"] and "<i>t</i>" not in bundle["text/html"]


def test_stream_picker_lists_leaked_streams_first_and_follows_the_menu(sample):
    pytest.importorskip("ipywidgets")
    from lab.view import StreamPicker

    picker = StreamPicker(sample)
    labels = [label for label, _ in picker.dropdown.options]
    states = [label.rsplit(" · ", 1)[1] for label in labels]
    assert states[:7] == ["leaked", "leaked, cleaned only in part"] + ["leaked"] * 5
    assert set(states[7:61]) == {"error"} and set(states[61:]) == {"ok"}
    assert picker.value == picker.dropdown.options[0][1]
    picker.dropdown.value = "s18ec9d7c919ad13206eb17"
    assert picker.result.serving_provider == "SiliconFlow"
    with pytest.raises(KeyError, match="no stream 'nope' among 132 results"):
        StreamPicker(sample, value="nope")


def _called() -> StreamResult:
    """A stream with one tool call whose arguments hold markup, a boolean and a null."""
    args = json.dumps({"city": "<b>Zürich</b>", "metric": True, "note": None})
    call = {"index": 0, "id": "call_1", "function": {"name": "weather", "arguments": args}}
    body = [
        _event({"content": "<think>look it up</think>"}),
        _event({"tool_calls": [call]}),
        b'data: {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    return replay_sse("openrouter", body, stream_id="s-call")


def test_stream_html_prints_tool_arguments_as_escaped_json_never_a_python_repr():
    page = stream_html(_called())
    assert "<b>tool calls (1)</b>" in page
    pre = re.search(r"<pre style='[^']*; max-height: 12em'>(.*?)</pre>", page, flags=re.S)
    assert pre.group(1) == (
        "{\n  &quot;city&quot;: &quot;&lt;b&gt;Zürich&lt;/b&gt;&quot;,\n"
        "  &quot;metric&quot;: true,\n  &quot;note&quot;: null\n}"
    )
    assert "<b>Zürich" not in page and "True" not in page and "None" not in page


def test_stream_html_marks_what_lab_reading_marks():
    from lab.reading import answer_pieces, reasoning_pieces

    r = partly_cleaned()
    assert reasoning_pieces(r) == [(" short.", "moved")]
    assert answer_pieces(r)[0] == ("The user asks. Keep it", "shown")
    page = stream_html(r)
    boxes = re.findall(r"<td [^>]*><pre [^>]*>(.*?)</pre></td>", page, flags=re.S)
    assert boxes[1] == (
        "<mark style='background: #ffd27a; color: inherit' title='moved here by a guard'>"
        " short.</mark>"
    )
    assert boxes[0].startswith(
        "<span style='text-decoration: underline wavy #d9363e' title='reasoning shown before "
        "its closing tag arrived'>The user asks. Keep it</span>Hello &lt;script&gt;"
    )


def test_stream_html_keeps_each_section_on_its_own_line():
    page = stream_html(replay_sse("openrouter", _event({"content": "Hi"})))
    assert "<div><b>guard events (0)</b> none</div><div><b>attempts (1)</b>" in page


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_table_view_says_what_it_is_and_how_to_use_it_to_a_viewer_without_widgets():
    """text/plain is what a terminal, a markdown export and VS Code with a screen reader
    show: a sentence naming the view and what to do, never ipywidgets' ``VBox(children=``."""
    from lab.widgetview import NEEDS

    bundle = _table_view()._repr_mimebundle_()
    assert bundle["text/plain"] == (
        f"A table '<i>t</i>' of 4 rows that searches, sorts and pages (interactive, "
        f"ipywidgets): {NEEDS}; a static copy is in its HTML output."
    )
    assert NEEDS == (
        "run this cell with a live kernel in JupyterLab, Notebook 7 or VS Code (Jupyter "
        "extension) to use it"
    )
    assert set(bundle[WIDGET_VIEW]) >= {"model_id", "version_major"}


def test_stream_picker_bundle_carries_the_picked_stream_as_its_static_copy(sample):
    pytest.importorskip("ipywidgets")
    from lab.view import StreamPicker
    from lab.widgetview import NEEDS

    picker = StreamPicker(sample, value="s18ec9d7c919ad13206eb17")
    bundle = picker._repr_mimebundle_()
    assert bundle["text/plain"] == (
        "A menu of 132 streams and the picked stream below it (interactive, ipywidgets): "
        f"{NEEDS}; a static copy is in its HTML output."
    )
    assert bundle["text/html"] == stream_html(picker.result)
    assert WIDGET_VIEW in bundle
