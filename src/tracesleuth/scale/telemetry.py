"""The diagnosis's spans and requests of a span store, partition by partition
(``tracesleuth diagnose STORE --scheduler``).

Everything :class:`~tracesleuth.analyses.diagnose.telemetry.Telemetry` holds of a span is its
trace's: its parent, its children (their covered time, their errors, the service it calls) and its
request are in the same trace. So the store's spans of the period read are split by trace id
(:func:`~tracesleuth.scale.table.shuffle_by_trace`, the same step as the trace table's), each
partition of whole traces gives its frames (:func:`~tracesleuth.analyses.diagnose.telemetry.trace_frames`,
one task each, on Dask or one after another in this process), and the command's process
concatenates them and sorts them into the frames' row order
(:data:`~tracesleuth.analyses.diagnose.telemetry.SPAN_ORDER`, ``REQUEST_ORDER``: total orders,
so the result does not depend on the partitioning). It then joins the log records by span id
(:meth:`~tracesleuth.analyses.diagnose.telemetry.Telemetry.from_frames`), as in-process: the
result is equal to ``Telemetry.from_tables`` on the spans and records ``read_store`` reads.

Why the records are joined here, not in the partitions: the diagnosis keeps every record of the
period (:attr:`Telemetry.logs <tracesleuth.analyses.diagnose.telemetry.Telemetry>`, five columns
and the record's request), so the command's process holds them whatever is done in the tasks;
reading only those columns (no body, no attributes) is the saving, and a record whose span is in
no partition (or whose trace id is missing) is then kept as in-process, with no request.

What is read is what ``read_store(around_ns=...)`` reads: the spans that start in
:func:`~tracesleuth.analyses.diagnose.telemetry.read_range` (a span, not a trace, selection:
a trace cut by the range's start keeps its later spans, whose first becomes its root, as
in-process). Only the store's hours that hold such spans are split
(:meth:`~tracesleuth.scale.spans.StoreParts.during`); each task keeps the spans of the range.

Memory: the split carries no attributes, links or status messages (``shuffle_by_trace(...,
light=True)``: they are not read, nor written to the work directory); a task holds one partition's
spans without them and its rows; the command's process holds the rows (one per span of the range,
18 numbers and names, and one per request, put in order a column at a time) and the records' five
columns, never the store's spans.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .. import schema as S
from ..analyses.diagnose.telemetry import (REQUEST_ORDER, SPAN_ORDER, Telemetry, read_logs, read_range,
                                           trace_frames)
from ..model.table import PARTITION_SPANS
from .cluster import Scheduler
from .spans import store_parts
from .table import shuffle_by_trace

__all__ = ["SPAN_COLUMNS", "partitioned_telemetry"]

#: The span columns the diagnosis reads (those :func:`trace_frames` selects).
SPAN_COLUMNS = [S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, S.OPERATION, S.INSTANCE, S.START_NS, S.END_NS,
                S.STATUS, S.EVENTS]


def partitioned_telemetry(store, *, scheduler: Scheduler, around_ns: tuple | None = None, workdir=None,
                          partition_spans: int | None = None) -> Telemetry:
    """The diagnosis's :class:`~tracesleuth.analyses.diagnose.telemetry.Telemetry` of a span
    store, built partition by partition: equal to
    ``Telemetry.from_tables(*read_store(store, around_ns=around_ns))``.

    Parameters
    ----------
    store : str or Path
        A span store.
    scheduler : Scheduler
        From :func:`~tracesleuth.scale.connect` (``serial``: no Dask, one partition after another
        in this process).
    around_ns : (int, int), optional
        As for :func:`~tracesleuth.analyses.diagnose.telemetry.read_store`: the spans that start
        from ``HISTORY_S`` before the first to ``AFTER_S`` after the second (Unix epoch ns), and
        the log records written then; default the whole store.
    workdir : str or Path, optional
        As for :func:`~tracesleuth.scale.table.shuffle_by_trace`; removed at the end.
    partition_spans : int, optional
        Spans per partition of whole traces (the memory of one task); default
        :data:`~tracesleuth.model.table.PARTITION_SPANS`. The result does not depend on it. When
        the store's hours read hold no more spans than that, they are one partition: read here
        directly (their :data:`SPAN_COLUMNS` only), without a split.

    Returns
    -------
    Telemetry

    Raises
    ------
    ParameterError
        ``store`` is not a span store.
    TraceFormatError
        A part of the store is missing, unreadable or of another schema (named).
    EmptyDataError
        No request (no trace of the spans read has an entry span).
    SchedulerError
        The Dask scheduler went away.

    Examples
    --------
    >>> from tracesleuth.analyses.diagnose import Diagnosis                      # doctest: +SKIP
    >>> from tracesleuth.scale import connect                                    # doctest: +SKIP
    >>> from tracesleuth.scale.telemetry import partitioned_telemetry           # doctest: +SKIP
    >>> with connect("serial") as scheduler:                                     # doctest: +SKIP
    ...     telemetry = partitioned_telemetry("store/", scheduler=scheduler, around_ns=(at_ns, at_ns))
    >>> Diagnosis(at=at_ns).fit(telemetry).result_.verdict                      # doctest: +SKIP
    """
    from ..io.store import open_store

    opened = open_store(store)  # ParameterError naming the path first, as in-process
    span_range = None if around_ns is None else read_range(around_ns)
    parts = store_parts(opened)
    if span_range is not None:
        parts = parts.during(*span_range)
    partition_spans = partition_spans or PARTITION_SPANS
    built = []
    if parts.files and parts.n_spans <= partition_spans:  # one partition: no split
        built = [_store_telemetry(opened, span_range)]
    elif parts.files:
        with shuffle_by_trace(parts, scheduler=scheduler, workdir=workdir, partition_spans=partition_spans,
                              light=True) as partitions:
            built = scheduler.map(_telemetry_part, [(f, span_range) for f in partitions.files],
                                  "building the diagnosis's spans")
    if built:
        spans_parts, request_parts = (list(frames) for frames in zip(*built))
        del built
        spans, requests = _sorted_concat(spans_parts, SPAN_ORDER), _sorted_concat(request_parts, REQUEST_ORDER)
    else:  # no part holds spans of the range: the frames of no span (an error naming it, below)
        spans, requests = trace_frames(S.SPAN_SCHEMA.empty_table())
    return Telemetry.from_frames(spans, requests, read_logs(opened, span_range))


def _sorted_concat(frames: list, order: list) -> pl.DataFrame:
    """``pl.concat(frames).sort(order)`` for an ``order`` that is total (no two rows tie), built a
    column at a time: each column is gathered into the order and dropped from ``frames`` (which is
    emptied of columns), so the memory beside the frames is the sort keys' and one column's, not a
    second copy of every row (as a sort of the concatenation would hold, twice when it rechunks)."""
    keys = pl.concat([f.select(order) for f in frames], rechunk=False)
    index = keys.select(pl.arg_sort_by(order)).to_series()
    del keys
    columns = []
    for name in frames[0].columns:
        columns.append(pl.concat([f.get_column(name) for f in frames], rechunk=False).gather(index))
        frames[:] = [f.drop(name) for f in frames]
    return pl.DataFrame(columns)


def _telemetry_part(path: Path, span_range: tuple | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One task: :func:`trace_frames` of one partition of whole traces, its spans that start in
    ``span_range`` only (``[low_ns, high_ns)``; None: all)."""
    return trace_frames(_in_range(pl.read_ipc(path, columns=SPAN_COLUMNS), span_range))


def _store_telemetry(store, span_range: tuple | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`trace_frames` of a store's spans that start in ``span_range``, when they are one
    partition: read directly (in store order), their :data:`SPAN_COLUMNS` only."""
    return trace_frames(_in_range(store.scan().select(SPAN_COLUMNS), span_range).collect())


def _in_range(spans, span_range: tuple | None):
    """The spans (a polars DataFrame or LazyFrame) that start in ``span_range`` (None: all)."""
    return spans if span_range is None else spans.filter(pl.col(S.START_NS).is_between(*span_range, closed="left"))
