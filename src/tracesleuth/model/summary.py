"""What a set of traces holds: counts, endpoints and their latency percentiles; and the log
records beside them: how many, how many written in a span of the input, rejected, templates."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from .. import schema as S
from .assembly import AssemblyReport, assemble
from .table import OPERATION_KEY, operation_keys

#: Latency percentiles reported per endpoint.
PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class TraceSummary:
    """Counts and latency percentiles of a set of traces.

    Attributes
    ----------
    traces, spans, services, operations : int
    endpoints : polars.DataFrame
        Root operations, one row each, most requests first: ``endpoint``; ``requests`` (traces
        through the operation) and ``calls`` (its spans); the call latency percentiles
        ``p50_ms`` ... ``p99_ms`` and ``max_ms``; ``error_rate``, the fraction of requests in
        which a call of the operation ended in error, null (unknown) when the input cannot tell
        (no span has a status set, e.g. a CSV without a status column).
    entry_operations : polars.DataFrame
        Operations of other services called directly by the most frequent endpoint's service
        (the APIs behind a gateway), counted over the requests to that endpoint; same columns;
        candidates for ``--endpoint``.
    time_range_ns : tuple of int
        First span start and last span end.
    assembly : AssemblyReport
    """

    traces: int
    spans: int
    services: int
    operations: int
    endpoints: pl.DataFrame
    entry_operations: pl.DataFrame
    time_range_ns: tuple
    assembly: AssemblyReport = field(default_factory=AssemblyReport)

    def to_dict(self) -> dict:
        """JSON-safe dictionary."""
        return {
            "traces": self.traces, "spans": self.spans, "services": self.services,
            "operations": self.operations, "time_range_ns": list(self.time_range_ns),
            "endpoints": self.endpoints.to_dicts(), "entry_operations": self.entry_operations.to_dicts(),
            "assembly": self.assembly.to_dict(),
        }


def _latency_stats(df: pl.DataFrame, by: str, *, status_known: bool) -> pl.DataFrame:
    dur = (pl.col(S.END_NS) - pl.col(S.START_NS)) / 1e6
    requests = pl.col(S.TRACE_ID).n_unique()
    if status_known:
        failed = pl.col(S.TRACE_ID).filter(pl.col(S.STATUS).cast(pl.String) == "error").n_unique()
        error_rate = (failed / requests).alias("error_rate")
    else:
        error_rate = pl.lit(None, dtype=pl.Float64).alias("error_rate")
    return (df.group_by(by).agg(
        requests.alias("requests"),
        pl.len().alias("calls"),
        *[dur.quantile(q / 100, interpolation="linear").alias(f"p{q}_ms") for q in PERCENTILES],
        dur.max().alias("max_ms"),
        error_rate,
    ).sort(["requests", by], descending=[True, False]).rename({by: "endpoint"}))


def status_known(df: pl.DataFrame) -> bool:
    """Whether the spans tell success from error: some span has a status other than ``unset``.

    OpenTelemetry instrumentations set ``error`` on failure and leave ``unset`` on success, so
    ``unset`` is read as success when any span has a status; when none has (formats or columns
    without a status), an error rate is unknown, not 0.
    """
    return df.height > 0 and bool((df[S.STATUS].cast(pl.String) != "unset").any())


def summarize(spans, *, top: int = 15) -> TraceSummary:
    """Summarize spans: counts, root endpoints and the operations behind the main one.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        The spans (as :func:`tracesleuth.io.read_spans` gives them).
    top : int, default=15
        Rows kept in ``entry_operations``.

    Returns
    -------
    TraceSummary
    """
    df, report = assemble(spans)
    df = df.with_columns(operation_keys())
    roots = df.filter(pl.col(S.PARENT_SPAN_ID).is_null())
    known = status_known(df)
    endpoints = _latency_stats(roots, OPERATION_KEY, status_known=known)
    entry = pl.DataFrame()
    if endpoints.height:
        main = endpoints["endpoint"][0]
        main_traces = roots.filter(pl.col(OPERATION_KEY) == main).select(S.TRACE_ID).unique()
        services = df.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("parent_row"),
                             pl.col(S.SERVICE).alias("_parent_service"))
        within = df.join(main_traces, on=S.TRACE_ID).join(services, on="parent_row", how="left")
        root_service = main.split(":", 1)[0]
        crossing = within.filter((pl.col("_parent_service") == root_service) & (pl.col(S.SERVICE) != root_service))
        entry = _latency_stats(crossing, OPERATION_KEY, status_known=known).head(top)
    return TraceSummary(
        traces=df[S.TRACE_ID].n_unique(), spans=df.height, services=df[S.SERVICE].n_unique(),
        operations=df[OPERATION_KEY].n_unique(), endpoints=endpoints, entry_operations=entry,
        time_range_ns=(int(df[S.START_NS].min()), int(df[S.END_NS].max())) if df.height else (0, 0),
        assembly=report,
    )


@dataclass(frozen=True)
class LogSummary:
    """The log records of an input.

    Attributes
    ----------
    records : int
        Log records kept.
    joined : int
        Those whose ``(trace_id, span_id)`` is a span of the input (the others, and those
        without trace context, are kept too: unjoined).
    rejected : int
        Log records lost with rejected entries.
    templates : int or None
        Log templates (of a span store, where the records are templated when ingested); None
        for log files read as they are.
    """

    records: int = 0
    joined: int = 0
    rejected: int = 0
    templates: int | None = 0

    @property
    def recorded(self) -> bool:
        """Whether the input has any log record (kept or rejected)."""
        return bool(self.records or self.rejected)

    def to_dict(self) -> dict:
        """JSON-safe dictionary: ``{"records", "joined", "rejected", "templates"}``."""
        return {"records": self.records, "joined": self.joined, "rejected": self.rejected,
                "templates": self.templates}

    def describe(self) -> str:
        """One line: ``logs: none recorded``, or the counts."""
        if not self.recorded:
            return "logs: none recorded"
        share = f" ({self.joined / self.records:.1%})" if self.records else ""
        templates = "" if self.templates is None else f", {self.templates:,} templates"
        return (f"logs: {self.records:,} records, {self.joined:,} written in a span of the input{share}, "
                f"{self.records - self.joined:,} not, {self.rejected:,} rejected{templates}")


def summarize_logs(paths, spans=None, *, format: str | None = None) -> LogSummary:
    """The log records of an input: a span store's, or those of the log files among ``paths``.

    Parameters
    ----------
    paths : str, path or list of them
        One span store (its log table, rejects and templates:
        :meth:`~tracesleuth.io.store.SpanStore.log_summary`), or files, directories and globs whose
        log files (:func:`~tracesleuth.ingest.file_kinds`) are read.
    spans : pyarrow.Table, optional
        The spans of the files (needed to count the joined records of files).
    format : str, optional
        A format every file is in (a span format: no log files).

    Returns
    -------
    LogSummary
    """
    from ..io import RejectLog, expand_paths, iter_log_batches
    from ..ingest import file_kinds
    from ..io.store import SpanStore, count_joined, is_store

    listed = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if len(listed) == 1 and is_store(listed[0]):
        return LogSummary(**SpanStore(listed[0], create=False).log_summary())
    files = [f for f, kind in file_kinds(expand_paths(listed), format).items() if kind == "logs"]
    if not files:
        return LogSummary()
    ids = [S.TRACE_ID, S.SPAN_ID]
    log = RejectLog()  # (every record of a file may be rejected: counted, not raised)
    batches = [b.select(ids) for b in iter_log_batches(files, format=format, log=log)]
    records = sum(b.num_rows for b in batches)
    joined = 0
    if records and spans is not None and spans.num_rows:
        logs = pl.from_arrow(pa.Table.from_batches(batches)).lazy()
        joined = count_joined(logs, pl.from_arrow(spans.select(ids)).lazy(), spans.num_rows)
    return LogSummary(records=records, joined=joined, rejected=log.spans_rejected, templates=None)
