"""The front door: the verbs a notebook user reaches for, each a thin call of the real thing.

``import tracesleuth as ts`` gives them (imported on first use, so the import stays light)::

    spans = ts.read_spans("../shared/data/nezha/trainticket/2023-01-29/trace/08_45_trace.csv.gz")
    table = ts.trace_table(spans, endpoint="ts-travel-service:/api/v1/travelservice/trips/left")
    found = ts.localize(table)                      # a fitted RootCauseLocalization
    print(found.result_.describe())
    ts.write_report(found, spans=spans, table=table, output="report.html")

Each analysis verb builds its estimator with the given settings and fits it: the estimator is
returned (``.result_``, ``.to_frame()`` through it, ``.predict`` where it labels), so a notebook
can go on from it exactly as from the class (:mod:`tracesleuth.analyses`). Times (``at``, a
period's ends) are Unix epoch ns (int), ISO 8601 text (UTC unless an offset is given), Unix
seconds as text, or a ``datetime`` (naive: UTC).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

__all__ = ["annotate", "compare", "diagnose", "localize", "open_store", "paths", "patterns", "trace_table", "write_report"]


def open_store(path):
    """An existing span store (``tracesleuth ingest`` wrote it): its ``read_spans``, ``read_logs``, ``scan``.

    Raises
    ------
    ParameterError
        ``path`` is not a span store (it says how to make one).
    """
    from .io.store import open_store as opened

    return opened(path)


def trace_table(spans, endpoint: str | None = None, **options):
    """The per-request trace table of an endpoint (:func:`tracesleuth.model.build_trace_table`).

    Parameters
    ----------
    spans : SpanReadResult, pyarrow.Table or polars.DataFrame
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA` (:func:`read_spans`, a store's ``read_spans``).
    endpoint : str, optional
        ``"service:operation"`` the requests enter by; default the most frequent root operation.

    Returns
    -------
    TraceTable
    """
    from .model import build_trace_table

    return build_trace_table(spans, endpoint, **options)


def patterns(table, **settings):
    """Latency degradation patterns of ``table``: a fitted
    :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` (Cortellessa & Traini, ICPE 2020)."""
    from .analyses.patterns import LatencyDegradationPatterns

    return LatencyDegradationPatterns(**settings).fit(table)


def compare(problem, baseline, **settings):
    """What changed from ``baseline`` to ``problem`` (trace tables of one endpoint): a fitted
    :class:`~tracesleuth.analyses.compare.RequestFlowComparison` (Spectroscope, NSDI 2011)."""
    from .analyses.compare import RequestFlowComparison

    return RequestFlowComparison(**settings).fit(problem, baseline)


def localize(tables, **settings):
    """The anomalous methods, services and instances of one period (a trace table or one per
    endpoint): a fitted :class:`~tracesleuth.analyses.localize.RootCauseLocalization` (Mi et al. 2012)."""
    from .analyses.localize import RootCauseLocalization

    return RootCauseLocalization(**settings).fit(tables)


def paths(messages, **settings):
    """The causal paths of a message log or of trace tables made black-box: a fitted
    :class:`~tracesleuth.analyses.paths.CausalPaths` (Aguilera et al., SOSP 2003)."""
    from .analyses.paths import CausalPaths

    return CausalPaths(**settings).fit(messages)


def annotate(tables, **settings):
    """Performance annotations derived from (or, given ``annotations=``, checked on) trace tables:
    a fitted :class:`~tracesleuth.analyses.annotate.PerformanceAnnotations` (Rogora et al., HotCloud 2017)."""
    from .analyses.annotate import PerformanceAnnotations

    return PerformanceAnnotations(**settings).fit(tables)


def diagnose(source, logs=None, *, at=None, time=None, baseline_time=None, **settings):
    """Which service, operation and instance, since when, and how sure: a fitted
    :class:`~tracesleuth.analyses.diagnose.Diagnosis`.

    Parameters
    ----------
    source : str, path, SpanReadResult, pyarrow.Table or polars.DataFrame
        A span store's directory (its spans and log records around the moment are read), or spans.
    logs : pyarrow.Table, optional
        The log records beside ``source``'s spans (a store brings its own).
    at : int, str or datetime, optional
        A moment inside the incident; the onset is searched before it. Default: the last request.
    time, baseline_time : (start, end), optional
        The problem period, the baseline period, instead of the searches.

    Returns
    -------
    Diagnosis

    Raises
    ------
    ParameterError
        ``source`` is a directory that is not a span store; a time that cannot be read.
    """
    from .analyses.diagnose import Diagnosis
    from .analyses.diagnose.telemetry import read_store, store_range

    at_ns = None if at is None else _instant(at, "at")
    time_ns = None if time is None else tuple(_instant(t, "time") for t in time)
    base_ns = None if baseline_time is None else tuple(_instant(t, "baseline_time") for t in baseline_time)
    if isinstance(source, (str, Path)):
        # as the CLI reads a store: around the period or the moment, else its last request
        around = time_ns or (at_ns if at_ns is not None else store_range(Path(source))[1],) * 2
        source, logs = read_store(Path(source), around_ns=around)
    return Diagnosis(at=at_ns, time=time_ns, baseline_time=base_ns, **settings).fit(source, logs)


def _instant(value, name: str) -> int:
    from .units import parse_instant

    if isinstance(value, datetime):
        return parse_instant(value.isoformat(), name)
    return int(value) if isinstance(value, int) else parse_instant(str(value), name)


def write_report(*fitted, spans, table, output="report.html", title: str | None = None,
                 settings: dict | None = None) -> Path:
    """One HTML report of fitted analyses, a section per analysis as ``tracesleuth analyze`` writes it.

    Parameters
    ----------
    *fitted : Analysis
        Fitted estimators (the verbs above return them), in the order their sections appear.
    spans : SpanReadResult, pyarrow.Table or polars.DataFrame
        The spans analysed (example requests are drawn from them).
    table : TraceTable
        The trace table the analyses were fitted on.
    output : str or path, default="report.html"
    title : str, optional
    settings : dict, optional
        Settings to show in the sections' summaries.

    Returns
    -------
    Path
        The report written (one self-contained file).

    Raises
    ------
    ParameterError
        An estimator that is not fitted, or of no registered analysis.
    """
    from .analyses import ANALYSES, ReportContext
    from .errors import ParameterError
    from .report import Report

    report = Report(title or f"Why are requests to {table.endpoint} slow?",
                    subtitle=f"{table.n_requests:,} requests to {table.endpoint}.")
    by_class = {spec.load("estimator"): spec for spec in ANALYSES}
    for est in fitted:
        spec = by_class.get(type(est))
        if spec is None or not hasattr(est, "result_"):
            raise ParameterError(f"report: {type(est).__name__} is not a fitted analysis of tracesleuth")
        for section in spec.load("section")(est, ReportContext(spans, table, settings=settings or {})):
            report.add(section)
    return report.write(Path(output))
