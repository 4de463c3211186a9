"""Request flows: the call view of a trace table, one row per span (call) of each request.

A request-flow graph (Sambasivan et al., *Diagnosing performance changes by comparing request
flows*, NSDI 2011, Spectroscope) is a request's spans as nodes ``service:operation`` with their
caller edges and timings; root-cause localization (Mi et al., *Localizing root causes of
performance anomalies in cloud computing systems by analyzing request trace logs*, Sci China Inf
Sci 2012, doi:10.1007/s11432-012-4747-8) compares the calls of a method across requests and
instances; and
performance annotations (Rogora et al., *Performance annotations for cloud computing*, HotCloud
2017) relate a request's attributes to the time spent in each call. They all read the calls of
the requests of one endpoint, which :func:`call_frame` gives as one frame.

Columns (:mod:`tracesleuth.schema` names them; times after clock-skew correction):

======================= ===================================================================
``trace_id``              the call's trace (String)
``request``               row of its request in the trace table (Int64)
``span_id``               the span (String; after de-duplication, as the trace table's)
``parent_span_id``        its parent (String; the entry span's parent lies outside the request)
``operation_key``         ``service:operation`` (String)
``service``, ``operation``, ``instance``, ``kind``  of the span (String; instance nullable)
``follows_from``          the span's relation to its parent is declared asynchronous (Boolean)
``depth``                 depth below the entry span (Int32; 0 for the entry span)
``start_offset_ns``       span start minus the entry span's start, ns (Int64)
``duration_ns``           span duration, ns (Int64)
``exclusive_ns``          exclusive (self) time, ns (Int64): the trace table's, per span
``error``                 the span failed: status ``error`` or an ``exception`` event (Boolean)
``exception_type``        ``exception.type`` of the span's first ``exception`` event (String,
                          null when it has none)
``caller_key``            operation key of the parent; null for the entry span (String)
``server_service``        service of the server span a client span calls (String, nullable)
``gap_ns``                client duration not covered by its server spans, ns: network and
                          queueing time (Int64, nullable)
======================= ===================================================================

A *call to a server* (:func:`server_calls`) is a synchronous child by declaration
(:func:`~._calls.synchronous_children`; no timing test: a server span may end after its client
before clock-skew correction decides otherwise) of kind ``server`` under a parent of kind
``client``, or, when the format does not record kinds (``unspecified``), a child of another
service than its parent's (a span of kind ``unspecified`` counts as client and as server, as in
the clock-skew step of :mod:`.assembly`; requiring another service keeps a service's internal
steps out). ``server_service`` is the service of the earliest such child; ``gap_ns`` is the
client's duration minus the union of its server children's intervals clipped to it. Both are
null for a span with no server child (a database client, an internal span).

Rows are ordered by request, then start offset, then depth (ties in input order). The work is
numpy on integer-coded spans, partition-wise like the trace table's.

**Span columns.** An analysis that needs more of each call's span than these columns (performance
annotations read the spans' numeric attributes) gives :func:`call_frame` a function of the spans,
``span_columns(spans) -> polars.DataFrame`` keyed by ``trace_id`` and ``span_id``: its other
columns are joined to the calls (:func:`with_span_columns`, the one place of that rule). The
function sees spans holding whole traces, so it runs where the spans are: on all of them in this
process, or on each partition of a store's spans split by trace id (:mod:`tracesleuth.scale`),
where the spans' nested columns never leave the partition.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S
from ._calls import synchronous_children
from ._codes import SpanCodes, dictionary_codes, encode_spans, narrow_spans, take_rows
from .assembly import Tree, assemble_codes, attributes_of
from ._requests import covered_by_children, exclusive_times, requests_of, trace_partitions

#: Columns of the call view, in order.
CALL_COLUMNS = (S.TRACE_ID, S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, S.OPERATION_KEY, S.SERVICE, S.OPERATION,
                S.INSTANCE, S.KIND, S.FOLLOWS_FROM, S.DEPTH, S.START_OFFSET_NS, S.DURATION_NS, S.EXCLUSIVE_NS, S.ERROR,
                S.EXCEPTION_TYPE, S.CALLER_KEY, S.SERVER_SERVICE, S.GAP_NS)
#: The call view's polars dtypes, by column.
CALL_SCHEMA = {S.TRACE_ID: pl.String, S.REQUEST: pl.Int64, S.SPAN_ID: pl.String, S.PARENT_SPAN_ID: pl.String,
           S.OPERATION_KEY: pl.String, S.SERVICE: pl.String, S.OPERATION: pl.String, S.INSTANCE: pl.String,
           S.KIND: pl.String, S.FOLLOWS_FROM: pl.Boolean, S.DEPTH: pl.Int32, S.START_OFFSET_NS: pl.Int64, S.DURATION_NS: pl.Int64,
           S.EXCLUSIVE_NS: pl.Int64, S.ERROR: pl.Boolean, S.EXCEPTION_TYPE: pl.String, S.CALLER_KEY: pl.String,
           S.SERVER_SERVICE: pl.String,
           S.GAP_NS: pl.Int64}


def call_frame(spans: pa.Table, endpoint: str, requests: pl.DataFrame, partition_spans: int, *,
               span_columns=None) -> pl.DataFrame:
    """The call view of the requests of ``endpoint`` (columns in the module docstring).

    Parameters
    ----------
    spans : pyarrow.Table
        The spans the trace table was built from (:data:`~tracesleuth.schema.SPAN_SCHEMA`).
    endpoint : str
        The trace table's endpoint (an operation key).
    requests : polars.DataFrame
        ``trace_id`` and ``span_id`` of each request's entry span, shape (n_requests, 2), in
        trace-table row order.
    partition_spans : int
        More spans than this are taken in partitions of whole traces, as the table was built.
    span_columns : callable, optional
        ``span_columns(spans) -> polars.DataFrame``: columns of the spans joined to the calls
        (:func:`with_span_columns`).

    Returns
    -------
    polars.DataFrame
        Shape (n_calls, 19 + n_span_columns), one row per span of every request.
    """
    pieces = list(call_pieces(spans, endpoint, requests, partition_spans))
    calls = in_request_order(pieces) if pieces else pl.DataFrame(schema=CALL_SCHEMA)
    return calls if span_columns is None else with_span_columns(calls, spans, span_columns)


def call_pieces(spans: pa.Table, endpoint: str, requests: pl.DataFrame, partition_spans: int) -> Iterator[pl.DataFrame]:
    """The call view in pieces, one per partition of whole traces with requests (one piece when the
    spans are at most ``partition_spans``), each in row order, ``request`` numbering
    ``requests``' rows: :func:`call_frame` is :func:`in_request_order` of them, and a reduction
    that needs no more than whole requests reads them one at a time
    (:meth:`~tracesleuth.model.TraceTable.map_calls`).

    Parameters
    ----------
    spans, endpoint, requests, partition_spans
        As for :func:`call_frame`.

    Yields
    ------
    polars.DataFrame
        Shape (n_piece_calls, 19).
    """
    narrow = narrow_spans(spans)
    attributes = attributes_of(spans)
    rows_of = requests.select(S.TRACE_ID, S.SPAN_ID).with_row_index(S.REQUEST).with_columns(
        pl.col(S.REQUEST).cast(pl.Int64))
    parts = trace_partitions(spans, partition_spans) if spans.num_rows > partition_spans else [None]
    for rows in parts:
        codes = encode_spans(narrow if rows is None else take_rows(narrow, rows), rows)
        if endpoint not in codes.operation_keys:
            continue
        tree, _ = assemble_codes(codes, attributes)
        yield partition_calls(codes, tree, codes.operation_keys.index(endpoint), spans, rows_of)


def with_span_columns(calls: pl.DataFrame, spans: pa.Table, span_columns) -> pl.DataFrame:
    """The calls with the columns ``span_columns(spans)`` gives their spans.

    Parameters
    ----------
    calls : polars.DataFrame
        A call view (:func:`call_frame`), shape (n_calls, 19).
    spans : pyarrow.Table
        Spans holding every call's whole trace (:data:`~tracesleuth.schema.SPAN_SCHEMA`, plain or
        dictionary-encoded strings): the input, or one partition by trace id of it.
    span_columns : callable
        ``span_columns(spans) -> polars.DataFrame`` with ``trace_id``, ``span_id`` (String) and
        the columns to add, at most one row per span id (a span it leaves out gets nulls); those
        columns must not be the call view's.

    Returns
    -------
    polars.DataFrame
        Shape (n_calls, 19 + n_added): the calls in their order, then the added columns sorted by
        name (so that a view joined partition by partition has the same columns in the same
        order as one joined at once, given the same columns).

    Raises
    ------
    ValueError
        ``span_columns`` gave a column of the call view, or no ``trace_id``/``span_id``.
    """
    found = span_columns(spans)
    keys = [S.TRACE_ID, S.SPAN_ID]
    clash = sorted(set(found.columns) & set(CALL_COLUMNS) - set(keys))
    if clash or not set(keys) <= set(found.columns):
        raise ValueError(f"span columns must hold trace_id and span_id and no other call-view column; got "
                         f"{found.columns}")
    added = sorted(c for c in found.columns if c not in keys)
    return calls.join(found.select(*keys, *added), on=keys, how="left", maintain_order="left")


def with_request_columns(calls: pl.DataFrame, request_columns: pl.DataFrame | None,
                         columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The calls (their ``columns``, all when None) with per-request columns: row ``r`` of
    ``request_columns`` joined to the calls whose ``request`` is ``r``.

    Parameters
    ----------
    calls : polars.DataFrame
        A call view (:func:`call_frame`), shape (n_calls, k).
    request_columns : polars.DataFrame or None
        Shape (n_requests, j), in the order the view's ``request`` numbers; none of its columns
        a call-view column.
    columns : sequence of str, optional

    Returns
    -------
    polars.DataFrame
        Shape (n_calls, len(columns) + j), the calls in their order.

    Raises
    ------
    ValueError
        A column of ``request_columns`` is a call-view column.
    """
    picked = calls if columns is None else calls.select(columns)
    if request_columns is None or request_columns.width == 0:
        return picked
    clash = sorted(set(request_columns.columns) & set(calls.columns))
    if clash:
        raise ValueError(f"request columns must not be call-view columns; got {clash}")
    rows = calls[S.REQUEST]
    return picked.with_columns([request_columns[c].gather(rows) for c in request_columns.columns])


def in_request_order(pieces: list) -> pl.DataFrame:
    """The call-view pieces of partitions (each in row order, each request in one piece) as one
    frame in row order; ``pieces`` is emptied.

    A stable order by request is enough. It is taken column by column, each input column freed
    once gathered, so the memory beside the result is one column's rather than the whole frame's
    (polars' ``sort`` gathers every column at once: measured on 9.2 million calls, a peak 3.7 GB
    above the view's, against 1.4 GB this way).
    """
    if len(pieces) == 1:
        return pieces.pop()
    frame = pl.concat(pieces, rechunk=False)
    pieces.clear()
    order = pl.Series(np.argsort(frame[S.REQUEST].to_numpy(), kind="stable"))
    columns = []
    for name in frame.columns:
        columns.append(frame.get_column(name).gather(order))
        frame = frame.drop(name)
    return pl.DataFrame(columns)


def partition_calls(codes: SpanCodes, tree: Tree, endpoint: int, spans: pa.Table, rows_of: pl.DataFrame
                    ) -> pl.DataFrame:
    """The calls of the requests of one partition of whole traces.

    Parameters
    ----------
    codes, tree : SpanCodes, Tree
        The partition's spans and assembled trees (:func:`~.assembly.assemble_codes`).
    endpoint : int
        Operation code of the endpoint.
    spans : pyarrow.Table
        The input the span ids are read from.
    rows_of : polars.DataFrame
        ``request`` (trace-table row), ``trace_id``, ``span_id`` of every request's entry span.

    Returns
    -------
    polars.DataFrame
        Shape (n_calls, 19): the columns of the module docstring, rows in their order.
    """
    entry, request = requests_of(codes, tree, endpoint)
    if len(entry) == 0:
        return pl.DataFrame(schema=CALL_SCHEMA)
    exclusive = exclusive_times(codes, tree, request)
    ids = pl.DataFrame({S.TRACE_ID: codes.trace_ids.take(pa.array(codes.trace[entry])),
                        S.SPAN_ID: codes.span_ids(entry, spans)})
    table_row = ids.join(rows_of, on=[S.TRACE_ID, S.SPAN_ID], how="left", maintain_order="left")[S.REQUEST]
    if table_row.null_count():
        raise ValueError("the spans do not hold the trace table's requests (was the table built from them?)")
    start, end = tree.start_ns, tree.end_ns
    # The calls by request row, start offset and depth; ties in input order (the rows of a
    # partition are in input order, and lexsort is stable).
    rows = np.flatnonzero(request >= 0)
    top = entry[request[rows]]
    rows = rows[np.lexsort((tree.depth[rows], start[rows] - start[top], table_row.to_numpy()[request[rows]]))]
    req = request[rows]
    top = entry[req]
    parent = np.where(rows == top, -1, tree.parent[rows])
    server, gap = server_calls(codes, tree, request)
    keys = pl.Series(codes.operation_keys, dtype=pl.String)
    return pl.DataFrame([
        pl.Series(S.TRACE_ID, codes.trace_ids.take(pa.array(codes.trace[rows])), dtype=pl.String),
        table_row.gather(req).alias(S.REQUEST),
        pl.Series(S.SPAN_ID, codes.span_ids(rows, spans), dtype=pl.String),
        pl.Series(S.PARENT_SPAN_ID, codes.parent_span_ids(rows, spans), dtype=pl.String),
        _gather(keys, codes.operation[rows]).alias(S.OPERATION_KEY),
        _gather(pl.Series(codes.services, dtype=pl.String), codes.service[rows]).alias(S.SERVICE),
        _gather(pl.Series(codes.operation_names, dtype=pl.String), codes.operation[rows]).alias(S.OPERATION),
        _gather(pl.Series(codes.instances, dtype=pl.String), codes.instance[rows]).alias(S.INSTANCE),
        _gather(pl.Series(S.SPAN_KINDS, dtype=pl.String), codes.kind[rows]).alias(S.KIND),
        pl.Series(S.FOLLOWS_FROM, codes.follows_from[rows], dtype=pl.Boolean),
        pl.Series(S.DEPTH, tree.depth[rows] - tree.depth[top], dtype=pl.Int32),
        pl.Series(S.START_OFFSET_NS, start[rows] - start[top], dtype=pl.Int64),
        pl.Series(S.DURATION_NS, end[rows] - start[rows], dtype=pl.Int64),
        pl.Series(S.EXCLUSIVE_NS, exclusive[rows], dtype=pl.Int64),
        pl.Series(S.ERROR, codes.error[rows], dtype=pl.Boolean),
        _gather(pl.Series(codes.exception_types, dtype=pl.String), codes.exception_type[rows]).alias(S.EXCEPTION_TYPE),
        _gather(keys, np.where(parent >= 0, codes.operation[parent], -1)).alias(S.CALLER_KEY),
        _gather(pl.Series(codes.services, dtype=pl.String), server[rows]).alias(S.SERVER_SERVICE),
        _nullable(gap[rows]).alias(S.GAP_NS),
    ])


def server_calls(codes: SpanCodes, tree: Tree, request: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Server service and gap of every client span calling a server (rule in the module docstring).

    Parameters
    ----------
    codes, tree : SpanCodes, Tree
    request : ndarray of int64, shape (n_spans,)
        Request of each span (:func:`~._requests.requests_of`); spans outside every request (-1)
        are not looked at.

    Returns
    -------
    server : ndarray of int64, shape (n_spans,)
        Service code (into ``codes.services``) of the earliest server child; -1 when none.
    gap_ns : ndarray of int64, shape (n_spans,)
        Duration not covered by the server children, ns; -1 when there is none.
    """
    n = codes.n_spans
    server = np.full(n, -1, dtype=np.int64)
    gap = np.full(n, -1, dtype=np.int64)
    child = np.flatnonzero((tree.parent >= 0) & (request >= 0))
    p = tree.parent[child]
    service = codes.service
    declared = codes.is_kind(("client",))[p] & codes.is_kind(("server",))[child]
    inferred = (codes.is_kind(("client", "unspecified"))[p] & codes.is_kind(("server", "unspecified"))[child]
                & (service[p] != service[child]))
    rpc = (declared | inferred) & synchronous_children(codes.kind[child], codes.follows_from[child])
    child, p = child[rpc], p[rpc]
    if len(child) == 0:
        return server, gap
    start, end = tree.start_ns, tree.end_ns
    ps, pe = start[p], end[p]
    s = np.clip(start[child], ps, pe)
    e = np.clip(end[child], s, pe)
    parents, covered = covered_by_children(p, s, e, ps)
    gap[parents] = end[parents] - start[parents] - covered
    order = np.lexsort((child, start[child], p))  # by client, then server start
    first = np.ones(len(order), dtype=bool)
    first[1:] = p[order][1:] != p[order][:-1]
    server[p[order][first]] = service[child[order][first]]
    return server, gap


def lexical_order(*columns: pl.Series) -> np.ndarray:
    """Indices (int64) sorting rows by string columns (lexically, nulls last), then stably.

    Each column is dictionary-encoded and only its distinct values are sorted, which is much
    faster than sorting long repeated strings (operation keys, instances) row by row.
    """
    keys = []
    for column in columns:
        codes, dictionary = dictionary_codes(pa.chunked_array([column.to_arrow()]).cast(pa.string()))
        rank = np.empty(len(dictionary) + 1, dtype=np.int64)
        rank[np.argsort(np.array(dictionary.to_pylist(), dtype=object), kind="stable")] = np.arange(len(dictionary))
        rank[-1] = len(dictionary)  # null (code -1): last
        keys.append(rank[codes])
    return np.lexsort(keys[::-1])


def _gather(values: pl.Series, codes: np.ndarray) -> pl.Series:
    """``values[codes]``, null where a code is negative."""
    return values.gather(_nullable(codes))


def _nullable(values: np.ndarray) -> pl.Series:
    """Int64 series of ``values``, null where negative."""
    return pl.from_arrow(pa.array(np.asarray(values, dtype=np.int64), mask=values < 0))
