"""The per-request trace table of an endpoint (Cortellessa & Traini, ICPE 2020, Table 1, Sec. 4.2).

One row per request to the endpoint, with its latency and, per operation it called, the
exclusive ("pure") execution time: the operation's span duration minus the time covered by its
synchronous children (the union of their intervals, so overlapping children count once).
Asynchronous children are not subtracted: producer/consumer spans, ``FOLLOWS_FROM`` children,
and children that end after their parent (after clock-skew correction). Repeated calls of an
operation in one request are summed, with the number of calls beside it. An operation a request
did not call is a missing value (null), never zero.

Columns (units in the names; ``K`` is an operation key ``"service:operation"``):

=========================== ============================================================
``trace_id``, ``span_id``     the request's trace and its entry span
``start_ns``                  entry span start (Unix epoch ns)
``latency_ns``                entry span duration, ns (the request latency)
``signature``                 canonical call-structure string (no timing), see below
``error``                     some span of the request failed: its status is ``error`` or it
                              has an ``exception`` event (:data:`~tracesleuth.schema.ERROR`)
``incomplete``                the trace has orphan spans or several roots (an orphan's subtree
                              is not attributed to the request: its place in it is unknown)
``exclusive_ns[K]``           summed exclusive time of K's spans in the request, ns (Int64)
``calls[K]``                  number of K's spans in the request (Int32)
``instance[K]``               instance that served K's first call (String)
``attr[KEY]``                 categorical attribute KEY of the entry span (String)
``num[KEY]``                  numeric attribute KEY of the entry span, in its own unit
                              (Int64 or Float64)
=========================== ============================================================

The column names are declared in :mod:`tracesleuth.schema` (``exclusive_column``...). Which
entry-span attributes get an ``attr[...]`` or ``num[...]`` column, and which are left out
(identifiers, constants, too many values; listed in :attr:`TraceTable.dropped_attributes`), is
decided by :mod:`.attributes`. :meth:`TraceTable.calls` gives the same requests one row per span
(call), with caller, timings, gaps between client and server spans (:mod:`.flows`), and
:meth:`TraceTable.instance_latencies` the calls' times per operation and instance.

The signature of a span is ``K`` followed, if it has children, by its children's signatures
sorted and comma-separated in parentheses; a request's is its entry span's. Requests with the
same signature share a call structure (a Spectroscope "category").

An endpoint is an operation key. By default it is the most frequent root operation and each
request is a whole trace; naming any other operation makes each span of it a request (its
subtree), which selects one API behind a gateway whose root operation is generic (``/*``). A request is an
outermost span of the endpoint's operation with its subtree (a nested call of the same
operation belongs to the enclosing request).

The work is numpy on integer-coded spans (:mod:`._codes`): :func:`requests_of`,
:func:`exclusive_times`, :func:`operation_features` and :func:`partition_requests` are pure
functions of spans holding whole traces, so they run partition-wise (partitioned by trace id,
:func:`trace_partitions`). :func:`build_trace_table` builds more than ``PARTITION_SPANS`` spans
that way, one partition after another, which bounds its memory; only the endpoint (the most
frequent root operation of all partitions), the attribute columns and the row order need every
partition: those are reductions (:func:`merge_endpoints`, :func:`~.attributes.merge_attribute_summaries`),
and :mod:`tracesleuth.scale` runs the same functions on Dask partitions of a store larger than
one machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S
from ..errors import EmptyDataError, ParameterError
# The table's column names are declared in the schema module, beside the span columns.
from ..schema import (ATTRIBUTE_PREFIX, CALLS, ERROR, EXCLUSIVE_NS, EXCLUSIVE_PREFIX, INCOMPLETE, INSTANCE_PREFIX,
                      LATENCY_NS, NUMERIC_ATTRIBUTE_PREFIX, OPERATION_KEY, SIGNATURE, attribute_column, calls_column,
                      column_key, exclusive_column, instance_column, numeric_attribute_column)
from ._codes import _M1, _M2, SpanCodes, argsort, encode_spans, mix64, narrow_spans, take_rows
from .assembly import SOURCE_ROW, AssemblyReport, Tree, assemble_codes, attributes_of, spans_table
from .attributes import entry_attribute_columns
from ._requests import exclusive_times, requests_of, trace_partitions

# Re-exported: the column names (declared in the schema module) and the table API.
__all__ = ["ATTRIBUTE_PREFIX", "CALLS", "ERROR", "EXCLUSIVE_NS", "EXCLUSIVE_PREFIX", "INCOMPLETE", "INSTANCE_PREFIX",
           "LATENCY_NS", "MAX_CATEGORIES", "NUMERIC_ATTRIBUTE_PREFIX", "OPERATION_KEY", "PARTITION_SPANS", "SIGNATURE",
           "TraceTable", "attribute_column", "build_trace_table", "calls_column", "column_key", "exclusive_column",
           "exclusive_times", "instance_column", "merge_endpoints", "numeric_attribute_column", "operation_features",
           "operation_keys", "partition_requests", "requests_of", "resolve_endpoint", "root_endpoints", "trace_partitions",
           "traces_starting_between", "with_table_columns"]

#: Entry-span attributes with more distinct values than this are no categories (:mod:`.attributes`).
MAX_CATEGORIES = 50
#: Spans the trace table is built from at once; more are built in partitions of whole traces.
PARTITION_SPANS = 500_000


@dataclass(frozen=True)
class TraceTable:
    """The trace table of one endpoint.

    Attributes
    ----------
    frame : polars.DataFrame
        One row per request, shape (n_requests, n_columns); columns as in the module docstring.
    endpoint : str
        The operation key the requests enter by.
    operations : tuple of str
        Operation keys with a column, in column order.
    assembly : AssemblyReport
        What trace assembly repaired (duplicates, orphans, clock skew).
    endpoints : dict
        ``{operation key: number of traces}`` of every root operation seen.
    dropped_attributes : tuple of (str, str)
        ``(key, reason)`` of every entry-span attribute key with neither an ``attr[KEY]`` nor a
        ``num[KEY]`` column, sorted by key; reason ``"identifier"``, ``"constant"`` or
        ``"too many distinct values"`` (:mod:`.attributes`).
    spans : pyarrow.Table or None
        The spans the table was built from (the caller's table, not a copy), read again only
        by :meth:`calls`; None when the table was made otherwise (then :meth:`calls` raises).
    partition_spans : int
        The partition size the table was built with, used again by :meth:`calls`.
    """

    frame: pl.DataFrame
    endpoint: str
    operations: tuple
    assembly: AssemblyReport = field(default_factory=AssemblyReport)
    endpoints: dict = field(default_factory=dict)
    dropped_attributes: tuple = ()
    spans: pa.Table | None = field(default=None, repr=False, compare=False)
    partition_spans: int = field(default=PARTITION_SPANS, repr=False, compare=False)
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n_requests(self) -> int:
        """Number of requests (rows)."""
        return self.frame.height

    @property
    def continuous_columns(self) -> tuple[str, ...]:
        """The exclusive-time columns (Int64 ns, null when not called)."""
        return tuple(c for c in self.frame.columns if c.startswith(EXCLUSIVE_PREFIX))

    @property
    def categorical_columns(self) -> tuple[str, ...]:
        """Instance and categorical entry-span attribute columns (String)."""
        return tuple(c for c in self.frame.columns if c.startswith((INSTANCE_PREFIX, ATTRIBUTE_PREFIX)))

    @property
    def numeric_attribute_columns(self) -> tuple[str, ...]:
        """Numeric entry-span attribute columns ``num[KEY]`` (Int64 or Float64, null when the
        entry span has no such attribute), in the attribute's own unit.

        They are in neither :attr:`continuous_columns` nor :attr:`categorical_columns`.
        """
        return tuple(c for c in self.frame.columns if c.startswith(NUMERIC_ATTRIBUTE_PREFIX))

    def calls(self, *, span_columns=None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The requests' calls, one row per span: the request-flow view.

        Computed from :attr:`spans` on first use (the spans are encoded and assembled again,
        about the time of the table build) and kept.

        Parameters
        ----------
        span_columns : callable, optional
            ``span_columns(spans) -> polars.DataFrame`` keyed by ``trace_id`` and ``span_id``:
            more columns of the calls' spans (e.g. the numeric attributes performance
            annotations read), joined to the view by
            :func:`~tracesleuth.model.flows.with_span_columns`. Such a view is built each time
            (not kept: the plain view is what most analyses share).
        columns : sequence of str, optional
            Only these columns of the view, in this order: an analysis that reads a few of them
            asks for those, and a table built partition by partition (:mod:`tracesleuth.scale`)
            then reads only those from its partitions' calls (here, they are selected from the
            kept view).

        Returns
        -------
        polars.DataFrame
            Shape (n_calls, 19), ``n_calls`` the number of spans of all requests; columns
            ``trace_id``, ``request`` (row in :attr:`frame`), ``span_id``, ``parent_span_id``,
            ``operation_key``, ``service``, ``operation``, ``instance``, ``kind``,
            ``follows_from``, ``depth``
            (below the entry span), ``start_offset_ns`` (from the entry span's start, ns),
            ``duration_ns``, ``exclusive_ns`` (ns; summed per request and operation they give
            ``exclusive_ns[K]``), ``error`` (status ``error`` or an ``exception`` event),
            ``exception_type`` (of the first ``exception`` event), ``caller_key``,
            ``server_service`` and ``gap_ns``
            (a client span's time outside the server span it calls, ns); see :mod:`.flows`.
            With ``span_columns``, shape (n_calls, 19 + n_added), the added columns last, sorted
            by name; with ``columns``, shape (n_calls, len(columns)).

        Raises
        ------
        ParameterError
            When the table holds no spans (it was not made by :func:`build_trace_table`).

        Examples
        --------
        >>> table = build_trace_table(spans)                                   # doctest: +SKIP
        >>> calls = table.calls()                                              # doctest: +SKIP
        >>> calls.group_by("caller_key", "operation_key").agg(pl.len(), pl.col("gap_ns").median())  # doctest: +SKIP
        """
        if self.spans is None:
            raise ParameterError("This TraceTable holds no spans (it was not made by build_trace_table), "
                                 "so it has no call view.")
        from .flows import call_frame, with_span_columns

        if "calls" not in self._cache:
            self._cache["calls"] = call_frame(self.spans, self.endpoint, self.frame.select(S.TRACE_ID, S.SPAN_ID),
                                              self.partition_spans)
        calls = self._cache["calls"]
        calls = calls if span_columns is None else with_span_columns(calls, self.spans, span_columns)
        return calls if columns is None else calls.select(columns)

    def spill_directory(self):
        """A new directory where the pieces :meth:`map_calls` gives may leave what is too large to
        send back (files every process of the table's scheduler reads), or None: here the pieces
        run in this process, and their results stay in memory. The caller removes it.

        Returns
        -------
        pathlib.Path or None
            None for a table built in this process (a table built on Dask: a directory in its work
            directory, :class:`~tracesleuth.scale.table.CollectedTraceTable`).
        """
        return None

    def map_calls(self, fn, *, columns: Sequence[str] | None = None,
                  request_columns: pl.DataFrame | None = None) -> list:
        """``fn`` applied to the call view in pieces of whole requests: what an analysis reduces
        (counts, sums, the rows it keeps) without the whole view in one place.

        Here the view is one piece when it is kept already or the spans fit one partition
        (``partition_spans``); otherwise the pieces are the partitions of whole traces the view
        is built from (:func:`~tracesleuth.model.flows.call_pieces`), one at a time, and the whole
        view is neither built nor kept. A table built on Dask (:mod:`tracesleuth.scale`) applies
        ``fn`` to each partition's calls in the task that builds them, and only ``fn``'s results
        reach this process. A request's calls are always in one piece, in the view's order.

        Parameters
        ----------
        fn : callable
            ``fn(calls) -> object``, ``calls`` a polars DataFrame of the view's rows of some
            requests. On Dask it runs on the workers: a module-level function (or a
            ``functools.partial`` of one) whose result pickles.
        columns : sequence of str, optional
            Only these columns of the view, as for :meth:`calls`.
        request_columns : polars.DataFrame, optional
            Shape (n_requests, k), in :attr:`frame`'s row order: per-request values joined to each
            call of the request (by the ``request`` column), after ``columns``.

        Returns
        -------
        list
            ``fn``'s results, one per piece (here one), in the order of the pieces.

        Raises
        ------
        ParameterError
            When the table holds no spans (as :meth:`calls`).
        """
        from .flows import call_pieces, with_request_columns

        if "calls" in self._cache or self.spans is None or self.spans.num_rows <= self.partition_spans:
            return [fn(with_request_columns(self.calls(), request_columns, columns))]
        return [fn(with_request_columns(piece, request_columns, columns)) for piece in
                call_pieces(self.spans, self.endpoint, self.frame.select(S.TRACE_ID, S.SPAN_ID), self.partition_spans)]

    def instance_latencies(self) -> pl.DataFrame:
        """Every call's times by operation and instance, a long frame from :meth:`calls`.

        Returns
        -------
        polars.DataFrame
            Shape (n_calls, 8): ``operation_key``, ``instance`` (null when unknown),
            ``request``, ``span_id``, ``start_offset_ns``, ``duration_ns``, ``exclusive_ns``
            and ``gap_ns`` (ns), sorted by operation key, instance (nulls last), request and
            start.

        Examples
        --------
        >>> lat = table.instance_latencies()                                   # doctest: +SKIP
        >>> lat.group_by("operation_key", "instance").agg(pl.col("exclusive_ns").median())  # doctest: +SKIP
        """
        from .flows import lexical_order

        calls = self.calls()  # in request and start order already: a stable sort by key and instance
        order = lexical_order(calls[OPERATION_KEY], calls[S.INSTANCE])
        return calls.select(OPERATION_KEY, S.INSTANCE, S.REQUEST, S.SPAN_ID, S.START_OFFSET_NS, S.DURATION_NS,
                            EXCLUSIVE_NS, S.GAP_NS)[order]

    def to_frame(self) -> pl.DataFrame:
        """The table as a polars DataFrame."""
        return self.frame

    def latencies_ns(self) -> np.ndarray:
        """Request latencies, ndarray of shape (n_requests,), int64 ns."""
        return self.frame[LATENCY_NS].to_numpy()


def traces_starting_between(spans: pa.Table, low_ns: int, high_ns: int) -> pa.Table:
    """The spans of the traces that start in ``[low_ns, high_ns)`` (a trace starts at its first span).

    Parameters
    ----------
    spans : pyarrow.Table
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA` (plain or dictionary-encoded strings),
        whole traces.

    Returns
    -------
    pyarrow.Table
        The selected spans, every span of a selected trace included, in input order.
    """
    frame = pl.from_arrow(spans.select([S.TRACE_ID, S.START_NS]))
    starts = frame.group_by(S.TRACE_ID).agg(pl.col(S.START_NS).min())
    chosen = starts.filter(pl.col(S.START_NS).is_between(low_ns, high_ns, closed="left"))[S.TRACE_ID]
    keep = pl.from_arrow(spans.column(S.TRACE_ID)).is_in(chosen.implode())
    return spans.filter(keep.to_arrow())


def operation_keys() -> pl.Expr:
    """Expression of the operation key ``"service:operation"`` of each span."""
    return pl.concat_str([pl.col(S.SERVICE), pl.lit(":"), pl.col(S.OPERATION)]).alias(OPERATION_KEY)


def root_endpoints(*codes: SpanCodes) -> dict:
    """``{operation key: traces}`` of root spans (spans without a parent) of one or more
    partitions, most frequent first."""
    found = []
    for c in codes:
        counts = np.bincount(c.operation[~c.has_parent], minlength=len(c.operation_keys))
        found.append({c.operation_keys[i]: int(counts[i]) for i in np.flatnonzero(counts).tolist()})
    return merge_endpoints(*found)


def merge_endpoints(*counts: dict) -> dict:
    """The sum of ``{operation key: traces}`` counts (:func:`root_endpoints` of partitions), most
    frequent first, ties by key."""
    found: dict = {}
    for c in counts:
        for key, n in c.items():
            found[key] = found.get(key, 0) + n
    return dict(sorted(found.items(), key=lambda kc: (-kc[1], kc[0])))


def resolve_endpoint(endpoint: str | None, operations: dict, endpoints: dict) -> str:
    """The operation key of ``endpoint`` (a key ``service:operation`` or a unique operation name);
    the most frequent root operation when ``None``.

    Parameters
    ----------
    endpoint : str or None
    operations : dict
        ``{operation key: operation name}`` of every operation seen.
    endpoints : dict
        ``{operation key: number of traces}`` of root operations, most frequent first
        (:func:`root_endpoints`).

    Raises
    ------
    ParameterError
        When ``endpoint`` names no operation, or an operation name several services share.
    EmptyDataError
        When there are no root spans and no endpoint is given.
    """
    if endpoint is None:
        if not endpoints:
            raise EmptyDataError("no root spans: give an endpoint (an operation key 'service:operation')")
        return next(iter(endpoints))
    if endpoint in operations:
        return endpoint
    by_name = sorted(k for k, name in operations.items() if name == endpoint)
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        raise ParameterError(f"The endpoint {endpoint!r} is an operation of several services: "
                             f"{', '.join(by_name)}; give one of these keys.")
    import difflib

    close = sorted(k for k in operations if endpoint.lower() in k.lower())[:10] or difflib.get_close_matches(
        endpoint, list(operations), n=3, cutoff=0.6)  # a substring of keys, else a misspelling's closest keys
    hint = (f" Did you mean {', '.join(close)}?" if close
            else f" Root operations: {', '.join(list(endpoints)[:10])}.")
    raise ParameterError(f"The endpoint {endpoint!r} matches no operation key 'service:operation'.{hint}")


def operation_features(codes: SpanCodes, request: np.ndarray, exclusive_ns: np.ndarray, n_requests: int
                       ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Per (operation, request): summed exclusive time, number of calls, first call's instance.

    Returns
    -------
    operations : list of str
        Keys of the operations called by some request, sorted; row order of the arrays below.
    exclusive_ns : ndarray of int64, shape (n_operations, n_requests)
    calls : ndarray of int32, shape (n_operations, n_requests)
        0 where the request did not call the operation.
    instance : ndarray of int32, shape (n_operations, n_requests)
        Instance code (into ``codes.instances``) of the earliest call with a known instance; -1
        when none.
    """
    # Spans inside requests (all of them, usually: then no copies are taken).
    inside = slice(None) if (request >= 0).all() else np.flatnonzero(request >= 0)
    op = codes.operation[inside]
    used = np.flatnonzero(np.bincount(op, minlength=len(codes.operation_keys)))
    keys = [codes.operation_keys[i] for i in used.tolist()]
    by_key = np.argsort(np.array(keys, dtype=object), kind="stable") if keys else np.zeros(0, np.int64)
    row_of_op = np.full(len(codes.operation_keys), -1, dtype=np.int64)
    row_of_op[used[by_key]] = np.arange(len(used))
    n_ops = len(used)
    shape = (n_ops, n_requests)
    exclusive = np.zeros(shape, dtype=np.int64)
    calls = np.zeros(shape, dtype=np.int32)
    instance = np.full(shape, -1, dtype=np.int32)
    if len(op):
        # The spans grouped by cell (request, operation), one sort, then sums and minima per run
        # of a cell.
        cell = request[inside] * n_ops
        cell += row_of_op[op]
        del op
        by_cell = argsort(cell)
        cell = cell[by_cell]
        rows = by_cell if isinstance(inside, slice) else inside[by_cell]
        del by_cell
        first = np.empty(len(cell), dtype=bool)
        first[0] = True
        np.not_equal(cell[1:], cell[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        req, op_row = np.divmod(cell[starts], n_ops)
        at = op_row * n_requests + req  # the cell in the (n_ops, n_requests) arrays
        del req, op_row
        exclusive.ravel()[at] = np.add.reduceat(exclusive_ns[rows], starts)
        calls.ravel()[at] = np.diff(starts, append=len(cell))
        # The earliest call with a known instance (ties: the first row).
        never = np.iinfo(np.int64).max
        t = np.where(codes.instance[rows] >= 0, codes.start_ns[rows], never)
        earliest = np.minimum.reduceat(t, starts)
        run = np.cumsum(first) - 1
        chosen = np.minimum.reduceat(np.where(t == earliest[run], rows, never), starts)
        called = earliest < never
        instance.ravel()[at[called]] = codes.instance[chosen[called]]
    return [keys[i] for i in by_key.tolist()], exclusive, calls, instance


def build_trace_table(spans, endpoint: str | None = None, *, max_categories: int = MAX_CATEGORIES,
                      partition_spans: int = PARTITION_SPANS) -> TraceTable:
    """Build the trace table of an endpoint from spans.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    endpoint : str, optional
        Operation key ``"service:operation"`` (or an operation name unique across services) the
        requests enter by; default the most frequent root operation.
    max_categories : int, default=50
        Entry-span attributes with more distinct values are no categories (``attr[KEY]``): left
        out, or numbers only (``num[KEY]``) when every value is a number (:mod:`.attributes`).
    partition_spans : int, default=PARTITION_SPANS
        More spans than this are built in partitions of whole traces
        (:func:`trace_partitions`), one after the other, so the memory the build needs beside
        the spans is that of one partition. The table does not depend on it.

    Returns
    -------
    TraceTable

    Raises
    ------
    EmptyDataError
        When there are no spans, no root span, or no request of the endpoint.
    ParameterError
        When ``endpoint`` matches no operation or is ambiguous, or ``partition_spans`` < 1.

    Examples
    --------
    >>> from tracesleuth.io import read_spans
    >>> from tracesleuth.model import build_trace_table
    >>> table = build_trace_table(read_spans("traces/"))        # doctest: +SKIP
    >>> table.frame.select("latency_ns", table.continuous_columns[0])  # doctest: +SKIP
    """
    if partition_spans < 1:
        raise ParameterError(f"partition_spans must be at least 1, got {partition_spans}")
    table = spans_table(spans)
    if table.num_rows == 0:
        raise EmptyDataError("no spans to build a trace table from")
    narrow = narrow_spans(table)  # no attributes, events, links: what a span's events say is derived once
    parts = trace_partitions(table, partition_spans) if table.num_rows > partition_spans else [None]
    codes = [encode_spans(narrow if rows is None else take_rows(narrow, rows), rows) for rows in parts]
    endpoints = root_endpoints(*codes)
    key = resolve_endpoint(endpoint, {k: n for c in codes for k, n in zip(c.operation_keys, c.operation_names)},
                           endpoints)
    attributes = attributes_of(table)
    report, pieces = AssemblyReport(), []
    for i in range(len(codes)):
        part, codes[i] = codes[i], None  # a partition's arrays are freed once its requests are built
        tree, part_report = assemble_codes(part, attributes)
        report = report.merge(part_report)
        if key in part.operation_keys:
            pieces.append(partition_requests(part, tree, part.operation_keys.index(key), table))
    pieces = [p for p in pieces if p.height]
    if not pieces:
        raise EmptyDataError(f"no request of endpoint {key!r}")
    if len(pieces) > 1:
        frame = pl.concat(pieces, how="diagonal").sort(_ORDER)
        ops = sorted(column_key(c) for c in frame.columns if c.startswith(EXCLUSIVE_PREFIX))
        frame = with_table_columns(frame, ops, {column_key(c) for c in frame.columns if c.startswith(INSTANCE_PREFIX)})
    else:
        frame, ops = pieces[0], [column_key(c) for c in pieces[0].columns if c.startswith(EXCLUSIVE_PREFIX)]
    del pieces
    entry_attributes = None if attributes is None else take_rows(attributes, frame[SOURCE_ROW].to_numpy())
    attrs, dropped = entry_attribute_columns(entry_attributes, max_categories)
    frame = pl.concat([frame.drop(SOURCE_ROW), attrs], how="horizontal") if attrs.width else frame.drop(SOURCE_ROW)
    return TraceTable(frame=frame, endpoint=key, operations=tuple(ops), assembly=report, endpoints=endpoints,
                      dropped_attributes=dropped, spans=table, partition_spans=partition_spans)


def with_table_columns(requests: pl.DataFrame, operations: Sequence[str], instanced: set) -> pl.DataFrame:
    """Some requests (:func:`partition_requests`) with the operation columns of a whole table.

    Parameters
    ----------
    requests : polars.DataFrame
        Requests of one or more partitions.
    operations : sequence of str
        The table's operation keys, sorted: an ``exclusive_ns[K]`` (Int64) and a ``calls[K]``
        (Int32) column each, null where ``requests`` has none.
    instanced : set of str
        The operation keys with an ``instance[K]`` column (String) in the table.

    Returns
    -------
    polars.DataFrame
        The base columns (and ``source_row`` when ``requests`` has it), then ``exclusive_ns[K]``,
        ``calls[K]`` and ``instance[K]`` in key order.
    """
    have = set(requests.columns)

    def column(name: str, dtype) -> pl.Expr:
        return pl.col(name) if name in have else pl.lit(None, dtype).alias(name)

    return requests.select(_BASE + [SOURCE_ROW] * (SOURCE_ROW in have)
                           + [column(exclusive_column(op), pl.Int64) for op in operations]
                           + [column(calls_column(op), pl.Int32) for op in operations]
                           + [column(instance_column(op), pl.String) for op in operations if op in instanced])


#: Columns of every trace table, before the operation and attribute columns.
_BASE = [S.TRACE_ID, S.SPAN_ID, S.START_NS, LATENCY_NS, SIGNATURE, ERROR, INCOMPLETE]
#: Row order of a trace table.
_ORDER = [S.START_NS, S.TRACE_ID, S.SPAN_ID]


def partition_requests(codes: SpanCodes, tree: Tree, endpoint: int, spans: pa.Table) -> pl.DataFrame:
    """The requests of one partition of whole traces, one row each, in table order.

    Parameters
    ----------
    codes : SpanCodes
        The partition's spans; ``codes.source_row`` indexes ``spans``.
    tree : Tree
        Its assembled trees (:func:`~.assembly.assemble_codes`).
    endpoint : int
        Operation code of the endpoint.
    spans : pyarrow.Table
        The input the span ids are read from.

    Returns
    -------
    polars.DataFrame
        Shape (n_requests, 8 + 3 * n_operations at most), sorted by entry span start, trace
        id, span id: the base columns of the module docstring and ``source_row`` (the entry
        span's input row), then ``exclusive_ns[K]``, ``calls[K]`` and ``instance[K]`` of the
        operations this partition's requests call (keys sorted). An operation of no request
        here has no column; it is null when partitions are concatenated.
    """
    entry, request = requests_of(codes, tree, endpoint)
    if len(entry) == 0:
        return pl.DataFrame()
    # The requests in table order first, so every array below is built in that order.
    base = pl.DataFrame({
        S.TRACE_ID: codes.trace_ids.take(pa.array(codes.trace[entry])),
        S.SPAN_ID: codes.span_ids(entry, spans),
        S.START_NS: tree.start_ns[entry],
    }).with_row_index("_req").sort(_ORDER)
    order = base["_req"].to_numpy()
    entry = entry[order]
    position = np.empty(len(order) + 1, dtype=np.int64)
    position[order] = np.arange(len(order))
    position[-1] = -1  # request -1 (outside every request) stays -1
    request = position[request]
    exclusive = exclusive_times(codes, tree, request)
    ops, exclusive, calls, instance = operation_features(codes, request, exclusive, len(entry))
    n_req = len(entry)
    error = np.bincount(request[codes.error & (request >= 0)], minlength=n_req) > 0
    bad_trace = (np.bincount(codes.trace[tree.orphan], minlength=len(codes.trace_ids)) > 0) | (
        np.bincount(codes.trace[tree.depth == 0], minlength=len(codes.trace_ids)) > 1)
    base = base.drop("_req").with_columns(
        pl.Series(LATENCY_NS, tree.end_ns[entry] - tree.start_ns[entry]),
        _signatures(codes, tree, entry, request),
        pl.Series(ERROR, error),
        pl.Series(INCOMPLETE, bad_trace[codes.trace[entry]]),
        pl.Series(SOURCE_ROW, codes.source_row[entry]),
    ).select(_BASE + [SOURCE_ROW])
    # One series per kind of column, cut into one zero-copy slice per operation.
    absent = (calls == 0).ravel()
    exclusive = pl.from_arrow(pa.array(exclusive.ravel(), mask=absent))
    calls = pl.from_arrow(pa.array(calls.ravel(), mask=absent))
    instance = instance.ravel()
    instance = pl.Series(codes.instances, dtype=pl.String).gather(pl.Series(instance).set(pl.Series(instance < 0), None))
    columns: list[pl.Series] = []
    for k, op in enumerate(ops):
        columns.append(exclusive.slice(k * n_req, n_req).alias(exclusive_column(op)))
    for k, op in enumerate(ops):
        columns.append(calls.slice(k * n_req, n_req).alias(calls_column(op)))
    for k, op in enumerate(ops):
        values = instance.slice(k * n_req, n_req)
        if values.null_count() < n_req:
            columns.append(values.alias(instance_column(op)))
    return base.with_columns(columns)


def _signatures(codes: SpanCodes, tree: Tree, entry: np.ndarray, request: np.ndarray) -> pl.Series:
    """Canonical call-structure string of each request, shape (n_requests,).

    The string is defined in the module docstring (``a:x(b:y,b:y,c:z(d:w))``). Structures are
    first told apart by a Merkle hash computed bottom-up one depth at a time
    (a node's hash mixes its operation with the wrapping sum of its children's hashes plus
    one each, so the order of siblings does not matter); a string is then built once per
    distinct subtree of one representative request per distinct hash.
    """
    inside = request >= 0
    rows = np.flatnonzero(inside)
    # acc[i]: wrapping sum over i's children of (child hash + 1), replaced by i's own hash once
    # its level is done (children are done first, bottom-up).
    acc = np.zeros(codes.n_spans, dtype=np.uint64)
    order, levels = tree.by_depth
    with np.errstate(over="ignore"):
        for d in range(len(levels) - 2, -1, -1):
            idx = order[levels[d]:levels[d + 1]]
            idx = idx[inside[idx]]
            h = mix64(codes.operation[idx].astype(np.uint64) * _M2 + acc[idx] * _M1 + np.uint64(1))
            acc[idx] = h
            p = tree.parent[idx]
            up = p >= 0
            np.add.at(acc, p[up], h[up] + np.uint64(1))
    h = acc
    _, first, inverse = np.unique(h[entry], return_index=True, return_inverse=True)
    is_rep = np.zeros(len(entry), dtype=bool)
    is_rep[first] = True
    members = rows[is_rep[request[rows]]]  # the spans of the representative requests
    # One node per distinct subtree among them, and the subtrees of its children.
    _, at = np.unique(h[members], return_index=True)
    node = members[at]
    is_node = np.zeros(codes.n_spans, dtype=bool)
    is_node[node] = True
    child = members[is_node[tree.parent[members]] & (tree.parent[members] >= 0)]
    children: dict[int, list[int]] = {}
    for parent, kid in zip(h[tree.parent[child]].tolist(), h[child].tolist()):
        children.setdefault(parent, []).append(kid)
    keys = codes.operation_keys
    operation = dict(zip(h[node].tolist(), (keys[i] for i in codes.operation[node].tolist())))
    text: dict[int, str] = {}
    expanded: set[int] = set()
    for top in h[entry[first]].tolist():
        stack = [top]
        while stack:  # depth first, a subtree's string once its children's are known
            x = stack[-1]
            if x in text:
                stack.pop()
                continue
            waiting = [c for c in children.get(x, ()) if c not in text]
            if waiting:
                if x in expanded:  # only a 64-bit hash collision can make a subtree its own descendant
                    raise RuntimeError("call-structure hash collision; please report it")
                expanded.add(x)
                stack.extend(waiting)
                continue
            stack.pop()
            kids = children.get(x)
            text[x] = f"{operation[x]}({','.join(sorted(text[c] for c in kids))})" if kids else operation[x]
    reps = [text[x] for x in h[entry[first]].tolist()]
    return pl.Series(SIGNATURE, reps, dtype=pl.String).gather(inverse.ravel())


def root_tables(spans, endpoints: Sequence[str] | None = None, *, build=None) -> tuple[list, dict[str, str]]:
    """One trace table per root endpoint (the entry operations of the traces): every request once.

    Only root endpoints: an inner endpoint's requests (a service's API called by the root's
    service) are parts of the root's requests, and an analysis of both would count the same calls
    twice. (Root-cause localization and the causal paths read all traffic this way.)

    Parameters
    ----------
    spans : SpanReadResult, pyarrow.Table or polars.DataFrame
    endpoints : sequence of str, optional
        Operation keys to build instead of every root endpoint.
    build : callable, optional
        ``build(spans, endpoint)`` -> TraceTable (endpoint None: the most frequent root
        operation); default :func:`build_trace_table` (:mod:`tracesleuth.scale` gives its Dask
        tables of a store's partitions).

    Returns
    -------
    (list of TraceTable, dict of str to str)
        The tables, most requests first, and ``{endpoint: why no table}`` for those skipped.

    Raises
    ------
    EmptyDataError
        No trace has a request to analyse.
    """
    from ..errors import TraceSleuthError

    build = build or build_trace_table
    first = build(spans, None)
    wanted = list(endpoints) if endpoints is not None else sorted(first.endpoints, key=lambda e: -first.endpoints[e])
    tables, skipped = [], {}
    for endpoint in wanted:
        try:
            tables.append(first if endpoint == first.endpoint else build(spans, endpoint))
        except TraceSleuthError as exc:
            skipped[endpoint] = str(exc)
    if not tables:
        raise EmptyDataError("No endpoint has a request to analyse: " + "; ".join(f"{e}: {w}" for e, w in skipped.items()))
    return tables, skipped
