"""``lab report``: the HTML page holds the tables and plots and opens cleanly in a browser."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from lab.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    assert main(["report", str(ROOT / "captures"), "--out", str(out)]) == 0
    return out / "report.html"


def test_report_page_embeds_every_figure_and_table(report):
    page = report.read_text(encoding="utf-8")
    # the latency section has two, the verdicts that differ between backends one each
    assert page.count("data:image/png;base64,") == 9
    for heading in (
        "By serving backend",
        "Streams",
        "Latency by serving backend",
        "Where reasoning or markup leaked",
        "Error classifiers",
        "Degradation attempts",
    ):
        assert re.search(f"<h2 id='[a-z]+'>{heading}", page), heading
    assert "Chutes" in page and "think_stripper" in page


def test_report_says_which_backends_are_worse_with_confidence_and_which_are_too_small(report):
    page = report.read_text(encoding="utf-8")
    start = page.index("<ul class='verdicts'>")
    verdicts = page[start : page.index("</ul>", start)]
    # the bundled sample: every backend has too few streams for its leaks to tell; the
    # direct OpenAI endpoint fails more than the rest (24 of its 42 requests)
    assert "<li>Leaks: no backend is worse than the rest with 95 % confidence.</li>" in verdicts
    assert "<li>Leaks: too few streams to tell: Parasail (1 stream), " in verdicts
    assert (
        "<li>Errors: worse than the rest with 95 % confidence: openai (direct) "
        "24/42, 57.1 % (42.2–70.9 %) vs 25.9 % for the rest.</li>"
    ) in verdicts


def test_report_never_contains_request_headers(report):
    page = report.read_text(encoding="utf-8").lower()
    assert "authorization" not in page
    assert "bearer" not in page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browser_or_skip() -> str:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (CI installs it; apt-get install chromium)")
    return browser


def _headless(browser: str, profile: Path, *extra: str) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *extra,
    ]


def _body_attrs(browser: str, page: Path, profile: Path, width: int) -> dict[str, str]:
    cmd = _headless(browser, profile, f"--window-size={width},900", "--dump-dom", page.as_uri())
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:500]
    return dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(1)))


def test_report_opens_in_headless_chromium_and_shows_the_plots(report, tmp_path):
    attrs = _body_attrs(_browser_or_skip(), report, tmp_path / "profile", 1280)
    assert attrs["data-images"] == "9"
    assert attrs["data-images-ok"] == "9"
    assert attrs["data-errors"] == "0"


def test_report_at_1280_px_never_overflows_the_page(report, tmp_path):
    """Wide tables scroll inside their own box; nothing else reaches past the window."""
    browser = _browser_or_skip()
    attrs = _body_attrs(browser, report, tmp_path / "profile", 1280)
    assert attrs["data-overflow"] == "0"
    shot = tmp_path / "report-1280.png"
    cmd = _headless(
        browser, tmp_path / "profile", "--window-size=1280,2400", f"--screenshot={shot}"
    )
    subprocess.run([*cmd, report.as_uri()], capture_output=True, timeout=120)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1280, 2400)


def test_report_has_a_table_of_contents_linking_every_section(report):
    page = report.read_text(encoding="utf-8")
    links = re.findall(r"<li><a href='#([a-z-]+)'>", page)
    assert links == [
        "scorecard",
        "verdict-think-leak",
        "verdict-markup-leak",
        "verdict-error",
        "verdict-stall",
        "verdict-tool-call-valid",
        "latency",
        "plots",
        "backends",
        "streams",
        "leaks",
        "classifiers",
        "attempts",
        "stream-sections",
    ]
    for sid in links:
        assert f"<h2 id='{sid}'>" in page
    tables = page[: page.index("<h2 id='stream-sections'>")]
    # 7, a test table per verdict that differs (3) and the slower-than-rest test's
    assert tables.count("<div class='scroll'>") == 11


def test_report_latency_section_shows_each_quantile_with_its_bootstrap_interval(report):
    page = report.read_text(encoding="utf-8")
    section = page[page.index("<h2 id='latency'>") : page.index("<h2 id='plots'>")]
    assert "<th>p50</th><th>p90</th><th>p99</th>" in section
    assert "Time to first token by backend (ECDF)" in section
    assert "Gaps between reads with visible text" in section
    # DeepInfra's TTFT over the bundled captures: the median and its interval in one cell
    assert re.search(
        r"<td>DeepInfra</td><td>ttft_ms</td><td class='num'>8</td>"
        r"<td class='num'>0</td><td>[0-9.]+ \([0-9.]+–[0-9.]+\)</td>",
        section,
    )


def _section(page: str, sid: str) -> str:
    start = page.index(f"<h2 id='{sid}'>")
    return page[start : page.index("<h2 id=", start + 1)]


def test_report_has_a_section_per_verdict_with_its_plot_and_tests(report):
    page = report.read_text(encoding="utf-8")
    errors = _section(page, "verdict-error")
    assert errors.startswith("<h2 id='verdict-error'>Verdict: errors</h2>")
    assert "Worse than the rest with confidence: openai (direct)." in errors
    assert errors.count("data:image/png;base64,") == 1 and "<img alt='errors'" in errors
    assert (
        "<tr><td>openai (direct)</td><td class='num'>42</td><td>57.1 % (42.2–70.9 %)</td>"
        "<td>25.9 %</td><td>0.00071</td><td>0.042</td>"
        "<td>yes</td></tr>"
    ) in errors
    for sid in ("verdict-think-leak", "verdict-tool-call-valid"):
        section = _section(page, sid)
        assert "No backend is worse than the rest with confidence." in section
        assert section.count("data:image/png;base64,") == 1
    # no backend stalled nor leaked markup: said, no plot
    for sid in ("verdict-stall", "verdict-markup-leak"):
        section = _section(page, sid)
        assert "The same on every backend (123 streams judged): nothing to compare." in section
        assert "data:image/png" not in section
    # the latency verdict: the backend slower to first token than the rest
    latency = _section(page, "latency")
    assert (
        "Slower than the rest with confidence on time to first token: anthropic (direct)."
    ) in latency
    assert (
        "<tr><td>anthropic (direct)</td><td class='num'>15</td><td>36.1 (24.9–43.6)</td>"
        "<td class='num'>22.7</td><td>0.001</td><td>0.013</td>"
        "<td>yes</td></tr>"
    ) in latency


def test_report_shows_the_backend_scorecard_first(report):
    page = report.read_text(encoding="utf-8")
    first = page.index("<h2 id=")
    assert page[first:].startswith("<h2 id='scorecard'>Backend scorecard</h2>")
    card = page[page.index("<ul class='scorecard'>") :]
    assert card.index("Worse with confidence: a one-sided Fisher exact test") < card.index("</ul>")


def test_report_rounds_numbers_and_shows_missing_one_way(report):
    page = report.read_text(encoding="utf-8")
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert cells and not {"None", "nan", "NaN", "<NA>", "&lt;NA&gt;"} & set(cells)
    assert "<td class='missing'>—</td>" in page
    # a rate, with its Wilson interval in brackets where the table has one, one format for
    # both: "33.3 % (6.1–79.2 %)"
    rates = [c for c in cells if c.endswith((" %", " %)"))]
    assert rates and all(re.fullmatch(r"\d+\.\d %( \(\d+\.\d–\d+\.\d %\))?", c) for c in rates)
    assert "33.3 % (6.1–79.2 %)" in cells
    # no interval left as a raw fraction beside its percentage
    assert not re.search(r"<th>[a-z_]*_ci_(low|high)</th>", page)
    times = re.findall(r"<td class='num'>(\d+\.\d+)</td>", page)
    assert times and all(len(t.split(".")[1]) == 1 for t in times)


def test_report_shows_small_costs_with_three_significant_digits(report):
    page = report.read_text(encoding="utf-8")
    costs = re.findall(r"<td class='num'>\$(0\.\d+)</td>", page)
    assert costs, "no cost cell in the report"
    # pandas' default would print 0.000041 for 4.05e-05: 3 significant digits are kept
    significant = [c.split(".")[1].lstrip("0") for c in costs if float(c) > 0]
    assert significant and all(len(d) >= 3 for d in significant)


def test_report_cuts_long_cells_and_keeps_the_whole_text_in_the_tooltip():
    from lab.report import CELL_CHARS, _td

    long = "x" * 100 + "<b>"
    cell = _td("error_message", long)
    assert cell == (f"<td title='{'x' * 100}&lt;b&gt;'>{'x' * (CELL_CHARS - 1)}…</td>")


def test_cost_cell_format():
    from lab.view import format_cost

    assert [format_cost(v) for v in (4.05e-05, 3.6e-06, 0.0123, 0.0, float("nan"), None)] == [
        "$0.0000405",
        "$0.00000360",
        "$0.0123",
        "$0.0000",
        "—",
        "—",
    ]


# -- stream sections -----------------------------------------------------------------------


def _section_ids(page: str) -> list[str]:
    return re.findall(r"<details class='stream' id='(stream-[A-Za-z0-9_.:-]+)'>", page)


def test_report_has_a_collapsible_section_per_stream_the_tables_name_capped_at_50(report):
    page = report.read_text(encoding="utf-8")
    ids = _section_ids(page)
    # the bundled sample: 80 streams leaked, errored, degraded or had a guard act; the
    # flagged backend's (openai direct, errors) come first
    assert len(ids) == 50 == len(set(ids))
    assert "<p class='note'>30 more streams left out (at most 50 sections); " in page
    first = page[page.index("<details class='stream'") :]
    assert first.startswith(
        "<details class='stream' id='stream-s18ec9d7ddcb473de9210d7'><summary>"
        "<code>s18ec9d7ddcb473de9210d7</code> · openai (direct) · fake/think-leak · leaked (think_stripper)</summary>"
    )


def test_report_links_every_named_stream_id_to_its_section(report):
    page = report.read_text(encoding="utf-8")
    ids = set(_section_ids(page))
    links = re.findall(r"<td[^>]*><a href='#(stream-[^']*)'>([^<]*)</a>", page)
    assert links and {target for target, _ in links} == ids  # every section is linked
    for target, text in links:
        assert target == f"stream-{text}"
    # the leak table's streams all have a section (leaks come before the rest)
    leaks = page[page.index("<h2 id='leaks'>") : page.index("<h2 id='classifiers'>")]
    cells = re.findall(r"<tr><td[^>]*>(.*?)</td>", leaks)
    assert cells and all(c.startswith("<a href='#stream-") for c in cells)


def test_report_stream_section_shows_moved_text_marked_tool_arguments_as_json_and_parts_apart(
    report,
):
    page = report.read_text(encoding="utf-8")
    start = page.index("<details class='stream' id='stream-s18ec9d7c919ad13206eb17'>")
    section = page[start : page.index("</details>", start)]
    assert (
        "<div class='pair'><pre><mark class='shown' title='shown before its closing tag'>"
        "The user is asking about the café. Keep it</mark>Hello! The café on the corner "
        "opens at 8:00 — their crème brûlée is worth the trip ☕.</pre>"
        "<pre><mark class='moved' title='moved here by a guard'> short.</mark></pre></div>"
    ) in section
    start = page.index("<details class='stream' id='stream-s18ec9d7cdbd19356d71b0a'>")
    section = page[start : page.index("</details>", start)]
    assert "<pre class='json'>{\n  &quot;city&quot;: &quot;Paris&quot;\n}</pre>" in section
    assert "{'city'" not in page
    # every part under its own heading: "(none)" never runs into the next part's title
    assert "<h3>Guard events (1)</h3><div class='scroll'>" in section
    assert re.search(r"<h3>Guard events \(0\)</h3><p class='note'>\(none\)</p><h3>Attempts", page)


def test_report_shows_model_text_as_text_never_markup():
    from lab.model import FunctionCall, GuardEvent
    from lab.report import build_html
    from lab.result import AttemptInfo, StreamResult

    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    r = StreamResult(
        stream_id="s<b>1",
        provider="openrouter",
        model="m<i>",
        text=hostile,
        reasoning="<think>" + hostile,
        serving_provider="Evil<script>",
        guard_events=[GuardEvent(guard="think_stripper", moved=hostile, detail={"rule": "x"})],
        function_calls=[FunctionCall(name="f<b>", args={"q": hostile})],
        attempts=[AttemptInfo(attempt=0, label="default", status=200)],
        finish_reason="stop",
    )
    page = build_html([r])
    body = page[page.index("<body") :]
    assert "<script>alert" not in body and "<img src=x" not in body
    assert "s<b>1" not in body and "f<b>" not in body and "m<i>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    # an id that is not plain never reaches an attribute as is
    assert "id='stream-h" in body and "id='stream-s<b>1'" not in body
    assert "&quot;q&quot;: &quot;&lt;script&gt;" in body  # the arguments as JSON, escaped


def test_report_images_carry_their_natural_size(report):
    page = report.read_text(encoding="utf-8")
    import base64

    imgs = re.findall(
        r"<img [^>]*width='(\d+)' height='(\d+)' src='data:image/png;base64,([^']+)'", page
    )
    assert len(imgs) == 9
    for width, height, data in imgs:
        png = base64.b64decode(data)
        assert struct.unpack(">II", png[16:24]) == (int(width), int(height))


def test_report_in_chromium_keeps_every_plot_at_its_natural_aspect_and_links_resolve(
    report, tmp_path
):
    """Measured by the page's own script in the browser: each image's rendered width/height
    against its natural pixel size (within 2 %), and every in-page link's target."""
    attrs = _body_attrs(_browser_or_skip(), report, tmp_path / "profile", 1280)
    assert attrs["data-stretched"] == "0"
    assert float(attrs["data-aspect-error"]) < 0.02
    assert attrs["data-broken-links"] == "0"
    assert int(attrs["data-links"]) > 50
    assert attrs["data-details"] == "50"
    assert attrs["data-overflow"] == "0"  # measured with every section open
