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
    assert page.count("data:image/png;base64,") == 6  # the latency section has two
    for heading in (
        "By serving backend",
        "Streams",
        "Latency by serving backend",
        "Where reasoning leaked",
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
        "(24/42, interval 42.2%–70.9% vs 25.9% for the rest).</li>"
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
    assert attrs["data-images"] == "6"
    assert attrs["data-images-ok"] == "6"
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
    links = re.findall(r"<li><a href='#([a-z]+)'>", page)
    assert links == [
        "scorecard",
        "plots",
        "backends",
        "streams",
        "latency",
        "leaks",
        "classifiers",
        "attempts",
    ]
    for sid in links:
        assert f"<h2 id='{sid}'>" in page
    assert page.count("<div class='scroll'>") == 7


def test_report_latency_section_shows_each_quantile_with_its_bootstrap_interval(report):
    page = report.read_text(encoding="utf-8")
    section = page[page.index("<h2 id='latency'>") : page.index("<h2 id='leaks'>")]
    assert "<th>p50</th><th>p90</th><th>p99</th>" in section
    assert "Time to first token by backend (ECDF)" in section
    assert "Gaps between reads with visible text" in section
    # DeepInfra's TTFT over the bundled captures: the median and its interval in one cell
    assert re.search(
        r"<td>DeepInfra</td><td>ttft_ms</td><td class='num'>8</td>"
        r"<td class='num'>0</td><td>[0-9.]+ \([0-9.]+–[0-9.]+\)</td>",
        section,
    )


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
    # a rate, with its Wilson interval in brackets where the table has one: "33.3 % (6–79 %)"
    rates = [c.split(" (")[0] for c in cells if c.endswith((" %", " %)"))]
    assert "33.3 %" in rates and all(re.fullmatch(r"\d+\.\d %", c) for c in rates)
    assert "33.3 % (6–79 %)" in cells
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
