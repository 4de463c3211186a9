"""Fixtures of the report tests: a small simulated E-Shopper session whose spans carry script
payloads, its analysis and its report; and a headless Chromium (installed by .ci/run, never by a
test: without one the browser tests skip, saying so)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from browser_support import find_chromium  # noqa: E402
from report_support import GENERATIONS, TITLE, Analysed, payload_spans, simulated_session  # noqa: E402

from tracesleuth.model import build_trace_table  # noqa: E402
from tracesleuth.analyses.patterns import LatencyDegradationPatterns  # noqa: E402
from tracesleuth.report.sections.patterns import build_patterns_report  # noqa: E402


@pytest.fixture(scope="session")
def analysed() -> Analysed:
    session = simulated_session()
    spans = payload_spans(session)
    table = build_trace_table(spans)
    est = LatencyDegradationPatterns(random_state=0, generations=GENERATIONS).fit(table)
    report = build_patterns_report(spans, table, est, labels=session.label_map(),
                                   degradations=session.degradations, title=TITLE,
                                   solver_settings={"seed": 0, "generations": GENERATIONS})
    return Analysed(spans, session, table, est, report)


@pytest.fixture(scope="session")
def report_html(analysed) -> str:
    return analysed.report.to_html()


@pytest.fixture(scope="session")
def chromium() -> Path:
    """An installed Chromium; the tests using it skip, with the reason, when there is none."""
    path, how = find_chromium()
    if path is None:
        pytest.skip(how)
    return path
