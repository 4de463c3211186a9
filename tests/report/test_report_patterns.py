"""The latency-degradation-pattern report: its sections, its numbers, and its escaping of trace strings."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from report_support import (
    ATTRIBUTE_KEY_PAYLOAD, ATTRIBUTE_PAYLOAD, GENERATIONS, INSTANCE_PAYLOAD, OPERATION_PAYLOAD, TITLE, figure_specs,
    parse, simulated_session, strings,
)

from tracesleuth.errors import ParameterError
from tracesleuth.analyses.metrics import match_clusters
from tracesleuth.model import build_trace_table
from tracesleuth.analyses.patterns import LatencyDegradationPatterns
from tracesleuth.report import Details, Figure
from tracesleuth.report.sections.patterns import build_patterns_report, resolve_patterns
from tracesleuth.report.figures import request_gantt_figure, request_spans
from tracesleuth.report.sections.patterns import (
    MAX_EXAMPLES, MAX_PATTERNS_SHOWN, PatternsInput, example_requests, example_requests_section, pattern_colors,
    patterns_section, shown_patterns,
)
from tracesleuth.report.sections.patterns import latency_distribution_section

SECTIONS = ["Summary", "Latency distribution", "Latency degradation patterns", "Example requests",
            "Injected degradations and recovered patterns", "About the input"]


def test_sections_and_a_figure_per_plot(analysed, report_html):
    report = analysed.report
    assert [s.title for s in report.sections] == SECTIONS
    n_figures = sum(isinstance(p, Figure) for s in report.sections for p in s.parts)
    res = analysed.estimator.result_
    # latency (histogram, over time), ground truth, and a Gantt chart per pattern plus the baseline request
    assert n_figures == 3 + len(res.sub_intervals) + 1
    # the other examples of each pattern are one click away: at most MAX_EXAMPLES - 1 more each, folded
    folded = [p for s in report.sections for d in s.parts if isinstance(d, Details) for p in d.parts
              if isinstance(p, Figure)]
    assert 0 < len(folded) <= (MAX_EXAMPLES - 1) * len(res.sub_intervals)
    assert len(figure_specs(report_html)) == n_figures + len(folded)
    assert report_html.count("<details>") == sum(isinstance(d, Details) for s in report.sections for d in s.parts)


def test_one_offline_file_without_external_references(analysed, tmp_path):
    path = analysed.report.write(tmp_path / "report.html")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
    page = path.read_text(encoding="utf-8")
    tags = parse(page)
    for tag, attrs in tags.tags:
        for key in ("src", "href", "srcset", "action", "data"):
            value = attrs.get(key) or ""
            assert not re.match(r"\s*(https?:)?//", value, re.I), (tag, key, value)
        assert tag not in ("link", "iframe", "object", "embed")
    plotly_js = [t for a, t in tags.scripts if a.get("type") is None and "Plotly" in t]
    assert len(plotly_js) == 2 and len(plotly_js[0]) > 1_000_000      # plotly.js inline, once


def test_patterns_words_and_scores_are_in_the_report(analysed, report_html):
    res = analysed.estimator.result_
    assert res.found and len(res.sub_intervals) >= 2
    # A1 delays getcart: some pattern speaks of the operation carrying the payload.
    assert any(OPERATION_PAYLOAD in s.words for s in res.sub_intervals)
    for s in res.sub_intervals:
        assert html.escape(s.words) in report_html
        for score in (s.precision, s.recall, s.f_score):
            assert f">{score:.3f}<" in report_html
        assert f">{s.support:,}<" in report_html
    assert html.escape(res.interval.describe()) in report_html
    # the histogram marks each sub-interval's bounds, the interval, and a label per pattern
    latency = figure_specs(report_html)[0]["figure"]
    shapes = latency["layout"]["shapes"]
    ms = {round(x / 1e6, 6) for s in res.sub_intervals for x in (s.low_ns, s.high_ns)}
    assert ms <= {round(s["x0"], 6) for s in shapes} | {round(s["x1"], 6) for s in shapes}
    labels = {a["text"] for a in latency["layout"]["annotations"]}
    assert {f"<b>#{s.index}</b>" for s in res.sub_intervals} <= labels


def test_trace_strings_never_become_markup(analysed, report_html):
    tags = parse(report_html)
    # The scripts are exactly the page's: plotly.js, the bootstrap, the shared templates and one
    # data block per figure.
    code = [a for a, _ in tags.scripts if a.get("type") is None]
    data = [a for a, _ in tags.scripts if a.get("type") == "application/json"]
    assert len(code) == 2 and len(data) == len(tags.scripts) - 2
    assert [a for a in data if a.get("class") == "ts-templates"] == [{"type": "application/json",
                                                                      "class": "ts-templates"}]
    assert all(a.get("class") == "ts-figure" and set(a) == {"type", "class", "data-target"}
               for a in data if a.get("class") != "ts-templates")
    assert not any(t == "img" for t, _ in tags.tags)
    assert not any(k.startswith("on") for _, a in tags.tags for k in a)
    # Outside the JSON data blocks the payloads exist only escaped.
    text = re.sub(r'<script type="application/json"[^>]*>.*?</script>', "", report_html, flags=re.S)
    for payload in (OPERATION_PAYLOAD, ATTRIBUTE_PAYLOAD, INSTANCE_PAYLOAD):
        assert payload not in text
    assert html.escape(OPERATION_PAYLOAD) in text
    # Inside the figures every string is escaped for plotly too (plotly reads tags in its text),
    # and the payloads do show: the operation in Gantt rows, the attribute and instance on hover.
    found = {"operation": False, "attribute": False, "instance": False}
    for spec in figure_specs(report_html):
        for s in strings(spec):
            assert "<script" not in s and "</script" not in s and "<img" not in s
            found["operation"] |= html.escape(OPERATION_PAYLOAD, quote=False) in s
            found["attribute"] |= (html.escape(f"{ATTRIBUTE_KEY_PAYLOAD}={ATTRIBUTE_PAYLOAD}", quote=False) in s)
            found["instance"] |= html.escape(INSTANCE_PAYLOAD, quote=False) in s
    assert all(found.values()), found
    assert f"<title>{html.escape(TITLE)}</title>" in report_html


def test_ground_truth_matches_the_metric(analysed, report_html):
    session, table, est = analysed.session, analysed.table, analysed.estimator
    truth = session.labels_for(table.frame["trace_id"].to_list())
    match = match_clusters(truth, est.labels_, degradations=["A1", "A2"])
    # the planted degradations are recovered (a floor, not the exact value)
    assert match.f_score >= 0.9
    for d in session.degradations:
        assert html.escape(d.describe()) in report_html
        assert f">{match.match_f_scores[d.name]:.3f}<" in report_html
    for value in (match.precision, match.recall, match.f_score):
        assert f"<td>{value:.3f}</td>" in report_html


def test_example_requests_are_representative(analysed):
    patterns = resolve_patterns(analysed.estimator, analysed.table)
    examples = example_requests(analysed.table, patterns)
    res = patterns.result
    assert [e.label for e in examples] == [-1] + [s.index for s in res.sub_intervals]
    latency = dict(zip(analysed.table.frame["trace_id"], analysed.table.frame["latency_ns"]))
    assert examples[0].latency_ns < res.interval.low_ns
    for e in examples[1:]:
        s = res.sub_intervals[e.label]
        assert latency[e.trace_id] == e.latency_ns
        assert patterns.labels[analysed.table.frame["trace_id"].to_list().index(e.trace_id)] == e.label
        assert s.low_ns <= e.latency_ns < s.high_ns


def test_gantt_of_one_request(analysed):
    trace_id, span_id, latency = analysed.table.frame.row(0, named=True)["trace_id"], \
        analysed.table.frame.row(0, named=True)["span_id"], analysed.table.frame.row(0, named=True)["latency_ns"]
    req = request_spans(analysed.spans, trace_id, span_id)
    assert req.height == 25 and req["depth"][0] == 0 and req["offset_ns"][0] == 0
    assert req["duration_ns"][0] == latency
    assert (req["offset_ns"] >= 0).all()
    # the two asynchronous calls: client and server span each
    asyn = req.filter(req["asynchronous"])["operation"].to_list()
    assert sorted(asyn) == ["findfeaturesitems", "findfeaturesitems", "finditems", "finditems"]
    fig = request_gantt_figure(req, title="<b>x</b>", max_spans=10)
    bars = [t for t in fig.data if t.legendgroup != "kinds"]
    assert sum(len(t.y) for t in bars) == 10
    assert "first 10 of 25 spans" in fig.layout.title.text and "&lt;b&gt;x" in fig.layout.title.text
    hatched = [t for t in bars if t.marker.pattern.shape == "/"]
    assert hatched and all(t.marker.color.startswith("rgba(") for t in hatched)      # pale, striped
    # The legend: each service once, and the synchronous / asynchronous swatches once, distinct.
    legend = [t for t in fig.data if t.showlegend is not False]
    names = [t.name for t in legend]
    assert len(names) == len(set(names)) and {"synchronous", "asynchronous"} <= set(names)
    sync, asyn = (next(t for t in legend if t.name == n) for n in ("synchronous", "asynchronous"))
    assert asyn.marker.pattern.shape == "/" and not sync.marker.pattern.shape
    with pytest.raises(KeyError):
        request_spans(analysed.spans, "0" * 32)


def test_result_alone_groups_by_latency(analysed):
    report = build_patterns_report(analysed.spans, analysed.table, analysed.estimator.result_)
    page = report.to_html()
    assert "grouped by the sub-interval their latency falls in" in page
    assert [s.title for s in report.sections] == [s for s in SECTIONS if not s.startswith("Injected")]


def test_clustering_solver_and_nothing_found():
    session = simulated_session(200)
    table = build_trace_table(session.spans)
    from tracesleuth.analyses.patterns.baselines import DegradedClusters

    est = DegradedClusters(method="kmeans", random_state=0).fit(table)
    page = build_patterns_report(session.spans, table, est, labels=session.label_map()).to_html()
    assert "cluster 0" in page and "Injected degradations" in page
    flat = LatencyDegradationPatterns(interval=(0, 10**12), random_state=0).fit(table)
    assert not flat.result_.found
    page = build_patterns_report(session.spans, table, flat).to_html()
    assert "No degradation found" in page and "Example requests" not in page


def test_rejects_a_mismatched_or_unfitted_estimator(analysed):
    with pytest.raises(ParameterError, match="fitted"):
        build_patterns_report(analysed.spans, analysed.table, LatencyDegradationPatterns())
    other = build_trace_table(simulated_session(50).spans)
    with pytest.raises(ParameterError, match="50 requests"):
        build_patterns_report(analysed.spans, other, analysed.estimator)


def test_about_the_input(analysed, report_html):
    a = analysed.table.assembly
    section = report_html[report_html.index('id="input"'):]
    assert f"<td>{a.traces:,}</td>" in section and f"<td>{a.spans:,}</td>" in section
    for label in ("exact duplicate spans removed", "orphan spans", "clock-skew corrections"):
        assert label in section
    assert "not recorded (spans given as a table)" in section


def test_rejected_records_are_listed_escaped(tmp_path):
    from tracesleuth.io import read_spans

    f = tmp_path / "spans.csv"
    f.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
                 "a1,01,,web,home,100,300\n"
                 "a1,02,01,db,q,150,200\n"
                 "a2,01,,web,home,100,900\n"
                 "a2,02,01,db,q,150,800\n"
                 "a3,01,,web,home,100,250\n"
                 "a3,02,01,db,<script>x</script>,150,120\n")     # negative duration
    result = read_spans([str(f)])
    assert result.spans_rejected == 1
    table = build_trace_table(result)
    est = LatencyDegradationPatterns(random_state=0, generations=10).fit(table)
    page = build_patterns_report(result, table, est).to_html()
    section = page[page.index('id="input"'):]
    assert "negative duration" in section and "<script>x" not in page
    assert "csv (1 file)" in section


def test_reports_are_reproducible(analysed):
    again = build_patterns_report(analysed.spans, analysed.table, analysed.estimator,
                                  labels=analysed.session.label_map(), degradations=analysed.session.degradations,
                                  title=TITLE, solver_settings={"seed": 0, "generations": GENERATIONS})
    assert again.to_html() == analysed.report.to_html()
    assert np.array_equal(resolve_patterns(analysed.estimator, analysed.table).labels, analysed.estimator.labels_)


def test_every_example_gantt_highlights_what_its_pattern_names_on_one_time_scale(analysed):
    from tracesleuth.report.sections.patterns import example_requests_section
    from tracesleuth.report.figures import operation_keys_named

    patterns = resolve_patterns(analysed.estimator, analysed.table)
    section = example_requests_section(analysed.spans, analysed.table, patterns)
    gantts = [p.figure for p in section.parts if isinstance(p, Figure)]
    res = patterns.result
    assert len(gantts) == 1 + len(res.sub_intervals)
    assert len({tuple(g.layout.xaxis.range) for g in gantts}) == 1          # one x scale
    longest = max(e.latency_ns for e in example_requests(analysed.table, patterns))
    assert gantts[0].layout.xaxis.range[1] >= longest / 1e6
    for s, fig in zip(res.sub_intervals, gantts[1:]):
        named = operation_keys_named(s.pattern.attributes, analysed.table.endpoint)
        assert named
        outlined = [t for t in fig.data if t.legendgroup != "kinds" and t.marker.line.width == 3]
        assert outlined and "named by the pattern" in [t.name for t in fig.data]
        bold = [t for t in fig.layout.yaxis.ticktext if t.startswith("<b>")]
        assert {t[3:-4] for t in bold} <= {html.escape(k, quote=False) for k in named} and bold
    assert not any(t.marker.line.width == 3 for t in gantts[0].data if t.legendgroup != "kinds")


# --------------------------------------------------------------------------------------------
# Readable with many patterns (a real day gave ten patterns over one sub-interval)
# --------------------------------------------------------------------------------------------


def _many_patterns(analysed, n_extra: int = 8) -> PatternsInput:
    """The fitted result with ``n_extra`` more patterns sharing sub-interval 0's range (as split
    causes give), decreasing F-scores, their requests taken from sub-interval 0's, and a split
    point that no sub-interval ends at."""
    from dataclasses import replace

    res = analysed.estimator.result_
    first = res.sub_intervals[0]
    subs = list(res.sub_intervals)
    for k in range(n_extra):
        subs.append(replace(first, index=len(subs), f_score=0.3 - 0.02 * k))
    labels = analysed.estimator.labels_.copy()
    own = np.flatnonzero(labels == first.index)
    for j, row in enumerate(own[1::2]):  # every other request of #0 goes to one of the extra patterns
        labels[row] = len(res.sub_intervals) + j % n_extra
    points = sorted({*res.split_points, (first.low_ns + first.high_ns) // 2})
    return PatternsInput(replace(res, sub_intervals=tuple(subs), split_points=tuple(points)), labels, "estimator")


def _dashed(shapes):
    return [s for s in shapes if s["type"] == "line" and s.get("line", {}).get("dash") == "dash"]


def test_split_lines_only_where_sub_intervals_meet(analysed):
    patterns = _many_patterns(analysed)
    res = patterns.result
    meets = {s.high_ns for s in res.sub_intervals} & {s.low_ns for s in res.sub_intervals}
    assert len(res.split_points) - 2 > len(meets)  # a split point inside a sub-interval: no line for it
    section = latency_distribution_section(analysed.table, patterns)
    fig = section.parts[1].figure.to_dict()
    lines = _dashed(fig["layout"]["shapes"])
    assert len(lines) == len(meets)
    assert sorted(round(s["x0"] * 1e6) for s in lines) == sorted(meets)


@pytest.mark.parametrize("n_extra", [8, 60])
def test_one_distinct_colour_per_pattern(analysed, n_extra):
    colors = pattern_colors(_many_patterns(analysed, n_extra).result)
    assert len(colors) == len(analysed.estimator.result_.sub_intervals) + n_extra
    assert len(set(colors.values())) == len(colors)


def test_bands_do_not_stack_and_lanes_do_not_overlap(analysed):
    patterns = _many_patterns(analysed)
    res = patterns.result
    fig = latency_distribution_section(analysed.table, patterns).parts[1].figure.to_dict()
    top = fig["layout"]["yaxis"]["domain"][1]
    rects = [s for s in fig["layout"]["shapes"] if s["type"] == "rect" and s.get("fillcolor") != "rgba(0,0,0,0)"]
    inside = [s for s in rects if s["y1"] <= top + 1e-9]
    lanes = [s for s in rects if s["y0"] >= top - 1e-9]
    # in the plot: each sub-interval shaded once, however many patterns share it
    assert len(inside) == len({(s.low_ns, s.high_ns) for s in res.sub_intervals})
    for a in range(len(inside)):
        for b in range(a + 1, len(inside)):
            assert inside[a]["x1"] <= inside[b]["x0"] or inside[b]["x1"] <= inside[a]["x0"]
    # above it: one lane per shown pattern and one counting the rest, never on top of one another
    groups = shown_patterns(res)
    assert len(lanes) == sum(len(shown) + bool(hidden) for _, shown, hidden in groups)
    for a in range(len(lanes)):
        for b in range(a + 1, len(lanes)):
            apart_x = lanes[a]["x1"] <= lanes[b]["x0"] or lanes[b]["x1"] <= lanes[a]["x0"]
            apart_y = lanes[a]["y1"] <= lanes[b]["y0"] or lanes[b]["y1"] <= lanes[a]["y0"]
            assert apart_x or apart_y
    labels = [a["text"] for a in fig["layout"]["annotations"]]
    hidden = [s for _, _, h in groups for s in h]
    assert f"+{len(hidden)} more" in labels
    assert not any(f"<b>#{s.index}</b>" in labels for s in hidden)


def test_at_most_three_patterns_per_sub_interval_and_three_examples_each(analysed):
    patterns = _many_patterns(analysed)
    res = patterns.result
    groups = shown_patterns(res)
    assert all(len(shown) <= MAX_PATTERNS_SHOWN for _, shown, _ in groups)
    assert sum(len(hidden) for _, _, hidden in groups) == len(res.sub_intervals) - sum(len(s) for _, s, _ in groups)
    # the best patterns are shown
    for _, shown, hidden in groups:
        assert all(s.f_score >= h.f_score for s in shown for h in hidden)
    section = example_requests_section(analysed.spans, analysed.table, patterns)
    visible = [p for p in section.parts if isinstance(p, Figure)]
    folded = [d for d in section.parts if isinstance(d, Details)]
    n_shown = sum(len(shown) for _, shown, _ in groups)
    assert len(visible) == 1 + n_shown  # the baseline and one Gantt chart per shown pattern
    assert all(sum(isinstance(p, Figure) for p in d.parts) <= MAX_EXAMPLES - 1 for d in folded)
    page = "".join(p.render(_context()) for p in section.parts)
    assert "more pattern(s) of" in page and "not drawn" in page
    # the patterns table: the shown rows, the rest folded and counted
    table_section = patterns_section(patterns)
    from tracesleuth.report import Table

    main = next(p for p in table_section.parts if isinstance(p, Table))
    assert len(main.rows) == n_shown
    rest = [d for d in table_section.parts if isinstance(d, Details)]
    assert sum(len(d.parts[0].rows) for d in rest) == len(res.sub_intervals) - n_shown


def _context():
    from tracesleuth.report import RenderContext

    return RenderContext()


def test_lanes_never_overlap_even_for_overlapping_clusters():
    from tracesleuth.report.sections.patterns import _lanes

    # two patterns over [0, 10), a cluster over [5, 15) overlapping them, a band over [20, 30)
    assert _lanes([(0, 10, 2), (5, 15, 1), (20, 30, 1)]) == [[0, 1], [2], [0]]
    assert _lanes([]) == []
