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
``error``                     any span of the request has status ``error``
``incomplete``                the trace has orphan spans or several roots (an orphan's subtree
                              is not attributed to the request: its place in it is unknown)
``exclusive_ns[K]``           summed exclusive time of K's spans in the request, ns (Int64)
``calls[K]``                  number of K's spans in the request (Int32)
``instance[K]``               instance that served K's first call (String)
``attr[KEY]``                 categorical attribute KEY of the entry span (String)
=========================== ============================================================

The signature of a span is ``K`` followed, if it has children, by its children's signatures
sorted and comma-separated in parentheses; a request's is its entry span's. Requests with the
same signature share a call structure (a Spectroscope "category").

An endpoint is an operation key. By default it is the most frequent root operation and each
request is a whole trace; naming any other operation makes each span of it a request (its
subtree), which selects one API behind a gateway whose root operation is generic (``/*``). A request is an
outermost span of the endpoint's operation with its subtree (a nested call of the same
operation belongs to the enclosing request).

The per-trace work (:func:`request_features`) is a pure function of a frame holding whole
traces, so it can run partition-wise (partitioned by trace id, e.g. on Dask) unchanged;
only :func:`pivot_features` needs the set of operations of every partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S
from ..errors import EmptyDataError, ParameterError
from .assembly import DEPTH, SOURCE_ROW, AssemblyReport, assemble, attributes_of

OPERATION_KEY = "operation_key"
LATENCY_NS = "latency_ns"
SIGNATURE = "signature"
ERROR = "error"
INCOMPLETE = "incomplete"
EXCLUSIVE_NS = "exclusive_ns"
CALLS = "calls"
#: Root attributes with more distinct values than this are identifiers, not categories.
MAX_CATEGORIES = 50


def exclusive_column(key: str) -> str:
    """Column name of the exclusive time (ns) of operation ``key``."""
    return f"{EXCLUSIVE_NS}[{key}]"


def calls_column(key: str) -> str:
    """Column name of the call count of operation ``key``."""
    return f"{CALLS}[{key}]"


def instance_column(key: str) -> str:
    """Column name of the instance that served operation ``key``."""
    return f"instance[{key}]"


def attribute_column(key: str) -> str:
    """Column name of the entry-span attribute ``key``."""
    return f"attr[{key}]"


def column_key(column: str) -> str:
    """The operation or attribute key inside a column name: ``"exclusive_ns[a:b]"`` -> ``"a:b"``."""
    return column[column.index("[") + 1:-1] if column.endswith("]") and "[" in column else column


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
    """

    frame: pl.DataFrame
    endpoint: str
    operations: tuple
    assembly: AssemblyReport = field(default_factory=AssemblyReport)
    endpoints: dict = field(default_factory=dict)

    @property
    def n_requests(self) -> int:
        """Number of requests (rows)."""
        return self.frame.height

    @property
    def continuous_columns(self) -> tuple[str, ...]:
        """The exclusive-time columns (Int64 ns, null when not called)."""
        return tuple(c for c in self.frame.columns if c.startswith(EXCLUSIVE_NS + "["))

    @property
    def categorical_columns(self) -> tuple[str, ...]:
        """Instance and entry-span attribute columns (String)."""
        return tuple(c for c in self.frame.columns if c.startswith(("instance[", "attr[")))

    def to_frame(self) -> pl.DataFrame:
        """The table as a polars DataFrame."""
        return self.frame

    def latencies_ns(self) -> np.ndarray:
        """Request latencies, ndarray of shape (n_requests,), int64 ns."""
        return self.frame[LATENCY_NS].to_numpy()


def operation_keys(df: pl.DataFrame) -> pl.Expr:
    """Expression of the operation key ``"service:operation"`` of each span."""
    return pl.concat_str([pl.col(S.SERVICE), pl.lit(":"), pl.col(S.OPERATION)]).alias(OPERATION_KEY)


def root_endpoints(assembled: pl.DataFrame) -> dict:
    """``{operation key: traces}`` of root spans (spans without a parent), most frequent first."""
    roots = assembled.filter(pl.col(S.PARENT_SPAN_ID).is_null()).select(operation_keys(assembled))
    counts = roots.group_by(OPERATION_KEY).len().sort(["len", OPERATION_KEY], descending=[True, False])
    return dict(counts.iter_rows())


def resolve_endpoint(endpoint: str | None, assembled: pl.DataFrame, endpoints: dict) -> str:
    """The operation key of ``endpoint`` (a key ``service:operation`` or a unique operation name);
    the most frequent root operation when ``None``.

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
    keys = assembled.select(operation_keys(assembled).unique()).to_series()
    if endpoint in set(keys.to_list()):
        return endpoint
    by_name = assembled.filter(pl.col(S.OPERATION) == endpoint).select(operation_keys(assembled).unique()).to_series()
    if by_name.len() == 1:
        return by_name.item()
    if by_name.len() > 1:
        raise ParameterError(f"The endpoint {endpoint!r} is an operation of several services: "
                             f"{', '.join(sorted(by_name.to_list()))}; give one of these keys.")
    close = sorted(k for k in keys.to_list() if endpoint.lower() in k.lower())[:10]
    hint = f" Similar: {', '.join(close)}." if close else f" Root operations: {', '.join(list(endpoints)[:10])}."
    raise ParameterError(f"The endpoint {endpoint!r} matches no operation key 'service:operation'.{hint}")


def request_features(assembled: pl.DataFrame, endpoint: str, *, attributes: pa.ChunkedArray | None = None,
                     operations: list[str] | None = None, max_categories: int = MAX_CATEGORIES
                     ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-request columns and per-(request, operation) features of one endpoint.

    A pure function of a frame holding whole, assembled traces (:func:`~.assembly.assemble`)
    and, optionally, the input's attributes column (indexed by ``source_row``) and the list of
    every operation key (then ``operation_key`` is a compact ``Enum`` shared by all partitions).

    Returns
    -------
    requests : polars.DataFrame
        One row per request: ``_req`` (row of the entry span), ``trace_id``, ``span_id``,
        ``start_ns``, ``latency_ns``, ``signature``, ``error``, ``incomplete``, ``attr[...]``.
    features : polars.DataFrame
        One row per (request, operation): ``_req``, ``operation_key``, ``exclusive_ns``,
        ``calls``, ``instance``.
    """
    n = assembled.height
    key = operation_keys(assembled)
    df = assembled.with_columns(key.cast(pl.Enum(operations)) if operations is not None else key,
                                _row=pl.int_range(n, dtype=pl.Int64))
    pi = df["parent_row"].fill_null(-1).to_numpy()
    depth = df[DEPTH].to_numpy()
    is_entry = (df[OPERATION_KEY] == endpoint).to_numpy()
    # Request of each span: its outermost ancestor-or-self entry span, top-down by depth (a call
    # of the endpoint's operation inside a request stays part of that request).
    order = np.argsort(depth, kind="stable")
    levels = np.searchsorted(depth[order], np.arange(depth.max(initial=0) + 2))
    req = np.where(is_entry, np.arange(n), -1)
    for d in range(1, len(levels) - 1):
        idx = order[levels[d]:levels[d + 1]]
        inherited = req[pi[idx]]
        req[idx] = np.where(inherited >= 0, inherited, np.where(is_entry[idx], idx, -1))
    df = df.with_columns(pl.Series("_req", req, dtype=pl.Int64))

    # Exclusive time: duration minus the union of synchronous children's intervals, clipped to
    # the parent. A child is asynchronous by kind, by FOLLOWS_FROM, or by ending after its parent.
    start, end = df[S.START_NS].to_numpy(), df[S.END_NS].to_numpy()
    pp = np.where(pi >= 0, pi, 0)
    sync = ((pi >= 0) & ~np.isin(df[S.KIND].to_numpy(), S.ASYNC_KINDS) & ~df[S.FOLLOWS_FROM].to_numpy()
            & (end <= end[pp]) & (req >= 0))
    covered = _covered_by_children(pi[sync], np.maximum(start[sync], start[pp[sync]]), end[sync],
                                   start[pp[sync]])
    cover = np.zeros(n, dtype=np.int64)
    cover[covered[0]] = covered[1]
    spans = df.select("_row", "_req", DEPTH, OPERATION_KEY, S.TRACE_ID, S.SPAN_ID, S.START_NS, S.END_NS,
                      S.INSTANCE, S.STATUS, SOURCE_ROW, pl.Series("_cover", cover)).filter(pl.col("_req") >= 0)
    spans = spans.with_columns(_excl=(pl.col(S.END_NS) - pl.col(S.START_NS) - pl.col("_cover")).clip(lower_bound=0))

    features = spans.sort(S.START_NS).group_by(["_req", OPERATION_KEY]).agg(
        pl.col("_excl").sum().alias(EXCLUSIVE_NS),
        pl.len().cast(pl.Int32).alias(CALLS),
        pl.col(S.INSTANCE).drop_nulls().first().alias(S.INSTANCE),
    )

    signature = _signatures(spans, pi, n)
    entry = spans.filter(pl.col("_row") == pl.col("_req"))
    trace_flags = df.group_by(S.TRACE_ID).agg(
        (pl.col("orphan").any() | (pl.col(DEPTH) == 0).sum().gt(1)).alias(INCOMPLETE))
    errors = spans.group_by("_req").agg((pl.col(S.STATUS) == "error").any().alias(ERROR))
    requests = (entry.select("_req", S.TRACE_ID, S.SPAN_ID, S.START_NS,
                             (pl.col(S.END_NS) - pl.col(S.START_NS)).alias(LATENCY_NS), SOURCE_ROW)
                .join(signature, on="_req", how="left")
                .join(errors, on="_req", how="left")
                .join(trace_flags, on=S.TRACE_ID, how="left"))
    requests = _with_attributes(requests, attributes, max_categories)
    return requests, features


def _covered_by_children(parent: np.ndarray, s: np.ndarray, e: np.ndarray, parent_start: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Length of the union of child intervals ``[s, e)`` per parent, in one vectorized pass.

    Children are sorted by (parent, start); a child adds what it reaches beyond the running
    maximum end of its earlier siblings. The running maximum restarts at each parent by offsetting
    each parent's times (relative to the parent's start) by ``group * width``.

    Returns ``(parents, covered_ns)``, both ndarrays of shape (n_parents_with_children,).
    """
    if len(parent) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((s, parent))
    p, rs, re_ = parent[order], s[order] - parent_start[order], e[order] - parent_start[order]
    first = np.concatenate(([True], p[1:] != p[:-1]))
    group = np.cumsum(first) - 1
    width = int(re_.max()) + 1
    if width * (int(group[-1]) + 1) < 2**62:
        run = np.maximum.accumulate(group * width + re_)
        prev = np.concatenate(([-1], run[:-1])) - group * width
    else:  # pragma: no cover - spans of years; fall back to a per-parent loop over few large groups
        prev = np.empty_like(re_)
        bounds = np.flatnonzero(first).tolist() + [len(p)]
        for a, b in zip(bounds[:-1], bounds[1:]):
            prev[a:b] = np.concatenate(([-1], np.maximum.accumulate(re_[a:b])[:-1]))
    prev[first] = -1
    gain = np.maximum(re_ - np.maximum(rs, prev), 0)
    starts = np.flatnonzero(first)
    return p[starts], np.add.reduceat(gain, starts)


_M1, _M2, _M3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (wrapping uint64 arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M2
    x = x ^ (x >> np.uint64(27))
    x = x * _M3
    return x ^ (x >> np.uint64(31))


def _signatures(spans: pl.DataFrame, pi: np.ndarray, n: int) -> pl.DataFrame:
    """Canonical call-structure string of each request.

    Structures are first told apart by a Merkle hash computed bottom-up one depth at a time
    (a node's hash mixes its operation key's hash with the wrapping sum of its children's hashes,
    so the order of siblings does not matter); the canonical string is then built only for one
    representative request per distinct hash.
    """
    rows = spans["_row"].to_numpy()
    depth = spans[DEPTH].to_numpy()
    label = np.zeros(n, dtype=np.uint64)
    label[rows] = spans[OPERATION_KEY].hash(seed=7).to_numpy()
    acc = np.zeros(n, dtype=np.uint64)
    cnt = np.zeros(n, dtype=np.uint64)
    h = np.zeros(n, dtype=np.uint64)
    order = np.argsort(depth, kind="stable")
    levels = np.searchsorted(depth[order], np.arange(depth.max(initial=0) + 2))
    with np.errstate(over="ignore"):
        for d in range(len(levels) - 2, -1, -1):
            idx = rows[order[levels[d]:levels[d + 1]]]
            h[idx] = _mix(label[idx] + acc[idx] * _M1 + cnt[idx] * _M2)
            p = pi[idx]
            up = p >= 0
            np.add.at(acc, p[up], h[idx[up]])
            np.add.at(cnt, p[up], np.uint64(1))
    entry = spans.filter(pl.col("_row") == pl.col("_req")).select("_req")
    entry = entry.with_columns(_h=pl.Series(h[entry["_req"].to_numpy()], dtype=pl.UInt64))
    reps = entry.unique(subset="_h", keep="first")
    strings = _signature_strings(spans.filter(pl.col("_req").is_in(reps["_req"].implode())), pi)
    reps = reps.join(strings, on="_req").select("_h", SIGNATURE)
    return entry.join(reps, on="_h", how="left").select("_req", SIGNATURE)


def _signature_strings(spans: pl.DataFrame, pi: np.ndarray) -> pl.DataFrame:
    """Canonical structure strings of the given requests, bottom-up one depth at a time."""
    nodes = spans.select("_row", "_req", DEPTH, OPERATION_KEY).with_columns(
        pl.Series("_parent", pi[spans["_row"].to_numpy()], dtype=pl.Int64))
    below = None  # signatures of the level below: _row, _parent, _sig
    entries = []
    for d in range(int(nodes[DEPTH].max() or 0), -1, -1):
        level = nodes.filter(pl.col(DEPTH) == d)
        if below is not None and below.height:
            kids = below.group_by("_parent").agg(pl.col("_sig").sort().str.join(",").alias("_kids"))
            level = level.join(kids, left_on="_row", right_on="_parent", how="left")
        else:
            level = level.with_columns(_kids=pl.lit(None, pl.String))
        below = level.select(
            "_row", "_req", "_parent",
            _sig=pl.when(pl.col("_kids").is_null()).then(pl.col(OPERATION_KEY))
            .otherwise(pl.concat_str([pl.col(OPERATION_KEY), pl.lit("("), pl.col("_kids"), pl.lit(")")])))
        entries.append(below.filter(pl.col("_row") == pl.col("_req")).select("_req", pl.col("_sig").alias(SIGNATURE)))
    return pl.concat(entries)


def _with_attributes(requests: pl.DataFrame, attributes: pa.ChunkedArray | None, max_categories: int
                     ) -> pl.DataFrame:
    """Entry-span attributes with at most ``max_categories`` distinct values (and at least 2) as
    ``attr[KEY]`` string columns."""
    rows = requests[SOURCE_ROW]
    requests = requests.drop(SOURCE_ROW)
    if attributes is None or requests.height == 0:
        return requests
    taken = attributes.take(pa.array(rows.to_numpy()))
    long = (pl.DataFrame({"_req": requests["_req"], "_a": pl.Series(taken)})
            .explode("_a").drop_nulls("_a").unnest("_a"))
    if long.height == 0:
        return requests
    long = long.select("_req", "key", value=pl.coalesce(
        pl.col("str"), pl.col("int").cast(pl.String), pl.col("float").cast(pl.String), pl.col("bool").cast(pl.String)))
    card = long.group_by("key").agg(pl.col("value").n_unique().alias("n"))
    # Per partition only identifiers are dropped; constant columns are dropped once all partitions
    # are together (:func:`drop_uninformative_attributes`).
    keep = card.filter(pl.col("n") <= max_categories)["key"].sort().to_list()
    if not keep:
        return requests
    wide = long.filter(pl.col("key").is_in(keep)).unique(subset=["_req", "key"], keep="first").pivot(
        on="key", index="_req", values="value")
    wide = wide.rename({k: attribute_column(k) for k in keep if k in wide.columns})
    return requests.join(wide, on="_req", how="left")


def drop_uninformative_attributes(requests: pl.DataFrame, max_categories: int = MAX_CATEGORIES) -> pl.DataFrame:
    """Drop ``attr[...]`` columns with fewer than 2 or more than ``max_categories`` distinct values."""
    attrs = [c for c in requests.columns if c.startswith("attr[")]
    if not attrs:
        return requests
    n = requests.select(pl.col(c).drop_nulls().n_unique() for c in attrs).row(0)
    return requests.drop([c for c, k in zip(attrs, n) if k < 2 or k > max_categories])


def pivot_features(requests: pl.DataFrame, features: pl.DataFrame, operations: list[str] | None = None
                   ) -> tuple[pl.DataFrame, tuple]:
    """Wide trace table from :func:`request_features` output (the only step that needs every
    partition's operations). Columns per operation in ``operations`` order (sorted by default).

    Each operation's columns are gathered from the long features with one ``take`` of length
    ``n_requests`` (null where the request did not call it).
    """
    ops = sorted(features[OPERATION_KEY].unique().cast(pl.String).to_list()) if operations is None \
        else list(operations)
    frame = requests.sort([S.START_NS, S.TRACE_ID, S.SPAN_ID])
    n_req = frame.height
    pos = frame.select("_req", _pos=pl.int_range(n_req, dtype=pl.Int64))
    long = (features.join(pos, on="_req", how="inner")
            .with_columns(_op=pl.col(OPERATION_KEY).cast(pl.String)
                          .replace_strict({k: i for i, k in enumerate(ops)}, default=-1, return_dtype=pl.Int64))
            .filter(pl.col("_op") >= 0).sort("_op"))
    op_index = long["_op"].to_numpy()
    bounds = np.searchsorted(op_index, np.arange(len(ops) + 1))
    where = long["_pos"].to_numpy()
    values = {m: long[c].to_arrow() for m, c in ((exclusive_column, EXCLUSIVE_NS), (calls_column, CALLS),
                                                   (instance_column, S.INSTANCE))}
    columns: dict[str, pa.Array] = {}
    for maker, source in values.items():
        for k, key in enumerate(ops):
            a, b = bounds[k], bounds[k + 1]
            ix = np.full(n_req, -1, dtype=np.int64)
            ix[where[a:b]] = np.arange(a, b)
            col = source.take(pa.array(ix, mask=ix < 0))
            if maker is instance_column and col.null_count == n_req:
                continue
            columns[maker(key)] = col
    wide = pl.from_arrow(pa.table(columns)) if columns else pl.DataFrame()
    base = [c for c in frame.columns if not c.startswith(("_", "attr["))]
    attrs = sorted(c for c in frame.columns if c.startswith("attr["))
    return pl.concat([frame.select(base), wide, frame.select(attrs)], how="horizontal"), tuple(ops)


#: Spans per partition when a trace table is built partition by partition (bounded memory).
PARTITION_SPANS = 300_000


def partitions_by_trace(spans, n_partitions: int):
    """Split spans into ``n_partitions`` groups of whole traces (by a hash of the trace id).

    Yields pyarrow Tables (or polars DataFrames, matching the input), each holding every span of
    its traces, so that any per-trace function can run on them independently.
    """
    if n_partitions <= 1:
        yield spans
        return
    ids = spans.column(S.TRACE_ID) if isinstance(spans, pa.Table) else spans[S.TRACE_ID]
    part = (pl.Series(ids) if isinstance(spans, pa.Table) else ids).hash(seed=11) % n_partitions
    part = part.to_numpy()
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n_partitions + 1))
    for k in range(n_partitions):
        rows = order[bounds[k]:bounds[k + 1]]
        if len(rows):
            yield spans.take(pa.array(rows)) if isinstance(spans, pa.Table) else spans[rows]


def _narrow(spans):
    """Spans as an Arrow table or polars frame (read results unwrapped)."""
    if hasattr(spans, "spans") and isinstance(getattr(spans, "spans"), pa.Table):
        return spans.spans
    if isinstance(spans, pl.LazyFrame):
        return spans.collect()
    if isinstance(spans, (pa.Table, pl.DataFrame)):
        return spans
    raise TypeError(f"expected spans as a pyarrow.Table or polars.DataFrame, got {type(spans).__name__}")


def build_trace_table(spans, endpoint: str | None = None, *, max_categories: int = MAX_CATEGORIES) -> TraceTable:
    """Build the trace table of an endpoint from spans.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    endpoint : str, optional
        Operation key ``"service:operation"`` (or an operation name unique across services) the
        requests enter by; default the most frequent root operation.
    max_categories : int, default=50
        Entry-span attributes with more distinct values are left out (identifiers).

    Returns
    -------
    TraceTable

    Raises
    ------
    EmptyDataError
        When there are no spans, no root span, or no request of the endpoint.
    ParameterError
        When ``endpoint`` matches no operation or is ambiguous.

    Examples
    --------
    >>> from tracesleuth.io import read_spans
    >>> from tracesleuth.model import build_trace_table
    >>> table = build_trace_table(read_spans("traces/"))        # doctest: +SKIP
    >>> table.frame.select("latency_ns", table.continuous_columns[0])  # doctest: +SKIP
    """
    spans = _narrow(spans)
    n = spans.num_rows if isinstance(spans, pa.Table) else spans.height
    if n == 0:
        raise EmptyDataError("no spans to build a trace table from")
    keys = pl.from_arrow(spans.select([S.SERVICE, S.OPERATION, S.PARENT_SPAN_ID])) \
        if isinstance(spans, pa.Table) else spans.select(S.SERVICE, S.OPERATION, S.PARENT_SPAN_ID)
    endpoints = root_endpoints(keys)
    key = resolve_endpoint(endpoint, keys, endpoints)
    all_ops = keys.select(operation_keys(keys).unique().sort()).to_series().to_list()
    del keys
    report, requests, features, offset = AssemblyReport(), [], [], 0
    for part in partitions_by_trace(spans, -(-n // PARTITION_SPANS)):
        assembled, rep = assemble(part)
        report = report.merge(rep)
        req, feat = request_features(assembled, key, attributes=attributes_of(part), operations=all_ops,
                                     max_categories=max_categories)
        requests.append(req.with_columns(pl.col("_req") + offset))
        features.append(feat.with_columns(pl.col("_req") + offset))
        offset += assembled.height
        del assembled, part
    requests = drop_uninformative_attributes(pl.concat(requests, how="diagonal_relaxed"), max_categories)
    if requests.height == 0:
        raise EmptyDataError(f"no request of endpoint {key!r}")
    features = pl.concat(features)
    used = features[OPERATION_KEY].unique().cast(pl.String).sort().to_list()
    frame, ops = pivot_features(requests, features, used)
    return TraceTable(frame=frame, endpoint=key, operations=ops, assembly=report, endpoints=endpoints)
