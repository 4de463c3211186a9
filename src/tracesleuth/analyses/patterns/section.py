"""Report sections of the latency-degradation-pattern analysis (Cortellessa & Traini, ICPE 2020).

:func:`build_patterns_report` assembles a :class:`~tracesleuth.report.document.Report` from a
fitted :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` (or its result) and the spans
and trace table it was fitted on. Each section is also available on its own, to combine with
the sections of other analyses:

* :func:`summary_section` - what was analysed and found;
* :func:`latency_distribution_section` - the latency distribution with the degraded interval,
  split points and sub-intervals;
* :func:`patterns_section` - each pattern in words with precision, recall, F-score, support;
* :func:`example_requests_section` - one request of each pattern as a Gantt chart;
* :func:`ground_truth_section` - injected degradations beside the recovered patterns, scored
  by :func:`~tracesleuth.evaluation.metrics.match_clusters`;
* :func:`~tracesleuth.report.input.input_section` - the input: traces, spans, rejects, repairs.

Nothing here re-runs the analysis: sections are drawn from ``result_`` and ``labels_``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from ...units import format_duration_ns
from .analysis import DegradationPatternsResult
from ...report.document import Bullets, Code, Figure, KeyValues, Report, Section, Strong, Swatch, Table, Text
from ...report.figures import (
    SERVICE_COLORS,
    gantt_x_range_ms,
    latency_by_group_figure,
    latency_distribution_figure,
    latency_over_time_figure,
    operation_keys_named,
    request_gantt_figure,
    request_spans,
    sub_interval_color,
)
from ...report.input import input_section
from .._contract import ReportContext

__all__ = [
    "ExampleRequest", "PatternsInput", "build_patterns_report", "example_requests", "example_requests_section",
    "ground_truth_section", "latency_distribution_section", "patterns_section", "resolve_patterns",
    "summary_section",
]

#: Colour of requests outside the degraded interval / not affected.
BASELINE_COLOR = "#7f7f7f"
_TRUTH_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
NOT_AFFECTED = "not affected"


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


def _pattern_label(s) -> list:
    """Swatch, index and latency range of a sub-interval, for table cells."""
    return [Swatch(sub_interval_color(s.index), f"#{s.index} "), s.latency_words]


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
        section.add(KeyValues(items), Text([Strong("No degradation found: "), res.reason or ""]))
        return section
    items += [
        (f"degraded interval ({res.interval_source})", res.interval.describe()),
        *([("why this interval", res.interval_reason)] if res.interval_source == "automatic" and res.interval_reason
          else []),
        ("requests in the interval", f"{res.n_positives:,} of {res.n_requests:,} "
                                     f"({100 * res.n_positives / max(res.n_requests, 1):.1f}%)"),
        ("sub-intervals", len(res.sub_intervals)),
        ("score (objective of the partition)", res.score),
    ]
    section.add(KeyValues(items))
    lines = []
    for s in res.sub_intervals:
        score = "" if s.f_score is None else f" (F-score {s.f_score:.3f})"
        lines.append([Swatch(sub_interval_color(s.index), f"#{s.index} {s.latency_words}: "), s.words, score])
    section.add(Bullets(lines))
    if patterns.labels_from == "latency":
        section.add(Text("Only the result was given, not the fitted estimator: requests are grouped by the "
                         "sub-interval their latency falls in, not by the pattern they satisfy.", muted=True))
    return section


def latency_distribution_section(table, patterns: PatternsInput) -> Section:
    """The latency distribution (histogram and KDE) with the interval, split points and sub-intervals."""
    res = patterns.result
    fig = latency_distribution_figure(table.frame["latency_ns"], res if res.interval is not None else None)
    section = Section("Latency distribution", key="latency")
    text = ("Request latencies of the endpoint: a histogram and a Gaussian kernel density estimate. ")
    if res.interval is not None:
        text += ("The outlined band is the degraded latency interval, the dashed lines its split points "
                 "(density minima), and each shaded band #k a sub-interval of the optimal partition.")
    section.add(Text(text), Figure(fig, caption="Use the linear/log buttons to see a small degraded tail."))
    if "start_ns" in table.frame.columns:
        section.add(Figure(latency_over_time_figure(table.frame["start_ns"], table.frame["latency_ns"],
                                                    res if res.interval is not None else None),
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
    rows = []
    for s in res.sub_intervals:
        n_cond = None if s.pattern is None else len(s.pattern)
        rows.append([_pattern_label(s), s.words, n_cond, s.precision, s.recall, s.f_score, s.support, s.tp,
                     s.n_positives])
    section.add(
        Text("Each sub-interval of the degraded interval with the pattern (a conjunction of conditions on "
             "exclusive times, instances and request attributes) of highest F-score: precision is the share "
             "of requests satisfying the pattern whose latency lies in the sub-interval, recall the share of "
             "the sub-interval's requests satisfying it, support the requests satisfying it."),
        Table(["sub-interval", "pattern", "conditions", "precision", "recall", "F-score", "support",
               "true positives", "requests in sub-interval"], rows),
    )
    effects = [[_pattern_label(s), "; ".join(e.describe() for e in s.effects),
                "; ".join(e.describe() for e in s.context) or None]
               for s in res.sub_intervals if s.effects]
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
    if res.notes:
        section.add(Bullets([f"Note: {n}" for n in res.notes]))
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


def example_requests(table, patterns: PatternsInput, *, baseline: bool = True) -> list[ExampleRequest]:
    """One representative request per pattern, and one of the requests below the interval.

    The representative of label ``k`` is, among the requests with that label (preferring those
    inside sub-interval ``k`` and with a complete trace), the one whose latency is closest to their
    median; ties go to the earliest. The baseline is chosen the same way among requests below the
    degraded interval with no label.
    """
    res = patterns.result
    frame = table.frame
    latency = frame["latency_ns"].cast(pl.Float64).to_numpy()
    complete = ~frame["incomplete"].fill_null(False).to_numpy() if "incomplete" in frame.columns \
        else np.ones(frame.height, dtype=bool)
    ids, spans = frame["trace_id"].to_list(), frame["span_id"].to_list()

    def pick(members: np.ndarray, preferred: np.ndarray, label: int) -> ExampleRequest | None:
        for pool in (members & preferred & complete, members & preferred, members):
            rows = np.flatnonzero(pool & np.isfinite(latency))
            if rows.size:
                median = np.median(latency[rows])
                row = int(rows[np.argmin(np.abs(latency[rows] - median))])
                return ExampleRequest(label, ids[row], spans[row], int(latency[row]), int(members.sum()))
        return None

    out = []
    if baseline:
        below = latency < res.interval.low_ns if res.interval is not None else np.isfinite(latency)
        ex = pick((patterns.labels < 0) & below, below, -1)
        if ex is not None:
            out.append(ex)
    for s in res.sub_intervals:
        own = (latency >= s.low_ns) & (latency < s.high_ns)
        ex = pick(patterns.labels == s.index, own, s.index)
        if ex is not None:
            out.append(ex)
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
                             max_spans: int = 400) -> Section:
    """An example request of each pattern as a Gantt chart of its spans.

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
    """
    section = Section("Example requests", key="examples")
    examples = example_requests(table, patterns, baseline=baseline)
    if not examples:
        section.add(Text("No request to show."))
        return section
    section.add(Text("One request per pattern, the one whose latency is closest to the median of the requests "
                     "with that pattern (preferring those in its own sub-interval). Bars start at the span's start "
                     "relative to the request and last its duration, coloured by service; hatched pale bars are "
                     "asynchronous work (producer/consumer or FOLLOWS_FROM spans, spans that outlive their parent, "
                     "and everything below them); outlined bars and bold rows are the operations the pattern names. "
                     "All charts share one time scale. The dotted line is the end of the request. Hover a bar for "
                     "the span's instance, status and attributes; deep requests collapse by depth."))
    subset = _spans_of(spans, [e.trace_id for e in examples])
    by_index = {s.index: s for s in patterns.result.sub_intervals}
    colors: dict[str, str] = {}
    drawn = {}
    for ex in examples:
        try:
            drawn[ex] = request_spans(subset, ex.trace_id, ex.span_id)
        except KeyError as e:  # the spans given are not those the table was built from
            section.add(Text(f"Request {ex.trace_id} cannot be drawn: {e}", muted=True))
    x_range_ms = gantt_x_range_ms(list(drawn.values()))
    for ex, request in drawn.items():
        for svc in request[S.SERVICE].unique(maintain_order=True).to_list():
            colors.setdefault(svc, SERVICE_COLORS[len(colors) % len(SERVICE_COLORS)])
        named = ()
        if ex.label < 0:
            heading = [Strong("Baseline"), " - a typical request below the degraded interval"]
        else:
            s = by_index[ex.label]
            heading = [Swatch(sub_interval_color(s.index)), Strong(f"#{s.index} {s.latency_words}"), ": ", s.words]
            named = operation_keys_named(s.pattern.attributes, table.endpoint) if s.pattern is not None else ()
        title = f"trace {ex.trace_id}, latency {format_duration_ns(ex.latency_ns)}"
        section.add(
            Text(heading),
            Text(f"{title}; {ex.members:,} request(s) with this label; {request.height} spans.", muted=True),
            Figure(request_gantt_figure(request, title=title, max_spans=max_spans, service_colors=colors,
                                        highlight=named, x_range_ms=x_range_ms)),
        )
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
    Traini, :func:`~tracesleuth.evaluation.metrics.match_clusters`).

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
    from ...evaluation.metrics import labels_for, match_clusters

    descriptions = _normalize_degradations(degradations)
    aligned = labels_for(table, truth)
    unknown = sum(1 for t in table.frame["trace_id"].to_list() if t not in truth)
    names = sorted(set(descriptions) | {v for v in aligned if v is not None})
    section = Section("Injected degradations and recovered patterns", key="ground-truth")
    if not names:
        section.add(Text("The ground truth marks no request as affected."))
        return section
    res = patterns.result
    match = match_clusters(aligned, patterns.labels, degradations=names)
    by_index = {s.index: s for s in res.sub_intervals}
    rows = []
    for name in names:
        k = match.matched.get(name, -1)
        s = by_index.get(k)
        recovered = [_pattern_label(s), ": ", s.words] if s is not None else "no pattern"
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
                                  res if res.interval is not None else None, order=[NOT_AFFECTED, *names],
                                  colors=colors)
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
