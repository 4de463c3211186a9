"""Report sections of the latency-degradation-pattern analysis (Cortellessa & Traini, ICPE 2020).

:func:`build_patterns_report` assembles a :class:`~tracesleuth.report.document.Report` from a
fitted :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` (or its result) and the spans
and trace table it was fitted on. Each section is also available on its own, to combine with
the sections of other analyses:

* :func:`summary_section` - what was analysed and found;
* :func:`latency_distribution_section` - the latency distribution with the degraded interval,
  split points and sub-intervals;
* :func:`patterns_section` - each pattern in words with precision, recall, F-score, support;
* :func:`example_requests_section` - a request of each pattern as a Gantt chart, up to two more
  one click away;
* :func:`ground_truth_section` - injected degradations beside the recovered patterns, scored
  by :func:`~tracesleuth.analyses.metrics.match_clusters`;
* :func:`~tracesleuth.report.input.input_section` - the input: traces, spans, rejects, repairs.

Nothing here re-runs the analysis: sections are drawn from ``result_`` and ``labels_``.

Readable however many patterns there are (a real day, TrainTicket 2023-01-29 ``trips/left``, gave
ten patterns over one sub-interval): each pattern has its own colour (:func:`pattern_colors`, no
repeats) and its own lane above the latency histogram (:func:`mark_patterns`; a sub-interval is
shaded once, so bands never stack into an opaque block); a dashed line marks only where two
sub-intervals meet; at most :data:`MAX_PATTERNS_SHOWN` patterns of a sub-interval are shown, the
best first, the rest counted and listed in a folded table (:func:`shown_patterns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from ...units import format_duration_ns
from ...analyses.patterns.analysis import DegradationPatternsResult
from ...analyses.patterns.results import MAX_PATTERNS_SHOWN as RESULT_MAX_PATTERNS_SHOWN
from ..document import (
    Bullets, Code, Details, Figure, KeyValues, Report, Section, Strong, Swatch, Table, Text, plot_text,
)
from ..figures import (
    SERVICE_COLORS,
    SUB_INTERVAL_COLORS,
    gantt_x_range_ms,
    latency_by_group_figure,
    latency_distribution_figure,
    latency_over_time_figure,
    operation_keys_named,
    request_gantt_figure,
    request_spans,
)
from ..input import input_section
from ...analyses._contract import ReportContext

__all__ = [
    "ExampleRequest", "PatternsInput", "build_patterns_report", "example_requests", "example_requests_section",
    "ground_truth_section", "latency_distribution_section", "mark_patterns", "pattern_colors", "patterns_section",
    "resolve_patterns", "shown_patterns", "summary_section", "unexplained_ranges",
]

#: Colour of requests outside the degraded interval / not affected.
BASELINE_COLOR = "#7f7f7f"
_TRUTH_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
NOT_AFFECTED = "not affected"
#: Patterns shown per sub-interval at most, the best first: more side by side is unreadable (a real
#: day gave ten patterns of one sub-interval); the rest are counted and listed one click away.
MAX_PATTERNS_SHOWN = RESULT_MAX_PATTERNS_SHOWN
#: Example requests (Gantt charts) per pattern at most: the first shown, the others one click away.
MAX_EXAMPLES = 3
#: Height of one pattern's lane above a latency histogram, px.
LANE_PX = 18


@dataclass(frozen=True)
class PatternsInput:
    """A pattern analysis' result with the cluster label of every trace-table row.

    Attributes
    ----------
    result : DegradationPatternsResult
    labels : ndarray of shape (n_requests,)
        Sub-interval index of each request of the table (the estimator's ``labels_``), -1 for none.
    labels_from : {"estimator", "latency"}
        ``"latency"`` when only a result was given: each request then takes the sub-interval its
        latency falls in (the result does not record which requests satisfy which pattern).
    """

    result: DegradationPatternsResult
    labels: np.ndarray
    labels_from: str


def resolve_patterns(estimator_or_result, table) -> PatternsInput:
    """The result and per-request labels of a fitted estimator or of a bare result.

    Parameters
    ----------
    estimator_or_result : LatencyDegradationPatterns or DegradationPatternsResult
        A fitted estimator (``result_`` and ``labels_``) or its result.
    table : TraceTable
        The table the analysis was fitted on.

    Raises
    ------
    ParameterError
        When the argument is neither, the estimator is not fitted, or its labels do not match the
        table's rows.
    """
    n = table.n_requests
    if isinstance(estimator_or_result, DegradationPatternsResult):
        result = estimator_or_result
        latency = table.frame["latency_ns"].cast(pl.Float64).to_numpy()
        labels = np.full(n, -1, dtype=np.int64)
        for s in result.sub_intervals:
            labels[(latency >= s.low_ns) & (latency < s.high_ns)] = s.index
        return PatternsInput(result, labels, "latency")
    result = getattr(estimator_or_result, "result_", None)
    labels = getattr(estimator_or_result, "labels_", None)
    if not isinstance(result, DegradationPatternsResult) or labels is None:
        raise ParameterError(
            "The 'estimator_or_result' parameter of build_patterns_report must be a fitted "
            f"LatencyDegradationPatterns or a DegradationPatternsResult. Got {type(estimator_or_result).__name__} "
            "instead (an estimator must be fitted first).")
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (n,):
        raise ParameterError(
            f"The estimator's labels_ have shape {labels.shape} but the trace table has {n} requests: "
            "pass the table the estimator was fitted on.")
    return PatternsInput(result, labels, "estimator")


def pattern_colors(result) -> dict[int, str]:
    """One distinct colour per sub-interval pattern, however many there are (no colour repeats).

    The first eight are the report's sub-interval colours, then plotly's Dark24 and Alphabet
    palettes, then hues spread by the golden angle.
    """
    import colorsys

    import plotly.colors

    palette: list[str] = []
    for c in (*SUB_INTERVAL_COLORS, *plotly.colors.qualitative.Dark24, *plotly.colors.qualitative.Alphabet):
        if c.lower() not in palette:
            palette.append(c.lower())
    n = len(result.sub_intervals)
    k = 0
    while len(palette) < n:
        r, g, b = colorsys.hls_to_rgb((k * 0.618034) % 1.0, 0.35 + 0.15 * (k % 3), 0.75)
        c = f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
        if c not in palette:
            palette.append(c)
        k += 1
    return {s.index: palette[i] for i, s in enumerate(result.sub_intervals)}


def _with_alpha(color: str, alpha: float) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def shown_patterns(result, most: int = MAX_PATTERNS_SHOWN) -> list[tuple[tuple[int, int], list, list]]:
    """The sub-intervals' patterns grouped by latency range: ``((low_ns, high_ns), shown, hidden)``.

    As :meth:`~tracesleuth.analyses.patterns.results.DegradationPatternsResult.shown_by_range`: a pattern below the result's
    ``min_f`` is not an explanation and is hidden (a range may then show none: no pattern
    explains it, :func:`unexplained_ranges`); of the others at most ``most`` (and the result's
    ``max_patterns_shown``), best F first, the rest hidden (counted). Ranges in latency order.
    """
    by_index = {s.index: s for s in result.sub_intervals}
    out = []
    for r in result.shown_by_range():
        shown = [by_index[i] for i in r.shown]
        hidden = shown[most:] + [by_index[i] for i in r.beyond_most + r.below_floor]
        out.append(((r.low_ns, r.high_ns), shown[:most], hidden))
    return out


def unexplained_ranges(result) -> list:
    """The result's :class:`~tracesleuth.analyses.patterns.notes.Unexplained` notes (ranges no pattern explains), in latency order."""
    return sorted(result.notes_of("unexplained"), key=lambda n: n.low_ns)


def _range_words(low: int, high: int) -> str:
    return f"[{format_duration_ns(low)}, {format_duration_ns(high)})"


def _cause_words(e) -> str:
    """A condition and its effect; one that adds no time is marked as context, not a cause."""
    return e.describe() if e.adds_time else f"context, adds no time: {e.describe()}"


def _boundaries(result) -> list[int]:
    """Latencies where two sub-intervals meet (the split points the partition kept), ns."""
    return sorted({s.high_ns for s in result.sub_intervals} & {s.low_ns for s in result.sub_intervals})


def _best_f(subs) -> str:
    scores = [s.f_score for s in subs if s.f_score is not None]
    return f"{max(scores):.2f}" if scores else "none"


def _f_range(subs) -> str:
    scores = [s.f_score for s in subs if s.f_score is not None]
    if not scores:
        return ""
    lo, hi = min(scores), max(scores)
    return f" (F-score {lo:.2f})" if lo == hi else f" (F-score {lo:.2f} to {hi:.2f})"


def mark_patterns(fig, result, colors: Mapping[int, str] | None = None) -> None:
    """Draw a result's interval, sub-intervals, split points and patterns on a latency-histogram figure.

    Readable with many patterns: the degraded interval is outlined; each sub-interval (latency
    range) is shaded once, lightly, in its pattern's colour (grey when several patterns share it);
    a dashed line marks each latency where two sub-intervals meet, and no other split point; above
    the plot each pattern has a lane of its own, a band over its latency range in its colour
    labelled ``#k``, at most :data:`MAX_PATTERNS_SHOWN` per sub-interval and a grey lane counting
    the rest. Nothing is drawn without an interval.
    """
    import plotly.graph_objects as go

    if result is None or getattr(result, "interval", None) is None:
        return
    colors = dict(colors or pattern_colors(result))
    iv = result.interval
    ms = 1e6
    groups = shown_patterns(result)
    placed = _lanes([(low, high, max(len(shown) + bool(hidden), 1)) for (low, high), shown, hidden in groups])
    n_lanes = max((k + 1 for lanes in placed for k in lanes), default=0)
    layout = fig.layout
    height = layout.height or 420
    top_px = layout.margin.t if layout.margin.t is not None else 60
    bottom_px = layout.margin.b if layout.margin.b is not None else 50
    area = height - top_px - bottom_px
    strip = n_lanes * LANE_PX
    domain_top = area / (area + strip) if strip else 1.0
    fig.update_layout(height=height + strip, yaxis=dict(domain=[0, domain_top]))
    lane = (1.0 - domain_top) / max(n_lanes, 1)

    fig.add_shape(type="rect", xref="x", yref="paper", x0=iv.low_ns / ms, x1=iv.high_ns / ms, y0=0, y1=domain_top,
                  fillcolor="rgba(0,0,0,0)", line=dict(color="#444", width=1.5), layer="above")
    fig.add_annotation(x=(iv.low_ns + iv.high_ns) / 2 / ms, y=1.0, yref="paper", yanchor="bottom",
                       text=f"degraded interval {plot_text(iv.describe())}", showarrow=False,
                       font=dict(size=12, color="#444"))
    for ((low, high), shown, hidden), lanes in zip(groups, placed):
        single = len(shown) == 1 and not hidden
        fill = _with_alpha(colors[shown[0].index], 0.10) if single else "rgba(120,120,120,0.07)"
        if not shown:  # no pattern explains it: hatched, not shaded as an explanation
            fill = "rgba(120,120,120,0.04)"
        fig.add_shape(type="rect", xref="x", yref="paper", x0=low / ms, x1=high / ms, y0=0, y1=domain_top,
                      fillcolor=fill, line_width=0, layer="below")
        items = [(f"<b>#{s.index}</b>", colors[s.index]) for s in shown]
        if not shown:
            items.append(("no pattern explains it", "#8c8c8c"))
        elif hidden:
            items.append((f"+{len(hidden)} more", "#8c8c8c"))
        for k, (text, color) in zip(lanes, items):
            y0 = domain_top + k * lane
            fig.add_shape(type="rect", xref="x", yref="paper", x0=low / ms, x1=high / ms, y0=y0 + 0.1 * lane,
                          y1=y0 + 0.9 * lane, fillcolor=_with_alpha(color, 0.30), line=dict(color=color, width=1))
            fig.add_annotation(x=low / ms, xanchor="left", y=y0 + 0.5 * lane, yref="paper", text=text,
                               showarrow=False, font=dict(size=11, color="#222"))
    meets = _boundaries(result)
    for p in meets:
        fig.add_shape(type="line", xref="x", yref="paper", x0=p / ms, x1=p / ms, y0=0, y1=1,
                      line=dict(color="#555", width=1, dash="dash"))
    if meets:  # a legend entry for the dashed lines
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="split point",
                                 line=dict(color="#555", width=1, dash="dash")))


def _lanes(ranges: list[tuple[int, int, int]]) -> list[list[int]]:
    """Lanes of ``(low, high, n)`` items: each of the ``n`` bands over ``[low, high)`` gets the lowest lane
    no earlier band overlapping it holds (sub-intervals are disjoint, clusters of the clustering
    solvers may overlap)."""
    taken: list[list[tuple[int, int]]] = []
    out = []
    for low, high, n in ranges:
        mine = []
        for _ in range(n):
            k = next((k for k, spans in enumerate(taken) if k not in mine
                      and all(high <= a or b <= low for a, b in spans)), len(taken))
            if k == len(taken):
                taken.append([])
            taken[k].append((low, high))
            mine.append(k)
        out.append(mine)
    return out


def _mark_over_time(fig, result, colors: Mapping[int, str]) -> None:
    """Outline each sub-interval once on the latency-over-time heatmap, labelled with its shown patterns."""
    if result is None or getattr(result, "interval", None) is None:
        return
    ms = 1e6
    y_range = fig.layout.yaxis.range
    for (low, high), shown, hidden in shown_patterns(result):
        single = len(shown) == 1 and not hidden
        color = colors[shown[0].index] if single else "#555555"
        fig.add_hrect(y0=low / ms, y1=high / ms, fillcolor="rgba(0,0,0,0)", layer="above",
                      line=dict(color=color, width=1.5, dash="dot"))
        top = high / ms if y_range is None else min(high / ms, y_range[1])
        text = (" ".join(f"<b>#{s.index}</b>" for s in shown) + (f" +{len(hidden)} more" if hidden else "")
                if shown else "no pattern explains it")
        fig.add_annotation(x=0, xref="paper", xanchor="left", y=top, yanchor="top", text=text, showarrow=False,
                           font=dict(size=12, color=color))


def _pattern_label(s, colors: Mapping[int, str]) -> list:
    """Swatch, index and latency range of a sub-interval, for table cells."""
    return [Swatch(colors[s.index], f"#{s.index} "), s.latency_words]


# ============================================================================================
# Sections
# ============================================================================================


def summary_section(table, patterns: PatternsInput, *, solver_settings: Mapping[str, Any] | None = None) -> Section:
    """What was analysed (endpoint, requests) and what was found (interval, patterns, score).

    Parameters
    ----------
    table : TraceTable
    patterns : PatternsInput
    solver_settings : mapping, optional
        Settings worth showing (seed, generations...), shown as given.
    """
    res = patterns.result
    lat = table.frame["latency_ns"].drop_nulls()
    items: list[tuple[str, Any]] = [
        ("endpoint", Code(table.endpoint)),
        ("requests", table.n_requests),
        ("latency p50 / p95 / max", " / ".join(format_duration_ns(v) for v in
                                              (lat.quantile(0.5), lat.quantile(0.95), lat.max()))
         if lat.len() else None),
        ("solver", res.solver),
    ]
    for k, v in (solver_settings or {}).items():
        items.append((str(k), v if isinstance(v, (int, float, str)) or v is None else str(v)))
    section = Section("Summary", key="summary")
    if not res.found:
        section.add(KeyValues(items), Text([Strong("No degradation found: "), str(res.reason)]))
        return section
    items += [
        (f"degraded interval ({res.interval_source})", res.interval.describe()),
        *([("why this interval", res.interval_reason)] if res.interval_source == "automatic" and res.interval_reason
          else []),
        ("requests in the interval", f"{res.n_positives:,} of {res.n_requests:,} "
                                     f"({100 * res.n_positives / max(res.n_requests, 1):.1f}%)"),
        ("sub-intervals", len({(s.low_ns, s.high_ns) for s in res.sub_intervals})),
        ("patterns shown (of all found)", f"{sum(len(r.shown) for r in res.shown_by_range())} of "
                                          f"{len(res.sub_intervals)}"),
        ("score (objective of the partition)", res.score),
    ]
    section.add(KeyValues(items))
    colors = pattern_colors(res)
    lines = []
    for (low, high), shown, hidden in shown_patterns(res):
        for s in shown:
            score = "" if s.f_score is None else f" (F-score {s.f_score:.3f})"
            lines.append([Swatch(colors[s.index], f"#{s.index} {s.latency_words}: "), s.words, score])
        if not shown:
            lines.append([Strong(f"{_range_words(low, high)}: no pattern explains it"),
                          f"; best F {_best_f(hidden)} (below {res.min_f:g}): its requests mix causes"])
        if hidden:
            lines.append([f"{len(hidden)} more pattern(s) of {_range_words(low, high)}{_f_range(hidden)}, "
                          "listed under the patterns table"])
    section.add(Bullets(lines))
    if patterns.labels_from == "latency":
        section.add(Text("Only the result was given, not the fitted estimator: requests are grouped by the "
                         "sub-interval their latency falls in, not by the pattern they satisfy.", muted=True))
    return section


def latency_distribution_section(table, patterns: PatternsInput) -> Section:
    """The latency distribution (histogram and KDE) with the interval, split points and sub-intervals."""
    res = patterns.result
    colors = pattern_colors(res)
    fig = latency_distribution_figure(table.frame["latency_ns"], None)
    mark_patterns(fig, res, colors)
    section = Section("Latency distribution", key="latency")
    text = ("Request latencies of the endpoint: a histogram and a Gaussian kernel density estimate. ")
    if res.interval is not None:
        text += ("The outlined band is the degraded latency interval, each shaded band a sub-interval of the "
                 "optimal partition and the dashed lines where two sub-intervals meet; above the plot each "
                 f"pattern #k has a lane of its own over its sub-interval (at most {MAX_PATTERNS_SHOWN} per "
                 "sub-interval, the rest counted).")
    section.add(Text(text), Figure(fig, caption="Use the linear/log buttons to see a small degraded tail."))
    if "start_ns" in table.frame.columns:
        over_time = latency_over_time_figure(table.frame["start_ns"], table.frame["latency_ns"], None)
        _mark_over_time(over_time, res, colors)
        section.add(Figure(over_time,
                           caption="Latency over time: requests per time and latency bin, with the degraded "
                                   "interval and its sub-intervals across. A degradation that started at some time, "
                                   "or comes and goes, shows here."))
    return section


def patterns_section(patterns: PatternsInput) -> Section:
    """One row per sub-interval: its pattern in words, precision, recall, F-score and support.

    For the clustering solvers a row is a cluster (no pattern, no score).
    """
    res = patterns.result
    section = Section("Latency degradation patterns", key="patterns")
    if not res.found:
        section.add(Text(f"No pattern: {res.reason}"))
        return section
    colors = pattern_colors(res)
    columns = ["sub-interval", "pattern", "conditions", "precision", "recall", "F-score", "support",
               "true positives", "requests in sub-interval"]

    def row(s) -> list:
        n_cond = None if s.pattern is None else len(s.pattern)
        return [_pattern_label(s, colors), s.words, n_cond, s.precision, s.recall, s.f_score, s.support, s.tp,
                s.n_positives]

    groups = shown_patterns(res)
    section.add(
        Text("Each sub-interval of the degraded interval with the pattern (a conjunction of conditions on "
             "exclusive times, instances and request attributes) of highest F-score: precision is the share "
             "of requests satisfying the pattern whose latency lies in the sub-interval, recall the share of "
             "the sub-interval's requests satisfying it, support the requests satisfying it. Where several "
             f"patterns share a sub-interval, the {MAX_PATTERNS_SHOWN} best are shown and the rest counted. A pattern "
             f"of F-score below {res.min_f:g} explains too little to be offered as an explanation: it is folded "
             "away, and a sub-interval none of whose patterns reaches it says so."),
    )
    rows = [row(s) for _, shown, _ in groups for s in shown]
    if rows:  # none when no pattern explains any sub-interval: the unexplained notes say so
        section.add(Table(columns, rows))
    unexplained = unexplained_ranges(res)
    if unexplained:
        section.add(Bullets([[Strong("No pattern explains it: "), n.describe()] for n in unexplained]))
    for (low, high), shown, hidden in groups:
        if hidden:
            section.add(Details(f"{len(hidden)} more pattern(s) of {_range_words(low, high)}{_f_range(hidden)}"
                                + ("" if shown else ": none explains it"),
                                [Table(columns, [row(s) for s in hidden])]))
    effects = [[_pattern_label(s, colors), "; ".join(_cause_words(e) for e in s.effects),
                "; ".join(e.describe() for e in s.context) or None]
               for _, shown, _ in groups for s in shown if s.effects]
    if effects:
        section.add(
            Text("What each condition means in time: the median exclusive time of its operation in the requests "
                 "satisfying the pattern against the other requests (the time it adds), or the share of a "
                 "category; and what else sets the pattern's requests apart (operations slower by at least 1 ms "
                 "and a tenth of the latency difference, categories at least 50 points more frequent)."),
            Table(["sub-interval", "conditions and their effect", "its requests also"], effects),
        )
    section.add(Text(f"The analysis could build conditions on {len(res.attributes)} column(s) of the trace table "
                     "(exclusive times, instances, request attributes).", muted=True))
    if res.skipped_attributes:
        section.add(Text("Attributes left out of the conditions:", muted=True),
                    Bullets([[Code(a), f": {r}"] for a, r in res.skipped_attributes]))
    notes = [n for n in res.notes if n.kind != "unexplained"]
    if notes:
        section.add(Bullets([f"Note: {n}" for n in notes]))
    return section


@dataclass(frozen=True)
class ExampleRequest:
    """A request chosen to illustrate a pattern (or the requests outside the degraded interval).

    Attributes
    ----------
    label : int
        The sub-interval index, or -1 for the baseline (a typical request below the interval).
    trace_id, span_id : str
        The request's trace and entry span.
    latency_ns : int
    members : int
        Requests with this label.
    """

    label: int
    trace_id: str
    span_id: str
    latency_ns: int
    members: int


def example_requests(table, patterns: PatternsInput, *, baseline: bool = True,
                     per_label: int = 1) -> list[ExampleRequest]:
    """Representative requests of each pattern, and one of the requests below the interval.

    The representative of label ``k`` is, among the requests with that label (preferring those
    inside sub-interval ``k`` and with a complete trace), the one whose latency is closest to their
    median; ties go to the earliest. With ``per_label`` > 1, the next are those closest to the
    lower and upper quartile, then the 10th and 90th percentile (distinct requests; fewer when the
    label has fewer). The baseline (one request) is chosen the same way among requests below the
    degraded interval with no label. Examples of one label are consecutive, the representative first.
    """
    quantiles = (0.5, 0.25, 0.75, 0.1, 0.9)[:max(1, min(int(per_label), 5))]
    res = patterns.result
    frame = table.frame
    latency = frame["latency_ns"].cast(pl.Float64).to_numpy()
    complete = ~frame["incomplete"].fill_null(False).to_numpy() if "incomplete" in frame.columns \
        else np.ones(frame.height, dtype=bool)
    ids, spans = frame["trace_id"].to_list(), frame["span_id"].to_list()

    def pick(members: np.ndarray, preferred: np.ndarray, label: int, qs=(0.5,)) -> list[ExampleRequest]:
        for pool in (members & preferred & complete, members & preferred, members):
            rows = np.flatnonzero(pool & np.isfinite(latency))
            if rows.size:
                chosen: list[int] = []
                for q in qs:
                    left = np.setdiff1d(rows, chosen, assume_unique=True)
                    if left.size == 0:
                        break
                    target = np.quantile(latency[rows], q)
                    chosen.append(int(left[np.argmin(np.abs(latency[left] - target))]))
                n = int(members.sum())
                return [ExampleRequest(label, ids[r], spans[r], int(latency[r]), n) for r in chosen]
        return []

    out = []
    if baseline:
        below = latency < res.interval.low_ns if res.interval is not None else np.isfinite(latency)
        out += pick((patterns.labels < 0) & below, below, -1)
    for s in res.sub_intervals:
        own = (latency >= s.low_ns) & (latency < s.high_ns)
        out += pick(patterns.labels == s.index, own, s.index, quantiles)
    return out


def _spans_of(spans, trace_ids: Iterable[str]):
    """The spans of the given traces (a small frame for :func:`request_spans`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...model.assembly import as_frame

    wanted = sorted(set(trace_ids))
    table = spans.spans if isinstance(getattr(spans, "spans", None), pa.Table) else spans
    if isinstance(table, pa.Table):  # filter before converting: only a few traces are needed
        return as_frame(table.filter(pc.is_in(table.column(S.TRACE_ID), value_set=pa.array(wanted, pa.string()))))
    if hasattr(table, "to_table"):  # a pyarrow Dataset (spans on disk, tracesleuth.scale): only these traces read
        return as_frame(table.to_table(filter=pc.field(S.TRACE_ID).isin(wanted)))
    return as_frame(table).filter(pl.col(S.TRACE_ID).is_in(wanted))


def example_requests_section(spans, table, patterns: PatternsInput, *, baseline: bool = True,
                             max_spans: int = 400, per_pattern: int = MAX_EXAMPLES) -> Section:
    """Example requests of each pattern as Gantt charts of their spans.

    Each shown pattern (at most :data:`MAX_PATTERNS_SHOWN` per sub-interval, see
    :func:`shown_patterns`) gets its representative request drawn and up to ``per_pattern - 1``
    more one click away (a folded ``<details>``); the patterns not shown are counted.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        The spans the table was built from (only the examples' traces are used).
    table : TraceTable
    patterns : PatternsInput
    baseline : bool, default=True
        Also show a typical request below the degraded interval, to compare with.
    max_spans : int, default=400
        Spans per chart at most.
    per_pattern : int, default=3
        Example requests per pattern at most (see :func:`example_requests`).
    """
    section = Section("Example requests", key="examples")
    res = patterns.result
    groups = shown_patterns(res)
    shown_index = {s.index for _, shown, _ in groups for s in shown}
    examples = [e for e in example_requests(table, patterns, baseline=baseline, per_label=per_pattern)
                if e.label < 0 or e.label in shown_index]
    if not examples:
        section.add(Text("No request to show."))
        return section
    section.add(Text("For each pattern the request whose latency is closest to the median of the requests with that "
                     "pattern (preferring those in its own sub-interval), and more one click away. Bars start at the "
                     "span's start relative to the request and last its duration, coloured by service; hatched pale "
                     "bars are asynchronous work (producer/consumer or FOLLOWS_FROM spans, spans that outlive their "
                     "parent, and everything below them); outlined bars and bold rows are the operations the pattern "
                     "names. All charts share one time scale. The dotted line is the end of the request. Hover a bar "
                     "for the span's instance, status and attributes; deep requests collapse by depth."))
    subset = _spans_of(spans, [e.trace_id for e in examples])
    pattern_color = pattern_colors(res)
    colors: dict[str, str] = {}
    drawn = {}
    for ex in examples:
        try:
            drawn[ex] = request_spans(subset, ex.trace_id, ex.span_id)
        except KeyError as e:  # the spans given are not those the table was built from
            section.add(Text(f"Request {ex.trace_id} cannot be drawn: {e}", muted=True))
    x_range_ms = gantt_x_range_ms(list(drawn.values()))

    def chart(ex: ExampleRequest, named: tuple) -> list:
        request = drawn[ex]
        for svc in request[S.SERVICE].unique(maintain_order=True).to_list():
            colors.setdefault(svc, SERVICE_COLORS[len(colors) % len(SERVICE_COLORS)])
        title = f"trace {ex.trace_id}, latency {format_duration_ns(ex.latency_ns)}"
        return [Text(f"{title}; {ex.members:,} request(s) with this label; {request.height} spans.", muted=True),
                Figure(request_gantt_figure(request, title=title, max_spans=max_spans, service_colors=colors,
                                            highlight=named, x_range_ms=x_range_ms))]

    for ex in (e for e in drawn if e.label < 0):
        section.add(Text([Strong("Baseline"), " - a typical request below the degraded interval"]), *chart(ex, ()))
    for key, shown, hidden in groups:
        for s in shown:
            mine = [e for e in drawn if e.label == s.index]
            if not mine:
                continue
            named = operation_keys_named(s.pattern.attributes, table.endpoint) if s.pattern is not None else ()
            section.add(Text([Swatch(pattern_color[s.index]), Strong(f"#{s.index} {s.latency_words}"), ": ", s.words]),
                        *chart(mine[0], named))
            if len(mine) > 1:
                section.add(Details(f"{len(mine) - 1} more example request(s) of #{s.index}",
                                    [part for ex in mine[1:] for part in chart(ex, named)]))
        if hidden:
            section.add(Text(f"{len(hidden)} more pattern(s) of {_range_words(*key)}{_f_range(hidden)} not drawn "
                             "(listed under the patterns table).", muted=True))
    return section


def _normalize_degradations(degradations) -> dict[str, str]:
    if degradations is None:
        return {}
    if isinstance(degradations, Mapping):
        return {str(k): str(v) for k, v in degradations.items()}
    out = {}
    for d in degradations:
        name = getattr(d, "name", None)
        if name is None:
            raise ParameterError(
                "The 'degradations' parameter of build_patterns_report must be a mapping {name: description} "
                f"or a sequence of objects with .name and .describe() (Degradation). Got an item {d!r} instead.")
        out[str(name)] = d.describe() if hasattr(d, "describe") else str(d)
    return out


def ground_truth_section(table, patterns: PatternsInput, truth: Mapping[str, str | None],
                         degradations=None) -> Section:
    """Injected degradations beside the recovered patterns, with their best-match F-scores.

    Each degradation is matched with the pattern (cluster of requests) of highest F-score against
    the requests it affects, and the matches are scored as a whole (Section 4.3 of Cortellessa &
    Traini, :func:`~tracesleuth.analyses.metrics.match_clusters`).

    Parameters
    ----------
    table : TraceTable
    patterns : PatternsInput
    truth : mapping of str to str or None
        ``{trace_id: degradation name or None}`` (e.g. ``EShopperSession.label_map()``); a request
        of a trace not in it counts as not affected.
    degradations : mapping of str to str, or sequence of Degradation, optional
        Descriptions of the injected degradations.
    """
    from ...analyses.metrics import labels_for, match_clusters

    descriptions = _normalize_degradations(degradations)
    aligned = labels_for(table, truth)
    unknown = sum(1 for t in table.frame["trace_id"].to_list() if t not in truth)
    names = sorted(set(descriptions) | {v for v in aligned if v is not None})
    section = Section("Injected degradations and recovered patterns", key="ground-truth")
    if not names:
        section.add(Text("The ground truth marks no request as affected."))
        return section
    res = patterns.result
    pattern_color = pattern_colors(res)
    match = match_clusters(aligned, patterns.labels, degradations=names)
    by_index = {s.index: s for s in res.sub_intervals}
    rows = []
    for name in names:
        k = match.matched.get(name, -1)
        s = by_index.get(k)
        recovered = [_pattern_label(s, pattern_color), ": ", s.words] if s is not None else "no pattern"
        rows.append([Strong(name), descriptions.get(name, ""), int((aligned == name).sum()), recovered,
                     match.match_f_scores.get(name)])
    section.add(
        Text("Each injected degradation with the recovered pattern that best matches the requests it affected "
             "(highest F-score), and the matching scored as a whole: precision = correctly grouped requests / "
             "requests in the matched patterns, recall = correctly grouped requests / affected requests."),
        Table(["degradation", "injected", "affected requests", "best-matching pattern", "match F-score"], rows),
        KeyValues([("precision", match.precision), ("recall", match.recall), ("F-score", match.f_score),
                   ("requests correctly grouped", match.n_correct), ("affected requests", match.n_affected),
                   ("requests in the matched patterns", match.n_clustered)]),
    )
    # Requests by injected degradation and by recovered pattern.
    groups = [*names, None]
    columns = ["injected \\ recovered", *[f"#{s.index}" for s in res.sub_intervals], "no pattern"]
    cross = []
    for g in groups:
        mask = np.array([v == g for v in aligned]) if g is not None else np.array([v is None for v in aligned])
        counts = [int((mask & (patterns.labels == s.index)).sum()) for s in res.sub_intervals]
        cross.append([g if g is not None else NOT_AFFECTED, *counts, int((mask & (patterns.labels < 0)).sum())])
    section.add(Table(columns, cross, caption="Requests by injected degradation (rows) and recovered pattern "
                                              "(columns)"))
    colors = {n: _TRUTH_COLORS[i % len(_TRUTH_COLORS)] for i, n in enumerate(names)} | {NOT_AFFECTED: BASELINE_COLOR}
    fig = latency_by_group_figure(table.frame["latency_ns"], [v if v is not None else NOT_AFFECTED for v in aligned],
                                  None, order=[NOT_AFFECTED, *names], colors=colors)
    mark_patterns(fig, res, pattern_color)
    section.add(Figure(fig, caption="Latencies by injected degradation, with the recovered sub-intervals."))
    if unknown:
        section.add(Text(f"{unknown:,} request(s) belong to traces the ground truth does not list; they count as "
                         "not affected.", muted=True))
    return section


# ============================================================================================
# The whole report
# ============================================================================================


def build_patterns_report(spans, table, estimator_or_result, *, labels: Mapping[str, str | None] | None = None,
                          degradations=None, title: str | None = None, subtitle: str | None = None,
                          solver_settings: Mapping[str, Any] | None = None, max_gantt_spans: int = 400) -> Report:
    """The HTML report of a latency-degradation-pattern analysis.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        The spans the trace table was built from. A :class:`~tracesleuth.io.SpanReadResult` also
        gives the rejected records for the "about the input" section.
    table : TraceTable
        The trace table the analysis was fitted on.
    estimator_or_result : LatencyDegradationPatterns or DegradationPatternsResult
        A fitted estimator (preferred: its ``labels_`` say which requests each pattern groups) or
        its result alone (requests are then grouped by latency).
    labels : mapping of str to str or None, optional
        Ground truth ``{trace_id: "A1" | "A2" | None}``; with it the report compares the injected
        degradations with the recovered patterns.
    degradations : mapping of str to str, or sequence of Degradation, optional
        Descriptions of the injected degradations (``EShopperSession.degradations``).
    title : str, optional
        Default ``"Latency degradation patterns: <endpoint>"``.
    subtitle : str, optional
        Default: the number of requests and the solver.
    solver_settings : mapping, optional
        Settings shown in the summary (e.g. ``{"seed": 0, "generations": 400}``).
    max_gantt_spans : int, default=400
        Spans per Gantt chart at most.

    Returns
    -------
    Report
        Sections: summary, latency distribution, patterns, example requests, (ground truth,)
        about the input. Write it with :meth:`Report.write`.

    Raises
    ------
    ParameterError
        When ``estimator_or_result`` is not a fitted estimator or result, or does not match
        ``table``.

    Examples
    --------
    >>> from tracesleuth.evaluation.eshopper import simulate_eshopper
    >>> from tracesleuth.model import build_trace_table
    >>> from tracesleuth.analyses.patterns import LatencyDegradationPatterns
    >>> session = simulate_eshopper(n_requests=300, random_state=1)
    >>> table = build_trace_table(session.spans)
    >>> est = LatencyDegradationPatterns(random_state=0, generations=50).fit(table)
    >>> report = build_patterns_report(session.spans, table, est, labels=session.label_map(),
    ...                                degradations=session.degradations)
    >>> [s.title for s in report.sections][:2]
    ['Summary', 'Latency distribution']
    """
    from ... import __version__

    patterns = resolve_patterns(estimator_or_result, table)
    res = patterns.result
    report = Report(
        title or f"Latency degradation patterns: {table.endpoint}",
        subtitle=subtitle or f"{table.n_requests:,} requests to {table.endpoint}; solver {res.solver}.",
        footer=f"tracesleuth {__version__} - latency degradation patterns after Cortellessa & Traini, "
               "ICPE 2020 (doi:10.1145/3358960.3379126).",
    )
    context = ReportContext(spans, table, labels=labels, degradations=degradations, settings=solver_settings,
                            max_gantt_spans=max_gantt_spans)
    for section in build_sections(patterns, context):
        report.add(section)
    report.add(input_section(spans, table))
    return report


def build_sections(fitted, context: ReportContext) -> list[Section]:
    """The report sections of a latency-degradation-pattern analysis, built from its result.

    Parameters
    ----------
    fitted : LatencyDegradationPatterns, DegradationPatternsResult or PatternsInput
        A fitted estimator (its ``labels_`` group the example requests) or its result; nothing is
        refitted.
    context : ReportContext
        The spans and trace table analysed, and optional ground truth (``labels``,
        ``degradations``) and settings to show.

    Returns
    -------
    list of Section
        Summary, latency distribution, patterns, example requests (when a degradation was found)
        and, with ground truth, the comparison with the injected degradations.
    """
    table = context.table
    patterns = fitted if isinstance(fitted, PatternsInput) else resolve_patterns(fitted, table)
    sections = [summary_section(table, patterns, solver_settings=context.settings),
                latency_distribution_section(table, patterns), patterns_section(patterns)]
    if patterns.result.found:
        sections.append(example_requests_section(context.spans, table, patterns, max_spans=context.max_gantt_spans))
    if context.labels is not None:
        sections.append(ground_truth_section(table, patterns, context.labels, context.degradations))
    return sections
