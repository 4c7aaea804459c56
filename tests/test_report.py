"""``lab report``: the HTML page holds the tables and plots and opens cleanly in a browser."""

from __future__ import annotations

import os
import re
import shutil
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
    assert page.count("data:image/png;base64,") == 4
    for heading in (
        "By serving backend",
        "Streams",
        "Where reasoning leaked",
        "Error classifiers",
        "Degradation attempts",
    ):
        assert f"<h2>{heading}" in page
    assert "Chutes" in page and "think_stripper" in page


def test_report_never_contains_request_headers(report):
    page = report.read_text(encoding="utf-8").lower()
    assert "authorization" not in page
    assert "bearer" not in page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_report_opens_in_headless_chromium_and_shows_the_plots(report, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (CI installs it; apt-get install chromium)")
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        report.as_uri(),
    ]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:500]
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(1)))
    assert attrs["data-images"] == "4"
    assert attrs["data-images-ok"] == "4"
    assert attrs["data-errors"] == "0"


def test_report_shows_small_costs_with_three_significant_digits(report):
    page = report.read_text(encoding="utf-8")
    costs = re.findall(r"<td>\$(0\.\d+)</td>", page)
    assert costs, "no cost cell in the report"
    # pandas' default would print 0.000041 for 4.05e-05: 3 significant digits are kept
    significant = [c.split(".")[1].lstrip("0") for c in costs if float(c) > 0]
    assert significant and all(len(d) >= 3 for d in significant)


def test_cost_cell_format():
    from lab.report import _cost

    assert [_cost(v) for v in (4.05e-05, 3.6e-06, 0.0123, 0.0, float("nan"))] == [
        "$0.0000405",
        "$0.00000360",
        "$0.0123",
        "$0.0000",
        "",
    ]
