"""The report in a real browser (headless Chromium): it renders every figure, logs nothing to the
console, and the script payloads in the spans do not run."""

from __future__ import annotations

import html
import re

import pytest
from browser_support import run_headless
from report_support import OPERATION_PAYLOAD, TITLE, figure_specs


@pytest.fixture(scope="module")
def page(analysed, tmp_path_factory):
    return analysed.report.write(tmp_path_factory.mktemp("browser") / "report.html")


def test_report_renders_without_errors_and_payloads_stay_inert(chromium, page, report_html, tmp_path):
    run = run_headless(chromium, page, tmp_path / "profile")
    assert run.returncode == 0 and run.dom, run.stderr[-2000:]
    # No console message at all: no JavaScript error, no CSP violation, no failed load.
    assert run.console_messages() == [], run.console_messages()
    # Every figure was drawn by plotly.js.
    n_figures = len(figure_specs(report_html))
    assert len(re.findall(r'<div[^>]*class="[^"]*\bjs-plotly-plot\b', run.dom)) == n_figures
    assert len(re.findall(r'<svg class="main-svg"', run.dom)) >= 2 * n_figures
    # The pattern table and the Gantt rows show the operation name as text.
    assert html.escape(OPERATION_PAYLOAD) in run.dom
    assert re.search(r"<text[^>]*>[^<]*" + re.escape(html.escape(OPERATION_PAYLOAD)), run.dom)
    # The payloads did not run: the title is the report's, no marker was set, no element was made.
    title = re.search(r"<title>(.*?)</title>", run.dom, re.S).group(1)
    assert title == html.escape(TITLE)
    assert "PWNED" not in title and "data-pwned" not in run.dom
    assert "<img" not in run.dom


def test_screenshot(chromium, page, tmp_path):
    shot = tmp_path / "report.png"
    run = run_headless(chromium, page, tmp_path / "profile", screenshot=shot, window="1280,1600")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.console_messages() == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000     # not a blank page
